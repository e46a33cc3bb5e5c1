import path from 'node:path';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { REPO_ROOT, loadChip } from '../../src/core/catalog/chip.ts';
import { readMeasurements } from '../../src/measurements/store.ts';
import { collectiveTime } from '../../src/core/laws/collective.ts';
import {
  bootstrapTransitionRate,
  collectiveObjective,
  fitCurve,
  fitTransitionRate,
  floorWidthLine,
  leaveOneWidthOut,
  reduceRepeats,
  type CurvePoint,
} from '../../src/fit/collective-curve.ts';
import { ResampleRateSearch } from '../../src/fit/collective-bootstrap.ts';
import { collectiveDtypeClass, collectiveName, fitCollectives, selectBackend } from '../../src/fit/collective.ts';
import type { CollectiveRow } from '../../src/measurements/schema.ts';
import { extrapolateCollectiveWidths } from '../../src/fit/collective-width.ts';
import type { FitContext } from '../../src/fit/types.ts';
import { geometricError, seededRandom } from '../../src/core/numeric/stats.ts';
import { collectiveSection } from '../../src/report/fit-collective.ts';

const SIZES = Array.from({ length: 21 }, (_, i) => 256 * 2 ** i); // 256 … 268,435,456

/**
 * Published H200 8-GPU NCCL 2.29.2 all_reduce (half) curve: ai-dynamo/aiconfigurator@095f58a5
 * systems/data/h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet (Apache-2.0, NVIDIA), latency ms → µs.
 * Sizes are the table's `message_size`, an ELEMENT count; BLIS fitted them as bytes, so its published
 * rates for this curve (floor 15.98 µs, peak 131,566, transition 92,500) are in elements/µs.
 */
const H200_NCCL_AR8_US = [
  16.01, 16.76, 15.98, 16.04, 16.67, 18.3, 18.38, 19.89, 21.45, 20.8, 20.46, 26.14, 37.46, 51.37, 78.3, 121.74, 197.34,
  319.63, 564.52, 1052.63, 2040.31,
];

const ctxFor = (chip: string, resamples = 200): FitContext => ({
  chip: loadChip(chip),
  inputs: [
    { file: `measurements/${chip}/collective.nccl-2.29.2.csv.gz`, sha256: 'a'.repeat(64), lane: 'nccl-2.29.2' },
    { file: `measurements/${chip}/collective.vllm-0.24.0.csv.gz`, sha256: 'b'.repeat(64), lane: 'vllm-0.24.0' },
  ],
  bootstrap: { resamples, seed: 7 },
  prior: new Map(),
});

describe('collective law', () => {
  it('matches hand arithmetic and the 1-rank rule', () => {
    const c = { t0_us: 10, r_t_bytes_per_us: 1e5, r_peak_bytes_per_us: 2e5 };
    expect(collectiveTime(1e6, c)).toBeCloseTo(20, 12); // max(10 + 10, 5)
    expect(collectiveTime(1e6, { ...c, r_t_bytes_per_us: 1e9 })).toBeCloseTo(10.001, 9); // max(10.001, 5)
    expect(collectiveTime(1e7, { ...c, r_t_bytes_per_us: 1e9 })).toBeCloseTo(50, 9); // max(10.01, 50)
    expect(collectiveTime(1e6, { t0_us: 10, r_peak_bytes_per_us: 2e5 })).toBe(10); // 2-param max(10, 5)
    expect(collectiveTime(4e6, { t0_us: 10, r_peak_bytes_per_us: 2e5 })).toBe(20);
    expect(collectiveTime(1e6, c, 1)).toBe(0);
    expect(collectiveTime(0, c, 8)).toBe(10);
  });

  it('is non-decreasing in bytes and zero for one rank (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.5, max: 100, noNaN: true }),
        fc.double({ min: 1e3, max: 1e6, noNaN: true }),
        fc.double({ min: 1, max: 4, noNaN: true }),
        fc.double({ min: 1, max: 1e9, noNaN: true }),
        fc.double({ min: 1, max: 1e9, noNaN: true }),
        (t0, rt, k, b1, b2) => {
          const c = { t0_us: t0, r_t_bytes_per_us: rt, r_peak_bytes_per_us: rt * k };
          const [lo, hi] = b1 <= b2 ? [b1, b2] : [b2, b1];
          return collectiveTime(lo, c) <= collectiveTime(hi, c) && collectiveTime(hi, c, 1) === 0;
        },
      ),
    );
  });
});

