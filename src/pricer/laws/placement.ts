/**
 * Where a collective runs and how much of it crosses the network (seed "Collectives"; reference §4.7).
 *
 * A group within one NVLink domain (a node, or a whole rack on a rack-scale system such as
 * GB200 NVL72) stays on NVLink. A group that spans domains is charged to the NIC, its message
 * scaled by a span: with r = NVLink rate / NIC rate, a transfer whose `cross` of `total` hops cross
 * the network takes 1 + (r − 1)·cross/total times as long as an all-NVLink one. Pure.
 */
export function span(cross: number, total: number, ratio: number): number {
  if (cross <= 0 || total <= 0 || ratio <= 1) return 1;
  return 1 + ((ratio - 1) * cross) / total;
}

/** Ring collectives (all-reduce, all-gather, reduce-scatter) over g ranks, domain size d. */
export function ringSpan(g: number, d: number, ratio: number): number {
  if (g <= d) return 1;
  if (g % d === 0) return span(g / d - 1, g - 1, ratio);
  return span(g - 1, g - 1, ratio);
}

/** All-to-all over g ranks, domain size d: every rank talks to the g − d ranks outside its domain. */
export function all2allSpan(g: number, d: number, ratio: number): number {
  if (g <= d) return 1;
  return span(g - d, g - 1, ratio);
}
