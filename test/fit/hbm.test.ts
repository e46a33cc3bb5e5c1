import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import type { AttentionDecodeRow, GemmRow } from '../../src/measurements/schema.ts';
import { decodeKvBytes } from '../../src/fit/attention.ts';
import { fitHbm, memoryBoundReads } from '../../src/fit/hbm.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import type { FitContext } from '../../src/fit/types.ts';
import { hbmSection } from '../../src/report/fit-hbm.ts';

// Synthetic recovery of hbm_derate (issue 3 "HBM derate"; docs/fitting.md): rows generated from
// t = t0 + bytes / (datasheet · derate) with a known derate and per-call cost, ±20% uniform noise on
// 5 repeats per configuration (the fitter reduces repeats by their median).
const chip = loadChip('h200'); // 4.8 TB/s = 4.8e6 B/µs, L2 50 MiB → qualifying reads ≥ 100 MiB
const BW = chip.hbm_bytes_per_us;
const L2_BYTES = (chip.l2_mib ?? 50) * 1024 * 1024;
const DERATE = 0.85;
const GEMM_T0_US = 15;
const DECODE_T0_US = 25;
const REPEATS = 5;
/**
 * Recovery tolerance (relative). Over 12 noise seeds the fitted derate erred by at most 3.0% (0.85 →
 * 0.8317…0.8754; 0.6 → 0.588…0.6174) and every ci95 contained the truth; the raw ratio
 * bytes/latency/datasheet (what a fitter ignoring t0 would report) sits at ≈ 0.74, 13% low.
 */
const TOL = 0.035;
const GEMM_M = [1, 2, 4, 8, 12, 16];
const GEMM_N = [7168, 8192, 12288, 16384, 28672, 36864];
const GEMM_K = [7168, 8192, 16384, 24576, 36864];

const ctx = (resamples = 200): FitContext => ({
  chip,
  inputs: [
    { file: 'measurements/h200/gemm.t.csv.gz', sha256: 'a'.repeat(64), lane: 't' },
    { file: 'measurements/h200/attention_decode.t.csv.gz', sha256: 'b'.repeat(64), lane: 't' },
  ],
  bootstrap: { resamples, seed: 7 },
  prior: new Map(),
});

/** Multiplicative noise factors, uniform on [0.8, 1.2] (symmetric ±20%). */
const noise = (seed: number) => {
  const rand = seededRandom(seed);
  return () => 0.8 + 0.4 * rand();
};

/**
 * bf16 GEMM weight reads at m ≤ 16 over (n, k) with weights 2·n·k from 112 MiB to 2.5 GiB (all ≥ 2×L2),
 * plus decoys the fitter must ignore: an L2-resident small weight at 3× the rate, m = 64 and fp8 rows at 2×.
 */
function gemmRows(seed: number, derate = DERATE): GemmRow[] {
  const f = noise(seed);
  const rows: GemmRow[] = [];
  const base = { chip: 'h200', lane: 't', kernel_source: 'cublas' };
  const t = (bytes: number, rate: number) => GEMM_T0_US + bytes / rate;
  for (const m of GEMM_M)
    for (const n of GEMM_N)
      for (const k of GEMM_K) {
        const bytes = n * k * 2;
        if (bytes < 2 * L2_BYTES) continue;
        for (let i = 0; i < REPEATS; i++)
          rows.push({ ...base, m, n, k, dtype: 'bf16', latency_us: t(bytes, BW * derate) * f() });
      }
  for (let i = 0; i < REPEATS; i++) {
    rows.push({
      ...base,
      m: 4,
      n: 4096,
      k: 4096,
      dtype: 'bf16',
      latency_us: t(4096 * 4096 * 2, 3 * BW * DERATE) * f(),
    }); // 32 MiB < 2×L2
    rows.push({
      ...base,
      m: 64,
      n: 16384,
      k: 16384,
      dtype: 'bf16',
      latency_us: t(16384 * 16384 * 2, 2 * BW * DERATE) * f(),
    }); // m > 16
    rows.push({ ...base, m: 4, n: 16384, k: 16384, dtype: 'fp8', latency_us: t(16384 * 16384, 2 * BW * DERATE) * f() }); // not bf16
  }
  return rows;
}

