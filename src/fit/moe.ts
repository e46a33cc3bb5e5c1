/**
 * MoE routing-imbalance fitter (issue 3 "MoE routing imbalance"; reference §1.3 names, §6.2 lane,
 * §6.3 procedure).
 *
 * Rows with identical shape — (lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp,
 * ep) — are paired across routing distributions; repeats are reduced with the median. The ratio is
 * latency(power_law_1.01) / latency(balanced). The registry gets its median (type-7) and p90
 * (nearest rank) as `moe_routing_imbalance_median` / `moe_routing_imbalance_p90` (dimensionless, set
 * cost-model-primitives); ci95 from a seeded bootstrap over pairs. alpha 1.2 is reported beside it,
 * never written. Without balanced rows (a100's vLLM table) the fit is refused: a refusal is the
 * correct answer, and BLIS's kernel then defaults the multiplier to 1.0 (reference §4.6).
 *
 * The multiplier is used as latency(skewed) ≈ median · latency(balanced); its train error is that
 * prediction's error on every pair, its holdout error the same with the median computed without the
 * pair's model geometry (hidden, inter, topk, experts): leave-one-geometry-out.
 */
import { resampleEstimates } from '../core/numeric/resample.ts';
import {
  geometricError,
  mapePct,
  median,
  nearestRankSorted,
  percentileNearestRank,
  percentileType7,
  roundSig,
  type7Sorted,
} from '../core/numeric/stats.ts';
import type { CoefficientEntry, Evidence } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { MoeRow } from '../measurements/schema.ts';
import { groupShapes, sortedByKey } from './moe-shapes.ts';
import { fmt, provenance } from './collective-provenance.ts';
import type { FamilyFit, FitContext, FittedCoefficient } from './types.ts';

/** Primary skewed distribution (BLIS's choice). */
export const PRIMARY_DISTRIBUTION = 'power_law_1.01';
/** Reported beside it. */
export const SECONDARY_DISTRIBUTION = 'power_law_1.2';
/** Tokens buckets for the report: [lo, hi] inclusive. */
export const TOKEN_BUCKETS: ReadonlyArray<[number, number]> = [
  [1, 16],
  [17, 128],
  [129, 1024],
  [1025, 8192],
  [8193, Number.POSITIVE_INFINITY],
];

/** One matched pair of shapes. */
export interface MoePair {
  lane: string;
  kernel_source: string;
  dtype: string;
  tokens: number;
  hidden: number;
  inter: number;
  topk: number;
  experts: number;
  tp: number;
  ep: number;
  balanced_us: number;
  skewed_us: number;
  /** skewed / balanced. */
  ratio: number;
}

/** Geometry key used by the holdout. */
export const geometryKey = (p: Pick<MoePair, 'hidden' | 'inter' | 'topk' | 'experts'>): string =>
  `h${p.hidden}/i${p.inter}/top${p.topk}/e${p.experts}`;

/** The pairs of one skewed distribution with the balanced rows (pairMoe, pairMoeAll). */
export interface MoePairing {
  pairs: MoePair[];
  unpaired_skewed: number;
  unpaired_balanced: number;
  balanced_rows: number;
  skewed_rows: number;
}

/**
 * Pair rows of `distribution` with balanced rows of the identical shape and kernel.
 * Repeats on either side are reduced with the median. Pairs come sorted by their shape key.
 */
export function pairMoe(rows: ReadonlyArray<MoeRow>, distribution: string): MoePairing {
  return pairMoeAll(rows, [distribution])[0]!;
}

/**
 * pairMoe for each of `distributions` (in that order) from one grouping of the rows by shape and
 * kernel (issue 17: the fit pairs two distributions with the same balanced rows). Each result is
 * pairMoe's: shapes keyed by the string of their fields joined with `|`, pairs in that key's order
 * (moe-shapes.ts).
 */
