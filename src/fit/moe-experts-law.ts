/**
 * Fitting the expert-time law (src/core/laws/moe-experts.ts) to fused-MoE timings: the numeric
 * part, returning plain data (issue 13 item 1). No I/O, no drawing.
 *
 * With the HBM derate fixed (the `hbm` family's value), the law is linear in eight unknowns:
 *
 *   t − read = floor + c1·A + c2·B + c3·R + c4·D + c5·Q + c6·G + c7·X,   A = W·P/peak, B = W·D/peak, R = route bytes,
 *   D = touched experts, Q = pair bytes P·H·2, G = re-read bytes / (HBM·derate) (µs), X = token bytes T·H·2,
 *   c1 = 1/eps_max, c2 = m_half/eps_max,  c3 = 1/route_rate,  c4 = expert_us,  c5 = 1/pair_rate,  c6 = reread,
 *   c7 = 1/token_rate
 *
 * so it is fitted by least squares on RELATIVE residuals (weights 1/t², the scale the geo error
 * scores), every coefficient kept ≥ 0 (a negative one is pinned at 0 and the rest refitted). Normal
 * equations are accumulated per series (one kernel and shape over tokens), so the bootstrap, which
 * resamples whole series (points of one series are not independent), costs an 8×8 sum per series. A column
 * that is zero on every row fitted (G where no expert outgrows L2 or no m passes one tile) is pinned at its bound.
 * The max(read, arith) alternative is not linear and is fitted, like the sum for the comparison, by
 * pattern search on mean |ln(pred/meas)|, so both compositions are scored by their own best fit.
 */
import type { ExpertCoefficients, ExpertLayerShape, ExpertRates, ExpertWork } from '../core/laws/moe-experts.ts';
import { expertGeometryKey, expertReadUs, expertWork } from '../core/laws/moe-experts.ts';
import { patternSearch } from '../core/numeric/minimize.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { geometricError, mapePct } from '../core/numeric/stats.ts';
import { memoByObject } from '../core/text-memo.ts';
import type { MoeRow } from '../measurements/schema.ts';
import { ciFromEstimates, reduceRepeatsBy } from './common.ts';
import { type GroupRouting, groupedWork } from './moe-grouped-routing.ts';

/** One measured layer timing with its shape-only quantities precomputed. */
export interface ExpertPoint {
  shape: ExpertLayerShape;
  kernel_source: string;
  latency_us: number;
  work: ExpertWork;
  /** Weight read at the derated HBM rate, µs. */
  read_us: number;
  /** Design row [1, A, B, R, D, Q, G, X] of the linear form. */
  f: [number, number, number, number, number, number, number, number];
}

/** Points of one kernel and shape over tokens, sorted by tokens. */
export interface ExpertSeries {
  key: string;
  geometry: string;
  points: ExpertPoint[];
}

/** A series is screened out when a larger token count runs this much faster than a smaller one. */
export const NON_MONOTONE_RATIO = 0.7;

/**
 * One reduced row as a point: its shape (the collector's balanced routing on `balanced` rows: they touch the
 * experts that routing does, not the law's expectation), work, weight read and design row.
 */
function expertPoint(r: MoeRow, balanced: boolean, rates: ExpertRates): ExpertPoint {
  const shape: ExpertLayerShape = {
    tokens: r.tokens,
    hidden: r.hidden,
    inter: r.inter,
    topk: r.topk,
    experts: r.experts,
    tp: r.tp,
    ep: r.ep,
  };
  if (balanced) shape.routing = 'balanced';
  const work = expertWork(shape, rates.bytes_per_element, rates.l2_bytes);
  return pointOf(shape, r.kernel_source, r.latency_us, work, rates);
}

/** A point from its work: the weight read at the derated HBM rate and the design row [1, A, B, R, D, Q, G, X]. */
function pointOf(
  shape: ExpertLayerShape,
  kernel_source: string,
  latency_us: number,
  work: ExpertWork,
  rates: ExpertRates,
): ExpertPoint {
  const pk = rates.peak_flops_per_us;
  return {
    shape,
    kernel_source,
    latency_us,
    work,
    read_us: expertReadUs(work, rates),
    f: [
      1,
      (work.flops_per_pair * work.pairs) / pk,
      (work.flops_per_pair * work.touched) / pk,
      work.route_bytes,
      work.touched,
      work.pair_bytes,
      work.reread_bytes / (rates.hbm_bytes_per_us * rates.hbm_derate),
      work.token_bytes,
    ],
  };
}

