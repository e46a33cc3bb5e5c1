/**
 * The per-step resource terms of one layer kind (seed "One layer"; reference §4.3–4.7), each a named
 * function of the kind's folded constants (plan.ts) and the walked batch (walk.ts), each calling its
 * law in src/core/laws. Times in µs for ONE layer of the kind; composition is compose.ts's job.
 * Allocation-free: each term writes (or adds) its µs into a slot of the caller's layer array `lay` and
 * returns nothing, so a call V8 does not inline boxes no double (a returned non-integer double is a new
 * heap number per call: the 16-64 B per step `priceInto` allocated before, issue 17).
 */
import { decodeAttentionUs } from '../core/laws/attention.ts';
import { collectiveUs } from '../core/laws/collective.ts';
import { floorPlusUnits } from '../core/laws/floor-rate.ts';
import { rampUs } from '../core/laws/gemm.ts';
import { expertsTouched } from '../core/laws/moe.ts';
import { prefillFormUs } from '../core/laws/sparse.ts';
import type { KindPlan } from './plan.ts';
import type { BatchWalk } from './walk.ts';

/** Slots of a layer's times (`lay`, a Float64Array of LAY_LEN): µs per layer, and the largest oversized message. */
export const LAY_SM = 0;
export const LAY_HBM = 1;
export const LAY_NVLINK = 2;
export const LAY_NIC = 3;
export const LAY_EXPERT_SM = 4;
export const LAY_EXPERT_HBM = 5;
/** Largest collective message of the layer beyond the fitted tables, bytes (0 = none). */
export const LAY_BIG = 6;
export const LAY_LEN = 7;

/** Largest message in the NCCL tables the collective coefficients are fitted on (reference §1.5: 256 B–512 MiB). */
export const COLLECTIVE_MAX_FITTED_BYTES = 512 * 1024 * 1024;

/** Dense GEMMs on the SM into lay[LAY_SM]: Σ_groups rampUs(A, m, m_½), m = the step's tokens on this rank (reference §4.3). */
export function gemmSmUs(kp: KindPlan, m: number, lay: Float64Array): void {
  let sm = 0;
  for (let g = 0; g < kp.gemmA.length; g++) sm += rampUs(kp.gemmA[g]!, m, kp.gemmMh[g]!);
  lay[LAY_SM] = sm;
}

/**
 * HBM into lay[LAY_HBM]: the kind's non-expert weights once per step plus its norms per token (seed "Memory";
 * reference §4.4), and the measured mHC halves' floors (seed "Hyper-connections"; their bytes are in
 * eltUsPerToken at their rates).
 */
export function weightsAndNormsHbmUs(kp: KindPlan, tok: number, lay: Float64Array): void {
  lay[LAY_HBM] = kp.weightUs + kp.fixedHbmUs + tok * kp.eltUsPerToken;
}

/**
 * Decode attention on HBM, added to lay[LAY_HBM]: per attention node, the decode law of core/laws/attention.ts
 * (seed "Attention"; reference §4.5; issue 16) over the tokens read (its rate folded into tokens per µs
 * at plan time), with p = decode rows × the node's KV heads on this rank. `dec[r]`: Σ cached
 * tokens decode rows read through reader r; `decodeRows`: decode rows in the step; plus decode tokens ·
 * µs per decode token (the MSA module's per-request and projection terms, 0 elsewhere).
 */
export function decodeAttentionHbmUs(
  kp: KindPlan,
  dec: Float64Array,
  decTok: number,
  decodeRows: number,
  lay: Float64Array,
): void {
  let hbm = lay[LAY_HBM]!;
  for (let a = 0; a < kp.attn.length; a++) {
    const at = kp.attn[a]!;
    hbm += decodeAttentionUs(at.decLaw, decodeRows * at.decHeads, dec[at.reader]!) + decTok * at.decUsPerDecodeToken;
  }
  lay[LAY_HBM] = hbm;
}

/**
 * Prefill attention on the SM, added to lay[LAY_SM]: per attention node, floor + ramp-scaled pairs · µs per
 * pair (seed "Attention"; reference §4.5). `pre[r]`: Σ pairs · ε_max/ε(s) over prefill rows (walk.ts).
 * A node with the model's own measured prefill form (seed, second paragraph; core/laws/sparse.ts) is priced
 * with it instead: fixed + per_request · prefill rows + per_token · prefill tokens + pairs · entry bytes / rate.
 */
