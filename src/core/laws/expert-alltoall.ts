/**
 * Bytes of one expert-parallel all-to-all phase on one rank (issue 13 item 3; DeepEP as SGLang 0.5.12 runs
 * it, the aiconfigurator-modern README "DeepEP"). The time of a phase is the collective law of
 * collective.ts over these bytes, with the `expert_alltoall_*` coefficients (src/fit/expert-a2a.ts).
 *
 * - low-latency (`ll`): one copy per (token, expert) selection; dispatch FP8 with per-128 scales and 16 B of
 *   index, H + H/128·4 + 16 bytes; combine BF16, H·2 bytes;
 * - normal: one copy per (token, destination rank); dispatch FP8 with per-128 scales, H + H/128·4; combine
 *   BF16, H·2; E[ranks touched] for uniform top-k routing.
 * Pure.
 */

/** DeepEP mode: SGLang's low-latency (decode) or normal (prefill, high-throughput) kernels. */
export type DeepepMode = 'll' | 'normal';
/** Every fitted all-to-all mode: DeepEP's two and `mnnvl`, TRT-LLM's NVLinkTwoSided all-to-all over a GB200 NVL72 rack. */
export type A2aMode = DeepepMode | 'mnnvl';
/** The two phases of one MoE layer's all-to-all. */
export type A2aPhase = 'dispatch' | 'combine';

/**
 * Expected distinct ranks one token's top-k experts land on, k drawn without replacement from `experts`
 * spread evenly over `ranks`: R · (1 − C(E − E/R, k) / C(E, k)). Uniform routing (the collector's
 * random top-k). @returns a count in [1, min(k, R)]
 */
export function expectedRanksTouched(experts: number, ranks: number, topk: number): number {
  const off = experts - experts / ranks;
  let miss = 1;
  for (let i = 0; i < topk; i++) miss *= Math.max(0, off - i) / (experts - i);
  return ranks * (1 - miss);
}

/**
 * Bytes one rank sends in one phase (module comment), bytes: low-latency sends one copy per (token, expert)
 * selection; normal mode one copy per (token, destination rank). `tokens` per rank, `hidden` elements.
 */
export function deepepMessageBytes(
  mode: DeepepMode,
  phase: A2aPhase,
  shape: { tokens: number; topk: number; hidden: number; experts: number; ranks: number },
): number {
  const copies =
    shape.tokens * (mode === 'll' ? shape.topk : expectedRanksTouched(shape.experts, shape.ranks, shape.topk));
  if (phase === 'combine') return copies * shape.hidden * 2;
  return copies * (shape.hidden + (shape.hidden / 128) * 4 + (mode === 'll' ? 16 : 0));
}

/**
 * Bytes one rank sends in one phase of TRT-LLM's NVLinkTwoSided (MNNVL) all-to-all, bytes: one copy per token
 * and remote destination among its top-k, T·(min(k, R) − 1) copies (the collector's formula: the dataset
 * README "Physical sanity checks"; one of the k selections is taken as local). Dispatch sends the payload
 * format's `dispatch_bytes_per_element` (bf16 2, fp8 1, nvfp4 0.5625 with its block scales), combine BF16.
 */
export function mnnvlMessageBytes(
  phase: A2aPhase,
  shape: { tokens: number; topk: number; hidden: number; ranks: number; dispatch_bytes_per_element: number },
): number {
  const copies = shape.tokens * Math.max(0, Math.min(shape.topk, shape.ranks) - 1);
  return copies * shape.hidden * (phase === 'combine' ? 2 : shape.dispatch_bytes_per_element);
}