/** A geometry routed by groups (core/catalog/group-routing.ts): its router and the text naming its models. */
export interface GroupRoutedGeometry extends GroupRouting {
  why: string;
}

/**
 * Series of one dtype and routing distribution: repeats of one (kernel, shape, tokens) reduced by
 * their median; rows whose ep does not divide the expert count are skipped. A series in which the
 * latency falls below NON_MONOTONE_RATIO × the latency at a smaller token count (more work in much
 * less time: a kernel switch or a broken configuration, not the law's physics) is set apart in `screened`.
 * A `balanced` series of a geometry in `groupRouted` (geometry key → the router of the models routing it by
 * groups, core/catalog/group-routing.ts) is set apart in `group_routed`, its points carrying the work of the
 * collector's routing under that router (moe-grouped-routing.ts groupedWork): the law's balanced routing does not
 * describe those rows, and the caller scores them with the law fitted without them.
 */
export function expertSeries(
  rows: readonly MoeRow[],
  dtype: string,
  distribution: string,
  rates: ExpertRates,
  groupRouted: ReadonlyMap<string, GroupRoutedGeometry> = new Map(),
): { series: ExpertSeries[]; screened: ExpertSeries[]; group_routed: ExpertSeries[]; skipped_rows: number } {
  const sel = rows.filter((r) => r.dtype === dtype && r.distribution === distribution && r.tokens > 0);
  const red = reduceRepeatsBy(sel, ['kernel_source', 'tokens', 'hidden', 'inter', 'topk', 'experts', 'tp', 'ep']);
  const byKey = new Map<string, ExpertSeries>();
  let skipped_rows = 0;
  let last: { row: MoeRow; s: ExpertSeries } | undefined;
  for (const r of red) {
    if (r.ep > r.experts || r.experts % r.ep !== 0) {
      skipped_rows++;
      continue;
    }
    const p = expertPoint(r, distribution === 'balanced', rates);
    // Rows of one series are mostly adjacent: the previous row's series is reused without building its key.
    let s = last && sameSeries(r, last.row) ? last.s : undefined;
    if (!s) {
      const key = `${r.kernel_source}|${r.hidden}|${r.inter}|${r.experts}|${r.topk}|${r.tp}|${r.ep}`;
      s = byKey.get(key);
      if (!s) {
        s = { key, geometry: expertGeometryKey(p.shape), points: [] };
        byKey.set(key, s);
      }
    }
    last = { row: r, s };
    s.points.push(p);
  }
  const series: ExpertSeries[] = [];
  const screened: ExpertSeries[] = [];
  const group_routed: ExpertSeries[] = [];
  for (const key of [...byKey.keys()].sort()) {
    const s = byKey.get(key)!;
    s.points.sort((a, b) => a.shape.tokens - b.shape.tokens);
    const g = distribution === 'balanced' ? groupRouted.get(s.geometry) : undefined;
    if (g) {
      group_routed.push(groupRoutedSeries(s, g, rates));
      continue;
    }
    let max = 0;
    let ok = true;
    for (const p of s.points) {
      if (p.latency_us < NON_MONOTONE_RATIO * max) ok = false;
      max = Math.max(max, p.latency_us);
    }
    (ok ? series : screened).push(s);
  }
  return { series, screened, group_routed, skipped_rows };
}

/** A group-routed series with its points' work that of the collector's routing under router `g` (moe-grouped-routing.ts). */
function groupRoutedSeries(s: ExpertSeries, g: GroupRouting, rates: ExpertRates): ExpertSeries {
  const work = (p: ExpertPoint) => groupedWork(p.shape, g, rates.bytes_per_element, rates.l2_bytes);
  return { ...s, points: s.points.map((p) => pointOf(p.shape, p.kernel_source, p.latency_us, work(p), rates)) };
}

