/**
 * Pure maths of the collective fit (reference §6.3 "Collectives"; issue 3 "Collectives").
 *
 * One curve = the latency of one (op, dtype, ranks, backend, lane) configuration over message sizes.
 *   floor t0   = minimum latency over messages ≤ 4 KiB               (measured, not fitted)
 *   r_peak     = maximum message_bytes / latency over the sweep      (measured, a lower bound if the
 *                sweep never saturates)
 *   r_t        = argmin over r_t ∈ [r_peak·1e-4, r_peak] of mean |ln(t(b)/meas)|, with
 *                t(b) = max(t0 + b/r_t, b/r_peak), t0 and r_peak fixed  (fitted)
 *
 * Note: with t0 > 0 and r_t ≤ r_peak (a plausibility gate), t0 + b/r_t > b/r_peak for every b, so the
 * peak branch of the max never binds and the three-parameter law behaves as the affine law
 * t0 + b/r_t. r_peak is still recorded: BLIS's kernel reads it, and it is the comparator's rate.
 * The two-parameter comparator is BLIS's fallback law max(t0, b/r_peak) (reference §4.7).
 *
 * Units: message_bytes in bytes, latency in µs, rates in bytes per µs. No I/O, no clock.
 */
import { collectiveTime } from '../core/laws/collective.ts';
import { gridGoldenMin } from '../core/numeric/minimize.ts';
import { candidateGrid, ResampleRateSearch } from './collective-bootstrap.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { geometricError, groupBy, mapePct, median, percentileType7 } from '../core/numeric/stats.ts';

/** Messages at or below this many bytes form the size-independent region the floor is read from. */
export const SMALL_MESSAGE_BYTES = 4096;

/** One point of a curve after repeats were reduced with the median. */
export interface CurvePoint {
  message_bytes: number;
  latency_us: number;
}

/** Result of fitting one curve. */
export interface CurveFit {
  t0_us: number;
  /** [min, second-smallest] latency over messages ≤ 4 KiB (equal to [t0, t0] when only one). */
  t0_ci95: [number, number];
  /** Number of distinct message sizes ≤ 4 KiB. */
  n_small: number;
  r_peak_bytes_per_us: number;
  /** [second-largest, largest] achieved bytes/µs. */
  r_peak_ci95: [number, number];
  /** Message size at which r_peak was reached. */
  r_peak_at_bytes: number;
  r_t_bytes_per_us: number;
  /** True when the optimum sat on the upper bound r_t = r_peak (constraint active). */
  r_t_at_peak: boolean;
  /** Mean |ln(pred/meas)| at the optimum. */
  objective: number;
  /** Errors of the three-parameter law on the fitted points. */
  geo3: number;
  mape3_pct: number;
  /** Errors of the two-parameter comparator max(t0, b/r_peak). */
  geo2: number;
  mape2_pct: number;
  /** Distinct message sizes used. */
  n: number;
}

/**
 * Reduce repeats (same message_bytes) with the median and sort by size.
 * @throws Error on a non-positive or non-finite size or latency.
 */
export function reduceRepeats(points: ReadonlyArray<CurvePoint>): CurvePoint[] {
  for (const p of points) {
    if (!(p.message_bytes > 0) || !Number.isFinite(p.message_bytes))
      throw new Error(`message_bytes must be positive, got ${p.message_bytes}`);
    if (!(p.latency_us > 0) || !Number.isFinite(p.latency_us))
      throw new Error(`latency_us must be positive, got ${p.latency_us}`);
  }
  const by = groupBy(points, (p) => p.message_bytes);
  return [...by.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([b, ps]) => ({ message_bytes: b, latency_us: median(ps.map((p) => p.latency_us)) }));
}

