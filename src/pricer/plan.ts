/**
 * Construction-time plan of a pricer (seed shared/seeds/pricing-a-step.txt; reference §3.2, §4): the
 * graph's stack expanded, layers counted per kind, and each layer kind folded into a handful of
 * constants (µs per token, µs per byte read, floors) by calling the laws of src/core/laws. The per-step
 * terms (terms.ts) read these constants; nothing here runs per step. Pure: no I/O.
 */
import {
  bytesPerElement,
  EXPERT_DTYPES,
  expertComputeDtype,
  type ExpertDtype,
  type StorageDtype,
} from '../core/catalog/dtypes.ts';
import { expandStack, type GraphNode, type ModelGraph, type Stack } from '../core/catalog/model.ts';
import { l2Bytes, peakFlopsPerUs } from '../core/catalog/chip.ts';
import { EXPERT_KERNEL_TAGS, expertEpMode, expertKernelSet } from '../core/catalog/expert-kernels.ts';
import { leftOutCheckOf, notesLeaveOut } from '../core/catalog/group-routing.ts';
import { floorPlusWork, hbmReadUs } from '../core/laws/floor-rate.ts';
import {
  expertGeometryKey,
  expertTerms,
  expertWork,
  EXPERT_TILE_M,
  expertRereadPasses,
  l2MissFraction,
  type ExpertCoefficients,
  type ExpertRates,
} from '../core/laws/moe-experts.ts';
import { rampUs, rampUsPerToken, shapeFactor } from '../core/laws/gemm.ts';
import {
  chunkedScanFlopsPerToken,
  recurrentDecodeBytesPerRow,
  recurrentPrefillFlopsPerToken,
} from '../core/laws/recurrent.ts';
import type { DecodeLaw, ReaderSpec } from '../core/laws/attention.ts';
import {
  indexKeyBytes,
  type MsaShape,
  msaCacheBytesPerToken,
  msaDecodeWork,
  msaPrefillWork,
  type PrefillForm,
} from '../core/laws/sparse.ts';
import { mlaDecodeUsPerKey, mlaWaveProgramsPerRow, mlaWaveUsPerKey } from '../core/laws/mla.ts';
import { expertsTouched } from '../core/laws/moe.ts';
import { deepepMessageBytes, mnnvlMessageBytes } from '../core/laws/expert-alltoall.ts';
import type { CollectiveCurve, ExpertRereadChoice, PricerCoefficients, RampFormat } from './coefficients.ts';
import { computeFormat, type ComputeFormat } from './deployment.ts';

/** Kernels per primitive (reference §3.2; gives llama-3.1-8b's 258 kernels at tp 1). */
const KERNELS: Record<GraphNode['op'], number> = {
  GEMM: 1,
  GroupedGEMM: 4,
  Attention: 2,
  Elementwise: 1,
  RecurrentUpdate: 2,
  AllReduce: 1,
  AllGather: 1,
  ReduceScatter: 1,
  All2All: 2,
};

const COLLECTIVE_OP: Record<string, string> = {
  AllReduce: 'all_reduce',
  AllGather: 'all_gather',
  ReduceScatter: 'reduce_scatter',
  All2All: 'alltoall',
};

/** One attention (or indexer) kernel of a layer kind. */
export interface AttnPlan {
  reader: number;
  /**
   * Decode: the node's decode law (core/laws/attention.ts) with its rate folded into cached tokens per
   * µs (rate / KV bytes per token), so the walked tokens read are its work; work items per decode row
   * = the node's KV heads on this rank (issue 16).
   */
  decLaw: DecodeLaw;
  decHeads: number;
  /** Decode priced in waves instead of decLaw (an MLA kernel-table registry, a100); undefined elsewhere. */
  decWave: WavePlan | undefined;
  /** Decode: µs per decode token of the step, whatever it reads (the MSA module's per-request and projection terms); 0 elsewhere. */
  decUsPerDecodeToken: number;
  /** Prefill: floor µs and µs per attended key pair at ε_max (the walk folds in each row's ramp). */
  preFloor: number;
  preUsPerPair: number;
  /** Prefill: µs per prefill token of the step (the MLA kernel law's per-(token × local head) cost); 0 elsewhere. */
  preUsPerToken: number;
  /** The model's own measured prefill form (coefficients.ts prefillForm), priced instead of the pairs; undefined = none. */
  form: PrefillForm | undefined;
  /** Bytes the form's kernel reads per query-key pair (one cached entry). */
  formBytesPerPair: number;
}

/**
 * An MLA decode kernel's wave law at a node's local heads (core/laws/mla.ts mlaWaveDecodeUs): floor, µs per
 * wave, µs per key of the mean context per wave, programs per decode row, and the SMs they fill.
 */
export interface WavePlan {
  floor_us: number;
  wave_us: number;
  us_per_key: number;
  programs_per_row: number;
  slots: number;
}

/**
 * A recurrent mixer folded (core/laws/recurrent.ts; seed "Recurrent mixers"): decode floor + µs per decode
 * token (the state read + written at the measured decode rate, plus, where no table measures the state update,
 * the chunked scan); prefill floor + µs per prefill sequence (a fresh state written once) + µs per prefill
 * token at the measured prefill rate, or without one the chunked scan's arithmetic on the bf16 ramp.
 */
export interface RecPlan {
  decFloor: number;
  decUsPerToken: number;
  preFloor: number;
  preUsPerSeq: number;
  /** µs per prefill token at the measured rate; undefined = the chunked scan (preA, preMh). */
  preUsPerToken: number | undefined;
  preA: number;
  preMh: number;
}

/**
 * The fitted expert law of one layer folded at construction by calling expertTerms on unit work
 * (t = floor + D·(read + arith per touched expert) + P·arith per pair + T·route per token, µs).
 */
export interface ExpertLawPlan {
  /** Fixed cost per layer, µs (SM). */
  floorUs: number;
  /** Routed (token, expert) pairs on the rank per step token, P / T = k · L / E. */
  pairsPerToken: number;
  /** Arithmetic per pair W / (peak · eps_max), µs (SM). */
  arithUsPerPair: number;
  /** Arithmetic per touched expert W · m_half / (peak · eps_max), µs (SM). */
  arithUsPerTouched: number;
  /** One local expert's weights at the derated HBM rate, µs (HBM). */
  readUsPerTouched: number;
  /**
   * Routed activations per step token k · H · 2 / route_rate plus the rank's pair rows (k·L/E) · H · 2 / pair_rate plus the
   * token's own row H · 2 / token_rate, µs (HBM).
   */
  routeUsPerToken: number;
  /**
   * One touched expert's weights streamed again per m-tile past its first, reread · (L2-missing bytes) / (HBM · derate),
   * µs (HBM); 0 = no `moe_expert_reread_<set>` (or the expert fits in L2): the step multiplies it by
   * touched · expertRereadPasses(P / touched).
   */
  rereadUsPerPass: number;
}

/** A collective launched by a layer kind. */
export interface CollPlan extends CollectiveCurve {
  bytesPerToken: number;
}

