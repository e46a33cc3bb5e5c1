/**
 * The step pricer (seed shared/seeds/pricing-a-step.txt; reference §3.2, §4): construction plus
 * composition.
 *
 * `createPricer` does every batch-independent thing once: coefficient lookup (coefficients.ts), graph
 * expansion, layer-kind counts and each kind folded into a handful of constants by the laws
 * (plan.ts), the extrapolation-note sets and capacity constants (notes.ts). `price(batch)` is
 * `priceStep` (step.ts): the batch walked once (walk.ts), the distinct layer kinds priced once each
 * by the resource terms (terms.ts), composed in compose.ts and nowhere else. It reads no clock.
 *
 * Every deliberate departure from the engine or from the BLIS kernel is marked `KNOWN DIVERGENCE n`,
 * n its number in the list in docs/pricer.md (test/pricer/hygiene.test.ts checks both ways).
 */
import { UserError } from '../core/errors.ts';
import type { Chip } from '../core/catalog/chip.ts';
import type { StorageDtype } from '../core/catalog/dtypes.ts';
import type { ModelGraph } from '../core/catalog/model.ts';
import type { ReaderSpec } from '../core/laws/attention.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import { graphModeFor } from '../core/laws/host.ts';
import { type FormatChoice, PricerCoefficients } from './coefficients.ts';
import { emptyStepPrice } from './compose.ts';
import {
  kvBytesPerElement,
  kvFromCheckpoint,
  servedDtype,
  validateParallelism,
  type ComputeFormat,
} from './deployment.ts';
import { buildNotesPlan } from './notes.ts';
import { buildHead, buildPass, type HeadPlan, type PassPlan, type PlanContext } from './plan.ts';
import { compileKinds, type KindFn, type KindJob, LAY_LEN } from './terms.ts';
import { LiveBatch } from './live.ts';
import {
  passHostTable,
  priceColumnsStep,
  priceLiveStep,
  priceStep,
  type StepCode,
  StepScratch,
  type StepPlan,
} from './step.ts';
import type { Batch, ColumnBatch, Deployment, PriceOptions, Pricer, StepPrice } from './types.ts';
import { boundedColumns, type WalkPlan } from './walk.ts';

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
  /**
   * Set when KV dtype auto priced the checkpoint's declared KV-cache dtype (graph `global.kv_dtype`; vLLM PR
   * #29980): that dtype and the config field(s) that declare it. Absent under an explicit KV dtype or none declared.
   */
  kv_from_checkpoint?: { dtype: string; source: string };
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
  /**
   * Bytes per scheduled token of the largest collective message of the target pass (hidden · 2 for a
   * tensor-parallel all-reduce; × top_k when routed); 0 when the pass launches none (tp 1, ep 1). A
   * step's message is its scheduled tokens × this (the engine profile's large-step threshold, acc19).
   */
  collective_message_bytes_per_token: number;
  /** Choices made for this deployment that a reader should know (fallbacks, format choices). */
  assumptions: string[];
  /** Each weight dtype's compute ramp, peak and bytes per value (block scales included), dense and experts. */
  formats: FormatChoice[];
}

export interface StepPricer extends Pricer {
  /**
   * `price` into a caller's StepPrice (start from `emptyStepPrice()`, compose.ts), allocating nothing
   * unless `per_kind` is asked or a memory or message note applies. `out` is overwritten on every
   * call: copy what must outlive the next one. Same numbers as `price`.
   */
  priceInto(batch: Batch, out: StepPrice, opts?: PriceOptions): StepPrice;
  /** `priceInto` for a ColumnBatch (types.ts): the same numbers, with no request objects to read. */
  priceColumnsInto(batch: ColumnBatch, out: StepPrice, opts?: PriceOptions): StepPrice;
  /**
   * A new, empty live batch for this pricer (live.ts LiveBatch: its owner adds, changes, removes and
   * advances rows, and it keeps their sums), to price with `priceLiveInto`.
   */
  liveBatch(): LiveBatch;
  /**
   * `priceInto` for a live batch of this pricer: the same numbers as its rows' Batch (LiveBatch.batch()),
   * read from its kept sums and its prefill rows, with no pass over its decode rows.
   * @throws UserError for a live batch another pricer made
   */
  priceLiveInto(live: LiveBatch, out: StepPrice, opts?: PriceOptions): StepPrice;
  readonly info: PricerInfo;
}

