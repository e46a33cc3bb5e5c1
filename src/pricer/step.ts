/**
 * Per-step pricing (seed "Composing the step"; reference §4.8): the one function that turns a batch
 * into a StepPrice, `priceStep`, and the passes it composes. The resource terms are terms.ts, the walk
 * walk.ts, the composition arithmetic compose.ts; nothing here reads a clock or does I/O, and the
 * scratch (accumulators, per-layer times, the walk) is preallocated in the plan.
 */
import {
  captureCeilingRequests,
  eagerLaunchUs,
  GRAPH_EAGER,
  GRAPH_FULL,
  launchUs,
  passHostUs,
} from '../core/laws/host.ts';
import type { HostCoefficients } from './coefficients.ts';
import { ACC_LEN, composeHead, composeHost, composeLayers, finishStepInto } from './compose.ts';
import { stepNotes, type NotesPlan } from './notes.ts';
import type { HeadPlan, KindPlan, PassPlan } from './plan.ts';
import {
  collectivesUs,
  decodeAttentionHbmUs,
  expertHbmUs,
  expertSmUs,
  gemmSmUs,
  prefillAttentionSmUs,
  recurrentSmUs,
  touchedExperts,
  weightsAndNormsHbmUs,
} from './terms.ts';
import type { Batch, PriceOptions, StepPrice } from './types.ts';
import { BatchWalk, walkBatch, type WalkPlan } from './walk.ts';

/** Everything `priceStep` reads, resolved at construction, and its preallocated scratch. */
export interface StepPlan {
  /** Graph modes (laws/host.ts `graphModeFor`) of a uniform-decode step and of any other step. */
  graphUniform: number;
  graphMixed: number;
  maxCaptureSize: number;
  /** Engine compute-efficiency multiplier on every SM time (validation's `s`). */
  smScale: number;
  target: PassPlan;
  head: HeadPlan;
  drafter: PassPlan | undefined;
  drafterHead: HeadPlan | undefined;
  specTokens: number;
  /** The drafter is a parallel-block drafter (DSpark, `speculator.method: dspark`): one pass, rows num_spec_tokens wide. */
  dspark: boolean;
  host: HostCoefficients;
  walkPlan: WalkPlan;
  notes: NotesPlan;
  scratch: StepScratch;
}

/** Preallocated per-call state of one pricer. */
export class StepScratch {
  readonly acc = new Float64Array(ACC_LEN);
  /** One layer's sm, hbm, nvlink, nic, expert_sm, expert_hbm, µs. */
  readonly lay = new Float64Array(6);
  /** collectivesUs' NVLink and NIC µs. */
  readonly coll = new Float64Array(2);
  /** Largest out-of-table collective message of the step so far, bytes. */
  big = 0;
  /** Prefill sequences of the pass being priced (recurrent mixers write one fresh state each). */
  preSeqs = 0;
  /**
   * The last touched-experts value and its inputs (tokens, experts, top-k, local experts): layer kinds
   * of one model share their routing, so one Math.pow serves them all (same inputs, same value).
   */
  readonly touchedKey = new Float64Array([-1, 0, 0, 0]);
  touchedVal = 0;
  readonly walk: BatchWalk;
  constructor(readers: number) {
    this.walk = new BatchWalk(readers);
  }
}

type PerKind = NonNullable<StepPrice['per_kind']>;

/**
 * One layer of a kind: its terms into scratch.lay (SM times scaled by smScale).
 * @returns the largest collective message beyond the fitted tables, bytes (0 = none)
 */
function layerTimes(
  p: StepPlan,
  kp: KindPlan,
  tok: number,
  anyDecode: boolean,
  anyPrefill: boolean,
  dec: Float64Array,
  pre: Float64Array,
  decTok: number,
): number {
  const sc = p.scratch;
  // The ramp's m is the step's token count on this rank (reference §4.3).
  let sm = gemmSmUs(kp, tok);
  let hbm = weightsAndNormsHbmUs(kp, tok);
  if (anyDecode) hbm = decodeAttentionHbmUs(kp, dec, hbm, decTok, sc.walk.nReq - sc.walk.nPrefill);
  if (anyPrefill) sm = prefillAttentionSmUs(kp, pre, sm, sc.walk);
  sm = recurrentSmUs(kp, decTok, sc.preSeqs, tok - decTok, sm);
  const big = collectivesUs(kp, tok, sc.coll);
  const lay = sc.lay;
  lay[0] = sm * p.smScale;
  lay[1] = hbm;
  lay[2] = sc.coll[0]!;
  lay[3] = sc.coll[1]!;
  const touched = touchedCached(sc, kp, tok);
  lay[4] = expertSmUs(kp, tok, touched) * p.smScale;
  lay[5] = expertHbmUs(kp, tok, touched);
  return big;
}