/** One layer kind folded into constants (one variant: with or without prefill-only nodes). */
export interface KindPlan {
  id: string;
  count: number;
  /** Dense GEMMs grouped by compute format: SM µs = Σ rampUs(gemmA[g], tok, gemmMh[g]). */
  gemmA: Float64Array;
  gemmMh: Float64Array;
  weightUs: number;
  eltUsPerToken: number;
  /** Per-layer HBM floors of the measured mHC halves, µs. */
  fixedHbmUs: number;
  attn: AttnPlan[];
  hasMoe: boolean;
  moeA: number;
  moeMh: number;
  moeExperts: number;
  moeTopK: number;
  moeLocal: number;
  moeUsPerExpert: number;
  /** The fitted expert law (core/laws/moe-experts.ts) folded, when the registry has it for the expert dtype; else undefined (dense ramp). */
  moeLaw: ExpertLawPlan | undefined;
  rec: RecPlan[];
  colls: CollPlan[];
  kernels: number;
  mixers: number;
  /** Resident weights per rank, bytes (routed experts included). */
  weightBytes: number;
  /** Of which routed experts (read only when touched). */
  routedBytes: number;
  /** Of which projections inside a measured module (MSA): resident, but their reads are in the module law. */
  moduleBytes: number;
  kvBytesPerToken: number;
  /** KV bytes per token of each attention node with the tokens it keeps resident (window, Infinity = all). */
  kvResident: Array<[window: number, bytesPerToken: number]>;
}

/** One pass of a stack (target or drafter): its layer kinds in both variants and their totals. */
export interface PassPlan {
  withPrefill: KindPlan[];
  decodeOnly: KindPlan[];
  layers: number;
  kernelsWithPrefill: number;
  kernelsDecodeOnly: number;
  pieces: number;
  weightBytes: number;
  kvBytesPerToken: number;
  /** Σ_layers KV bytes per resident token, keyed by the resident window (Infinity = whole context). */
  kvByWindow: Map<number, number>;
}

/** The output head, priced once per pass. */
export interface HeadPlan {
  k: KindPlan;
  kernels: number;
}

/** Batch-independent facts the folding needs (one deployment). */
export interface PlanContext {
  coef: PricerCoefficients;
  tp: number;
  ep: number;
  served: StorageDtype;
  /** KV-cache bytes per element. */
  kvB: number;
  hidden: number;
  /** The ramp prefill attention and recurrent scans run on (bf16 where the registry has it). */
  bf16: RampFormat;
  prefillScale: number | undefined;
  prefillFloor: number;
  imbalance: number | undefined;
  /** Distinct readers (ways a layer sees a request's context), shared by target and drafter. */
  readers: ReaderSpec[];
  /** Ramps the GEMMs and expert GEMMs run on at m = step tokens (for the fitted-range check). */
  gemmRamps: Set<ComputeFormat['ramp']>;
}

/** The datasheet HBM read time of `bytes` at the measured derate, µs (laws/floor-rate.ts). */
function readUs(ctx: PlanContext, bytes: number): number {
  return hbmReadUs(bytes, ctx.coef.chip.hbm_bytes_per_us, ctx.coef.hbmDerate);
}

function emptyKind(id: string, count: number): KindPlan {
  return {
    id,
    count,
    gemmA: new Float64Array(0),
    gemmMh: new Float64Array(0),
    weightUs: 0,
    eltUsPerToken: 0,
    fixedHbmUs: 0,
    attn: [],
    hasMoe: false,
    moeA: 0,
    moeMh: 0,
    moeExperts: 0,
    moeTopK: 0,
    moeLocal: 0,
    moeUsPerExpert: 0,
    moeLaw: undefined,
    rec: [],
    colls: [],
    kernels: 0,
    mixers: 0,
    weightBytes: 0,
    routedBytes: 0,
    moduleBytes: 0,
    kvBytesPerToken: 0,
    kvResident: [],
  };
}

/** Index of a reader in the shared table, appending it when new. */
function readerIndex(readers: ReaderSpec[], r: ReaderSpec): number {
  const i = readers.findIndex((x) => x.window === r.window && x.ratio === r.ratio && x.cap === r.cap);
  if (i >= 0) return i;
  readers.push(r);
  return readers.length - 1;
}

/** Dense-GEMM groups of a kind being built, keyed by ramp and peak: Σ of their folded constants. */
type GemmGroups = Map<string, { A: number; mh: number }>;

/** Add one dense GEMM's folded ramp constant (seed "Arithmetic"; reference §4.3) to its group. */
function addGemm(
  ctx: PlanContext,
  groups: GemmGroups,
  w: StorageDtype,
  flopsPerToken: number,
  nEff: number,
  kEff: number,
): void {
  const f = ctx.coef.format(w);
  ctx.gemmRamps.add(f.ramp);
  const shape = shapeFactor(nEff, f.nh) * shapeFactor(kEff, f.kh);
  const key = `${f.ramp}/${f.peak_flops_per_us}`;
  const g = groups.get(key) ?? { A: 0, mh: f.mh };
  g.A += rampUsPerToken(flopsPerToken, f.peak_flops_per_us, f.eps, shape);
  groups.set(key, g);
}

/**
 * A GEMM node: weights read once per step (seed "Memory"), arithmetic on the ramp (seed "Arithmetic").
 * KNOWN DIVERGENCE 26: an fp8 GEMM's activation quantisation is not charged as its own term (the ramps' rows
 * are timed through the quantised linear op).
 */
function addGemmNode(
  ctx: PlanContext,
  kp: KindPlan,
  groups: GemmGroups,
  node: Extract<GraphNode, { op: 'GEMM' }>,
): void {
  const w = node.weight_dtype ?? ctx.served;
  const par = node.parallel ?? 'column';
  const div = par === 'replicated' ? 1 : ctx.tp;
  addGemm(
    ctx,
    groups,
    w,
    (2 * node.n * node.k) / div,
    par === 'column' ? node.n / ctx.tp : node.n,
    par === 'row' ? node.k / ctx.tp : node.k,
  );
  kp.weightBytes += (node.n * node.k * bytesPerElement(w)) / div;
}

/**
 * The fitted expert law for a GroupedGEMM node (issue 13; core/laws/moe-experts.ts; KNOWN DIVERGENCE 12),
 * folded by calling expertWork/expertTerms once on unit work: floor, per-pair and per-touched-expert
 * arithmetic and fixed cost, per-touched-expert read and re-read per extra m-tile, per-token route, pair and token rows. Needs
 * `moe_expert_eps_max_<dtype>` for the expert weight dtype; `moe_expert_{floor,m_half,route_rate,per_expert,pair_rate,reread,token_rate}_<dtype>`
 * absent price as 0 (the fitter
 * writes no term pinned at 0). The law is fitted on balanced rows and prices balanced routing: the
 * imbalance median is not applied to it. Undefined (with a note naming the entry) when the entry or
 * the format's dense peak is missing: the caller falls back to the dense GEMM ramp.
 */
function expertLawPlan(
  ctx: PlanContext,
  node: Extract<GraphNode, { op: 'GroupedGEMM' }>,
  w: StorageDtype,
  shards: number,
): ExpertLawPlan | undefined {
  const law = expertLawDtype(ctx, w);
  const ks = expertKernelSetOf(ctx, law);
  const eps = ctx.coef.opt(`moe_expert_eps_max_${ks.set}`);
  // Grouped four-bit weight-only experts (mxfp4, int4) run at the bf16 peak on their own fitted law (seed "Arithmetic rates").
  const peak = (EXPERT_DTYPES as readonly string[]).includes(law)
    ? peakFlopsPerUs(ctx.coef.chip, expertComputeDtype(law as ExpertDtype))
    : undefined;
  if (eps === undefined || peak === undefined) {
    noteDenseRampExperts(ctx, node, w, eps === undefined);
    return undefined;
  }
  const own = expertComputeDtype(law as ExpertDtype) !== law;
  ctx.coef.expertChoices.set(w, {
    weight_dtype: w,
    use: 'experts',
    ramp: `moe_expert_${ks.set}`,
    ...(ks.kernel ? { kernel: ks.kernel } : {}),
    peak_tflops: peak / 1e6,
    bytes_per_value: bytesPerElement(w),
    ...(law !== w
      ? {
          note: `grouped ${w} experts on ${ctx.coef.chip.name} (no ${w} tensor-core peak, no moe_expert_eps_max_${w}): weight-only kernels at the bf16 peak, priced on the fitted moe_expert_${law} law with ${w}'s ${bytesPerElement(w)} B per value`,
        }
      : own
        ? {
            note: `grouped ${w} experts: weight-only kernels at the bf16 peak, own fitted efficiency moe_expert_eps_max_${w}`,
          }
        : {}),
  });
  noteGroupRoutedLeftOut(ctx, node, ks.set);
  const folded = foldExpertLaw(ctx, node, ks.set, bytesPerElement(w), shards, eps, peak);
  ctx.coef.expertChoices.get(w)!.reread = folded.reread;
  return folded.plan;
}

