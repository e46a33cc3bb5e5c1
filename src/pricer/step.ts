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
import { UserError } from '../core/errors.ts';
import type { HostCoefficients } from './coefficients.ts';
import { ACC_LEN, composeHost, finishStepInto } from './compose.ts';
import { stepNotes, type NotesPlan } from './notes.ts';
import type { HeadPlan, KindPlan, PassPlan } from './plan.ts';
import {
  IN_ALL_TOK,
  IN_ANY_DECODE,
  IN_BIG,
  IN_DEC_MAX,
  IN_DEC_ROWS,
  IN_DEC_TOK,
  IN_LEN,
  IN_N_PREFILL,
  IN_PRE_SEQS,
  IN_PRE_TOK,
  IN_TOK,
  type KindFn,
} from './terms.ts';
import { LAY_EXPERT_HBM, LAY_EXPERT_SM, LAY_HBM, LAY_LEN, LAY_NIC, LAY_NVLINK, LAY_SM } from './terms.ts';
import type { Batch, ColumnBatch, PriceOptions, StepPrice, StepTermsSink } from './types.ts';
import type { LiveBatch } from './live.ts';
import { BatchWalk, walkBatch, walkColumns, type WalkPlan } from './walk.ts';

/** Everything `priceStep` reads, resolved at construction, and its preallocated scratch. */
export interface StepPlan {
  /** Graph modes (laws/host.ts `graphModeFor`) of a uniform-decode step and of any other step. */
  graphUniform: number;
  graphMixed: number;
  maxCaptureSize: number;
  target: PassPlan;
  /** The target's and the drafter's host time per step shape (`passHostTable`; the drafter's empty without one). */
  targetHost: Float64Array;
  drafterHost: Float64Array;
  head: HeadPlan;
  drafter: PassPlan | undefined;
  drafterHead: HeadPlan | undefined;
  /** The passes' kinds and heads compiled (compile.ts), the engine's s folded in. */
  code: StepCode;
  specTokens: number;
  /** The drafter is a parallel-block drafter (DSpark, `speculator.method: dspark`): one pass, rows num_spec_tokens wide. */
  dspark: boolean;
  host: HostCoefficients;
  walkPlan: WalkPlan;
  /** A kind prices decode in waves (plan.ts WavePlan): each call finds the longest decode row (inp[IN_DEC_MAX]). */
  needsDecodeMax: boolean;
  notes: NotesPlan;
  scratch: StepScratch;
}

/** One pass's kinds compiled, in the PassPlan's order: with prefill-only nodes, and without. */
export interface PassCode {
  withPrefill: KindFn[];
  decodeOnly: KindFn[];
}

/** The compiled target and drafter passes and their heads (the drafter's when it has one). */
export interface StepCode {
  target: PassCode;
  head: KindFn;
  drafter: PassCode | undefined;
  drafterHead: KindFn | undefined;
}

/** Preallocated per-call state of one pricer. */
export class StepScratch {
  readonly acc = new Float64Array(ACC_LEN);
  /** The step inputs the compiled kinds read (compile.ts IN_*), and the largest oversized message of the step (IN_BIG). */
  readonly inp = new Float64Array(IN_LEN);
  /** Each kind of the pass being priced: one layer's sm, hbm, nvlink, nic, expert_sm, expert_hbm µs (terms.ts LAY_*, at kind · LAY_LEN). */
  readonly lays: Float64Array;
  /**
   * The last touched-experts value and its inputs: tokens, experts, top-k, local experts, value. Layer
   * kinds of one model share their routing, so one Math.pow serves them all (same inputs, same value).
   */
  readonly touched = new Float64Array([-1, 0, 0, 0, 0]);
  /** Host µs of the step so far (target pass, then the drafter's). */
  host = 0;
  /** Prefill sequences of the pass being priced (recurrent mixers write one fresh state each). */
  preSeqs = 0;
  /** Where this call's composition inputs go (PriceOptions.terms), if anywhere. */
  sink: StepTermsSink | undefined = undefined;
  readonly walk: BatchWalk;
  /** @param readers distinct readers of the plan; @param kinds the most kinds of any pass (the head counts as one) */
  constructor(readers: number, kinds: number) {
    this.walk = new BatchWalk(readers);
    this.lays = new Float64Array(Math.max(1, kinds) * LAY_LEN);
  }
}