/** Full-attention decode KV reads ≥ 2×L2 at the same derate with their own per-call cost, plus SWA decoys. */
function decodeRows(seed: number): AttentionDecodeRow[] {
  const f = noise(seed);
  const rows: AttentionDecodeRow[] = [];
  const base = { chip: 'h200', lane: 't', kernel_source: 'fa3', n_q: 32, kv_dtype: 'bf16' };
  for (const [n_kv, head_dim] of [
    [8, 128],
    [4, 128],
    [2, 64],
  ] as const)
    for (const batch of [16, 64, 256])
      for (const context_tokens of [4096, 16384, 65536]) {
        const r = { ...base, batch, context_tokens, n_kv, head_dim, window: 0, latency_us: 0 };
        const bytes = decodeKvBytes(r);
        if (bytes < 2 * L2_BYTES) continue;
        for (let i = 0; i < REPEATS; i++) rows.push({ ...r, latency_us: (DECODE_T0_US + bytes / (BW * DERATE)) * f() });
        // A sliding-window row of the same shape, 10× faster: excluded (window ≠ 0).
        rows.push({ ...r, window: 1024, latency_us: (DECODE_T0_US + bytes / (BW * DERATE)) / 10 });
      }
  return rows;
}

const derateOf = (fit: ReturnType<typeof fitHbm>) => fit.coefficients.find((c) => c.name === 'hbm_derate')?.entry;

describe('memoryBoundReads', () => {
  it('keeps bf16 m ≤ 16 weight reads and full decode KV reads ≥ 2×L2, one per configuration (median of repeats)', () => {
    const g = gemmRows(1);
    const d = decodeRows(2);
    const reads = memoryBoundReads(g, d, chip.l2_mib);
    const gemm = reads.filter((r) => r.source === 'gemm');
    const kv = reads.filter((r) => r.source === 'attention_decode');
    // 6 m × the (n, k) pairs with 2nk ≥ 100 MiB = 104,857,600 B: 7168·7168·2 = 102,760,448 B does not
    // qualify, 7168·8192·2 = 117,440,512 B does, so 30 − 1 = 29 pairs.
    expect(gemm).toHaveLength(GEMM_M.length * 29);
    expect(Math.min(...gemm.map((r) => r.bytes))).toBe(7168 * 8192 * 2);
    expect(kv.length).toBe(
      new Set(d.filter((r) => r.window === 0).map((r) => `${r.batch}|${r.context_tokens}|${r.n_kv}|${r.head_dim}`))
        .size,
    );
    expect(kv.length).toBeGreaterThanOrEqual(10);
    // Repeats reduced by the median: the median of 5 draws of the same configuration.
    const same = g
      .filter((r) => r.m === 1 && r.n === 36864 && r.k === 36864 && r.dtype === 'bf16')
      .map((r) => r.latency_us)
      .sort((a, b) => a - b);
    expect(same).toHaveLength(REPEATS);
    expect(gemm.find((r) => r.bytes === 36864 * 36864 * 2)!.latency_us).toBe(same[2]);
  });
});