export function pairMoeAll(rows: ReadonlyArray<MoeRow>, distributions: readonly string[]): MoePairing[] {
  const { groups, balanced_rows, skewed_rows } = groupShapes(rows, distributions);
  const sorted = sortedByKey(groups);
  return distributions.map((_, d) => {
    const pairs: MoePair[] = [];
    let unpaired_skewed = 0;
    let unpaired_balanced = 0;
    for (const g of sorted) {
      const bal = groups.size(g, 0);
      const skw = groups.size(g, 1 + d);
      if (!bal && !skw) continue;
      if (!bal) unpaired_skewed++;
      else if (!skw) unpaired_balanced++;
      else pairs.push(moePair(groups.rows[g]!, groups.median(g, 0), groups.median(g, 1 + d)));
    }
    return { pairs, unpaired_skewed, unpaired_balanced, balanced_rows, skewed_rows: skewed_rows[d]! };
  });
}

/** The pair of one shape: its key fields from `r`, the balanced and skewed medians (µs) and their ratio. */
const moePair = (r: MoeRow, b: number, w: number): MoePair => ({
  lane: r.lane,
  kernel_source: r.kernel_source,
  dtype: r.dtype,
  tokens: r.tokens,
  hidden: r.hidden,
  inter: r.inter,
  topk: r.topk,
  experts: r.experts,
  tp: r.tp,
  ep: r.ep,
  balanced_us: b,
  skewed_us: w,
  ratio: w / b,
});

/** Median (type-7) and p90 (nearest rank) of the ratios. @throws Error on no pairs. */
export function imbalanceStats(ratios: readonly number[]): { median: number; p90: number; p10: number } {
  return { median: median(ratios), p90: percentileNearestRank(ratios, 0.9), p10: percentileNearestRank(ratios, 0.1) };
}

/**
 * A resample's median (type 7) and p90 (nearest rank) by counting: its sorted sample is every sorted ratio
 * repeated as often as the resample `idx` drew it (`place`: each pair's index among the sorted ratios),
 * so its k-th smallest is the sorted ratio where the running count first passes k. The order statistics
 * type7Sorted and nearestRankSorted read are found so, with their arithmetic, without laying out the
 * sample (issue 17): the median's ranks counting up from the smallest, the p90's counting down from the largest
 * (≈ 0.6 of the sorted ratios read instead of 0.9; the same order statistics). `out` gets [median, p90]. Its own function, loops only: as part of the resample
 * closure, the calls after the loops were reached by loop-entry (OSR) code compiled without their
 * feedback, and the closure was deoptimised at every one of the 200 resamples.
 */
function resampleQuantiles(
  idx: ArrayLike<number>,
  place: Int32Array,
  sorted: Float64Array,
  counts: Int32Array,
  out: Float64Array,
): void {
  const n = counts.length;
  counts.fill(0);
  for (let i = 0; i < n; i++) counts[place[idx[i]!]!]!++;
  const h = (n - 1) * 0.5;
  const lo = Math.floor(h);
  const hi = Math.ceil(h);
  const nr = Math.max(0, Math.ceil(0.9 * n) - 1);
  let vlo = Number.NaN;
  let vhi = Number.NaN;
  let vnr = Number.NaN;
  // cum: how many of the sample's values are ≤ sorted[j] (ranks cum − counts[j] … cum − 1 are sorted[j])
  for (let j = 0, cum = 0; j < n && cum <= hi; j++) {
    const c = counts[j]!;
    if (c === 0) continue;
    cum += c;
    if (cum > lo && cum - c <= lo) vlo = sorted[j]!;
    if (cum > hi && cum - c <= hi) vhi = sorted[j]!;
  }
  // above: how many of the sample's values are ≥ sorted[j] (rank nr is the value where above first passes
  // n − 1 − nr, counting down from the largest: the p90 in a tenth of the scan from the bottom)
  for (let j = n - 1, above = 0; j >= 0 && above <= n - 1 - nr; j--) {
    above += counts[j]!;
    if (above > n - 1 - nr) vnr = sorted[j]!;
  }
  out[0] = vlo + (h - lo) * (vhi - vlo);
  out[1] = vnr;
}
/**
 * `values` ascending, as a sort by value gives them, and each value's place among them (`place[i]`: equal
 * values in index order), as the stable sort of the indices by value gives it (issue 17: without its
 * comparator calls). Values with no NaN and no −0 are sorted natively and placed by binary search; others
 * by that sort.
 */
