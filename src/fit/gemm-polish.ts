/**
 * The GEMM shape-halves polish objective (reference §4.3 shape factor; method docs/fitting.md "GEMM
 * ramp"): S(u_n, u_k) = Σ_cells w·(ln f(n; e^u_n) + ln f(k; e^u_k) − r)², f(x; h) = x/(x + h), over
 * the (n, k) cells of one fit or one bootstrap resample, minimised by compass search (patternSearch),
 * which moves one coordinate per poll.
 *
 * With u_k held, S is a sum over the distinct n only: writing D = ln f(k) − r and, per n, W_n = Σ w,
 * D̄_n = Σ w·D / W_n,
 *   S = Σ_n W_n·(ln f(n) + D̄_n)² + Σ_cells w·(D − D̄_n)²
 * (exact algebra; every term a square, so nothing cancels). The per-n sums are taken once per held
 * u_k (once per accepted move of the search), and each poll along u_n costs one pass over the ~20
 * distinct n instead of one over the ~500 cells; the same with n and k swapped. The sums are
 * reassociated, so values agree with the per-cell sum to rounding, not bit for bit (docs/performance.md,
 * session 9).
 */
import { shapeFactor } from '../core/laws/gemm.ts';

/**
 * Shape cells packed for the polish: residual r and weight w per cell, and each cell's n and k as an
 * index among distinct values (`nValues`, `kValues`, elements).
 */
export interface PackedCells {
  r: Float64Array;
  w: Float64Array;
  nIndex: Int32Array;
  kIndex: Int32Array;
  nValues: Float64Array;
  kValues: Float64Array;
}

/** out[j] = ln(shapeFactor(values[j], half)) (core/laws shapeFactor). */
function logShapeFactors(values: Float64Array, half: number, out: Float64Array): void {
  for (let j = 0; j < values.length; j++) out[j] = Math.log(shapeFactor(values[j]!, half));
}

/** Per-value sums of one axis with the other axis's coefficient held at `at` (log units). */
interface AxisSums {
  at: number | undefined;
  weight: Float64Array;
  mean: Float64Array;
  rest: number;
}

const axisSums = (size: number): AxisSums => ({
  at: undefined,
  weight: new Float64Array(size),
  mean: new Float64Array(size),
  rest: 0,
});

/**
 * Fill `s` for cells whose own-axis index is `own` and whose other-axis ln f is `lnOther[other[i]]`:
 * W_j, D̄_j and Σ w·(D − D̄_j)² with D = lnOther − r.
 */
function foldAxis(c: PackedCells, s: AxisSums, own: Int32Array, other: Int32Array, lnOther: Float64Array): void {
  const { r, w } = c;
  s.weight.fill(0);
  s.mean.fill(0);
  for (let i = 0; i < r.length; i++) {
    const j = own[i]!;
    s.weight[j] = s.weight[j]! + w[i]!;
    s.mean[j] = s.mean[j]! + w[i]! * (lnOther[other[i]!]! - r[i]!);
  }
  for (let j = 0; j < s.mean.length; j++) if (s.weight[j]! > 0) s.mean[j] = s.mean[j]! / s.weight[j]!;
  let rest = 0;
  for (let i = 0; i < r.length; i++) {
    const d = lnOther[other[i]!]! - r[i]! - s.mean[own[i]!]!;
    rest += w[i]! * d * d;
  }
  s.rest = rest;
}

/** Σ_j W_j·(lnOwn_j + D̄_j)² + rest (values absent from the cells, W_j = 0, add nothing). */
function axisValue(s: AxisSums, lnOwn: Float64Array): number {
  let t = s.rest;
  for (let j = 0; j < lnOwn.length; j++) {
    const wj = s.weight[j]!;
    if (wj > 0) {
      const d = lnOwn[j]! + s.mean[j]!;
      t += wj * d * d;
    }
  }
  return t;
}

/**
 * The polish objective S at x = (ln n_half, ln k_half) for patternSearch: a poll along one axis
 * (`axis` 0: n_half moves, 1: k_half moves) reads the other axis's sums at the held coefficient,
 * refolded when it changed; the start point (`axis` −1) is the plain per-cell sum in order.
 * Dimensionless (squared ln-efficiency residuals times cell weights).
 */
export function halvesObjective(c: PackedCells): (x: readonly number[], axis: number) => number {
  // One entry per axis (0: n, 1: k): its distinct values, their ln f, each cell's index, and the sums
  // over its values with the other axis held.
  const axes = [
    { values: c.nValues, ln: new Float64Array(c.nValues.length), index: c.nIndex, sums: axisSums(c.nValues.length) },
    { values: c.kValues, ln: new Float64Array(c.kValues.length), index: c.kIndex, sums: axisSums(c.kValues.length) },
  ] as const;
  return (x, axis) => {
    if (axis === 0 || axis === 1) {
      const moved = axes[axis];
      const held = axes[1 - axis]!;
      const at = x[1 - axis]!;
      if (moved.sums.at !== at) {
        logShapeFactors(held.values, Math.exp(at), held.ln);
        foldAxis(c, moved.sums, moved.index, held.index, held.ln);
        moved.sums.at = at;
      }
      logShapeFactors(moved.values, Math.exp(x[axis]!), moved.ln);
      return axisValue(moved.sums, moved.ln);
    }
    const [n, k] = axes;
    logShapeFactors(n.values, Math.exp(x[0]!), n.ln);
    logShapeFactors(k.values, Math.exp(x[1]!), k.ln);
    let t = 0;
    for (let i = 0; i < c.r.length; i++) {
      const d = n.ln[c.nIndex[i]!]! + k.ln[c.kIndex[i]!]! - c.r[i]!;
      t += c.w[i]! * d * d;
    }
    return t;
  };
}

/** The distinct values of `xs` (first-seen order) and each element's position among them. */
export function distinctIndex(xs: readonly number[]): { values: Float64Array; index: Int32Array } {
  const at = new Map<number, number>();
  const index = new Int32Array(xs.length);
  for (let i = 0; i < xs.length; i++) {
    let j = at.get(xs[i]!);
    if (j === undefined) {
      j = at.size;
      at.set(xs[i]!, j);
    }
    index[i] = j;
  }
  return { values: Float64Array.from(at.keys()), index };
}

/** Shape-half cells as flat arrays: residuals, weights and each cell's index into the distinct n and k values. */
export function packCells(cells: ReadonlyArray<{ n: number; k: number; r: number; w: number }>): PackedCells {
  const n = distinctIndex(cells.map((c) => c.n));
  const k = distinctIndex(cells.map((c) => c.k));
  return {
    r: Float64Array.from(cells, (c) => c.r),
    w: Float64Array.from(cells, (c) => c.w),
    nIndex: n.index,
    kIndex: k.index,
    nValues: n.values,
    kValues: k.values,
  };
}
