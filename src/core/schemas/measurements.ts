/**
 * Zod schemas of the measurement store's file formats (docs/measurements.md): one row schema per
 * family of the canonical CSVs (`measurements/<chip>/<family>.<lane>.csv.gz`), the held-out step
 * row (`*.steps.csv`) and the provenance YAML beside every data file. Internal units: time in µs,
 * sizes in bytes, work in FLOPs, token counts as plain counts. The row types of
 * src/measurements/schema.ts are `z.infer` of these; src/measurements/store.ts parses every row
 * it loads with them.
 */
import { z } from 'zod';

/** Measurement families stepcal stores. */
export const FAMILIES = [
  'gemm',
  'attention_decode',
  'attention_prefill',
  'collective',
  'moe',
  'recurrent',
  'host',
  'step',
  'sparse',
  'mla',
  'expert_alltoall',
] as const;
export type Family = (typeof FAMILIES)[number];

export const COLLECTIVE_OPS = ['all_reduce', 'all_gather', 'reduce_scatter', 'alltoall'] as const;
export type CollectiveOp = (typeof COLLECTIVE_OPS)[number];
export const COLLECTIVE_BACKENDS = ['nccl', 'custom_graph', 'custom_eager', 'custom_trtllm'] as const;
export type CollectiveBackend = (typeof COLLECTIVE_BACKENDS)[number];
export const HOST_WHATS = ['eager_launch', 'graph_replay', 'dispatch'] as const;
/** Recurrent-mixer kinds (linear attention / SSM) and the phases their kernel tables time. */
export const RECURRENT_MIXERS = ['gdn', 'kda', 'mamba2'] as const;
export const RECURRENT_PHASES = ['context', 'generation', 'verify'] as const;

const count = z.number().int('expected an integer count').nonnegative('expected a count ≥ 0');
const atLeastOne = z.number().int('expected an integer').min(1, 'expected an integer ≥ 1');
const latency = z.number().positive('expected a positive latency (µs)');
const text = z.string();
const nonEmpty = z.string().min(1, 'expected a non-empty value');

/** Fields every per-operator row carries: stepcal chip name, lane (`vllm-0.24.0`), kernel dispatched ('' = unknown). */
const meta = { chip: nonEmpty, lane: nonEmpty, kernel_source: text };

/** One GEMM: activation m×k times weight n×k (torch.nn.functional.linear convention). FLOPs = 2·m·n·k. */
export const GemmRowSchema = z
  .object({ ...meta, m: atLeastOne, n: atLeastOne, k: atLeastOne, dtype: nonEmpty, latency_us: latency })
  .strict();

/** One decode-attention call: `batch` requests attending over `context_tokens` cached tokens; heads per GPU (post-TP); window 0 = full. */
export const AttentionDecodeRowSchema = z
  .object({
    ...meta,
    batch: atLeastOne,
    context_tokens: atLeastOne,
    n_q: atLeastOne,
    n_kv: atLeastOne,
    head_dim: atLeastOne,
    window: count,
    kv_dtype: text,
    latency_us: latency,
  })
  .strict();

/** One prefill (context) attention call over `new_tokens` per request on `prefix_tokens` cached. */
export const AttentionPrefillRowSchema = z
  .object({
    ...meta,
    batch: atLeastOne,
    new_tokens: atLeastOne,
    prefix_tokens: count,
    n_q: atLeastOne,
    n_kv: atLeastOne,
    head_dim: atLeastOne,
    window: count,
    dtype: nonEmpty,
    kv_dtype: text,
    latency_us: latency,
  })
  .strict();

/**
 * One collective call. `message_bytes` follows nccl-tests: the per-rank buffer for all_reduce, the
 * whole buffer across ranks for all_gather, reduce_scatter and alltoall.
 */
export const CollectiveRowSchema = z
  .object({
    ...meta,
    op: z.enum(COLLECTIVE_OPS),
    dtype: nonEmpty,
    ranks: z.number().int().min(2, 'a collective needs at least 2 ranks'),
    nodes: atLeastOne,
    message_bytes: atLeastOne,
    backend: z.enum(COLLECTIVE_BACKENDS),
    latency_us: latency,
  })
  .strict();

/** One fused-MoE layer call on one rank (routing + grouped expert GEMMs, no communication). */
export const MoeRowSchema = z
  .object({
    ...meta,
    tokens: atLeastOne,
    hidden: atLeastOne,
    inter: atLeastOne,
    topk: atLeastOne,
    experts: atLeastOne,
    tp: atLeastOne,
    ep: atLeastOne,
    dtype: nonEmpty,
    distribution: z.string().regex(/^(balanced|power_law_[0-9.]+)$/, 'expected "balanced" or "power_law_<alpha>"'),
    latency_us: latency,
  })
  .strict()
  .refine((r) => r.topk <= r.experts, { message: 'topk exceeds the expert count', path: ['topk'] });