export function rankedValues(values: readonly number[]): { sorted: Float64Array; place: Int32Array } {
  const n = values.length;
  const place = new Int32Array(n);
  if (values.some((v) => Number.isNaN(v) || Object.is(v, -0))) {
    const order = Array.from(values, (_, i) => i).sort((a, b) => values[a]! - values[b]!);
    order.forEach((i, j) => {
      place[i] = j;
    });
    return { sorted: Float64Array.from(order, (i) => values[i]!), place };
  }
  const sorted = Float64Array.from(values).sort();
  const taken = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const v = values[i]!;
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (sorted[mid]! < v) lo = mid + 1;
      else hi = mid;
    }
    place[i] = lo + taken[lo]!++;
  }
  return { sorted, place };
}

/** imbalanceStats of the ratios, from them sorted ascending (rankedValues). */
function statsOfSorted(sorted: Float64Array): { median: number; p90: number; p10: number } {
  return { median: type7Sorted(sorted, 0.5), p90: nearestRankSorted(sorted, 0.9), p10: nearestRankSorted(sorted, 0.1) };
}

/** Seeded bootstrap over pairs of the median and the p90; intervals widened to contain the estimates if needed. */
export function bootstrapImbalance(
  ratios: readonly number[],
  opts: { resamples: number; seed: number },
): { median_ci95: [number, number]; p90_ci95: [number, number]; widened: string[] } {
  return bootstrapRanked(rankedValues(ratios), imbalanceStats(ratios), opts);
}

/** bootstrapImbalance from the ratios ranked (rankedValues) and their statistics `est`. */
function bootstrapRanked(
  { sorted, place }: { sorted: Float64Array; place: Int32Array },
  est: { median: number; p90: number },
  opts: { resamples: number; seed: number },
): ReturnType<typeof bootstrapImbalance> {
  // A resample's sorted sample is every sorted ratio repeated as often as the resample drew it, so its
  // order statistics are read off by counting (O(n), no sort per resample; issue 17).
  const n = sorted.length;
  const counts = new Int32Array(n);
  const q = new Float64Array(2);
  const boot = resampleEstimates(n, opts.resamples, opts.seed, (idx) => {
    resampleQuantiles(idx, place, sorted, counts, q);
    return [q[0]!, q[1]!] as const;
  });
  const meds = boot.map((b) => b[0]);
  const p90s = boot.map((b) => b[1]);
  const widened: string[] = [];
  const ci = (vals: number[], v: number, name: string): [number, number] => {
    let lo = percentileType7(vals, 0.025);
    let hi = percentileType7(vals, 0.975);
    if (lo > v || hi < v) widened.push(name);
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
    return [lo, hi];
  };
  return { median_ci95: ci(meds, est.median, 'median'), p90_ci95: ci(p90s, est.p90, 'p90'), widened };
}

/** Errors of latency(skewed) ≈ m · latency(balanced). */
function predError(pairs: readonly MoePair[], m: number): { geo: number; mape_pct: number; n: number } {
  const pred = pairs.map((p) => m * p.balanced_us);
  const meas = pairs.map((p) => p.skewed_us);
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: pairs.length };
}

/** The index in 0, 1, 2, … of the k-th (0-based) index not in `skip` (ascending). */
function complementRank(skip: readonly number[], k: number): number {
  let p = k;
  for (const q of skip) {
    if (q > p) break;
    p++;
  }
  return p;
}

