/**
 * The grouped bootstrap resample fitter (src/fit/floor-rate-grouped.ts) against the plain one: the
 * same warm search on the row-by-row objective (searchLogL1 over the gathered resample).
 */
import { describe, expect, it } from 'vitest';
import { gssMinimize, gssMinimize2 } from '../../src/core/numeric/minimize.ts';
import { seededRandom } from '../../src/core/numeric/resample.ts';
import { BOOTSTRAP_SEARCH } from '../../src/fit/attention.ts';
import { gatherRows, packRows, scratchRows, searchLogL1 } from '../../src/fit/attention-decode-law.ts';
import { groupedWarmFit } from '../../src/fit/floor-rate-grouped.ts';

/** Reads of 12 sizes (2–400 MiB), t = 9 µs + bytes / 4.2e6 B/µs, ±15 % noise, 40 reads a size. */
function reads(seed: number) {
  const rand = seededRandom(seed);
  const out: Array<{ work: number; latency_us: number; group: string; kernel_source: string }> = [];
  for (let s = 0; s < 12; s++) {
    const work = 2 ** 21 * Math.round(1 + 199 * (s / 11)) * 1;
    for (let i = 0; i < 40; i++)
      out.push({ work, latency_us: (9 + work / 4.2e6) * (0.85 + 0.3 * rand()), group: 'gemm', kernel_source: '' });
  }
  return out;
}

describe('groupedWarmFit', () => {
  it('a hand case: one size, three reads — the grouped objective is Σ|ln p − ln t| / n', () => {
    // work 1e6 B at floor 10 µs, rate 1e5 B/µs: p = 20 µs; reads 10, 20, 40 µs → (ln 2 + 0 + ln 2) / 3.
    const pts = [10, 20, 40].map((t) => ({ work: 1e6, latency_us: t, group: 'g', kernel_source: '' }));
    const src = packRows(pts);
    expect(searchLogL1(src, 10, 1e5)).toBeCloseTo((2 * Math.LN2) / 3, 14);
    // Warm at the optimum of this one-size problem (any p between 10 and 40 µs on the median, 20):
    // the fitted prediction must come out at the median read, 20 µs.
    const f = groupedWarmFit()(src, Uint32Array.from([0, 1, 2]), [10, 1e5]);
    expect(f.floor_us + 1e6 / f.rate).toBeCloseTo(20, 3);
  });

  it('matches the plain warm search on the gathered resample, resample by resample', () => {
    for (const seed of [3, 4]) {
      const pts = reads(seed);
      const src = packRows(pts);
      const fitResample = groupedWarmFit();
      const scratch = scratchRows(pts.length);
      const rand = seededRandom(seed + 100);
      for (let b = 0; b < 20; b++) {
        const idx = Uint32Array.from({ length: pts.length }, () => Math.floor(rand() * pts.length));
        const got = fitResample(src, idx, [9, 4.2e6]);
        const rows = gatherRows(src, idx, scratch);
        const want = gssMinimize(
          (x) => searchLogL1(rows, Math.exp(x[0]!), Math.exp(x[1]!)),
          [Math.log(9), Math.log(4.2e6)],
          BOOTSTRAP_SEARCH.step0,
          BOOTSTRAP_SEARCH,
        );
        // Same objective to rounding: the same optimum to the search's 1e-5 log step.
        expect(Math.abs(Math.log(got.rate) - want.x[1]!)).toBeLessThan(1e-4);
        expect(Math.abs(Math.log(got.floor_us) - want.x[0]!)).toBeLessThan(1e-3);
        expect(got.rate).toBeGreaterThan(3.5e6);
        expect(got.rate).toBeLessThan(5e6);
      }
    }
  });

  it('gssMinimize2 takes the path of gssMinimize bit for bit (same polls, evaluations and result)', () => {
    const pts = reads(7);
    const src = packRows(pts);
    for (const [x0, step0, opts] of [
      [[Math.log(9), Math.log(4.2e6)], BOOTSTRAP_SEARCH.step0, BOOTSTRAP_SEARCH],
      [[Math.log(50), Math.log(1e6)], 0.5, { minStep: 1e-6, maxEvals: 4000 }],
      [[0, Math.log(4.2e6)], 0.5, { minStep: 1e-6, maxEvals: 37 }],
    ] as const) {
      const seen2: number[] = [];
      const seen1: number[] = [];
      const f = (a: number, b: number, log: number[]) => {
        log.push(a, b);
        return searchLogL1(src, Math.exp(a), Math.exp(b));
      };
      const got = gssMinimize2((a, b) => f(a, b, seen2), [x0[0], x0[1]], step0, opts);
      const want = gssMinimize((x) => f(x[0]!, x[1]!, seen1), x0, step0, opts);
      expect(got.evals).toBe(want.evals);
      expect(Object.is(got.value, want.value)).toBe(true);
      expect(got.x.map((v, k) => Object.is(v, want.x[k]))).toEqual([true, true]);
      expect(seen2.length).toBe(seen1.length);
      expect(seen2.every((v, k) => Object.is(v, seen1[k]))).toBe(true);
    }
  });
});
