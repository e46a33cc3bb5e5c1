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
 * kernel (issue 17: the fit pairs two distributions with the same balanced rows; the shape key string
 * is built once per row instead of once per row per distribution). Each result is pairMoe's.
 */
export function pairMoeAll(rows: ReadonlyArray<MoeRow>, distributions: readonly string[]): MoePairing[] {
  const shapes = new Map<string, { row: MoeRow; bal: number[]; skw: number[][] }>();
  let balanced_rows = 0;
  const skewed_rows = distributions.map(() => 0);
  for (const r of rows) {
    const isBal = r.distribution === 'balanced';
    const d = isBal ? -1 : distributions.indexOf(r.distribution);
    if (!isBal && d < 0) continue;
    if (isBal) balanced_rows++;
    else skewed_rows[d]!++;
    const k = `${r.lane}|${r.kernel_source}|${r.dtype}|${r.tokens}|${r.hidden}|${r.inter}|${r.topk}|${r.experts}|${r.tp}|${r.ep}`;
    let s = shapes.get(k);
    if (!s) {
      s = { row: r, bal: [], skw: distributions.map(() => []) };
      shapes.set(k, s);
    }
    (isBal ? s.bal : s.skw[d]!).push(r.latency_us);
  }
  const keys = [...shapes.keys()].sort();
  return distributions.map((_, d) => {
    const pairs: MoePair[] = [];
    let unpaired_skewed = 0;
    let unpaired_balanced = 0;
    for (const k of keys) {
      const s = shapes.get(k)!;
      const skw = s.skw[d]!;
      if (!s.bal.length && !skw.length) continue;
      if (!s.bal.length) unpaired_skewed++;
      else if (!skw.length) unpaired_balanced++;
      else pairs.push(moePair(s.row, median(s.bal), median(skw)));
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
 * A resample's sorted sample by counting: every sorted ratio repeated as often as the resample `idx`
 * drew it (`place`: each pair's index among the sorted ratios). Its own function, loops only: as part
 * of the resample closure, the calls after the loops were reached by loop-entry (OSR) code compiled
 * without their feedback, and the closure was deoptimised at every one of the 200 resamples.
 */
function sortedResample(
  idx: ArrayLike<number>,
  place: Int32Array,
  sorted: Float64Array,
  counts: Int32Array,
  sample: Float64Array,
): void {
  const n = counts.length;
  counts.fill(0);
  for (let i = 0; i < n; i++) counts[place[idx[i]!]!]!++;
  for (let j = 0, k = 0; j < n; j++) for (let c = counts[j]!; c > 0; c--) sample[k++] = sorted[j]!;
}
/** Seeded bootstrap over pairs of the median and the p90; intervals widened to contain the estimates if needed. */
export function bootstrapImbalance(
  ratios: readonly number[],
  opts: { resamples: number; seed: number },
): { median_ci95: [number, number]; p90_ci95: [number, number]; widened: string[] } {
  const n = ratios.length;
  // The ratios sorted once, and each pair's place among them: a resample's sorted sample is then
  // every sorted ratio repeated as often as the resample drew it, laid out by counting (O(n), no sort
  // per resample; the same array the sort gave, so the same statistics; issue 17).
  const order = Array.from(ratios, (_, i) => i).sort((a, b) => ratios[a]! - ratios[b]!);
  const sorted = Float64Array.from(order, (i) => ratios[i]!);
  const place = new Int32Array(n);
  order.forEach((i, j) => {
    place[i] = j;
  });
  const counts = new Int32Array(n);
  const sample = new Float64Array(n);
  const boot = resampleEstimates(n, opts.resamples, opts.seed, (idx) => {
    sortedResample(idx, place, sorted, counts, sample);
    return [type7Sorted(sample, 0.5), nearestRankSorted(sample, 0.9)] as const;
  });
  const meds = boot.map((b) => b[0]);
  const p90s = boot.map((b) => b[1]);
  const est = imbalanceStats(ratios);
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
  // Ratios by ascending value (with their geometry), sorted once: each geometry's "others" read in this
  // order are already sorted, so their median is type-7 at 0.5 of them, the value median() gives.
  const byRatio = pairs.map((_, i) => i).sort((a, b) => pairs[a]!.ratio - pairs[b]!.ratio);
  const ratioSorted = Float64Array.from(byRatio, (i) => pairs[i]!.ratio);
  const gidSorted = Int32Array.from(byRatio, (i) => gid.get(keys[i]!)!);
  const others = new Float64Array(pairs.length);
  const pred: number[] = [];
  const meas: number[] = [];
  for (let g = 0; g < geos.length; g++) {
    let n = 0;
    for (let j = 0; j < ratioSorted.length; j++) if (gidSorted[j] !== g) others[n++] = ratioSorted[j]!;
    const m = type7Sorted(others.subarray(0, n), 0.5);
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
  const ratios = prim.pairs.map((p) => p.ratio);
  const est = imbalanceStats(ratios);
  const bs = bootstrapImbalance(ratios, ctx.bootstrap);
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
  const notes = [
    `ratio = latency(${PRIMARY_DISTRIBUTION}) / latency(balanced) over ${prim.pairs.length} pairs (${prim.unpaired_skewed} skewed and ${prim.unpaired_balanced} balanced shapes unpaired)`,
    `median type-7, p90 nearest rank; ${SECONDARY_DISTRIBUTION} (reported, not written): median ${fmt(sec.length ? median(sec.map((p) => p.ratio)) : NaN)}, p90 ${fmt(
      sec.length
        ? percentileNearestRank(
            sec.map((p) => p.ratio),
            0.9,
          )
        : NaN,
    )}`,
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
