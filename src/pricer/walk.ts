/**
 * The batch walk (seed "What a batch is"; reference §4.1, §4.5 batch walk): one pass over the requests
 * that sums, per reader, the cached tokens decode rows read and the ramp-scaled pairs prefill rows
 * attend, plus the step's counts. Writes into a preallocated `BatchWalk`; allocates nothing.
 */
import { attendedKeys, decodeTokensRead, prefillPairs, type ReaderSpec } from '../core/laws/attention.ts';
import { rampSlowdown } from '../core/laws/gemm.ts';
import { UserError } from '../core/errors.ts';
import type { Batch, ColumnBatch, Request } from './types.ts';

const PRE_TOK = 0;
const PRE_CTX = 1;
const PAIRS_FULL = 2;
const PAIRS_FULL_RAW = 3;

/** What the walk needs from construction. */
export interface WalkPlan {
  readers: readonly ReaderSpec[];
  /** The unbounded reader (full attention, no compressed stream), summed inline; -1 when none. */
  fullReader: number;
  /** The other readers, looped per request. */
  bounded: Int32Array;
  /** Rows scheduling more tokens than this are prefills (vLLM's decode threshold). */
  threshold: number;
  /** Tokens of a uniform decode row (1 + num_spec_tokens). */
  uniformWidth: number;
  /** m_½ of the ramp prefill attention runs on (bf16). */
  attnMHalf: number;
  /** The bounded readers' window, compression ratio (0 = none) and cap, in `bounded` order (flat, for the decode sums). */
  boundedWindow: Float64Array;
  boundedRatio: Float64Array;
  boundedCap: Float64Array;
}

/** The flat per-reader constants of `bounded` (WalkPlan's boundedWindow/Ratio/Cap). */
export function boundedColumns(
  readers: readonly ReaderSpec[],
  bounded: Int32Array,
): Pick<WalkPlan, 'boundedWindow' | 'boundedRatio' | 'boundedCap'> {
  const col = (f: (r: ReaderSpec) => number) => Float64Array.from(bounded, (i) => f(readers[i]!));
  return { boundedWindow: col((r) => r.window), boundedRatio: col((r) => r.ratio), boundedCap: col((r) => r.cap) };
}

/** The walked batch: counts and per-reader sums, reused by every call of one pricer. */
export class BatchWalk {
  tok = 0;
  nReq = 0;
  nPrefill = 0;
  decTok = 0;
  headRows = 0;
  uniform = true;
  /** Σ context after the step over every row (drafter passes after the first; capacity). */
  ctxSumAll = 0;
  /** Per reader: decode rows' tokens read, prefill rows' ramp-scaled pairs, every row's tokens read. */
  readonly decRead: Float64Array;
  readonly preRead: Float64Array;
  readonly allRead: Float64Array;
  /** Per reader: prefill rows' query-key pairs without the ramp (a measured prefill form's bytes). */
  readonly preRaw: Float64Array;
  /** Prefill rows' Σ scheduled, Σ context after the step, Σ ramp-scaled pairs and Σ pairs (unbounded reader). */
  readonly prefill = new Float64Array(4);
  /** The row loop's counts (walkBatch / walkColumns → finishWalk): uniform rows, other tokens, Σ computed, other rows, prefill rows, bounded decode rows. */
  readonly rows = new Float64Array(8);
  /**
   * Decode rows' context after the step, in batch order, as runs of equal contexts (bounded readers
   * only): decCtx[i] the context of run i, decRuns[i] its rows; grown by doubling.
   */
  decCtx = new Float64Array(256);
  decRuns = new Float64Array(256);
  /** Prefill rows' scheduled and computed tokens, in batch order (walked after the loop); grown by doubling. */
  preS = new Float64Array(16);
  preC = new Float64Array(16);
  constructor(readers: number) {
    this.decRead = new Float64Array(readers);
    this.preRead = new Float64Array(readers);
    this.allRead = new Float64Array(readers);
    this.preRaw = new Float64Array(readers);
  }

  /** Tokens the step's prefill rows schedule. */
  prefillTokens(): number {
    return this.prefill[PRE_TOK]!;
  }
}