/** Whether two rows are of one series (kernel, shape, tp, ep): the series key of expertSeries. */
export const sameSeries = (a: MoeRow, b: MoeRow): boolean =>
  a.kernel_source === b.kernel_source &&
  a.hidden === b.hidden &&
  a.inter === b.inter &&
  a.experts === b.experts &&
  a.topk === b.topk &&
  a.tp === b.tp &&
  a.ep === b.ep;

/** Unknowns of the linear form: floor, c1, c2, c3, c4, c5, c6, c7 (module doc). */
const K = 8;

/** Offset of the right-hand side v in a Normal's array (the 8×8 matrix M fills a[0…63], row-major). */
const V_AT = K * K;

/**
 * Weighted normal equations of one series, flat: the 8×8 matrix M row-major in a[8i + j] and the
 * right-hand side v in a[64 + i] (one Float64Array, so the bootstrap's and the holdouts' sums are one
 * loop over 72 numbers per series).
 */
export interface Normal {
  a: Float64Array;
}

/** Normal equations of a series under relative weights 1/t² (summed over its points in order). */
export function seriesNormal(s: ExpertSeries): Normal {
  return pointsNormal(s.points);
}

/** Normal equations of points under relative weights 1/t², summed in their order. */
function pointsNormal(points: readonly ExpertPoint[]): Normal {
  const a = new Float64Array(V_AT + K);
  for (const p of points) {
    const w = 1 / (p.latency_us * p.latency_us);
    const y = p.latency_us - p.read_us;
    const f = p.f;
    for (let i = 0; i < K; i++) {
      a[V_AT + i]! += w * f[i]! * y;
      for (let j = 0; j < K; j++) a[K * i + j]! += w * f[i]! * f[j]!;
    }
  }
  return { a };
}

/**
 * seriesNormal of a series built by expertSeries, computed once per series object (a series' points are
 * not changed after expertSeries returns it): the pooled fit, its bootstrap, its shape holdout and the
 * kernel sets (subsets of the pooled series) share them.
 */
const normalOf: (s: ExpertSeries) => Normal = memoByObject(seriesNormal);

/** Scratch of solveInto: the augmented system, at most 8 rows of 9. */
const AUG = new Float64Array(K * (K + 1));

/**
 * Solve the n×n system of AUG (row-major, n rows of n + 1: M then v) in place by Gauss–Jordan elimination
 * with partial pivoting, writing x to `out`; false when singular.
 */
function solveInto(n: number, out: Float64Array): boolean {
  const a = AUG;
  const w = n + 1;
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(a[r * w + c]!) > Math.abs(a[p * w + c]!)) p = r;
    if (!(Math.abs(a[p * w + c]!) > 1e-300)) return false;
    if (p !== c)
      for (let k = 0; k <= n; k++) {
        const t = a[c * w + k]!;
        a[c * w + k] = a[p * w + k]!;
        a[p * w + k] = t;
      }
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = a[r * w + c]! / a[c * w + c]!;
      for (let k = c; k <= n; k++) a[r * w + k] = a[r * w + k]! - f * a[c * w + k]!;
    }
  }
  for (let i = 0; i < n; i++) out[i] = a[i * w + n]! / a[i * w + i]!;
  return true;
}

/** Coefficients from x = (floor, c1, …, c7); undefined when c1 ≤ 0 (no arithmetic term: not a ramp). */
export function toCoefficients(x: readonly number[]): ExpertCoefficients | undefined {
  const [floor, c1, c2, c3, c4, c5, c6, c7] = x as [number, number, number, number, number, number, number, number];
  if (!(c1 > 0)) return undefined;
  return {
    floor_us: floor,
    eps_max: 1 / c1,
    m_half: c2 / c1,
    route_bytes_per_us: c3 > 0 ? 1 / c3 : Infinity,
    expert_us: c4,
    pair_bytes_per_us: c5 > 0 ? 1 / c5 : Infinity,
    reread: c6,
    token_bytes_per_us: c7 > 0 ? 1 / c7 : Infinity,
  };
}

/**
 * Lower bounds of x = (floor, c1, …, c7): every term ≥ 0, and c1 = 1/eps_max ≥ 1 (no grouped GEMM beats the
 * dense peak).
 */
