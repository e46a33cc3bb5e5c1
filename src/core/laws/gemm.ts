/**
 * GEMM efficiency ramp (seed "One layer / Arithmetic"; reference §4.3).
 *
 *   ε(m) = ε_max · m / (m + m_½)            fraction of peak a matrix multiply reaches at m tokens
 *   f(x) = x / (x + x_½)                     width (n) and depth (k) factors, where the registry has them
 *   t    = FLOPs / (peak · ε(m) · f(n) · f(k))   µs, with peak in FLOPs per µs
 *
 * With m the step's token count and FLOPs = m · flops_per_token, t = flops_per_token · (m + m_½) /
 * (peak · ε_max · f(n) · f(k)): the pricer folds everything but (m + m_½) into one constant at
 * construction. Pure.
 */

/** ε(m): 0 for m ≤ 0; ε_max when m_½ ≤ 0. */
export function gemmEfficiency(m: number, eps_max: number, m_half: number): number {
  if (m <= 0) return 0;
  if (m_half <= 0) return eps_max;
  return (eps_max * m) / (m + m_half);
}

/** Shape factor x/(x + x_½) for a GEMM's width n or depth k; 1 when no half-point is known. */
export function shapeFactor(x: number, x_half: number | undefined): number {
  if (x_half === undefined || x_half <= 0) return 1;
  return x / (x + x_half);
}

/**
 * Smallest m (tokens) at which a GEMM of this format is compute-bound: its weight read at the
 * datasheet HBM rate takes no longer than its arithmetic at peak, n·k·bytes / HBM ≤ 2·m·n·k / peak,
 * so m ≥ peak · bytes_per_element / (2 · HBM). The registry's GEMM ramps are fitted on rows above this
 * ridge (the fitter's `memoryBoundThresholdM`, src/fit/gemm.ts, is the same rule; a test checks they
 * agree), so a step with fewer tokens prices the ramp below the m range it was fitted on.
 * @param peak_flops_per_us dense peak of the format, FLOPs per µs (datasheet)
 * @param bytes_per_element weight bytes per element of the format (bf16 2, fp8 1, nvfp4 0.5)
 * @param hbm_bytes_per_us datasheet HBM bandwidth, bytes per µs (no derate)
 * @returns m in tokens (a count, may be fractional)
 */
export function computeBoundMinM(
  peak_flops_per_us: number,
  bytes_per_element: number,
  hbm_bytes_per_us: number,
): number {
  return (peak_flops_per_us * bytes_per_element) / (2 * hbm_bytes_per_us);
}

/** The ramp's coefficients for one compute format (registry `gemm_*_<dtype>` entries). */
export interface RampCoefficients {
  /** Asymptotic fraction of the dense peak (dimensionless). */
  eps_max: number;
  /** Tokens (m) at which half of eps_max is reached. */
  m_half: number;
  /** Width (n, elements) at which the width factor is ½; undefined → factor 1. */
  n_half?: number;
  /** Depth (k, elements) at which the depth factor is ½; undefined → factor 1. */
  k_half?: number;
}

/**
 * ε(m) · f(n) · f(k): the fraction of the dense peak a GEMM of shape m×n×k reaches (dimensionless).
 * Reference §4.3; the fitters' shape ramp and the pricer's per-GEMM efficiency are this function.
 */
export function shapeEfficiency(m: number, n: number, k: number, c: RampCoefficients): number {
  return gemmEfficiency(m, c.eps_max, c.m_half) * shapeFactor(n, c.n_half) * shapeFactor(k, c.k_half);
}

/**
 * Achieved fraction of peak of one measured GEMM: 2·m·n·k FLOPs / (latency_us · peak FLOPs per µs).
 * The inverse of t = FLOPs / (peak · ε); used to turn a timing into an efficiency point.
 */
export function achievedEfficiency(
  m: number,
  n: number,
  k: number,
  latency_us: number,
  peak_flops_per_us: number,
): number {
  return (2 * m * n * k) / (latency_us * peak_flops_per_us);
}

/**
 * The ramp folded for a pricer: the µs per token of a GEMM (or a group of GEMMs on one ramp) at ε_max,
 * flops_per_token / (peak · ε_max · shape). With it, t(m) = `rampUs(a, m, m_half)`; this is the fold
 * the module comment describes (reference §4.3).
 * @param flops_per_token FLOPs per token of the GEMM on this rank
 * @param peak_flops_per_us dense peak of its compute format, FLOPs per µs
 * @param eps_max asymptotic fraction of peak (dimensionless)
 * @param shape f(n)·f(k) (`shapeFactor`), or another dimensionless factor on the rate; default 1
 * @returns µs per token at ε_max
 */
export function rampUsPerToken(flops_per_token: number, peak_flops_per_us: number, eps_max: number, shape = 1): number {
  return flops_per_token / (peak_flops_per_us * eps_max * shape);
}

/**
 * GEMM time at m tokens from its folded constant, µs: a · (m + m_½) = m · flops_per_token /
 * (peak · ε(m) · shape) for m > 0 (equal up to rounding; test/pricer/laws.test.ts checks it). Linear in
 * a, so GEMMs on one ramp may be folded into one a by summing their constants.
 * @param a_us_per_token `rampUsPerToken` (or a sum of them on one ramp)
 * @param m tokens in the step on this rank
 * @param m_half the ramp's half point, tokens
 */
export function rampUs(a_us_per_token: number, m: number, m_half: number): number {
  return a_us_per_token * (m + m_half);
}

/**
 * ε_max / ε(m) = (m + m_½) / m: how many times slower than ε_max the ramp runs at m tokens (m > 0),
 * dimensionless. Used to scale work priced at ε_max (prefill attention pairs) to a row's own ramp.
 */
export function rampSlowdown(m: number, m_half: number): number {
  return (m + m_half) / m;
}