/**
 * One prefill row of s tokens after c cached: its tokens, context and ramp-scaled pairs into
 * `w.prefill`, and per bounded reader its pairs and tokens read. Returns nothing, so it boxes no number
 * when V8 does not inline it.
 */
function prefillRow(p: WalkPlan, w: BatchWalk, s: number, c: number): void {
  const { readers, bounded } = p;
  const pre = w.prefill;
  pre[PRE_TOK]! += s;
  pre[PRE_CTX]! += c + s;
  const scale = rampSlowdown(s, p.attnMHalf);
  const full = attendedKeys(c, s, 1, Infinity);
  pre[PAIRS_FULL]! += full * scale;
  pre[PAIRS_FULL_RAW]! += full;
  for (let j = 0; j < bounded.length; j++) {
    const r = bounded[j]!;
    const pairs = prefillPairs(s, c, readers[r]!);
    w.preRead[r]! += pairs * scale;
    w.preRaw[r]! += pairs;
    w.allRead[r]! += decodeTokensRead(c + s, readers[r]!); // drafter passes 2..k and resident KV
  }
}

/**
 * The prefill rows the loop recorded (w.preS, w.preC, in batch order), each through `prefillRow`. Run
 * after the loop, not inside it: inlined into the walk's loop, the laws prefillRow calls no longer fit
 * V8's inlining budget, and each call then returned its double boxed (16 B per law call per prefill row).
 */
function prefillRows(p: WalkPlan, w: BatchWalk, n: number): void {
  for (let i = 0; i < n; i++) prefillRow(p, w, w.preS[i]!, w.preC[i]!);
}

/** Record a prefill row (s scheduled after c cached) for `prefillRows`. @returns the rows recorded */
function addPrefillRow(w: BatchWalk, n: number, s: number, c: number): number {
  if (n === w.preS.length) {
    const ns = new Float64Array(n * 2);
    const nc = new Float64Array(n * 2);
    ns.set(w.preS);
    nc.set(w.preC);
    w.preS = ns;
    w.preC = nc;
  }
  w.preS[n] = s;
  w.preC[n] = c;
  return n + 1;
}

/** Double the decode-context buffers (rare: only when a batch outgrows every earlier one). */
function growDecCtx(w: BatchWalk): void {
  const next = new Float64Array(w.decCtx.length * 2);
  next.set(w.decCtx);
  w.decCtx = next;
  const runs = new Float64Array(next.length);
  runs.set(w.decRuns);
  w.decRuns = runs;
}

/**
 * Record a run of `len` consecutive decode rows (prefill rows between them do not break it) whose context
 * after the step is `ctx`, for the bounded readers (a batch of equal contexts, such as validation's
 * static batches, becomes one entry). The walk's loop keeps the open run in locals and records it here
 * when it ends: no array load or store per row. @returns the number of runs
 */
function pushRun(w: BatchWalk, runs: number, ctx: number, len: number): number {
  if (runs === w.decCtx.length) growDecCtx(w);
  w.decCtx[runs] = ctx;
  w.decRuns[runs] = len;
  return runs + 1;
}

/**
 * Per bounded reader, Σ over the decode rows of the tokens it reads (decodeTokensRead, written out on
 * the flat columns: min(ctx, W) + min(⌈ctx / r⌉, cap)), into decRead and allRead, once per run of equal
 * contexts (run length × the row's tokens read). Token counts are integers, so these sums are exact and
 * equal the per-row accumulation in any order.
 */
function boundedDecodeSums(p: WalkPlan, w: BatchWalk, nDec: number): void {
  const ctx = w.decCtx;
  const run = w.decRuns;
  for (let j = 0; j < p.bounded.length; j++) {
    const win = p.boundedWindow[j]!;
    const ratio = p.boundedRatio[j]!;
    const cap = p.boundedCap[j]!;
    let sum = 0;
    if (ratio > 0) {
      // From ctx ≥ sat on, the row reads the whole window and the whole cap: x ≥ ratio·cap gives
      // x / ratio ≥ cap exactly (cap is an integer and the division is correctly rounded), so no division.
      const sat = Math.max(win, ratio * cap);
      const satRead = win + cap;
      for (let i = 0; i < nDec; i++) {
        const x = ctx[i]!;
        if (x >= sat) sum += run[i]! * satRead;
        else {
          const k = Math.ceil(x / ratio);
          sum += run[i]! * ((x < win ? x : win) + (k < cap ? k : cap));
        }
      }
    } else for (let i = 0; i < nDec; i++) sum += run[i]! * (ctx[i]! < win ? ctx[i]! : win);
    const r = p.bounded[j]!;
    w.decRead[r]! += sum;
    w.allRead[r]! += sum;
  }
}