describe('curve fit', () => {
  it('golden: the published H200 8-rank NCCL all-reduce curve lands on BLIS coefficients', () => {
    const pts = SIZES.map((b, i) => ({ message_bytes: b, latency_us: H200_NCCL_AR8_US[i]! }));
    const f = fitCurve(pts);
    expect(f.t0_us).toBe(15.98);
    expect(f.r_peak_bytes_per_us).toBeCloseTo(131566, 0);
    expect(Math.abs(f.r_t_bytes_per_us / 92500 - 1)).toBeLessThan(0.01); // BLIS fits on a 250-step grid
    expect(f.r_t_bytes_per_us).toBeLessThanOrEqual(f.r_peak_bytes_per_us);
    expect(f.geo3).toBeLessThanOrEqual(1.25);
    expect(f.geo3).toBeCloseTo(1.173, 2);
    expect(f.geo2).toBeCloseTo(1.346, 2); // 2-parameter max(t0, b/r_peak)
  });

  it('golden: a curve constructed from the published coefficients plus the two published endpoints', () => {
    const pts = SIZES.map((b, i) => ({
      message_bytes: b,
      latency_us: i === 0 ? 16.01 : i === 20 ? 2040.31 : 15.98 + b / 92500,
    }));
    const f = fitCurve(pts);
    expect(Math.abs(f.t0_us - 15.98)).toBeLessThan(0.01); // min(16.01, 15.98 + 512/92500, …)
    expect(f.r_peak_bytes_per_us).toBeCloseTo(131566, 0);
    expect(Math.abs(f.r_t_bytes_per_us / 92500 - 1)).toBeLessThan(0.005);
    expect(f.geo3).toBeLessThanOrEqual(1.25);
  });

  it('recovers known coefficients from noisy repeats (±20% symmetric, 7 repeats, median-reduced)', () => {
    const t0 = 8;
    const rt = 300000;
    const rp = 420000;
    const rand = seededRandom(11);
    const raw: CurvePoint[] = [];
    for (const b of SIZES) {
      // Largest two sizes run at the peak rate; everything else on the transition line.
      const truth = b >= 2 ** 27 ? b / rp : t0 + b / rt;
      for (let r = 0; r < 7; r++) raw.push({ message_bytes: b, latency_us: truth * (1 + 0.2 * (2 * rand() - 1)) });
    }
    const pts = reduceRepeats(raw);
    expect(pts).toHaveLength(21);
    const f = fitCurve(pts);
    expect(Math.abs(f.t0_us / t0 - 1)).toBeLessThan(0.12);
    expect(Math.abs(f.r_t_bytes_per_us / rt - 1)).toBeLessThan(0.1);
    expect(Math.abs(f.r_peak_bytes_per_us / rp - 1)).toBeLessThan(0.15);
    expect(f.geo3).toBeLessThan(f.geo2);
  });

  it('fits a resample given as indices exactly as the same points given as rows (issue 17 bootstrap)', () => {
    const rand = seededRandom(29);
    const pts: CurvePoint[] = SIZES.map((b) => ({
      message_bytes: b,
      latency_us: (12 + b / 90000) * (0.8 + 0.4 * rand()),
    }));
    const t0 = 12;
    const rp = Math.max(...pts.map((p) => p.message_bytes / p.latency_us));
    for (let k = 0; k < 40; k++) {
      // a bootstrap resample: n draws with replacement, about a third of them repeats
      const idx = Int32Array.from(pts, () => Math.floor(rand() * pts.length));
      const byIndex = fitTransitionRate(pts, t0, rp, idx);
      const byRows = fitTransitionRate(
        Array.from(idx, (i) => pts[i]!),
        t0,
        rp,
      );
      expect(byIndex).toEqual(byRows);
    }
  });

  it('reduceRepeats takes the median per size and rejects bad values', () => {
    const r = reduceRepeats([
      { message_bytes: 10, latency_us: 3 },
      { message_bytes: 10, latency_us: 100 },
      { message_bytes: 10, latency_us: 5 },
      { message_bytes: 5, latency_us: 2 },
    ]);
    expect(r).toEqual([
      { message_bytes: 5, latency_us: 2 },
      { message_bytes: 10, latency_us: 5 },
    ]);
    expect(() => reduceRepeats([{ message_bytes: 10, latency_us: -1 }])).toThrow(/latency_us/);
  });

  it('refuses curves without a small-message floor or without large messages', () => {
    expect(() => fitCurve(SIZES.slice(5).map((b) => ({ message_bytes: b, latency_us: 10 + b / 1e5 })))).toThrow(
      /floor/,
    );
    expect(() => fitCurve([256, 512, 1024].map((b) => ({ message_bytes: b, latency_us: 10 })))).toThrow(/rate/);
  });

  it('r_t search is at least as good as a dense brute-force grid (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.6, max: 1.6, noNaN: true }), { minLength: 21, maxLength: 21 }),
        fc.double({ min: 2, max: 30, noNaN: true }),
        fc.double({ min: 1e4, max: 1e6, noNaN: true }),
        (noise, t0, rt) => {
          const pts = SIZES.map((b, i) => ({ message_bytes: b, latency_us: (t0 + b / rt) * noise[i]! }));
          const f = fitCurve(pts);
          let best = Infinity;
          const lo = Math.log(f.r_peak_bytes_per_us * 1e-4);
          const hi = Math.log(f.r_peak_bytes_per_us);
          for (let j = 0; j <= 4000; j++) {
            best = Math.min(
              best,
              collectiveObjective(pts, f.t0_us, Math.exp(lo + ((hi - lo) * j) / 4000), f.r_peak_bytes_per_us),
            );
          }
          return f.objective <= best + 1e-9 && f.r_t_bytes_per_us <= f.r_peak_bytes_per_us;
        },
      ),
      { numRuns: 40 },
    );
  });

  it('fitTransitionRate respects the r_t ≤ r_peak constraint when the data want more', () => {
    // Pure affine data t0 + b/r: measured peak < r, so the optimum sits on r_peak.
    const pts = SIZES.map((b) => ({ message_bytes: b, latency_us: 5 + b / 2e5 }));
    const f = fitCurve(pts);
    expect(f.r_t_bytes_per_us).toBe(f.r_peak_bytes_per_us);
    expect(f.r_t_at_peak).toBe(true);
    const rt = fitTransitionRate(pts, f.t0_us, f.r_peak_bytes_per_us);
    expect(rt.at_peak).toBe(true);
  });

  it('bootstrap ci of r_t contains the estimate and is seeded', () => {
    const pts = SIZES.map((b, i) => ({ message_bytes: b, latency_us: H200_NCCL_AR8_US[i]! }));
    const f = fitCurve(pts);
    const a = bootstrapTransitionRate(pts, f, { resamples: 200, seed: 3 });
    const b = bootstrapTransitionRate(pts, f, { resamples: 200, seed: 3 });
    expect(a).toEqual(b);
    expect(a.ci95[0]).toBeLessThanOrEqual(f.r_t_bytes_per_us);
    expect(a.ci95[1]).toBeGreaterThanOrEqual(f.r_t_bytes_per_us);
    expect(a.ci95[1]).toBeGreaterThan(a.ci95[0]);
    expect(a.ok).toBe(200);
  });

  it('the bootstrap (candidate terms taken once per curve) gives the r_t each resample fitted on its own gives, bit for bit', () => {
    const pts = SIZES.map((b, i) => ({ message_bytes: b, latency_us: H200_NCCL_AR8_US[i]! }));
    const f = fitCurve(pts);
    const boot = bootstrapTransitionRate(pts, f, { resamples: 200, seed: 5 });
    // The same resamples (resampleEstimates: mulberry32 from the seed, n draws each), each fitted alone.
    const rand = seededRandom(5);
    const vals: number[] = [];
    for (let b = 0; b < 200; b++) {
      const idx = Uint32Array.from(pts, () => Math.floor(rand() * pts.length));
      if (Array.from(idx).some((i) => pts[i]!.message_bytes > 4096))
        vals.push(fitTransitionRate(pts, f.t0_us, f.r_peak_bytes_per_us, idx).r_t);
    }
    const sorted = [...vals].sort((x, y) => x - y);
    // type-7 quantiles of the 200 values at 2.5 % and 97.5 %, widened to the estimate
    const q = (p: number) => {
      const h = (sorted.length - 1) * p;
      const lo = Math.floor(h);
      return sorted[lo]! + (h - lo) * (sorted[Math.min(lo + 1, sorted.length - 1)]! - sorted[lo]!);
    };
    expect(boot.ok).toBe(vals.length);
    expect(boot.ci95).toEqual([Math.min(q(0.025), f.r_t_bytes_per_us), Math.max(q(0.975), f.r_t_bytes_per_us)]);
  });
});

