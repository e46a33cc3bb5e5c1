/**
 * Main-model work per step, counted from the scheduled (q, k) of each request, and MFU. Pure
 * functions over a small model shape (`FlopsModel`), so they are testable with hand-made shapes;
 * `flops-graph.ts` builds the shape from a catalog model graph.
 *
 * Source: seed `shared/seeds/inside-deepinfer-ch02-where-the-time-goes.txt` ("the chapter")
 * §2.5.1 (Listings 2.4–2.6: q = new positions selected, k = cached + in-flight + q; the estimator
 * returns (attention, total) where total = attention + other matrix work + logits already — never
 * add the two), §2.5.2 (Listing 2.7: format-dependent weights per multiply-add, FP4 1, FP8 2,
 * BF16 4, TF32/FP32 8, the factor 2 of a multiply-add included; scope: main model only — drafter
 * work, padding and replicas excluded; small arithmetic such as norms and activations omitted;
 * MFU compares the counted rate with a compute reference in the same convention).
 *
 * Units: multiply-adds (MACs), FLOPs, µs, FLOP/s.
 *
 * KNOWN DIVERGENCE from the engine's estimator (whose internals the chapter does not print):
 * attention counts exact causal (query, key) pairs, capped by a sliding window or a sparse top-k;
 * logits are counted for every scheduled row of a non-prompt request and for one row of a prompt
 * chunk; the full/consumer row ranges and swa_valid_start of chapter 9 are not modelled.
 */

/** Compute formats of the accounting (chapter Listing 2.7). */
export const COMPUTE_FORMATS = ['fp4', 'fp8', 'bf16', 'tf32', 'fp32'] as const;
export type ComputeFormat = (typeof COMPUTE_FORMATS)[number];

/**
 * FP8-equivalent FLOPs per multiply-add (chapter Listing 2.7 `flops_coef`): the multiply-add's 2
 * is included, so FP8 = 2 (same as plain FLOPs) and BF16 = 4 (half the FP8 rate on the same chip).
 */
export const FP8_EQUIVALENT_FLOPS_PER_MAC: Readonly<Record<ComputeFormat, number>> = Object.freeze({
  fp4: 1,
  fp8: 2,
  bf16: 4,
  tf32: 8,
  fp32: 8,
});

/** Plain FLOPs per multiply-add: one multiply and one add. */
export const PLAIN_FLOPS_PER_MAC = 2;

/** Accounting convention; every printed figure names it. */
export type FlopsConvention = 'plain' | 'fp8-equivalent';

/** FLOPs per multiply-add in `convention` for work done in `format`. */
export function flopsPerMac(format: ComputeFormat, convention: FlopsConvention): number {
  return convention === 'plain' ? PLAIN_FLOPS_PER_MAC : FP8_EQUIVALENT_FLOPS_PER_MAC[format];
}

/** A weight matrix applied to every scheduled row: n outputs × k inputs. */
export interface FlopsGemm {
  role: string;
  n: number;
  k: number;
  /** Multiply-adds per row = mult · n · k (e.g. top_k · 3 for gated experts). Default 1. */
  mult?: number;
  format: ComputeFormat;
  /** Runs only for prompt rows (graph `phase: prefill`). */
  prompt_only?: boolean;
}

/** An attention operator: per (query row, attended key) it does n_q · 2 · d_h multiply-adds (QKᵀ and PV). */
export interface FlopsAttention {
  /** Query heads. */
  n_q: number;
  /** Head width for the QKᵀ and PV products (mean of the two when they differ). */
  d_h: number;
  /** Head width on prompt rows when different (e.g. MLA prefill runs un-absorbed). */
  prompt_d_h?: number;
  /** Sliding window, tokens: a row attends at most this many keys. */
  window?: number;
  /** Sparse attention: a row attends at most this many selected keys. */
  topk?: number;
  format: ComputeFormat;
}

/** A group of identical layers. */
export interface FlopsLayer {
  id: string;
  count: number;
  gemms: FlopsGemm[];
  attention: FlopsAttention[];
}

