/**
 * Collective cost law (reference §4.7; fit procedure §6.3).
 *
 *   t(b) = max(t0 + b / r_t, b / r_peak)        three-parameter law (floor, transition, peak)
 *   t(b) = max(t0, b / r_peak)                   when no transition rate is known (BLIS's fallback)
 *
 * `b` is the message size in bytes following the nccl-tests convention (per-rank buffer for
 * all_reduce; whole buffer across ranks for all_gather, reduce_scatter and alltoall). A group of one
 * rank moves nothing and costs exactly 0. A non-positive message still pays the floor (a launch
 * happens), as in BLIS's kernel. Pure: no I/O.
 */

/** Coefficients of one (op, dtype, ranks, backend) curve. Units: µs and bytes per µs. */
export interface CollectiveCoefficients {
  /** Size-independent floor, µs per transfer. */
  t0_us: number;
  /** Transition (small-to-medium message) rate, bytes per µs; undefined → two-parameter law. */
  r_t_bytes_per_us?: number;
  /** Asymptotic (large-message) rate, bytes per µs. */
  r_peak_bytes_per_us: number;
}

/**
 * Time of one collective call, µs.
 * @param message_bytes message size in bytes (nccl-tests convention)
 * @param c floor and rates
 * @param ranks group width; a 1-rank group costs exactly 0 (default: a multi-rank group)
 */
export function collectiveTime(message_bytes: number, c: CollectiveCoefficients, ranks = 2): number {
  if (ranks <= 1) return 0;
  return collectiveUs(message_bytes, c.t0_us, c.r_t_bytes_per_us, c.r_peak_bytes_per_us);
}

/**
 * The same law with its coefficients as plain numbers (the pricer's hot path keeps them in flat
 * arrays), µs, for a multi-rank group: max(t0 + b/r_t, b/r_peak), or max(t0, b/r_peak) when r_t is
 * undefined; a non-positive message pays the floor.
 * @param message_bytes message size, bytes (nccl-tests convention)
 * @param t0_us floor, µs per transfer
 * @param r_t_bytes_per_us transition rate, bytes per µs, or undefined
 * @param r_peak_bytes_per_us peak rate, bytes per µs
 */
export function collectiveUs(
  message_bytes: number,
  t0_us: number,
  r_t_bytes_per_us: number | undefined,
  r_peak_bytes_per_us: number,
): number {
  if (!(message_bytes > 0)) return t0_us;
  const peak = message_bytes / r_peak_bytes_per_us;
  if (r_t_bytes_per_us === undefined) return Math.max(t0_us, peak);
  return Math.max(t0_us + message_bytes / r_t_bytes_per_us, peak);
}
