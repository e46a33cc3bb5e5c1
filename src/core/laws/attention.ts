/**
 * Attention laws (seed "Attention"; reference §4.5).
 *
 * Decode attention is a read of the cached context: floor + bytes / rate, charged to HBM, once per
 * layer per step. Prefill attention is arithmetic that grows with query-key pairs, charged to SM.
 * A layer that states a window reads and attends at most the window (seed). A sparse layer reads its
 * window plus the positions its indexer selects, at most its top-k, or, with no top-k, its whole
 * compressed stream; its indexer scans the compressed stream in both phases.
 *
 * KNOWN DIVERGENCE 9 (reference §4.5 scorer-pinned kernel uses 2·S·(C+S)): pairs use the continuous
 * form of reference §4.5 (main), 4·(S·C + S²/2) for full attention (the 4 is 2 FLOPs per
 * multiply-add × 2 matmuls), generalised here to the integral of the keys each query position
 * p ∈ (C, C+S] sees: ∫ min(slope·p, cap) dp. Pure.
 */

/**
 * ∫_c^{c+s} min(slope·p, cap) dp — keys seen by the s queries of a chunk that starts after c cached
 * tokens, where each position p sees min(slope·p, cap) keys (slope 1 = every earlier token,
 * 1/r = a compressed stream; cap = window or top-k, Infinity for none).
 */
export function attendedKeys(c: number, s: number, slope: number, cap: number): number {
  if (s <= 0 || slope <= 0 || cap <= 0) return 0;
  const a = c;
  const b = c + s;
  const knee = cap / slope; // position where the cap starts to bind
  if (b <= knee) return (slope * (b * b - a * a)) / 2;
  if (a >= knee) return cap * s;
  return (slope * (knee * knee - a * a)) / 2 + cap * (b - knee);
}

/** A reader: what one attention layer (or indexer) sees of a request's context. */
export interface ReaderSpec {
  /** Keys read directly: Infinity = the whole context, W = a window, 0 = none. */
  window: number;
  /** Compressed stream term (sparse selection or indexer scan): present when ratio > 0. */
  ratio: number;
  /** Cap on the compressed term (top-k), Infinity = whole compressed stream. */
  cap: number;
}

/** Cached tokens a decode row with context `ctx` reads through `r`. */
export function decodeTokensRead(ctx: number, r: ReaderSpec): number {
  let t = ctx < r.window ? ctx : r.window;
  if (r.ratio > 0) {
    const compressed = Math.ceil(ctx / r.ratio);
    t += compressed < r.cap ? compressed : r.cap;
  }
  return t;
}

/** Query-key pairs (without the factor 4) of a prefill chunk of s tokens after c cached, through `r`. */
export function prefillPairs(s: number, c: number, r: ReaderSpec): number {
  let p = attendedKeys(c, s, 1, r.window);
  if (r.ratio > 0) p += attendedKeys(c, s, 1 / r.ratio, r.cap);
  return p;
}

/** Decode-attention law coefficients of one kind (registry `attention_decode_*`). */
export interface DecodeLaw {
  /** Per-call floor, µs. */
  floor_us: number;
  /** Asymptotic KV read rate, bytes per µs. */
  rate: number;
  /** Cost per work item (decode row × KV head on the GPU), µs; 0 = none. */
  item_us: number;
  /** Work items at which the read rate is half of `rate`; 0 = no ramp. */
  p_half: number;
}

/**
 * One decode-attention call (µs): floor + p · item_us + kv_bytes / rate(p), rate(p) = r_max · p/(p + p_½),
 * with p = decode rows × KV heads per GPU (issue 16: too few (row, KV head) work items cannot fill
 * the SMs, and each work item has its own set-up cost). Fitted on the generation-attention tables (src/fit/attention.ts,
 * docs/fitting.md "Decode attention"); with item_us = p_½ = 0 it is the seed's floor + bytes / rate.
 * = floor + p · item_us + (kv_bytes / r_max) · (1 + p_½ / p), the form the pricer evaluates.
 */
export function decodeAttentionUs(law: DecodeLaw, items: number, kv_bytes: number): number {
  const ramp = law.p_half > 0 && items > 0 ? 1 + law.p_half / items : 1;
  return law.floor_us + items * law.item_us + (kv_bytes / law.rate) * ramp;
}
