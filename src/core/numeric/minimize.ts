/**
 * Deterministic derivative-free minimisers used by the fitters and validation: a compass
 * (coordinate pattern) search, a generating-set search with diagonal directions and step
 * expansion, and a 1-D grid + golden-section search. Pure: no I/O, no clock, no randomness.
 * Units are the caller's (the objective's parameters and value pass through untouched).
 */

/** How many of a search's latest best points `Visited` remembers (revisits are almost all of these). */
const VISITED_BESTS = 8;

/**
 * The latest best points of one search. A search moves only on a strict improvement, so a former
 * best point's value (f is deterministic) cannot beat the current best: a poll that lands on one
 * exactly (coordinate by coordinate, −0 apart from 0) is counted as an evaluation (maxEvals
 * unchanged) and skipped, which leaves every path and result bit-identical. The usual case: a move of
 * a capped step followed by the poll back along the same direction.
 */
class Visited {
  private readonly bests: number[][] = [];
  constructor(x: readonly number[]) {
    this.moved(x);
  }
  moved(x: readonly number[]): void {
    this.bests.push([...x]);
    if (this.bests.length > VISITED_BESTS) this.bests.shift();
  }
  has(y: readonly number[]): boolean {
    return this.bests.some((b) => b.every((v, k) => Object.is(v, y[k])));
  }
}

/**
 * Compass (pattern) search minimiser: tries ±step along each coordinate, keeps improvements, halves
 * the steps when none helps. Derivative-free, so it handles the non-smooth mean |ln(pred/meas)|
 * objective. Deterministic. `f` is told which coordinate a poll moves (`axis`: the poll point is the
 * current best point with only that coordinate changed; −1 for the start point), so an objective may
 * keep sums that do not depend on that coordinate (the GEMM shape-halves polish, src/fit/gemm-polish.ts).
 */
export function patternSearch(
  f: (p: readonly number[], axis: number) => number,
  x0: readonly number[],
  step0: readonly number[],
  opts: { minStep?: number; maxEvals?: number } = {},
): { x: number[]; value: number; evals: number } {
  const minStep = opts.minStep ?? 1e-4;
  const maxEvals = opts.maxEvals ?? 2000;
  const x = [...x0];
  const step = [...step0];
  const seen = new Visited(x);
  let best = f(x, -1);
  let evals = 1;
  while (evals < maxEvals) {
    let improved = false;
    for (let i = 0; i < x.length && evals < maxEvals; i++) {
      for (const dir of [1, -1]) {
        const y = [...x];
        y[i] = y[i]! + dir * step[i]!;
        const v = seen.has(y) ? best : f(y, i);
        evals++;
        if (v < best) {
          best = v;
          x[i] = y[i]!;
          seen.moved(x);
          improved = true;
          break;
        }
      }
    }
    if (!improved) {
      let allSmall = true;
      for (let i = 0; i < step.length; i++) {
        step[i] = step[i]! / 2;
        if (step[i]! > minStep) allSmall = false;
      }
      if (allSmall) break;
    }
  }
  return { x, value: best, evals };
}

/**
 * Generating-set search with step expansion (a derivative-free minimiser for the non-smooth log-L1
 * objective of two or more correlated parameters). Polls ±step along every coordinate AND every
 * pairwise diagonal (e_i ± e_j)/√2, trying the last successful direction first; on success the
 * step doubles (capped at `maxStep`, default `step0`), so the search walks along a diagonal valley in a few moves; on
 * failure it halves, until below `minStep`. The coordinate-only `patternSearch` stalls in such
 * valleys: on l40s hbm_derate (floor and rate trade off along a diagonal) it stopped at
 * derate 0.8397 / floor 10.0 µs while the optimum is 0.8384 / 8.55 µs (objective 0.038054 vs
 * 0.038019), which is what pushed every bootstrap bound to one side of the value (docs/fitting.md).
 * Deterministic.
 */
export function gssMinimize(
  f: (p: readonly number[]) => number,
  x0: readonly number[],
  step0: number,
  opts: { minStep?: number; maxEvals?: number; maxStep?: number } = {},
): { x: number[]; value: number; evals: number } {
  const minStep = opts.minStep ?? 1e-6;
  const maxStep = opts.maxStep ?? step0;
  const maxEvals = opts.maxEvals ?? 4000;
  const n = x0.length;
  const dirs: number[][] = [];
  for (let i = 0; i < n; i++) dirs.push(Array.from({ length: n }, (_, k) => (k === i ? 1 : 0)));
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++)
      for (const sj of [1, -1])
        dirs.push(Array.from({ length: n }, (_, k) => (k === i ? Math.SQRT1_2 : k === j ? sj * Math.SQRT1_2 : 0)));
  let x = [...x0];
  const seen = new Visited(x);
  let best = f(x);
  let evals = 1;
  let step = step0;
  let last = 0;
  while (evals < maxEvals && step >= minStep) {
    let moved = false;
    const order = [last, ...dirs.keys()].filter((d, i, a) => a.indexOf(d) === i);
    poll: for (const d of order) {
      for (const sign of [1, -1]) {
        const y = x.map((v, k) => v + sign * step * dirs[d]![k]!);
        const v = seen.has(y) ? best : f(y);
        evals++;
        if (v < best) {
          best = v;
          x = y;
          seen.moved(x);
          moved = true;
          if (sign < 0) dirs[d] = dirs[d]!.map((c) => -c);
          last = d;
          break poll;
        }
        if (evals >= maxEvals) break poll;
      }
    }
    step = moved ? Math.min(step * 2, maxStep) : step / 2;
  }
  return { x, value: best, evals };
}

