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
 * session 9). The ln f tables of recent values are kept (`LnTables`), the weights W_n once per search.
 *
 * `compassSearch2` is patternSearch on two coordinates without an array per poll (the GEMM ramp's
 * polish and this one run it ≈ 1,400 times per h200 fit).
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

/** How many ln f tables an axis keeps: a third of the polls come back to one of the last four values. */
const LN_TABLES = 4;

/**
 * ln f(v; e^u) over one axis's distinct values at the last LN_TABLES log-halves u asked for (least
 * recently used replaced), so a poll back to a recent value, and the held axis of a fold (nearly always
 * the last value polled), read a table instead of taking the logarithms again (the same numbers).
 */
class LnTables {
  private readonly keys = new Float64Array(LN_TABLES).fill(Number.NaN);
  private readonly used = new Float64Array(LN_TABLES);
  private readonly tables: Float64Array[] = [];
  private clock = 0;
  constructor(private readonly values: Float64Array) {
    for (let t = 0; t < LN_TABLES; t++) this.tables.push(new Float64Array(values.length));
  }

  /** The table at log-half u (computed on a miss; NaN never matches, and −0 reads 0's, the same e^u). */
  at(u: number): Float64Array {
    let t = 0;
    while (t < LN_TABLES && this.keys[t] !== u) t++;
    if (t === LN_TABLES) {
      t = 0;
      for (let i = 1; i < LN_TABLES; i++) if (this.used[i]! < this.used[t]!) t = i;
      logShapeFactors(this.values, Math.exp(u), this.tables[t]!);
      this.keys[t] = u;
    }
    this.used[t] = ++this.clock;
    return this.tables[t]!;
  }
}

/** One axis of the polish: its ln f tables, each cell's index, and the sums over its values with the other axis held. */
interface PolishAxis {
  ln: LnTables;
  index: Int32Array;
  /** W_j = Σ w over the cells of value j (in cell order; it does not depend on the held axis). */
  weight: Float64Array;
  /** D̄_j at the held axis's `at`. */
  mean: Float64Array;
  /** Σ w·(D − D̄_j)² at `at`. */
  rest: number;
  /** The other axis's log-half the sums were folded at (NaN: none yet). */
  at: number;
}

function polishAxis(values: Float64Array, index: Int32Array, w: Float64Array): PolishAxis {
  const weight = new Float64Array(values.length);
  for (let i = 0; i < index.length; i++) weight[index[i]!] = weight[index[i]!]! + w[i]!;
  return { ln: new LnTables(values), index, weight, mean: new Float64Array(values.length), rest: 0, at: Number.NaN };
}

/**
 * The polish objective S at (u_n, u_k) = (ln n_half, ln k_half): a poll along one axis (`axis` 0: n_half
 * moves, 1: k_half moves) reads the other axis's sums at the held coefficient, refolded when it changed;
 * the start point (`axis` −1) is the plain per-cell sum in order. Dimensionless (squared ln-efficiency
 * residuals times cell weights). Holds buffers for one search (not re-entrant).
 */
export class HalvesObjective {
  private readonly axes: readonly [PolishAxis, PolishAxis];
  /** D = ln f(other) − r per cell, from the latest fold. */
  private readonly d: Float64Array;
  constructor(private readonly c: PackedCells) {
    this.axes = [polishAxis(c.nValues, c.nIndex, c.w), polishAxis(c.kValues, c.kIndex, c.w)];
    this.d = new Float64Array(c.r.length);
  }

  value(un: number, uk: number, axis: number): number {
    if (axis === 0 || axis === 1) {
      const moved = this.axes[axis]!;
      const held = this.axes[1 - axis]!;
      const at = axis === 0 ? uk : un;
      if (moved.at !== at) {
        this.fold(moved, held.index, held.ln.at(at));
        moved.at = at;
      }
      return axisValue(moved, moved.ln.at(axis === 0 ? un : uk));
    }
    const [n, k] = this.axes;
    const nl = n.ln.at(un);
    const kl = k.ln.at(uk);
    const { r, w, nIndex, kIndex } = this.c;
    let t = 0;
    for (let i = 0; i < r.length; i++) {
      const d = nl[nIndex[i]!]! + kl[kIndex[i]!]! - r[i]!;
      t += w[i]! * d * d;
    }
    return t;
  }

