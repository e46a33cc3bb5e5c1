/**
 * MoE expert-time fitter (issue 13 item 1): the law of src/core/laws/moe-experts.ts fitted per chip
 * and dtype from the fused-MoE tables (`measurements/<chip>/moe.*.csv.gz`, the `moe` family's rows).
 *
 * Rows: one dtype (bf16, fp8, fp8_block, nvfp4: the formats with a dense peak on the chip; and the
 * grouped four-bit weight-only experts, mxfp4 from the `w4a16_mxfp4` rows and int4 from `int4_wo`, at
 * the bf16 peak their Marlin kernels compute at: core/catalog/dtypes.ts WEIGHT_ONLY_EXPERT_ROWS), routing
 * `balanced` where the table has it, else `power_law_1.01` (a100's vLLM 0.14.0 table has no balanced
 * rows; its law then already carries the skew and the registry has no imbalance multiplier to add).
 * Kernels of one dtype are pooled (the engine picks them per deployment). Series that run much faster
 * with more tokens are screened out (moe-experts-law.ts `expertSeries`) and counted in the evidence.
 *
 * Registry entries (set cost-model-primitives, family `moe_experts`), per dtype d:
 *   moe_expert_floor_<d> (us_per_layer), moe_expert_eps_max_<d> (dimensionless),
 *   moe_expert_m_half_<d> (tokens per expert), moe_expert_route_rate_<d> (bytes_per_us),
 *   moe_expert_per_expert_<d> (us_per_load: µs per touched expert, one load of its weights),
 *   moe_expert_pair_rate_<d> (bytes_per_us: the rank's pairs' activation rows P·H·2),
 *   moe_expert_reread_<d> (dimensionless: HBM passes over a touched expert's L2-missing weights per m-tile past
 *   its first), moe_expert_token_rate_<d> (bytes_per_us: the tokens' own activation rows T·H·2). A floor, m_half,
 *   per-expert cost or re-read pinned at 0, or a route, pair or token term pinned free, is not written (the registry allows 0 only for
 *   not_charged entries); an absent entry prices its term as 0.
 * ci95: seeded bootstrap over series. Holdouts: the largest quarter of token counts; leave one
 * (hidden, inter, experts, topk) shape out. The sum-vs-max comparison (seed footnote 1) is returned as
 * data: both compositions fitted by pattern search on mean |ln(pred/meas)| from the same start.
 * Returns data; src/report/fit-moe-experts.ts draws it.
 */
import {
  EXPERT_TILE_M,
  type ExpertCoefficients,
  type ExpertRates,
  expertGeometryKey,
} from '../core/laws/moe-experts.ts';
import {
  bytesPerElement,
  EXPERT_DTYPES,
  expertComputeDtype,
  type ExpertDtype,
  WEIGHT_ONLY_EXPERT_ROWS,
} from '../core/catalog/dtypes.ts';
import { l2Bytes, peakFlopsPerUs } from '../core/catalog/chip.ts';
import { groupRoutedModels, leftOutCheckNote, leftOutNote } from '../core/catalog/group-routing.ts';
import {
  EXPERT_EP_MODES,
  EXPERT_KERNEL_TAGS,
  expertEpMode,
  expertKernelSet,
  expertKernelTag,
  type ExpertEpMode,
  type ExpertKernelTag,
} from '../core/catalog/expert-kernels.ts';
import { groupBy, roundSig } from '../core/numeric/stats.ts';
import { SET_NAMES, type Units } from '../core/schemas/registry.ts';
import type { MoeRow } from '../measurements/schema.ts';
import { fmt, measuredEntry } from './common.ts';
import {
  biasByTokens,
  bootstrapExpert,
  expertSeries,
  fitExpertLogL1,
  fitExpertSum,
  predictedError,
  predictExpert,
  sameSeries,
  shapeHoldout,
  tokensHoldout,
  type ExpertError,
  type ExpertPoint,
  type ExpertSeries,
  type GroupRoutedGeometry,
} from './moe-experts-law.ts';
import type { GroupRouting } from './moe-grouped-routing.ts';
import { PRIMARY_DISTRIBUTION } from './moe.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** Evidence family of the entries. */
export const MOE_EXPERTS_FAMILY = 'moe_experts';