/**
 * One recurrent-mixer kernel call on one GPU for one layer (aiconfigurator gdn/kda/mamba2 tables): `batch`
 * sequences of `seq_len` new tokens (1 in generation). Heads TP-local (`v_heads` state heads of
 * `head_v_dim` × `head_k_dim` fp32 state each; Mamba2: nheads × head_dim × d_state, k_heads = n_groups);
 * `conv_channels` the causal conv's channels. Projections are GEMMs, not in these rows.
 */
export const RecurrentRowSchema = z
  .object({
    ...meta,
    mixer: z.enum(RECURRENT_MIXERS),
    phase: z.enum(RECURRENT_PHASES),
    batch: atLeastOne,
    seq_len: atLeastOne,
    tokens: atLeastOne,
    k_heads: atLeastOne,
    v_heads: atLeastOne,
    head_k_dim: atLeastOne,
    head_v_dim: atLeastOne,
    conv_channels: atLeastOne,
    latency_us: latency,
  })
  .strict();

/** One host-overhead measurement: launching `kernels` kernels eagerly, or replaying a graph of that many nodes. */
export const HostRowSchema = z
  .object({ ...meta, what: z.enum(HOST_WHATS), kernels: atLeastOne, latency_us: latency })
  .strict();

/**
 * Kernels of the sparse-attention family (issue 14): sparse attention, its indexer scan, the two mHC halves,
 * and MiniMax-M3's whole MSA module (projections to o_proj in one timed call).
 */
export const SPARSE_OPS = ['sparse_attn', 'indexer', 'mhc_pre', 'mhc_post', 'msa'] as const;

/**
 * One sparse-family kernel call (docs/measurements.md "sparse"): `batch` requests of `query_tokens` each after
 * `past_tokens` cached (mHC: one row of `query_tokens` tokens); heads per GPU; `window` tokens read directly,
 * a compressed stream of one entry per `compress_ratio` tokens capped at `index_topk` (0 = no selection);
 * `head_dim` is the cached entry's width (indexer: index_head_dim). mHC rows: `hidden`, `hc_mult` and the
 * `sites` (attention + FFN) one latency covers.
 */
export const SparseRowSchema = z
  .object({
    ...meta,
    op: z.enum(SPARSE_OPS),
    model: nonEmpty,
    batch: atLeastOne,
    query_tokens: atLeastOne,
    past_tokens: count,
    heads: count,
    head_dim: count,
    window: count,
    compress_ratio: count,
    index_topk: count,
    hidden: count,
    hc_mult: count,
    sites: atLeastOne,
    latency_us: latency,
  })
  .strict();

/** Latent-attention (MLA) tables (issue 13 item 2): the whole vLLM module or the attention kernel alone, per phase. */
export const MLA_OPS = ['decode_module', 'prefill_module', 'decode_kernel', 'prefill_kernel'] as const;
export type MlaOp = (typeof MLA_OPS)[number];

/**
 * One MLA call (docs/measurements.md "mla"): `batch` requests of `query_tokens` each after `past_tokens`
 * cached, so each attends over past + query keys; `heads` are the per-GPU query heads; `kv_dtype` the
 * latent cache's dtype (576 elements per token, DeepSeek-V3 dims); `gemm_dtype` the module's linear layers
 * ('' for a kernel row, which has none).
 */
export const MlaRowSchema = z
  .object({
    ...meta,
    op: z.enum(MLA_OPS),
    gemm_dtype: text,
    kv_dtype: nonEmpty,
    heads: atLeastOne,
    batch: atLeastOne,
    query_tokens: atLeastOne,
    past_tokens: count,
    latency_us: latency,
  })
  .strict();

/**
 * Expert-parallel all-to-all kernels (issue 13 item 3): DeepEP low-latency and normal mode, and TRT-LLM's
 * NVLinkTwoSided all-to-all over a GB200 NVL72 rack (`mnnvl`).
 */
export const EXPERT_A2A_MODES = ['ll', 'normal', 'mnnvl'] as const;
export const EXPERT_A2A_PHASES = ['dispatch', 'combine'] as const;

