/**
 * KV-cache bytes a decode-attention call reads, shared by the importer's units-slip check and the
 * attention and HBM fitters.
 */
import { bytesPerElement, parseDtype } from '../core/catalog/dtypes.ts';
import type { AttentionDecodeRow } from './schema.ts';

/**
 * KV bytes one decode-attention call reads: batch × attended × 2 (K and V) × n_kv × head_dim ×
 * bytes(kv_dtype), with attended = min(context_tokens, window) for sliding-window rows (window > 0).
 * Source: shared/datasets/aiconfigurator/README.md "Units" 3; issue 3 "Decode attention".
 * @returns bytes
 * @throws Error on an unknown kv_dtype (stored rows carry canonical names, so this means a bug upstream)
 */
export function decodeKvBytes(
  r: Pick<AttentionDecodeRow, 'batch' | 'context_tokens' | 'n_kv' | 'head_dim' | 'window' | 'kv_dtype'>,
): number {
  const attended = r.window > 0 ? Math.min(r.context_tokens, r.window) : r.context_tokens;
  return r.batch * attended * 2 * r.n_kv * r.head_dim * bytesPerElement(parseDtype(r.kv_dtype));
}