/** Zero the walk's per-reader sums and prefill sums before a batch is walked. */
function resetWalk(w: BatchWalk): void {
  const { decRead, preRead, allRead, preRaw } = w;
  for (let r = 0; r < decRead.length; r++) {
    decRead[r] = 0;
    preRead[r] = 0;
    allRead[r] = 0;
    preRaw[r] = 0;
  }
  const pre = w.prefill;
  pre[PRE_TOK] = 0;
  pre[PRE_CTX] = 0;
  pre[PAIRS_FULL] = 0;
  pre[PAIRS_FULL_RAW] = 0;
}

/** Slots of `BatchWalk.rows`, the row loop's counts handed to `finishWalk`. */
const N_UNIFORM = 0; // uniform decode rows (s = uniformWidth ≤ threshold)
const OTHER_TOK = 1; // Σ scheduled over the other rows with s > 0
const COMPUTED = 2; // Σ computed over rows with s > 0
const N_OTHER = 3;
const N_PREFILL = 4;
const N_DEC = 5; // runs of decode rows whose context the bounded readers read (w.decCtx, w.decRuns)
const RUN_CTX = 6; // the open run's context and rows after a leading-uniform scan with bounded readers
const RUN_LEN = 7;

/*
 * The common decode step: every row a uniform decode row (s = 1 + num_spec_tokens) and no bounded
 * reader, so such rows need only their count and Σ computed: the walk takes the batch's leading uniform
 * rows four at a time, checking and summing in one pass, and the general loop walks from the first block
 * with another row on (a mixed step's prefill rows come last). The sum runs on four partial sums
 * (four independent add chains instead of one): token counts are integers and every partial sum is
 * below 2^53, so each partial sum is exact and the total equals the one-chain sum bit for bit (the
 * exactness the general loop's sums by difference already rely on).
 */

/**
 * The leading uniform rows, four at a time: Σ computed_tokens of the first 4·⌊u/4⌋ rows that all
 * schedule exactly `width` tokens into w.rows[COMPUTED] (four partial sums, exact for integer counts).
 * @returns how many rows it consumed (a multiple of 4); the general loop walks the rest
 */
function uniformRequests(reqs: readonly Request[], width: number, rows: Float64Array): number {
  let a = 0;
  let b = 0;
  let c = 0;
  let d = 0;
  const n4 = reqs.length & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    const q0 = reqs[i]!;
    const q1 = reqs[i + 1]!;
    const q2 = reqs[i + 2]!;
    const q3 = reqs[i + 3]!;
    if (
      q0.scheduled_tokens !== width ||
      q1.scheduled_tokens !== width ||
      q2.scheduled_tokens !== width ||
      q3.scheduled_tokens !== width
    )
      break;
    a += q0.computed_tokens;
    b += q1.computed_tokens;
    c += q2.computed_tokens;
    d += q3.computed_tokens;
  }
  rows[COMPUTED] = a + b + (c + d);
  return i;
}

/** `uniformRequests` over a ColumnBatch's columns (rows 0..n-1). */
function uniformColumns(sched: Float64Array, comp: Float64Array, n: number, width: number, rows: Float64Array): number {
  let a = 0;
  let b = 0;
  let c = 0;
  let d = 0;
  const n4 = n & ~3;
  let i = 0;
  for (; i < n4; i += 4) {
    if (sched[i] !== width || sched[i + 1] !== width || sched[i + 2] !== width || sched[i + 3] !== width) break;
    a += comp[i]!;
    b += comp[i + 1]!;
    c += comp[i + 2]!;
    d += comp[i + 3]!;
  }
  rows[COMPUTED] = a + b + (c + d);
  return i;
}

