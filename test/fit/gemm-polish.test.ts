/**
 * The GEMM shape-halves polish reads its objective from per-axis sums (src/fit/gemm-polish.ts); these
 * tests compare it with the per-cell sum it replaces, on seeded random tables, through the axis hook
 * of patternSearch.
 */
import { describe, expect, it } from 'vitest';
import { patternSearch } from '../../src/core/numeric/minimize.ts';
import { seededRandom } from '../../src/core/numeric/resample.ts';
import { compassSearch2, HalvesObjective, halvesObjective, packCells } from '../../src/fit/gemm-polish.ts';

const NS = [512, 1024, 2048, 4096, 8192, 14336];
const KS = [256, 1024, 4096, 7168, 16384];

/** Cells over NS × KS (some left out), r = a known shape law's ln factor plus noise, weights 1–9. */
function cells(seed: number) {
  const rand = seededRandom(seed);
  const out: Array<{ n: number; k: number; r: number; w: number }> = [];
  for (const n of NS)
    for (const k of KS) {
      if (rand() < 0.2) continue;
      const r = Math.log(n / (n + 900)) + Math.log(k / (k + 300)) + 0.2 * (rand() - 0.5);
      out.push({ n, k, r, w: 1 + Math.floor(rand() * 9) });
    }
  return out;
}

const pack = packCells;

/** The per-cell objective, written out: Σ w·(ln n/(n+e^un) + ln k/(k+e^uk) − r)². */
const perCell = (cs: ReturnType<typeof cells>, un: number, uk: number) =>
  cs.reduce((t, c) => {
    const d = Math.log(c.n / (c.n + Math.exp(un))) + Math.log(c.k / (c.k + Math.exp(uk))) - c.r;
    return t + c.w * d * d;
  }, 0);

describe('GEMM shape-halves polish objective (per-axis sums)', () => {
  it('equals the per-cell sum to rounding at every poll of a search, and the search reaches the per-cell optimum', () => {
    for (const seed of [1, 2, 3]) {
      const cs = cells(seed);
      const f = halvesObjective(pack(cs));
      const polls: Array<[number, number, number]> = [];
      const viaAxes = patternSearch(
        (x, axis) => {
          const v = f(x, axis);
          polls.push([x[0]!, x[1]!, v]);
          return v;
        },
        [Math.log(256), Math.log(256)],
        [0.05, 0.05],
        { minStep: 1e-6, maxEvals: 400 },
      );
      expect(polls.length).toBeGreaterThan(40);
      for (const [un, uk, v] of polls)
        expect(Math.abs(v - perCell(cs, un, uk))).toBeLessThan(1e-12 * perCell(cs, un, uk));
      const plain = patternSearch((x) => perCell(cs, x[0]!, x[1]!), [Math.log(256), Math.log(256)], [0.05, 0.05], {
        minStep: 1e-6,
        maxEvals: 400,
      });
      // Same optimum: the generating values are n_half 900, k_half 300 (noise moves them a little).
      expect(Math.exp(viaAxes.x[0]!)).toBeCloseTo(Math.exp(plain.x[0]!), 2);
      expect(Math.exp(viaAxes.x[1]!)).toBeCloseTo(Math.exp(plain.x[1]!), 2);
      expect(Math.exp(viaAxes.x[0]!)).toBeGreaterThan(500);
      expect(Math.exp(viaAxes.x[0]!)).toBeLessThan(1600);
    }
  });

  it('a hand case: one n, two k, held k_half — the per-n form gives the same number', () => {
    // cells (n=1000, k=1000, r=−1, w=2) and (n=1000, k=3000, r=−0.5, w=1); n_half = k_half = 1000:
    // ln f(n) = ln 0.5, ln f(k) = ln 0.5 and ln 0.75.
    const cs = [
      { n: 1000, k: 1000, r: -1, w: 2 },
      { n: 1000, k: 3000, r: -0.5, w: 1 },
    ];
    const d1 = 2 * Math.log(0.5) + 1;
    const d2 = Math.log(0.5) + Math.log(0.75) + 0.5;
    const want = 2 * d1 * d1 + d2 * d2;
    const f = halvesObjective(pack(cs));
    const u = Math.log(1000);
    expect(f([u, u], -1)).toBeCloseTo(want, 14);
    expect(f([u, u], 0)).toBeCloseTo(want, 14);
    expect(f([u, u], 1)).toBeCloseTo(want, 14);
  });
});

describe('compassSearch2 (patternSearch on two coordinates without an array per poll)', () => {
  /** Objectives with revisits (a lattice-valued bowl), ties, plateaus and a NaN region. */
  const objectives = (rand: () => number) => {
    const a = 0.5 + 3 * rand();
    const b = 2 * (rand() - 0.5);
    const c0 = 3 * (rand() - 0.5);
    const c1 = 3 * (rand() - 0.5);
    return [
      (x0: number, x1: number) => a * (x0 - c0) ** 2 + b * (x0 - c0) * (x1 - c1) + 2 * (x1 - c1) ** 2,
      (x0: number, x1: number) => Math.round(8 * ((x0 - c0) ** 2 + (x1 - c1) ** 2)) / 8,
      (x0: number, x1: number) => Math.abs(x0 - c0) + a * Math.abs(x1 - c1),
      (x0: number, x1: number) => (x0 > c0 + 1 ? Number.NaN : (x0 - c0) ** 2 + (x1 - c1) ** 4),
    ];
  };

  it('polls the same points in the same order and returns what patternSearch returns', () => {
    const rand = seededRandom(11);
    let revisits = 0;
    for (let t = 0; t < 60; t++) {
      const start: [number, number] = [2 * (rand() - 0.5), 2 * (rand() - 0.5)];
      const step: [number, number] = [0.01 + rand(), 0.01 + rand()];
      const minStep = [1e-7, 1e-3, 0.1][t % 3]!;
      const maxEvals = [400, 37, 150][t % 3]!;
      for (const f of objectives(rand)) {
        const mine: number[][] = [];
        const theirs: number[][] = [];
        const a = compassSearch2(
          (x0, x1, axis) => {
            mine.push([x0, x1, axis]);
            return f(x0, x1);
          },
          start,
          step,
          minStep,
          maxEvals,
        );
        const b = patternSearch(
          (x, axis) => {
            theirs.push([x[0]!, x[1]!, axis]);
            return f(x[0]!, x[1]!);
          },
          start,
          step,
          { minStep, maxEvals },
        );
        expect(mine).toEqual(theirs);
        expect(Object.is(a.x[0], b.x[0]) && Object.is(a.x[1], b.x[1])).toBe(true);
        expect(Object.is(a.value, b.value)).toBe(true);
        expect(a.evals).toBe(b.evals);
        revisits += a.evals - mine.length;
      }
    }
    // Some searches came back to a former best point (the skip was exercised).
    expect(revisits).toBeGreaterThan(0);
  });

  it('HalvesObjective in compassSearch2 takes the path of halvesObjective in patternSearch', () => {
    for (const seed of [4, 5, 6]) {
      const cs = cells(seed);
      const o = new HalvesObjective(pack(cs));
      const a = compassSearch2((un, uk, axis) => o.value(un, uk, axis), [5, 6], [0.05, 0.05], 1e-6, 400);
      const b = patternSearch(halvesObjective(pack(cs)), [5, 6], [0.05, 0.05], { minStep: 1e-6, maxEvals: 400 });
      expect(a.x).toEqual(b.x);
      expect(a.value).toBe(b.value);
    }
  });
});