type PerKind = NonNullable<StepPrice['per_kind']>;

/**
 * Price one pass of a stack over the walked batch: each compiled kind adds its layers (× count) into the
 * accumulators and tracks the largest oversized message (inp[IN_BIG]); then the terms log and the
 * per-kind breakdown, when asked, read each kind's layer times. `fns` and `kinds` are one variant, in order.
 */
function pricePass(
  p: StepPlan,
  fns: readonly KindFn[],
  kinds: readonly KindPlan[],
  tok: number,
  anyDecode: boolean,
  dec: Float64Array,
  decTok: number,
  perKind: PerKind | undefined,
  prefix: string,
): void {
  const sc = p.scratch;
  const { acc, lays, inp, walk: w } = sc;
  inp[IN_TOK] = tok;
  inp[IN_DEC_TOK] = decTok;
  inp[IN_DEC_ROWS] = w.nReq - w.nPrefill;
  inp[IN_N_PREFILL] = w.nPrefill;
  inp[IN_PRE_TOK] = w.prefillTokens();
  inp[IN_PRE_SEQS] = sc.preSeqs;
  inp[IN_ANY_DECODE] = anyDecode ? 1 : 0;
  for (let i = 0; i < fns.length; i++) fns[i]!(inp, dec, w.preRead, w.preRaw, acc, lays);
  const sink = sc.sink;
  if (sink) for (let i = 0; i < kinds.length; i++) sinkLayer(sink, kinds[i]!.count, lays, i * LAY_LEN);
  if (perKind)
    for (let i = 0; i < kinds.length; i++)
      pushPerKind(perKind, prefix + kinds[i]!.id, kinds[i]!.count, lays, i * LAY_LEN);
}

/** A kind's composition inputs to the call's sink (PriceOptions.terms), from its layer times at `o`. */
function sinkLayer(sink: StepTermsSink, count: number, lays: Float64Array, o: number): void {
  const sm = lays[o + LAY_SM]!;
  const hbm = lays[o + LAY_HBM]!;
  sink.layer(
    count,
    sm,
    hbm,
    lays[o + LAY_NVLINK]!,
    lays[o + LAY_NIC]!,
    lays[o + LAY_EXPERT_SM]!,
    lays[o + LAY_EXPERT_HBM]!,
  );
}

/** One layer kind's breakdown (`per_kind`), from its layer times at `o` × count. */
function pushPerKind(perKind: PerKind, kind: string, c: number, lays: Float64Array, o: number): void {
  const esm = lays[o + LAY_EXPERT_SM]!;
  const ehbm = lays[o + LAY_EXPERT_HBM]!;
  perKind.push({
    kind,
    count: c,
    resources_us: {
      sm: c * (lays[o + LAY_SM]! + esm),
      hbm: c * (lays[o + LAY_HBM]! + ehbm),
      nvlink: c * lays[o + LAY_NVLINK]!,
      nic: c * lays[o + LAY_NIC]!,
      host: 0,
    },
    experts_us: c * (esm + ehbm),
  });
}

/**
 * The head once per pass (its compiled kind: `rows` sampled rows on the ramp, the final norm over all
 * `tok` tokens; compile.ts). KNOWN DIVERGENCE 5 (reference §4.8): vLLM computes logits only for the rows
 * it samples (a decode row's scheduled tokens, one per prefill row); BLIS prices the head over every
 * token. The final norm still runs over all `tok` rows.
 */
