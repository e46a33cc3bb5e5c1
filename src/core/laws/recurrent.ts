/**
 * Recurrent-mixer laws (seed "Recurrent mixers": decode rows at a measured decode rate, prefill tokens at a
 * measured prefill rate or, where the registry has none, as the chunked scan vLLM runs). One layer, one rank:
 *
 *   decode   t_us = floor_us + rows · 2 · S / rate_bytes_per_us       S = v_heads · d_v · d_k · 4 (fp32 state)
 *   prefill  t_us = floor_us + tokens · 4 · v_heads · d_v · d_k / rate_flops_per_us
 *
 * Decode reads and writes each row's whole state once per token (the README's GDN / KDA bandwidth check,
 * ../shared/datasets/aiconfigurator-modern/README.md "physical checks": 2·B·V·128·128·4). Prefill work is
 * the recurrence's state update and read-out, 2·d_v·d_k FLOPs each per head and token; the chunked kernels'
 * intra-chunk products scale with the same tokens · heads at fixed head sizes, so one rate covers them.
 * The laws are `floorPlusWork` (floor-rate.ts) over these work counts; fitters and the pricer call both.
 * KNOWN DIVERGENCE 17: KDA prefill is fitted without its eager q/k/v convs. KNOWN DIVERGENCE 18: decode rates are
 * fitted on states larger than L2. Pure.
 */

/** Bytes of one sequence's fp32 recurrent state on one rank: v_heads · d_v · d_k · 4. */
export function recurrentStateBytes(v_heads: number, head_v_dim: number, head_k_dim: number): number {
  return v_heads * head_v_dim * head_k_dim * 4;
}

/** Decode work of one decode row (one token): the state read and written back, bytes. */
export function recurrentDecodeBytesPerRow(v_heads: number, head_v_dim: number, head_k_dim: number): number {
  return 2 * recurrentStateBytes(v_heads, head_v_dim, head_k_dim);
}

/** Prefill work of one token: state update + read-out, 4 · v_heads · d_v · d_k FLOPs. */
export function recurrentPrefillFlopsPerToken(v_heads: number, head_v_dim: number, head_k_dim: number): number {
  return 4 * v_heads * head_v_dim * head_k_dim;
}

/** Chunk length of vLLM's chunked SSD / delta-rule kernels (Mamba2 `chunk_size` 256 in vLLM's default). */
export const SCAN_CHUNK_TOKENS = 256;

/**
 * The chunked scan's arithmetic per token (vLLM's SSD kernels; used where no prefill rate is measured, and
 * for the Mamba2 decode state update, which no table measures): the intra-chunk quadratic term over a
 * SCAN_CHUNK_TOKENS chunk, 2 · chunk · (d_v + d_k) per head, plus the state update 4 · d_v · d_k per head, FLOPs.
 */
export function chunkedScanFlopsPerToken(v_heads: number, head_v_dim: number, head_k_dim: number): number {
  return 2 * v_heads * (SCAN_CHUNK_TOKENS * (head_v_dim + head_k_dim) + 2 * head_v_dim * head_k_dim);
}
