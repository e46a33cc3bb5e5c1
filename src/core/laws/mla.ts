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
 *   KNOWN DIVERGENCE 33). The pricer charges the projections as the graph's GEMMs, so it never charges these
 *   terms (docs/pricer.md "MLA").
 * - A registry fitted on the kernel tables only (a100): decode in waves (MlaWaveDecode, mlaWaveDecodeUs below),
 *   prefill + head_token · T · heads (the kernel's own per-(query token × head) cost, charged: a kernel row has
 *   no projections).
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

/**
 * An MLA decode kernel that runs in waves (docs/fitting.md "MLA", a100's kernel tables): one program per
 * (request, block of `block_heads` query heads, KV split), `splits` = the KV splits over the programs one SM
 * holds at once, so a call runs ceil(rows · ceil(heads / block_heads) · splits / SMs) waves of equal cost.
 * vLLM's grouped Triton decode (16-head blocks, 4 KV splits) fits at 16 and 4 on a100's 108 SMs; its
 * one-head kernel (no grouping) is its own law (registry `_h1`).
 */
export interface MlaWaveDecode {
  floor_us: number;
  /** µs each wave costs whatever it reads. */
  wave_us: number;
  /** µs per key one request attends, per wave (the latent read and the work every program pays). */
  key_us: number;
  /** µs per key per query head in a program's block. */
  key_head_us: number;
  /** Query heads one program serves. */
  block_heads: number;
  /** Programs per (request, head block), over the programs one SM holds at once. */
  splits: number;
}

/** Programs one decode row launches, in SM slots: ceil(heads / block_heads) · splits. */
export function mlaWaveProgramsPerRow(c: Pick<MlaWaveDecode, 'block_heads' | 'splits'>, heads: number): number {
  return Math.ceil(heads / c.block_heads) * c.splits;
}

/** Query heads one program serves at `heads` local heads: min(heads, block_heads). */
export function mlaHeadsInBlock(c: Pick<MlaWaveDecode, 'block_heads'>, heads: number): number {
  return Math.min(heads, c.block_heads);
}

/** µs per key per wave at `heads` local query heads: key_us + mlaHeadsInBlock · key_head_us. */
export function mlaWaveUsPerKey(c: MlaWaveDecode, heads: number): number {
  return c.key_us + mlaHeadsInBlock(c, heads) * c.key_head_us;
}

/** Waves of one call: ceil(rows · programs_per_row / slots), slots = the chip's SM count. */
export function mlaDecodeWaves(rows: number, programs_per_row: number, slots: number): number {
  return Math.ceil((rows * programs_per_row) / slots);
}

/**
 * One wave-law MLA decode call (attention only), µs: max(floor, waves · (wave_us + keys / rows · us_per_key),
 * wave_us + longest · us_per_key), waves = ceil(rows · programs_per_row / slots): the waves at the rows' mean
 * context, and never under one wave of the longest row (a wave is as long as its longest program, so adding a
 * shorter row never lowers the price). Exact for rows of one context (every fitted row); a mixed batch of
 * several waves is priced at its mean context (KNOWN DIVERGENCE 34).
 * @param rows decode rows (requests) of the call; 0 → 0 µs
 * @param keys Σ over the rows of the keys each attends
 * @param longest the keys the longest row attends (≤ keys)
 * @param slots the chip's SM count (chip catalog `sm_count`)
 */
export function mlaWaveDecodeUs(
  floor_us: number,
  wave_us: number,
  us_per_key: number,
  programs_per_row: number,
  slots: number,
  rows: number,
  keys: number,
  longest: number,
): number {
  if (rows <= 0) return 0;
  const waves = mlaDecodeWaves(rows, programs_per_row, slots);
  return Math.max(floor_us, waves * (wave_us + (keys / rows) * us_per_key), wave_us + longest * us_per_key);
}