function priceHead(
  p: StepPlan,
  fn: KindFn,
  rows: number,
  tok: number,
  perKind: PerKind | undefined,
  label: string,
): void {
  const { walk, lays, acc, inp } = p.scratch;
  inp[IN_TOK] = rows;
  inp[IN_ALL_TOK] = tok;
  inp[IN_DEC_TOK] = 0;
  inp[IN_PRE_SEQS] = p.scratch.preSeqs;
  fn(inp, walk.decRead, walk.preRead, walk.preRaw, acc, lays);
  p.scratch.sink?.head(lays[LAY_SM]!, lays[LAY_HBM]!);
  if (perKind) {
    const sm = lays[LAY_SM]!;
    const hbm = lays[LAY_HBM]!;
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
  const code = p.code.drafter!;
  const dh = p.code.drafterHead;
  for (let j = 0; j < p.specTokens; j++) {
    const first = j === 0;
    const pre = first && anyPrefill;
    const tok = first ? w.tok : w.nReq;
    p.scratch.preSeqs = first ? w.nPrefill : 0;
    pricePass(
      p,
      pre ? code.withPrefill : code.decodeOnly,
      pre ? drafter.withPrefill : drafter.decodeOnly,
      tok,
      first ? w.nReq > w.nPrefill : true,
      first ? w.decRead : w.allRead,
      first ? w.decTok : w.nReq,
      perKind,
      'drafter:',
    );
    if (dh) priceHead(p, dh, first ? w.headRows : w.nReq, tok, perKind, 'drafter:head');
    p.scratch.host += p.drafterHost[hostSlot(first && mixed, tok > p.maxCaptureSize, pre)]!;
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
  pricePass(p, p.code.drafter!.decodeOnly, drafter.decodeOnly, tok, true, w.allRead, tok, perKind, 'drafter:');
  if (p.code.drafterHead) priceHead(p, p.code.drafterHead, tok, tok, perKind, 'drafter:head');
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
  if (p.needsDecodeMax) p.scratch.inp[IN_DEC_MAX] = longestDecode(p.walkPlan.threshold, batch);
  return plainCall(p, popts) ? pricePlain(p, out) : priceWalked(p, popts, out);
}

/** `priceStep` for a ColumnBatch (types.ts): the same walk over two typed-array columns, the same numbers. */
export function priceColumnsStep(
  p: StepPlan,
  batch: ColumnBatch,
  popts: PriceOptions | undefined,
  out: StepPrice,
): StepPrice {
  walkColumns(p.walkPlan, batch, p.scratch.walk);
  if (p.needsDecodeMax) p.scratch.inp[IN_DEC_MAX] = longestDecodeColumn(p.walkPlan.threshold, batch);
  return plainCall(p, popts) ? pricePlain(p, out) : priceWalked(p, popts, out);
}

/**
 * `priceStep` for a live batch (live.ts): its kept row sums walked with no pass over its decode rows
 * (walk.ts walkRowSums), the same numbers as the Batch of its rows (LiveBatch.batch()).
 * @throws UserError when the live batch was made by another pricer (its walk plan differs)
 */
export function priceLiveStep(
  p: StepPlan,
  live: LiveBatch,
  popts: PriceOptions | undefined,
  out: StepPrice,
): StepPrice {
  if (live.plan !== p.walkPlan) throw new UserError('priceLiveInto: this LiveBatch was made by another pricer');
  live.walkInto(p.scratch.walk);
  if (p.needsDecodeMax) p.scratch.inp[IN_DEC_MAX] = live.longestDecode();
  return plainCall(p, popts) ? pricePlain(p, out) : priceWalked(p, popts, out);
}

/** The longest decode row's context after the step (computed + scheduled over rows with 0 < scheduled ≤ threshold); 0 with none. */
function longestDecode(threshold: number, batch: Batch): number {
  let hi = 0;
  for (const q of batch.requests) {
    const s = q.scheduled_tokens;
    if (s > 0 && s <= threshold && q.computed_tokens + s > hi) hi = q.computed_tokens + s;
  }
  return hi;
}

/** `longestDecode` over a ColumnBatch. */
function longestDecodeColumn(threshold: number, batch: ColumnBatch): number {
  let hi = 0;
  for (let i = 0; i < batch.n; i++) {
    const s = batch.scheduled[i]!;
    const x = batch.computed[i]! + s;
    if (s > 0 && s <= threshold && x > hi) hi = x;
  }
  return hi;
}

/**
 * A call `pricePlain` prices: no drafter, no per-kind breakdown, no terms sink, at least one token (the
 * calls of the pricer benches, serve and the CLI's plain `price`).
 */
function plainCall(p: StepPlan, popts: PriceOptions | undefined): boolean {
  return (
    p.drafter === undefined && p.scratch.walk.tok > 0 && (popts === undefined || (!popts.per_kind && !popts.terms))
  );
}

/**
 * `priceWalked` for a `plainCall` (issue 17, the fixed cost of a call): the target pass's kinds, its head,
 * its host and the finish, with the drafter, sink and per-kind branches and the calls of `pricePass` and
 * `priceHead` left out. The same inputs into `inp`, the same compiled kinds in the same order, the same
 * host slot and the same composition, so the same numbers bit for bit (test/pricer/golden-prices.test.ts;
 * docs/performance.md "Session 10").
 */
function pricePlain(p: StepPlan, out: StepPrice): StepPrice {
  const sc = p.scratch;
  const { acc, inp, lays, walk: w } = sc;
  const tok = w.tok;
  const nPrefill = w.nPrefill;
  const anyPrefill = nPrefill > 0;
  for (let i = 0; i < ACC_LEN; i++) acc[i] = 0;
  sc.sink = undefined;
  sc.preSeqs = nPrefill;
  inp[IN_BIG] = 0;
  inp[IN_TOK] = tok;
  inp[IN_DEC_TOK] = w.decTok;
  inp[IN_DEC_ROWS] = w.nReq - nPrefill;
  inp[IN_N_PREFILL] = nPrefill;
  inp[IN_PRE_TOK] = w.prefillTokens();
  inp[IN_PRE_SEQS] = nPrefill;
  inp[IN_ANY_DECODE] = w.nReq > nPrefill ? 1 : 0;
  const code = p.code.target;
  const fns = anyPrefill ? code.withPrefill : code.decodeOnly;
  for (let i = 0; i < fns.length; i++) fns[i]!(inp, w.decRead, w.preRead, w.preRaw, acc, lays);
  inp[IN_TOK] = w.headRows;
  inp[IN_ALL_TOK] = tok;
  inp[IN_DEC_TOK] = 0;
  p.code.head(inp, w.decRead, w.preRead, w.preRaw, acc, lays);
  sc.host = 0;
  sc.host += p.targetHost[hostSlot(!w.uniform, tok > p.maxCaptureSize, anyPrefill)]!;
  composeHost(acc, sc.host);
  return finishStepInto(acc, stepNotes(p.notes, tok, w.nReq, w.ctxSumAll, w.allRead, inp[IN_BIG]!), out);
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
  sc.inp[IN_BIG] = 0;
  sc.host = 0;
  sc.sink = popts?.terms;
  const perKind: PerKind | undefined = popts?.per_kind ? [] : undefined;
  const target = p.target;
  if (tok > 0) {
    sc.preSeqs = w.nPrefill;
    const code = p.code.target;
    const fns = anyPrefill ? code.withPrefill : code.decodeOnly;
    const kinds = anyPrefill ? target.withPrefill : target.decodeOnly;
    pricePass(p, fns, kinds, tok, w.nReq > w.nPrefill, w.decRead, w.decTok, perKind, '');
    priceHead(p, p.code.head, w.headRows, tok, perKind, 'head');
  }
  // A step with no prefill row skips prefill-only nodes (seed "Host time").
  sc.host += p.targetHost[hostSlot(!w.uniform, tok > p.maxCaptureSize, anyPrefill)]!;
  if (p.drafter && tok > 0) {
    if (p.dspark) priceDspark(p, p.drafter, perKind);
    else priceDrafter(p, p.drafter, !w.uniform, perKind);
  }
  composeHost(acc, sc.host);
  sc.sink?.host(sc.host);
  finishStepInto(acc, stepNotes(p.notes, tok, w.nReq, w.ctxSumAll, w.allRead, sc.inp[IN_BIG]!), out);
  if (perKind) out.per_kind = perKind;
  return out;
}
