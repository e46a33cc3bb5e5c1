import path from 'node:path';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { REPO_ROOT, loadChip } from '../../src/core/catalog/chip.ts';
import { readMeasurements } from '../../src/measurements/store.ts';
import {
  bootstrapImbalance,
  fitMoe,
  imbalanceResidual,
  imbalanceStats,
  leaveOneGeometryOut,
  pairMoe,
  pairMoeAll,
  rankedValues,
} from '../../src/fit/moe.ts';
import type { MoeRow } from '../../src/measurements/schema.ts';
import type { FitContext } from '../../src/fit/types.ts';
import { resampleEstimates } from '../../src/core/numeric/resample.ts';
import { median, nearestRankSorted, percentileType7, seededRandom, type7Sorted } from '../../src/core/numeric/stats.ts';
import { MOE_RESIDUAL_POINTS, moeSection } from '../../src/report/fit-moe.ts';

const ctx = (resamples = 200): FitContext => ({
  chip: loadChip('h200'),
  inputs: [{ file: 'measurements/h200/moe.vllm-0.24.0.csv.gz', sha256: 'c'.repeat(64), lane: 'vllm-0.24.0' }],
  bootstrap: { resamples, seed: 5 },
  prior: new Map(),
});

const base: MoeRow = {
  chip: 'h200',
  lane: 'vllm-0.24.0',
  kernel_source: 'k',
  tokens: 1,
  hidden: 4096,
  inter: 1024,
  topk: 8,
  experts: 128,
  tp: 1,
  ep: 1,
  dtype: 'bf16',
  distribution: 'balanced',
  latency_us: 100,
};

/** Ten shapes (tokens 1…10) with skew ratios 0.8, 0.9, …, 1.7 and a 1.2-alpha ratio 0.1 higher. */
function tenPairs(): MoeRow[] {
  const rows: MoeRow[] = [];
  for (let i = 0; i < 10; i++) {
    const tokens = i + 1;
    const bal = 50 + 10 * i;
    rows.push({ ...base, tokens, latency_us: bal });
    rows.push({ ...base, tokens, distribution: 'power_law_1.01', latency_us: bal * (0.8 + 0.1 * i) });
    rows.push({ ...base, tokens, distribution: 'power_law_1.2', latency_us: bal * (0.9 + 0.1 * i) });
  }
  return rows;
}

describe('pairMoe', () => {
  it('pairs identical shape and kernel only, reducing repeats with the median', () => {
    const rows: MoeRow[] = [
      { ...base, latency_us: 100 },
      { ...base, latency_us: 140 },
      { ...base, latency_us: 120 },
      { ...base, distribution: 'power_law_1.01', latency_us: 150 },
      { ...base, kernel_source: 'other', distribution: 'power_law_1.01', latency_us: 999 }, // different kernel: unpaired
      { ...base, tokens: 2, latency_us: 80 }, // balanced only: unpaired
      { ...base, distribution: 'power_law_1.2', latency_us: 500 }, // other alpha: ignored
    ];
    const p = pairMoe(rows, 'power_law_1.01');
    expect(p.pairs).toHaveLength(1);
    expect(p.pairs[0]!.balanced_us).toBe(120);
    expect(p.pairs[0]!.ratio).toBeCloseTo(1.25, 12);
    expect(p.unpaired_skewed).toBe(1);
    expect(p.unpaired_balanced).toBe(1);
  });
});

describe('pairMoeAll', () => {
  it("pairs two distributions from one grouping, each with pairMoe's pairs and counts", () => {
    const rows: MoeRow[] = [
      { ...base, latency_us: 100 },
      { ...base, distribution: 'power_law_1.01', latency_us: 150 },
      { ...base, distribution: 'power_law_1.2', latency_us: 170 },
      { ...base, tokens: 2, distribution: 'power_law_1.2', latency_us: 90 }, // 1.2 only: unpaired for 1.2, absent for 1.01
      { ...base, tokens: 3, latency_us: 60 }, // balanced only: unpaired for both
      { ...base, tokens: 3, distribution: 'uniform', latency_us: 70 }, // neither: ignored
    ];
    const [a, b] = pairMoeAll(rows, ['power_law_1.01', 'power_law_1.2']);
    expect(a).toEqual(pairMoe(rows, 'power_law_1.01'));
    expect(b).toEqual(pairMoe(rows, 'power_law_1.2'));
    expect(a!.pairs.map((p) => p.ratio)).toEqual([1.5]);
    expect([a!.unpaired_skewed, a!.unpaired_balanced, a!.skewed_rows]).toEqual([0, 1, 1]);
    expect(b!.pairs.map((p) => p.ratio)).toEqual([1.7]);
    expect([b!.unpaired_skewed, b!.unpaired_balanced, b!.skewed_rows, b!.balanced_rows]).toEqual([1, 1, 2, 2]);
  });
});

