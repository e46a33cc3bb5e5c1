/**
 * The sparse family's tables (issue 14): DeepSeek-V4's sparse FlashMLA call (`dsv4_hca_attn_module_perf`),
 * its block-index scorer (`dsv4_paged_mqa_logits_module_perf`) and the mHC kernels (`mhc_module_perf`), from
 * `../shared/datasets/aiconfigurator-modern/<sku>/{sparse_attention,mhc}/vllm/0.24.0/` (Parquet, verbatim
 * ai-dynamo/aiconfigurator, Apache-2.0). Each row becomes one canonical `sparse` row (µs; counts).
 *
 * Column meanings (the dataset README, "DeepSeek-V4 tables" and "mHC"): `latency` is ms per call; `isl` is the
 * query tokens per request and `step` the past KV, so the attended length is step + isl; `local_num_heads` is
 * the TP-local head count; an mHC row covers `num_sites` (2) calls. The tables are DeepSeek-V4-Flash shapes:
 * the model facts a row needs but does not carry (sliding window 128, head_dim 512, index_head_dim 128) come
 * from `../shared/datasets/model-configs/deepseek-ai--DeepSeek-V4-Flash/config.json` and are listed in the
 * provenance. Pure apart from reading the given file.
 */
import { InputError } from '../core/errors.ts';
import type { SparseRow } from './schema.ts';
import { columnIndex, intCell, latencyCell, msToUs, type RawTable } from './table.ts';

/** The upstream tables this family reads, with the op each becomes. */
export const SPARSE_TABLES = {
  dsv4_hca_attn_module_perf: { category: 'sparse_attention', op: 'sparse_attn' },
  dsv4_paged_mqa_logits_module_perf: { category: 'sparse_attention', op: 'indexer' },
  mhc_module_perf: { category: 'mhc', op: 'mhc' },
  msa_context_module_perf: { category: 'msa', op: 'msa' },
  msa_generation_module_perf: { category: 'msa', op: 'msa' },
} as const;
export type SparseTable = keyof typeof SPARSE_TABLES;

/** DeepSeek-V4-Flash facts the kernel rows imply (config.json): SWA window, latent entry width, index key width. */
export const DSV4_FLASH = { sliding_window: 128, head_dim: 512, index_head_dim: 128 } as const;

/**
 * MiniMax-M3 facts the MSA module rows imply (../shared/datasets/model-configs/MiniMaxAI--MiniMax-M3/config.json):
 * head_dim 128, hidden 6144, sparse_index_dim 128, and the keys one query reads, (sparse_topk_blocks 16 +
 * sparse_local_block 1) × sparse_block_size 128 = 2176 tokens.
 */
export const MSA_M3 = { head_dim: 128, hidden: 6144, index_dim: 128, cap_tokens: (16 + 1) * 128 } as const;

function text(t: RawTable, r: number, j: number): string {
  return String(t.rows[r]![j] ?? '');
}

/** The V4 sparse-attention and indexer rows (one call each; heads TP-local). */
function mapDsv4(t: RawTable, chip: string, op: 'sparse_attn' | 'indexer'): SparseRow[] {
  const [ks, model, heads, batch, isl, step, ratio, lat, ver] = [
    'kernel_source',
    'model',
    'local_num_heads',
    'batch_size',
    'isl',
    'step',
    'compress_ratio',
    'latency',
    'version',
  ].map((c) => columnIndex(t, c)) as number[];
  return t.rows.map((_, r) => ({
    chip,
    lane: `vllm-${text(t, r, ver!)}`,
    kernel_source: text(t, r, ks!),
    op,
    model: text(t, r, model!),
    batch: intCell(t, r, batch!, 'batch_size', 1),
    query_tokens: intCell(t, r, isl!, 'isl', 1),
    past_tokens: intCell(t, r, step!, 'step'),
    heads: intCell(t, r, heads!, 'local_num_heads', 1),
    head_dim: op === 'sparse_attn' ? DSV4_FLASH.head_dim : DSV4_FLASH.index_head_dim,
    window: op === 'sparse_attn' ? DSV4_FLASH.sliding_window : 0,
    compress_ratio: intCell(t, r, ratio!, 'compress_ratio', 1),
    index_topk: 0,
    hidden: 0,
    hc_mult: 0,
    sites: 1,
    latency_us: msToUs(latencyCell(t, r, lat!, 'latency')),
  }));
}

