/**
 * The units check (src/measurements/units.ts) against every shipped table of every family: real data
 * always passes; the same table read ×1000 too slow (µs labelled ms) or ×1000 too fast fails naming
 * file, row and column; a ×10 slip on one GEMM dtype, a ×2 collective size and prefill ÷1000 fail with
 * the likely factor named.
 */
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { checkUnitsSlip } from '../../src/measurements/aiconfigurator.ts';
import { listMeasurementFiles, readMeasurements } from '../../src/measurements/store.ts';
import { RowColumns } from '../../src/measurements/row-columns.ts';
import { checkUnits, collectiveBand, likelyFactor } from '../../src/measurements/units.ts';
import type { Family } from '../../src/core/schemas/measurements.ts';
import type { CollectiveRow, FamilyRow, GemmRow } from '../../src/measurements/schema.ts';
import { MEASUREMENTS } from './helpers.ts';

const CHIPS = ['a100', 'b200', 'h100', 'h200', 'l40s'];
const stored = CHIPS.flatMap((chip) =>
  listMeasurementFiles(path.join(MEASUREMENTS, chip)).map((f) => ({ chip, ...f })),
);

/**
 * Tables that more than one test below reads (every collective and MoE table: its own test and the ×10
 * test; h200's vLLM GEMM and NCCL tables and l40s's vLLM collectives: the slips group), kept after their
 * first read. Decoding and schema-checking a table is most of this file's cost; the other tables are
 * read once and dropped (holding all 55 would keep several hundred MB in the shared test worker).
 * Only `withLatencies` writes to a row it reads, and it puts every latency back before it returns.
 */
const readTwice = (dir: string, family: Family, lane?: string) =>
  family === 'collective' ||
  family === 'moe' ||
  (dir === path.join(MEASUREMENTS, 'h200') && family === 'gemm' && lane === 'vllm-0.24.0');
const kept = new Map<string, unknown[]>();
afterAll(() => kept.clear());
function read<F extends Family>(dir: string, family: F, lane?: string): FamilyRow[F][] {
  const key = `${dir}|${family}|${lane ?? '*'}`;
  const hit = kept.get(key);
  if (hit) return hit as FamilyRow[F][];
  const rows = readMeasurements(dir, family, lane === undefined ? {} : { lane });
  if (readTwice(dir, family, lane)) kept.set(key, rows);
  return rows;
}
const rowsOf = (f: (typeof stored)[number]) =>
  read(path.dirname(f.file), f.family, f.lane) as unknown as Array<{ latency_us: number }>;

/**
 * Run `check` with every row's `latency_us` replaced by `scale` of its stored value, then put the stored
 * values back (also when `check` throws). The rows are scaled in place to the same numbers a mapped copy
 * (`{ ...r, latency_us: scale(r.latency_us) }`) holds, so `check` judges the same table: copying every
 * row of the 55 tables for each slip was about a third of this file's CPU, most of it in GC.
 */
function withLatencies(rows: Array<{ latency_us: number }>, scale: (us: number) => number, check: () => void): void {
  const stored = Float64Array.from(rows, (r) => r.latency_us);
  try {
    for (let i = 0; i < rows.length; i++) rows[i]!.latency_us = scale(stored[i]!);
    check();
  } finally {
    for (let i = 0; i < rows.length; i++) rows[i]!.latency_us = stored[i]!;
  }
}

describe('units check on the shipped tables, every family', () => {
  it('covers gemm, decode, prefill, collective, moe and recurrent tables of every chip, and the sparse, MLA and DeepEP families where curated', () => {
    const fams = new Set(stored.map((f) => f.family));
    expect([...fams].sort()).toEqual([
      'attention_decode',
      'attention_prefill',
      'collective',
      'expert_alltoall',
      'gemm',
      'mla',
      'moe',
      'recurrent',
      'sparse',
    ]);
    // 31 base tables + the sparse family on h200, h100 and b200 (gb200's is outside these five chips) + 13
    // recurrent (GDN, KDA, Mamba2 rc20 on h200/h100/b200/l40s; b200 Mamba2 rc15) + the MLA family on a100, b200,
    // h100, h200, l40s + the DeepEP expert_alltoall family on b200, h100, h200
    expect(stored.length).toBe(55);
  });

  it.each(stored.map((f) => [`${f.chip} ${path.basename(f.file)}`, f] as const))(
    '%s: passes as stored, fails ×1000 slower and ×1000 faster',
    (_n, f) => {
      const chip = loadChip(f.chip);
      const rows = rowsOf(f);
      expect(() => checkUnitsSlip(f.family, rows, chip, f.file)).not.toThrow();
      const first = rows[0]!.latency_us;
      withLatencies(
        rows,
        (us) => us * 1000,
        () =>
          expect(() => checkUnitsSlip(f.family, rows, chip, f.file)).toThrow(
            /row \d+ column "latency": .*(fastest|floor).*likely ×1000 too slow.*check units \(ms vs µs vs s\?\)/,
          ),
      );
      withLatencies(
        rows,
        (us) => us / 1000,
        () => expect(() => checkUnitsSlip(f.family, rows, chip, f.file)).toThrow(/likely ×1000 too fast.*check units/),
      );
      expect(rows[0]!.latency_us, 'the stored latencies are back').toBe(first);
    },
  );
});

