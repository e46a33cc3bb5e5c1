/**
 * core/numeric/lsq.ts nnlsRelative: every subset solved in reused buffers gives the same coefficients,
 * bit for bit, as solving each subset with solveLinear on fresh arrays (the form it replaced, issue 17),
 * and recovers a known non-negative law.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nnlsRelative, relativeSystem, solveLinear } from '../../src/core/numeric/lsq.ts';

/** nnlsRelative as it was: normal equations summed per row, then solveLinear on every subset. */
function reference(X: number[][], y: number[], idx: ArrayLike<number>): number[] {
  const p = X[0]!.length;
  const { stride, terms } = relativeSystem(X, y);
  const acc = new Float64Array(stride);
  for (let t = 0; t < idx.length; t++) for (let k = 0; k < stride; k++) acc[k]! += terms[idx[t]! * stride + k]!;
  const G = Array.from({ length: p }, () => new Array<number>(p).fill(0));
  let k = 0;
  for (let a = 0; a < p; a++) for (let b = a; b < p; b++) G[a]![b] = G[b]![a] = acc[k++]!;
  const h = Array.from(acc.subarray(k));
  let best: number[] | undefined;
  let bestSse = Infinity;
  for (let mask = 1; mask < 1 << p; mask++) {
    const free = [...Array(p).keys()].filter((a) => mask & (1 << a));
    const sol = solveLinear(
      free.map((a) => free.map((b) => G[a]![b]!)),
      free.map((a) => h[a]!),
    );
    if (!sol || sol.some((v) => !(v >= 0) || !Number.isFinite(v))) continue;
    const beta = new Array<number>(p).fill(0);
    free.forEach((a, j) => {
      beta[a] = sol[j]!;
    });
    let sse = idx.length;
    for (let a = 0; a < p; a++) {
      sse -= 2 * beta[a]! * h[a]!;
      for (let b = 0; b < p; b++) sse += beta[a]! * G[a]![b]! * beta[b]!;
    }
    if (best === undefined || sse < bestSse - 1e-12 * Math.abs(bestSse)) [bestSse, best] = [sse, beta];
  }
  if (!best) throw new Error('nnlsRelative: no finite non-negative solution');
  return best;
}

describe('nnlsRelative', () => {
  it('recovers a floor + work/rate law exactly: y = 5 + x/2', () => {
    const X = [1, 2, 4, 8, 16].map((x) => [1, x]);
    const beta = nnlsRelative(
      X,
      X.map((r) => 5 + r[1]! / 2),
    );
    expect(beta[0]).toBeCloseTo(5, 10);
    expect(beta[1]).toBeCloseTo(0.5, 10);
  });

  it('pins a coefficient the data would make negative at 0', () => {
    // y falls with the second column: its unconstrained slope is negative, so β₁ = 0 and β₀ fits alone
    const X = [1, 2, 3, 4].map((x) => [1, x]);
    const beta = nnlsRelative(X, [4, 3, 2, 1]);
    expect(beta[1]).toBe(0);
    expect(beta[0]).toBeGreaterThan(0);
  });

  it('equals the per-subset solveLinear form bit for bit on random systems of 1 to 6 coefficients', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 3, max: 30 }), fc.integer(), (p, m, seed) => {
        let s = seed >>> 0;
        const rnd = () => {
          s = (Math.imul(s, 1103515245) + 12345) >>> 0;
          return s / 2 ** 32;
        };
        const X = Array.from({ length: m }, () =>
          Array.from({ length: p }, () => (rnd() < 0.2 ? 0 : rnd() * 10 ** Math.floor(rnd() * 6))),
        );
        const truth = Array.from({ length: p }, () => (rnd() < 0.3 ? 0 : rnd()));
        const y = X.map((r) => r.reduce((a, v, j) => a + v * truth[j]!, 0) * (0.8 + 0.4 * rnd()) + 1e-3);
        const idx = Uint32Array.from({ length: m }, () => Math.floor(rnd() * m));
        // a draw with every column 0 has no solution: both throw
        const run = (f: () => number[]) => {
          try {
            return f();
          } catch (e) {
            return (e as Error).message;
          }
        };
        const got = run(() => nnlsRelative(relativeSystem(X, y), y, idx));
        const want = run(() => reference(X, y, idx));
        if (typeof want === 'string') expect(got).toBe(want);
        else for (let j = 0; j < p; j++) expect(Object.is((got as number[])[j], want[j])).toBe(true);
      }),
      { numRuns: 500, seed: 10 },
    );
  });
});
