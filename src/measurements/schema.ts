/**
 * Canonical measurement rows, one interface per family, in stepcal's internal units:
 * time in µs, sizes in bytes, work in FLOPs, token counts as plain counts.
 *
 * On disk each family is a CSV (optionally gzipped) whose header is exactly `FAMILY_COLUMNS[family]`,
 * in that order, under `measurements/<chip>/<family>.<lane>.csv.gz`, next to a
 * `<same name>.provenance.yaml`. Every row carries `chip`, `lane` (framework and version, e.g.
 * `vllm-0.24.0`) and `kernel_source` (empty when unknown).
 */

/** Measurement families stepcal stores. */
export const FAMILIES = [
  'gemm',
  'attention_decode',
  'attention_prefill',
  'collective',
  'moe',
  'host',
  'step',
] as const;
export type Family = (typeof FAMILIES)[number];

/** Fields every per-operator row carries. */
export interface RowMeta {
  /** stepcal chip name (`h200`). */
  chip: string;
  /** Framework and version the row was measured with (`vllm-0.24.0`, `trtllm-1.3.0rc20`, `nccl-2.29.2`). */
  lane: string;
  /** Kernel or backend actually dispatched; '' when unknown. */
  kernel_source: string;
}

/** One GEMM: activation m×k times weight n×k (torch.nn.functional.linear convention). FLOPs = 2·m·n·k. */
export interface GemmRow extends RowMeta {
  m: number;
  n: number;
  k: number;
  /** bf16 | fp8 | fp8_block | nvfp4 (or another compute format string found in the source). */
  dtype: string;
  latency_us: number;
}

/** One decode-attention call: `batch` requests, each attending over `context_tokens` cached tokens. */
export interface AttentionDecodeRow extends RowMeta {
  batch: number;
  /** Attended length per request (tokens already cached + the new one). */
  context_tokens: number;
  /** Query heads on this GPU (post-TP). */
  n_q: number;
  /** KV heads on this GPU (post-TP). */
  n_kv: number;
  head_dim: number;
  /** Sliding window in tokens; 0 = full attention. */
  window: number;
  kv_dtype: string;
  latency_us: number;
}

/** One prefill (context) attention call over `new_tokens` per request on `prefix_tokens` cached. */
export interface AttentionPrefillRow extends RowMeta {
  batch: number;
  new_tokens: number;
  prefix_tokens: number;
  n_q: number;
  n_kv: number;
  head_dim: number;
  window: number;
  /** Compute dtype of the attention. */
  dtype: string;
  kv_dtype: string;
  latency_us: number;
}

export const COLLECTIVE_OPS = ['all_reduce', 'all_gather', 'reduce_scatter', 'alltoall'] as const;
export type CollectiveOp = (typeof COLLECTIVE_OPS)[number];
export const COLLECTIVE_BACKENDS = ['nccl', 'custom_graph', 'custom_eager'] as const;
export type CollectiveBackend = (typeof COLLECTIVE_BACKENDS)[number];

/**
 * One collective call. `message_bytes` follows the nccl-tests convention: the per-rank buffer for
 * all_reduce, the whole buffer across ranks for all_gather, reduce_scatter and alltoall.
 */
export interface CollectiveRow extends RowMeta {
  op: CollectiveOp;
  /** Element dtype (fp16, bf16, int8, ...). */
  dtype: string;
  ranks: number;
  nodes: number;
  message_bytes: number;
  backend: CollectiveBackend;
  latency_us: number;
}

/** One fused-MoE layer call on one rank (routing + grouped expert GEMMs, no communication). */
export interface MoeRow extends RowMeta {
  /** Tokens entering the layer on this rank, before top-k routing. */
  tokens: number;
  hidden: number;
  /** Per-expert FFN intermediate size (model-level, before tp split). */
  inter: number;
  topk: number;
  /** Model-level expert count. */
  experts: number;
  tp: number;
  ep: number;
  dtype: string;
  /** `balanced` or `power_law_<alpha>`. */
  distribution: string;
  latency_us: number;
}

export const HOST_WHATS = ['eager_launch', 'graph_replay', 'dispatch'] as const;
export type HostWhat = (typeof HOST_WHATS)[number];

/** One host-overhead measurement: time to launch `kernels` kernels eagerly, or replay a graph of that many nodes. */
export interface HostRow extends RowMeta {
  what: HostWhat;
  /** Kernels launched (eager_launch, dispatch) or nodes in the replayed graph (graph_replay). */
  kernels: number;
  latency_us: number;
}