/** Mean |ln(t(b)/meas)| of the three-parameter law over `pts` (indices `idx` when given). */
export function collectiveObjective(
  pts: ReadonlyArray<CurvePoint>,
  t0_us: number,
  r_t: number,
  r_peak: number,
  idx?: ArrayLike<number>,
): number {
  const c = { t0_us, r_t_bytes_per_us: r_t, r_peak_bytes_per_us: r_peak };
  let s = 0;
  const n = idx ? idx.length : pts.length;
  for (let j = 0; j < n; j++) {
    const p = pts[idx ? idx[j]! : j]!;
    s += Math.abs(Math.log(collectiveTime(p.message_bytes, c) / p.latency_us));
  }
  return s / n;
}

/** The points' message bytes and measured µs as typed columns (a plain loop: `from` with a map function iterates). */
function pointColumns(pts: ReadonlyArray<CurvePoint>): { bytes: Float64Array; meas: Float64Array } {
  const bytes = new Float64Array(pts.length);
  const meas = new Float64Array(pts.length);
  for (let i = 0; i < pts.length; i++) {
    bytes[i] = pts[i]!.message_bytes;
    meas[i] = pts[i]!.latency_us;
  }
  return { bytes, meas };
}

/**
 * The distinct values of `idx` (each in 0…n−1) in first-seen order: what a Set of them iterates,
 * without the Set and its iterator's result objects (≈ 20 MB per h200 fit in the bootstrap).
 */
function distinctInOrder(idx: ArrayLike<number>, n: number): Int32Array {
  const seen = new Uint8Array(n);
  const out = new Int32Array(Math.min(n, idx.length));
  let m = 0;
  for (let j = 0; j < idx.length; j++) {
    const i = idx[j]!;
    if (seen[i]) continue;
    seen[i] = 1;
    out[m++] = i;
  }
  return out.subarray(0, m);
}

/**
 * `collectiveObjective` over the resample `idx` as a function of L = ln r_t, the same value bit for
 * bit: each distinct point's |ln ratio| is taken once per L (a resample repeats about a third of its
 * points), then summed in idx order, as the direct loop sums them.
 */
function resampleObjective(
  pts: ReadonlyArray<CurvePoint>,
  t0_us: number,
  r_peak: number,
  idx: ArrayLike<number>,
): (L: number) => number {
  const used = distinctInOrder(idx, pts.length);
  const { bytes, meas } = pointColumns(pts);
  const computed = new Float64Array(pts.length);
  const n = idx.length;
  return (L) => {
    const c = { t0_us, r_t_bytes_per_us: Math.exp(L), r_peak_bytes_per_us: r_peak };
    for (let u = 0; u < used.length; u++) {
      const i = used[u]!;
      computed[i] = Math.abs(Math.log(collectiveTime(bytes[i]!, c) / meas[i]!));
    }
    let s = 0;
    for (let j = 0; j < n; j++) s += computed[idx[j]!]!;
    return s / n;
  };
}

/**
 * `values` sorted ascending with repeats dropped (in place; returns `values`): the sorted values of a Set of
 * them, without the Set's iterator (the sort is stable, so of equal values the first kept is the
 * first inserted, as in the Set).
 */
function sortedDistinct(values: number[]): number[] {
  values.sort((a, b) => a - b);
  let m = 0;
  for (let i = 0; i < values.length; i++) if (m === 0 || values[i] !== values[m - 1]) values[m++] = values[i]!;
  values.length = m;
  return values;
}

/**
 * Fit r_t with t0 and r_peak fixed: a 1-D minimisation of the mean |ln ratio| over ln r_t in
 * [ln(r_peak·1e-4), ln r_peak]. The objective is piecewise smooth with kinks where a prediction
 * crosses its measurement (r_t = b_i/(m_i − t0)); we evaluate every kink inside the bracket, the
 * bracket ends and a 48-point log grid, then refine between the best candidate's neighbours with
 * golden-section search. Deterministic. The bootstrap fits its resamples with ResampleRateSearch
 * (collective-bootstrap.ts), which gives this function's r_t for each, bit for bit.
 */
