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

/**
 * One MiniMax-M3 MSA layer's shape on one GPU (issue 14 item 7; dataset README "MLA / DSA / MSA modules"):
 * `heads` local query heads of `head_dim`, model width `hidden`, `kv_heads` local KV heads (the collector
 * emulates a shard with max(1, heads / 16), MiniMax-M3's 64 : 4), `index_heads` local indexer heads of
 * `index_dim`, and the selected KV read per query: `cap_tokens` = (sparse_topk_blocks + sparse_local_block) ×
 * sparse_block_size.
 */
export interface MsaShape {
  heads: number;
  kv_heads: number;
  head_dim: number;
  hidden: number;
  index_heads: number;
  index_dim: number;
  cap_tokens: number;
}

/** Local KV (and indexer) heads of an MSA shard of `heads` query heads: max(1, ⌊heads / 16⌋) (the collector's emulation). */
export function msaKvHeads(heads: number): number {
  return Math.max(1, Math.floor(heads / 16));
}

/**
 * Weights of the module's linear layers per GPU, values: the fused q/k/v + index projection
 * hidden × (heads·d + 2·kv·d + 2·index_heads·index_dim) and o_proj heads·d × hidden.
 * KNOWN DIVERGENCE 27: the config does not say the index projection's width; one index query and one index
 * key of index_dim per index head is assumed.
 */
export function msaWeightParams(s: MsaShape): number {
  const qkv = s.hidden * (s.heads * s.head_dim + 2 * s.kv_heads * s.head_dim + 2 * s.index_heads * s.index_dim);
  return qkv + s.heads * s.head_dim * s.hidden;
}

/** Cached bytes per token of an MSA layer: K and V of the local KV heads plus one index key per index head. */
export function msaCacheBytesPerToken(s: MsaShape, kv_bytes: number): { kv: number; index: number } {
  return { kv: 2 * s.kv_heads * s.head_dim * kv_bytes, index: s.index_heads * s.index_dim * kv_bytes };
}

/** The work of one MSA decode call: requests, projection FLOPs, weight + selected-KV bytes, index-key bytes. */
export interface MsaDecodeWork {
  requests: number;
  flops: number;
  bytes: number;
  index_bytes: number;
}

/**
 * The work of one MSA decode call over `batch` requests of `context` tokens each (cached + the current one):
 * the projections' 2·params FLOPs per request; the module weights once plus each request's selected KV,
 * min(context, cap_tokens) tokens; and each request's whole index-key stream (context tokens), which the
 * block selection scores. The index stream is its own term: its keys are re-read across heads from L2, so
 * it streams faster than HBM (docs/fitting.md "MSA module").
 */
export function msaDecodeWork(
  s: MsaShape,
  batch: number,
  context: number,
  weight_bytes: number,
  kv_bytes: number,
): MsaDecodeWork {
  const c = msaCacheBytesPerToken(s, kv_bytes);
  const params = msaWeightParams(s);
  return {
    requests: batch,
    flops: 2 * params * batch,
    bytes: params * weight_bytes + batch * Math.min(context, s.cap_tokens) * c.kv,
    index_bytes: batch * context * c.index,
  };
}

/** Fitted MSA decode law (µs, µs per request, FLOPs / µs, bytes / µs, index bytes / µs). */
export interface MsaDecodeLaw {
  floor_us: number;
  per_request_us: number;
  flops_per_us: number;
  bytes_per_us: number;
  index_bytes_per_us: number;
}

/**
 * One MSA layer's decode module time, µs: floor + per_request · requests + FLOPs / flop rate + bytes / rate +
 * index bytes / index rate (all terms additive; a call with no request costs 0).
 */
export function msaDecodeUs(l: MsaDecodeLaw, w: MsaDecodeWork): number {
  if (w.requests <= 0) return 0;
  return (
    l.floor_us +
    l.per_request_us * w.requests +
    w.flops / l.flops_per_us +
    w.bytes / l.bytes_per_us +
    w.index_bytes / l.index_bytes_per_us
  );
}

/** The work of one MSA prefill call: requests, tokens, and the FLOPs of its projections, attention and indexer. */
export interface MsaPrefillWork {
  requests: number;
  tokens: number;
  proj_flops: number;
  attn_flops: number;
  index_flops: number;
}

/**
 * The work of one MSA prefill call: the projections 2·params per token, the attention 4·heads·d per
 * query-key pair over the selected keys (`kvPairs`), the indexer 2·index_heads·index_dim per pair over every
 * causal key (`indexPairs`). Each runs at its own fitted rate (Triton / fmha kernels are far below the GEMM peak).
 */
export function msaPrefillWork(
  s: MsaShape,
  requests: number,
  tokens: number,
  kvPairs: number,
  indexPairs: number,
): MsaPrefillWork {
  return {
    requests,
    tokens,
    proj_flops: 2 * msaWeightParams(s) * tokens,
    attn_flops: 4 * s.heads * s.head_dim * kvPairs,
    index_flops: 2 * s.index_heads * s.index_dim * indexPairs,
  };
}

/** Fitted MSA prefill law (µs, µs per request, µs per token, three FLOPs / µs rates). */
export interface MsaPrefillLaw {
  fixed_us: number;
  per_request_us: number;
  per_token_us: number;
  proj_flops_per_us: number;
  attn_flops_per_us: number;
  index_flops_per_us: number;
}

/**
 * One MSA layer's prefill module time, µs: fixed + per_request · requests + per_token · tokens + each FLOP
 * term at its rate; a call with no prefill request costs 0.
 */
export function msaPrefillUs(l: MsaPrefillLaw, w: MsaPrefillWork): number {
  if (w.requests <= 0) return 0;
  return (
    l.fixed_us +
    l.per_request_us * w.requests +
    l.per_token_us * w.tokens +
    w.proj_flops / l.proj_flops_per_us +
    w.attn_flops / l.attn_flops_per_us +
    w.index_flops / l.index_flops_per_us
  );
}