/** The mHC rows: `num_tokens` tokens, latency over `num_sites` calls. */
function mapMhc(t: RawTable, chip: string): SparseRow[] {
  const [opn, ks, arch, tok, sites, hc, hid, lat, ver] = [
    'op_name',
    'kernel_source',
    'architecture',
    'num_tokens',
    'num_sites',
    'hc_mult',
    'hidden_size',
    'latency',
    'version',
  ].map((c) => columnIndex(t, c)) as number[];
  return t.rows.map((_, r) => {
    const half = text(t, r, opn!);
    if (half !== 'pre' && half !== 'post')
      throw new InputError({ file: t.file, row: r + 1, column: 'op_name' }, `expected pre or post, got "${half}"`);
    return {
      chip,
      lane: `vllm-${text(t, r, ver!)}`,
      kernel_source: text(t, r, ks!),
      op: half === 'pre' ? ('mhc_pre' as const) : ('mhc_post' as const),
      model: text(t, r, arch!),
      batch: 1,
      query_tokens: intCell(t, r, tok!, 'num_tokens', 1),
      past_tokens: 0,
      heads: 0,
      head_dim: 0,
      window: 0,
      compress_ratio: 0,
      index_topk: 0,
      hidden: intCell(t, r, hid!, 'hidden_size', 1),
      hc_mult: intCell(t, r, hc!, 'hc_mult', 1),
      sites: intCell(t, r, sites!, 'num_sites', 1),
      latency_us: msToUs(latencyCell(t, r, lat!, 'latency')),
    };
  });
}

/**
 * The MSA module rows (whole module, one call): only the bf16-linear, bf16-KV lane, the MiniMax-M3
 * checkpoint's (docs/fitting.md "MSA module"). `num_heads` is per GPU; generation `step` is the cached tokens
 * and context `step` the cached prefix, so attended = step + isl in both tables.
 */
function mapMsa(t: RawTable, chip: string): SparseRow[] {
  const [ks, model, heads, batch, isl, step, lat, ver, kv, gemm] = [
    'kernel_source',
    'model',
    'num_heads',
    'batch_size',
    'isl',
    'step',
    'latency',
    'version',
    'kv_cache_dtype',
    'gemm_type',
  ].map((c) => columnIndex(t, c)) as number[];
  const out: SparseRow[] = [];
  t.rows.forEach((_, r) => {
    if (text(t, r, kv!) !== 'bfloat16' || text(t, r, gemm!) !== 'bfloat16') return;
    out.push({
      chip,
      lane: `vllm-${text(t, r, ver!)}`,
      kernel_source: text(t, r, ks!),
      op: 'msa',
      model: text(t, r, model!),
      batch: intCell(t, r, batch!, 'batch_size', 1),
      query_tokens: intCell(t, r, isl!, 'isl', 1),
      past_tokens: intCell(t, r, step!, 'step'),
      heads: intCell(t, r, heads!, 'num_heads', 1),
      head_dim: MSA_M3.head_dim,
      window: 0,
      compress_ratio: 1,
      index_topk: MSA_M3.cap_tokens,
      hidden: MSA_M3.hidden,
      hc_mult: 0,
      sites: 1,
      latency_us: msToUs(latencyCell(t, r, lat!, 'latency')),
    });
  });
  return out;
}

/**
 * Map one upstream table to canonical sparse rows.
 * @throws InputError naming file, row and column for a missing column or a bad cell
 */
export function mapSparseTable(table: SparseTable, t: RawTable, chip: string): SparseRow[] {
  const op = SPARSE_TABLES[table].op;
  if (op === 'msa') return mapMsa(t, chip);
  return op === 'mhc' ? mapMhc(t, chip) : mapDsv4(t, chip, op);
}