  /** D̄_j and Σ w·(D − D̄_j)² of `s` with D = lnOther[other[i]] − r (W_j is `s.weight`). */
  private fold(s: PolishAxis, other: Int32Array, lnOther: Float64Array): void {
    const { r, w } = this.c;
    const own = s.index;
    const mean = s.mean;
    const weight = s.weight;
    const dd = this.d;
    mean.fill(0);
    // mean[j] += w·d in cell order, with the sum of a run of cells of one value kept in a register (a
    // bootstrap resample's cells come in blocks of one k): the same additions, without a store and a
    // load of mean[j] between two of them.
    let j = own[0] ?? 0;
    let acc = 0;
    for (let i = 0; i < r.length; i++) {
      const d = lnOther[other[i]!]! - r[i]!;
      dd[i] = d;
      const o = own[i]!;
      if (o !== j) {
        mean[j] = acc;
        j = o;
        acc = mean[o]!;
      }
      acc = acc + w[i]! * d;
    }
    if (r.length) mean[j] = acc;
    for (let j = 0; j < mean.length; j++) if (weight[j]! > 0) mean[j] = mean[j]! / weight[j]!;
    let rest = 0;
    for (let i = 0; i < r.length; i++) {
      const d = dd[i]! - mean[own[i]!]!;
      rest += w[i]! * d * d;
    }
    s.rest = rest;
  }
}

/** Σ_j W_j·(lnOwn_j + D̄_j)² + rest (values absent from the cells, W_j = 0, add nothing). */
function axisValue(s: PolishAxis, lnOwn: Float64Array): number {
  let t = s.rest;
  const weight = s.weight;
  const mean = s.mean;
  for (let j = 0; j < lnOwn.length; j++) {
    const wj = weight[j]!;
    if (wj > 0) {
      const d = lnOwn[j]! + mean[j]!;
      t += wj * d * d;
    }
  }
  return t;
}

/** `HalvesObjective` in patternSearch's form (x = [u_n, u_k]). */
export function halvesObjective(c: PackedCells): (x: readonly number[], axis: number) => number {
  const o = new HalvesObjective(c);
  return (x, axis) => o.value(x[0]!, x[1]!, axis);
}

/** How many latest best points patternSearch remembers (core/numeric/minimize.ts VISITED_BESTS). */
const VISITED_BESTS = 8;

/**
 * patternSearch (core/numeric/minimize.ts) on two coordinates, poll for poll: the same points in the same
 * order, the same revisit skips (the last VISITED_BESTS best points), the same result, without an array
 * per poll. `f(x0, x1, axis)` is told which coordinate the poll moves (−1 for the start point).
 * test/fit/gemm-polish.test.ts compares the two on random objectives.
 * @returns the best point, its value and the evaluations counted (skipped revisits included)
 */
export function compassSearch2(
  f: (x0: number, x1: number, axis: number) => number,
  start: readonly [number, number],
  step0: readonly [number, number],
  minStep: number,
  maxEvals: number,
): { x: [number, number]; value: number; evals: number } {
  const x = [start[0], start[1]];
  const step = [step0[0], step0[1]];
  const bests = new Float64Array(2 * VISITED_BESTS);
  let stored = 0;
  const moved = () => {
    const at = 2 * (stored++ % VISITED_BESTS);
    bests[at] = x[0]!;
    bests[at + 1] = x[1]!;
  };
  const seen = (y0: number, y1: number) => {
    for (let b = 0; b < Math.min(stored, VISITED_BESTS); b++)
      if (Object.is(bests[2 * b]!, y0) && Object.is(bests[2 * b + 1]!, y1)) return true;
    return false;
  };
  moved();
  let best = f(x[0]!, x[1]!, -1);
  let evals = 1;
  while (evals < maxEvals) {
    let improved = false;
    for (let i = 0; i < 2 && evals < maxEvals; i++) {
      for (let dir = 1; dir >= -1; dir -= 2) {
        const yi = x[i]! + dir * step[i]!;
        const y0 = i === 0 ? yi : x[0]!;
        const y1 = i === 1 ? yi : x[1]!;
        const v = seen(y0, y1) ? best : f(y0, y1, i);
        evals++;
        if (v < best) {
          best = v;
          x[i] = yi;
          moved();
          improved = true;
          break;
        }
      }
    }
    if (!improved) {
      step[0] = step[0]! / 2;
      step[1] = step[1]! / 2;
      if (!(step[0]! > minStep) && !(step[1]! > minStep)) break;
    }
  }
  return { x: [x[0]!, x[1]!], value: best, evals };
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