/** Everything the counter needs to know about a model (main model only). */
export interface FlopsModel {
  name: string;
  hidden_size: number;
  vocab_size: number;
  layers: FlopsLayer[];
  /** Token-score projection (lm_head): n = vocab, k = hidden. */
  logits: FlopsGemm;
  /** What the shape leaves out (drafter, norms, recurrent updates, ...), printed with results. */
  omitted: string[];
}

/** One request's scheduled work (chapter Listing 2.4). */
export interface ScheduledRequest {
  /** New positions selected this step. */
  q: number;
  /** Keys visible: cached + in-flight + q. */
  k: number;
  /** Prompt (prefill) row, as opposed to decode/verification. */
  is_prompt: boolean;
}

/** Work of one request or batch. `total` already includes `attention`: never add the two. */
export interface FlopsCount {
  attention: number;
  /** Other matrix work (projections, MLP, experts). */
  non_attention: number;
  logits: number;
  /** attention + non_attention + logits. */
  total: number;
}

/**
 * Σ over query rows of the keys each attends to: the row at position p (0-based) sees p + 1 keys
 * causally, capped at `cap`. Rows occupy positions k − q … k − 1.
 * @throws Error unless 0 ≤ q ≤ k
 */
export function attendedPairs(q: number, k: number, cap = Infinity): number {
  if (!(Number.isInteger(q) && Number.isInteger(k) && q >= 0 && k >= q))
    throw new Error(`need integers 0 ≤ q ≤ k, got q=${q}, k=${k}`);
  if (q === 0) return 0;
  // Σ_{j=a}^{b} min(j, cap) with a = k − q + 1, b = k.
  const a = k - q + 1;
  const b = k;
  const tri = (lo: number, hi: number) => ((lo + hi) * (hi - lo + 1)) / 2;
  if (b <= cap) return tri(a, b);
  if (a >= cap) return cap * (b - a + 1);
  return tri(a, cap) + cap * (b - cap);
}

/** Multiply-adds of one attention operator for one request. */
export function attentionMacs(att: FlopsAttention, r: ScheduledRequest): number {
  const cap = Math.min(att.window ?? Infinity, att.topk ?? Infinity);
  const d = r.is_prompt && att.prompt_d_h !== undefined ? att.prompt_d_h : att.d_h;
  return att.n_q * 2 * d * attendedPairs(r.q, r.k, cap);
}

/** Rows that produce logits: every scheduled row of a decode/verification request, one row of a prompt chunk. */
export function logitRows(r: ScheduledRequest): number {
  return r.is_prompt ? Math.min(1, r.q) : r.q;
}

/**
 * Count one request's main-model work (chapter Listing 2.6): returns attention, other matrix work,
 * logits and their total, in `convention`.
 * @example llama-3.1-8b decode (q=1): non_attention = 32 · 436,207,616 plain FLOPs; logits 1,050,673,152
 */
export function requestFlops(m: FlopsModel, r: ScheduledRequest, convention: FlopsConvention): FlopsCount {
  let attention = 0;
  let non_attention = 0;
  for (const L of m.layers) {
    let a = 0;
    let o = 0;
    for (const att of L.attention) a += attentionMacs(att, r) * flopsPerMac(att.format, convention);
    for (const g of L.gemms) {
      if (g.prompt_only && !r.is_prompt) continue;
      o += r.q * (g.mult ?? 1) * g.n * g.k * flopsPerMac(g.format, convention);
    }
    attention += L.count * a;
    non_attention += L.count * o;
  }
  const g = m.logits;
  const logits = logitRows(r) * (g.mult ?? 1) * g.n * g.k * flopsPerMac(g.format, convention);
  return { attention, non_attention, logits, total: attention + non_attention + logits };
}

/** Sum the counts of a batch (the scheduler's `attn_flops += attn; total_flops += total`). */
export function batchFlops(m: FlopsModel, batch: readonly ScheduledRequest[], convention: FlopsConvention): FlopsCount {
  const s: FlopsCount = { attention: 0, non_attention: 0, logits: 0, total: 0 };
  for (const r of batch) {
    const c = requestFlops(m, r, convention);
    s.attention += c.attention;
    s.non_attention += c.non_attention;
    s.logits += c.logits;
    s.total += c.total;
  }
  return s;
}