export function fitTransitionRate(
  pts: ReadonlyArray<CurvePoint>,
  t0_us: number,
  r_peak: number,
  idx?: ArrayLike<number>,
): { r_t: number; objective: number; at_peak: boolean } {
  const { hiL, grid, kink } = candidateGrid(t0_us, r_peak, pts);
  const f = idx
    ? resampleObjective(pts, t0_us, r_peak, idx)
    : (L: number) => collectiveObjective(pts, t0_us, Math.exp(L), r_peak);
  const cand = [...grid];
  const n = idx ? idx.length : pts.length;
  for (let j = 0; j < n; j++) {
    const L = kink[idx ? idx[j]! : j]!;
    if (!Number.isNaN(L)) cand.push(L);
  }
  const { x: bestL, fx: bestF } = gridGoldenMin(f, sortedDistinct(cand));
  const r_t = Math.min(Math.exp(bestL), r_peak);
  return { r_t, objective: bestF, at_peak: hiL - bestL < 1e-9 };
}

/**
 * Fit one curve (repeats must already be reduced; see `reduceRepeats`).
 * @throws Error when there is no message ≤ 4 KiB (no floor) or no message above it (no rate), or fewer than 3 sizes.
 */
export function fitCurve(points: ReadonlyArray<CurvePoint>): CurveFit {
  const pts = [...points].sort((a, b) => a.message_bytes - b.message_bytes);
  if (pts.length < 3) throw new Error(`needs at least 3 distinct message sizes, got ${pts.length}`);
  const small = pts
    .filter((p) => p.message_bytes <= SMALL_MESSAGE_BYTES)
    .map((p) => p.latency_us)
    .sort((a, b) => a - b);
  if (small.length === 0) throw new Error(`no message ≤ ${SMALL_MESSAGE_BYTES} B, so the floor is unmeasured`);
  if (!pts.some((p) => p.message_bytes > SMALL_MESSAGE_BYTES))
    throw new Error(`no message > ${SMALL_MESSAGE_BYTES} B, so no rate can be fitted`);
  const t0 = small[0]!;
  const bw = pts.map((p) => ({ r: p.message_bytes / p.latency_us, b: p.message_bytes })).sort((a, b) => a.r - b.r);
  const top = bw[bw.length - 1]!;
  const r_peak = top.r;
  const second = bw.length > 1 ? bw[bw.length - 2]!.r : r_peak;
  const rt = fitTransitionRate(pts, t0, r_peak);
  const meas = pts.map((p) => p.latency_us);
  const pred3 = pts.map((p) =>
    collectiveTime(p.message_bytes, { t0_us: t0, r_t_bytes_per_us: rt.r_t, r_peak_bytes_per_us: r_peak }),
  );
  const pred2 = pts.map((p) => collectiveTime(p.message_bytes, { t0_us: t0, r_peak_bytes_per_us: r_peak }));
  return {
    t0_us: t0,
    t0_ci95: [t0, small[1] ?? t0],
    n_small: small.length,
    r_peak_bytes_per_us: r_peak,
    r_peak_ci95: [second, r_peak],
    r_peak_at_bytes: top.b,
    r_t_bytes_per_us: rt.r_t,
    r_t_at_peak: rt.at_peak,
    objective: rt.objective,
    geo3: geometricError(pred3, meas),
    mape3_pct: mapePct(pred3, meas),
    geo2: geometricError(pred2, meas),
    mape2_pct: mapePct(pred2, meas),
    n: pts.length,
  };
}

/**
 * Seeded bootstrap of r_t over message sizes (t0 and r_peak held at their full-data values, as the
 * method defines r_t). Returns the type-7 2.5%/97.5% quantiles, widened to contain `r_t` if the
 * percentile interval misses it (noted by `widened`).
 */
