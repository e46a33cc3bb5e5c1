import { Matrix, QrDecomposition } from 'ml-matrix';
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { identifiedColumns, solveLeastSquares } from '../../src/validate/hostfit.ts';

/** A rows × cols design with a constant first column and uniform other columns on [0, scale). */
function design(rand: () => number, rows: number, cols: number): number[][] {
  return Array.from({ length: rows }, () => Array.from({ length: cols }, (_, c) => (c === 0 ? 1 : 100 * c * rand())));
}

describe('host-fit least squares: our Householder solve is ml-matrix’s, bit for bit', () => {
  it('β equals QrDecomposition.solve exactly on 50 random designs, the factors reused across targets', () => {
    const rand = seededRandom(3);
    for (let t = 0; t < 50; t++) {
      const rows = 6 + Math.floor(400 * rand());
      const X = design(rand, rows, 2 + Math.floor(4 * rand()));
      const qr = new QrDecomposition(new Matrix(X));
      const cache = new Map();
      for (let k = 0; k < 3; k++) {
        const y = X.map(() => 1000 * rand());
        expect(solveLeastSquares(() => X, y, cache)).toEqual(qr.solve(Matrix.columnVector(y)).getColumn(0));
      }
      expect(cache.size).toBe(1);
    }
  });

  it('recovers known coefficients from noiseless targets (hand check: y = 30 + 0.5 x1 + 0.02 x2)', () => {
    const X = [
      [1, 10, 100],
      [1, 20, 400],
      [1, 40, 200],
      [1, 80, 900],
    ];
    // Row 1: 30 + 5 + 2 = 37; row 2: 30 + 10 + 8 = 48; row 3: 30 + 20 + 4 = 54; row 4: 30 + 40 + 18 = 88.
    const beta = solveLeastSquares(() => X, [37, 48, 54, 88]);
    expect(beta[0]).toBeCloseTo(30, 9);
    expect(beta[1]).toBeCloseTo(0.5, 9);
    expect(beta[2]).toBeCloseTo(0.02, 9);
  });
});

describe('identifiedColumns', () => {
  it('refuses a column collinear with the admitted ones, a zero column and a non-finite one', () => {
    const rand = seededRandom(5);
    const X = design(rand, 50, 3).map((r) => [...r, 80 * r[0]! + 2 * r[1]!, 0, r[2]! * (1 + rand()), Number.NaN]);
    expect(identifiedColumns(X)).toEqual([true, true, true, false, false, true, false]);
  });

  it('keeps a column that differs from a collinear one by 1e-3 in one row of 40', () => {
    const X = Array.from({ length: 40 }, (_, i) => [1, i, 3 * i + 7 + (i === 17 ? 1e-3 : 0)]);
    expect(identifiedColumns(X)).toEqual([true, true, true]);
    expect(identifiedColumns(X.map((r) => [r[0]!, r[1]!, 3 * r[1]! + 7]))).toEqual([true, true, false]);
  });
});
