import { quickselect } from 'simple-statistics';

/** The seeded PRNG lives with the resampling loop that uses it (resample.ts). */
export { seededRandom } from './resample.ts';

/**
 * Nearest-rank percentile of `values`: the k-th smallest with k = ceil(p·n) − 1 (p in (0, 1]), found
 * by simple-statistics' quickselect on a copy (O(n); bench/stats.bench.ts). The input is not changed.
 * @throws Error on an empty list or p outside (0, 1].
 */
export function percentileNearestRank(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty list');
  if (!(p > 0 && p <= 1)) throw new Error(`percentile p must be in (0, 1], got ${p}`);
  const s = [...values];
  const k = Math.max(0, Math.ceil(p * s.length) - 1);
  quickselect(s, k);
  return s[k]!;
}

/** Nearest-rank percentile of an already ascending, non-empty list: `sorted[ceil(p·n) − 1]`. */
export function nearestRankSorted(sorted: ArrayLike<number>, p: number): number {
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

/**
 * Type-7 percentile (linear interpolation between order statistics, h = (n − 1)·p; R's and numpy's
 * default), p in [0, 1]: interpolates a sorted typed copy (the same value as simple-statistics'
 * `quantile`; bench/stats.bench.ts times and checks both).
 * @throws Error on an empty list or p outside [0, 1].
 */
export function percentileType7(values: readonly number[], p: number): number {
  if (values.length === 0) throw new Error('percentile of an empty list');
  // A typed array sorts numerically in native code without a comparator call per compare: the same
  // ascending order as sort((a, b) => a − b) for the finite values percentiles take (issue 17).
  return type7Sorted(Float64Array.from(values).sort(), p);
}

/** Type-7 percentile of an already ascending, non-empty list: s[lo] + (h − lo)·(s[hi] − s[lo]), h = (n − 1)·p. */
export function type7Sorted(s: ArrayLike<number>, p: number): number {
  const h = (s.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  return s[lo]! + (h - lo) * (s[hi]! - s[lo]!);
}

/** Median: type 7 at p = 0.5 (the mean of the two middle values for even n). @throws Error on an empty list. */
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

/** Group items by a key (string by default), preserving first-seen key order. */
export function groupBy<T, K = string>(items: readonly T[], key: (t: T) => K): Map<K, T[]> {
  const m = new Map<K, T[]>();
  for (const it of items) {
    const k = key(it);
    let g = m.get(k);
    if (!g) {
      g = [];
      m.set(k, g);
    }
    g.push(it);
  }
  return m;
}

/** Round to `digits` significant digits (for stable, readable registry values). */
export function roundSig(x: number, digits: number): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  return Number(x.toPrecision(digits));
}

/** The 1-D grid + golden-section minimiser lives with the other minimisers (minimize.ts). */
export { gridGoldenMin } from './minimize.ts';