export const EXPERT_LOWER_BOUNDS = [0, 1, 0, 0, 0, 0, 0, 0] as const;

/**
 * Bounded relative least squares from summed normal equations: solve, pin the coefficient furthest
 * below its bound (EXPERT_LOWER_BOUNDS) at the bound, repeat. Returns x = (floor, c1, …, c7) or undefined when
 * singular.
 */
export function solveNonNegative(n: Normal): number[] | undefined {
  const lo = EXPERT_LOWER_BOUNDS;
  const a = n.a;
  const x = new Array<number>(K).fill(0);
  const free = FREE.fill(1);
  const cols = COLS;
  // Rows all at ep 1 (one kernel's set): the pair column Q = P·H·2 is the route column R = T·k·H·2 (P = T·k),
  // so the two are one unknown; the pair term is pinned free and the route term carries both.
  if (sameColumn(a, 3, 5)) free[5] = 0;
  // Rows of one k (every shape routes each token to k experts): the token column X = T·H·2 is the route column
  // R = T·k·H·2 over k, so the token term is pinned free and the route term carries both.
  if (proportionalColumns(a, 3, 7)) free[7] = 0;
  // A column zero on every row (the re-read G where no expert outgrows L2 or no m passes one tile) is pinned.
  for (let j = 0; j < K; j++) if (!(a[K * j + j]! > 0)) free[j] = 0;
  for (let pass = 0; pass < K; pass++) {
    let m = 0;
    for (let j = 0; j < K; j++) if (free[j]) cols[m++] = j;
    // The free unknowns' system, the pinned ones' bounds moved to the right-hand side.
    for (let r = 0; r < m; r++) {
      const ci = cols[r]!;
      for (let c = 0; c < m; c++) AUG[r * (m + 1) + c] = a[K * ci + cols[c]!]!;
      let fixedSum = 0;
      for (let j = 0; j < K; j++) if (!free[j]) fixedSum = fixedSum + a[K * ci + j]! * lo[j]!;
      AUG[r * (m + 1) + m] = a[V_AT + ci]! - fixedSum;
    }
    if (!solveInto(m, SOL)) return undefined;
    for (let j = 0; j < K; j++) if (!free[j]) x[j] = lo[j]!;
    for (let i = 0; i < m; i++) x[cols[i]!] = SOL[i]!;
    let worst = -1;
    for (let i = 0; i < m; i++) {
      const j = cols[i]!;
      if (x[j]! < lo[j]! && (worst < 0 || x[j]! - lo[j]! < x[worst]! - lo[worst]!)) worst = j;
    }
    if (worst < 0) return x;
    free[worst] = 0;
  }
  return undefined;
}
/** Scratch of solveNonNegative: which unknowns are free, their indices, the solved values. */
const FREE = new Uint8Array(K);
const COLS = new Int32Array(K);
const SOL = new Float64Array(K);

/**
 * Whether columns c and d of the design are proportional, read off the normal equations in `a`: Cauchy–Schwarz
 * holds with equality, M_cd² = M_cc · M_dd, to 1e-12 relative (rounding of the sums).
 */
function proportionalColumns(a: Float64Array, c: number, d: number): boolean {
  const cc = a[K * c + c]!;
  const dd = a[K * d + d]!;
  const cd = a[K * c + d]!;
  return cc > 0 && dd > 0 && cd * cd >= cc * dd * (1 - 1e-12);
}

/** Whether columns c and d of the normal equations in `a` are one column (identical rows of M and entries of v). */
function sameColumn(a: Float64Array, c: number, d: number): boolean {
  if (a[V_AT + c] !== a[V_AT + d]) return false;
  for (let r = 0; r < K; r++) if (a[K * r + c] !== a[K * r + d]) return false;
  return true;
}

/**
 * Sum of series normal equations, each taken `weight[i]` times (a bootstrap resample's counts, a holdout's
 * 0/1) or once, in series order (the same sums, bit for bit, whichever caller).
 */
export function sumNormals(normals: readonly Normal[], weight?: Uint32Array): Normal {
  const out = new Float64Array(V_AT + K);
  for (let s = 0; s < normals.length; s++) {
    const w = weight ? weight[s]! : 1;
    if (!w) continue;
    const a = normals[s]!.a;
    for (let k = 0; k < V_AT + K; k++) out[k]! += w * a[k]!;
  }
  return { a: out };
}

