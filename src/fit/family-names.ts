/**
 * The fitting families' names, in a module of their own that imports nothing, so that a command that only
 * needs the names (`registry update --only`) does not load the fitters (start-up: docs/performance.md).
 */

/** Fitting families in dependency order (the order of a run's results and coefficients). */
export const FIT_FAMILIES = [
  'gemm',
  'hbm',
  'attention_decode',
  'attention_prefill',
  'sparse',
  'mla',
  'collective',
  'expert_alltoall',
  'moe',
  'moe_experts',
  'recurrent',
  'host',
] as const;
export type FitFamily = (typeof FIT_FAMILIES)[number];
