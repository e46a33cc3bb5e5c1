/**
 * Bad-input corpus, units slips (issue 12 item 2): every family's imported table is refused when its
 * best rate or floor leaves the chip's datasheet band, naming file, row, column and the likely factor.
 * Inputs are slices of the shared AIConfigurator h200 tables, imported with --out into the case's temp
 * folder (nothing in the repository may change). On main all but the GEMM/decode ×1000 cases imported.
 */
import path from 'node:path';
import { describe } from 'vitest';
import { aicPath, csvSlice, getCell, setCell, writeTable } from '../measurements/helpers.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

type Slice = { header: string; lines: string[] };
const lane = (t: string) => (t === 'nccl_perf' ? 'nccl-2.29.2' : 'vllm-0.24.0');
const slice = (t: string, keep: (l: string, i: number) => boolean): Slice =>
  csvSlice(aicPath('h200_sxm', t, lane(t)), keep);
const every = (n: number) => (_: string, i: number) => i % n === 0;
const gemm = slice('gemm_perf', (_, i) => i < 20);
const decode = slice('generation_attention_perf', every(40));
const prefill = slice('context_attention_perf', every(40));
const nccl = slice('nccl_perf', () => true);
const custom = slice('custom_allreduce_perf', () => true);
const moe = slice('moe_perf', every(20));

/** A column of every line (or of those `where` selects) multiplied by `f`. */
function scaled(s: Slice, col: string, f: number, where: (l: string) => boolean = () => true): Slice {
  return {
    header: s.header,
    lines: s.lines.map((l) =>
      where(l) ? setCell(s.header, l, col, String(Number(getCell(s.header, l, col)) * f)) : l,
    ),
  };
}

/** An import case: the table written as `<tmp>/<table>.csv`, imported for h200 into `<tmp>/out`. */
function imp(name: string, table: string, s: Slice, message: string | RegExp): BadInputCase {
  return {
    name,
    setup: (tmp) => void writeTable(tmp, table, s.header, s.lines),
    args: (tmp) => [
      'import',
      'aiconfigurator',
      path.join(tmp, `${table}.csv`),
      '--chip',
      'h200',
      '--out',
      path.join(tmp, 'out'),
    ],
    code: 1,
    message,
  };
}

const bf16 = (l: string) =>
  getCell(gemm.header, l, 'gemm_dtype') === 'bfloat16' || getCell(gemm.header, l, 'gemm_dtype') === 'bf16';

// The importer's fused-MoE HBM check (src/measurements/moe-units.ts) runs before the per-family units check,
// so a MoE slip is refused with either message.
const CASES: BadInputCase[] = [
  imp(
    'GEMM ×10 on the bf16 rows only (gave hbm_derate 0.085 on main)',
    'gemm_perf',
    scaled(gemm, 'latency', 10, bf16),
    /gemm dtype bf16: .*below the plausible band \[20\.0 %, 120\.0 %\].*likely ×10 too slow/,
  ),
  imp(
    'GEMM latency in µs labelled ms (×1000)',
    'gemm_perf',
    scaled(gemm, 'latency', 1000),
    /column "latency": gemm dtype .*likely ×1000 too slow/,
  ),
  imp(
    'GEMM latency in s labelled ms (÷1000)',
    'gemm_perf',
    scaled(gemm, 'latency', 0.001),
    /above the physical bound 120\.0 %.*likely ×1000 too fast/,
  ),
  imp(
    'decode attention ÷1000',
    'generation_attention_perf',
    scaled(decode, 'latency', 0.001),
    /attention_decode kv_dtype .*above the physical bound 105\.0 %/,
  ),
  imp(
    'decode attention ×1000',
    'generation_attention_perf',
    scaled(decode, 'latency', 1000),
    /attention_decode kv_dtype .*below the plausible band \[25\.0 %, 105\.0 %\].*×1000 too slow/,
  ),
  imp(
    'decode attention ×10',
    'generation_attention_perf',
    scaled(decode, 'latency', 10),
    /attention_decode .*likely ×10 too slow/,
  ),
  imp(
    'prefill attention ÷1000 (wrote work_scale 437 on main)',
    'context_attention_perf',
    scaled(prefill, 'latency', 0.001),
    /attention_prefill dtype bf16: the fastest row implies .* TFLOP\/s.*above the physical bound 120\.0 %/,
  ),
  imp(
    'prefill attention ×1000',
    'context_attention_perf',
    scaled(prefill, 'latency', 1000),
    /attention_prefill dtype bf16: .*below the plausible band \[15\.0 %, 120\.0 %\].*×1000 too slow/,
  ),
  imp(
    'NCCL message sizes ×2 (bytes given as elements)',
    'nccl_perf',
    scaled(nccl, 'message_size', 2),
    /collective .* ranks nccl: the fastest row implies .* GB\/s.*above the physical bound 125\.0 %.*likely ×2 too fast/,
  ),
  imp(
    'NCCL message sizes ×1000',
    'nccl_perf',
    scaled(nccl, 'message_size', 1000),
    /collective .*above the physical bound.*×1000 too fast/,
  ),
  imp(
    'NCCL latency in µs labelled ms (wrote 10 ms floors on main)',
    'nccl_perf',
    scaled(nccl, 'latency', 1000),
    /collective .*below the plausible band \[12\.5 %, 125\.0 %\].*×1000 too slow/,
  ),
  imp('NCCL latency in s labelled ms', 'nccl_perf', scaled(nccl, 'latency', 0.001), /collective .*×1000 too fast/),
  imp(
    'custom all-reduce sizes ×2',
    'custom_allreduce_perf',
    scaled(custom, 'message_size', 2),
    /collective all_reduce bf16 .*above the physical bound 125\.0 %/,
  ),
  imp(
    'MoE latency ÷1000',
    'moe_perf',
    scaled(moe, 'latency', 0.001),
    /moe dtype .*above the physical bound 120\.0 %|MoE layer reading at least .*× the h200 datasheet HBM.*check units/,
  ),
  imp(
    'MoE latency ×1000',
    'moe_perf',
    scaled(moe, 'latency', 1000),
    /moe dtype .*(below the plausible band|floor band).*check units|the fastest of \d+ MoE layers .*below 5 %\); check units/,
  ),
];

describe('bad inputs: units slips on import (every family)', () => runCorpus(CASES));