/**
 * A note when the expert law `set` was fitted without this node's own geometry (its `moe_expert_eps_max_<set>`
 * evidence lists the geometry among the balanced series left out as group-routed: DeepSeek-V3's, docs/fitting.md
 * "MoE expert time"): the model's shape is then outside the fit and its holdouts, and priced by the law's reach
 * across the other shapes (its shape holdout), with the fit's check of those rows where recorded. The note format
 * is core/catalog/group-routing.ts's.
 */
function noteGroupRoutedLeftOut(ctx: PlanContext, node: Extract<GraphNode, { op: 'GroupedGEMM' }>, set: string): void {
  const ev = ctx.coef.reg.entries.get(`moe_expert_eps_max_${set}`)?.entry.evidence;
  const key = expertGeometryKey({ hidden: node.k, inter: node.n, experts: node.experts, topk: node.top_k });
  if (!ev || !notesLeaveOut(ev.notes, key)) return;
  const shape = ev.holdout_error?.geo;
  const check = leftOutCheckOf(ev.notes);
  const note =
    `experts: moe_expert_*_${set} was fitted without ${key}'s balanced rows (this geometry routes by groups, so the ` +
    `collector's balanced rows are not balanced; docs/fitting.md "MoE expert time"): the model's own shape is outside ` +
    `the fit, priced on the law's reach across the other shapes${shape !== undefined ? ` (shape holdout geo ${shape})` : ''}` +
    (check
      ? `; its ${check.n} rows, their routing emulated, score geo ${check.geo} (bias ${check.bias}) on this law`
      : '');
  if (!ctx.coef.assumptions.includes(note)) ctx.coef.assumptions.push(note);
}

/** The expert-law entries a kernel set needs before the pricer uses it (expertKernelSetOf). */
const KERNEL_SET_CORE = ['floor', 'eps_max'] as const;

/**
 * The expert law's registry set for dtype `law` at the deployment's ep (DECISION, docs/pricer.md "Expert
 * kernels"): the kernel the lane runs at this ep mode (`moe_expert_*_<law>_<tag>_<mode>`, a kernel chosen at
 * one mode), else the kernel it runs at every ep (`_<law>_<tag>`), else the dtype pooled over its kernels
 * (`_<law>`). Tags in EXPERT_KERNEL_TAGS order; `kernel` says which and why, for `price` to show.
 */
function expertKernelSetOf(ctx: PlanContext, law: string): { set: string; kernel?: string } {
  // A kernel set is used only with its floor and eps_max both present (every fitted set has them: the
  // fused-MoE timings at one token are tens of µs, so the floor never pins at 0), so one stray entry
  // of a set never prices that kernel with the rest of its law at 0 or ∞.
  const has = (set: string) => KERNEL_SET_CORE.every((coef) => ctx.coef.opt(`moe_expert_${coef}_${set}`) !== undefined);
  const mode = expertEpMode(ctx.ep);
  const at = mode === 'ep1' ? 'ep 1' : 'ep > 1';
  for (const tag of EXPERT_KERNEL_TAGS)
    if (has(expertKernelSet(law, tag, mode)))
      return { set: expertKernelSet(law, tag, mode), kernel: `${tag} (the lane's ${law} kernel at ${at})` };
  for (const tag of EXPERT_KERNEL_TAGS)
    if (has(expertKernelSet(law, tag)))
      return { set: expertKernelSet(law, tag), kernel: `${tag} (the lane's ${law} kernel at every ep)` };
  return { set: law };
}

/**
 * Four-bit weight-only formats measured as grouped experts, in the order a format without its own law
 * borrows them (mxfp4 shares nvfp4's E2M1 values and block scales; int4 is the W4A16 kernel family).
 */
const WEIGHT_ONLY_EXPERT_PROXIES = ['mxfp4', 'int4'] as const;

/**
 * The dtype whose fitted expert law prices `w`'s experts (DECISION, docs/pricer.md "Expert formats"): `w`
 * itself when the registry has `moe_expert_eps_max_<w>`; else, when the chip has no tensor-core peak for
 * `w` (its dense GEMMs fall back to the bf16 weight-only rate, e.g. nvfp4 on Hopper), the first measured
 * four-bit weight-only law (a four-bit `w`) or bf16's law, since those experts run the same
 * dequantise-to-bf16 kernels; else `w` (no law: the caller notes and uses the dense ramp).
 */
function expertLawDtype(ctx: PlanContext, w: StorageDtype): StorageDtype {
  const has = (d: string) => ctx.coef.opt(`moe_expert_eps_max_${d}`) !== undefined;
  const dense = computeFormat(w, ctx.coef.chip, (d) => ctx.coef.opt(`gemm_eps_max_${d}`) !== undefined);
  if (has(w) || w === 'bf16' || dense.ramp !== 'bf16') return w;
  const fourBit = bytesPerElement(w) < 1;
  for (const d of [...(fourBit ? WEIGHT_ONLY_EXPERT_PROXIES : []), 'bf16' as const]) if (has(d)) return d;
  return w;
}

/** Why the fitted expert law is not used (note and `info.formats` choice): no eps_max entry, or no dense peak. */
function noteDenseRampExperts(
  ctx: PlanContext,
  node: Extract<GraphNode, { op: 'GroupedGEMM' }>,
  w: StorageDtype,
  noEntry: boolean,
): void {
  const why = noEntry ? `no moe_expert_eps_max_${w} in the registry` : `no dense ${w} peak on ${ctx.coef.chip.name}`;
  const note = `${why}: ${node.role ?? 'experts'} priced on the dense GEMM ramp (fitted expert law not used)`;
  ctx.coef.staticNotes.add(note);
  const f = ctx.coef.format(w);
  ctx.coef.expertChoices.set(w, {
    weight_dtype: w,
    use: 'experts',
    ramp: `dense_ramp:${f.ramp}`,
    peak_tflops: f.peak_flops_per_us / 1e6,
    bytes_per_value: bytesPerElement(w),
    note,
  });
}

/**
 * The expert law's per-step constants (expertLawPlan): expertWork/expertTerms (core/laws/moe-experts.ts)
 * evaluated once on unit work. `w` is the law's registry set (expertKernelSetOf: dtype, or dtype and kernel), `bytesPerValue` the served experts'
 * bytes per weight value; `eps` is `moe_expert_eps_max_<w>` (fraction), `peak` the dense peak, FLOPs/µs.
 * Returns the plan and the re-read term's facts (`price` states whether it applies).
 */