/** The fit of one dtype, as plain data. */
export interface ExpertDtypeFit {
  dtype: ExpertDtype;
  /** Registry suffix of the set: the dtype (pooled over its kernels) or `<dtype>_<tag>[_<mode>]` (one kernel). */
  set: string;
  /** The kernel of a kernel set, and the ep mode it was chosen (and fitted) at where only one. */
  kernel?: { tag: ExpertKernelTag; ep_mode?: ExpertEpMode };
  distribution: string;
  kernels: string[];
  rates: ExpertRates;
  coefficients: ExpertCoefficients;
  ci95: {
    floor_us: [number, number];
    eps_max: [number, number];
    m_half: [number, number];
    route_bytes_per_us: [number, number];
    expert_us: [number, number];
    pair_bytes_per_us: [number, number];
    reread: [number, number];
    token_bytes_per_us: [number, number];
  };
  /** Which coefficients the non-negative fit pinned at 0 (m_half, route). */
  pinned: string[];
  train: ExpertError;
  holdout_tokens?: ExpertError & { min_tokens: number; coefficients: ExpertCoefficients };
  /**
   * Bias (geometric mean of predicted ÷ measured) per token count under the all-rows fit and, where the tokens
   * holdout ran, under its fit on the token counts below the cut (extrapolated past it): the residual plot.
   */
  bias_by_tokens: Array<{ tokens: number; all_rows: number; below_cut?: number; n: number }>;
  holdout_shape?: ExpertError & { geometries: number };
  /** Seed footnote 1: both compositions at their own best log-L1 fit (pooled sets only). */
  sum_vs_max?: { sum_geo: number; max_geo: number; sum_better: boolean };
  series: number;
  screened: string[];
  /**
   * Keys of the `balanced` series of group-routed geometries left out (expertSeries: the collector's balanced
   * routing is not balanced under DeepSeek's grouped top-k).
   */
  group_routed: string[];
  /** Per geometry left out: the geometry and `<models>; n_group …, topk_group …`, from catalog/models/<model>/config.json. */
  group_routed_why: Array<{ geometry: string; why: string }>;
  /**
   * The left-out rows scored with this set's law (fitted without them), their work that of the collector's routing
   * under the grouped router (moe-grouped-routing.ts): a cross-geometry check; bias = geometric mean of predicted ÷
   * measured. Absent when none were left out.
   */
  group_routed_check?: ExpertError & { bias: number };
  /** Figure data: tokens, measured µs, predicted µs (sum) and geometry per point, thinned by the report. */
  points: Array<{
    tokens: number;
    /** Tokens per touched expert m = P / D (the ramp's variable). */
    tokens_per_expert: number;
    measured_us: number;
    predicted_us: number;
    geometry: string;
    tp: number;
    ep: number;
  }>;
}

/** The family's data for one chip. */
export interface MoeExpertsData {
  chip: string;
  hbm_derate: number;
  hbm_derate_source: string;
  fits: ExpertDtypeFit[];
  /** One set per kernel the lane runs, for dtypes whose rows come from several kernels (fitKernelSets). */
  kernel_fits: ExpertDtypeFit[];
  /** Dtypes with rows but no fit, and why. */
  not_fitted: Array<{ dtype: string; why: string }>;
}

/** A FamilyFit carrying its data for the report. */
export interface MoeExpertsFit extends FamilyFit {
  data: MoeExpertsData;
}

/** The derate the weight reads use: the hbm family's fit of this run, else the chip's prior, else 1. */
function derateOf(ctx: FitContext): { value: number; source: string } {
  const fitted = ctx.prior.get('hbm_derate');
  if (fitted !== undefined) return { value: fitted, source: 'hbm_derate fitted in this run' };
  const prior = ctx.chip.priors?.hbm_derate;
  if (prior !== undefined) return { value: prior, source: 'catalog prior hbm_derate (no hbm fit in this run)' };
  return { value: 1, source: 'datasheet HBM (no hbm_derate fitted or known)' };
}

/** A set's series (expertSeries): the fitted ones, the screened ones and the group-routed ones left out. */
interface SetSeries {
  series: ExpertSeries[];
  screened: ExpertSeries[];
  group_routed: ExpertSeries[];
}

/**
 * Geometry key → the shipped models routing it by groups, each with the config it was read from (path and sha256
 * prefix; core/catalog/group-routing.ts) and its router, e.g. `h7168/i2048/e256/top8` → why `deepseek-r1
 * (catalog/models/deepseek-r1/config.json sha256 79ddea672a62), …; n_group 8, topk_group 4`, n_group 8, topk_group 4.
 */
