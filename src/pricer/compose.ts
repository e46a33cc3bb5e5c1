/**
 * The one composition site (seed "Composing the step"; reference §4.8). Everything else only computes
 * terms; these functions turn per-layer resource times into the three estimates and the bottleneck.
 *
 *   Overlap   = Σ_ℓ ( max(T_SM, T_HBM, T_NVLink, T_NIC) + E ) + H + T_host
 *   CMOverlap = Σ_ℓ ( max(T_SM, T_HBM) + T_NVLink + T_NIC + E ) + H + T_host   (stepcal extension)
 *   NoOverlap = T_SM + T_HBM + T_NVLink + T_NIC + T_host   (each total includes experts and head)
 *
 * E is a layer's expert time, arithmetic PLUS reads (seed footnote 1); H the head, max of its
 * arithmetic and reads. CMOverlap ("compute–memory overlap") is not in the seed: a kernel streams its
 * weights while it computes, so SM and HBM overlap inside a layer, but vLLM's step runs the TP
 * collectives and the host serially (docs/pricer.md "Three estimates"). Overlap ≤ CMOverlap ≤
 * NoOverlap holds algebraically (max(a, b, c, d) ≤ max(a, b) + c + d ≤ a + b + c + d for
 * non-negative terms); it is also enforced against floating-point reordering, as reference §4.8 does.
 */
import type { Resource, StepPrice } from './types.ts';

/** Accumulator slots (a preallocated Float64Array of length ACC_LEN); only this module indexes it. */
const SM = 0;
const HBM = 1;
const NVLINK = 2;
const NIC = 3;
const HOST = 4;
const OVERLAP = 5;
const CM_OVERLAP = 6;
export const ACC_LEN = 7;

/**
 * Add `count` layers of one kind. Times per layer, µs: sm/hbm exclude the experts; expert_sm and
 * expert_hbm are the experts' arithmetic and reads.
 */
export function composeLayers(
  acc: Float64Array,
  count: number,
  sm: number,
  hbm: number,
  nvlink: number,
  nic: number,
  expert_sm: number,
  expert_hbm: number,
): void {
  const cm = sm > hbm ? sm : hbm;
  let stage = cm;
  if (nvlink > stage) stage = nvlink;
  if (nic > stage) stage = nic;
  const experts = expert_sm + expert_hbm;
  acc[OVERLAP]! += count * (stage + experts);
  acc[CM_OVERLAP]! += count * (cm + nvlink + nic + experts);
  acc[SM]! += count * (sm + expert_sm);
  acc[HBM]! += count * (hbm + expert_hbm);
  acc[NVLINK]! += count * nvlink;
  acc[NIC]! += count * nic;
}

/** Add the output head (once per pass): its arithmetic and reads, max of the two in Overlap and CMOverlap. */
export function composeHead(acc: Float64Array, sm: number, hbm: number): void {
  const m = sm > hbm ? sm : hbm;
  acc[OVERLAP]! += m;
  acc[CM_OVERLAP]! += m;
  acc[SM]! += sm;
  acc[HBM]! += hbm;
}

/** Add host time (additive in every estimate: a kernel cannot start before the CPU dispatched it). */
export function composeHost(acc: Float64Array, host: number): void {
  acc[OVERLAP]! += host;
  acc[CM_OVERLAP]! += host;
  acc[HOST]! += host;
}

/**
 * The resource with the largest total, µs in; ties go to the earlier of sm, hbm, nvlink, nic, host.
 * The one bottleneck rule (the pricer's finish and the engine-profile re-pricing). Allocates nothing.
 */
export function bottleneckOf(r: Readonly<Record<Resource, number>>): Resource {
  let bottleneck: Resource = 'sm';
  let top = r.sm;
  if (r.hbm > top) {
    top = r.hbm;
    bottleneck = 'hbm';
  }
  if (r.nvlink > top) {
    top = r.nvlink;
    bottleneck = 'nvlink';
  }
  if (r.nic > top) {
    top = r.nic;
    bottleneck = 'nic';
  }
  if (r.host > top) bottleneck = 'host';
  return bottleneck;
}

const NO_NOTES: readonly string[] = Object.freeze([]);

/** A StepPrice to fill (`finishStepInto`), fields in the order `price` has always returned them. */
export function emptyStepPrice(): StepPrice {
  return {
    overlap_us: 0,
    compute_memory_overlap_us: 0,
    no_overlap_us: 0,
    bottleneck: 'sm',
    resources_us: { sm: 0, hbm: 0, nvlink: 0, nic: 0, host: 0 },
    extrapolated: false,
    extrapolation_notes: NO_NOTES,
  };
}

/** `finishStepInto` a new StepPrice. */
export function finishStep(acc: Float64Array, notes: readonly string[]): StepPrice {
  return finishStepInto(acc, notes, emptyStepPrice());
}

/** CMOverlap of the step in `acc`, clamped to at most its NoOverlap `no` (also after rounding), µs. */
function clampedCm(acc: Float64Array, no: number): number {
  return acc[CM_OVERLAP]! < no ? acc[CM_OVERLAP]! : no;
}

/**
 * What `finishStepInto` would give as `compute_memory_overlap_us − resources_us.host` for the step in
 * `acc`, µs, without filling a StepPrice (validation re-composes ~10⁶ steps at trial engine scales s
 * and needs only this; src/pricer/terms-log.ts).
 */
export function cmOverlapNohostOf(acc: Float64Array): number {
  const host = acc[HOST]!;
  return clampedCm(acc, acc[SM]! + acc[HBM]! + acc[NVLINK]! + acc[NIC]! + host) - host;
}

/**
 * Finish into `out` (allocating nothing): the three estimates (clamped so Overlap ≤ CMOverlap ≤
 * NoOverlap also after rounding), the bottleneck (largest total; ties go to the earlier resource) and
 * the totals. `notes` are the extrapolation notes (empty = nothing priced outside a fitted domain).
 * Removes a `per_kind` left from an earlier use of `out` only when one is present.
 */
export function finishStepInto(acc: Float64Array, notes: readonly string[], out: StepPrice): StepPrice {
  const sm = acc[SM]!;
  const hbm = acc[HBM]!;
  const nvlink = acc[NVLINK]!;
  const nic = acc[NIC]!;
  const host = acc[HOST]!;
  const no = sm + hbm + nvlink + nic + host;
  const cm = clampedCm(acc, no);
  const ov = acc[OVERLAP]! < cm ? acc[OVERLAP]! : cm;
  out.overlap_us = ov;
  out.compute_memory_overlap_us = cm;
  out.no_overlap_us = no;
  const r = out.resources_us;
  r.sm = sm;
  r.hbm = hbm;
  r.nvlink = nvlink;
  r.nic = nic;
  r.host = host;
  out.bottleneck = bottleneckOf(r);
  out.extrapolated = notes.length > 0;
  out.extrapolation_notes = notes;
  if (out.per_kind !== undefined) delete out.per_kind;
  return out;
}