function foldExpertLaw(
  ctx: PlanContext,
  node: Extract<GraphNode, { op: 'GroupedGEMM' }>,
  w: string,
  bytesPerValue: number,
  shards: number,
  eps: number,
  peak: number,
): { plan: ExpertLawPlan; reread: ExpertRereadChoice } {
  const c: ExpertCoefficients = {
    eps_max: eps,
    m_half: ctx.coef.opt(`moe_expert_m_half_${w}`) ?? 0,
    floor_us: ctx.coef.opt(`moe_expert_floor_${w}`) ?? 0,
    route_bytes_per_us: ctx.coef.opt(`moe_expert_route_rate_${w}`) ?? Infinity,
    expert_us: ctx.coef.opt(`moe_expert_per_expert_${w}`) ?? 0,
    pair_bytes_per_us: ctx.coef.opt(`moe_expert_pair_rate_${w}`) ?? Infinity,
    reread: ctx.coef.opt(`moe_expert_reread_${w}`) ?? 0,
    token_bytes_per_us: ctx.coef.opt(`moe_expert_token_rate_${w}`) ?? Infinity,
  };
  const hbm = ctx.coef.chip.hbm_bytes_per_us;
  const r: ExpertRates = {
    peak_flops_per_us: peak,
    hbm_bytes_per_us: hbm,
    hbm_derate: ctx.coef.hbmDerate,
    bytes_per_element: bytesPerValue,
    l2_bytes: l2Bytes(ctx.coef.chip.l2_mib),
  };
  // One step token: P = k·L/E pairs and k·H·2 route bytes; the weight bytes of the touched experts divided back to one.
  const layer = {
    tokens: 1,
    hidden: node.k,
    inter: node.n,
    topk: node.top_k,
    experts: node.experts,
    tp: shards,
    ep: ctx.ep,
    gated: node.gated !== false,
  };
  const one = expertWork(layer, r.bytes_per_element, r.l2_bytes);
  const expertBytes = one.weight_bytes / one.touched;
  // One pass over one touched expert's L2-missing weights (the step counts the passes: core/laws expertRereadPasses).
  const l2_miss_fraction = l2MissFraction(expertBytes, r.l2_bytes);
  const reread_bytes = expertBytes * l2_miss_fraction;
  const perTouched = expertTerms(
    {
      ...one,
      touched: 1,
      pairs: 0,
      weight_bytes: expertBytes,
      route_bytes: 0,
      pair_bytes: 0,
      token_bytes: 0,
      reread_bytes,
    },
    c,
    r,
  );
  const perPair = expertTerms(
    {
      ...one,
      touched: 1,
      pairs: 1,
      weight_bytes: 0,
      route_bytes: one.route_bytes,
      pair_bytes: one.pair_bytes,
      token_bytes: one.token_bytes,
      reread_bytes: 0,
    },
    { ...c, m_half: 0 },
    r,
  );
  const plan: ExpertLawPlan = {
    floorUs: perTouched.floor_us,
    pairsPerToken: one.pairs,
    arithUsPerPair: perPair.arith_us,
    // The fixed cost per touched expert (set-up, scales) is charged with the arithmetic, on the SMs.
    arithUsPerTouched: perTouched.arith_us + perTouched.touch_us,
    readUsPerTouched: perTouched.read_us,
    // The rank's pairs' activation rows (P·H·2 bytes per step token) and the token's own row (H·2) are memory traffic,
    // charged with the route.
    routeUsPerToken: perPair.route_us + perPair.pair_us + perPair.token_us,
    rereadUsPerPass: perTouched.reread_us,
  };
  const reread: ExpertRereadChoice = {
    reads_per_extra_tile: c.reread ?? 0,
    expert_bytes_per_rank: expertBytes,
    l2_bytes: r.l2_bytes,
    l2_miss_fraction,
    us_per_extra_tile: perTouched.reread_us,
    tile_m: EXPERT_TILE_M,
    experts: node.experts,
    top_k: node.top_k,
    local_experts: node.experts / ctx.ep,
    pairs_per_token: one.pairs,
  };
  return { plan, reread };
}

/** The expert re-read at one step (expertRereadAt): what the pricer's expert term charges for it per layer. */
export interface ExpertRereadAt {
  /** Distinct local experts touched (core/laws/moe.ts expertsTouched). */
  touched: number;
  /** Routed pairs per touched expert, tokens. */
  tokens_per_touched: number;
  /** m-tiles past the first per touched expert (core/laws/moe-experts.ts expertRereadPasses). */
  extra_tiles: number;
  /** touched · us_per_extra_tile · extra_tiles, µs per MoE layer (HBM). */
  us_per_layer: number;
}

/**
 * The re-read term of a fitted expert law at a step of `step_tokens` scheduled tokens (the walk's tok),
 * with the same arithmetic as the compiled expert term (terms.ts expertCode). Pure; not on the hot path.
 * @param r the choice's re-read facts (`info.formats[].reread`)
 * @param step_tokens tokens the step schedules (≥ 0)
 */
export function expertRereadAt(r: ExpertRereadChoice, step_tokens: number): ExpertRereadAt {
  const touched = expertsTouched(step_tokens, r.experts, r.top_k, r.local_experts);
  const tokens_per_touched = touched > 0 ? (step_tokens * r.pairs_per_token) / touched : 0;
  const extra_tiles = expertRereadPasses(tokens_per_touched);
  const us_per_layer = r.us_per_extra_tile > 0 && touched > 0 ? touched * r.us_per_extra_tile * extra_tiles : 0;
  return { touched, tokens_per_touched, extra_tiles, us_per_layer };
}

/** Routed experts on the dense GEMM ramp (the path before the fitted law; reference §4.6): routed FLOPs·imbalance, one expert's read. */
function addExpertsOnDenseRamp(
  ctx: PlanContext,
  kp: KindPlan,
  node: Extract<GraphNode, { op: 'GroupedGEMM' }>,
  w: StorageDtype,
  local: number,
  shards: number,
  mats: number,
): void {
  const f = ctx.coef.format(w);
  ctx.gemmRamps.add(f.ramp);
  const shape = shapeFactor(node.n / shards, f.nh) * shapeFactor(node.k, f.kh);
  if (ctx.imbalance === undefined)
    ctx.coef.assumptions.push('no moe_routing_imbalance_median: routing taken as balanced (1.0)');
  const imb = ctx.imbalance ?? 1;
  kp.moeA += rampUsPerToken(
    (node.top_k * (local / node.experts) * 2 * mats * node.n * node.k * imb) / shards,
    f.peak_flops_per_us,
    f.eps,
    shape,
  );
  kp.moeMh = f.mh;
  kp.moeUsPerExpert = readUs(ctx, (mats * node.n * node.k * bytesPerElement(w)) / shards);
}

/**
 * A GroupedGEMM node: routed experts and any shared experts (seed "Experts"; reference §4.6). KNOWN DIVERGENCE 20:
 * the shared experts take the node's weight dtype, also where a checkpoint leaves them unquantised.
 */
function addExpertsNode(
  ctx: PlanContext,
  kp: KindPlan,
  groups: GemmGroups,
  node: Extract<GraphNode, { op: 'GroupedGEMM' }>,
): void {
  const w = node.weight_dtype ?? ctx.served;
  const local = node.experts / ctx.ep; // an integer: validateParallelism refused anything else
  // KNOWN DIVERGENCE 3 (reference §4.6): under pure TP each rank computes every expert at 1/tp
  // width, so routed FLOPs are divided by tp like the bytes; BLIS keeps them whole on purpose.
  const shards = ctx.ep > 1 ? 1 : ctx.tp;
  const mats = node.gated === false ? 2 : 3;
  kp.hasMoe = true;
  kp.moeExperts = node.experts;
  kp.moeTopK = node.top_k;
  kp.moeLocal = local;
  kp.moeLaw = expertLawPlan(ctx, node, w, shards);
  if (!kp.moeLaw) addExpertsOnDenseRamp(ctx, kp, node, w, local, shards, mats);
  const perExpertBytes = (mats * node.n * node.k * bytesPerElement(w)) / shards;
  kp.weightBytes += perExpertBytes * local;
  kp.routedBytes += perExpertBytes * local;
  const shared = node.shared_experts ?? 0;
  if (shared > 0) {
    const ns = node.shared_intermediate_size ?? node.n;
    addGemm(ctx, groups, w, (2 * mats * ns * node.k * shared) / ctx.tp, ns / ctx.tp, node.k);
    kp.weightBytes += (mats * ns * node.k * shared * bytesPerElement(w)) / ctx.tp;
  }
}