/** sumNormals of the normals laid side by side in `flat` (72 numbers each), weighted by `weight`, into `out`. */
function weightedSumInto(flat: Float64Array, weight: Uint32Array, out: Float64Array): void {
  const W = V_AT + K;
  out.fill(0);
  for (let s = 0; s < weight.length; s++) {
    const w = weight[s]!;
    if (!w) continue;
    const at = s * W;
    for (let k = 0; k < W; k++) out[k] = out[k]! + w * flat[at + k]!;
  }
}

/** Fit the sum law to series; undefined when the arithmetic term vanishes or the system is singular. */
export function fitExpertSum(series: readonly ExpertSeries[]): ExpertCoefficients | undefined {
  const x = solveNonNegative(sumNormals(series.map(normalOf)));
  return x && toCoefficients(x);
}

/** Predicted µs of one point under `c`, as the sum (the law) or the max of read and arithmetic. */
export function predictExpert(p: ExpertPoint, c: ExpertCoefficients, compose: 'sum' | 'max' = 'sum'): number {
  const arith = (p.f[1] + p.f[2] * c.m_half) / c.eps_max;
  const fixed =
    c.floor_us +
    p.f[3] / c.route_bytes_per_us +
    p.f[4] * c.expert_us +
    p.f[5] / c.pair_bytes_per_us +
    p.f[7] / (c.token_bytes_per_us ?? Infinity);
  const read = p.read_us + p.f[6] * (c.reread ?? 0);
  return fixed + (compose === 'sum' ? read + arith : Math.max(read, arith));
}

/** Errors of a law on points. */
export interface ExpertError {
  /** exp(mean |ln(pred/meas)|), ≥ 1. */
  geo: number;
  mape_pct: number;
  n: number;
}

/** Geo error and MAPE of a law on points, with the points' count. */
export function expertError(
  points: readonly ExpertPoint[],
  c: ExpertCoefficients,
  compose: 'sum' | 'max' = 'sum',
): ExpertError {
  return predictedError(
    points,
    points.map((p) => predictExpert(p, c, compose)),
  );
}

/** Geo error and MAPE of predictions `pred[i]` of `points[i]`, with the points' count. */
export function predictedError(points: readonly ExpertPoint[], pred: readonly number[]): ExpertError {
  const meas = points.map((p) => p.latency_us);
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: points.length };
}

/** Seeded bootstrap over series of the eight coefficients; 2.5/97.5% quantiles (type-7) of each. */
export function bootstrapExpert(
  series: readonly ExpertSeries[],
  opts: { resamples: number; seed: number },
): {
  floor_us: [number, number];
  eps_max: [number, number];
  m_half: [number, number];
  route_bytes_per_us: [number, number];
  expert_us: [number, number];
  pair_bytes_per_us: [number, number];
  reread: [number, number];
  token_bytes_per_us: [number, number];
  ok: number;
} {
  // The series' normal equations side by side in one array, and one sum reused: a resample's sum is
  // sumNormals' (each series' 72 numbers times its count, added in series order), bit for bit.
  const W = V_AT + K;
  const flat = new Float64Array(series.length * W);
  for (let i = 0; i < series.length; i++) flat.set(normalOf(series[i]!).a, i * W);
  const w = new Uint32Array(series.length);
  const sum: Normal = { a: new Float64Array(W) };
  const est = resampleEstimates(series.length, opts.resamples, opts.seed, (idx) => {
    w.fill(0);
    for (let j = 0; j < idx.length; j++) w[idx[j]!]!++;
    weightedSumInto(flat, w, sum.a);
    const x = solveNonNegative(sum);
    return (x && toCoefficients(x)) || undefined;
  });
  const ci = (f: (c: ExpertCoefficients) => number) => ciFromEstimates(est.map(f));
  return {
    floor_us: ci((c) => c.floor_us),
    eps_max: ci((c) => c.eps_max),
    m_half: ci((c) => c.m_half),
    route_bytes_per_us: ci((c) => c.route_bytes_per_us),
    expert_us: ci((c) => c.expert_us),
    pair_bytes_per_us: ci((c) => c.pair_bytes_per_us),
    reread: ci((c) => c.reread ?? 0),
    token_bytes_per_us: ci((c) => c.token_bytes_per_us ?? Infinity),
    ok: est.length,
  };
}

