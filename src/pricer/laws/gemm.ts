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

/** Time of `flops` at `peak_flops_per_us` and efficiency `eff`, µs (0 when there is no work). */
export function arithmeticUs(flops: number, peak_flops_per_us: number, eff: number): number {
  if (!(flops > 0)) return 0;
  return flops / (peak_flops_per_us * eff);
}