/** Leave-one-geometry-out: each geometry's pairs predicted with the median of the other geometries' ratios. */
export function leaveOneGeometryOut(
  pairs: readonly MoePair[],
): { geo: number; mape_pct: number; n: number; geometries: number } | undefined {
  const keys = pairs.map(geometryKey);
  const geos = [...new Set(keys)].sort();
  if (geos.length < 2) return undefined;
  // Each pair's geometry as its index in `geos`, and each geometry's pairs in pair order.
  const gid = new Map(geos.map((g, j) => [g, j]));
  const members: number[][] = geos.map(() => []);
  for (let i = 0; i < keys.length; i++) members[gid.get(keys[i]!)!]!.push(i);
  // Ratios by ascending value, sorted once, and each geometry's places among them (ascending): a
  // geometry's "others" are the sorted ratios without its places, already sorted, so their median is
  // type-7 at 0.5 of them, the value median() gives, read off at two ranks (complementRank).
  const { sorted: ratioSorted, place } = rankedValues(pairs.map((p) => p.ratio));
  const atPlace = new Int32Array(pairs.length);
  place.forEach((j, i) => {
    atPlace[j] = i;
  });
  const places: number[][] = geos.map(() => []);
  for (let j = 0; j < atPlace.length; j++) places[gid.get(keys[atPlace[j]!]!)!]!.push(j);
  const pred: number[] = [];
  const meas: number[] = [];
  for (let g = 0; g < geos.length; g++) {
    const own = places[g]!;
    // type7Sorted(others, 0.5)'s arithmetic on the others' order statistics
    const h = (ratioSorted.length - own.length - 1) * 0.5;
    const lo = Math.floor(h);
    const hi = Math.ceil(h);
    const vlo = ratioSorted[complementRank(own, lo)]!;
    const m = vlo + (h - lo) * (ratioSorted[complementRank(own, hi)]! - vlo);
    for (const i of members[g]!) {
      pred.push(m * pairs[i]!.balanced_us);
      meas.push(pairs[i]!.skewed_us);
    }
  }
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: pred.length, geometries: geos.length };
}

/** What the MoE fit found, for the report: a refusal (no pairs), or the statistics and their errors. */
export type MoeResult =
  | { status: 'refused'; reason: string; message: string }
  | {
      status: 'fitted';
      primary: MoePair[];
      /** SECONDARY_DISTRIBUTION pairs (reported, never written). */
      secondary: MoePair[];
      stats: { median: number; p90: number; p10: number };
      ci: ReturnType<typeof bootstrapImbalance>;
      train: { geo: number; mape_pct: number; n: number };
      holdout?: { geo: number; mape_pct: number; n: number; geometries: number };
      lanes: string[];
      bootstrap: { resamples: number; seed: number };
    };

/** MoE family result. */
export type MoeFit = FamilyFit & { result: MoeResult };

function refusedMoe(rows: readonly MoeRow[], prim: MoePairing, chip: string): MoeFit {
  const lanes = [...new Set(rows.map((r) => r.lane))].sort();
  const reason =
    prim.balanced_rows === 0
      ? `no balanced-routing rows in ${rows.length} MoE rows (lanes ${lanes.join(', ') || 'none'}), so latency(${PRIMARY_DISTRIBUTION})/latency(balanced) cannot be formed`
      : `no ${PRIMARY_DISTRIBUTION} row shares its shape and kernel with a balanced row`;
  const message = `moe: refused on ${chip}: ${reason}. No moe_routing_imbalance_* entry is written; BLIS's kernel then uses 1.0. Fit it from a lane that measured both (reference §6.2 uses sglang for a100).`;
  return {
    family: 'moe',
    coefficients: [],
    refusals: [],
    warnings: [message],
    result: { status: 'refused', reason, message },
  };
}