/** One held-out whole-step observation (`*.steps.csv`; see docs/steps-format.md). */
export interface StepRow {
  model: string;
  chip: string;
  tp: number;
  weight_dtype: string;
  /** '' = same as weights. */
  kv_dtype: string;
  /** '' = deployment default (FULL_AND_PIECEWISE). */
  cudagraph_mode: string;
  engine: string;
  kind: 'step' | 'static_batch';
  prefill_requests: number;
  prefill_tokens: number;
  prefill_context_tokens: number;
  decode_requests: number;
  decode_context_tokens: number;
  batch: number;
  prompt_tokens: number;
  output_tokens: number;
  measured_us: number;
  group: string;
  source: string;
  /** Free-form flags (e.g. `admitted_fewer`); '' when none. Semicolon-separated. */
  flags: string;
}

/** A parsed step row with where it came from (the step reader, src/measurements/store.ts). */
export interface LocatedStepRow extends StepRow {
  file: string;
  /** 1-based data row (header = 0). */
  row: number;
}

/** Column order on disk for each family (also the header row). */
export const FAMILY_COLUMNS = {
  gemm: ['chip', 'lane', 'kernel_source', 'dtype', 'm', 'n', 'k', 'latency_us'],
  attention_decode: [
    'chip',
    'lane',
    'kernel_source',
    'batch',
    'context_tokens',
    'n_q',
    'n_kv',
    'head_dim',
    'window',
    'kv_dtype',
    'latency_us',
  ],
  attention_prefill: [
    'chip',
    'lane',
    'kernel_source',
    'batch',
    'new_tokens',
    'prefix_tokens',
    'n_q',
    'n_kv',
    'head_dim',
    'window',
    'dtype',
    'kv_dtype',
    'latency_us',
  ],
  collective: ['chip', 'lane', 'kernel_source', 'op', 'dtype', 'ranks', 'nodes', 'message_bytes', 'backend', 'latency_us'],
  moe: [
    'chip',
    'lane',
    'kernel_source',
    'tokens',
    'hidden',
    'inter',
    'topk',
    'experts',
    'tp',
    'ep',
    'dtype',
    'distribution',
    'latency_us',
  ],
  host: ['chip', 'lane', 'kernel_source', 'what', 'kernels', 'latency_us'],
  step: [
    'model',
    'chip',
    'tp',
    'weight_dtype',
    'kv_dtype',
    'cudagraph_mode',
    'engine',
    'kind',
    'prefill_requests',
    'prefill_tokens',
    'prefill_context_tokens',
    'decode_requests',
    'decode_context_tokens',
    'batch',
    'prompt_tokens',
    'output_tokens',
    'measured_us',
    'group',
    'source',
    'flags',
  ],
} as const satisfies Record<Family, readonly string[]>;

/** Row type of each family. */
export interface FamilyRow {
  gemm: GemmRow;
  attention_decode: AttentionDecodeRow;
  attention_prefill: AttentionPrefillRow;
  collective: CollectiveRow;
  moe: MoeRow;
  host: HostRow;
  step: StepRow;
}

/** Columns holding text; every other column is numeric. */
export const TEXT_COLUMNS: ReadonlySet<string> = new Set([
  'chip',
  'lane',
  'kernel_source',
  'dtype',
  'kv_dtype',
  'op',
  'backend',
  'distribution',
  'what',
  'model',
  'weight_dtype',
  'cudagraph_mode',
  'engine',
  'kind',
  'group',
  'source',
  'flags',
]);

/** Provenance written beside every stored measurement file. */
export interface Provenance {
  family: Family;
  chip: string;
  lane: string;
  /** e.g. `ai-dynamo/aiconfigurator` */
  source_repository: string;
  /** Path of the table inside the source repository (upstream layout). */
  source_path: string;
  source_commit: string;
  licence: string;
  /** Input files actually read, with sha256 of their bytes. */
  inputs: Array<{ file: string; sha256: string; rows: number }>;
  /** Human-readable filters and transformations, in order applied. */
  filters: string[];
  rows_in: number;
  rows_out: number;
  /** Unit conversions applied on the way in. */
  units: Record<string, string>;
  /** sha256 of the written data file. */
  output_sha256: string;
  notes?: string[];
  /** Configurations measured more than once and collapsed to their median (0 when none). */
  duplicate_configs?: number;
  /** Rows per lane label found in the data (a table can mix runtime versions). */
  lanes?: Record<string, number>;
  /** Per-dtype coverage of the sweep: rows, distinct shapes, and the union of shapes over dtypes. */
  coverage?: Record<string, { rows: number; shapes: number; of_shapes: number }>;
}