/**
 * The leading rows that are uniform decode rows (s = `width`) with row 0's context, four at a time: two
 * compares per row and no sum (a static batch, or a run of equal contexts, is walked at the cost of its
 * loads). Σ computed over them is k · c0, equal to the one-chain sum for integer token counts below 2^53
 * (the exactness the walk's sums already rely on). @returns k, a multiple of 4
 */
function equalRequests(reqs: readonly Request[], width: number): number {
  const n4 = reqs.length & ~3;
  if (n4 === 0) return 0;
  const c0 = reqs[0]!.computed_tokens;
  let i = 0;
  for (; i < n4; i += 4) {
    const q0 = reqs[i]!;
    const q1 = reqs[i + 1]!;
    const q2 = reqs[i + 2]!;
    const q3 = reqs[i + 3]!;
    if (q0.scheduled_tokens !== width || q1.scheduled_tokens !== width) break;
    if (q2.scheduled_tokens !== width || q3.scheduled_tokens !== width) break;
    if (q0.computed_tokens !== c0 || q1.computed_tokens !== c0) break;
    if (q2.computed_tokens !== c0 || q3.computed_tokens !== c0) break;
  }
  return i;
}

/** `equalRequests` over a ColumnBatch's columns (rows 0..n-1). */
function equalColumns(sched: Float64Array, comp: Float64Array, n: number, width: number): number {
  const n4 = n & ~3;
  if (n4 === 0) return 0;
  const c0 = comp[0]!;
  let i = 0;
  for (; i < n4; i += 4) {
    if (sched[i] !== width || sched[i + 1] !== width || sched[i + 2] !== width || sched[i + 3] !== width) break;
    if (comp[i] !== c0 || comp[i + 1] !== c0 || comp[i + 2] !== c0 || comp[i + 3] !== c0) break;
  }
  return i;
}

/**
 * The leading uniform decode rows when there are bounded readers: Σ computed (in row order, one chain, as
 * the loop adds them) and each row's context after the step into runs of equal contexts (pushRun), the open
 * run left in w.rows[RUN_CTX], w.rows[RUN_LEN] for the loop to continue. A tighter loop than the general
 * one (one test per row instead of four). @returns how many rows it consumed
 */
function uniformRunRequests(reqs: readonly Request[], width: number, w: BatchWalk): number {
  // Rows 0..k-1 all uniform with row 0's context c0: one open run, Σ computed = k · c0 (exact, as the chain).
  const k = equalRequests(reqs, width);
  const c0 = k > 0 ? reqs[0]!.computed_tokens : 0;
  let computed = k > 0 ? k * c0 : 0;
  let nDec = 0;
  let runCtx = k > 0 ? c0 + width : -1;
  let runLen = k;
  let i = k;
  for (; i < reqs.length; i++) {
    const q = reqs[i]!;
    if (q.scheduled_tokens !== width) break;
    const c = q.computed_tokens;
    computed += c;
    if (c + width === runCtx) runLen++;
    else {
      if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
      runCtx = c + width;
      runLen = 1;
    }
  }
  leadingRun(w.rows, computed, nDec, runCtx, runLen);
  return i;
}

/** `uniformRunRequests` over a ColumnBatch's columns (rows 0..n-1). */
function uniformRunColumns(sched: Float64Array, comp: Float64Array, n: number, width: number, w: BatchWalk): number {
  const k = equalColumns(sched, comp, n, width);
  const c0 = k > 0 ? comp[0]! : 0;
  let computed = k > 0 ? k * c0 : 0;
  let nDec = 0;
  let runCtx = k > 0 ? c0 + width : -1;
  let runLen = k;
  let i = k;
  for (; i < n; i++) {
    if (sched[i] !== width) break;
    const c = comp[i]!;
    computed += c;
    if (c + width === runCtx) runLen++;
    else {
      if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
      runCtx = c + width;
      runLen = 1;
    }
  }
  leadingRun(w.rows, computed, nDec, runCtx, runLen);
  return i;
}