/**
 * The reader of an attention node: a layer that states a window reads at most the window, whatever its
 * kind (seed). KNOWN DIVERGENCE 1 (reference §4.5): the BLIS kernel does not bound the primary swa decode read.
 */
function attentionReader(node: Extract<GraphNode, { op: 'Attention' }>): ReaderSpec {
  if (node.role === 'indexer') return { window: 0, ratio: node.compress_ratio ?? 1, cap: Infinity };
  // MSA: the selected blocks, at most index_topk tokens (16 top-k blocks + the local one for MiniMax-M3).
  if (node.kind === 'msa') return { window: 0, ratio: 1, cap: node.index_topk ?? Infinity };
  if (node.kind === 'sparse')
    return { window: node.window ?? 0, ratio: node.compress_ratio ?? 1, cap: node.index_topk ?? Infinity };
  return { window: node.window ?? Infinity, ratio: 0, cap: Infinity };
}

/**
 * Bytes one decode row reads per cached entry of an attention node: a latent entry (MLA, sparse), an
 * indexer's fp8 index key with its scale (core/laws/sparse.ts indexKeyBytes), or K and V of the rank's heads.
 * KNOWN DIVERGENCE 10 (reference §4.5 divides a whole-model KV figure by TotalLayers, which under-counts
 * hybrids): each layer's KV bytes come from its own attention node.
 */
type AttentionNode = Extract<GraphNode, { op: 'Attention' }>;

function kvBytesPerToken(ctx: PlanContext, node: AttentionNode): number {
  if (node.role === 'indexer') return node.n_kv * indexKeyBytes(node.d_h);
  if (node.kind === 'mla' || node.kind === 'sparse') return node.n_kv * node.d_h * ctx.kvB;
  return 2 * Math.max(1, Math.floor(node.n_kv / ctx.tp)) * node.d_h * ctx.kvB;
}

/**
 * KV heads one decode row reads on this rank: the rank's share of K/V heads (at least 1) for full and
 * windowed attention, the node's latent or index heads (replicated) otherwise. The decode law's work
 * items are decode rows × this (issue 16; src/fit/attention.ts fits p = batch × n_kv).
 */
function kvHeadsPerRank(ctx: PlanContext, node: Extract<GraphNode, { op: 'Attention' }>): number {
  if (node.role === 'indexer' || node.kind === 'mla' || node.kind === 'sparse') return Math.max(1, node.n_kv);
  return Math.max(1, Math.floor(node.n_kv / ctx.tp));
}

/** Decode floor and rate of an attention node: the indexer's own scan law, else its kind's (coefficients.ts). */
function decodeLaw(ctx: PlanContext, node: AttentionNode) {
  const dc = node.role === 'indexer' ? ctx.coef.indexerDecode() : ctx.coef.decodeAttention(node.kind);
  if (!dc)
    ctx.coef.assumptions.push(
      `no attention_decode_rate: ${node.kind} decode charged as raw bytes at the derated HBM rate, no floor`,
    );
  return dc;
}

/**
 * The MLA decode wave law at `qHeads` local heads where the registry has it and no module law
 * (coefficients.ts mlaWaveDecode; core/laws/mla.ts), else undefined.
 */
function wavePlan(ctx: PlanContext, qHeads: number): WavePlan | undefined {
  const w = ctx.coef.mlaWaveDecode(ctx.kvB, qHeads);
  if (!w) return undefined;
  return {
    floor_us: w.floor_us,
    wave_us: w.wave_us,
    us_per_key: mlaWaveUsPerKey(w, qHeads),
    programs_per_row: mlaWaveProgramsPerRow(w, qHeads),
    slots: ctx.coef.chip.sm_count,
  };
}

/**
 * The MLA kernel prefill law's µs per (prefill token × local head) where the registry has no module law
 * (coefficients.ts mlaKernelOnly; a module law's per_token_head is the projections', never charged), else 0.
 */
function mlaPrefillHeadTokenUs(ctx: PlanContext): number {
  const ht = ctx.coef.mlaKernelOnly() ? ctx.coef.opt('mla_prefill_head_token') : undefined;
  if (ht === undefined) return 0;
  ctx.coef.staticNotes.add(
    `MLA prefill: no module fit on ${ctx.coef.chip.name}; the kernel tables' per-(prefill token × local head) cost charged beside the pairs (mla_prefill_head_token ${ht.toPrecision(4)} µs)`,
  );
  return ht;
}

/**
 * Decode floor (µs) and µs per key read of an attention node: MLA's own law over its latent bytes and local
 * heads where the registry has it (core/laws/mla.ts; KNOWN DIVERGENCE 25), else floor + bytes / rate of its kind
 * (decodeLaw).
 */
function decodeCost(ctx: PlanContext, node: AttentionNode, kvPerToken: number, qHeads: number): DecodeLaw {
  const mla = node.kind === 'mla' && node.role !== 'indexer' ? ctx.coef.mlaDecode(ctx.kvB) : undefined;
  // The decode law with its rate in cached tokens per µs (1 / µs per token), so the walk's tokens are its work.
  if (mla)
    return { floor_us: mla.floor_us, rate: 1 / mlaDecodeUsPerKey(mla, qHeads, kvPerToken), item_us: 0, p_half: 0 };
  const dc = decodeLaw(ctx, node);
  return dc
    ? { ...dc, rate: 1 / floorPlusWork(0, kvPerToken, dc.rate) }
    : { floor_us: 0, rate: 1 / readUs(ctx, kvPerToken), item_us: 0, p_half: 0 };
}

/** The prefill work_scale of a node's kind: MLA's module fit (`mla_prefill_work_scale`), else the general one. */
function prefillScaleOf(ctx: PlanContext, node: AttentionNode): number | undefined {
  const mla = node.kind === 'mla' ? ctx.coef.opt('mla_prefill_work_scale') : undefined;
  return mla ?? ctx.prefillScale;
}

/** The local MSA shape of a `kind: msa` node at tp (KV and index heads replicated below one per rank). */
function msaShape(ctx: PlanContext, node: AttentionNode): MsaShape {
  return {
    heads: node.n_q / ctx.tp,
    kv_heads: Math.max(1, Math.floor(node.n_kv / ctx.tp)),
    head_dim: node.d_h,
    hidden: ctx.hidden,
    index_heads: Math.max(1, Math.floor((node.index_heads ?? node.n_kv) / ctx.tp)),
    index_dim: node.index_head_dim ?? node.d_h,
    cap_tokens: node.index_topk ?? Infinity,
  };
}

/**
 * A `kind: msa` node's attention where the registry has no MSA module law: its kind's decode law over the
 * selected KV (`kvBytes` per token read), prefill pairs at the bf16 ramp (docs/pricer.md "MSA").
 */
