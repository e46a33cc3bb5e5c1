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
import { ACC_LEN, composeHeadTimes, composeHost, composeLayerTimes, finishStepInto } from './compose.ts';
import { stepNotes, type NotesPlan } from './notes.ts';
import type { HeadPlan, KindPlan, PassPlan } from './plan.ts';
import {
  collectivesUs,
  decodeAttentionHbmUs,
  expertHbmUs,
  expertSmUs,
  gemmSmUs,
  LAY_BIG,
  LAY_EXPERT_HBM,
  LAY_EXPERT_SM,
  LAY_HBM,
  LAY_LEN,
  LAY_NIC,
  LAY_NVLINK,
  LAY_SM,
  prefillAttentionSmUs,
  recurrentSmUs,
  touchedExperts,
  weightsAndNormsHbmUs,
} from './terms.ts';
import type { Batch, ColumnBatch, PriceOptions, StepPrice, StepTermsSink } from './types.ts';
import { BatchWalk, walkBatch, walkColumns, type WalkPlan } from './walk.ts';

/** Everything `priceStep` reads, resolved at construction, and its preallocated scratch. */
export interface StepPlan {
  /** Graph modes (laws/host.ts `graphModeFor`) of a uniform-decode step and of any other step. */
  graphUniform: number;
  graphMixed: number;
  maxCaptureSize: number;
  /** Engine compute-efficiency multiplier on every SM time (validation's `s`). */
  smScale: number;
  target: PassPlan;
  /** The target's and the drafter's host time per step shape (`passHostTable`; the drafter's empty without one). */
  targetHost: Float64Array;
  drafterHost: Float64Array;
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
  /** One layer's sm, hbm, nvlink, nic, expert_sm, expert_hbm µs and its largest oversized message (terms.ts LAY_*). */
  readonly lay = new Float64Array(LAY_LEN);
  /** Largest out-of-table collective message of the step so far, bytes. */
  big = 0;
  /** Host µs of the step so far (target pass, then the drafter's). */
  host = 0;
  /** Prefill sequences of the pass being priced (recurrent mixers write one fresh state each). */
  preSeqs = 0;
  /**
   * The last touched-experts value and its inputs (tokens, experts, top-k, local experts): layer kinds
   * of one model share their routing, so one Math.pow serves them all (same inputs, same value).
   */
  readonly touchedKey = new Float64Array([-1, 0, 0, 0]);
  touchedVal = 0;
  /** Where this call's composition inputs go (PriceOptions.terms), if anywhere. */
  sink: StepTermsSink | undefined = undefined;
  readonly walk: BatchWalk;
  constructor(readers: number) {
    this.walk = new BatchWalk(readers);
  }
}

type PerKind = NonNullable<StepPrice['per_kind']>;

/**
 * One layer of a kind: its terms into scratch.lay (SM times scaled by smScale; terms.ts LAY_*), the
 * largest collective message beyond the fitted tables in lay[LAY_BIG] (0 = none).
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
): void {
  const sc = p.scratch;
  const lay = sc.lay;
  // The ramp's m is the step's token count on this rank (reference §4.3).
  gemmSmUs(kp, tok, lay);
  weightsAndNormsHbmUs(kp, tok, lay);
  // A term the kind lacks is not called (what it would add is 0, or it would write 0).
  if (kp.attn.length > 0) {
    if (anyDecode) decodeAttentionHbmUs(kp, dec, decTok, sc.walk.nReq - sc.walk.nPrefill, lay);
    if (anyPrefill) prefillAttentionSmUs(kp, pre, sc.walk, lay);
  }
  if (kp.rec.length > 0) recurrentSmUs(kp, decTok, sc.preSeqs, tok - decTok, lay);
  if (kp.colls.length > 0) collectivesUs(kp, tok, lay);
  else {
    lay[LAY_NVLINK] = 0;
    lay[LAY_NIC] = 0;
    lay[LAY_BIG] = 0;
  }
  lay[LAY_SM] = lay[LAY_SM]! * p.smScale;
  if (!kp.hasMoe) {
    lay[LAY_EXPERT_SM] = 0;
    lay[LAY_EXPERT_HBM] = 0;
    return;
  }
  const touched = touchedCached(sc, kp, tok);
  expertSmUs(kp, tok, touched, lay);
  lay[LAY_EXPERT_SM] = lay[LAY_EXPERT_SM]! * p.smScale;
  expertHbmUs(kp, tok, touched, lay);
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
    layerTimes(p, kp, tok, anyDecode, anyPrefill, dec, pre, decTok);
    if (lay[LAY_BIG]! > sc.big) sc.big = lay[LAY_BIG]!;
    composeLayerTimes(acc, kp.count, lay);
    if (sc.sink) sinkLayer(sc.sink, kp.count, lay);
    if (perKind) pushPerKind(perKind, prefix + kp.id, kp.count, lay);
  }
}

/** A kind's composition inputs to the call's sink (PriceOptions.terms), from its layer times. */
function sinkLayer(sink: StepTermsSink, count: number, lay: Float64Array): void {
  const sm = lay[LAY_SM]!;
  const hbm = lay[LAY_HBM]!;
  sink.layer(count, sm, hbm, lay[LAY_NVLINK]!, lay[LAY_NIC]!, lay[LAY_EXPERT_SM]!, lay[LAY_EXPERT_HBM]!);
}

