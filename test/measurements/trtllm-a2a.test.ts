/**
 * TRT-LLM's NVLinkTwoSided all-to-all on gb200 (issue 13 item 3, the rack): the mapping worked by hand, the
 * units (the legacy rows are ms; a µs schema is refused naming the column) and the shipped curves.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { InputError } from '../../src/core/errors.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import type { RawTable } from '../../src/measurements/table.ts';
import { mapTrtllmA2aTable } from '../../src/measurements/trtllm-a2a-import.ts';

const HEADER =
  'framework,version,device,op_name,kernel_source,moe_dtype,num_tokens,hidden_size,topk,num_experts,moe_ep_size,distribution,latency'.split(
    ',',
  );
const row = (op: string, kernel: string, dtype: string, tokens: number, ep: number, ms: number) => [
  'TRTLLM',
  '1.2.0rc6',
  'NVIDIA GB200',
  op,
  kernel,
  dtype,
  tokens,
  7168,
  8,
  256,
  ep,
  'balanced',
  ms,
];
const table = (rows: unknown[][], header = HEADER): RawTable => ({
  file: 'trtllm_alltoall_perf.parquet',
  header,
  rows: rows as RawTable['rows'],
});

describe('mapTrtllmA2aTable: bytes per rank and µs, by hand', () => {
  it('keeps NVLinkTwoSided dispatch/combine, drops prepare, the FP4 combine and the one-sided kernel', () => {
    const out = mapTrtllmA2aTable(
      table([
        row('alltoall_dispatch', 'NVLinkTwoSided', 'fp8', 16, 8, 0.05),
        row('alltoall_combine', 'NVLinkTwoSided', 'fp8', 16, 8, 0.06),
        row('alltoall_dispatch', 'NVLinkTwoSided', 'nvfp4', 16, 8, 0.04),
        row('alltoall_dispatch', 'NVLinkTwoSided', 'bfloat16', 16, 2, 0.02),
        row('alltoall_prepare', 'NVLinkTwoSided', 'fp8', 16, 8, 0.01),
        row('alltoall_combine_low_precision', 'NVLinkTwoSided', 'nvfp4', 16, 8, 0.03),
        row('alltoall_dispatch', 'NVLinkOneSided', 'nvfp4', 16, 8, 0.03),
      ]),
      'gb200',
    );
    // 16 tokens, top-8 over 8 ranks: 16 · (min(8, 8) − 1) = 112 copies of 7168 elements.
    //   fp8 dispatch 112 · 7168 · 1 = 802,816 B;  combine (BF16) 112 · 7168 · 2 = 1,605,632 B
    //   nvfp4 dispatch 112 · 7168 · 0.5625 = 451,584 B;  ep 2 bf16 dispatch 16 · 1 · 7168 · 2 = 229,376 B
    expect(out.map((r) => [r.phase, r.kernel_source, r.ranks, r.message_bytes])).toEqual([
      ['dispatch', 'NVLinkTwoSided_fp8', 8, 802_816],
      ['combine', 'NVLinkTwoSided_fp8', 8, 1_605_632],
      ['dispatch', 'NVLinkTwoSided_nvfp4', 8, 451_584],
      ['dispatch', 'NVLinkTwoSided_bf16', 2, 229_376],
    ]);
    expect(out.map((r) => r.latency_us)).toEqual([50, 60, 40, 20]); // ms × 1000
    expect(out.every((r) => r.mode === 'mnnvl' && r.lane === 'trtllm-1.2.0rc6' && r.nodes === 1)).toBe(true);
  });

  it('refuses a µs-schema table naming the missing ms column, and an unknown payload naming row and column', () => {
    const us = HEADER.map((h) => (h === 'latency' ? 'latency_us' : h));
    const e1 = (() => {
      try {
        mapTrtllmA2aTable(table([row('alltoall_dispatch', 'NVLinkTwoSided', 'fp8', 1, 8, 0.01)], us), 'gb200');
      } catch (e) {
        return e;
      }
    })() as InputError;
    expect(e1).toBeInstanceOf(InputError);
    expect(e1.message).toMatch(/trtllm_alltoall_perf\.parquet/);
    expect(e1.message).toMatch(/latency/);
    expect(() =>
      mapTrtllmA2aTable(table([row('alltoall_dispatch', 'NVLinkTwoSided', 'int8', 1, 8, 0.01)]), 'gb200'),
    ).toThrow(/row 1.*moe_dtype|moe_dtype.*row 1/);
  });
});

describe('shipped gb200 MNNVL curves', () => {
  const sets = loadRegistryFile(path.join(REPO_ROOT, 'registry', 'gb200.yaml'));
  const entries = sets.flatMap((s) => s.coefficients).filter((c) => /^expert_alltoall_floor_mnnvl_/.test(c.name));
  it('one floor per phase and width 2–64, each with a holdout geo ≤ 1.4', () => {
    const widths = (phase: string) =>
      entries
        .filter((c) => c.name.includes(`_${phase}_`))
        .map((c) => Number(/_(\d+)rank_/.exec(c.name)![1]))
        .sort((a, b) => a - b);
    expect(widths('dispatch')).toEqual([2, 4, 8, 16, 32, 64]);
    expect(widths('combine')).toEqual([2, 4, 8, 16, 32, 64]);
    for (const c of entries) expect(c.entry.evidence!.holdout_error!.geo, c.name).toBeLessThanOrEqual(1.4);
  });
});
