/**
 * Small statistics used by every fitter and by validation. Pure, no I/O, no clock.
 *
 * Conventions (stated in every report that uses them):
 * - percentiles are nearest-rank by default: `sorted[ceil(p·n) − 1]`, p in (0, 1];
 * - geometric error of predictions = exp(mean |ln(pred/meas)|), so 1 is perfect and 1.25 means
 *   "typically off by a factor 1.25";
 * - APE = |pred/meas − 1| · 100 (percent); MAPE its mean.
 */

/** Deterministic PRNG (mulberry32). Same seed → same sequence on every platform. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Nearest-rank percentile of `values` (p in (0,1]). @throws Error on an empty list. */
export function percentileNearestRank(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty list');
  if (!(p > 0 && p <= 1)) throw new Error(`percentile p must be in (0, 1], got ${p}`);
  const s = [...values].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(p * s.length) - 1)]!;
}

/** Type-7 (linear interpolation, R's default) percentile, p in [0,1]. */
export function percentileType7(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty list');
  const s = [...values].sort((a, b) => a - b);
  const h = (s.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  return s[lo]! + (h - lo) * (s[hi]! - s[lo]!);
}

/** Median (type-7, i.e. the mean of the two middle values for even n). */
export function median(values: readonly number[]): number {
  return percentileType7(values, 0.5);
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) throw new Error('mean of an empty list');
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

/** exp(mean |ln(pred_i/meas_i)|). */
export function geometricError(pred: readonly number[], meas: readonly number[]): number {
  if (pred.length !== meas.length || pred.length === 0) throw new Error('geometricError needs equal, non-empty lists');
  let s = 0;
  for (let i = 0; i < pred.length; i++) s += Math.abs(Math.log(pred[i]! / meas[i]!));
  return Math.exp(s / pred.length);
}

/** Mean |pred/meas − 1| in percent. */
export function mapePct(pred: readonly number[], meas: readonly number[]): number {
  if (pred.length !== meas.length || pred.length === 0) throw new Error('mapePct needs equal, non-empty lists');
  let s = 0;
  for (let i = 0; i < pred.length; i++) s += Math.abs(pred[i]! / meas[i]! - 1);
  return (100 * s) / pred.length;
}

/** Mean of ln(pred/meas) (signed; negative = under-prediction). */
export function meanLogRatio(pred: readonly number[], meas: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < pred.length; i++) s += Math.log(pred[i]! / meas[i]!);
  return s / pred.length;
}

/**
 * Seeded bootstrap: resample `n` indices with replacement `resamples` times, call `estimate` on each
 * resample, and return the 2.5% and 97.5% quantiles (type-7) of the estimates that succeeded.
 * `estimate` may return NaN (e.g. a degenerate resample), which is skipped.
 */
export function bootstrapCi(
  n: number,
  estimate: (indices: Uint32Array) => number,
  opts: { resamples?: number; seed?: number } = {},
): { ci95: [number, number]; resamples: number; seed: number; ok: number } {
  const resamples = opts.resamples ?? 200;
  const seed = opts.seed ?? 20261129;
  const rand = seededRandom(seed);
  const values: number[] = [];
  const idx = new Uint32Array(n);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < n; i++) idx[i] = Math.floor(rand() * n);
    const v = estimate(idx);
    if (Number.isFinite(v)) values.push(v);
  }
  if (values.length === 0) return { ci95: [NaN, NaN], resamples, seed, ok: 0 };
  return { ci95: [percentileType7(values, 0.025), percentileType7(values, 0.975)], resamples, seed, ok: values.length };
}

/** Group items by a string key, preserving first-seen key order. */
export function groupBy<T>(items: readonly T[], key: (t: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const it of items) {
    const k = key(it);
    let g = m.get(k);
    if (!g) m.set(k, (g = []));
    g.push(it);
  }
  return m;
}

/** Round to `digits` significant digits (for stable, readable registry values). */
export function roundSig(x: number, digits: number): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  return Number(x.toPrecision(digits));
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
  if (fc < bestF) (bestF = fc), (bestX = c);
  if (fd < bestF) (bestF = fd), (bestX = d);
  return { x: bestX, fx: bestF };
}