describe('slips the issue lists', () => {
  const h200 = loadChip('h200');
  const dir = path.join(MEASUREMENTS, 'h200');
  it('a ×10 slip on the bf16 rows of a GEMM table: refused at the bf16 group, fp8 untouched', () => {
    const rows = read(dir, 'gemm', 'vllm-0.24.0');
    const slipped = rows.map((r: GemmRow) => (r.dtype === 'bf16' ? { ...r, latency_us: r.latency_us * 10 } : r));
    // best bf16 GEMM 95.0 % of 989.5 TFLOP/s → 9.5 %, below the 20 % floor of the band
    expect(() => checkUnits('gemm', slipped, h200, 'g.csv')).toThrow(
      /g\.csv row \d+ column "latency_us": gemm dtype bf16: .*9\.5 % of 990 TFLOP\/s.*likely ×10 too slow/,
    );
    expect(() =>
      checkUnits(
        'gemm',
        rows.filter((r) => r.dtype !== 'bf16'),
        h200,
        'g.csv',
      ),
    ).not.toThrow();
  });
  it('one row ×1000 (the per-group checks judge only the fastest rows): refused at that row, the table as stored passes', () => {
    const rows = read(dir, 'gemm', 'vllm-0.24.0');
    // The row with the most arithmetic: 2·m·n·k / 989.5 TFLOP/s of work, so ×1000 puts it far past
    // SLOW_ROW_FACTOR × (work + 10 ms) while its neighbours stay untouched.
    let at = 0;
    for (let i = 1; i < rows.length; i++)
      if (rows[i]!.dtype === 'bf16' && rows[i]!.m * rows[i]!.n * rows[i]!.k > rows[at]!.m * rows[at]!.n * rows[at]!.k)
        at = i;
    expect(rows[at]!.dtype).toBe('bf16');
    const slipped = rows.map((r, i) => (i === at ? { ...r, latency_us: r.latency_us * 1000 } : r));
    expect(() => checkUnits('gemm', slipped, h200, 'g.csv')).toThrow(
      new RegExp(`g\\.csv row ${at + 1} column "latency_us": gemm dtype bf16: this row takes .*check units`),
    );
    expect(() => checkUnits('gemm', rows, h200, 'g.csv')).not.toThrow();
  });

  it('GEMM rows as typed columns (the streaming import) are judged from the columns: the same verdicts and messages', () => {
    const rows = read(dir, 'gemm', 'vllm-0.24.0');
    const columns = (list: readonly GemmRow[]) => {
      const c = new RowColumns<GemmRow>();
      for (const r of list) c.push(r);
      return c;
    };
    const message = (list: Iterable<GemmRow> & { length: number; at(i: number): GemmRow | undefined }) => {
      try {
        checkUnits('gemm', list, h200, 'g.csv');
        return 'passed';
      } catch (e) {
        return (e as Error).message;
      }
    };
    const bf16x10 = rows.map((r: GemmRow) => (r.dtype === 'bf16' ? { ...r, latency_us: r.latency_us * 10 } : r));
    const fast = rows.map((r: GemmRow) => ({ ...r, latency_us: r.latency_us / 1000 }));
    const one = rows.map((r, i) => (i === 7 ? { ...r, latency_us: r.latency_us * 1e6 } : r));
    for (const list of [rows, bf16x10, fast, one]) expect(message(columns(list))).toBe(message(list));
    expect(columns(rows).kindOf('latency_us')).toBe('num'); // read from the float64 column
    expect(message(columns(rows))).toBe('passed');
    expect(message(columns(fast))).toMatch(/g\.csv row \d+ column "latency_us": gemm dtype .*likely ×1000 too fast/);
  });

  it('collective sizes ×2 (elements read as bytes) and ×1000, latency in µs labelled ms', () => {
    const rows = read(dir, 'collective', 'nccl-2.29.2');
    const x2 = rows.map((r: CollectiveRow) => ({ ...r, message_bytes: r.message_bytes * 2 }));
    expect(() => checkUnits('collective', x2, h200, 'c.csv')).toThrow(
      /collective .* ranks nccl: the fastest row implies .* GB\/s.*above the physical bound 125\.0 %.*likely ×2 too fast: a size in elements/,
    );
    const x1000 = rows.map((r: CollectiveRow) => ({ ...r, message_bytes: r.message_bytes * 1000 }));
    expect(() => checkUnits('collective', x1000, h200, 'c.csv')).toThrow(/likely ×1000 too fast/);
  });
  it('latency ×10 on every shipped collective and MoE table: refused', () => {
    for (const f of stored.filter((x) => x.family === 'collective' || x.family === 'moe')) {
      const chip = loadChip(f.chip);
      const rows = rowsOf(f);
      const run = () => checkUnitsSlip(f.family, rows, chip, f.file);
      // l40s (PCIe, band floor 2 %) too: its 4- and 8-rank groups reach 3.7–15 %, its 2-rank and custom all-reduce groups < 20 %.
      withLatencies(
        rows,
        (us) => us * 10,
        () =>
          expect(run, `${f.chip} ${path.basename(f.file)}`).toThrow(
            /below the plausible band \[(12\.5|10\.0|2\.0) %.*likely ×/,
          ),
      );
    }
  });
  it('collective band by link class: h200 NVLink [12.5 %, 125 %], l40s PCIe [2 %, 100 %]', () => {
    expect(collectiveBand(h200)).toMatchObject({ lo: 0.125, hi: 1.25 });
    const l40s = loadChip('l40s');
    expect(collectiveBand(l40s)).toMatchObject({ lo: 0.02, hi: 1.0 });
    // 2 ranks all-reduce, 64 MiB in 2,000 µs: bus 2·(1/2)·67.1 MB / 2,000 µs = 33.6 GB/s = 7.5 % of h200's 450 GB/s
    const row = {
      chip: 'h200',
      lane: 'x',
      op: 'all_reduce',
      dtype: 'bf16',
      ranks: 2,
      backend: 'nccl',
      message_bytes: 2 ** 26,
      latency_us: 2000,
    };
    expect(() => checkUnits('collective', [row], h200, 'c.csv')).toThrow(
      /7\.5 % of 450 GB\/s.*below the plausible band \[12\.5 %/,
    );
    // The same row on l40s (32 GB/s over PCIe) is 33.6 / 32 = 104.9 % of the link: above PCIe's 100 % ceiling.
    expect(() => checkUnits('collective', [{ ...row, chip: 'l40s' }], l40s, 'c.csv')).toThrow(
      /104\.9 % of 32\.0 GB\/s.*above the physical bound 100\.0 %/,
    );
  });
  it('l40s custom all-reduce sizes ×2 (bf16 elements read as bytes): refused at its 2-rank groups (60 % → 120 % of PCIe)', () => {
    const l40s = loadChip('l40s');
    const rows = read(path.join(MEASUREMENTS, 'l40s'), 'collective', 'vllm-0.14.0');
    expect(() => checkUnits('collective', rows, l40s, 'c.csv')).not.toThrow();
    const x2 = rows.map((r: CollectiveRow) => ({ ...r, message_bytes: r.message_bytes * 2 }));
    expect(() => checkUnits('collective', x2, l40s, 'c.csv')).toThrow(
      /all_reduce bf16 2 ranks custom_(eager|graph): .*above the physical bound 100\.0 %.*likely ×2 too fast/,
    );
  });
  it('prefill attention ÷1000 and ×1000', () => {
    const rows = read(dir, 'attention_prefill');
    expect(() =>
      checkUnits(
        'attention_prefill',
        rows.map((r) => ({ ...r, latency_us: r.latency_us / 1000 })),
        h200,
        'p.csv',
      ),
    ).toThrow(/attention_prefill dtype bf16: the fastest row implies .* TFLOP\/s.*above the physical bound/);
    expect(() =>
      checkUnits(
        'attention_prefill',
        rows.map((r) => ({ ...r, latency_us: r.latency_us * 1000 })),
        h200,
        'p.csv',
      ),
    ).toThrow(/below the plausible band \[15\.0 %, 120\.0 %\]/);
  });
  it('floors: a host table whose fastest launch is 0.004 µs (seconds read as ms ÷1000) is refused', () => {
    const host = [2, 4, 8].map((k) => ({
      chip: 'h200',
      lane: 'x',
      kernel_source: '',
      what: 'eager_launch',
      kernels: k,
      latency_us: 0.004 * k,
    }));
    expect(() => checkUnits('host', host, h200, 'h.csv')).toThrow(
      /h\.csv row 1 column "latency_us": host what eager_launch: the fastest call takes 0\.008 µs, outside the plausible floor band \[0\.5 µs, 10 ms\]/,
    );
    expect(() =>
      checkUnits(
        'host',
        host.map((r) => ({ ...r, latency_us: r.latency_us * 1000 })),
        h200,
        'h.csv',
      ),
    ).not.toThrow();
  });
  it('likelyFactor names the nearest slip (hand ratios)', () => {
    expect(likelyFactor(0.00105)).toMatch(/^×1000 too slow/);
    expect(likelyFactor(2.1)).toMatch(/^×2 too fast/);
    expect(likelyFactor(2.1, false)).toBe('×2.1 too fast');
    expect(likelyFactor(0.119, false)).toMatch(/^×10 too slow/);
    expect(likelyFactor(0.119)).toMatch(/^×8/);
    expect(likelyFactor(40)).toBe('×40 too fast');
  });
});