/** Fraction of the distinct token counts held out at the top (the tokens holdout). */
export const TOKENS_HOLDOUT_FRACTION = 0.25;

/**
 * Holdout along tokens: the largest quarter of the distinct token counts (at least one) is held out,
 * the law fitted on the rest and scored on them. Undefined with fewer than 4 distinct counts.
 */
export function tokensHoldout(
  series: readonly ExpertSeries[],
): (ExpertError & { min_tokens: number; coefficients: ExpertCoefficients }) | undefined {
  const seen = new Set<number>();
  for (const s of series) for (const p of s.points) seen.add(p.shape.tokens);
  const toks = [...seen].sort((a, b) => a - b);
  if (toks.length < 4) return undefined;
  const min_tokens = toks[toks.length - Math.max(1, Math.round(toks.length * TOKENS_HOLDOUT_FRACTION))]!;
  // A series' points are sorted by tokens (expertSeries): those below the cut are a prefix, the held-out ones the rest.
  const cuts = series.map((s) => {
    const k = s.points.findIndex((p) => p.shape.tokens >= min_tokens);
    return k < 0 ? s.points.length : k;
  });
  const x = solveNonNegative(sumNormals(series.map((s, i) => pointsNormal(s.points.slice(0, cuts[i])))));
  const c = x && toCoefficients(x);
  if (!c) return undefined;
  const held = series.flatMap((s, i) => s.points.slice(cuts[i]));
  return { ...expertError(held, c), min_tokens, coefficients: c };
}

/**
 * Bias per distinct token count: the geometric mean of predicted ÷ measured over the points at that count
 * (< 1: the law is too fast there), `pred[i]` the prediction for `points[i]` (predictExpert under one
 * law). Sorted by tokens.
 */
export function biasByTokens(
  points: readonly ExpertPoint[],
  pred: readonly number[],
): Array<{ tokens: number; bias: number; n: number }> {
  const acc = new Map<number, { s: number; n: number }>();
  points.forEach((p, i) => {
    const a = acc.get(p.shape.tokens) ?? { s: 0, n: 0 };
    a.s += Math.log(pred[i]! / p.latency_us);
    a.n++;
    acc.set(p.shape.tokens, a);
  });
  return [...acc.entries()]
    .sort((x, y) => x[0] - y[0])
    .map(([tokens, a]) => ({ tokens, bias: Math.exp(a.s / a.n), n: a.n }));
}

/** Holdout along shape: each (hidden, inter, experts, topk) geometry predicted by the law fitted without it. */
export function shapeHoldout(series: readonly ExpertSeries[]): (ExpertError & { geometries: number }) | undefined {
  const geos = [...new Set(series.map((s) => s.geometry))].sort();
  if (geos.length < 2) return undefined;
  const normals = series.map(normalOf);
  const pred: number[] = [];
  const meas: number[] = [];
  for (const g of geos) {
    const x = solveNonNegative(
      sumNormals(
        normals,
        Uint32Array.from(series, (s) => (s.geometry === g ? 0 : 1)),
      ),
    );
    const c = x && toCoefficients(x);
    if (!c) continue;
    for (const s of series)
      if (s.geometry === g)
        for (const p of s.points) {
          pred.push(predictExpert(p, c));
          meas.push(p.latency_us);
        }
  }
  if (!pred.length) return undefined;
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: pred.length, geometries: geos.length };
}

/** Points between two checks of fitExpertLogL1's early stop (a poll that cannot beat the search's best). */
const ABANDON_CHUNK = 256;

/** The points' term columns for fitExpertLogL1 (law columns 1–7, the read µs and the measured µs), one array each. */
interface ExpertColumns {
  A: Float64Array;
  B: Float64Array;
  R: Float64Array;
  D: Float64Array;
  Q: Float64Array;
  G: Float64Array;
  X: Float64Array;
  rd: Float64Array;
  lat: Float64Array;
}