/** touchedExperts(kp, tok), reused from the scratch when the inputs equal the last call's (pure). */
function touchedCached(sc: StepScratch, kp: KindPlan, tok: number): number {
  if (!kp.hasMoe) return 0;
  const k = sc.touchedKey;
  if (k[0] === tok && k[1] === kp.moeExperts && k[2] === kp.moeTopK && k[3] === kp.moeLocal) return sc.touchedVal;
  k[0] = tok;
  k[1] = kp.moeExperts;
  k[2] = kp.moeTopK;
  k[3] = kp.moeLocal;
  sc.touchedVal = touchedExperts(kp, tok);
  return sc.touchedVal;
}

/** Price one pass of a stack over the walked batch into the accumulators (count layers per kind); tracks scratch.big. */
function pricePass(
  p: StepPlan,
  kinds: KindPlan[],
  tok: number,
  anyDecode: boolean,
  anyPrefill: boolean,
  dec: Float64Array,
  pre: Float64Array,
  decTok: number,
  perKind: PerKind | undefined,
  prefix: string,
): void {
  const sc = p.scratch;
  const { acc, lay } = sc;
  for (let i = 0; i < kinds.length; i++) {
    const kp = kinds[i]!;
    const big = layerTimes(p, kp, tok, anyDecode, anyPrefill, dec, pre, decTok);
    if (big > sc.big) sc.big = big;
    composeLayers(acc, kp.count, lay[0]!, lay[1]!, lay[2]!, lay[3]!, lay[4]!, lay[5]!);
    if (perKind) {
      const c = kp.count;
      perKind.push({
        kind: prefix + kp.id,
        count: c,
        resources_us: {
          sm: c * (lay[0]! + lay[4]!),
          hbm: c * (lay[1]! + lay[5]!),
          nvlink: c * lay[2]!,
          nic: c * lay[3]!,
          host: 0,
        },
        experts_us: c * (lay[4]! + lay[5]!),
      });
    }
  }
}

/**
 * The head once per pass. KNOWN DIVERGENCE 5 (reference §4.8): vLLM computes logits only for the rows
 * it samples (a decode row's scheduled tokens, one per prefill row); BLIS prices the head over every
 * token. The final norm still runs over all `tok` rows.
 */
function priceHead(
  p: StepPlan,
  h: HeadPlan,
  rows: number,
  tok: number,
  perKind: PerKind | undefined,
  label: string,
): void {
  const { walk, lay, acc } = p.scratch;
  layerTimes(p, h.k, rows, false, false, walk.decRead, walk.preRead, 0);
  const sm = lay[0]!;
  const hbm = lay[1]! + (tok - rows) * h.k.eltUsPerToken;
  composeHead(acc, sm, hbm);
  if (perKind)
    perKind.push({ kind: label, count: 1, resources_us: { sm, hbm, nvlink: 0, nic: 0, host: 0 }, experts_us: 0 });
}

/** Host time of one pass of `pass` with `kernels` kernels at `tok` tokens under graph mode `gm`, µs. */
function passHost(p: StepPlan, pass: PassPlan, gm: number, tok: number, kernels: number): number {
  const h = p.host;
  const eager = eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, kernels, pass.layers);
  return passHostUs(
    launchUs(gm, tok > p.maxCaptureSize, h.replayUs, h.pieceUs, pass.pieces, eager),
    h.dispatchUs,
    kernels,
  );
}

/**
 * The drafter's passes (KNOWN DIVERGENCE 8, BLIS does not expand the speculator stack): each of
 * num_spec_tokens passes is priced (seed "Speculative decoding"), with the target's graph mode for its
 * decode. Pass 1 sees the target's batch; passes 2..k one new token per request, all rows decoding.
 * @returns `host` plus the drafter passes' host time, µs
 */