describe('collective bootstrap search (issue 17: shared across resamples)', () => {
  it('gives every resample the r_t fitTransitionRate gives it, bit for bit, on noisy curves and repeated sizes', () => {
    const rand = seededRandom(41);
    for (let curve = 0; curve < 12; curve++) {
      const t0 = 5 + 20 * rand();
      const rate = 1e4 * 10 ** (2 * rand());
      // some curves repeat a latency, so kinks coincide (equal candidates)
      const pts: CurvePoint[] = SIZES.map((b) => ({
        message_bytes: b,
        latency_us: curve % 3 === 0 ? t0 + b / rate : (t0 + b / rate) * (0.7 + 0.6 * rand()),
      }));
      const f = fitCurve(pts);
      const search = new ResampleRateSearch(pts, f.t0_us, f.r_peak_bytes_per_us);
      for (let k = 0; k < 60; k++) {
        const idx = Uint32Array.from(pts, () => Math.floor(rand() * pts.length));
        const any = Array.from(idx).some((i) => pts[i]!.message_bytes > 4096);
        const direct = any ? fitTransitionRate(pts, f.t0_us, f.r_peak_bytes_per_us, idx).r_t : undefined;
        expect(search.rate(idx, 4096)).toBe(direct);
      }
    }
  });
});

