/**
 * Mixture-of-experts laws (seed "Experts"; reference §4.6).
 *
 * Their weights are read once each; their arithmetic and their reads are ADDED, not overlapped
 * (seed footnote 1: the sum fits NVIDIA's expert-GEMM measurements better on four chips). Pure.
 */

/**
 * Expected number of distinct experts (a count, dimensionless, in [0, local_experts]) that a batch
 * touches on one rank: L · (1 − ((E − k)/E)^T), each of T routed tokens picking k of the E experts
 * uniformly and the rank holding L of them (reference §4.6; seed "Experts").
 * @param tokens routed tokens T in the step (≤ 0 → 0)
 * @param experts experts E in the layer (≤ 0, or k ≥ E → every local expert)
 * @param top_k experts k each token picks
 * @param local_experts experts L resident on this rank (E / ep)
 * @returns expected distinct local experts touched, a count (not bytes, not a ratio)
 */
export function expertsTouched(tokens: number, experts: number, top_k: number, local_experts: number): number {
  if (tokens <= 0) return 0;
  if (top_k >= experts || experts <= 0) return local_experts;
  return local_experts * (1 - ((experts - top_k) / experts) ** tokens);
}
