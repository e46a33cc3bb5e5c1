/**
 * Sparse-attention, indexer and mHC laws (seed "Attention", "Hyper-connections"; issue 14 items 1-2).
 * One pure function each, called by the fitters (src/fit/sparse.ts) and the pricer (src/pricer/plan.ts,
 * terms.ts) alike, so a coefficient is fitted on exactly the bytes the pricer later divides by it.
 *
 * - Sparse decode: floor_us + bytes / rate (core/laws/floor-rate.ts), bytes = the entries the layer
 *   actually reads (decodeTokensRead: window + selected top-k, or the whole compressed stream) × the
 *   cached entry's bytes.
 * - Indexer scan: the same form over the compressed stream of index keys; each key is fp8 with one fp32
 *   scale (`indexKeyBytes`; the dataset's DSA lower bound counts 132 B for index_head_dim 128).
 * - A model's own prefill form: fixed + per_request · requests + per_token · tokens + bytes / rate, where
 *   bytes are read in the kernel's own blocks (one query token's heads per block: every query reads its
 *   own selected entries), i.e. query-key pairs × entry bytes (`prefillFormUs`).
 * - mHC: per site and half, floor_us + stream bytes / rate (`mhcBytesPerToken`, the dataset README's
 *   "mHC" byte count: pre reads hc_mult bf16 streams and writes the layer input; post reads the layer
 *   output and reads + writes the streams).
 */

/** Bytes of one cached index key: index_head_dim fp8 values plus one fp32 scale. */
export function indexKeyBytes(index_head_dim: number): number {
  return index_head_dim + 4;
}

/** The two halves of an mHC site: `pre` mixes the streams into the layer input, `post` writes back. */
export type MhcHalf = 'pre' | 'post';

/**
 * HBM bytes one mHC half moves per token at one site (bf16 streams of `hidden` values each):
 * pre = hc·H·2 + H·2, post = H·2 + 2·hc·H·2 (aiconfigurator-modern README, "Physical sanity checks", mHC).
 */
export function mhcBytesPerToken(half: MhcHalf, hc_mult: number, hidden: number): number {
  return half === 'pre' ? hc_mult * hidden * 2 + hidden * 2 : hidden * 2 + 2 * hc_mult * hidden * 2;
}

/** A measured prefill form (µs, µs, µs, bytes per µs). */
export interface PrefillForm {
  fixed_us: number;
  per_request_us: number;
  per_token_us: number;
  bytes_per_us: number;
}

/**
 * A model's own prefill form for one layer (seed "Attention", second paragraph), µs:
 * fixed + per_request · requests + per_token · tokens + bytes / rate. A call with no prefill request costs 0.
 * @param requests prefill requests in the step
 * @param tokens prefill tokens in the step
 * @param bytes bytes read in the kernel's blocks (pairs × entry bytes)
 */
export function prefillFormUs(f: PrefillForm, requests: number, tokens: number, bytes: number): number {
  if (requests <= 0) return 0;
  return f.fixed_us + f.per_request_us * requests + f.per_token_us * tokens + bytes / f.bytes_per_us;
}