describe('fitHbm recovers a known derate', () => {
  it('GEMM weight reads: derate 0.85 within 3.5%, ci95 contains 0.85, holdout on the decode reads', () => {
    const fit = fitHbm(gemmRows(11), decodeRows(12), ctx());
    expect(fit.refusals).toEqual([]);
    const e = derateOf(fit)!;
    expect(e.units).toBe('dimensionless');
    expect(Math.abs(e.value / DERATE - 1)).toBeLessThan(TOL);
    expect(e.ci95![0]).toBeLessThanOrEqual(DERATE);
    expect(e.ci95![1]).toBeGreaterThanOrEqual(DERATE);
    expect(e.ci95![0]).toBeLessThanOrEqual(e.value);
    expect(e.ci95![1]).toBeGreaterThanOrEqual(e.value);
    expect(e.ci95![1] - e.ci95![0]).toBeLessThan(0.1); // informative, not (0, 1]
    expect(e.evidence!.inputs![0]!.rows_used).toBe(GEMM_M.length * 29);
    // Train error ≈ the median-of-5 residual noise, well under the ±20% of single repeats.
    expect(e.evidence!.train_error!.geo).toBeLessThan(1.08);
    // The decode KV reads share the derate; with their own t0 refitted they are predicted as well.
    expect(e.evidence!.holdout_error!.split).toMatch(/decode-attention KV reads/);
    expect(e.evidence!.holdout_error!.geo).toBeLessThan(1.1);
    // The per-call cost is fitted near its true 15 µs, not folded into the rate.
    const t0 = Number(/t0 ([\d.]+) us/.exec(e.evidence!.notes![0]!)![1]);
    expect(Math.abs(t0 - GEMM_T0_US)).toBeLessThan(3);
    expect(hbmSection(fit, chip).figures.map((f) => f.name)).toEqual(['hbm.svg', 'hbm_residuals.svg']);
  });

  it('is not fooled by the per-call cost: fitting bytes/latency alone would understate the derate', () => {
    const fit = fitHbm(gemmRows(21), decodeRows(22), ctx(50));
    const e = derateOf(fit)!;
    const raw = memoryBoundReads(gemmRows(21), [], chip.l2_mib).map((r) => r.bytes / r.latency_us / BW);
    const rawMedian = [...raw].sort((a, b) => a - b)[Math.floor(raw.length / 2)]!;
    expect(rawMedian).toBeLessThan(DERATE * (1 - TOL)); // t0 = 15 µs on 40–800 µs reads: outside the band
    expect(Math.abs(e.value / DERATE - 1)).toBeLessThan(TOL);
  });

  it('falls back to the decode KV reads when fewer than 3 GEMM reads qualify, and recovers the same derate', () => {
    const fit = fitHbm([], decodeRows(31), ctx());
    const e = derateOf(fit)!;
    expect(Math.abs(e.value / DERATE - 1)).toBeLessThan(TOL);
    expect(e.ci95![0]).toBeLessThanOrEqual(DERATE);
    expect(e.ci95![1]).toBeGreaterThanOrEqual(DERATE);
    expect(e.evidence!.holdout_error).toBeUndefined();
    expect(e.evidence!.inputs![0]!.filter).toBe('full decode attention with KV ≥ 2×L2');
  });

  it('a different derate is recovered as that derate (0.6), not as a fixed answer', () => {
    const e = derateOf(fitHbm(gemmRows(41, 0.6), [], ctx(50)))!;
    expect(Math.abs(e.value / 0.6 - 1)).toBeLessThan(TOL);
  });
});

describe('fitHbm refuses to measure without streaming reads', () => {
  it('no row above 2×L2: no hbm_derate entry and a warning naming the cause', () => {
    const small: GemmRow[] = [];
    for (const m of [1, 4, 16])
      for (const n of [1024, 2048, 4096])
        small.push({
          chip: 'h200',
          lane: 't',
          kernel_source: 'cublas',
          m,
          n,
          k: 4096,
          dtype: 'bf16',
          latency_us: 10 + (n * 4096 * 2) / (BW * DERATE),
        });
    const fit = fitHbm(
      small,
      decodeRows(51).filter((r) => decodeKvBytes(r) < 2 * L2_BYTES),
      ctx(),
    );
    expect(fit.coefficients).toEqual([]);
    expect(fit.warnings.join('\n')).toMatch(/only 0 memory-bound reads beyond 2×L2; hbm_derate not measured/);
  });
});