/** The target pass, its head and the drafter's, as the deployment asks (seed "Speculative decoding"). */
function buildPasses(ctx: PlanContext, model: ModelGraph, specTokens: number, drafterGraph: ModelGraph | undefined) {
  const target = buildPass(ctx, model, model.stack);
  const head = buildHead(ctx, model);
  let drafter: PassPlan | undefined;
  let drafterHead: HeadPlan | undefined;
  if (specTokens > 0) {
    if (drafterGraph) {
      drafter = buildPass(ctx, drafterGraph, drafterGraph.stack);
      drafterHead = buildHead(ctx, drafterGraph);
    } else if (model.speculator) {
      drafter = buildPass(ctx, model, model.speculator.stack);
      if (model.speculator.head) drafterHead = head;
    } else {
      throw new UserError(
        `speculative decoding with ${specTokens} tokens, but ${model.name}'s graph states no speculator and no drafter graph was given`,
      );
    }
  }
  return { target, head, drafter, drafterHead };
}

/** The plan context: served formats, the prefill-attention and MoE coefficients, the bf16 ramp. */
function planContext(
  coef: PricerCoefficients,
  model: ModelGraph,
  deployment: Deployment,
  served: StorageDtype,
  kvB: number,
): PlanContext {
  const prefillScale = coef.opt('attention_prefill_work_scale');
  const prefillFloor = coef.opt('attention_prefill_floor') ?? 0;
  if (prefillScale === undefined)
    coef.assumptions.push(
      'no attention_prefill_work_scale: prefill attention priced at the plain bf16 GEMM ramp, no floor',
    );
  const imbalance = coef.opt('moe_routing_imbalance_median');
  return {
    coef,
    tp: deployment.tp,
    ep: deployment.ep,
    served,
    kvB,
    hidden: model.global.hidden_size,
    bf16: coef.reg.has('gemm_eps_max_bf16') ? coef.format('bf16') : coef.format(served),
    prefillScale,
    prefillFloor,
    imbalance,
    readers: [],
    gemmRamps: new Set<ComputeFormat['ramp']>(),
  };
}

/**
 * A reader with every field stored as a double from the start (its window, ratio and cap are small
 * integers in some deployments and Infinity in others), so the readers of every pricer share one hidden
 * class: the laws read them per prefill row (walk.ts prefillRow), and a field generalised from small
 * integer to double deprecates the class, which turned those loads megamorphic in a process pricing many
 * graphs (docs/performance.md "Session 10"; notes.ts `notesPlanOf` is the same fix). Same values.
 */
function doubleReader(r: ReaderSpec): ReaderSpec {
  const o = { window: Number.NaN, ratio: Number.NaN, cap: Number.NaN };
  o.window = r.window;
  o.ratio = r.ratio;
  o.cap = r.cap;
  return o;
}

/** The walk's constants: the unbounded reader summed inline, the others looped per request. */
function walkPlan(
  readers: readonly ReaderSpec[],
  deployment: Deployment,
  specTokens: number,
  attnMHalf: number,
): WalkPlan {
  const uniformWidth = 1 + specTokens;
  const fullReader = readers.findIndex((r) => r.window === Infinity && r.ratio === 0);
  const bounded = Int32Array.from(readers.map((_, i) => i).filter((i) => i !== fullReader));
  return {
    // One literal shape for every reader (the walk reads them per prefill row; issue 17).
    readers: readers.map(doubleReader),
    fullReader,
    bounded,
    ...boundedColumns(readers, bounded),
    // Under speculation vLLM raises the decode threshold to the verify width (reference §4.10).
    threshold: Math.max(deployment.decode_threshold, specTokens > 0 ? uniformWidth : 0),
    uniformWidth,
    attnMHalf,
  };
}