function groupRoutedGeometries(): Map<string, GroupRoutedGeometry> {
  const by = new Map<string, { models: string[]; g: GroupRouting }>();
  for (const m of groupRoutedModels()) {
    const key = expertGeometryKey(m);
    const e = by.get(key) ?? { models: [], g: { n_group: m.n_group, topk_group: m.topk_group } };
    e.models.push(`${m.model} (catalog/models/${m.model}/config.json sha256 ${m.config_sha256.slice(0, 12)})`);
    by.set(key, e);
  }
  return new Map(
    [...by].map(([k, e]) => [
      k,
      { ...e.g, why: `${e.models.join(', ')}; n_group ${e.g.n_group}, topk_group ${e.g.topk_group}` },
    ]),
  );
}

/**
 * Fit one dtype's rows (`mine`: the table's rows of its `moe_dtype`, expertRowDtype) pooled over its kernels,
 * returned with its series (the kernel sets are subsets of them: fitKernelSets); a string says why it was not fitted.
 */
function fitExpertDtype(
  mine: readonly MoeRow[],
  dtype: ExpertDtype,
  ctx: FitContext,
  derate: number,
  groupRouted: ReadonlyMap<string, GroupRoutedGeometry>,
): { fit: ExpertDtypeFit; parts: SetSeries } | string {
  const peak = peakFlopsPerUs(ctx.chip, expertComputeDtype(dtype));
  if (peak === undefined) return `no dense ${dtype} peak on ${ctx.chip.name}`;
  if (!mine.length) return 'no rows';
  const distribution = distributionOf(mine);
  const rates: ExpertRates = {
    peak_flops_per_us: peak,
    hbm_bytes_per_us: ctx.chip.hbm_bytes_per_us,
    hbm_derate: derate,
    bytes_per_element: bytesPerElement(dtype),
    l2_bytes: l2Bytes(ctx.chip.l2_mib),
  };
  const parts = expertSeries(mine, expertRowDtype(dtype), distribution, rates, groupRouted);
  const fit = fitExpertSet(parts, { dtype, set: dtype, distribution, sumVsMax: true, groupRouted }, ctx, rates);
  return typeof fit === 'string' ? fit : { fit, parts };
}

/** The fused-MoE tables' `moe_dtype` of an expert dtype's rows. */
const expertRowDtype = (dtype: ExpertDtype): string =>
  dtype === 'mxfp4' || dtype === 'int4' ? WEIGHT_ONLY_EXPERT_ROWS[dtype] : dtype;

/** The routing distribution fitted: `balanced` where the rows have it, else PRIMARY_DISTRIBUTION. */
const distributionOf = (rows: readonly MoeRow[]): string =>
  rows.some((r) => r.distribution === 'balanced') ? 'balanced' : PRIMARY_DISTRIBUTION;

/** What one fitted set is: its dtype, registry suffix, routing rows, kernel (for a kernel set). */
interface SetSpec {
  dtype: ExpertDtype;
  set: string;
  distribution: string;
  kernel?: ExpertDtypeFit['kernel'];
  /** Fit the sum-vs-max comparison (pooled sets only: the footnote's test is per dtype). */
  sumVsMax: boolean;
  /** Geometry key → the models routing it by groups (groupRoutedGeometries), for the evidence's note. */
  groupRouted: ReadonlyMap<string, GroupRoutedGeometry>;
}