/** pairMoeAll as first written: a key string per row, a Map of them, the keys sorted (the reference). */
function pairByKeyStrings(rows: readonly MoeRow[], distributions: readonly string[]) {
  const shapes = new Map<string, { row: MoeRow; bal: number[]; skw: number[][] }>();
  let balanced_rows = 0;
  const skewed_rows = distributions.map(() => 0);
  for (const r of rows) {
    const isBal = r.distribution === 'balanced';
    const d = isBal ? -1 : distributions.indexOf(r.distribution);
    if (!isBal && d < 0) continue;
    if (isBal) balanced_rows++;
    else skewed_rows[d]!++;
    const k = `${r.lane}|${r.kernel_source}|${r.dtype}|${r.tokens}|${r.hidden}|${r.inter}|${r.topk}|${r.experts}|${r.tp}|${r.ep}`;
    const s = shapes.get(k) ?? { row: r, bal: [], skw: distributions.map(() => []) };
    shapes.set(k, s);
    (isBal ? s.bal : s.skw[d]!).push(r.latency_us);
  }
  const keys = [...shapes.keys()].sort();
  return distributions.map((_, d) => {
    const pairs = [];
    let unpaired_skewed = 0;
    let unpaired_balanced = 0;
    for (const k of keys) {
      const s = shapes.get(k)!;
      const skw = s.skw[d]!;
      if (!s.bal.length && !skw.length) continue;
      if (!s.bal.length) unpaired_skewed++;
      else if (!skw.length) unpaired_balanced++;
      else {
        const { lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp, ep } = s.row;
        const [b, w] = [median(s.bal), median(skw)];
        pairs.push({
          lane,
          kernel_source,
          dtype,
          tokens,
          hidden,
          inter,
          topk,
          experts,
          tp,
          ep,
          balanced_us: b,
          skewed_us: w,
          ratio: w / b,
        });
      }
    }
    return { pairs, unpaired_skewed, unpaired_balanced, balanced_rows, skewed_rows: skewed_rows[d]! };
  });
}

describe('pairMoeAll by fields (issue 17) against key strings', () => {
  const rand = seededRandom(17);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const randomRows = (kernels: readonly string[], dtypes: readonly string[]): MoeRow[] =>
    Array.from({ length: 600 }, () => ({
      ...base,
      lane: pick(['vllm-0.24.0', 'vllm-0.9', 'sglang']),
      kernel_source: pick(kernels),
      dtype: pick(dtypes),
      tokens: pick([1, 2, 16, 128, 1024, 12, 3]),
      hidden: pick([4096, 2048, 7168]),
      topk: pick([8, 2]),
      ep: pick([1, 8]),
      distribution: pick(['balanced', 'balanced', 'power_law_1.01', 'power_law_1.2', 'uniform']),
      latency_us: 10 + 100 * rand(),
    }));
  it('gives the same pairs, in the same order, with the same counts (repeats, unpaired shapes, other distributions)', () => {
    const rows = randomRows(['k', 'k2', 'triton_k'], ['bf16', 'fp8']);
    expect(pairMoeAll(rows, ['power_law_1.01', 'power_law_1.2'])).toEqual(
      pairByKeyStrings(rows, ['power_law_1.01', 'power_law_1.2']),
    );
  });
  it('merges shapes whose fields differ but join to one key string, as the key strings did', () => {
    // kernel 'a|b' with dtype 'c' and kernel 'a' with dtype 'b|c' join alike: one key, one pair
    const rows = randomRows(['a|b', 'a', 'k'], ['c', 'b|c']);
    expect(pairMoeAll(rows, ['power_law_1.01'])).toEqual(pairByKeyStrings(rows, ['power_law_1.01']));
  });
});

describe('rankedValues', () => {
  it('sorts as a sort by value and places ties in index order, as the stable argsort does', () => {
    const rand = seededRandom(3);
    for (const values of [
      Array.from({ length: 300 }, () => Math.round(rand() * 40) / 8),
      [3, 1, 2, 1, 3, 0, -0, 0, Number.NaN, 2],
      [5],
    ]) {
      const order = values.map((_, i) => i).sort((a, b) => values[a]! - values[b]!);
      const r = rankedValues(values);
      expect(Array.from(r.sorted)).toEqual(order.map((i) => values[i]));
      expect(Array.from(r.place)).toEqual(values.map((_, i) => order.indexOf(i)));
    }
  });
});

