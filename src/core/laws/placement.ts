/**
 * Where a collective runs and how much of it crosses the network (seed "Collectives"; reference §4.7).
 *
 * A group within one NVLink domain (a node, or a whole rack on a rack-scale system such as
 * GB200 NVL72) stays on NVLink. A group that spans domains is charged to the NIC, its message
 * scaled by a span: with r = NVLink rate / NIC rate, a transfer whose `cross` of `total` hops cross
 * the network takes 1 + (r − 1)·cross/total times as long as an all-NVLink one. Pure.
 */
import type { Chip } from '../catalog/chip.ts';

/**
 * GPUs in one NVLink domain (a count): `rack_gpus` on a rack-scale system whose whole rack is one
 * NVLink domain (GB200 NVL72: 72), else `gpus_per_node` (catalog/chips datasheet facts). The one
 * place the pricer decides the domain: both "does the group cross?" and its span use it.
 */
export function nvlinkDomainGpus(chip: Chip): number {
  return chip.rack_is_one_domain && chip.rack_gpus !== undefined ? chip.rack_gpus : chip.gpus_per_node;
}

/**
 * Message scale factor of a transfer with `cross` of `total` hops on the network (a ratio ≥ 1,
 * dimensionless): 1 + (ratio − 1)·cross/total; 1 when nothing crosses or the NIC is no slower.
 * @param ratio NVLink bytes per µs / NIC bytes per µs
 */
export function span(cross: number, total: number, ratio: number): number {
  if (cross <= 0 || total <= 0 || ratio <= 1) return 1;
  return 1 + ((ratio - 1) * cross) / total;
}

/**
 * Span of a ring collective (all-reduce, all-gather, reduce-scatter) over g ranks in NVLink domains of
 * d GPUs: a ratio ≥ 1 (dimensionless), exactly 1 when g ≤ d. With g a multiple of d the ring crosses
 * the network g/d − 1 times out of g − 1 hops, else every hop is charged as crossing.
 */
export function ringSpan(g: number, d: number, ratio: number): number {
  if (g <= d) return 1;
  if (g % d === 0) return span(g / d - 1, g - 1, ratio);
  return span(g - 1, g - 1, ratio);
}

/**
 * Span of an all-to-all over g ranks in NVLink domains of d GPUs: a ratio ≥ 1 (dimensionless),
 * exactly 1 when g ≤ d; every rank talks to the g − d ranks outside its domain out of g − 1 peers.
 */
export function all2allSpan(g: number, d: number, ratio: number): number {
  if (g <= d) return 1;
  return span(g - d, g - 1, ratio);
}