/** Fit the law to one set's series (a dtype pooled, or one kernel's); a string says why it was not fitted. */
function fitExpertSet(
  { series, screened, group_routed }: SetSeries,
  spec: SetSpec,
  ctx: FitContext,
  rates: ExpertRates,
): ExpertDtypeFit | string {
  const { distribution } = spec;
  if (!series.length)
    return `no ${distribution} series left: ${screened.length} non-monotone in tokens (screened), ${group_routed.length} of group-routed geometries (left out)`;
  const c = fitExpertSum(series);
  if (!c) return 'the arithmetic term vanished (no ramp identifiable)';
  const points = series.flatMap((s) => s.points);
  // The all-rows law's prediction of every point, once: its train error, residual rows and figure share it.
  const pred = points.map((p) => predictExpert(p, c));
  const holdoutTokens = tokensHoldout(series);
  return {
    dtype: spec.dtype,
    set: spec.set,
    ...(spec.kernel ? { kernel: spec.kernel } : {}),
    distribution,
    kernels: [...new Set(series.map((s) => s.points[0]!.kernel_source))].sort(),
    rates,
    coefficients: c,
    ci95: widen(c, bootstrapExpert(series, ctx.bootstrap)),
    pinned: pinnedOf(c),
    train: predictedError(points, pred),
    ...optional('holdout_tokens', holdoutTokens),
    bias_by_tokens: biasRows(points, pred, holdoutTokens?.coefficients),
    ...optional('holdout_shape', shapeHoldout(series)),
    ...(spec.sumVsMax ? { sum_vs_max: sumVsMax(points, c) } : {}),
    series: series.length,
    screened: screened.map((s) => s.key),
    group_routed: group_routed.map((s) => s.key),
    group_routed_why: [...new Set(group_routed.map((s) => s.geometry))].map((geometry) => ({
      geometry,
      why: spec.groupRouted.get(geometry)?.why ?? 'group-routed',
    })),
    ...optional('group_routed_check', groupRoutedCheck(group_routed, c)),
    points: figurePoints(series, pred),
  };
}

/** The left-out group-routed series scored with the fitted law `c` (ExpertDtypeFit.group_routed_check). */
function groupRoutedCheck(
  group_routed: readonly ExpertSeries[],
  c: ExpertCoefficients,
): (ExpertError & { bias: number }) | undefined {
  const points = group_routed.flatMap((s) => s.points);
  if (!points.length) return undefined;
  const pred = points.map((p) => predictExpert(p, c));
  const bias = Math.exp(points.reduce((a, p, i) => a + Math.log(pred[i]! / p.latency_us), 0) / points.length);
  return { ...predictedError(points, pred), bias };
}

/** Seed footnote 1: both compositions at their own best log-L1 fit from the least-squares start. */
function sumVsMax(points: readonly ExpertPoint[], c: ExpertCoefficients): ExpertDtypeFit['sum_vs_max'] & object {
  const ls = fitExpertLogL1(points, 'sum', c);
  const lm = fitExpertLogL1(points, 'max', c);
  return { sum_geo: ls.geo, max_geo: lm.geo, sum_better: ls.geo < lm.geo };
}

/** Which coefficients the bounded fit pinned (and so are not written). */
function pinnedOf(c: ExpertCoefficients): string[] {
  return [
    ...(c.floor_us === 0 ? ['floor (not written)'] : []),
    ...(c.eps_max === 1 ? ['eps_max (at its bound 1)'] : []),
    ...(c.m_half === 0 ? ['m_half (not written)'] : []),
    ...(!Number.isFinite(c.route_bytes_per_us) ? ['route_rate (not written: free)'] : []),
    ...(c.expert_us === 0 ? ['per_expert (not written)'] : []),
    ...(!Number.isFinite(c.pair_bytes_per_us) ? ['pair_rate (not written: free)'] : []),
    ...(!c.reread ? ['reread (not written)'] : []),
    ...(!Number.isFinite(c.token_bytes_per_us ?? Infinity) ? ['token_rate (not written: free)'] : []),
  ];
}

/**
 * The kernel sets of one dtype whose rows come from several kernels (issue 13; DECISION, docs/pricer.md
 * "Expert kernels"): per ep mode (ep 1, ep > 1) the lane's kernel is the one with the most `distribution`
 * series at that mode (the kernel vLLM dispatches for the base grid; kernels of a few appended model shapes
 * lose). A kernel chosen at both modes is fitted on all its rows (set `<dtype>_<tag>`); kernels chosen at
 * one mode each are fitted on that mode's rows (`<dtype>_<tag>_<mode>`). None when the dtype has one kernel
 * or a kernel stepcal cannot tag (`not_fitted` says which).
 */