function expertColumns(points: readonly ExpertPoint[]): ExpertColumns {
  const n = points.length;
  const c: ExpertColumns = {
    A: new Float64Array(n),
    B: new Float64Array(n),
    R: new Float64Array(n),
    D: new Float64Array(n),
    Q: new Float64Array(n),
    G: new Float64Array(n),
    X: new Float64Array(n),
    rd: new Float64Array(n),
    lat: new Float64Array(n),
  };
  for (let i = 0; i < n; i++) {
    const p = points[i]!;
    const f = p.f;
    c.A[i] = f[1];
    c.B[i] = f[2];
    c.R[i] = f[3];
    c.D[i] = f[4];
    c.Q[i] = f[5];
    c.G[i] = f[6];
    c.X[i] = f[7];
    c.rd[i] = p.read_us;
    c.lat[i] = p.latency_us;
  }
  return c;
}

/**
 * Search state of expertLogL1Objective: the least value returned so far, and each point's prediction (µs) and
 * signed ln(pred/meas) at the point that returned it (`t0`, `l0`; `cached` once one has), with the same two
 * for the poll being evaluated (`t`, `l`), swapped in when it is kept.
 */
interface LogL1State {
  least: number;
  cached: boolean;
  t0: Float64Array;
  l0: Float64Array;
  t: Float64Array;
  l: Float64Array;
}

/**
 * Mean |ln(pred/meas)| over the columns as a function of the eight log-coefficients, for patternSearch.
 * patternSearch keeps a poll only when it is strictly below its best, and its best is the least value
 * the objective has returned; a poll it does not keep is used only through that comparison. Two ways
 * stop such a poll before its n logarithms, neither changing the search's path or result, bit for bit:
 * - a lower bound from the best point's terms: ln(t/m) = ln(t0/m) + ln(r), r = t/t0, and
 *   1 − 1/r ≤ ln r ≤ r − 1, so |ln(t/m)| ≥ the distance from −ln(t0/m) to [1 − 1/r, r − 1] (a division, no
 *   log). When the bounds' mean exceeds the least value by far more than rounding (relative 1e-9, plus
 *   1e-12 per point), the poll cannot be kept and that mean is returned;
 * - otherwise the terms are summed in point order, and once the partial mean reaches the least value (the
 *   terms are ≥ 0, so the sum only grows) the poll cannot be kept and that partial mean is returned.
 * A poll kept was summed in full, in point order: its value is the plain evaluation's.
 */
function expertLogL1Objective(cols: ExpertColumns, sum: boolean): (x: readonly number[]) => number {
  const n = cols.lat.length;
  const st: LogL1State = {
    least: Infinity,
    cached: false,
    t0: new Float64Array(n),
    l0: new Float64Array(n),
    t: new Float64Array(n),
    l: new Float64Array(n),
  };
  return (x) => {
    if (sum) predictSumInto(cols, x, st.t);
    else predictMaxInto(cols, x, st.t);
    if (st.cached) {
      const bound = boundLogL1(st.t, st.t0, st.l0) / n;
      if (bound >= st.least * (1 + 1e-9) + 1e-12) return bound;
    }
    const v = sumLogL1(st.t, cols.lat, st.l, st.least);
    if (v < st.least) keep(st, v);
    return v;
  };
}

/** A poll is the least value so far: its predictions and terms become the reference of the bound. */
function keep(st: LogL1State, v: number): void {
  st.least = v;
  [st.t0, st.t] = [st.t, st.t0];
  [st.l0, st.l] = [st.l, st.l0];
  st.cached = true;
}

/** The eight log-coefficients as the factors the prediction loops multiply by (rates as their inverses). */
function expFactors(x: readonly number[]) {
  return {
    fl: Math.exp(x[0]!),
    inv: Math.exp(-x[1]!),
    mh: Math.exp(x[2]!),
    invR: Math.exp(-x[3]!),
    ex: Math.exp(x[4]!),
    invQ: Math.exp(-x[5]!),
    rr: Math.exp(x[6]!),
    invX: Math.exp(-x[7]!),
  };
}

