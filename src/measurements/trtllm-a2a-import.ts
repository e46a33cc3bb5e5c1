/**
 * TRT-LLM's NVLink all-to-all on GB200 (issue 13 item 3, the gb200 rack), from
 * `../shared/datasets/aiconfigurator-modern/gb200/comm/trtllm/1.3.0rc10/trtllm_alltoall_perf.parquet` (verbatim
 * ai-dynamo/aiconfigurator, Apache-2.0; the dataset README "TRT-LLM NVLink all-to-all"). Kept: the
 * `NVLinkTwoSided` kernel (the WideEP/MNNVL path, ep 2–64 over the NVL72 rack) and its `alltoall_dispatch` and
 * `alltoall_combine` rows, as mode `mnnvl`. Left out, and said so in the provenance: `alltoall_prepare` (the
 * routing-metadata exchange, a separate call), `alltoall_combine_low_precision` (an FP4 combine) and the
 * `NVLinkOneSided` CutlassMoE kernel (nvfp4 only, ep ≤ 32).
 *
 * Message bytes are per rank, core/laws/expert-alltoall.ts `mnnvlMessageBytes`: T·(min(k, R) − 1) copies of
 * H elements in the dispatch payload (`moe_dtype`: bfloat16 2 B, fp8 1 B, nvfp4 0.5625 B with its block
 * scales) or BF16 for combine. T = `num_tokens` (per rank), R = `moe_ep_size`.
 *
 * Units: `latency` is ms (the dataset README: these legacy rows are ms; only the newer `moe_a2a` schema is µs)
 * and is converted to µs here. A table with a `*_us` time column instead is refused naming the column: it is
 * not this schema. Pure apart from reading the given table.
 */
import { bytesPerElement } from '../core/catalog/dtypes.ts';
import { InputError } from '../core/errors.ts';
import { mnnvlMessageBytes } from '../core/laws/expert-alltoall.ts';
import type { ExpertA2aRow } from './schema.ts';
import { intCell, latencyCell, textCell, type RawTable } from './table.ts';

/** The TRT-LLM kernel kept (module comment). */
export const MNNVL_KERNEL = 'NVLinkTwoSided';

/** Upstream `moe_dtype` → stepcal storage dtype of the dispatch payload. */
const PAYLOAD = { bfloat16: 'bf16', fp8: 'fp8', nvfp4: 'nvfp4' } as const;

function col(t: RawTable, name: string): number {
  const j = t.header.indexOf(name);
  if (j >= 0) return j;
  const us = t.header.find((h) => h.endsWith('_us'));
  const why = us ? `found "${us}": the legacy TRT-LLM all-to-all rows are ms in "latency"` : 'missing column';
  throw new InputError({ file: t.file, row: 0, column: name }, `${why} "${name}"`);
}

/**
 * Map the TRT-LLM all-to-all table to `mnnvl` dispatch and combine rows (one NVLink domain: nodes 1).
 * @param chip stepcal chip name (gb200)
 * @throws InputError naming file, row and column for a missing column, a bad cell or an unknown payload dtype
 */
export function mapTrtllmA2aTable(t: RawTable, chip: string): ExpertA2aRow[] {
  const names = ['framework', 'version', 'op_name', 'kernel_source', 'moe_dtype', 'num_tokens'] as const;
  const [fw, ver, op, ks, dt, tok] = names.map((c) => col(t, c)) as number[];
  const [h, k, e, ep, lat] = ['hidden_size', 'topk', 'num_experts', 'moe_ep_size', 'latency'].map((c) =>
    col(t, c),
  ) as number[];
  const out: ExpertA2aRow[] = [];
  for (let r = 0; r < t.rows.length; r++) {
    const phase = { alltoall_dispatch: 'dispatch', alltoall_combine: 'combine' }[textCell(t, r, op!)] as
      | 'dispatch'
      | 'combine'
      | undefined;
    if (!phase || textCell(t, r, ks!) !== MNNVL_KERNEL) continue;
    const dtype = textCell(t, r, dt!);
    const payload = PAYLOAD[dtype as keyof typeof PAYLOAD];
    if (!payload)
      throw new InputError(
        { file: t.file, row: r + 1, column: 'moe_dtype' },
        `expected bfloat16, fp8 or nvfp4, got "${dtype}"`,
      );
    const shape = {
      tokens: intCell(t, r, tok!, 'num_tokens', 1),
      topk: intCell(t, r, k!, 'topk', 1),
      hidden: intCell(t, r, h!, 'hidden_size', 1),
      ranks: intCell(t, r, ep!, 'moe_ep_size', 2),
      dispatch_bytes_per_element: bytesPerElement(payload),
    };
    out.push({
      chip,
      lane: `${textCell(t, r, fw!).toLowerCase()}-${textCell(t, r, ver!)}`,
      kernel_source: `${MNNVL_KERNEL}_${payload}`,
      mode: 'mnnvl',
      phase,
      ranks: shape.ranks,
      nodes: 1,
      tokens_per_rank: shape.tokens,
      topk: shape.topk,
      experts: intCell(t, r, e!, 'num_experts', 1),
      hidden: shape.hidden,
      sms: 0,
      message_bytes: mnnvlMessageBytes(phase, shape),
      latency_us: latencyCell(t, r, lat!, 'latency') * 1000,
    });
  }
  return out;
}