function lanesKernels(
  mine: readonly MoeRow[],
  distribution: string,
): { sets: Array<{ tag: ExpertKernelTag; mode?: ExpertEpMode }>; unknown: string[] } {
  const kernels = [...new Set(mine.map((r) => r.kernel_source))];
  if (kernels.length < 2) return { sets: [], unknown: [] };
  const tagOf = new Map(kernels.map((k) => [k, expertKernelTag(k)]));
  const unknown = kernels.filter((k) => !tagOf.get(k));
  if (unknown.length || new Set(tagOf.values()).size < 2) return { sets: [], unknown };
  // Distinct (kernel, shape, tp, ep) series of `distribution` per ep mode and tag, in one pass over the rows.
  const count = new Map(EXPERT_EP_MODES.map((m) => [m, new Map<ExpertKernelTag, Set<string>>()]));
  let last: MoeRow | undefined;
  for (const r of mine) {
    if (r.distribution !== distribution) continue;
    // A table lists a series' token counts together: a row of the previous row's series adds no key.
    if (last && sameSeries(r, last)) continue;
    last = r;
    const byTag = count.get(expertEpMode(r.ep))!;
    const tag = tagOf.get(r.kernel_source)!;
    const keys = byTag.get(tag) ?? new Set<string>();
    keys.add(`${r.kernel_source}|${r.hidden}|${r.inter}|${r.experts}|${r.topk}|${r.tp}|${r.ep}`);
    byTag.set(tag, keys);
  }
  const chosen = new Map<ExpertEpMode, ExpertKernelTag>();
  for (const mode of EXPERT_EP_MODES) {
    const c = count.get(mode)!;
    const best = EXPERT_KERNEL_TAGS.filter((t) => c.has(t)).sort((a, b) => c.get(b)!.size - c.get(a)!.size)[0];
    if (best) chosen.set(mode, best);
  }
  const picks = [...new Set(chosen.values())];
  if (picks.length === 1) return { sets: [{ tag: picks[0]! }], unknown };
  return { sets: [...chosen.entries()].map(([mode, tag]) => ({ tag, mode })), unknown };
}

/** Fit the lane's kernel sets of one dtype (lanesKernels) next to its pooled fit `pooled`. */
function fitKernelSets(
  mine: readonly MoeRow[],
  pooled: ExpertDtypeFit,
  parts: SetSeries,
  ctx: FitContext,
  groupRouted: ReadonlyMap<string, GroupRoutedGeometry>,
): { fits: ExpertDtypeFit[]; not_fitted: MoeExpertsData['not_fitted'] } {
  const { sets, unknown } = lanesKernels(mine, pooled.distribution);
  const not_fitted: MoeExpertsData['not_fitted'] = unknown.length
    ? [{ dtype: pooled.dtype, why: `kernels not split (no tag for ${unknown.join(', ')}): pooled only` }]
    : [];
  const fits: ExpertDtypeFit[] = [];
  for (const k of sets) {
    const set = expertKernelSet(pooled.dtype, k.tag, k.mode);
    const kernel = { tag: k.tag, ...(k.mode ? { ep_mode: k.mode } : {}) };
    const spec = { dtype: pooled.dtype, set, distribution: pooled.distribution, kernel, sumVsMax: false, groupRouted };
    // A series is one kernel at one (tp, ep): the set's series are the pooled ones of its kernel (and mode).
    const mineOf = (x: ExpertSeries) =>
      expertKernelTag(x.points[0]!.kernel_source) === k.tag &&
      (k.mode === undefined || expertEpMode(x.points[0]!.shape.ep) === k.mode);
    const subset = {
      series: parts.series.filter(mineOf),
      screened: parts.screened.filter(mineOf),
      group_routed: parts.group_routed.filter(mineOf),
    };
    const r = fitExpertSet(subset, spec, ctx, pooled.rates);
    if (typeof r === 'string') not_fitted.push({ dtype: set, why: r });
    else fits.push(r);
  }
  return { fits, not_fitted };
}

/** The residual plot's rows: bias per token count under the all-rows fit (`pred`) and the below-the-cut fit. */
function biasRows(
  points: readonly ExpertPoint[],
  pred: readonly number[],
  below?: ExpertCoefficients,
): ExpertDtypeFit['bias_by_tokens'] {
  const cut = below
    ? biasByTokens(
        points,
        points.map((p) => predictExpert(p, below)),
      )
    : [];
  return biasByTokens(points, pred).map((r, i) => ({
    tokens: r.tokens,
    all_rows: r.bias,
    ...(cut[i] ? { below_cut: cut[i]!.bias } : {}),
    n: r.n,
  }));
}

const optional = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
  v === undefined ? {} : ({ [k]: v } as { [P in K]?: V });