describe('width holdout', () => {
  it('floor line a + b(n−1) matches hand arithmetic', () => {
    const l = floorWidthLine([
      { ranks: 2, t0_us: 6 },
      { ranks: 4, t0_us: 9 },
    ]);
    expect(l.b).toBeCloseTo(1.5, 12); // (9 − 6) / (3 − 1)
    expect(l.a).toBeCloseTo(4.5, 12);
    expect(l.a + l.b * 7).toBeCloseTo(15, 12); // predicted 8-rank floor
  });

  it('predicts a held-out width exactly when floors are linear in (n−1) and rates equal', () => {
    const mk = (n: number) => {
      const t0 = 4 + 1.5 * (n - 1);
      const points = SIZES.map((b) => ({ message_bytes: b, latency_us: b >= 2 ** 27 ? b / 4e5 : t0 + b / 3e5 }));
      return { ranks: n, points, fit: fitCurve(points) };
    };
    const curves = [mk(2), mk(4), mk(8)];
    const hs = leaveOneWidthOut(curves);
    expect(hs.map((h) => h.ranks)).toEqual([2, 4, 8]);
    for (const [i, h] of hs.entries()) {
      expect(h.t0_pred_us).toBeCloseTo(h.t0_meas_us, 9);
      // Same rates and an exact floor → the holdout prediction equals the width's own fit.
      expect(h.geo).toBeCloseTo(curves[i]!.fit.geo3, 5);
      expect(h.geo).toBeLessThan(1.05);
    }
    expect(hs[2]!.from_ranks).toEqual([2, 4]);
    expect(hs[2]!.rates_from).toBe(4);
    expect(hs[1]!.rates_from).toBe(2); // nearest other width to 4 is 2 (|4−2| < |4−8|)
    expect(hs[0]!.rates_from).toBe(4);
  });
});

/** Rows for one chip: NCCL fp16/int8 for all ops at 2/4/8 ranks plus custom graph/eager all_reduce. */
function syntheticRows(chip: string, opts: { floorDrop?: boolean } = {}): CollectiveRow[] {
  const rows: CollectiveRow[] = [];
  const ops = ['all_reduce', 'all_gather', 'reduce_scatter', 'alltoall'] as const;
  for (const op of ops)
    for (const dtype of ['fp16', 'int8'])
      for (const ranks of [2, 4, 8]) {
        let t0 = 4 + 1.2 * (ranks - 1);
        if (opts.floorDrop && op === 'alltoall' && dtype === 'int8' && ranks === 8) t0 = 3;
        for (const b of SIZES)
          rows.push({
            chip,
            lane: 'nccl-2.29.2',
            kernel_source: 'NCCL',
            op,
            dtype,
            ranks,
            nodes: 1,
            message_bytes: b,
            backend: 'nccl',
            latency_us: b >= 2 ** 27 ? b / 4e5 : t0 + b / 3e5,
          });
      }
  for (const backend of ['custom_graph', 'custom_eager'] as const)
    for (const ranks of [2, 4, 8]) {
      const t0 = backend === 'custom_graph' ? 4 + 0.1 * ranks : 20;
      for (const b of SIZES)
        rows.push({
          chip,
          lane: 'vllm-0.24.0',
          kernel_source: backend === 'custom_graph' ? 'vLLM_custom_graph' : 'vLLM_custom_eager',
          op: 'all_reduce',
          dtype: 'bf16',
          ranks,
          nodes: 1,
          message_bytes: b,
          backend,
          latency_us: b >= 2 ** 27 ? b / 5e5 : t0 + b / 3.5e5,
        });
    }
  return rows;
}