function msaWithoutLaw(ctx: PlanContext, node: AttentionNode, s: MsaShape, kvBytes: number, sel: number): AttnPlan {
  const dc = decodeLaw(ctx, node);
  const perPair = rampUsPerToken(4 * s.heads * s.head_dim, ctx.bf16.peak_flops_per_us, ctx.bf16.eps);
  return {
    reader: sel,
    decLaw: dc
      ? { ...dc, rate: 1 / floorPlusWork(0, kvBytes, dc.rate) }
      : { floor_us: 0, rate: 1 / readUs(ctx, kvBytes), item_us: 0, p_half: 0 },
    decHeads: 1,
    decWave: undefined,
    decUsPerDecodeToken: 0,
    preFloor: ctx.prefillScale === undefined ? 0 : ctx.prefillFloor,
    preUsPerPair: perPair * (ctx.prefillScale ?? 1),
    preUsPerToken: 0,
    form: undefined,
    formBytesPerPair: 0,
  };
}

/**
 * A `kind: msa` node priced by MiniMax-M3's measured module law (core/laws/sparse.ts msaDecodeWork /
 * msaPrefillWork at unit work; docs/pricer.md "MSA"): two attention entries, the selected KV (reader capped
 * at index_topk) and the index-key stream (whole context). Decode: floor + the module weights once per step,
 * per decode token the per-request cost and projection FLOPs, per token read its bytes at the fitted rates.
 * Prefill: fixed + per_request + per_token (with the projections' FLOPs) + selected pairs and index pairs at
 * their FLOP rates. The node's projection GEMMs (`msa: true`) are not priced again (buildKind).
 * KNOWN DIVERGENCE 29: the law is fitted on bf16 linears and KV; other widths change the bytes, not the rates.
 */
function addMsaNode(ctx: PlanContext, kp: KindPlan, node: AttentionNode): void {
  const s = msaShape(ctx, node);
  const c = msaCacheBytesPerToken(s, ctx.kvB);
  const law = ctx.coef.msaModule();
  kp.kvBytesPerToken += c.kv + c.index;
  kp.kvResident.push([Infinity, c.kv + c.index]);
  kp.mixers += 1;
  const sel = readerIndex(ctx.readers, attentionReader(node));
  const all = readerIndex(ctx.readers, { window: Infinity, ratio: 0, cap: Infinity });
  if (law === undefined) {
    kp.attn.push(msaWithoutLaw(ctx, node, s, c.kv, sel));
    return;
  }
  const { decode: d, prefill: p } = law;
  const unitDec = msaDecodeWork(s, 1, 0, bytesPerElement(ctx.served), ctx.kvB);
  const unitPre = msaPrefillWork(s, 1, 1, 1, 1);
  const none = { fixed_us: 0, per_request_us: 0, per_token_us: 0 };
  kp.attn.push({
    reader: sel,
    decLaw: {
      floor_us: d.floor_us + unitDec.bytes / d.bytes_per_us,
      rate: d.bytes_per_us / c.kv,
      item_us: 0,
      p_half: 0,
    },
    decHeads: 1,
    decWave: undefined,
    decUsPerDecodeToken: d.per_request_us + unitDec.flops / d.flops_per_us,
    preFloor: 0,
    preUsPerPair: 0,
    preUsPerToken: 0,
    form: {
      fixed_us: p.fixed_us,
      per_request_us: p.per_request_us,
      per_token_us: p.per_token_us + unitPre.proj_flops / p.proj_flops_per_us,
      bytes_per_us: p.attn_flops_per_us,
    },
    formBytesPerPair: unitPre.attn_flops,
  });
  kp.attn.push({
    reader: all,
    decLaw: { floor_us: 0, rate: d.index_bytes_per_us / c.index, item_us: 0, p_half: 0 },
    decHeads: 1,
    decWave: undefined,
    decUsPerDecodeToken: 0,
    preFloor: 0,
    preUsPerPair: 0,
    preUsPerToken: 0,
    form: { ...none, bytes_per_us: p.index_flops_per_us },
    formBytesPerPair: unitPre.index_flops,
  });
}

/** An Attention node: decode floor + reads, prefill floor + pairs (seed "Attention"; reference §4.5). */
function addAttentionNode(ctx: PlanContext, kp: KindPlan, node: AttentionNode): void {
  if (node.kind === 'msa') {
    addMsaNode(ctx, kp, node);
    return;
  }
  const indexer = node.role === 'indexer';
  const r = attentionReader(node);
  const kvPerToken = kvBytesPerToken(ctx, node);
  // Query heads are split over tp for every kind: vLLM's MLA also runs num_heads / tp local heads (only
  // its latent cache is replicated, which kvPerToken reflects). KNOWN DIVERGENCE 13: an indexer's heads are not split (issue 14):
  // every rank scores the whole index for the top-k it needs.
  const qHeads = indexer ? node.n_q : node.n_q / ctx.tp;
  const mla = node.kind === 'mla' && !indexer;
  const wave = mla ? wavePlan(ctx, qHeads) : undefined;
  // With a wave law the generated code prices decWave; decLaw then holds its one-wave floor and µs per key.
  const dc = wave
    ? { floor_us: wave.floor_us, rate: 1 / wave.us_per_key, item_us: 0, p_half: 0 }
    : decodeCost(ctx, node, kvPerToken, qHeads);
  const flopsPerPair = (indexer ? 2 : 4) * qHeads * (node.prefill_d_h ?? node.d_h);
  // KNOWN DIVERGENCE 4 (reference §4.5 [CHECK]): work_scale is fitted against the bf16 ramp, so
  // prefill attention is priced on the bf16 peak and ramp whatever the served weight dtype.
  const scale = prefillScaleOf(ctx, node) ?? 1;
  kp.attn.push({
    reader: readerIndex(ctx.readers, r),
    decLaw: dc,
    decHeads: kvHeadsPerRank(ctx, node),
    decWave: wave,
    decUsPerDecodeToken: 0,
    preFloor: ctx.prefillScale === undefined ? 0 : ctx.prefillFloor,
    preUsPerPair: rampUsPerToken(flopsPerPair, ctx.bf16.peak_flops_per_us, ctx.bf16.eps, scale),
    preUsPerToken: mla ? mlaPrefillHeadTokenUs(ctx) * qHeads : 0,
    form: node.kind === 'sparse' ? ctx.coef.prefillForm(indexer ? 'indexer' : 'sparse') : undefined,
    formBytesPerPair: kvPerToken, // KNOWN DIVERGENCE 14: read per query block, pairs × entry bytes
  });
  kp.kvBytesPerToken += kvPerToken;
  // Resident KV (capacity check): a windowed layer keeps its window (vLLM frees blocks that
  // slide out); full and latent caches keep the whole context; a sparse or indexer cache keeps its
  // compressed stream (one entry per ratio tokens) plus its window.
  if (r.ratio === 0) kp.kvResident.push([r.window, kvPerToken]);
  else {
    kp.kvResident.push([Infinity, kvPerToken / r.ratio]);
    if (r.window > 0) kp.kvResident.push([r.window, kvPerToken]);
  }
  kp.mixers += 1;
}

/**
 * An Elementwise node: its bytes per token at the derated HBM rate. KNOWN DIVERGENCE 6 (reference §4.4):
 * norms run on the full hidden state on every rank, so their bytes are not divided by tp. An mHC half with
 * its measured form (seed "Hyper-connections"; core/laws/sparse.ts) is priced floor + bytes / its own rate.
 */