/** Bootstrap intervals widened, where needed, to contain the estimate (the gate requires it). */
function widen(c: ExpertCoefficients, b: ReturnType<typeof bootstrapExpert>): ExpertDtypeFit['ci95'] {
  const w = (ci: [number, number], v: number): [number, number] => [Math.min(ci[0], v), Math.max(ci[1], v)];
  return {
    floor_us: w(b.floor_us, c.floor_us),
    eps_max: w(b.eps_max, c.eps_max),
    m_half: w(b.m_half, c.m_half),
    route_bytes_per_us: w(b.route_bytes_per_us, c.route_bytes_per_us),
    expert_us: w(b.expert_us, c.expert_us),
    pair_bytes_per_us: w(b.pair_bytes_per_us, c.pair_bytes_per_us),
    reread: w(b.reread, c.reread ?? 0),
    token_bytes_per_us: w(b.token_bytes_per_us, c.token_bytes_per_us ?? Infinity),
  };
}

/** The figure's points: every series' points in series order, `pred` their predictions in that order. */
function figurePoints(series: readonly ExpertSeries[], pred: readonly number[]): ExpertDtypeFit['points'] {
  let i = 0;
  return series.flatMap((s) =>
    s.points.map((p) => ({
      tokens: p.shape.tokens,
      tokens_per_expert: p.work.tokens_per_expert,
      measured_us: p.latency_us,
      predicted_us: pred[i++]!,
      geometry: s.geometry,
      tp: p.shape.tp,
      ep: p.shape.ep,
    })),
  );
}

/** The notes every entry of a set carries: the law, sum vs max or the kernel, pins, tokens holdout, the left-out rows. */
function entryNotes(f: ExpertDtypeFit): string[] {
  return [
    `law: t = floor + D·mats·H·I'·bytes/(HBM·${fmt(f.rates.hbm_derate)}) + W·(P + D·m_half)/(peak·eps_max) + T·k·H·2/route_rate + D·per_expert + P·H·2/pair_rate + T·H·2/token_rate + reread·(weights re-read past the first m-tile of ${EXPERT_TILE_M}, L2-missing part)/(HBM·${fmt(f.rates.hbm_derate)}) (core/laws/moe-experts.ts), charged as a sum`,
    ...(f.sum_vs_max
      ? [`sum vs max (each at its best log-L1 fit): geo ${fmt(f.sum_vs_max.sum_geo)} vs ${fmt(f.sum_vs_max.max_geo)}`]
      : [
          `the kernel the lane runs at ${f.kernel?.ep_mode === 'ep1' ? 'ep 1' : f.kernel?.ep_mode === 'epn' ? 'ep > 1' : 'every ep'} (docs/pricer.md "Expert kernels")`,
        ]),
    ...(f.pinned.length ? [`pinned at a bound by the fit: ${f.pinned.join(', ')}`] : []),
    ...f.group_routed_why.map((w) => leftOutNote(w.geometry, w.why)),
    ...(f.group_routed_check
      ? [leftOutCheckNote(fmt(f.group_routed_check.geo), fmt(f.group_routed_check.bias), f.group_routed_check.n)]
      : []),
    ...(f.holdout_tokens
      ? [
          `tokens holdout (tokens ≥ ${f.holdout_tokens.min_tokens}): geo ${fmt(f.holdout_tokens.geo)} over ${f.holdout_tokens.n}`,
        ]
      : []),
  ];
}