/**
 * Resident weights per rank, bytes: target + head + the input embedding table + the drafter (and its
 * own head). vLLM's VocabParallelEmbedding splits the table over tp; it stays bf16 under
 * quantization; a tied table is the lm_head's weight, already counted.
 */
function residentWeights(
  model: ModelGraph,
  tp: number,
  passes: ReturnType<typeof buildPasses>,
): { weights: number; embedding: number } {
  const { target, head, drafter, drafterHead } = passes;
  const embedding = model.global.tie_word_embeddings
    ? 0
    : (model.global.vocab_size * model.global.hidden_size * 2) / tp;
  const drafterBytes = drafter
    ? drafter.weightBytes + (drafterHead && drafterHead !== head ? drafterHead.k.weightBytes : 0)
    : 0;
  return { weights: target.weightBytes + head.k.weightBytes + embedding + drafterBytes, embedding };
}

/**
 * The host time of each step shape (passHostTable), for the target pass and the drafter's, kernels of
 * the pass's head included. Reads the plan's graph modes, capture size and host coefficients, so it
 * runs once they are set.
 */
function setHostTables(plan: StepPlan): void {
  const { target, head, drafter } = plan;
  plan.targetHost = passHostTable(
    plan,
    target,
    target.kernelsWithPrefill + head.kernels,
    target.kernelsDecodeOnly + head.kernels,
  );
  const dhk = plan.drafterHead?.kernels ?? 0;
  if (drafter)
    plan.drafterHost = passHostTable(plan, drafter, drafter.kernelsWithPrefill + dhk, drafter.kernelsDecodeOnly + dhk);
}

/**
 * The passes' kinds and heads compiled (compile.ts), with the engine's s folded into their SM times;
 * `touched` is the scratch's touched-experts memo the compiled kinds share.
 */
