/**
 * Accuracy metrics of predicted vs measured step times. Pure functions, no I/O.
 *
 * Conventions (issue 7; reference §5.2), stated in every report:
 * - APE_i = |p_i/m_i − 1| · 100; MAPE = mean APE.
 * - median and p90 APE: nearest-rank, `sorted[ceil(q·n) − 1]` (src/core/numeric/stats.ts percentileNearestRank).
 * - bias = mean (p_i/m_i − 1) · 100, signed (negative = predicted too fast).
 * - geo_mean_ratio = exp(mean ln(p_i/m_i)).
 * - shape error (issue 16: robust anchor): within a group, r_i = p_i/m_i, anchor = the group's median
 *   ratio (type-7 median, the mean of the two middle ratios for an even count), e_i = r_i / median − 1
 *   for every row of the group; shape MAPE = mean |e_i| · 100 over the rows of every group with ≥ 2
 *   rows. A constant factor cancels, so shape isolates how the error changes within the group; one bad
 *   row moves the median little, so it no longer inflates every other row's error (the old anchor,
 *   the lowest-batch row, made a 4 % group read 123 % when that row was off).
 */
import { groupBy, median, percentileNearestRank } from '../core/numeric/stats.ts';
import type { RegimeMetrics } from './types.ts';

/** One scored point. */
export interface ScoredPoint {
  predicted_us: number;
  measured_us: number;
  /** Shape group key; '' = no group (excluded from shape). */
  group: string;
  /** The row's batch (x of the error-vs-batch charts). */
  batch: number;
}

/**
 * Shape errors e_i (fractions, signed) of every point of every group with ≥ 2 points, against the
 * group's median ratio (convention above), group by group in first-seen order, input order inside.
 */
export function shapeErrors(points: readonly ScoredPoint[]): number[] {
  const out: number[] = [];
  for (const [key, g] of groupBy(points, (p) => p.group)) {
    if (key === '' || g.length < 2) continue;
    const ratios = g.map((p) => p.predicted_us / p.measured_us);
    const r0 = median(ratios);
    for (const r of ratios) out.push(r / r0 - 1);
  }
  return out;
}

/**
 * Metrics of a non-empty set of points.
 * @throws Error on an empty list or a non-positive measured value (callers filter first).
 */
export function computeMetrics(points: readonly ScoredPoint[]): RegimeMetrics {
  if (points.length === 0) throw new Error('computeMetrics: no points');
  const apes: number[] = [];
  let signed = 0;
  let logSum = 0;
  for (const p of points) {
    if (!(p.measured_us > 0) || !(p.predicted_us > 0))
      throw new Error(`computeMetrics: non-positive time (pred ${p.predicted_us}, meas ${p.measured_us})`);
    const r = p.predicted_us / p.measured_us;
    apes.push(Math.abs(r - 1) * 100);
    signed += (r - 1) * 100;
    logSum += Math.log(r);
  }
  const n = points.length;
  const m: RegimeMetrics = {
    n,
    mape_pct: apes.reduce((a, b) => a + b, 0) / n,
    median_ape_pct: percentileNearestRank(apes, 0.5),
    p90_ape_pct: percentileNearestRank(apes, 0.9),
    bias_pct: signed / n,
    geo_mean_ratio: Math.exp(logSum / n),
  };
  const e = shapeErrors(points);
  if (e.length) {
    m.shape_mape_pct = (e.reduce((a, b) => a + Math.abs(b), 0) / e.length) * 100;
    m.shape_n = e.length;
  }
  return m;
}

/** `computeMetrics`, or null for an empty list. */
export function metricsOrNull(points: readonly ScoredPoint[]): RegimeMetrics | null {
  return points.length ? computeMetrics(points) : null;
}

/** Empirical CDF of APE: sorted APEs with cumulative fraction i/n (for the report chart). */
export function apeCdf(apes: readonly number[]): Array<[number, number]> {
  const s = [...apes].sort((a, b) => a - b);
  return s.map((v, i) => [v, (i + 1) / s.length]);
}
