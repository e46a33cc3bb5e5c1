/**
 * Public types of the step pricer (seed: shared/seeds/pricing-a-step.txt).
 * All times are µs; sizes bytes; work FLOPs.
 */

import type { CudagraphMode } from '../core/laws/host.ts';

export { CUDAGRAPH_MODES, type CudagraphMode } from '../core/laws/host.ts';

/** The five resources a step's work is charged to. */
export const RESOURCES = ['sm', 'hbm', 'nvlink', 'nic', 'host'] as const;
export type Resource = (typeof RESOURCES)[number];

/**
 * One request in a batch (seed "What a batch is"). Token counts are non-negative integers below 2^53:
 * the walk sums them in any order and in closed forms (src/pricer/walk.ts), exact only for integers.
 */
export interface Request {
  /** Tokens the request schedules this step (integer ≥ 0). */
  scheduled_tokens: number;
  /** Tokens it has already computed (cached KV; integer ≥ 0). */
  computed_tokens: number;
  /** Its prompt length. */
  prompt_tokens: number;
}

export interface Batch {
  requests: Request[];
}

/**
 * A batch as columns (issue 17 "Pricer"): row i schedules `scheduled[i]` tokens on top of `computed[i]`
 * already-computed (cached) tokens, for i < n; no per-row objects. The pricer reads only these two
 * quantities of a row (a Request's `prompt_tokens` does not enter the price), so a ColumnBatch prices
 * exactly as the Batch with the same rows in the same order. The columns may be longer than n (a
 * caller reuses one buffer for batches of different sizes).
 */
export interface ColumnBatch {
  /** Rows in the step. */
  n: number;
  /** Tokens each row schedules this step (Request.scheduled_tokens). */
  scheduled: Float64Array;
  /** Tokens each row has already computed (Request.computed_tokens). */
  computed: Float64Array;
}

export interface Deployment {
  /** Tensor-parallel width. */
  tp: number;
  /** Expert-parallel width (1 = experts sharded by tp). */
  ep: number;
  /** Served weight dtype or quantization (bf16, fp8, nvfp4, mxfp4, int8, int4, ...). */
  weight_dtype: string;
  /** KV-cache dtype; undefined or auto = the checkpoint's declared one (graph global.kv_dtype), else follow the weights (sub-byte → bf16). */
  kv_dtype?: string;
  cudagraph_mode: CudagraphMode;
  /**
   * Largest captured batch, in tokens (vLLM `max_cudagraph_capture_size`; for one-token decode rows,
   * tokens = requests). A step with more tokens runs eager.
   */
  max_capture_size: number;
  /** Requests scheduling more tokens than this are prefills (vLLM default 1). */
  decode_threshold: number;
  /** Speculative decoding; absent = none. */
  speculative?: { num_spec_tokens: number; drafter?: string };
}

/** Per-resource µs. */
export type ResourceTimes = Record<Resource, number>;

export interface StepPrice {
  /** Σ_layers (max over SM, HBM, NVLink, NIC + experts) + head + host, µs. */
  overlap_us: number;
  /**
   * CMOverlap (stepcal extension beyond the seed; docs/pricer.md "Three estimates"): Σ_layers
   * (max(SM, HBM) + NVLink + NIC + experts' SM and HBM) + head max(SM, HBM) + host, µs. SM and HBM
   * overlap inside a layer (kernels stream weights while computing); TP collectives and host are
   * serial, as in vLLM's step. Overlap ≤ CMOverlap ≤ NoOverlap.
   */
  compute_memory_overlap_us: number;
  /** Sum of the five resource totals, µs. */
  no_overlap_us: number;
  /** Resource with the largest total. */
  bottleneck: Resource;
  /** Per-resource totals, µs (experts and head included). */
  resources_us: ResourceTimes;
  /** True when any term was priced outside the domain its coefficient was fitted on. */
  extrapolated: boolean;
  /**
   * Human-readable reasons for `extrapolated`, each once. Frozen, and shared between calls (the
   * construction-time sets always; a step's memory or message notes while their inputs repeat): do not
   * mutate (copy it first).
   */
  extrapolation_notes: readonly string[];
  /** Per layer kind breakdown, only when requested. */
  per_kind?: Array<{ kind: string; count: number; resources_us: ResourceTimes; experts_us: number }>;
}

/** Receives a step's composition inputs in the order `priceStep` composes them (PriceOptions.terms; terms-log.ts records one). */
export interface StepTermsSink {
  /** `count` layers of one kind: per-layer µs as composed (SM and expert SM already × the pricer's s). */
  layer(
    count: number,
    sm: number,
    hbm: number,
    nvlink: number,
    nic: number,
    expert_sm: number,
    expert_hbm: number,
  ): void;
  /** One output head: its SM µs (× s) and HBM µs. */
  head(sm: number, hbm: number): void;
  /** The step's host µs; the last call of a step. */
  host(host_us: number): void;
}

export interface PriceOptions {
  /** Include the per-layer-kind breakdown. */
  per_kind?: boolean;
  /**
   * Receives the step's composition inputs (terms-log.ts), so that the step can be re-composed at
   * another engine scale s without pricing it again. Pricers other than `createPricer`'s may ignore it.
   */
  terms?: StepTermsSink;
}

export interface Pricer {
  /**
   * Price one step. Reads `batch` during the call and keeps nothing of it: a caller may reuse and
   * mutate one Batch between calls (validation's static batches do).
   */
  price(batch: Batch, opts?: PriceOptions): StepPrice;
  /**
   * `price` into a caller's StepPrice (overwritten on every call), where the pricer offers it (every
   * pricer `createPricer` builds does): the same numbers without a new result per call.
   */
  priceInto?(batch: Batch, out: StepPrice, opts?: PriceOptions): StepPrice;
  /**
   * `priceInto` for a ColumnBatch (every pricer `createPricer` builds has it): the same numbers as the
   * Batch with the same rows, read from two typed-array columns instead of request objects.
   */
  priceColumnsInto?(batch: ColumnBatch, out: StepPrice, opts?: PriceOptions): StepPrice;
}