/** Registry entries of one dtype's fit. */
function entries(f: ExpertDtypeFit, ctx: FitContext, rowsUsed: number): FamilyFit['coefficients'] {
  const rowDtype =
    f.dtype === 'mxfp4' || f.dtype === 'int4' ? ` (rows ${WEIGHT_ONLY_EXPERT_ROWS[f.dtype]}, bf16 peak)` : '';
  const mode = f.kernel?.ep_mode ? `, ${f.kernel.ep_mode === 'ep1' ? 'ep = 1' : 'ep > 1'} rows only` : '';
  const kernels = `${f.kernel ? `kernel ${f.kernel.tag}` : 'kernels'} ${f.kernels.join(' + ')}${mode}`;
  const filter = `dtype ${f.dtype}${rowDtype}, distribution ${f.distribution}, ${kernels}; repeats median-reduced; ${f.screened.length} non-monotone series screened out${f.group_routed.length ? `; ${f.group_routed.length} balanced series of group-routed geometries left out` : ''}`;
  const notes = entryNotes(f);
  const err = (e: ExpertError) => ({ geo: roundSig(e.geo, 4), mape_pct: roundSig(e.mape_pct, 4), n: e.n });
  const holdout = f.holdout_shape
    ? {
        ...err(f.holdout_shape),
        split: `leave one of ${f.holdout_shape.geometries} (hidden, inter, experts, topk) shapes out`,
      }
    : undefined;
  const mk = (name: string, value: number, units: Units, ci: [number, number]) => ({
    set: SET_NAMES.primitives,
    name: `moe_expert_${name}_${f.set}`,
    entry: measuredEntry(
      {
        value,
        units,
        family: MOE_EXPERTS_FAMILY,
        ctx,
        used: { filter, rows_used: rowsUsed },
        ci95: ci,
        ci_method: 'bootstrap',
        train: err(f.train),
        ...(holdout ? { holdout } : {}),
        notes,
      },
      'moe',
    ),
  });
  const c = f.coefficients;
  // A term pinned at 0 (floor, m_half, per_expert, reread) or at "free" (route, pair, token) is not written: the registry allows 0 only for
  // not_charged entries, and an absent entry prices the term as 0 (the evidence notes say which).
  return [
    ...(c.floor_us > 0 ? [mk('floor', c.floor_us, 'us_per_layer', f.ci95.floor_us)] : []),
    mk('eps_max', c.eps_max, 'dimensionless', f.ci95.eps_max),
    ...(c.m_half > 0 ? [mk('m_half', c.m_half, 'tokens', f.ci95.m_half)] : []),
    ...(Number.isFinite(c.route_bytes_per_us)
      ? [mk('route_rate', c.route_bytes_per_us, 'bytes_per_us', f.ci95.route_bytes_per_us)]
      : []),
    ...(c.expert_us > 0 ? [mk('per_expert', c.expert_us, 'us_per_load', f.ci95.expert_us)] : []),
    ...(Number.isFinite(c.pair_bytes_per_us)
      ? [mk('pair_rate', c.pair_bytes_per_us, 'bytes_per_us', f.ci95.pair_bytes_per_us)]
      : []),
    ...(c.reread ? [mk('reread', c.reread, 'dimensionless', f.ci95.reread)] : []),
    ...(Number.isFinite(c.token_bytes_per_us ?? Infinity)
      ? [mk('token_rate', c.token_bytes_per_us!, 'bytes_per_us', f.ci95.token_bytes_per_us)]
      : []),
  ];
}

/** Fit every dtype of the chip (see the module doc). Never throws on data problems. */
export function fitMoeExperts(rows: readonly MoeRow[], ctx: FitContext): MoeExpertsFit {
  const out = emptyFamilyFit(MOE_EXPERTS_FAMILY);
  const d = derateOf(ctx);
  const data: MoeExpertsData = {
    chip: ctx.chip.name,
    hbm_derate: d.value,
    hbm_derate_source: d.source,
    fits: [],
    kernel_fits: [],
    not_fitted: [],
  };
  const groupRouted = groupRoutedGeometries();
  // The table's rows by `moe_dtype`, split once (each dtype's fit and its kernel sets read only their own).
  const byRowDtype = groupBy(rows, (r) => r.dtype);
  for (const dtype of EXPERT_DTYPES) {
    const mine = byRowDtype.get(expertRowDtype(dtype)) ?? [];
    const p = fitExpertDtype(mine, dtype, ctx, d.value, groupRouted);
    if (typeof p === 'string') {
      if (p !== 'no rows' && !p.startsWith('no dense')) data.not_fitted.push({ dtype, why: p });
      continue;
    }
    const r = p.fit;
    data.fits.push(r);
    out.coefficients.push(...entries(r, ctx, r.points.length));
    const k = fitKernelSets(mine, r, p.parts, ctx, groupRouted);
    data.kernel_fits.push(...k.fits);
    data.not_fitted.push(...k.not_fitted);
    for (const f of k.fits) out.coefficients.push(...entries(f, ctx, f.points.length));
  }
  for (const n of data.not_fitted)
    out.warnings.push(`moe_experts: ${n.dtype} not fitted on ${ctx.chip.name}: ${n.why}`);
  return { ...out, data };
}
