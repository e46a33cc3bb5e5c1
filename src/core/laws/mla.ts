/**
 * Latent-attention (MLA) laws (seed "Attention"; issue 13 item 2). One pure function each, called by the
 * fitter (src/fit/mla.ts) and the pricer (src/pricer/plan.ts, coefficients.ts) alike.
 *
 * - Decode, per layer: floor + B · S · (entry_bytes / rate + heads · head_token_us), S = keys attended
 *   (cached tokens + the new one), entry_bytes = the latent entry (kv_lora_rank + qk_rope_head_dim
 *   elements × the cache dtype's bytes). The first term is the cache read; the second the score and value
 *   arithmetic per local query head and key (FlashMLA/FlashInfer read each latent once for all heads, so
 *   heads add work, not bytes).
 * - Prefill, per layer: floor + Σ_rows pairs · flops_per_pair · ε_max/ε(s) / (bf16 peak · ε_max · work_scale),
 *   the general prefill-attention law (core/laws/gemm.ts rampUsPerToken, rampSlowdown) with the kind's own
 *   floor and work_scale; flops_per_pair = 4 · heads · prefill_d_h (2 · heads · (qk_head_dim + v_head_dim)).
 * - A module row (the whole vLLM module) adds the projections: decode + per_request · B + per_request_head · B ·
 *   heads; prefill + per_token · T + per_token_head · T · heads + per_token_sq · T² (the T² rise is charged nowhere:
 *   KNOWN DIVERGENCE 33). The pricer charges the projections as the
 *   graph's GEMMs, so it never charges these terms (docs/pricer.md "MLA").
 */

/** DeepSeek-V3's latent entry: kv_lora_rank 512 + qk_rope_head_dim 64 elements per cached token (config.json). */
export const MLA_LATENT_ELEMENTS = 576;
/** Prefill FLOPs per query-key pair per head: 2 · (qk_head_dim 192 + v_head_dim 128) (config.json). */
export const MLA_PREFILL_FLOPS_PER_PAIR_HEAD = 640;

/** An MLA decode law: floor µs, cache rate bytes per µs, µs per (local head × key). */
export interface MlaDecode {
  floor_us: number;
  bytes_per_us: number;
  head_token_us: number;
}

/**
 * µs one attended key costs one decode row: entry_bytes / rate + heads · head_token_us.
 * @param heads local query heads (n_q / tp)
 * @param entry_bytes latent entry bytes (MLA_LATENT_ELEMENTS × cache dtype bytes)
 */
export function mlaDecodeUsPerKey(c: MlaDecode, heads: number, entry_bytes: number): number {
  return entry_bytes / c.bytes_per_us + heads * c.head_token_us;
}

/**
 * One MLA decode call (attention only), µs: floor + keys · mlaDecodeUsPerKey.
 * @param keys Σ over the batch's decode rows of the keys each attends (batch · S for equal rows)
 */
export function mlaDecodeUs(c: MlaDecode, keys: number, heads: number, entry_bytes: number): number {
  return c.floor_us + keys * mlaDecodeUsPerKey(c, heads, entry_bytes);
}
