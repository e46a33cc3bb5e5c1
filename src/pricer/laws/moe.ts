/**
 * Mixture-of-experts laws (seed "Experts"; reference §4.6).
 *
 * Expected distinct experts a batch of T routed tokens touches on one rank holding L of E experts,
 * each token picking k of them uniformly:  L · (1 − ((E − k)/E)^T)  (L when k ≥ E).
 * Their weights are read once each; their arithmetic and their reads are ADDED, not overlapped
 * (seed footnote 1: the sum fits NVIDIA's expert-GEMM measurements better on four chips). Pure.
 */
export function expertsTouched(tokens: number, experts: number, top_k: number, local_experts: number): number {
  if (tokens <= 0) return 0;
  if (top_k >= experts || experts <= 0) return local_experts;
  return local_experts * (1 - Math.pow((experts - top_k) / experts, tokens));
}