function addElementwiseNode(ctx: PlanContext, kp: KindPlan, node: Extract<GraphNode, { op: 'Elementwise' }>): void {
  const bytes = node.bytes_per_token ?? 4 * ctx.hidden;
  const m = node.mhc === undefined ? undefined : ctx.coef.mhc(node.mhc);
  if (m === undefined) {
    kp.eltUsPerToken += readUs(ctx, bytes);
    return;
  }
  kp.fixedHbmUs += m.floor;
  kp.eltUsPerToken += floorPlusWork(0, bytes, m.rate);
}

/**
 * Decode µs per token of a recurrent mixer: the state bytes at `recurrent_decode_rate_<k>` (without it, at the
 * derated HBM rate, noted); Mamba2's state update, measured nowhere (the table holds only its conv), is added
 * as the chunked scan: per token at the measured prefill rate where the registry has one, else its arithmetic
 * on the bf16 ramp at m = 1 (labelled assumed). KNOWN DIVERGENCE 16 (AIConfigurator prices it by bandwidth).
 */
function recurrentDecodeUsPerToken(ctx: PlanContext, k: string, stateBytes: number, scanFlops: number): number {
  const rate = ctx.coef.opt(`recurrent_decode_rate_${k}`);
  if (rate === undefined)
    ctx.coef.assumptions.push(
      `no recurrent_decode_rate_${k}: ${k} decode priced as its state bytes at the derated HBM rate`,
    );
  const state = rate === undefined ? readUs(ctx, stateBytes) : floorPlusWork(0, stateBytes, rate);
  if (k !== 'mamba2') return state;
  const preRate = ctx.coef.opt(`recurrent_prefill_rate_${k}`);
  ctx.coef.assumptions.push(
    `mamba2 decode state update (selective_state_update) is measured nowhere: priced as the chunked scan (${preRate === undefined ? 'its arithmetic on the bf16 ramp' : 'at recurrent_prefill_rate_mamba2'}), assumed`,
  );
  return (
    state +
    (preRate === undefined
      ? rampUs(rampUsPerToken(scanFlops, ctx.bf16.peak_flops_per_us, ctx.bf16.eps), 1, ctx.bf16.mh)
      : floorPlusWork(0, scanFlops, preRate))
  );
}

/**
 * A RecurrentUpdate node (seed "Recurrent mixers"; core/laws/recurrent.ts): num_heads state heads of
 * head_dim × state_size (d_v × d_k) fp32 state, split over tp. Measured laws where the registry has them
 * (`recurrent_{decode,prefill}_*_<kind>`, src/fit/recurrent.ts); every absent term falls back with a note.
 */
function addRecurrentNode(ctx: PlanContext, kp: KindPlan, node: Extract<GraphNode, { op: 'RecurrentUpdate' }>): void {
  const k = node.recurrent_kind;
  const heads = node.num_heads / ctx.tp;
  const stateBytes = recurrentDecodeBytesPerRow(heads, node.head_dim, node.state_size);
  const scanFlops = chunkedScanFlopsPerToken(heads, node.head_dim, node.state_size);
  const preRate = ctx.coef.opt(`recurrent_prefill_rate_${k}`);
  const stateRate = ctx.coef.opt(`recurrent_prefill_state_rate_${k}`);
  if (preRate === undefined)
    ctx.coef.assumptions.push(
      `no recurrent_prefill_rate_${k}: ${k} prefill priced as the chunked scan's arithmetic on the bf16 ramp`,
    );
  kp.rec.push({
    decFloor: ctx.coef.opt(`recurrent_decode_floor_${k}`) ?? 0,
    decUsPerToken: recurrentDecodeUsPerToken(ctx, k, stateBytes, scanFlops),
    preFloor: preRate === undefined ? 0 : (ctx.coef.opt(`recurrent_prefill_floor_${k}`) ?? 0),
    preUsPerSeq: preRate === undefined || stateRate === undefined ? 0 : floorPlusWork(0, stateBytes, stateRate),
    preUsPerToken:
      preRate === undefined
        ? undefined
        : floorPlusWork(0, recurrentPrefillFlopsPerToken(heads, node.head_dim, node.state_size), preRate),
    preA: rampUsPerToken(scanFlops, ctx.bf16.peak_flops_per_us, ctx.bf16.eps),
    preMh: ctx.bf16.mh,
  });
  kp.mixers += 1;
}

/**
 * A collective node (seed "Collectives"; reference §4.7): b = bytes per token (default hidden · 2)
 * × top_k when routed. A group of one moves nothing and launches nothing (tp 1 emits no all-reduce).
 * @returns false when the node launches nothing (its kernels are not counted)
 */
function addCollectiveNode(
  ctx: PlanContext,
  kp: KindPlan,
  node: GraphNode & { op: 'AllReduce' | 'AllGather' | 'ReduceScatter' | 'All2All' },
  nodes: readonly GraphNode[],
  withPrefill: boolean,
): boolean {
  const width = node.op === 'All2All' ? ctx.ep : ctx.tp;
  if (width <= 1) return false;
  const op = COLLECTIVE_OP[node.op]!;
  const experts = nodes.filter((n) => n.op === 'GroupedGEMM') as Array<{ top_k: number; experts: number }>;
  const topK = node.routed ? Math.max(1, ...experts.map((n) => n.top_k)) : 1;
  const ep = node.op === 'All2All' ? deepepPlan(ctx, node, width, withPrefill, topK, experts[0]?.experts) : undefined;
  if (ep) kp.colls.push(ep);
  else
    kp.colls.push({
      ...ctx.coef.collective(op, width),
      bytesPerToken: (node.bytes_per_token ?? ctx.hidden * 2) * topK,
    });
  return true;
}

/**
 * An MoE dispatch or combine on the fitted DeepEP curve (issue 13 item 3; docs/pricer.md "Expert-parallel
 * all-to-all"): a step with prefill runs DeepEP's normal mode, a decode-only step its low-latency mode
 * (SGLang's `--deepep-mode auto` rule). Bytes per token from core/laws/expert-alltoall.ts. Undefined (the
 * NCCL alltoall curve is charged, noted) when the node is no routed dispatch/combine or the registry has no
 * curve for the mode. Past DeepEP's widest measured width, where the registry has TRT-LLM's NVLinkTwoSided
 * curves (`mnnvl`, gb200 ep 2–64 over the NVL72 rack), those are charged instead, with their own bytes.
 */
function deepepPlan(
  ctx: PlanContext,
  node: { role?: string; routed?: boolean; bytes_per_token?: number },
  width: number,
  withPrefill: boolean,
  topk: number,
  experts: number | undefined,
): CollPlan | undefined {
  const phase = node.role === 'dispatch' || node.role === 'combine' ? node.role : undefined;
  if (!phase || !node.routed || experts === undefined) return undefined;
  const deepep = withPrefill ? 'normal' : 'll';
  // Past DeepEP's widest measured width, TRT-LLM's rack-wide MNNVL all-to-all where the registry has it (gb200 ep > 4).
  const rack = ctx.coef.expertAlltoallWidths('mnnvl', phase).length > 0;
  const mode = rack && width > (ctx.coef.expertAlltoallWidths(deepep, phase).at(-1) ?? 0) ? 'mnnvl' : deepep;
  const curve = ctx.coef.expertAlltoall(mode, phase, width);
  if (!curve) {
    ctx.coef.staticNotes.add(
      `no ${mode === 'mnnvl' ? 'MNNVL' : 'DeepEP'} ${mode} ${phase} curve (expert_alltoall_*) in the ${ctx.coef.chip.name} registry: ep ${width} ${phase} charged on the NCCL alltoall curve`,
    );
    return undefined;
  }
  // A latent MoE dispatches its latent (the node's bf16 bytes per token), others the hidden state.
  const hidden = node.bytes_per_token !== undefined ? node.bytes_per_token / 2 : ctx.hidden;
  // MNNVL dispatch is charged with an FP8 payload (1 B per element), as DeepEP's.
  const bytesPerToken =
    mode === 'mnnvl'
      ? mnnvlMessageBytes(phase, { tokens: 1, topk, hidden, ranks: width, dispatch_bytes_per_element: 1 })
      : deepepMessageBytes(mode, phase, { tokens: 1, topk, hidden, experts, ranks: width });
  return { ...curve, bytesPerToken };
}