/** One layer kind's breakdown (`per_kind`), from its layer times × count. */
function pushPerKind(perKind: PerKind, kind: string, c: number, lay: Float64Array): void {
  perKind.push({
    kind,
    count: c,
    resources_us: {
      sm: c * (lay[LAY_SM]! + lay[LAY_EXPERT_SM]!),
      hbm: c * (lay[LAY_HBM]! + lay[LAY_EXPERT_HBM]!),
      nvlink: c * lay[LAY_NVLINK]!,
      nic: c * lay[LAY_NIC]!,
      host: 0,
    },
    experts_us: c * (lay[LAY_EXPERT_SM]! + lay[LAY_EXPERT_HBM]!),
  });
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
  lay[LAY_HBM] = lay[LAY_HBM]! + (tok - rows) * h.k.eltUsPerToken;
  composeHeadTimes(acc, lay);
  p.scratch.sink?.head(lay[LAY_SM]!, lay[LAY_HBM]!);
  if (perKind) {
    const sm = lay[LAY_SM]!;
    const hbm = lay[LAY_HBM]!;
    perKind.push({ kind: label, count: 1, resources_us: { sm, hbm, nvlink: 0, nic: 0, host: 0 }, experts_us: 0 });
  }
}

/** Host time of one pass of `pass` with `kernels` kernels under graph mode `gm`, µs (seed "Host time"). */
function passHost(p: StepPlan, pass: PassPlan, gm: number, overCapture: boolean, kernels: number): number {
  const h = p.host;
  const eager = eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, kernels, pass.layers);
  return passHostUs(launchUs(gm, overCapture, h.replayUs, h.pieceUs, pass.pieces, eager), h.dispatchUs, kernels);
}

/** Slot of a `passHostTable` entry: a mixed step's graph mode, tokens past the capture size, a prefill row. */
function hostSlot(mixed: boolean, overCapture: boolean, prefill: boolean): number {
  return (mixed ? 4 : 0) + (overCapture ? 2 : 0) + (prefill ? 1 : 0);
}

/**
 * A pass's host time, µs, for each step shape (`hostSlot`): every input of the host law but these three is
 * the deployment's, so construction evaluates it once per shape (the same call, so the same value) and a
 * step reads one slot. `kernelsWith` / `kernelsDecode`: the pass's kernels (its head's included) with /
 * without prefill-only nodes. Needs the plan's graph modes, capture size and host coefficients.
 */
export function passHostTable(p: StepPlan, pass: PassPlan, kernelsWith: number, kernelsDecode: number): Float64Array {
  const t = new Float64Array(8);
  for (const mixed of [false, true])
    for (const over of [false, true])
      for (const pre of [false, true]) {
        const gm = mixed ? p.graphMixed : p.graphUniform;
        t[hostSlot(mixed, over, pre)] = passHost(p, pass, gm, over, pre ? kernelsWith : kernelsDecode);
      }
  return t;
}

/**
 * The drafter's passes (KNOWN DIVERGENCE 8, BLIS does not expand the speculator stack): each of
 * num_spec_tokens passes is priced (seed "Speculative decoding"), with the target's graph mode for its
 * decode. Pass 1 sees the target's batch; passes 2..k one new token per request, all rows decoding.
 * Their host time is added to scratch.host.
 */
function priceDrafter(p: StepPlan, drafter: PassPlan, mixed: boolean, perKind: PerKind | undefined): void {
  const w = p.scratch.walk;
  const anyPrefill = w.nPrefill > 0;
  const dh = p.drafterHead;
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
    p.scratch.host += p.drafterHost[hostSlot(first && mixed, tok > p.maxCaptureSize, first && anyPrefill)]!;
  }
}