/** Plain FLOPs per row of one layer group's GEMMs (decode-row view, no attention). */
export function denseFlopsPerTokenPerLayer(L: FlopsLayer): number {
  return L.gemms.filter((g) => !g.prompt_only).reduce((s, g) => s + PLAIN_FLOPS_PER_MAC * (g.mult ?? 1) * g.n * g.k, 0);
}

/**
 * The format that carries most of the model's matrix multiply-adds per row (GEMMs and experts,
 * weighted by layer count): the format whose peak is the plain-FLOP MFU reference.
 */
export function dominantGemmFormat(m: FlopsModel): ComputeFormat {
  const w = new Map<ComputeFormat, number>();
  for (const L of m.layers)
    for (const g of L.gemms) w.set(g.format, (w.get(g.format) ?? 0) + L.count * (g.mult ?? 1) * g.n * g.k);
  let best: ComputeFormat = m.logits.format;
  let bw = -1;
  for (const [f, v] of w)
    if (v > bw) {
      best = f;
      bw = v;
    }
  return best;
}

/** Model FLOPs utilisation and the reference it was divided by. */
export interface Mfu {
  /** Counted work per second, FLOP/s, in `convention`. */
  flops_per_s: number;
  /** Compute reference, FLOP/s, in the same convention (chip peak × devices). */
  reference_flops_per_s: number;
  /** flops_per_s / reference_flops_per_s (a fraction, not percent). */
  mfu: number;
}

/**
 * MFU = counted work per second / compute reference (chapter §2.5.2).
 * @param total_flops counted main-model work of the step, in the reference's convention
 * @param step_us elapsed step time, µs (> 0)
 * @param reference_flops_per_s compute reference of the devices running this one replica, FLOP/s
 * @throws Error on non-positive time or reference
 */
export function mfu(total_flops: number, step_us: number, reference_flops_per_s: number): Mfu {
  if (!(step_us > 0)) throw new Error(`step time must be > 0 µs, got ${step_us}`);
  if (!(reference_flops_per_s > 0))
    throw new Error(`compute reference must be > 0 FLOP/s, got ${reference_flops_per_s}`);
  const flops_per_s = (total_flops * 1e6) / step_us;
  return { flops_per_s, reference_flops_per_s, mfu: flops_per_s / reference_flops_per_s };
}

/** Dense chip peaks in TFLOP/s by format, as in catalog/chips/*.yaml `peak_tflops`. */
export interface PeakTflops {
  bf16: number;
  fp8?: number;
  nvfp4?: number;
  tf32?: number;
}

/**
 * The compute reference in a convention, FLOP/s per device.
 * - fp8-equivalent: the dense FP8 peak; on a chip without FP8, 2 × the BF16 peak (BF16 work weighs
 *   4 per multiply-add, FP8 2), flagged `derived`.
 * - plain: the dense peak of `format` (the format the model's GEMMs run in).
 * @throws Error when the chip lists no peak for the format
 */
export function referencePeak(
  peaks: PeakTflops,
  convention: FlopsConvention,
  format: ComputeFormat,
): { flops_per_s: number; basis: string } {
  if (convention === 'fp8-equivalent') {
    if (peaks.fp8 !== undefined) return { flops_per_s: peaks.fp8 * 1e12, basis: 'dense FP8 peak' };
    return { flops_per_s: 2 * peaks.bf16 * 1e12, basis: 'derived: 2 × dense BF16 peak (chip lists no FP8 peak)' };
  }
  const t = format === 'bf16' ? peaks.bf16 : format === 'fp8' ? peaks.fp8 : format === 'fp4' ? peaks.nvfp4 : peaks.tf32;
  if (t === undefined) throw new Error(`the chip lists no dense ${format.toUpperCase()} peak for plain-FLOP MFU`);
  return { flops_per_s: t * 1e12, basis: `dense ${format.toUpperCase()} peak` };
}

/** The chapter's scope statement, printed with every MFU. */
export const MFU_SCOPE =
  'main model only: drafter (speculator) work, padding and replicas are excluded; norms/activations omitted; scheduled q/k ignore acceptance corrections';

// The block-scaled widths (blockScaledBytesPerValue, SCALED_FORMAT_BYTES_PER_VALUE) live in the one
// shared definition, src/core/catalog/dtypes.ts, which the pricer and the fitters use too.