/** Whether a node runs in this variant and deployment (`phase`, `emit`). */
function nodeRuns(node: GraphNode, withPrefill: boolean, tp: number, ep: number): boolean {
  if (node.phase === 'prefill' && !withPrefill) return false;
  if (node.emit === 'tp>1' && tp <= 1) return false;
  if (node.emit === 'ep>1' && ep <= 1) return false;
  return true;
}

/**
 * Fold one layer kind into constants.
 * @param withPrefill include prefill-only nodes (`phase: prefill`)
 * @throws UserError for a missing required coefficient (from PricerCoefficients).
 */
function buildKind(
  ctx: PlanContext,
  id: string,
  count: number,
  nodes: readonly GraphNode[],
  withPrefill: boolean,
): KindPlan {
  const groups: GemmGroups = new Map();
  const kp = emptyKind(id, count);
  for (const node of nodes) {
    if (!nodeRuns(node, withPrefill, ctx.tp, ctx.ep)) continue;
    switch (node.op) {
      case 'GEMM':
        // The measured mHC kernel already includes its small mixing GEMM (seed "Hyper-connections").
        if (node.mhc !== undefined && ctx.coef.mhc(node.mhc) !== undefined) continue;
        // A projection inside the measured MSA module: resident weights, its time is in the module law.
        if (node.msa && ctx.coef.msaModule() !== undefined) {
          const before = kp.weightBytes;
          addGemmNode(ctx, kp, new Map(), node);
          kp.moduleBytes += kp.weightBytes - before;
          break;
        }
        addGemmNode(ctx, kp, groups, node);
        break;
      case 'GroupedGEMM':
        addExpertsNode(ctx, kp, groups, node);
        break;
      case 'Attention':
        addAttentionNode(ctx, kp, node);
        break;
      case 'RecurrentUpdate':
        addRecurrentNode(ctx, kp, node);
        break;
      case 'Elementwise':
        addElementwiseNode(ctx, kp, node);
        break;
      default:
        if (!addCollectiveNode(ctx, kp, node, nodes, withPrefill)) continue;
    }
    kp.kernels += KERNELS[node.op];
  }
  // KNOWN DIVERGENCE 15, seed "Host time": a model whose code breaks capture around each layer's attention (DeepSeek-V4) replays
  // one piece per captured region under piecewise capture: one region per such layer, indexer included.
  if (nodes.some((n) => n.op === 'Attention' && n.capture_break)) kp.mixers = 1;
  kp.gemmA = Float64Array.from(groups.values(), (g) => g.A);
  kp.gemmMh = Float64Array.from(groups.values(), (g) => g.mh);
  kp.weightUs = readUs(ctx, kp.weightBytes - kp.routedBytes - kp.moduleBytes);
  return canonicalKind(kp);
}

/**
 * The kind's per-step entries rebuilt through one object literal each (same values, same order), so
 * every attention, law, form, recurrent and collective entry of every pricer has one shape: the
 * per-step terms (terms.ts) then read them monomorphically whatever the graph (entries built by
 * spreads or by different builders had different hidden classes, and a process pricing many graphs
 * made the terms' property loads polymorphic; issue 17, issue 14 "every graph < 2 µs").
 */
function canonicalKind(kp: KindPlan): KindPlan {
  kp.attn = kp.attn.map((a) => ({
    reader: a.reader,
    decLaw: { floor_us: a.decLaw.floor_us, rate: a.decLaw.rate, item_us: a.decLaw.item_us, p_half: a.decLaw.p_half },
    decHeads: a.decHeads,
    decWave:
      a.decWave === undefined
        ? undefined
        : {
            floor_us: a.decWave.floor_us,
            wave_us: a.decWave.wave_us,
            us_per_key: a.decWave.us_per_key,
            programs_per_row: a.decWave.programs_per_row,
            slots: a.decWave.slots,
          },
    decUsPerDecodeToken: a.decUsPerDecodeToken,
    preFloor: a.preFloor,
    preUsPerPair: a.preUsPerPair,
    preUsPerToken: a.preUsPerToken,
    form:
      a.form === undefined
        ? undefined
        : {
            fixed_us: a.form.fixed_us,
            per_request_us: a.form.per_request_us,
            per_token_us: a.form.per_token_us,
            bytes_per_us: a.form.bytes_per_us,
          },
    formBytesPerPair: a.formBytesPerPair,
  }));
  kp.rec = kp.rec.map((r) => ({
    decFloor: r.decFloor,
    decUsPerToken: r.decUsPerToken,
    preFloor: r.preFloor,
    preUsPerSeq: r.preUsPerSeq,
    preUsPerToken: r.preUsPerToken,
    preA: r.preA,
    preMh: r.preMh,
  }));
  kp.colls = kp.colls.map((c) => ({
    t0: c.t0,
    rt: c.rt,
    rpeak: c.rpeak,
    nic: c.nic,
    span: c.span,
    bytesPerToken: c.bytesPerToken,
  }));
  const law = kp.moeLaw;
  if (law !== undefined)
    kp.moeLaw = {
      floorUs: law.floorUs,
      pairsPerToken: law.pairsPerToken,
      arithUsPerPair: law.arithUsPerPair,
      arithUsPerTouched: law.arithUsPerTouched,
      readUsPerTouched: law.readUsPerTouched,
      routeUsPerToken: law.routeUsPerToken,
      rereadUsPerPass: law.rereadUsPerPass,
    };
  return kp;
}

/** Expand a stack and fold each distinct layer kind (both variants), with the pass's totals. */
export function buildPass(ctx: PlanContext, g: ModelGraph, stack: Stack): PassPlan {
  const seq = expandStack(stack);
  const counts = new Map<string, number>();
  for (const id of seq) counts.set(id, (counts.get(id) ?? 0) + 1);
  const plan: PassPlan = {
    withPrefill: [],
    decodeOnly: [],
    layers: seq.length,
    kernelsWithPrefill: 0,
    kernelsDecodeOnly: 0,
    pieces: 1,
    weightBytes: 0,
    kvBytesPerToken: 0,
    kvByWindow: new Map(),
  };
  for (const [id, count] of counts) {
    const kind = g.layer_kinds.find((k) => k.id === id)!;
    const a = buildKind(ctx, id, count, kind.nodes, true);
    const b = buildKind(ctx, id, count, kind.nodes, false);
    plan.withPrefill.push(a);
    plan.decodeOnly.push(b);
    plan.kernelsWithPrefill += count * a.kernels;
    plan.kernelsDecodeOnly += count * b.kernels;
    plan.pieces += count * a.mixers;
    plan.weightBytes += count * a.weightBytes;
    plan.kvBytesPerToken += count * a.kvBytesPerToken;
    for (const [w, bytes] of a.kvResident) plan.kvByWindow.set(w, (plan.kvByWindow.get(w) ?? 0) + count * bytes);
  }
  return plan;
}

/** The head: once per pass (seed "LM head once per step"). */
export function buildHead(ctx: PlanContext, g: ModelGraph): HeadPlan {
  const k = buildKind(ctx, 'head', 1, g.head, true);
  return { k, kernels: k.kernels };
}