describe('imbalance statistics', () => {
  it('median (type-7) and p90 (nearest rank) by hand', () => {
    const s = imbalanceStats([0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]);
    expect(s.median).toBeCloseTo(1.25, 12); // (1.2 + 1.3) / 2
    expect(s.p90).toBeCloseTo(1.6, 12); // sorted[ceil(0.9·10) − 1] = sorted[8]
    expect(s.p10).toBeCloseTo(0.8, 12);
  });

  it('bootstrap statistics equal those of each resample copied and sorted (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.5, max: 3, noNaN: true }), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 1e6 }),
        (rs, seed) => {
          // the direct form: copy each resample, sort it, read type-7 0.5 and nearest-rank 0.9
          const sample = new Float64Array(rs.length);
          const boot = resampleEstimates(rs.length, 50, seed, (idx) => {
            for (let i = 0; i < rs.length; i++) sample[i] = rs[idx[i]!]!;
            sample.sort();
            return [type7Sorted(sample, 0.5), nearestRankSorted(sample, 0.9)] as const;
          });
          const ci = (vals: number[], v: number): [number, number] => [
            Math.min(percentileType7(vals, 0.025), v),
            Math.max(percentileType7(vals, 0.975), v),
          ];
          const s = imbalanceStats(rs);
          const got = bootstrapImbalance(rs, { resamples: 50, seed });
          expect(got.median_ci95).toEqual(
            ci(
              boot.map((b) => b[0]),
              s.median,
            ),
          );
          expect(got.p90_ci95).toEqual(
            ci(
              boot.map((b) => b[1]),
              s.p90,
            ),
          );
        },
      ),
    );
  });

  it('bootstrap intervals contain the estimates and are seeded (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0.5, max: 3, noNaN: true }), { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 1, max: 1e6 }),
        (rs, seed) => {
          const a = bootstrapImbalance(rs, { resamples: 50, seed });
          const b = bootstrapImbalance(rs, { resamples: 50, seed });
          const s = imbalanceStats(rs);
          return (
            JSON.stringify(a) === JSON.stringify(b) &&
            a.median_ci95[0] <= s.median &&
            s.median <= a.median_ci95[1] &&
            a.p90_ci95[0] <= s.p90 &&
            s.p90 <= a.p90_ci95[1]
          );
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('fitMoe', () => {
  it('writes median and p90 with evidence; alpha 1.2 only in the report', () => {
    const r = fitMoe(tenPairs(), ctx());
    expect(r.refusals).toEqual([]);
    expect(r.coefficients.map((c) => [c.set, c.name])).toEqual([
      ['cost-model-primitives', 'moe_routing_imbalance_median'],
      ['cost-model-primitives', 'moe_routing_imbalance_p90'],
    ]);
    const [m, p] = r.coefficients.map((c) => c.entry);
    expect(m!.value).toBe(1.25);
    expect(p!.value).toBe(1.6);
    expect(m).toMatchObject({
      units: 'dimensionless',
      method: 'measured',
      fitted: false,
      scope: { hardware: ['h200'] },
    });
    expect(m!.ci95![0]).toBeLessThanOrEqual(1.25);
    expect(m!.ci95![1]).toBeGreaterThanOrEqual(1.25);
    expect(m!.evidence?.ci_method).toBe('bootstrap');
    expect(m!.evidence?.bootstrap).toEqual({ resamples: 200, seed: 5 });
    expect(m!.evidence?.inputs?.[0]).toMatchObject({ file: 'measurements/h200/moe.vllm-0.24.0.csv.gz', rows_used: 20 });
    expect(m!.evidence?.train_error?.n).toBe(10);
    // One geometry only → no holdout.
    expect(m!.evidence?.holdout_error).toBeUndefined();
    const drawn = moeSection(r, ctx().chip);
    expect(drawn.md).toContain('power_law_1.2 (reported only) | 10 | 1.35 |');
    expect(drawn.figures.map((f) => f.name)).toEqual(['moe_imbalance.svg', 'moe_imbalance_residuals.svg']);
  });

  it('residuals are ln(median / ratio) per pair: the error of latency(skewed) ≈ median · latency(balanced)', () => {
    // Ratios 0.8 … 1.7, median 1.25, p90 1.6 (hand values above).
    expect(imbalanceResidual({ ratio: 1.0 }, 1.25)).toBeCloseTo(Math.log(1.25), 12);
    expect(imbalanceResidual({ ratio: 1.25 }, 1.25)).toBe(0);
    const pairs = pairMoe(tenPairs(), 'power_law_1.01').pairs;
    const res = pairs.map((p) => imbalanceResidual(p, 1.25));
    // Half the pairs on each side of zero; 1 in 10 (ratio 1.7) below the p90 line ln(1.25/1.6).
    expect(res.filter((x) => x > 0)).toHaveLength(5);
    expect(res.filter((x) => x < Math.log(1.25 / 1.6) - 1e-12)).toHaveLength(1);
    const svg = moeSection(fitMoe(tenPairs(), ctx(20)), ctx().chip).figures.find(
      (f) => f.name === 'moe_imbalance_residuals.svg',
    )!.svg;
    expect(svg.match(/<circle /g)).toHaveLength(10); // one dot per pair (≤ MOE_RESIDUAL_POINTS)
    // The legend wraps long labels into tspans: compare the figure's text with its tags dropped.
    const text = svg.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
    expect(text).toContain('p90: ln(median/p90) -0.2469'); // ln(1.25/1.6) = −0.24686, 4 s.f.
    expect(MOE_RESIDUAL_POINTS).toBeLessThanOrEqual(1000);
  });

  it('refuses, without writing, when there are no balanced rows (a100 vLLM)', () => {
    const rows = tenPairs().filter((x) => x.distribution !== 'balanced');
    const r = fitMoe(rows, ctx());
    expect(r.coefficients).toEqual([]);
    expect(r.warnings.join(' ')).toMatch(/refused on h200: no balanced-routing rows/);
    expect(moeSection(r, ctx().chip).md).toContain('Refused');
  });

  it('symmetric ±20% noise on repeats does not bias the median (5 repeats each side, median-reduced)', () => {
    const rand = seededRandom(99);
    const rows: MoeRow[] = [];
    for (let t = 1; t <= 300; t++) {
      const bal = 20 + t;
      for (let k = 0; k < 5; k++) {
        rows.push({ ...base, tokens: t, latency_us: bal * (1 + 0.2 * (2 * rand() - 1)) });
        rows.push({
          ...base,
          tokens: t,
          distribution: 'power_law_1.01',
          latency_us: 1.3 * bal * (1 + 0.2 * (2 * rand() - 1)),
        });
      }
    }
    const r = fitMoe(rows, ctx(100));
    const m = r.coefficients[0]!.entry.value;
    expect(Math.abs(m / 1.3 - 1)).toBeLessThan(0.02);
  });

  it('leave-one-geometry-out uses the other geometries only', () => {
    const rows: MoeRow[] = [];
    // Geometry A ratio 1.0, geometry B ratio 2.0: each is predicted with the other's median.
    for (let t = 1; t <= 4; t++) {
      rows.push(
        { ...base, tokens: t, latency_us: 10 },
        { ...base, tokens: t, distribution: 'power_law_1.01', latency_us: 10 },
      );
      rows.push(
        { ...base, hidden: 7168, tokens: t, latency_us: 10 },
        { ...base, hidden: 7168, tokens: t, distribution: 'power_law_1.01', latency_us: 20 },
      );
    }
    const h = leaveOneGeometryOut(pairMoe(rows, 'power_law_1.01').pairs)!;
    expect(h.geometries).toBe(2);
    expect(h.geo).toBeCloseTo(2, 12); // every prediction off by exactly 2×
    const r = fitMoe(rows, ctx(20));
    expect(r.coefficients[0]!.entry.evidence?.holdout_error?.geo).toBe(2);
    expect(r.coefficients[0]!.entry.value).toBe(1.5);
  });
});

describe('real curated store (measurements/<chip>/moe.*.csv.gz)', () => {
  const real = (chip: string) =>
    fitMoe(readMeasurements(path.join(REPO_ROOT, 'measurements', chip), 'moe'), { ...ctx(50), chip: loadChip(chip) });

  it('h200 vLLM: median ≈ 1 and p90 ≈ 1.4, as BLIS found on vLLM 0.25.0 (0.999 / 1.394)', () => {
    const r = real('h200');
    const [m, p] = r.coefficients.map((c) => c.entry);
    expect(m!.value).toBeGreaterThan(0.98);
    expect(m!.value).toBeLessThan(1.02);
    expect(p!.value).toBeGreaterThan(1.3);
    expect(p!.value).toBeLessThan(1.5);
    expect(m!.evidence?.train_error?.n).toBeGreaterThan(16000);
  });

  it('a100 vLLM has no balanced rows: refused, nothing written', () => {
    const r = real('a100');
    expect(r.coefficients).toEqual([]);
    expect(r.warnings[0]).toMatch(/refused on a100: no balanced-routing rows/);
  });
});
