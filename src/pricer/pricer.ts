/**
 * The step pricer (seed shared/seeds/pricing-a-step.txt; reference §3.2, §4).
 *
 * `createPricer` does every batch-independent thing once: it expands the graph, counts layers per
 * kind, looks up coefficients, and folds each layer kind into a handful of constants (µs per token,
 * µs per byte, floors). `price(batch)` then walks the batch once and the distinct layer kinds once,
 * with plain arithmetic into preallocated accumulators; it reads no clock and allocates only its
 * small result object. Composition happens in compose.ts, nowhere else.
 *
 * Every deliberate departure from the engine or from the BLIS kernel is marked `KNOWN DIVERGENCE n`,
 * n its number in the list in docs/pricer.md (test/pricer/divergences.test.ts checks both ways).
 */
import { UserError } from '../core/errors.ts';
import { peakFlopsPerUs, type Chip } from '../core/catalog/chip.ts';
import { bytesPerElement, type StorageDtype } from '../core/catalog/dtypes.ts';
import { expandStack, type GraphNode, type ModelGraph, type Stack } from '../core/catalog/model.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import { gemmFittedRange } from './fitted-range.ts';
import { ACC_LEN, composeHead, composeHost, composeLayers, finishStep } from './compose.ts';
import { computeFormat, kvBytesPerElement, servedDtype, validateParallelism, type ComputeFormat } from './deployment.ts';
import { computeBoundMinM, shapeFactor } from '../core/laws/gemm.ts';
import { graphModeFor, launchUs } from '../core/laws/host.ts';
import { expertsTouched } from '../core/laws/moe.ts';
import { all2allSpan, nvlinkDomainGpus, ringSpan } from '../core/laws/placement.ts';
import { attendedKeys, decodeTokensRead, prefillPairs, type ReaderSpec } from '../core/laws/attention.ts';
import type { Batch, Deployment, PriceOptions, Pricer, StepPrice } from './types.ts';

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

/** Largest message in the NCCL tables the collective coefficients are fitted on (reference §1.5: 256 B–512 MiB). */
const COLLECTIVE_MAX_FITTED_BYTES = 512 * 1024 * 1024;

/** Options beyond the deployment. */
export interface PricerOptions {
  /** Drafter graph for speculative decoding; default: the model's own `speculator`. */
  drafter?: ModelGraph;
  /**
   * Multiplier s on every priced SM time (layers, experts' arithmetic, head), default 1: the engine
   * compute-efficiency term validation fits (docs/validation.md). Applied per layer before composition,
   * so CMOverlap sees max(s·SM, HBM). Must be finite and > 0.
   */
  sm_scale?: number;
}

/** Batch-independent facts resolved at construction (for reports and capacity checks). */
export interface PricerInfo {
  served_dtype: StorageDtype;
  kv_bytes_per_element: number;
  total_layers: number;
  /** Kernels of one target pass with / without prefill-only nodes (head included). */
  kernels_with_prefill: number;
  kernels_decode_only: number;
  /** Pieces of one target pass under piecewise capture. */
  piecewise_pieces: number;
  /** Weights resident per rank, bytes (target + drafter + the input embedding table). */
  weight_bytes_per_rank: number;
  /** Of which the input embedding table (vocab · hidden · 2 / tp; 0 when tied to the lm_head), bytes. */
  embedding_bytes_per_rank: number;
  /** KV cache per token per rank, bytes (target + drafter). */
  kv_bytes_per_token_per_rank: number;
  /** Choices made for this deployment that a reader should know (fallbacks, format choices). */
  assumptions: string[];
}

export interface StepPricer extends Pricer {
  readonly info: PricerInfo;
}

/** One attention (or indexer) kernel of a layer kind. */
interface AttnPlan {
  reader: number;
  /** Decode: floor µs and µs per cached token read. */
  decFloor: number;
  decUsPerToken: number;
  /** Prefill: floor µs and µs per attended key pair at ε_max (the walk folds in each row's ramp). */
  preFloor: number;
  preUsPerPair: number;
}

/** A collective launched by a layer kind. */
interface CollPlan {
  t0: number;
  rt: number | undefined;
  rpeak: number;
  bytesPerToken: number;
  nic: boolean;
  /** Message scale for a group that crosses the network (laws/placement.ts), 1 on NVLink. */
  span: number;
}

/** One layer kind folded into constants (one variant: with or without prefill-only nodes). */
interface KindPlan {
  id: string;
  count: number;
  /** Dense GEMMs grouped by compute format: SM µs = Σ gemmA[g]·(tok + gemmMh[g]). */
  gemmA: number[];
  gemmMh: number[];
  weightUs: number;
  eltUsPerToken: number;
  attn: AttnPlan[];
  hasMoe: boolean;
  moeA: number;
  moeMh: number;
  moeExperts: number;
  moeTopK: number;
  moeLocal: number;
  moeUsPerExpert: number;
  rec: Array<{ floor: number; decRate: number; preRate: number | undefined; preA: number; preMh: number }>;
  colls: CollPlan[];
  kernels: number;
  mixers: number;
  /** Resident weights per rank, bytes (routed experts included). */
  weightBytes: number;
  /** Of which routed experts (read only when touched). */
  routedBytes: number;
  kvBytesPerToken: number;
  /** KV bytes per token of each attention node with the tokens it keeps resident (window, Infinity = all). */
  kvResident: Array<[window: number, bytesPerToken: number]>;
}