/** The leading scan's sums and open run into `rows` (COMPUTED, N_DEC, RUN_CTX, RUN_LEN). */
function leadingRun(rows: Float64Array, computed: number, nDec: number, runCtx: number, runLen: number): void {
  rows[COMPUTED] = computed;
  rows[N_DEC] = nDec;
  rows[RUN_CTX] = runCtx;
  rows[RUN_LEN] = runLen;
}

/** The walk of `n` uniform decode rows, Σ computed already in w.rows[COMPUTED] (no prefill row, no bounded reader). */
function uniformWalk(p: WalkPlan, w: BatchWalk, n: number): void {
  const rows = w.rows;
  rows[N_UNIFORM] = n;
  rows[OTHER_TOK] = 0;
  rows[N_OTHER] = 0;
  rows[N_PREFILL] = 0;
  rows[N_DEC] = 0;
  finishWalk(p, w);
}

/**
 * Walk `batch` into `w` (zeroed first). Rows with no scheduled tokens are skipped.
 *
 * Token counts are integers, so the step's sums (tokens, contexts) are exact in any order: the walk
 * counts uniform decode rows (s = 1 + num_spec_tokens) and sums Σ computed over every row, and derives
 * the decode rows' sums by difference; per uniform decode row it does two loads and two adds, plus
 * what a bounded reader needs. `walkColumns` is the same loop over a ColumnBatch's columns.
 *
 * KNOWN DIVERGENCE 4 (reference §4.5 ramps prefill attention at the step's token count): each
 * prefill row's pairs run at the ramp of its own query length, ε(s) — FlashAttention's varlen
 * kernel tiles each sequence separately — so a decode row added to the step cannot make the
 * prefill attention cheaper (adding a request never lowers the price).
 */
export function walkBatch(p: WalkPlan, batch: Batch, w: BatchWalk): void {
  resetWalk(w);
  const { threshold, uniformWidth } = p;
  const nBounded = p.bounded.length;
  const reqs = batch.requests;
  // Without a bounded reader, the leading uniform rows go four at a time (above); the loop walks the rest.
  const start =
    nBounded === 0 ? uniformRequests(reqs, uniformWidth, w.rows) : uniformRunRequests(reqs, uniformWidth, w);
  if (nBounded === 0 && start === reqs.length) {
    uniformWalk(p, w, start);
    return;
  }
  let nUniform = start;
  let otherTok = 0;
  let computed = start > 0 ? w.rows[COMPUTED]! : 0;
  let nOther = 0;
  let nPrefill = 0;
  // A leading scan with bounded readers (start > 0) hands over its runs and its open run.
  const lead = start > 0 && nBounded > 0;
  let nDec = lead ? w.rows[N_DEC]! : 0;
  let runCtx = lead ? w.rows[RUN_CTX]! : -1;
  let runLen = lead ? w.rows[RUN_LEN]! : 0;
  for (let i = start; i < reqs.length; i++) {
    const q = reqs[i]!;
    const s = q.scheduled_tokens;
    const c = q.computed_tokens;
    if (s > threshold) {
      otherTok += s;
      computed += c;
      nOther++;
      nPrefill = addPrefillRow(w, nPrefill, s, c);
      continue;
    }
    if (!(s > 0)) continue;
    computed += c;
    if (s === uniformWidth) {
      nUniform++;
      if (nBounded === 0) continue;
    } else {
      otherTok += s;
      nOther++;
    }
    // A decode row's context after the step, into the open run of equal contexts (pushRun).
    if (c + s === runCtx) runLen++;
    else {
      if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
      runCtx = c + s;
      runLen = 1;
    }
  }
  if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
  const rows = w.rows;
  rows[N_UNIFORM] = nUniform;
  rows[OTHER_TOK] = otherTok;
  rows[COMPUTED] = computed;
  rows[N_OTHER] = nOther;
  rows[N_PREFILL] = nPrefill;
  rows[N_DEC] = nDec;
  finishWalk(p, w);
}

/**
 * `walkBatch` over a ColumnBatch: row i schedules `scheduled[i]` tokens after `computed[i]` cached,
 * i < n. The same loop, branches and order of additions, so the same sums bit for bit.
 * @throws UserError when n exceeds either column's length
 */