describe('fitCollectives', () => {
  it('emits BLIS-named triples with evidence, picks custom graph for fp16 all_reduce, and extrapolates 16 ranks', () => {
    const r = fitCollectives(syntheticRows('h200'), ctxFor('h200', 50));
    expect(r.refusals).toEqual([]);
    const names = new Map(r.coefficients.map((c) => [c.name, c]));
    // 4 ops × 2 dtypes × 3 widths × 3 coefficients + 16-rank assumed triples for each (op, dtype).
    expect(r.coefficients).toHaveLength(4 * 2 * 3 * 3 + 8 * 3);
    const fl = names.get('collective_floor_all_reduce_fp16_8rank_h200')!;
    expect(fl.set).toBe('cost-model-collectives');
    expect(fl.entry.value).toBeCloseTo(4.8 + 256 / 3.5e5, 3); // custom graph floor 4 + 0.1·8 (+ 256 B at r_t), not NCCL's 12.4
    expect(fl.entry.units).toBe('us_per_transfer');
    expect(fl.entry).toMatchObject({ method: 'measured', fitted: false, scope: { hardware: ['h200'] } });
    expect(fl.entry.evidence?.lane).toBe('vllm-0.24.0');
    expect(fl.entry.evidence?.inputs?.[0]?.file).toContain('vllm-0.24.0');
    expect(fl.entry.evidence?.inputs?.[0]?.rows_used).toBe(21);
    expect(fl.entry.evidence?.holdout_error?.split).toContain('leave-one-width-out');
    const int8 = names.get('collective_floor_all_reduce_int8_8rank_h200')!;
    expect(int8.entry.value).toBeCloseTo(4 + 1.2 * 7 + 256 / 3e5, 2);
    expect(int8.entry.evidence?.lane).toBe('nccl-2.29.2');
    const rt = names.get('collective_transition_rate_all_gather_fp16_4rank_h200')!;
    expect(rt.entry).toMatchObject({ units: 'bytes_per_us', method: 'measured', fitted: true });
    expect(Math.abs(rt.entry.value / 3e5 - 1)).toBeLessThan(0.01);
    expect(rt.entry.evidence?.ci_method).toBe('bootstrap');
    expect(rt.entry.evidence?.bootstrap).toEqual({ resamples: 50, seed: 7 });
    const pk = names.get('collective_peak_rate_all_gather_fp16_4rank_h200')!;
    expect(pk.entry.value).toBeCloseTo(4e5, 0);
    // 16-rank extrapolation: floor 4 + 1.2·15 = 22, rates from 8 ranks, method assumed with a rationale.
    const f16 = names.get('collective_floor_all_gather_int8_16rank_h200')!;
    expect(f16.entry.value).toBeCloseTo(22 + 256 / 3e5, 2);
    expect(f16.entry).toMatchObject({ method: 'assumed', fitted: false });
    expect(f16.entry.rationale!.length).toBeGreaterThan(200);
    expect(f16.entry.evidence?.extrapolation?.from).toEqual(['h200:2rank', 'h200:4rank', 'h200:8rank']);
    expect(f16.entry.evidence?.lane).toBe('nccl-2.29.2');
    // Holdout of the library: 8-rank floor predicted from 2/4 on the exact line → pred/meas ≈ 1.
    expect(f16.entry.evidence?.extrapolation?.holdout_error?.geo).toBeLessThan(1.001);
    // One implementation: the registry library on the fitted sets gives the same 16-rank values.
    const again = extrapolateCollectiveWidths(
      [
        {
          kind: 'CoefficientSet',
          name: 'c',
          coefficients: r.coefficients.filter((c) => c.entry.method === 'measured'),
        },
      ],
      'h200',
    );
    for (const w of again) {
      expect(w.status).toBe('extrapolated');
      for (const e of w.entries) expect(names.get(e.name)?.entry.value).toBe(e.entry.value);
    }
    // Every CI contains its value; every transition ≤ peak.
    for (const c of r.coefficients) {
      if (c.entry.ci95) {
        expect(c.entry.ci95[0]).toBeLessThanOrEqual(c.entry.value);
        expect(c.entry.ci95[1]).toBeGreaterThanOrEqual(c.entry.value);
      }
      if (c.name.includes('transition_rate')) {
        const peak = names.get(c.name.replace('transition_rate', 'peak_rate'))!;
        expect(c.entry.value).toBeLessThanOrEqual(peak.entry.value);
      }
    }
    const drawn = collectiveSection(r, loadChip('h200'));
    expect(drawn.md).toContain('custom (CUDA graph)');
    expect(drawn.figures.map((f) => f.name)).toEqual([
      'collective_all_gather.svg',
      'collective_all_reduce.svg',
      'collective_alltoall.svg',
      'collective_reduce_scatter.svg',
      'collective_residuals.svg',
    ]);
  });

  it('is deterministic', () => {
    const a = fitCollectives(syntheticRows('h200'), ctxFor('h200', 20));
    const b = fitCollectives(syntheticRows('h200'), ctxFor('h200', 20));
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });

  it('uses NCCL above 2 ranks on a PCIe-only chip (l40s), custom graph at 2', () => {
    expect(selectBackend('all_reduce', 'fp16', 2, new Set(['nccl', 'custom_graph']), true)).toBe('custom_graph');
    expect(selectBackend('all_reduce', 'fp16', 4, new Set(['nccl', 'custom_graph']), true)).toBe('nccl');
    expect(selectBackend('all_reduce', 'int8', 2, new Set(['nccl', 'custom_graph']), false)).toBe('nccl');
    expect(selectBackend('all_gather', 'fp16', 8, new Set(['custom_eager']), false)).toBeUndefined();
    const r = fitCollectives(syntheticRows('l40s'), ctxFor('l40s', 20));
    const v = (n: number) =>
      r.coefficients.find((c) => c.name === `collective_floor_all_reduce_fp16_${n}rank_l40s`)!.entry;
    expect(v(2).value).toBeCloseTo(4.2 + 256 / 3.5e5, 3);
    expect(v(4).value).toBeCloseTo(4 + 1.2 * 3 + 256 / 3e5, 3);
    expect(v(4).evidence?.lane).toBe('nccl-2.29.2');
    // 2-rank from vLLM, 4/8 from NCCL: the width extrapolation across lanes is refused, no entry.
    expect(r.coefficients.some((c) => c.name.startsWith('collective_floor_all_reduce_fp16_16rank'))).toBe(false);
    expect(r.coefficients.some((c) => c.name === 'collective_floor_all_reduce_int8_16rank_l40s')).toBe(true);
    expect(r.refusals).toEqual([]);
    expect(r.warnings.find((w) => w.includes('all_reduce fp16 16-rank'))).toContain('more than one lane');
    expect(collectiveSection(r, loadChip('l40s')).md).toContain(
      '**refused**: measured widths come from more than one lane',
    );
  });

  it('refuses a registry floor that falls beyond noise as ranks grow, that entry only, and names it', () => {
    const r = fitCollectives(syntheticRows('h200', { floorDrop: true }), ctxFor('h200', 20));
    expect(r.refusals).toHaveLength(1);
    // 4-rank 7.601 µs, 8-rank 3.001 µs: (7.601 − 3.001) / 7.601 = 60.52 % below, far beyond the 0.03 % repeat noise.
    expect(r.refusals[0]).toMatch(
      /^collective_floor_alltoall_int8_8rank_h200: .*60\.52% below.*4-rank nccl > 8-rank nccl/,
    );
    expect(r.coefficients.some((c) => c.name === 'collective_floor_alltoall_int8_8rank_h200')).toBe(false);
    expect(r.coefficients.some((c) => c.name === 'collective_floor_alltoall_int8_4rank_h200')).toBe(true);
    expect(collectiveSection(r, loadChip('h200')).md).toContain('**refused** beyond noise');
  });

  it('names and dtype classes follow the BLIS scheme', () => {
    expect(collectiveName('peak_rate', 'all_reduce', 'fp16', 8, 'gb200-nvl72')).toBe(
      'collective_peak_rate_all_reduce_fp16_8rank_gb200_nvl72',
    );
    expect(collectiveDtypeClass('bf16')).toBe('fp16');
    expect(collectiveDtypeClass('half')).toBe('fp16');
    expect(collectiveDtypeClass('int8')).toBe('int8');
    expect(collectiveDtypeClass('fp8')).toBeUndefined();
  });

  it('skips unknown dtypes and multi-node rows with warnings', () => {
    const rows = syntheticRows('h200');
    rows.push({ ...rows[0]!, dtype: 'fp8' }, { ...rows[1]!, nodes: 2 });
    const r = fitCollectives(rows, ctxFor('h200', 10));
    expect(r.warnings.join('\n')).toMatch(/fp8/);
    expect(r.warnings.join('\n')).toMatch(/multi-node/);
  });

  it('the geometric error helper agrees with the fit summary', () => {
    const pts = SIZES.map((b, i) => ({ message_bytes: b, latency_us: H200_NCCL_AR8_US[i]! }));
    const f = fitCurve(pts);
    const pred = pts.map((p) =>
      collectiveTime(p.message_bytes, {
        t0_us: f.t0_us,
        r_t_bytes_per_us: f.r_t_bytes_per_us,
        r_peak_bytes_per_us: f.r_peak_bytes_per_us,
      }),
    );
    expect(
      geometricError(
        pred,
        pts.map((p) => p.latency_us),
      ),
    ).toBeCloseTo(f.geo3, 12);
  });
});