/** Fit the routing-imbalance multiplier (see module doc). Never throws on data problems. */
export function fitMoe(rows: MoeRow[], ctx: FitContext): MoeFit {
  const [prim, sec] = pairMoeAll(rows, [PRIMARY_DISTRIBUTION, SECONDARY_DISTRIBUTION]) as [MoePairing, MoePairing];
  if (prim.pairs.length === 0) return refusedMoe(rows, prim, ctx.chip.name);
  const ranked = rankedValues(prim.pairs.map((p) => p.ratio));
  const est = statsOfSorted(ranked.sorted);
  const bs = bootstrapRanked(ranked, est, ctx.bootstrap);
  const train = predError(prim.pairs, est.median);
  const hold = leaveOneGeometryOut(prim.pairs);
  const lanes = [...new Set(prim.pairs.map((p) => p.lane))].sort();
  const result: MoeResult = {
    status: 'fitted',
    primary: prim.pairs,
    secondary: sec.pairs,
    stats: est,
    ci: bs,
    train,
    ...(hold ? { holdout: hold } : {}),
    lanes,
    bootstrap: ctx.bootstrap,
  };
  return { family: 'moe', coefficients: moeCoefficients(result, prim, ctx), refusals: [], warnings: [], result };
}

function moeCoefficients(
  r: Extract<MoeResult, { status: 'fitted' }>,
  prim: MoePairing,
  ctx: FitContext,
): FittedCoefficient[] {
  const filter = `distribution ∈ {balanced, ${PRIMARY_DISTRIBUTION}}, paired on identical (lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp, ep); repeats reduced by median`;
  const prov = provenance(ctx, r.lanes, filter, prim.balanced_rows + prim.skewed_rows);
  const sec = r.secondary;
  // median() and percentileNearestRank(·, 0.9) of the ratios (positive: rankedValues sorts them natively)
  const secStats = sec.length ? statsOfSorted(rankedValues(sec.map((p) => p.ratio)).sorted) : undefined;
  const notes = [
    `ratio = latency(${PRIMARY_DISTRIBUTION}) / latency(balanced) over ${prim.pairs.length} pairs (${prim.unpaired_skewed} skewed and ${prim.unpaired_balanced} balanced shapes unpaired)`,
    `median type-7, p90 nearest rank; ${SECONDARY_DISTRIBUTION} (reported, not written): median ${fmt(secStats?.median ?? NaN)}, p90 ${fmt(secStats?.p90 ?? NaN)}`,
    ...r.ci.widened.map(
      (w) => `bootstrap percentile interval of the ${w} missed the estimate and was widened to contain it`,
    ),
  ];
  const hold = r.holdout;
  const ev = (): Evidence => ({
    family: 'moe',
    lane: r.lanes.join('+'),
    inputs: prov.inputs,
    ci_method: 'bootstrap',
    bootstrap: { resamples: ctx.bootstrap.resamples, seed: ctx.bootstrap.seed },
    train_error: { geo: roundSig(r.train.geo, 4), mape_pct: roundSig(r.train.mape_pct, 4), n: r.train.n },
    ...(hold
      ? {
          holdout_error: {
            geo: roundSig(hold.geo, 4),
            mape_pct: roundSig(hold.mape_pct, 4),
            n: hold.n,
            split: `leave-one-geometry-out over ${hold.geometries} (hidden, inter, topk, experts) geometries`,
          },
        }
      : {}),
    notes,
  });
  const entry = (value: number, ci: [number, number]): CoefficientEntry => ({
    value: roundSig(value, 4),
    units: 'dimensionless',
    method: 'measured',
    fitted: false,
    scope: { hardware: [ctx.chip.name] },
    sources: prov.sources,
    ci95: [roundSig(ci[0], 4), roundSig(ci[1], 4)],
    evidence: ev(),
  });
  return [
    { set: SET_NAMES.primitives, name: 'moe_routing_imbalance_median', entry: entry(r.stats.median, r.ci.median_ci95) },
    { set: SET_NAMES.primitives, name: 'moe_routing_imbalance_p90', entry: entry(r.stats.p90, r.ci.p90_ci95) },
  ];
}

/**
 * Residual of one pair under the stored multiplier: ln(median · balanced / skewed) = ln(median / ratio)
 * (the same prediction the train error scores). Positive = the median over-predicts the skewed latency.
 */
export function imbalanceResidual(p: Pick<MoePair, 'ratio'>, medianRatio: number): number {
  return Math.log(medianRatio / p.ratio);
}