export function bootstrapTransitionRate(
  pts: ReadonlyArray<CurvePoint>,
  fit: Pick<CurveFit, 't0_us' | 'r_peak_bytes_per_us' | 'r_t_bytes_per_us'>,
  opts: { resamples: number; seed: number },
): { ci95: [number, number]; ok: number; widened: boolean } {
  const search = new ResampleRateSearch(pts, fit.t0_us, fit.r_peak_bytes_per_us);
  // A resample without any message above the small region cannot identify a rate (undefined).
  const vals = resampleEstimates(pts.length, opts.resamples, opts.seed, (idx) => search.rate(idx, SMALL_MESSAGE_BYTES));
  if (vals.length === 0) return { ci95: [fit.r_t_bytes_per_us, fit.r_t_bytes_per_us], ok: 0, widened: true };
  let lo = percentileType7(vals, 0.025);
  let hi = percentileType7(vals, 0.975);
  const widened = lo > fit.r_t_bytes_per_us || hi < fit.r_t_bytes_per_us;
  lo = Math.min(lo, fit.r_t_bytes_per_us);
  hi = Math.max(hi, fit.r_t_bytes_per_us);
  return { ci95: [lo, hi], ok: vals.length, widened };
}

/** A measured curve's width and fitted coefficients, the input of the width holdout. */
export interface WidthCurve {
  ranks: number;
  points: CurvePoint[];
  fit: CurveFit;
}

/**
 * Least-squares line floor(n) = a + b·(n − 1) through (ranks, t0) pairs (reference §6.3 width
 * extrapolation). With one width, b = 0.
 */
export function floorWidthLine(pairs: ReadonlyArray<{ ranks: number; t0_us: number }>): { a: number; b: number } {
  if (pairs.length === 0) throw new Error('floorWidthLine needs at least one width');
  if (pairs.length === 1) return { a: pairs[0]!.t0_us, b: 0 };
  const xs = pairs.map((p) => p.ranks - 1);
  const ys = pairs.map((p) => p.t0_us);
  const mx = xs.reduce((s, x) => s + x, 0) / xs.length;
  const my = ys.reduce((s, y) => s + y, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < xs.length; i++) {
    sxy += (xs[i]! - mx) * (ys[i]! - my);
    sxx += (xs[i]! - mx) ** 2;
  }
  const b = sxx > 0 ? sxy / sxx : 0;
  return { a: my - b * mx, b };
}

/** Prediction of one width's curve from the other widths. */
export interface WidthHoldout {
  ranks: number;
  from_ranks: number[];
  /** Width whose rates were borrowed (nearest; ties → wider). */
  rates_from: number;
  t0_pred_us: number;
  t0_meas_us: number;
  geo: number;
  mape_pct: number;
  n: number;
}

/**
 * Leave-one-width-out: for each width, predict its curve with floor = a + b·(n − 1) fitted on the
 * other widths and rates copied from the nearest other width (ties go to the wider one, as the
 * reference copies rates from the widest measured width for extrapolation). Needs ≥ 2 other widths
 * for the floor line; with fewer, that width gets no holdout.
 */
export function leaveOneWidthOut(curves: ReadonlyArray<WidthCurve>): WidthHoldout[] {
  const out: WidthHoldout[] = [];
  for (const held of curves) {
    const others = curves.filter((c) => c.ranks !== held.ranks);
    if (others.length < 2) continue;
    const line = floorWidthLine(others.map((c) => ({ ranks: c.ranks, t0_us: c.fit.t0_us })));
    const t0p = line.a + line.b * (held.ranks - 1);
    const src = [...others].sort(
      (x, y) => Math.abs(x.ranks - held.ranks) - Math.abs(y.ranks - held.ranks) || y.ranks - x.ranks,
    )[0]!;
    const c = {
      t0_us: t0p,
      r_t_bytes_per_us: src.fit.r_t_bytes_per_us,
      r_peak_bytes_per_us: src.fit.r_peak_bytes_per_us,
    };
    const meas = held.points.map((p) => p.latency_us);
    const pred = held.points.map((p) => collectiveTime(p.message_bytes, c));
    const ok = t0p > 0;
    out.push({
      ranks: held.ranks,
      from_ranks: others.map((o) => o.ranks).sort((a, b) => a - b),
      rates_from: src.ranks,
      t0_pred_us: t0p,
      t0_meas_us: held.fit.t0_us,
      geo: ok ? geometricError(pred, meas) : Infinity,
      mape_pct: ok ? mapePct(pred, meas) : Infinity,
      n: meas.length,
    });
  }
  return out;
}