describe('real curated store (measurements/<chip>/collective.*.csv.gz)', () => {
  const real = (chip: string) => {
    const rows = readMeasurements(path.join(REPO_ROOT, 'measurements', chip), 'collective');
    return fitCollectives(rows, ctxFor(chip, 30));
  };

  it('h200: floors non-decreasing, r_t ≤ r_peak, fp16 rates 2× BLIS (element counts read as bytes there)', () => {
    const r = real('h200');
    expect(r.refusals).toEqual([]);
    const v = (n: string) => r.coefficients.find((c) => c.name === n)!.entry;
    expect(v('collective_floor_all_reduce_fp16_8rank_h200').value).toBe(4.711); // custom AR under CUDA graph; BLIS 4.71
    expect(v('collective_floor_all_reduce_fp16_8rank_h200').evidence?.lane).toBe('vllm-0.24.0');
    expect(v('collective_floor_all_reduce_int8_8rank_h200').value).toBe(16.65); // NCCL; BLIS 16.65
    // fp16 all_gather 8-rank: BLIS peak 192,431.0, transition 148,500 (per "byte" = per element).
    expect(v('collective_peak_rate_all_gather_fp16_8rank_h200').value / (2 * 192431.0)).toBeCloseTo(1, 4);
    expect(Math.abs(v('collective_transition_rate_all_gather_fp16_8rank_h200').value / (2 * 148500) - 1)).toBeLessThan(
      0.01,
    );
    // int8 matches 1:1.
    expect(v('collective_peak_rate_all_reduce_int8_8rank_h200').value / 201446.5).toBeCloseTo(1, 4);
    expect(collectiveSection(r, loadChip('h200')).md).toContain('Registry curves: floors non-decreasing');
  });

  it('h100 and l40s pass the width gate; l40s uses NCCL for all_reduce above 2 ranks', () => {
    const h = real('h100');
    expect(h.refusals).toEqual([]);
    const l = real('l40s');
    expect(l.refusals).toEqual([]);
    const e = (n: string) => l.coefficients.find((c) => c.name === n)!.entry;
    expect(e('collective_floor_all_reduce_fp16_2rank_l40s').evidence?.lane).toMatch(/^vllm-/);
    expect(e('collective_floor_all_reduce_fp16_8rank_l40s').evidence?.lane).toMatch(/^nccl-/);
    expect(collectiveSection(l, loadChip('l40s')).md).toContain(
      'vLLM disables custom all-reduce above 2 PCIe-only GPUs',
    );
  });
});
