/**
 * Canonical measurement rows, one interface per family, in stepcal's internal units:
 * time in µs, sizes in bytes, work in FLOPs, token counts as plain counts.
 *
 * On disk each family is a CSV (optionally gzipped) whose header is exactly `FAMILY_COLUMNS[family]`,
 * in that order, under `measurements/<chip>/<family>.<lane>.csv.gz`, next to a
 * `<same name>.provenance.yaml`. Every row carries `chip`, `lane` (framework and version, e.g.
 * `vllm-0.24.0`) and `kernel_source` (empty when unknown).
 */

import type { z } from 'zod';
import type {
  AttentionDecodeRowSchema,
  AttentionPrefillRowSchema,
  CollectiveRowSchema,
  GemmRowSchema,
  HostRowSchema,
  MoeRowSchema,
  ProvenanceSchema,
  RecurrentRowSchema,
  SparseRowSchema,
  MlaRowSchema,
  ExpertA2aRowSchema,
  StepRowSchema,
} from '../core/schemas/measurements.ts';
import type { Family } from '../core/schemas/measurements.ts';

// The row and provenance formats are zod schemas in src/core/schemas/measurements.ts (field docs
// there); these are their inferred types.
export { COLLECTIVE_OPS, FAMILIES } from '../core/schemas/measurements.ts';
export type { CollectiveBackend, CollectiveOp, Family } from '../core/schemas/measurements.ts';

export type GemmRow = z.infer<typeof GemmRowSchema>;
export type AttentionDecodeRow = z.infer<typeof AttentionDecodeRowSchema>;
export type AttentionPrefillRow = z.infer<typeof AttentionPrefillRowSchema>;
export type CollectiveRow = z.infer<typeof CollectiveRowSchema>;
export type MoeRow = z.infer<typeof MoeRowSchema>;
export type RecurrentRow = z.infer<typeof RecurrentRowSchema>;
export type HostRow = z.infer<typeof HostRowSchema>;
export type StepRow = z.infer<typeof StepRowSchema>;
export type SparseRow = z.infer<typeof SparseRowSchema>;
export type MlaRow = z.infer<typeof MlaRowSchema>;
export type ExpertA2aRow = z.infer<typeof ExpertA2aRowSchema>;
/** Provenance written beside every stored measurement file. */
export type Provenance = z.infer<typeof ProvenanceSchema>;

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
  collective: [
    'chip',
    'lane',
    'kernel_source',
    'op',
    'dtype',
    'ranks',
    'nodes',
    'message_bytes',
    'backend',
    'latency_us',
  ],
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
  recurrent: [
    'chip',
    'lane',
    'kernel_source',
    'mixer',
    'phase',
    'batch',
    'seq_len',
    'tokens',
    'k_heads',
    'v_heads',
    'head_k_dim',
    'head_v_dim',
    'conv_channels',
    'latency_us',
  ],
  host: ['chip', 'lane', 'kernel_source', 'what', 'kernels', 'latency_us'],
  sparse: [
    'chip',
    'lane',
    'kernel_source',
    'op',
    'model',
    'batch',
    'query_tokens',
    'past_tokens',
    'heads',
    'head_dim',
    'window',
    'compress_ratio',
    'index_topk',
    'hidden',
    'hc_mult',
    'sites',
    'latency_us',
  ],
  mla: [
    'chip',
    'lane',
    'kernel_source',
    'op',
    'gemm_dtype',
    'kv_dtype',
    'heads',
    'batch',
    'query_tokens',
    'past_tokens',
    'latency_us',
  ],
  expert_alltoall: [
    'chip',
    'lane',
    'kernel_source',
    'mode',
    'phase',
    'ranks',
    'nodes',
    'tokens_per_rank',
    'topk',
    'experts',
    'hidden',
    'sms',
    'message_bytes',
    'latency_us',
  ],
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
  recurrent: RecurrentRow;
  host: HostRow;
  sparse: SparseRow;
  mla: MlaRow;
  expert_alltoall: ExpertA2aRow;
  step: StepRow;
}

/** Columns holding text; every other column is numeric. */
export const TEXT_COLUMNS: ReadonlySet<string> = new Set([
  'chip',
  'lane',
  'kernel_source',
  'dtype',
  'gemm_dtype',
  'kv_dtype',
  'op',
  'mode',
  'backend',
  'distribution',
  'mixer',
  'phase',
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