/**
 * One expert-parallel all-to-all call on one rank (docs/measurements.md "expert_alltoall"): `tokens_per_rank`
 * tokens before routing, each to `topk` of `experts` experts over `ranks` ranks on `nodes` nodes, `hidden`
 * elements; `sms` the normal mode's SM budget (0 for ll); `message_bytes` the bytes the rank sends
 * (src/measurements/deepep-import.ts).
 */
export const ExpertA2aRowSchema = z
  .object({
    ...meta,
    mode: z.enum(EXPERT_A2A_MODES),
    phase: z.enum(EXPERT_A2A_PHASES),
    ranks: z.number().int().min(2, 'an all-to-all needs at least 2 ranks'),
    nodes: atLeastOne,
    tokens_per_rank: atLeastOne,
    topk: atLeastOne,
    experts: atLeastOne,
    hidden: atLeastOne,
    sms: count,
    message_bytes: z.number().positive('expected a positive message size (bytes)'),
    latency_us: latency,
  })
  .strict();

/** One held-out whole-step observation (`*.steps.csv`; docs/validation.md). Cross-field rules live in the step reader. */
export const StepRowSchema = z
  .object({
    model: nonEmpty,
    chip: nonEmpty,
    tp: atLeastOne,
    weight_dtype: nonEmpty,
    /** '' = same as weights. */
    kv_dtype: text,
    /** '' = deployment default (FULL_AND_PIECEWISE). */
    cudagraph_mode: text,
    engine: nonEmpty,
    kind: z.enum(['step', 'static_batch']),
    prefill_requests: count,
    prefill_tokens: count,
    prefill_context_tokens: count,
    decode_requests: count,
    decode_context_tokens: count,
    batch: count,
    prompt_tokens: count,
    output_tokens: count,
    measured_us: latency,
    group: text,
    source: nonEmpty,
    /** Free-form flags (e.g. `admitted_fewer`); '' when none. Semicolon-separated. */
    flags: text,
  })
  .strict();

/**
 * Row schema of each family. Checked against `z.ZodObject`, not `z.ZodType`: relating each strict object
 * schema to the generic `ZodType` made this file ≈ 35 % of the project's tsc types (docs/performance.md).
 */
export const FAMILY_ROW_SCHEMAS = {
  gemm: GemmRowSchema,
  attention_decode: AttentionDecodeRowSchema,
  attention_prefill: AttentionPrefillRowSchema,
  collective: CollectiveRowSchema,
  moe: MoeRowSchema,
  recurrent: RecurrentRowSchema,
  host: HostRowSchema,
  step: StepRowSchema,
  sparse: SparseRowSchema,
  mla: MlaRowSchema,
  expert_alltoall: ExpertA2aRowSchema,
} as const satisfies Record<Family, z.ZodObject>;

/** Provenance written beside every stored measurement file. */
export const ProvenanceSchema = z
  .object({
    /** A fitted family, or `memory`: the collector's bandwidth sidecar, which no fitter reads (docs/collector.md). */
    family: z.enum([...FAMILIES, 'memory']),
    chip: nonEmpty,
    lane: nonEmpty,
    /** e.g. `ai-dynamo/aiconfigurator` */
    source_repository: z.string(),
    /** Path of the table inside the source repository (upstream layout). */
    source_path: z.string(),
    source_commit: z.string(),
    licence: z.string(),
    /** Input files actually read, with sha256 of their bytes. */
    inputs: z.array(
      z
        .object({
          file: z.string(),
          sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected a sha256 hex digest'),
          rows: count,
        })
        .strict(),
    ),
    /** Human-readable filters and transformations, in order applied. */
    filters: z.array(z.string()),
    rows_in: count,
    rows_out: count,
    /** Unit conversions applied on the way in. */
    units: z.record(z.string(), z.string()),
    /** sha256 of the written data file. */
    output_sha256: z.string().regex(/^[0-9a-f]{64}$/, 'expected a sha256 hex digest'),
    notes: z.array(z.string()).optional(),
    /** Configurations measured more than once and collapsed to their median (0 when none). */
    duplicate_configs: count.optional(),
    /** Rows per lane label found in the data (a table can mix runtime versions). */
    lanes: z.record(z.string(), count).optional(),
    /** Per-dtype coverage of the sweep: rows, distinct shapes, and the union of shapes over dtypes. */
    coverage: z.record(z.string(), z.object({ rows: count, shapes: count, of_shapes: count }).strict()).optional(),
    /**
     * The run record of `collector/collect.py` (date, plan, environment, clock method, throttle check,
     * per-sweep status; docs/collector.md). Written by the collector, read by people: kept as given.
     */
    collector: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