export function prefillAttentionSmUs(kp: KindPlan, pre: Float64Array, w: BatchWalk, lay: Float64Array): void {
  let sm = lay[LAY_SM]!;
  for (let a = 0; a < kp.attn.length; a++) {
    const at = kp.attn[a]!;
    sm +=
      at.form === undefined
        ? floorPlusUnits(at.preFloor, pre[at.reader]!, at.preUsPerPair)
        : prefillFormUs(at.form, w.nPrefill, w.prefillTokens(), w.preRaw[at.reader]! * at.formBytesPerPair);
  }
  lay[LAY_SM] = sm;
}

/**
 * Recurrent mixers on the SM, added to lay[LAY_SM] (seed "Recurrent mixers"; core/laws/recurrent.ts): decode floor +
 * decode tokens · µs per token; prefill floor + prefill sequences · µs per sequence + prefill tokens · µs per
 * token at the measured rate, or without one the chunked scan's arithmetic on the ramp (plan.ts RecPlan).
 */
export function recurrentSmUs(kp: KindPlan, decTok: number, preSeqs: number, preTok: number, lay: Float64Array): void {
  if (kp.rec.length === 0) return;
  let sm = lay[LAY_SM]!;
  for (let r = 0; r < kp.rec.length; r++) {
    const rc = kp.rec[r]!;
    if (decTok > 0) sm += floorPlusUnits(rc.decFloor, decTok, rc.decUsPerToken);
    if (preTok > 0)
      sm +=
        rc.preUsPerToken !== undefined
          ? rc.preFloor + floorPlusUnits(preSeqs * rc.preUsPerSeq, preTok, rc.preUsPerToken)
          : rampUs(rc.preA, preTok, rc.preMh);
  }
  lay[LAY_SM] = sm;
}

/**
 * The kind's collectives (seed "Collectives"; reference §4.7): t(b) per launch, every launch paying its
 * own floor, b = tok · bytes per token scaled by the group's span; into lay[LAY_NVLINK] NVLink µs,
 * lay[LAY_NIC] NIC µs and lay[LAY_BIG] the largest message beyond the fitted tables, bytes (0 = none).
 */
export function collectivesUs(kp: KindPlan, tok: number, lay: Float64Array): void {
  let nvl = 0;
  let nic = 0;
  let big = 0;
  for (let c = 0; c < kp.colls.length; c++) {
    const cp = kp.colls[c]!;
    const bytes = tok * cp.bytesPerToken;
    if (bytes > COLLECTIVE_MAX_FITTED_BYTES) big = bytes;
    const t = collectiveUs(bytes * cp.span, cp.t0, cp.rt, cp.rpeak);
    if (cp.nic) nic += t;
    else nvl += t;
  }
  lay[LAY_NVLINK] = nvl;
  lay[LAY_NIC] = nic;
  lay[LAY_BIG] = big;
}

/** Distinct local experts a step of `tok` tokens touches, L·(1 − ((E−k)/E)^tok) (core/laws/moe.ts); 0 without experts. */
export function touchedExperts(kp: KindPlan, tok: number): number {
  return kp.hasMoe ? expertsTouched(tok, kp.moeExperts, kp.moeTopK, kp.moeLocal) : 0;
}

/**
 * Routed experts on the SM into lay[LAY_EXPERT_SM], µs (0 without experts). With the fitted law (plan.ts expertLawPlan; core/laws/moe-experts.ts):
 * floor + P · arithmetic per pair + D · arithmetic per touched expert (the ramp's m_half term), with
 * P = m · k · L / E and D = `touched` (touchedExperts). Otherwise the folded dense ramp at m = step
 * tokens (seed "Experts"; reference §4.6).
 */
export function expertSmUs(kp: KindPlan, m: number, touched: number, lay: Float64Array): void {
  const law = kp.moeLaw;
  lay[LAY_EXPERT_SM] = !kp.hasMoe
    ? 0
    : law === undefined
      ? rampUs(kp.moeA, m, kp.moeMh)
      : law.floorUs + m * law.pairsPerToken * law.arithUsPerPair + touched * law.arithUsPerTouched;
}

/**
 * Routed experts on HBM into lay[LAY_EXPERT_HBM], µs (0 without experts): `touched` distinct local experts × one expert's weights (seed "Experts"),
 * plus, with the fitted law, the routed activations tok · k · H · 2 / route_rate (KNOWN DIVERGENCE 12).
 */
export function expertHbmUs(kp: KindPlan, tok: number, touched: number, lay: Float64Array): void {
  const law = kp.moeLaw;
  lay[LAY_EXPERT_HBM] = !kp.hasMoe
    ? 0
    : law === undefined
      ? touched * kp.moeUsPerExpert
      : touched * law.readUsPerTouched + tok * law.routeUsPerToken;
}