/** Each point's predicted µs under the sum composition at log-coefficients x, into `t`. */
function predictSumInto(cols: ExpertColumns, x: readonly number[], t: Float64Array): void {
  const { A, B, R, D, Q, G, X, rd } = cols;
  const { fl, inv, mh, invR, ex, invQ, rr, invX } = expFactors(x);
  for (let i = 0; i < t.length; i++) {
    const ar = (A[i]! + B[i]! * mh) * inv;
    t[i] = fl + R[i]! * invR + D[i]! * ex + Q[i]! * invQ + X[i]! * invX + (rd[i]! + G[i]! * rr + ar);
  }
}

/** predictSumInto under the max composition (max(read, arith) for read + arith). */
function predictMaxInto(cols: ExpertColumns, x: readonly number[], t: Float64Array): void {
  const { A, B, R, D, Q, G, X, rd } = cols;
  const { fl, inv, mh, invR, ex, invQ, rr, invX } = expFactors(x);
  for (let i = 0; i < t.length; i++) {
    const ar = (A[i]! + B[i]! * mh) * inv;
    t[i] = fl + R[i]! * invR + D[i]! * ex + Q[i]! * invQ + X[i]! * invX + Math.max(rd[i]! + G[i]! * rr, ar);
  }
}

/**
 * Sum over points of a lower bound of |ln(t/m)| from the reference's t0 and l0 = ln(t0/m): the distance from
 * −l0 to [1 − t0/t, t/t0 − 1], the range of ln(t/t0) (expertLogL1Objective).
 */
function boundLogL1(t: Float64Array, t0: Float64Array, l0: Float64Array): number {
  let s = 0;
  for (let i = 0; i < t.length; i++) {
    const d = t[i]! - t0[i]!;
    const lo = l0[i]! + d / t[i]!;
    const hi = l0[i]! + d / t0[i]!;
    s += lo > 0 ? lo : hi < 0 ? -hi : 0;
  }
  return s;
}

/**
 * Mean of |ln(t/m)| over points summed in order, each signed ln(t/m) written to `l`; stops at the first
 * ABANDON_CHUNK boundary where the partial mean reaches `least` and returns that partial mean.
 */
function sumLogL1(t: Float64Array, lat: Float64Array, l: Float64Array, least: number): number {
  const n = t.length;
  let s = 0;
  for (let i0 = 0; i0 < n; i0 += ABANDON_CHUNK) {
    const end = Math.min(n, i0 + ABANDON_CHUNK);
    for (let i = i0; i < end; i++) {
      const v = Math.log(t[i]! / lat[i]!);
      l[i] = v;
      s += Math.abs(v);
    }
    if (s / n >= least) break;
  }
  return s / n;
}

/**
 * Best fit of either composition under mean |ln(pred/meas)|: pattern search over the logarithms of
 * the eight coefficients from `start` (each kept ≥ 1e-3 of its unit, route_rate, pair_rate and token_rate ≤ 1e12
 * bytes per µs).
 */
export function fitExpertLogL1(
  points: readonly ExpertPoint[],
  compose: 'sum' | 'max',
  start: ExpertCoefficients,
): { c: ExpertCoefficients; geo: number } {
  const of = (x: readonly number[]): ExpertCoefficients => ({
    floor_us: Math.exp(x[0]!),
    eps_max: Math.exp(x[1]!),
    m_half: Math.exp(x[2]!),
    route_bytes_per_us: Math.exp(x[3]!),
    expert_us: Math.exp(x[4]!),
    pair_bytes_per_us: Math.exp(x[5]!),
    reread: Math.exp(x[6]!),
    token_bytes_per_us: Math.exp(x[7]!),
  });
  const obj = expertLogL1Objective(expertColumns(points), compose === 'sum');
  const x0 = [
    start.floor_us,
    start.eps_max,
    start.m_half,
    Math.min(start.route_bytes_per_us, 1e12),
    start.expert_us,
    Math.min(start.pair_bytes_per_us, 1e12),
    start.reread ?? 0,
    Math.min(start.token_bytes_per_us ?? Infinity, 1e12),
  ].map((v) => Math.log(Math.max(v, 1e-3)));
  const r = patternSearch(obj, x0, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], { minStep: 0.02, maxEvals: 160 });
  return { c: of(r.x), geo: Math.exp(r.value) };
}