interface PassPlan {
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

/**
 * Build a pricer for one deployment.
 * @param chip datasheet facts (catalog/chips)
 * @param model graph (catalog/models)
 * @param deployment full deployment (use `defaultDeployment` to fill defaults)
 * @param reg coefficients resolved for this chip/model/tp/ep
 * @throws UserError for an unknown dtype, a missing required coefficient (listing the family's known
 *   names), an expert count not divisible by ep, or a speculative deployment with no drafter graph.
 */
export function createPricer(chip: Chip, model: ModelGraph, deployment: Deployment, reg: ResolvedCoefficients, opts: PricerOptions = {}): StepPricer {
  const tp = deployment.tp;
  const ep = deployment.ep;
  const served = servedDtype(deployment.weight_dtype, model.global.weight_dtype);
  const kvB = kvBytesPerElement(deployment.kv_dtype, served);
  const hidden = model.global.hidden_size;
  validateParallelism(opts.drafter ? [model, opts.drafter] : [model], tp, ep);
  const smScale = opts.sm_scale ?? 1;
  if (!(smScale > 0 && Number.isFinite(smScale))) throw new UserError(`sm_scale must be a finite number > 0, got ${opts.sm_scale}`);
  const assumptions: string[] = [];
  // Extrapolation notes known at construction; a Set so a note met by several layer kinds (or by the
  // with/without-prefill variants of one kind) is reported once.
  const staticNotes = new Set<string>();

  const need = (name: string): number => {
    if (reg.has(name)) return reg.value(name);
    const fam = name.split('_').slice(0, 2).join('_');
    const near = reg.names().filter((n) => n.startsWith(fam));
    throw new UserError(
      `coefficient "${name}" is not in the registry for ${chip.name} (${model.name}, tp ${tp}, ep ${ep}); known ${fam}_*: ${near.length ? near.join(', ') : '(none)'}`,
    );
  };
  const opt = (name: string): number | undefined => (reg.has(name) ? reg.value(name) : undefined);

  // Memory: datasheet bandwidth × measured derate (seed "Memory"; reference §2 "lift").
  const hbmBytesPerUs = chip.hbm_bytes_per_us * need('hbm_derate');

  // GEMM compute formats and their ramps (seed "Arithmetic rates"; reference §4.2–4.3).
  const fmtCache = new Map<StorageDtype, ComputeFormat & { eps: number; mh: number; nh?: number; kh?: number }>();
  const fmt = (w: StorageDtype) => {
    let f = fmtCache.get(w);
    if (!f) {
      const cf = computeFormat(w, chip, (s) => reg.has(`gemm_eps_max_${s}`));
      if (cf.note) assumptions.push(cf.note);
      const nh = opt(`gemm_n_half_${cf.ramp}`);
      const kh = opt(`gemm_k_half_${cf.ramp}`);
      f = { ...cf, eps: need(`gemm_eps_max_${cf.ramp}`), mh: need(`gemm_m_half_${cf.ramp}`) };
      // Shape factors only when both halves exist (reference §1.3: both or neither).
      if (nh !== undefined && kh !== undefined) Object.assign(f, { nh, kh });
      fmtCache.set(w, f);
    }
    return f;
  };

  // Attention coefficients (seed "Attention"; reference §1.5, §4.5).
  const decodeCoef = (kind: string): { floor: number; rate: number } | undefined => {
    const suffix = kind === 'gqa' ? '' : kind === 'sparse' ? '_sparse_mla' : `_${kind}`;
    const baseRate = opt('attention_decode_rate');
    const baseFloor = opt('attention_decode_floor') ?? 0;
    if (suffix) {
      const rate = opt(`attention_decode_rate${suffix}`);
      if (rate !== undefined) return { floor: opt(`attention_decode_floor${suffix}`) ?? baseFloor, rate };
      if (baseRate !== undefined) {
        staticNotes.add(`no attention_decode_rate${suffix} in the registry: ${kind} decode priced with the full-attention rate`);
        return { floor: opt(`attention_decode_floor${suffix}`) ?? baseFloor, rate: baseRate };
      }
    }
    return baseRate === undefined ? undefined : { floor: baseFloor, rate: baseRate };
  };
  const prefillScale = opt('attention_prefill_work_scale');
  const prefillFloor = opt('attention_prefill_floor') ?? 0;
  if (prefillScale === undefined) assumptions.push('no attention_prefill_work_scale: prefill attention priced at the plain bf16 GEMM ramp, no floor');
  const imbalance = opt('moe_routing_imbalance_median');

  // Collectives (seed "Collectives"; reference §4.7).
  const collDtype = served === 'int8' ? 'int8' : 'fp16';
  const chipKey = chip.name.replace(/-/g, '_');
  const domain = nvlinkDomainGpus(chip);
  const linkRatio = chip.nvlink_bytes_per_us / chip.nic_bytes_per_us;
  /** Widths with coefficients for `op` (ascending), whether each was measured or assumed/extrapolated. */
  const fittedWidths = (op: string): number[] => {
    const re = new RegExp(`^collective_floor_${op}_${collDtype}_(\\d+)rank_${chipKey}$`);
    const widths: number[] = [];
    for (const n of reg.names()) {
      const m = re.exec(n);
      if (!m) continue;
      const w = Number(m[1]);
      const tail = `${op}_${collDtype}_${w}rank_${chipKey}`;
      if (reg.has(`collective_peak_rate_${tail}`)) widths.push(w);
    }
    return widths.sort((a, b) => a - b);
  };
  const collCache = new Map<string, Omit<CollPlan, 'bytesPerToken'>>();
  const collective = (op: string, width: number): Omit<CollPlan, 'bytesPerToken'> => {
    const key = `${op}/${width}`;
    const hit = collCache.get(key);
    if (hit) return hit;
    const widths = fittedWidths(op);
    if (!widths.length) need(`collective_floor_${op}_${collDtype}_${width}rank_${chipKey}`);
    // A width's coefficients count as measured only when its floor and peak rate both say so.
    const tailOf = (x: number) => `${op}_${collDtype}_${x}rank_${chipKey}`;
    const isMeasured = (x: number) =>
      reg.entries.get(`collective_floor_${tailOf(x)}`)?.entry.method === 'measured' && reg.entries.get(`collective_peak_rate_${tailOf(x)}`)?.entry.method === 'measured';
    const measured = widths.filter(isMeasured);
    const assumed = widths.filter((x) => !isMeasured(x));
    const widthList = `measured widths: ${measured.length ? measured.join(', ') : 'none'}` + (assumed.length ? `; assumed (not measured) widths: ${assumed.join(', ')}` : '');
    // Width snapping: exact, else the next width above, else the widest (flagged).
    const w = widths.find((x) => x >= width) ?? widths[widths.length - 1]!;
    if (w !== width) staticNotes.add(`${op} over ${width} ranks priced with the ${w}-rank ${chipKey} coefficients (${widthList})`);
    else if (!isMeasured(w)) staticNotes.add(`${op} over ${width} ranks priced with assumed (not measured) ${w}-rank ${chipKey} coefficients (${widthList})`);
    const tail = tailOf(w);
    // One domain rule for both questions: does the group cross, and by how much (laws/placement.ts).
    const sp = op === 'alltoall' ? all2allSpan(width, domain, linkRatio) : ringSpan(width, domain, linkRatio);
    const c = {
      t0: need(`collective_floor_${tail}`),
      rt: opt(`collective_transition_rate_${tail}`),
      rpeak: need(`collective_peak_rate_${tail}`),
      nic: width > domain,
      span: sp,
    };
    collCache.set(key, c);
    return c;
  };

  // Host (seed "Host time"; reference §1.5 host set, §4.10).
  const graphsUsed = deployment.cudagraph_mode !== 'NONE';
  const dispatchUs = need('host_launch_per_kernel');
  const replayUs = graphsUsed ? need('host_replay_graph_per_step') : 0;
  const pieceUs = graphsUsed ? (opt('host_replay_graph_per_node') ?? replayUs) : 0;
  const eagerPerKernel = opt('host_launch_eager_per_kernel');
  const eagerPerLayer = eagerPerKernel === undefined ? need('host_launch_eager_per_layer') : 0;

  // Ramps the GEMMs and expert GEMMs run on at m = step tokens (for the fitted-range check).
  const gemmRamps = new Set<ComputeFormat['ramp']>();

  // Readers: distinct ways a layer sees a request's context (shared by target and drafter).
  const readers: ReaderSpec[] = [];
  const readerIndex = (r: ReaderSpec): number => {
    const i = readers.findIndex((x) => x.window === r.window && x.ratio === r.ratio && x.cap === r.cap);
    if (i >= 0) return i;
    readers.push(r);
    return readers.length - 1;
  };

  const bf16Fmt = reg.has('gemm_eps_max_bf16') ? fmt('bf16') : fmt(served);

  const buildKind = (id: string, count: number, nodes: readonly GraphNode[], withPrefill: boolean): KindPlan => {
    const groups = new Map<ComputeFormat['ramp'] | string, { A: number; mh: number }>();
    const kp: KindPlan = {
      id,
      count,
      gemmA: [],
      gemmMh: [],
      weightUs: 0,
      eltUsPerToken: 0,
      attn: [],
      hasMoe: false,
      moeA: 0,
      moeMh: 0,
      moeExperts: 0,
      moeTopK: 0,
      moeLocal: 0,
      moeUsPerExpert: 0,
      rec: [],
      colls: [],
      kernels: 0,
      mixers: 0,
      weightBytes: 0,
      routedBytes: 0,
      kvBytesPerToken: 0,
      kvResident: [],
    };
    const addGemm = (w: StorageDtype, flopsPerToken: number, nEff: number, kEff: number) => {
      const f = fmt(w);
      gemmRamps.add(f.ramp);
      const shape = shapeFactor(nEff, f.nh) * shapeFactor(kEff, f.kh);
      const key = `${f.ramp}/${f.peak_flops_per_us}`;
      const g = groups.get(key) ?? { A: 0, mh: f.mh };
      g.A += flopsPerToken / (f.peak_flops_per_us * f.eps * shape);
      groups.set(key, g);
    };
    for (const node of nodes) {
      if (node.phase === 'prefill' && !withPrefill) continue;
      if (node.emit === 'tp>1' && tp <= 1) continue;
      if (node.emit === 'ep>1' && ep <= 1) continue;
      switch (node.op) {
        case 'GEMM': {
          // Weights read once per step (seed "Memory"); arithmetic on the ramp (seed "Arithmetic").
          const w = node.weight_dtype ?? served;
          const par = node.parallel ?? 'column';
          const div = par === 'replicated' ? 1 : tp;
          addGemm(w, (2 * node.n * node.k) / div, par === 'column' ? node.n / tp : node.n, par === 'row' ? node.k / tp : node.k);
          kp.weightBytes += (node.n * node.k * bytesPerElement(w)) / div;
          break;
        }
        case 'GroupedGEMM': {
          // Experts (seed "Experts"; reference §4.6).
          const w = node.weight_dtype ?? served;
          const f = fmt(w);
          gemmRamps.add(f.ramp);
          const local = node.experts / ep; // an integer: validateParallelism refused anything else
          // KNOWN DIVERGENCE 3 (reference §4.6): under pure TP each rank computes every expert at 1/tp
          // width, so routed FLOPs are divided by tp like the bytes; BLIS keeps them whole on purpose.
          const shards = ep > 1 ? 1 : tp;
          const mats = node.gated === false ? 2 : 3;
          const shape = shapeFactor(node.n / shards, f.nh) * shapeFactor(node.k, f.kh);
          if (imbalance === undefined) assumptions.push('no moe_routing_imbalance_median: routing taken as balanced (1.0)');
          const imb = imbalance ?? 1;
          kp.hasMoe = true;
          kp.moeA += (node.top_k * (local / node.experts) * 2 * mats * node.n * node.k * imb) / shards / (f.peak_flops_per_us * f.eps * shape);
          kp.moeMh = f.mh;
          kp.moeExperts = node.experts;
          kp.moeTopK = node.top_k;
          kp.moeLocal = local;
          const perExpertBytes = (mats * node.n * node.k * bytesPerElement(w)) / shards;
          kp.moeUsPerExpert = perExpertBytes / hbmBytesPerUs;
          kp.weightBytes += perExpertBytes * local;
          kp.routedBytes += perExpertBytes * local;
          const shared = node.shared_experts ?? 0;
          if (shared > 0) {
            const ns = node.shared_intermediate_size ?? node.n;
            addGemm(w, (2 * mats * ns * node.k * shared) / tp, ns / tp, node.k);
            kp.weightBytes += (mats * ns * node.k * shared * bytesPerElement(w)) / tp;
          }
          break;
        }
        case 'Attention': {
          const indexer = node.role === 'indexer';
          const sparse = node.kind === 'sparse';
          // A layer that states a window reads at most the window, whatever its kind (seed).
          // KNOWN DIVERGENCE 1 (reference §4.5): the BLIS kernel does not bound the primary swa decode read.
          const r: ReaderSpec = indexer
            ? { window: 0, ratio: node.compress_ratio ?? 1, cap: Infinity }
            : sparse
              ? { window: node.window ?? 0, ratio: node.compress_ratio ?? 1, cap: node.index_topk ?? Infinity }
              : { window: node.window ?? Infinity, ratio: 0, cap: Infinity };
          const latent = node.kind === 'mla' || node.kind === 'sparse' || indexer;
          // KNOWN DIVERGENCE 10 (reference §4.5 divides a whole-model KV figure by TotalLayers, which
          // under-counts hybrids): each layer's KV bytes come from its own attention node.
          const kvPerToken = latent ? node.n_kv * node.d_h * kvB : 2 * Math.max(1, Math.floor(node.n_kv / tp)) * node.d_h * kvB;
          const dc = decodeCoef(node.kind);
          if (!dc) assumptions.push(`no attention_decode_rate: ${node.kind} decode charged as raw bytes at the derated HBM rate, no floor`);
          // Query heads are split over tp for every kind: vLLM's MLA also runs num_heads / tp local
          // heads (only its latent cache is replicated, which kvPerToken reflects).
          const qHeads = node.n_q / tp;
          const flopsPerPair = (indexer ? 2 : 4) * qHeads * (node.prefill_d_h ?? node.d_h);
          // KNOWN DIVERGENCE 4 (reference §4.5 [CHECK]): work_scale is fitted against the bf16 ramp, so
          // prefill attention is priced on the bf16 peak and ramp whatever the served weight dtype.
          const scale = prefillScale ?? 1;
          kp.attn.push({
            reader: readerIndex(r),
            decFloor: dc ? dc.floor : 0,
            decUsPerToken: kvPerToken / (dc ? dc.rate : hbmBytesPerUs),
            preFloor: prefillScale === undefined ? 0 : prefillFloor,
            preUsPerPair: flopsPerPair / (bf16Fmt.peak_flops_per_us * bf16Fmt.eps * scale),
          });
          kp.kvBytesPerToken += kvPerToken;
          // Resident KV (capacity check): a windowed layer keeps its window (vLLM frees blocks that
          // slide out); full, latent, sparse and indexer caches keep the whole context.
          kp.kvResident.push([r.ratio === 0 ? r.window : Infinity, kvPerToken]);
          kp.mixers += 1;
          break;
        }
        case 'RecurrentUpdate': {
          // Recurrent mixers (seed "Recurrent mixers"; reference §1.5 recurrent set).
          const k = node.recurrent_kind;
          const preRate = opt(`recurrent_prefill_rate_${k}`);
          // Chunked scan (vLLM's SSD kernels) when no prefill rate is measured: per token, the
          // intra-chunk quadratic term over a 256-token chunk and the state update, 2 FLOPs each.
          const heads = node.num_heads / tp;
          const scanFlops = 2 * heads * (256 * (node.head_dim + node.state_size) + 2 * node.head_dim * node.state_size);
          if (preRate === undefined) assumptions.push(`no recurrent_prefill_rate_${k}: prefill priced as the chunked scan's arithmetic`);
          kp.rec.push({
            floor: need(`recurrent_decode_floor_${k}`),
            decRate: need(`recurrent_decode_rate_${k}`),
            preRate,
            preA: scanFlops / (bf16Fmt.peak_flops_per_us * bf16Fmt.eps),
            preMh: bf16Fmt.mh,
          });
          kp.mixers += 1;
          break;
        }
        case 'Elementwise':
          // KNOWN DIVERGENCE 6 (reference §4.4): norms run on the full hidden state on every rank, so
          // their bytes are not divided by tp.
          kp.eltUsPerToken += (node.bytes_per_token ?? 4 * hidden) / hbmBytesPerUs;
          break;
        case 'AllReduce':
        case 'AllGather':
        case 'ReduceScatter':
        case 'All2All': {
          const width = node.op === 'All2All' ? ep : tp;
          if (width <= 1) continue; // a group of one moves nothing and launches nothing: tp = 1 emits no all-reduce
          const op = COLLECTIVE_OP[node.op]!;
          const topK = node.routed ? Math.max(1, ...nodes.filter((n) => n.op === 'GroupedGEMM').map((n) => (n as { top_k: number }).top_k)) : 1;
          kp.colls.push({ ...collective(op, width), bytesPerToken: (node.bytes_per_token ?? hidden * 2) * topK });
          break;
        }
      }
      kp.kernels += KERNELS[node.op];
    }
    for (const g of groups.values()) {
      kp.gemmA.push(g.A);
      kp.gemmMh.push(g.mh);
    }
    kp.weightUs = (kp.weightBytes - kp.routedBytes) / hbmBytesPerUs;
    return kp;
  };

  const buildPass = (g: ModelGraph, stack: Stack): PassPlan => {
    const seq = expandStack(stack);
    const counts = new Map<string, number>();
    for (const id of seq) counts.set(id, (counts.get(id) ?? 0) + 1);
    const plan: PassPlan = { withPrefill: [], decodeOnly: [], layers: seq.length, kernelsWithPrefill: 0, kernelsDecodeOnly: 0, pieces: 1, weightBytes: 0, kvBytesPerToken: 0, kvByWindow: new Map() };
    for (const [id, count] of counts) {
      const kind = g.layer_kinds.find((k) => k.id === id)!;
      const a = buildKind(id, count, kind.nodes, true);
      const b = buildKind(id, count, kind.nodes, false);
      plan.withPrefill.push(a);
      plan.decodeOnly.push(b);
      plan.kernelsWithPrefill += count * a.kernels;
      plan.kernelsDecodeOnly += count * b.kernels;
      plan.pieces += count * a.mixers;
      plan.weightBytes += count * a.weightBytes;
      plan.kvBytesPerToken += count * a.kvBytesPerToken;
      for (const [w, b] of a.kvResident) plan.kvByWindow.set(w, (plan.kvByWindow.get(w) ?? 0) + count * b);
    }
    return plan;
  };

  // Head: once per pass (seed "LM head once per step").
  const buildHead = (g: ModelGraph) => {
    const k = buildKind('head', 1, g.head, true);
    return { k, kernels: k.kernels };
  };

  const target = buildPass(model, model.stack);
  const head = buildHead(model);

  // Speculative decoding: the drafter's passes, its weights resident (seed "Speculative decoding").
  const specTokens = deployment.speculative?.num_spec_tokens ?? 0;
  let drafter: PassPlan | undefined;
  let drafterHead: ReturnType<typeof buildHead> | undefined;
  if (specTokens > 0) {
    const dg = opts.drafter;
    if (dg) {
      drafter = buildPass(dg, dg.stack);
      drafterHead = buildHead(dg);
    } else if (model.speculator) {
      drafter = buildPass(model, model.speculator.stack);
      if (model.speculator.head) drafterHead = head;
    } else {
      throw new UserError(
        `speculative decoding with ${specTokens} tokens, but ${model.name}'s graph states no speculator and no drafter graph was given`,
      );
    }
  }
  const uniformWidth = 1 + specTokens;
  // Under speculation vLLM raises the decode threshold to the verify width (reference §4.10).
  const threshold = Math.max(deployment.decode_threshold, specTokens > 0 ? uniformWidth : 0);
  const eagerUs = (p: PassPlan, kernels: number) => (eagerPerKernel !== undefined ? eagerPerKernel * kernels : eagerPerLayer * p.layers);

  const nR = readers.length;
  const attnMHalf = bf16Fmt.mh;
  // The unbounded reader (full attention) is summed inline; only bounded readers loop per request.
  const fullReader = readers.findIndex((r) => r.window === Infinity && r.ratio === 0);
  const bounded = readers.map((_, i) => i).filter((i) => i !== fullReader);
  const nBounded = bounded.length;
  const decRead = new Float64Array(nR);
  const preRead = new Float64Array(nR);
  const allRead = new Float64Array(nR);
  const acc = new Float64Array(ACC_LEN);
  const lay = new Float64Array(6); // scratch: sm, hbm, nvlink, nic, expert_sm, expert_hbm of one layer

  // Memory capacity (per rank): resident weights + the embedding table + the batch's KV cache against
  // the chip's HBM. vLLM's VocabParallelEmbedding splits the table over tp; it stays bf16 under
  // quantization; a tied table is the lm_head's weight, already counted.
  const embeddingBytes = model.global.tie_word_embeddings ? 0 : (model.global.vocab_size * hidden * 2) / tp;
  const weightBytesPerRank =
    target.weightBytes + head.k.weightBytes + embeddingBytes + (drafter ? drafter.weightBytes + (drafterHead && drafterHead !== head ? drafterHead.k.weightBytes : 0) : 0);
  const hbmCapacityBytes = chip.hbm_gib * 2 ** 30;
  const kvByWindow = new Map(target.kvByWindow);
  if (drafter) for (const [w, b] of drafter.kvByWindow) kvByWindow.set(w, (kvByWindow.get(w) ?? 0) + b);
  const kvFullPerToken = kvByWindow.get(Infinity) ?? 0;
  // A windowed layer keeps Σ_rows min(ctx, W) tokens: exactly what the walk sums into allRead for
  // its reader (window W, no compressed stream), so the capacity check adds nothing per request.
  const kvWindows = [...kvByWindow.keys()].filter((w) => w !== Infinity);
  const nWin = kvWindows.length;
  const winReader = Int32Array.from(kvWindows.map((w) => readers.findIndex((r) => r.window === w && r.ratio === 0)));
  const winBytesPerToken = Float64Array.from(kvWindows.map((w) => kvByWindow.get(w)!));
  const gib = (b: number) => (b / 2 ** 30).toFixed(1);
  const weightsOverflow = weightBytesPerRank > hbmCapacityBytes;
  if (weightsOverflow) {
    staticNotes.add(`memory: weights ${gib(weightBytesPerRank)} GiB per rank exceed ${chip.name}'s ${chip.hbm_gib} GiB of HBM before any KV cache`);
  }

  // GEMM ramps below their fitted m range (flagged, prices unchanged). Sorted by edge, widest first, so
  // the ramps a step of m tokens is below are a prefix; notes for each prefix are built here, once.
  const rampEdges = [...gemmRamps]
    .map((r) => ({ r, range: gemmFittedRange(reg, r, chip) }))
    .filter((x): x is { r: ComputeFormat['ramp']; range: NonNullable<ReturnType<typeof gemmFittedRange>> } => x.range !== undefined)
    .sort((a, b) => b.range.min_m - a.range.min_m);
  const rampMinM = Float64Array.from(rampEdges.map((x) => x.range.min_m));
  const nRamps = rampEdges.length;
  const base = [...staticNotes];
  /** noteSets[k]: the construction-time notes plus the notes of the k widest-edged ramps; frozen, shared by every call. */
  const noteSets: ReadonlyArray<readonly string[]> = rampEdges
    .map((_, k) => k + 1)
    .reduce<string[][]>(
      (sets, k) => [...sets, [...base, ...rampEdges.slice(0, k).map((x) => `GEMM ramp below its fitted m range: the ${x.r} ramp at fewer than ${+x.range.min_m.toFixed(1)} tokens per step (${x.range.source})`)]],
      [base],
    )
    .map((n) => Object.freeze(n));

  /**
   * Extrapolation notes of a walked step: the shared frozen construction-time set for its GEMM m, plus
   * (in a new array, only when one applies) memory capacity and oversized collective messages. Kept out
   * of `price`: a larger `price` body measurably slowed its walk (V8 register pressure / inlining).
   * @param tok step tokens; nReq rows; ctxSumAll Σ context after the step over rows; big largest
   *   out-of-table collective message, bytes (0 = none).
   */
  const stepNotes = (tok: number, nReq: number, ctxSumAll: number, big: number): readonly string[] => {
    // The GEMM ramps run at m = tok (and at m = requests in drafter passes 2..k).
    const mMin = drafter && specTokens > 1 && nReq < tok ? nReq : tok;
    let k = 0;
    if (mMin > 0) while (k < nRamps && mMin < rampMinM[k]!) k++;
    const shared = noteSets[k]!;
    let kvBytes = kvFullPerToken * ctxSumAll;
    for (let w = 0; w < nWin; w++) kvBytes += winBytesPerToken[w]! * allRead[winReader[w]!]!;
    const total = weightBytesPerRank + kvBytes;
    const full = !weightsOverflow && total > hbmCapacityBytes;
    if (!full && !(big > 0)) return shared;
    const out = [...shared];
    if (full) out.push(`memory: weights ${gib(weightBytesPerRank)} GiB + KV cache ${gib(kvBytes)} GiB for this batch = ${gib(total)} GiB per rank exceed ${chip.name}'s ${chip.hbm_gib} GiB of HBM`);
    if (big > 0) out.push(`a collective message of ${big} bytes exceeds the largest fitted size (${COLLECTIVE_MAX_FITTED_BYTES} bytes)`);
    return out;
  };

  /** Per-layer times of one kind into `lay`. `pre` = prefill reads, `dec` = decode reads. */
  const layerTimes = (kp: KindPlan, tok: number, anyDecode: boolean, anyPrefill: boolean, dec: Float64Array, pre: Float64Array, decTok: number): number => {
    let sm = 0;
    const ramp = tok; // the ramp's m is the step's token count on this rank (reference §4.3)
    for (let g = 0; g < kp.gemmA.length; g++) sm += kp.gemmA[g]! * (ramp + kp.gemmMh[g]!);
    let hbm = kp.weightUs + tok * kp.eltUsPerToken;
    for (let a = 0; a < kp.attn.length; a++) {
      const at = kp.attn[a]!;
      if (anyDecode) hbm += at.decFloor + dec[at.reader]! * at.decUsPerToken;
      if (anyPrefill) sm += at.preFloor + pre[at.reader]! * at.preUsPerPair;
    }
    for (let r = 0; r < kp.rec.length; r++) {
      const rc = kp.rec[r]!;
      if (anyDecode) sm += rc.floor + decTok / rc.decRate;
      const preTok = tok - decTok;
      // Without a measured prefill rate: the scan's arithmetic on the ramp of the prefill tokens.
      if (preTok > 0) sm += rc.preRate !== undefined ? preTok / rc.preRate : rc.preA * (preTok + rc.preMh);
    }
    let nvl = 0;
    let nic = 0;
    let big = 0;
    for (let c = 0; c < kp.colls.length; c++) {
      const cp = kp.colls[c]!;
      const bytes = tok * cp.bytesPerToken;
      if (bytes > COLLECTIVE_MAX_FITTED_BYTES) big = bytes;
      // t(b) = max(t0 + b/r_t, b/r_peak); every launch pays its own floor (seed "Collectives").
      const t = collectiveTimeInline(bytes * cp.span, cp.t0, cp.rt, cp.rpeak);
      if (cp.nic) nic += t;
      else nvl += t;
    }
    let esm = 0;
    let ehbm = 0;
    if (kp.hasMoe) {
      esm = kp.moeA * (ramp + kp.moeMh);
      ehbm = expertsTouched(tok, kp.moeExperts, kp.moeTopK, kp.moeLocal) * kp.moeUsPerExpert;
    }
    lay[0] = sm * smScale;
    lay[1] = hbm;
    lay[2] = nvl;
    lay[3] = nic;
    lay[4] = esm * smScale;
    lay[5] = ehbm;
    return big;
  };

  /** Price one pass of a stack over the walked batch, into `acc`. Returns the largest out-of-domain message. */
  const pricePass = (
    kinds: KindPlan[],
    tok: number,
    anyDecode: boolean,
    anyPrefill: boolean,
    dec: Float64Array,
    pre: Float64Array,
    decTok: number,
    perKind: StepPrice['per_kind'] | undefined,
    prefix: string,
  ): number => {
    let big = 0;
    for (let i = 0; i < kinds.length; i++) {
      const kp = kinds[i]!;
      const b = layerTimes(kp, tok, anyDecode, anyPrefill, dec, pre, decTok);
      if (b > big) big = b;
      composeLayers(acc, kp.count, lay[0]!, lay[1]!, lay[2]!, lay[3]!, lay[4]!, lay[5]!);
      if (perKind) {
        const c = kp.count;
        perKind.push({
          kind: prefix + kp.id,
          count: c,
          resources_us: { sm: c * (lay[0]! + lay[4]!), hbm: c * (lay[1]! + lay[5]!), nvlink: c * lay[2]!, nic: c * lay[3]!, host: 0 },
          experts_us: c * (lay[4]! + lay[5]!),
        });
      }
    }
    return big;
  };

  const priceHead = (h: ReturnType<typeof buildHead>, rows: number, tok: number, perKind: StepPrice['per_kind'] | undefined, label: string) => {
    // KNOWN DIVERGENCE 5 (reference §4.8): vLLM computes logits only for the rows it samples (a decode
    // row's scheduled tokens, one per prefill row); BLIS prices the head over every token. The final
    // norm still runs over all `tok` rows.
    layerTimes(h.k, rows, false, false, decRead, preRead, 0);
    const sm = lay[0]!;
    const hbm = lay[1]! + (tok - rows) * h.k.eltUsPerToken;
    composeHead(acc, sm, hbm);
    if (perKind) perKind.push({ kind: label, count: 1, resources_us: { sm, hbm, nvlink: 0, nic: 0, host: 0 }, experts_us: 0 });
  };

  const price = (batch: Batch, popts?: PriceOptions): StepPrice => {
    // Walk the batch once (seed "What a batch is"; reference §4.1, §4.5 batch walk).
    for (let r = 0; r < nR; r++) (decRead[r] = 0), (preRead[r] = 0), (allRead[r] = 0);
    let tok = 0;
    let nReq = 0;
    let nPrefill = 0;
    let decTok = 0;
    let headRows = 0;
    let uniform = true;
    const reqs = batch.requests;
    let ctxSum = 0; // Σ context over decode rows (what an unbounded reader reads)
    let ctxSumAll = 0; // Σ context over every row (drafter passes after the first)
    let pairsFull = 0; // Σ ramp-scaled causal pairs over prefill rows (unbounded reader)
    for (let i = 0; i < reqs.length; i++) {
      const q = reqs[i]!;
      const s = q.scheduled_tokens;
      if (!(s > 0)) continue;
      const c = q.computed_tokens;
      const ctx = c + s;
      tok += s;
      nReq++;
      ctxSumAll += ctx;
      if (s !== uniformWidth) uniform = false;
      if (s > threshold) {
        nPrefill++;
        headRows += 1;
        // KNOWN DIVERGENCE 4 (reference §4.5 ramps prefill attention at the step's token count): each
        // prefill row's pairs run at the ramp of its own query length, ε(s) — FlashAttention's varlen
        // kernel tiles each sequence separately — so a decode row added to the step cannot make the
        // prefill attention cheaper (adding a request never lowers the price).
        const rampScale = (s + attnMHalf) / s;
        pairsFull += attendedKeys(c, s, 1, Infinity) * rampScale;
        for (let j = 0; j < nBounded; j++) {
          const r = bounded[j]!;
          preRead[r]! += prefillPairs(s, c, readers[r]!) * rampScale;
          allRead[r]! += decodeTokensRead(ctx, readers[r]!); // drafter passes 2..k and resident KV
        }
      } else {
        decTok += s;
        headRows += s;
        ctxSum += ctx;
        for (let j = 0; j < nBounded; j++) {
          const r = bounded[j]!;
          const t = decodeTokensRead(ctx, readers[r]!);
          decRead[r]! += t;
          allRead[r]! += t;
        }
      }
    }
    if (fullReader >= 0) {
      decRead[fullReader] = ctxSum;
      preRead[fullReader] = pairsFull;
      allRead[fullReader] = ctxSumAll;
    }
    const anyPrefill = nPrefill > 0;
    const anyDecode = nReq > nPrefill;
    for (let i = 0; i < ACC_LEN; i++) acc[i] = 0;
    const perKind: StepPrice['per_kind'] | undefined = popts?.per_kind ? [] : undefined;

    let big = 0;
    let host = 0;
    const gm = graphModeFor(deployment.cudagraph_mode, uniform);
    const over = tok > deployment.max_capture_size;
    // A step with no prefill row skips prefill-only nodes (seed "Host time").
    const kernels = (anyPrefill ? target.kernelsWithPrefill : target.kernelsDecodeOnly) + head.kernels;
    if (tok > 0) {
      big = pricePass(anyPrefill ? target.withPrefill : target.decodeOnly, tok, anyDecode, anyPrefill, decRead, preRead, decTok, perKind, '');
      priceHead(head, headRows, tok, perKind, 'head');
    }
    host += launchUs(gm, over, replayUs, pieceUs, target.pieces, eagerUs(target, kernels)) + dispatchUs * kernels;

    if (drafter && tok > 0) {
      // KNOWN DIVERGENCE 8 (BLIS does not expand the speculator stack): each of num_spec_tokens drafter
      // passes is priced (seed "Speculative decoding"), with the target's graph mode for its decode.
      // Pass 1 sees the target's batch; passes 2..k one new token per request, all rows decoding.
      const dk = drafter.kernelsWithPrefill + (drafterHead?.kernels ?? 0);
      const dkd = drafter.kernelsDecodeOnly + (drafterHead?.kernels ?? 0);
      for (let j = 0; j < specTokens; j++) {
        const first = j === 0;
        const b = pricePass(
          first && anyPrefill ? drafter.withPrefill : drafter.decodeOnly,
          first ? tok : nReq,
          first ? anyDecode : true,
          first && anyPrefill,
          first ? decRead : allRead,
          preRead,
          first ? decTok : nReq,
          perKind,
          'drafter:',
        );
        if (b > big) big = b;
        if (drafterHead) priceHead(drafterHead, first ? headRows : nReq, first ? tok : nReq, perKind, 'drafter:head');
        const kj = first && anyPrefill ? dk : dkd;
        host += launchUs(first ? gm : graphModeFor(deployment.cudagraph_mode, true), (first ? tok : nReq) > deployment.max_capture_size, replayUs, pieceUs, drafter.pieces, eagerUs(drafter, kj)) + dispatchUs * kj;
      }
    }
    composeHost(acc, host);
    const notes = stepNotes(tok, nReq, ctxSumAll, big);
    const out = finishStep(acc, notes);
    if (perKind) out.per_kind = perKind;
    return out;
  };

  const info: PricerInfo = {
    served_dtype: served,
    kv_bytes_per_element: kvB,
    total_layers: target.layers,
    kernels_with_prefill: target.kernelsWithPrefill + head.kernels,
    kernels_decode_only: target.kernelsDecodeOnly + head.kernels,
    piecewise_pieces: target.pieces,
    weight_bytes_per_rank: weightBytesPerRank,
    embedding_bytes_per_rank: embeddingBytes,
    kv_bytes_per_token_per_rank: target.kvBytesPerToken + (drafter?.kvBytesPerToken ?? 0),
    assumptions: [...new Set(assumptions)],
  };
  return { price, info };
}

/**
 * Collective law t(b) = max(t0 + b/r_t, b/r_peak) (seed "Collectives"; same law as
 * laws/collective.ts `collectiveTime`, spelt without an options object for the hot path; a test checks
 * they agree). A non-positive message still pays the floor.
 */
export function collectiveTimeInline(bytes: number, t0: number, rt: number | undefined, rpeak: number): number {
  if (!(bytes > 0)) return t0;
  const peak = bytes / rpeak;
  const ramp = rt === undefined ? t0 : t0 + bytes / rt;
  return ramp > peak ? ramp : peak;
}
