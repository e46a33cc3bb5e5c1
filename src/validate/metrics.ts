/**
 * Accuracy metrics of predicted vs measured step times. Pure functions, no I/O.
 *
 * Conventions (issue 7; reference §5.2), stated in every report:
 * - APE_i = |p_i/m_i − 1| · 100; MAPE = mean APE.
 * - median and p90 APE: nearest-rank, `sorted[ceil(q·n) − 1]` (src/core/numeric/stats.ts percentileNearestRank).
 * - bias = mean (p_i/m_i − 1) · 100, signed (negative = predicted too fast).
 * - geo_mean_ratio = exp(mean ln(p_i/m_i)).
 * - shape error: within a group, r_i = p_i/m_i, anchor = the row with the lowest batch (first such
 *   row in input order on ties), e_i = r_i / r_anchor − 1 for every other row; shape MAPE =
 *   mean |e_i| · 100 over the non-anchor rows of every group with ≥ 2 rows. A constant factor
 *   cancels, so shape isolates how the error changes with batch.
 */
import { groupBy, percentileNearestRank } from '../core/numeric/stats.ts';
import type { RegimeMetrics } from './types.ts';

/** One scored point. */
export interface ScoredPoint {
  predicted_us: number;
  measured_us: number;
  /** Shape group key; '' = no group (excluded from shape). */
  group: string;
  /** x of the shape anchor (lowest batch). */
  batch: number;
}

/**
 * Shape errors e_i (fractions, signed) of the non-anchor points, per the convention above.
 * Groups with fewer than 2 points contribute nothing.
 */
export function shapeErrors(points: readonly ScoredPoint[]): number[] {
  const out: number[] = [];
  for (const [key, g] of groupBy(points, (p) => p.group)) {
    if (key === '' || g.length < 2) continue;
    let anchor = g[0]!;
    for (const p of g) if (p.batch < anchor.batch) anchor = p;
    const r0 = anchor.predicted_us / anchor.measured_us;
    for (const p of g) if (p !== anchor) out.push(p.predicted_us / p.measured_us / r0 - 1);
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