function stepCode(passes: ReturnType<typeof buildPasses>, smScale: number, touched: Float64Array): StepCode {
  const { target, head, drafter, drafterHead } = passes;
  const jobs: KindJob[] = [];
  const pass = (pp: PassPlan) => {
    const at = jobs.length;
    for (const [prefill, kinds] of [
      [true, pp.withPrefill],
      [false, pp.decodeOnly],
    ] as const)
      kinds.forEach((kp, i) => {
        jobs.push({ kp, v: { prefill, head: false }, slot: i * LAY_LEN });
      });
    return (fns: KindFn[]) => ({
      withPrefill: fns.slice(at, at + pp.withPrefill.length),
      decodeOnly: fns.slice(at + pp.withPrefill.length, at + 2 * pp.withPrefill.length),
    });
  };
  const headAt = (h: HeadPlan) => jobs.push({ kp: h.k, v: { prefill: false, head: true }, slot: 0 }) - 1;
  const t = pass(target);
  const th = headAt(head);
  const d = drafter ? pass(drafter) : undefined;
  const dh = drafterHead === undefined ? -1 : drafterHead === head ? th : headAt(drafterHead);
  const fns = compileKinds(jobs, smScale, touched);
  return { target: t(fns), head: fns[th]!, drafter: d?.(fns), drafterHead: dh < 0 ? undefined : fns[dh] };
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
export function createPricer(
  chip: Chip,
  model: ModelGraph,
  deployment: Deployment,
  reg: ResolvedCoefficients,
  opts: PricerOptions = {},
): StepPricer {
  const served = servedDtype(deployment.weight_dtype, model.global.weight_dtype);
  const kvB = kvBytesPerElement(deployment.kv_dtype, served, model.global.kv_dtype);
  const kvCk = kvFromCheckpoint(deployment.kv_dtype, model.global.kv_dtype);
  validateParallelism(opts.drafter ? [model, opts.drafter] : [model], deployment.tp, deployment.ep);
  const smScale = opts.sm_scale ?? 1;
  if (!(smScale > 0 && Number.isFinite(smScale)))
    throw new UserError(`sm_scale must be a finite number > 0, got ${opts.sm_scale}`);
  // Memory: datasheet bandwidth × measured derate (seed "Memory"; reference §2 "lift"), looked up first.
  const coef = new PricerCoefficients(chip, model.name, deployment.tp, deployment.ep, reg, served);
  const host = coef.host(deployment.cudagraph_mode !== 'NONE');
  const ctx = planContext(coef, model, deployment, served, kvB);
  const specTokens = deployment.speculative?.num_spec_tokens ?? 0;
  const passes = buildPasses(ctx, model, specTokens, opts.drafter);
  const { target, head, drafter } = passes;
  const resident = residentWeights(model, deployment.tp, passes);
  const kvByWindow = new Map(target.kvByWindow);
  if (drafter) for (const [w, b] of drafter.kvByWindow) kvByWindow.set(w, (kvByWindow.get(w) ?? 0) + b);
  const scratch = new StepScratch(
    ctx.readers.length,
    Math.max(target.withPrefill.length, drafter?.withPrefill.length ?? 0),
  );
  const plan: StepPlan = {
    graphUniform: graphModeFor(deployment.cudagraph_mode, true),
    graphMixed: graphModeFor(deployment.cudagraph_mode, false),
    maxCaptureSize: deployment.max_capture_size,
    target,
    head,
    drafter,
    drafterHead: passes.drafterHead,
    code: stepCode(passes, smScale, scratch.touched),
    specTokens,
    dspark: drafter !== undefined && !opts.drafter && model.speculator?.method === 'dspark',
    host,
    // Prefill attention's per-sequence half-point (issue 16), else the bf16 GEMM ramp's m_half.
    walkPlan: walkPlan(ctx.readers, deployment, specTokens, ctx.coef.opt('attention_prefill_s_half') ?? ctx.bf16.mh),
    needsDecodeMax: [target, drafter].some((ps) => ps?.withPrefill.some((k) => k.attn.some((a) => a.decWave))),
    notes: buildNotesPlan(
      reg,
      chip,
      ctx.gemmRamps,
      coef.staticNotes,
      resident.weights,
      kvByWindow,
      ctx.readers,
      drafter !== undefined && specTokens > 1,
    ),
    scratch,
    targetHost: new Float64Array(8),
    drafterHost: new Float64Array(8),
  };
  setHostTables(plan);
  const info: PricerInfo = {
    served_dtype: served,
    kv_bytes_per_element: kvB,
    ...(kvCk ? { kv_from_checkpoint: kvCk } : {}),
    total_layers: target.layers,
    kernels_with_prefill: target.kernelsWithPrefill + head.kernels,
    kernels_decode_only: target.kernelsDecodeOnly + head.kernels,
    piecewise_pieces: target.pieces,
    weight_bytes_per_rank: resident.weights,
    embedding_bytes_per_rank: resident.embedding,
    kv_bytes_per_token_per_rank: target.kvBytesPerToken + (drafter?.kvBytesPerToken ?? 0),
    collective_message_bytes_per_token: Math.max(
      0,
      ...target.withPrefill.flatMap((k) => k.colls.map((c) => c.bytesPerToken)),
    ),
    assumptions: [...new Set(coef.assumptions)],
    formats: coef.formatChoices(),
  };
  return {
    price: (batch, popts) => priceStep(plan, batch, popts, emptyStepPrice()),
    priceInto: (batch, out, popts) => priceStep(plan, batch, popts, out),
    priceColumnsInto: (batch, out, popts) => priceColumnsStep(plan, batch, popts, out),
    liveBatch: () => new LiveBatch(plan.walkPlan),
    priceLiveInto: (live, out, popts) => priceLiveStep(plan, live, popts, out),
    info,
  };
}