function priceDrafter(p: StepPlan, drafter: PassPlan, gm: number, perKind: PerKind | undefined, host: number): number {
  const w = p.scratch.walk;
  const anyPrefill = w.nPrefill > 0;
  const dh = p.drafterHead;
  const dk = drafter.kernelsWithPrefill + (dh?.kernels ?? 0);
  const dkd = drafter.kernelsDecodeOnly + (dh?.kernels ?? 0);
  for (let j = 0; j < p.specTokens; j++) {
    const first = j === 0;
    const kinds = first && anyPrefill ? drafter.withPrefill : drafter.decodeOnly;
    const tok = first ? w.tok : w.nReq;
    p.scratch.preSeqs = first ? w.nPrefill : 0;
    pricePass(
      p,
      kinds,
      tok,
      first ? w.nReq > w.nPrefill : true,
      first && anyPrefill,
      first ? w.decRead : w.allRead,
      w.preRead,
      first ? w.decTok : w.nReq,
      perKind,
      'drafter:',
    );
    if (dh) priceHead(p, dh, first ? w.headRows : w.nReq, tok, perKind, 'drafter:head');
    host += passHost(p, drafter, first ? gm : p.graphUniform, tok, first && anyPrefill ? dk : dkd);
  }
  return host;
}

/**
 * A parallel-block drafter (DSpark; seed "Host time"): one pass drafting num_spec_tokens tokens per request
 * (rows k wide, every row decoding). Its CUDA graphs are captured only when the target's decode mode is full,
 * with their own ceiling ⌊capture / k⌋ requests (laws/host.ts captureCeilingRequests); past it, or without a
 * graph, its kernels launch eagerly. A step with a prefill row first stores the drafter's extra context
 * eagerly: one eager launch per drafter mixer (its KV store), before the replay.
 * @returns `host` plus the drafter's host time, µs
 */
function priceDspark(p: StepPlan, drafter: PassPlan, perKind: PerKind | undefined, host: number): number {
  const w = p.scratch.walk;
  const tok = w.nReq * p.specTokens;
  const dh = p.drafterHead;
  p.scratch.preSeqs = 0;
  pricePass(p, drafter.decodeOnly, tok, true, false, w.allRead, w.preRead, tok, perKind, 'drafter:');
  if (dh) priceHead(p, dh, tok, tok, perKind, 'drafter:head');
  const graphed = p.graphUniform === GRAPH_FULL && w.nReq <= captureCeilingRequests(p.maxCaptureSize, p.specTokens);
  const kernels = drafter.kernelsDecodeOnly + (dh?.kernels ?? 0);
  const h = p.host;
  const launch = graphed
    ? launchUs(GRAPH_FULL, false, h.replayUs, h.pieceUs, drafter.pieces, 0)
    : launchUs(GRAPH_EAGER, false, 0, 0, 0, eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, kernels, drafter.layers));
  host += passHostUs(launch, h.dispatchUs, kernels);
  const mixers = drafter.pieces - 1;
  if (w.nPrefill > 0) host += eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, mixers, mixers);
  return host;
}

/**
 * Price one step: walk the batch once, price each distinct layer kind once (× its count), the head,
 * the drafter's passes and the host, and compose (compose.ts). An empty batch prices as host only.
 * Writes the result into `out` and returns it; allocates only the per-kind list when asked, and a
 * notes array only when a memory or message note applies.
 */
export function priceStep(p: StepPlan, batch: Batch, popts: PriceOptions | undefined, out: StepPrice): StepPrice {
  const sc = p.scratch;
  const w = sc.walk;
  walkBatch(p.walkPlan, batch, w);
  const tok = w.tok;
  const anyPrefill = w.nPrefill > 0;
  const anyDecode = w.nReq > w.nPrefill;
  const acc = sc.acc;
  for (let i = 0; i < ACC_LEN; i++) acc[i] = 0;
  sc.big = 0;
  const perKind: PerKind | undefined = popts?.per_kind ? [] : undefined;
  const gm = w.uniform ? p.graphUniform : p.graphMixed;
  const target = p.target;
  // A step with no prefill row skips prefill-only nodes (seed "Host time").
  const kernels = (anyPrefill ? target.kernelsWithPrefill : target.kernelsDecodeOnly) + p.head.kernels;
  if (tok > 0) {
    sc.preSeqs = w.nPrefill;
    pricePass(
      p,
      anyPrefill ? target.withPrefill : target.decodeOnly,
      tok,
      anyDecode,
      anyPrefill,
      w.decRead,
      w.preRead,
      w.decTok,
      perKind,
      '',
    );
    priceHead(p, p.head, w.headRows, tok, perKind, 'head');
  }
  let host = passHost(p, target, gm, tok, kernels);
  if (p.drafter && tok > 0)
    host = p.dspark ? priceDspark(p, p.drafter, perKind, host) : priceDrafter(p, p.drafter, gm, perKind, host);
  composeHost(acc, host);
  finishStepInto(acc, stepNotes(p.notes, tok, w.nReq, w.ctxSumAll, w.allRead, sc.big), out);
  if (perKind) out.per_kind = perKind;
  return out;
}