export function walkColumns(p: WalkPlan, batch: ColumnBatch, w: BatchWalk): void {
  const { n, scheduled, computed: comp } = batch;
  if (!(n <= scheduled.length && n <= comp.length))
    throw new UserError(
      `ColumnBatch: n = ${n} rows, but the scheduled column has ${scheduled.length} and the computed column ${comp.length}`,
    );
  resetWalk(w);
  const { threshold, uniformWidth } = p;
  const nBounded = p.bounded.length;
  const start =
    nBounded === 0
      ? uniformColumns(scheduled, comp, n, uniformWidth, w.rows)
      : uniformRunColumns(scheduled, comp, n, uniformWidth, w);
  if (nBounded === 0 && start === n) {
    uniformWalk(p, w, n);
    return;
  }
  let nUniform = start;
  let otherTok = 0;
  let computed = start > 0 ? w.rows[COMPUTED]! : 0;
  let nOther = 0;
  let nPrefill = 0;
  // A leading scan with bounded readers (start > 0) hands over its runs and its open run.
  const lead = start > 0 && nBounded > 0;
  let nDec = lead ? w.rows[N_DEC]! : 0;
  let runCtx = lead ? w.rows[RUN_CTX]! : -1;
  let runLen = lead ? w.rows[RUN_LEN]! : 0;
  for (let i = start; i < n; i++) {
    const s = scheduled[i]!;
    const c = comp[i]!;
    if (s > threshold) {
      otherTok += s;
      computed += c;
      nOther++;
      nPrefill = addPrefillRow(w, nPrefill, s, c);
      continue;
    }
    if (!(s > 0)) continue;
    computed += c;
    if (s === uniformWidth) {
      nUniform++;
      if (nBounded === 0) continue;
    } else {
      otherTok += s;
      nOther++;
    }
    // A decode row's context after the step, into the open run of equal contexts (pushRun).
    if (c + s === runCtx) runLen++;
    else {
      if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
      runCtx = c + s;
      runLen = 1;
    }
  }
  if (runLen > 0) nDec = pushRun(w, nDec, runCtx, runLen);
  const rows = w.rows;
  rows[N_UNIFORM] = nUniform;
  rows[OTHER_TOK] = otherTok;
  rows[COMPUTED] = computed;
  rows[N_OTHER] = nOther;
  rows[N_PREFILL] = nPrefill;
  rows[N_DEC] = nDec;
  finishWalk(p, w);
}

/** The step's counts and the unbounded reader's sums from the row loop's counts (`w.rows`). */
function finishWalk(p: WalkPlan, w: BatchWalk): void {
  const rows = w.rows;
  const nUniform = rows[N_UNIFORM]!;
  const otherTok = rows[OTHER_TOK]!;
  const nOther = rows[N_OTHER]!;
  const nPrefill = rows[N_PREFILL]!;
  const nDec = rows[N_DEC]!;
  // Prefill rows first, then the decode rows' sums: the order the per-row walk added them in.
  if (nPrefill > 0) prefillRows(p, w, nPrefill);
  if (nDec > 0) boundedDecodeSums(p, w, nDec);
  // uniformWidth ≤ threshold (construction), so a uniform row is a decode row.
  const tok = nUniform * p.uniformWidth + otherTok;
  const nReq = nUniform + nOther;
  const ctxSumAll = rows[COMPUTED]! + tok;
  const pre = w.prefill;
  const preTok = pre[PRE_TOK]!;
  if (p.fullReader >= 0) {
    // An unbounded reader reads the whole context: decodeTokensRead(ctx, full) = ctx.
    w.decRead[p.fullReader] = ctxSumAll - pre[PRE_CTX]!;
    w.preRead[p.fullReader] = pre[PAIRS_FULL]!;
    w.preRaw[p.fullReader] = pre[PAIRS_FULL_RAW]!;
    w.allRead[p.fullReader] = ctxSumAll;
  }
  w.tok = tok;
  w.nReq = nReq;
  w.nPrefill = nPrefill;
  w.decTok = tok - preTok;
  w.headRows = tok - preTok + nPrefill;
  w.uniform = nOther === 0;
  w.ctxSumAll = ctxSumAll;
}