/**
 * A parallel-block drafter (DSpark; seed "Host time"): one pass drafting num_spec_tokens tokens per request
 * (rows k wide, every row decoding). Its CUDA graphs are captured only when the target's decode mode is full,
 * with their own ceiling ⌊capture / k⌋ requests (laws/host.ts captureCeilingRequests); past it, or without a
 * graph, its kernels launch eagerly. A step with a prefill row first stores the drafter's extra context
 * eagerly: one eager launch per drafter mixer (its KV store), before the replay. Host time added to scratch.host.
 */
function priceDspark(p: StepPlan, drafter: PassPlan, perKind: PerKind | undefined): void {
  const sc = p.scratch;
  const w = sc.walk;
  const tok = w.nReq * p.specTokens;
  const dh = p.drafterHead;
  sc.preSeqs = 0;
  pricePass(p, drafter.decodeOnly, tok, true, false, w.allRead, w.preRead, tok, perKind, 'drafter:');
  if (dh) priceHead(p, dh, tok, tok, perKind, 'drafter:head');
  const graphed = p.graphUniform === GRAPH_FULL && w.nReq <= captureCeilingRequests(p.maxCaptureSize, p.specTokens);
  const kernels = drafter.kernelsDecodeOnly + (dh?.kernels ?? 0);
  const h = p.host;
  const launch = graphed
    ? launchUs(GRAPH_FULL, false, h.replayUs, h.pieceUs, drafter.pieces, 0)
    : launchUs(GRAPH_EAGER, false, 0, 0, 0, eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, kernels, drafter.layers));
  sc.host += passHostUs(launch, h.dispatchUs, kernels);
  const mixers = drafter.pieces - 1;
  if (w.nPrefill > 0) sc.host += eagerLaunchUs(h.eagerPerKernel, h.eagerPerLayer, mixers, mixers);
}

/**
 * Price one step: walk the batch once (walk.ts), then `priceWalked`. An empty batch prices as host only.
 * Writes the result into `out` and returns it; allocates only the per-kind list when asked, and a
 * notes array only when a memory or message note applies.
 */
export function priceStep(p: StepPlan, batch: Batch, popts: PriceOptions | undefined, out: StepPrice): StepPrice {
  walkBatch(p.walkPlan, batch, p.scratch.walk);
  return priceWalked(p, popts, out);
}

/** `priceStep` for a ColumnBatch (types.ts): the same walk over two typed-array columns, the same numbers. */
export function priceColumnsStep(
  p: StepPlan,
  batch: ColumnBatch,
  popts: PriceOptions | undefined,
  out: StepPrice,
): StepPrice {
  walkColumns(p.walkPlan, batch, p.scratch.walk);
  return priceWalked(p, popts, out);
}

/**
 * The walked step (scratch.walk): each distinct layer kind priced once (× its count), the head, the
 * drafter's passes and the host, composed (compose.ts) into `out`.
 */
function priceWalked(p: StepPlan, popts: PriceOptions | undefined, out: StepPrice): StepPrice {
  const sc = p.scratch;
  const w = sc.walk;
  const tok = w.tok;
  const anyPrefill = w.nPrefill > 0;
  const acc = sc.acc;
  for (let i = 0; i < ACC_LEN; i++) acc[i] = 0;
  sc.big = 0;
  sc.host = 0;
  sc.sink = popts?.terms;
  const perKind: PerKind | undefined = popts?.per_kind ? [] : undefined;
  const target = p.target;
  if (tok > 0) {
    sc.preSeqs = w.nPrefill;
    const kinds = anyPrefill ? target.withPrefill : target.decodeOnly;
    pricePass(p, kinds, tok, w.nReq > w.nPrefill, anyPrefill, w.decRead, w.preRead, w.decTok, perKind, '');
    priceHead(p, p.head, w.headRows, tok, perKind, 'head');
  }
  // A step with no prefill row skips prefill-only nodes (seed "Host time").
  sc.host += p.targetHost[hostSlot(!w.uniform, tok > p.maxCaptureSize, anyPrefill)]!;
  if (p.drafter && tok > 0) {
    if (p.dspark) priceDspark(p, p.drafter, perKind);
    else priceDrafter(p, p.drafter, !w.uniform, perKind);
  }
  composeHost(acc, sc.host);
  sc.sink?.host(sc.host);
  finishStepInto(acc, stepNotes(p.notes, tok, w.nReq, w.ctxSumAll, w.allRead, sc.big), out);
  if (perKind) out.per_kind = perKind;
  return out;
}
