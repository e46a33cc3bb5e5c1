/**
 * core/numeric/unrolled.ts: the unrolled weighted normal equations are the plain double loop's sums,
 * bit for bit (the same products in the same order), for every width and any selection of rows.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { weightedNormalSums } from '../../src/core/numeric/unrolled.ts';

/** The loop it replaces (src/fit/recurrent.ts wls before issue 17's change). */
function plain(x: Float64Array, t: Float64Array, k: number, use: ArrayLike<number>, w: Float64Array, cols: Int32Array) {
  const q = cols.length;
  const A = new Float64Array(q * q);
  const rhs = new Float64Array(q);
  for (let n = 0; n < use.length; n++) {
    const row = use[n]! * k;
    for (let a = 0; a < q; a++) {
      const wa = w[n]! * x[row + cols[a]!]!;
      rhs[a]! += wa * t[use[n]!]!;
      for (let b = 0; b < q; b++) A[a * q + b]! += wa * x[row + cols[b]!]!;
    }
  }
  return { A, rhs };
}

describe('weightedNormalSums', () => {
  it('a hand-worked 2-column system: A = Σ w·x xᵀ, rhs = Σ w·x·t', () => {
    // rows (1, 2) t = 3, w = 0.5 and (4, 0) t = 1, w = 2, the second row used twice
    const x = Float64Array.from([1, 2, 4, 0]);
    const t = Float64Array.from([3, 1]);
    const A = new Float64Array(4);
    const rhs = new Float64Array(2);
    weightedNormalSums(2)(x, t, 2, [0, 1, 1], Float64Array.from([0.5, 2, 2]), Int32Array.from([0, 1]), A, rhs);
    // A00 = 0.5·1 + 2·16·2 = 64.5, A01 = A10 = 0.5·2 = 1, A11 = 0.5·4 = 2; rhs = (0.5·3 + 2·4·2, 0.5·2·3) = (17.5, 3)
    expect(Array.from(A)).toEqual([64.5, 1, 1, 2]);
    expect(Array.from(rhs)).toEqual([17.5, 3]);
  });

  it('equals the plain loop bit for bit on random systems, widths 1 to 4, any active columns', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 2 ** 31 }),
        (k, n, seed) => {
          let s = seed;
          const rnd = () => {
            s = (Math.imul(s, 1103515245) + 12345) >>> 0;
            return (s / 2 ** 32) * 10 ** ((s % 7) - 3);
          };
          const x = Float64Array.from({ length: n * k }, rnd);
          const t = Float64Array.from({ length: n }, () => rnd() + 1e-3);
          const use = Uint32Array.from({ length: n }, () => Math.floor((rnd() * 1e9) % n));
          const w = Float64Array.from({ length: n }, () => 1 / (rnd() + 1e-3));
          const cols = Int32Array.from([...Array(k).keys()].filter((j) => j === 0 || rnd() > 0.3));
          const q = cols.length;
          const A = new Float64Array(q * q);
          const rhs = new Float64Array(q);
          weightedNormalSums(q)(x, t, k, use, w, cols, A, rhs);
          const want = plain(x, t, k, use, w, cols);
          expect(A).toEqual(want.A);
          expect(rhs).toEqual(want.rhs);
          for (let i = 0; i < q * q; i++) expect(Object.is(A[i], want.A[i])).toBe(true);
        },
      ),
      { numRuns: 300, seed: 10 },
    );
  });

  it('refuses a width outside 1…8', () => {
    expect(() => weightedNormalSums(0)).toThrow(/expected 1 to 8/);
    expect(() => weightedNormalSums(9)).toThrow(/expected 1 to 8/);
  });
});