/**
 * gssMinimize for two parameters, with the objective taking them as two numbers (`f(x0, x1)`): the
 * same polls in the same order with the same arithmetic (coordinate directions, then the diagonals
 * (1, 1)/√2 and (1, −1)/√2; the last successful direction first; a direction flipped when its
 * negative succeeds), the same skipped revisits of the latest VISITED_BESTS best points, the same
 * step doubling and halving and the same evaluation count, so the same path and result bit for bit;
 * without an array per poll (the bootstrap resamples of src/fit run thousands of polls each).
 * @returns the best point, its value and the evaluations counted (as gssMinimize)
 */
export function gssMinimize2(
  f: (x0: number, x1: number) => number,
  x0: readonly [number, number],
  step0: number,
  opts: { minStep?: number; maxEvals?: number; maxStep?: number } = {},
): { x: number[]; value: number; evals: number } {
  const minStep = opts.minStep ?? 1e-6;
  const maxStep = opts.maxStep ?? step0;
  const maxEvals = opts.maxEvals ?? 4000;
  // Direction d is (dirs[2d], dirs[2d + 1]).
  const dirs = Float64Array.of(1, 0, 0, 1, Math.SQRT1_2, Math.SQRT1_2, Math.SQRT1_2, -1 * Math.SQRT1_2);
  let [a, b] = x0;
  // The latest best points, oldest first: (bests[2i], bests[2i + 1]) for i < nBests.
  const bests = new Float64Array(2 * VISITED_BESTS);
  let nBests = 0;
  const moved = () => {
    if (nBests === VISITED_BESTS) bests.copyWithin(0, 2);
    else nBests++;
    bests[2 * nBests - 2] = a;
    bests[2 * nBests - 1] = b;
  };
  const seen = (ya: number, yb: number) => {
    for (let i = 0; i < nBests; i++) if (Object.is(bests[2 * i]!, ya) && Object.is(bests[2 * i + 1]!, yb)) return true;
    return false;
  };
  moved();
  let best = f(a, b);
  let evals = 1;
  let step = step0;
  let last = 0;
  while (evals < maxEvals && step >= minStep) {
    let improved = false;
    poll: for (let o = -1; o < 4; o++) {
      const d = o < 0 ? last : o;
      if (o === last) continue;
      for (let sign = 1; sign >= -1; sign -= 2) {
        const ya = a + sign * step * dirs[2 * d]!;
        const yb = b + sign * step * dirs[2 * d + 1]!;
        const v = seen(ya, yb) ? best : f(ya, yb);
        evals++;
        if (v < best) {
          best = v;
          a = ya;
          b = yb;
          moved();
          improved = true;
          if (sign < 0) {
            dirs[2 * d] = -dirs[2 * d]!;
            dirs[2 * d + 1] = -dirs[2 * d + 1]!;
          }
          last = d;
          break poll;
        }
        if (evals >= maxEvals) break poll;
      }
    }
    step = improved ? Math.min(step * 2, maxStep) : step / 2;
  }
  return { x: [a, b], value: best, evals };
}

/**
 * Minimise a 1-D function that is unimodal near its minimum: evaluate it on `grid` (sorted), then
 * refine by golden-section search between the best grid point's neighbours.
 *
 * @param f objective (any unit); must be deterministic
 * @param grid candidate abscissae, ascending, at least one
 * @param opts.iterations golden-section steps (default 60), `opts.tol` stop when the bracket is narrower
 * @returns the best point evaluated (grid or refinement) and its value; ties keep the earlier point
 * @throws Error on an empty grid
 */
export function gridGoldenMin(
  f: (x: number) => number,
  grid: readonly number[],
  opts: { iterations?: number; tol?: number } = {},
): { x: number; fx: number } {
  if (grid.length === 0) throw new Error('gridGoldenMin needs at least one grid point');
  const fs = grid.map(f);
  let k = 0;
  for (let i = 1; i < grid.length; i++) if (fs[i]! < fs[k]!) k = i;
  let bestX = grid[k]!;
  let bestF = fs[k]!;
  let a = grid[Math.max(0, k - 1)]!;
  let b = grid[Math.min(grid.length - 1, k + 1)]!;
  const phi = (Math.sqrt(5) - 1) / 2;
  let c = b - phi * (b - a);
  let d = a + phi * (b - a);
  let fc = f(c);
  let fd = f(d);
  const iterations = opts.iterations ?? 60;
  const tol = opts.tol ?? 1e-10;
  for (let it = 0; it < iterations && b - a > tol; it++) {
    if (fc <= fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - phi * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + phi * (b - a);
      fd = f(d);
    }
  }
  if (fc < bestF) {
    bestF = fc;
    bestX = c;
  }
  if (fd < bestF) {
    bestF = fd;
    bestX = d;
  }
  return { x: bestX, fx: bestF };
}
