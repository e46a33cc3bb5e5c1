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
  /**
   * Per bounded reader, 2^-k where its ratio is a power of two 2^k (⌈x / ratio⌉ = ⌈x · 2^-k⌉ exactly, no
   * division: `ceilRows`), else 0 (divide; also where there is no compressed stream).
   */
  boundedInv: Float64Array;
  /**
   * The first two bounded readers (indices into `bounded`) with a whole compressed stream (no cap) of a
   * power-of-two ratio other than 1, whose per-row sums one pass takes together (`ceilPairRows`); -1, -1
   * where there are fewer than two. DeepSeek-V4's ÷4 and ÷128 streams.
   */
  ceilPair: Int32Array;
}

/** The flat per-reader constants of `bounded` (WalkPlan's boundedWindow/Ratio/Cap). */
export function boundedColumns(
  readers: readonly ReaderSpec[],
  bounded: Int32Array,
): Pick<WalkPlan, 'boundedWindow' | 'boundedRatio' | 'boundedCap' | 'boundedInv' | 'ceilPair'> {
  const col = (f: (r: ReaderSpec) => number) => Float64Array.from(bounded, (i) => f(readers[i]!));
  const pow2 = (r: ReaderSpec) => r.ratio > 0 && 2 ** Math.round(Math.log2(r.ratio)) === r.ratio;
  const whole = [...bounded.keys()].filter((j) => {
    const r = readers[bounded[j]!]!;
    return pow2(r) && r.ratio !== 1 && r.cap === Number.POSITIVE_INFINITY;
  });
  return {
    boundedWindow: col((r) => r.window),
    boundedRatio: col((r) => r.ratio),
    boundedCap: col((r) => r.cap),
    boundedInv: col((r) => (pow2(r) ? 1 / r.ratio : 0)),
    ceilPair: Int32Array.from(whole.length >= 2 ? whole.slice(0, 2) : [-1, -1]),
  };
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
  /**
   * The row loop's counts (walkBatch / walkColumns → finishWalk, the `rows` slots below): uniform rows,
   * other tokens, Σ computed, other rows, prefill rows; with bounded readers the decode contexts stored,
   * the leading equal-context rows and their context, and the least decode context.
   */
  readonly rows = new Float64Array(9);
  /**
   * Decode rows' context after the step (bounded readers only), in batch order, past the leading rows that
   * share row 0's context (those are counted, not stored); grown to the batch's rows before a walk.
   */
  decCtx = new Float64Array(256);
  /** Σ ⌈x / ratio⌉ over the stored decode contexts for WalkPlan.ceilPair's two readers (`ceilPairRows`). */
  readonly pairSums = new Float64Array(2);
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

/**
 * Room for `n` decode contexts in w.decCtx (grown only when a batch outgrows every earlier one), so the
 * walk's loops store a row's context with no test. @returns the buffer
 */
function decCtxFor(w: BatchWalk, n: number): Float64Array {
  if (n > w.decCtx.length) w.decCtx = new Float64Array(Math.max(n, 2 * w.decCtx.length));
  return w.decCtx;
}

/*
 * The per-row sums below keep two partial sums (two independent add chains) that start at -0, not 0: from
 * a Smi 0, V8 speculates the sum is a small integer and checks every add (a double → int32 round trip per
 * row, ≈ 3× the loop's cost); -0 is a double, so the sum stays one. -0 + k = k, and every sum is an
 * integer below 2^53, exact in any order.
 */

/** Σ min(ctx[i], win) over the n stored decode contexts. */
function windowRows(ctx: Float64Array, n: number, win: number): number {
  let a = -0;
  let b = -0;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    a += Math.min(ctx[i]!, win);
    b += Math.min(ctx[i + 1]!, win);
  }
  if (i < n) a += Math.min(ctx[i]!, win);
  return a + b;
}

/**
 * Σ ⌈ctx[i] / ratio⌉ over the n stored decode contexts (no cap), each Math.ceil(x / ratio) bit for bit:
 * with inv = 2^-k for a power-of-two ratio 2^k (WalkPlan.boundedInv) x · inv is the quotient exactly, so
 * no division; inv = 0 divides.
 */
function ceilRows(ctx: Float64Array, n: number, ratio: number, inv: number): number {
  let a = -0;
  let b = -0;
  let i = 0;
  if (inv > 0)
    for (; i + 1 < n; i += 2) {
      a += Math.ceil(ctx[i]! * inv);
      b += Math.ceil(ctx[i + 1]! * inv);
    }
  else
    for (; i + 1 < n; i += 2) {
      a += Math.ceil(ctx[i]! / ratio);
      b += Math.ceil(ctx[i + 1]! / ratio);
    }
  if (i < n) a += inv > 0 ? Math.ceil(ctx[i]! * inv) : Math.ceil(ctx[i]! / ratio);
  return a + b;
}

/**
 * `ceilRows` for two power-of-two ratios at once (inverses invA, invB), into out[0] and out[1]: one pass,
 * each context loaded once, four partial sums.
 */
function ceilPairRows(ctx: Float64Array, n: number, invA: number, invB: number, out: Float64Array): void {
  let a = -0;
  let b = -0;
  let c = -0;
  let d = -0;
  let i = 0;
  for (; i + 1 < n; i += 2) {
    const x = ctx[i]!;
    const y = ctx[i + 1]!;
    a += Math.ceil(x * invA);
    b += Math.ceil(y * invA);
    c += Math.ceil(x * invB);
    d += Math.ceil(y * invB);
  }
  if (i < n) {
    a += Math.ceil(ctx[i]! * invA);
    c += Math.ceil(ctx[i]! * invB);
  }
  out[0] = a + b;
  out[1] = c + d;
}

/** Σ ⌈x / ratio⌉ over the stored contexts for bounded reader j: `ceilPairRows`' sum for the pair, else `ceilRows`. */
function uncappedRows(p: WalkPlan, w: BatchWalk, j: number, ratio: number, inv: number): number {
  const pair = p.ceilPair;
  if (j === pair[0]) return w.pairSums[0]!;
  if (j === pair[1]) return w.pairSums[1]!;
  return ceilRows(w.decCtx, w.rows[N_DEC]!, ratio, inv);
}

/** Σ min(⌈ctx[i] / ratio⌉, cap) over the n stored decode contexts (as `ceilRows`, with the cap). */
function cappedRows(ctx: Float64Array, n: number, ratio: number, inv: number, cap: number): number {
  let sum = -0;
  for (let i = 0; i < n; i++) {
    const x = ctx[i]!;
    sum += Math.min(inv > 0 ? Math.ceil(x * inv) : Math.ceil(x / ratio), cap);
  }
  return sum;
}

/**
 * Σ over the decode rows of min(x, win), x each row's context after the step: with every x ≥ win (the
 * least, w.rows[DEC_MIN]) rows · win, with no window (win = ∞) the rows' Σ x, else row by row. `lead`
 * rows of context x0 are not stored (the walk's leading equal-context rows).
 */
function windowSum(w: BatchWalk, win: number, rows: number, ctxSum: number, lead: number, x0: number): number {
  if (w.rows[DEC_MIN]! >= win) return rows * win;
  if (win === Number.POSITIVE_INFINITY) return ctxSum;
  return lead * Math.min(x0, win) + windowRows(w.decCtx, w.rows[N_DEC]!, win);
}

/**
 * Σ over the decode rows of min(⌈x / ratio⌉, cap): rows · cap where every x ≥ ratio · cap (then x / ratio
 * ≥ cap exactly: cap is an integer and the division is correctly rounded); ratio 1 with no cap is the rows'
 * Σ x (token counts are integers); else row by row. `lead`, `x0` as in `windowSum`.
 */
function compressedSum(
  w: BatchWalk,
  j: number,
  p: WalkPlan,
  rows: number,
  ctxSum: number,
  lead: number,
  x0: number,
): number {
  const ratio = p.boundedRatio[j]!;
  const cap = p.boundedCap[j]!;
  const inv = p.boundedInv[j]!;
  if (w.rows[DEC_MIN]! >= ratio * cap) return rows * cap;
  const uncapped = cap === Number.POSITIVE_INFINITY;
  if (uncapped && ratio === 1) return ctxSum;
  const n = w.rows[N_DEC]!;
  const k0 = lead > 0 ? lead * Math.min(inv > 0 ? Math.ceil(x0 * inv) : Math.ceil(x0 / ratio), cap) : 0;
  return k0 + (uncapped ? uncappedRows(p, w, j, ratio, inv) : cappedRows(w.decCtx, n, ratio, inv, cap));
}

/**
 * Per bounded reader, Σ over the decode rows of the tokens it reads (decodeTokensRead, written out on the
 * flat columns: min(x, W) + min(⌈x / r⌉, cap)), into decRead and allRead, as two separable sums: each in
 * closed form from the least decode context and Σ x where the window or the cap binds on every row (a
 * long-context batch, or one of equal contexts), else one pass over the stored contexts, with no division
 * for a power-of-two ratio. Token counts are integers, so every sum is exact and equals the per-row
 * accumulation in any order. `rows`: the decode rows; `ctxSum`: their Σ x.
 */
function boundedDecodeSums(p: WalkPlan, w: BatchWalk, rows: number, ctxSum: number): void {
  const lead = w.rows[LEAD_K]!;
  const x0 = w.rows[LEAD_X]!;
  const pair = p.ceilPair;
  if (pair[0]! >= 0)
    ceilPairRows(w.decCtx, w.rows[N_DEC]!, p.boundedInv[pair[0]!]!, p.boundedInv[pair[1]!]!, w.pairSums);
  for (let j = 0; j < p.bounded.length; j++) {
    let sum = windowSum(w, p.boundedWindow[j]!, rows, ctxSum, lead, x0);
    if (p.boundedRatio[j]! > 0) sum += compressedSum(w, j, p, rows, ctxSum, lead, x0);
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
const N_DEC = 5; // decode contexts stored in w.decCtx (bounded readers)
const LEAD_K = 6; // leading uniform rows with row 0's context (bounded readers; counted, not stored)
const LEAD_X = 7; // their context after the step
const DEC_MIN = 8; // the least decode context (bounded readers; Infinity with no decode row)

/*
 * The common decode step: every row a uniform decode row (s = 1 + num_spec_tokens) and no bounded
 * reader, so such rows need only their count and Σ computed: the walk takes the batch's leading uniform
 * rows eight at a time, checking and summing in one pass, and the general loop walks from the first block
 * with another row on (a mixed step's prefill rows come last). The sum runs on four partial sums
 * (four independent add chains instead of one): token counts are integers and every partial sum is
 * below 2^53, so each partial sum is exact and the total equals the one-chain sum bit for bit (the
 * exactness the general loop's sums by difference already rely on).
 */

/**
 * The leading uniform rows, eight at a time: Σ computed_tokens of the first 8·⌊u/8⌋ rows that all
 * schedule exactly `width` tokens into w.rows[COMPUTED] (four partial sums, each adding two rows, exact
 * for integer counts). Eight rows per iteration, not four: V8's per-iteration cost (the loop's compare,
 * its interrupt check, the index's bounds) is then paid once per eight rows (docs/performance.md "Session
 * 10"), then the rest one at a time up to the first other row. @returns how many rows it consumed; the
 * general loop walks the rest
 */
function uniformRequests(reqs: readonly Request[], width: number, rows: Float64Array): number {
  let a = 0;
  let b = 0;
  let c = 0;
  let d = 0;
  const n8 = reqs.length & ~7;
  let i = 0;
  for (; i < n8; i += 8) {
    const q0 = reqs[i]!;
    const q1 = reqs[i + 1]!;
    const q2 = reqs[i + 2]!;
    const q3 = reqs[i + 3]!;
    const q4 = reqs[i + 4]!;
    const q5 = reqs[i + 5]!;
    const q6 = reqs[i + 6]!;
    const q7 = reqs[i + 7]!;
    if (q0.scheduled_tokens !== width || q1.scheduled_tokens !== width) break;
    if (q2.scheduled_tokens !== width || q3.scheduled_tokens !== width) break;
    if (q4.scheduled_tokens !== width || q5.scheduled_tokens !== width) break;
    if (q6.scheduled_tokens !== width || q7.scheduled_tokens !== width) break;
    a += q0.computed_tokens + q4.computed_tokens;
    b += q1.computed_tokens + q5.computed_tokens;
    c += q2.computed_tokens + q6.computed_tokens;
    d += q3.computed_tokens + q7.computed_tokens;
  }
  // The last n mod 8 rows (a small batch: all of them) one at a time, so an all-uniform step ends here.
  if (i === n8)
    for (; i < reqs.length; i++) {
      const q = reqs[i]!;
      if (q.scheduled_tokens !== width) break;
      a += q.computed_tokens;
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
  const n8 = n & ~7;
  let i = 0;
  for (; i < n8; i += 8) {
    if (sched[i] !== width || sched[i + 1] !== width || sched[i + 2] !== width || sched[i + 3] !== width) break;
    if (sched[i + 4] !== width || sched[i + 5] !== width || sched[i + 6] !== width || sched[i + 7] !== width) break;
    a += comp[i]! + comp[i + 4]!;
    b += comp[i + 1]! + comp[i + 5]!;
    c += comp[i + 2]! + comp[i + 6]!;
    d += comp[i + 3]! + comp[i + 7]!;
  }
  if (i === n8)
    for (; i < n; i++) {
      if (sched[i] !== width) break;
      a += comp[i]!;
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
 * The leading uniform decode rows when there are bounded readers: Σ computed and each row's context after
 * the step into w.decCtx, past the leading rows with row 0's context (`equalRequests`: counted in
 * w.rows[LEAD_K], not stored), with the least context, for the loop to continue
 * (`leadingRows`). Four rows at a time (`uniformBlocks`), then one at a time up to the first other row.
 * Token counts are integers, so the partial sums are exact and equal the one-chain sum. @returns how many
 * rows it consumed
 */
function uniformRunRequests(reqs: readonly Request[], width: number, w: BatchWalk): number {
  // Rows 0..k-1 all uniform with row 0's context c0: Σ computed = k · c0 (exact, as the chain).
  const k = equalRequests(reqs, width);
  const c0 = k > 0 ? reqs[0]!.computed_tokens : 0;
  const dec = decCtxFor(w, reqs.length);
  const rows = w.rows;
  rows[LEAD_K] = k;
  rows[LEAD_X] = c0 + width;
  let i = uniformBlocks(reqs, width, k, dec, rows);
  let computed = (k > 0 ? k * c0 : 0) + rows[COMPUTED]!;
  let nDec = i - k;
  let lo = rows[DEC_MIN]!;
  for (; i < reqs.length; i++) {
    const q = reqs[i]!;
    if (q.scheduled_tokens !== width) break;
    const c = q.computed_tokens;
    computed += c;
    const x = c + width;
    dec[nDec++] = x;
    if (x < lo) lo = x;
  }
  leadingRows(rows, computed, nDec, lo);
  return i;
}

/**
 * Rows from k (a multiple of 4) on, four at a time while all four schedule `width` tokens: each one's
 * context after the step into dec[i − k], Σ computed into rows[COMPUTED] (two partial sums), and the least
 * context (with rows[LEAD_X] when k > 0) into rows[DEC_MIN]. @returns the
 * first row not consumed
 */
function uniformBlocks(
  reqs: readonly Request[],
  width: number,
  k: number,
  dec: Float64Array,
  rows: Float64Array,
): number {
  let a = 0;
  let b = 0;
  let lo = k > 0 ? rows[LEAD_X]! : Infinity;
  const n4 = reqs.length & ~3;
  let i = k;
  for (; i < n4; i += 4) {
    const q0 = reqs[i]!;
    const q1 = reqs[i + 1]!;
    const q2 = reqs[i + 2]!;
    const q3 = reqs[i + 3]!;
    if (q0.scheduled_tokens !== width || q1.scheduled_tokens !== width) break;
    if (q2.scheduled_tokens !== width || q3.scheduled_tokens !== width) break;
    const x0 = q0.computed_tokens;
    const x1 = q1.computed_tokens;
    const x2 = q2.computed_tokens;
    const x3 = q3.computed_tokens;
    a += x0 + x1;
    b += x2 + x3;
    const j = i - k;
    dec[j] = x0 + width;
    dec[j + 1] = x1 + width;
    dec[j + 2] = x2 + width;
    dec[j + 3] = x3 + width;
    const l = Math.min(x0, x1, x2, x3) + width;
    if (l < lo) lo = l;
  }
  blockRows(rows, a + b, lo);
  return i;
}

/** `uniformRunRequests` over a ColumnBatch's columns (rows 0..n-1). */
function uniformRunColumns(sched: Float64Array, comp: Float64Array, n: number, width: number, w: BatchWalk): number {
  const k = equalColumns(sched, comp, n, width);
  const c0 = k > 0 ? comp[0]! : 0;
  const dec = decCtxFor(w, n);
  const rows = w.rows;
  rows[LEAD_K] = k;
  rows[LEAD_X] = c0 + width;
  let i = uniformBlockColumns(sched, comp, n, width, k, dec, rows);
  let computed = (k > 0 ? k * c0 : 0) + rows[COMPUTED]!;
  let nDec = i - k;
  let lo = rows[DEC_MIN]!;
  for (; i < n; i++) {
    if (sched[i] !== width) break;
    const c = comp[i]!;
    computed += c;
    const x = c + width;
    dec[nDec++] = x;
    if (x < lo) lo = x;
  }
  leadingRows(rows, computed, nDec, lo);
  return i;
}

/** `uniformBlocks` over a ColumnBatch's columns (rows 0..n-1). */
function uniformBlockColumns(
  sched: Float64Array,
  comp: Float64Array,
  n: number,
  width: number,
  k: number,
  dec: Float64Array,
  rows: Float64Array,
): number {
  let a = 0;
  let b = 0;
  let lo = k > 0 ? rows[LEAD_X]! : Infinity;
  const n4 = n & ~3;
  let i = k;
  for (; i < n4; i += 4) {
    if (sched[i] !== width || sched[i + 1] !== width || sched[i + 2] !== width || sched[i + 3] !== width) break;
    const x0 = comp[i]!;
    const x1 = comp[i + 1]!;
    const x2 = comp[i + 2]!;
    const x3 = comp[i + 3]!;
    a += x0 + x1;
    b += x2 + x3;
    const j = i - k;
    dec[j] = x0 + width;
    dec[j + 1] = x1 + width;
    dec[j + 2] = x2 + width;
    dec[j + 3] = x3 + width;
    const l = Math.min(x0, x1, x2, x3) + width;
    if (l < lo) lo = l;
  }
  blockRows(rows, a + b, lo);
  return i;
}

/** `uniformBlocks`' sums into `rows` (COMPUTED, DEC_MIN). */
function blockRows(rows: Float64Array, computed: number, lo: number): void {
  rows[COMPUTED] = computed;
  rows[DEC_MIN] = lo;
}

/** The leading scan's sums into `rows` (COMPUTED, N_DEC, DEC_MIN). */
function leadingRows(rows: Float64Array, computed: number, nDec: number, lo: number): void {
  rows[COMPUTED] = computed;
  rows[N_DEC] = nDec;
  rows[DEC_MIN] = lo;
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
  // Without a bounded reader, the leading uniform rows go eight at a time (above); the loop walks the rest.
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
  // With bounded readers the leading scan (which ran) hands over its stored contexts and their range.
  const dec = decCtxFor(w, reqs.length);
  let nDec = nBounded > 0 ? w.rows[N_DEC]! | 0 : 0;
  let lo = nBounded > 0 ? w.rows[DEC_MIN]! : Infinity;
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
    // A decode row's context after the step, for the bounded readers' sums (boundedDecodeSums).
    const x = c + s;
    dec[nDec++] = x;
    if (x < lo) lo = x;
  }
  loopRows(w.rows, nUniform, otherTok, computed, nOther, nPrefill);
  w.rows[N_DEC] = nDec;
  w.rows[DEC_MIN] = lo;
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
  // With bounded readers the leading scan (which ran) hands over its stored contexts and their range.
  const dec = decCtxFor(w, n);
  let nDec = nBounded > 0 ? w.rows[N_DEC]! | 0 : 0;
  let lo = nBounded > 0 ? w.rows[DEC_MIN]! : Infinity;
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
    // A decode row's context after the step, for the bounded readers' sums (boundedDecodeSums).
    const x = c + s;
    dec[nDec++] = x;
    if (x < lo) lo = x;
  }
  loopRows(w.rows, nUniform, otherTok, computed, nOther, nPrefill);
  w.rows[N_DEC] = nDec;
  w.rows[DEC_MIN] = lo;
  finishWalk(p, w);
}

/** The general loop's counts into `rows` (N_UNIFORM, OTHER_TOK, COMPUTED, N_OTHER, N_PREFILL). */
function loopRows(
  rows: Float64Array,
  nUniform: number,
  otherTok: number,
  computed: number,
  nOther: number,
  nPrefill: number,
): void {
  rows[N_UNIFORM] = nUniform;
  rows[OTHER_TOK] = otherTok;
  rows[COMPUTED] = computed;
  rows[N_OTHER] = nOther;
  rows[N_PREFILL] = nPrefill;
}

/**
 * Walk a batch whose row sums its owner keeps (live.ts LiveBatch) into `w`, with no pass over its decode
 * rows: the counts the row loop would produce (`nUniform` uniform decode rows; `otherTok`, Σ scheduled over
 * the other rows with s > 0; `computed`, Σ computed over every row with s > 0; `nOther` other rows, of which
 * `nPrefill` prefill rows, already in w.preS / w.preC in batch order, `prefillSlots`) and, per bounded reader
 * in WalkPlan.bounded order, Σ decodeTokensRead over the decode rows (`decodeSums`). Every input is an
 * integer sum, so the walk equals `walkBatch`'s on the same rows bit for bit (test/pricer/live.test.ts).
 */
export function walkRowSums(p: WalkPlan, w: BatchWalk, counts: Float64Array, decodeSums: Float64Array): void {
  resetWalk(w);
  loopRows(w.rows, counts[0]!, counts[1]!, counts[2]!, counts[3]!, counts[4]!);
  finishWalk(p, w, decodeSums);
}

/** Room for `n` prefill rows in w.preS / w.preC (grown only when a batch outgrows every earlier one). */
export function prefillSlots(w: BatchWalk, n: number): void {
  if (n <= w.preS.length) return;
  const m = Math.max(n, 2 * w.preS.length);
  w.preS = new Float64Array(m);
  w.preC = new Float64Array(m);
}

/** Per bounded reader, the owner-kept decode sums (`walkRowSums`) into decRead and allRead, as boundedDecodeSums adds its own. */
function addDecodeSums(p: WalkPlan, w: BatchWalk, sums: Float64Array): void {
  for (let j = 0; j < p.bounded.length; j++) {
    const r = p.bounded[j]!;
    w.decRead[r]! += sums[j]!;
    w.allRead[r]! += sums[j]!;
  }
}

/**
 * The step's counts and the unbounded reader's sums from the row loop's counts (`w.rows`); the bounded
 * readers' decode sums from the stored contexts, or `decodeSums` where the caller keeps them (`walkRowSums`).
 */
function finishWalk(p: WalkPlan, w: BatchWalk, decodeSums?: Float64Array): void {
  const rows = w.rows;
  const nUniform = rows[N_UNIFORM]!;
  const otherTok = rows[OTHER_TOK]!;
  const nOther = rows[N_OTHER]!;
  const nPrefill = rows[N_PREFILL]!;
  // Prefill rows first, then the decode rows' sums: the order the per-row walk added them in.
  if (nPrefill > 0) prefillRows(p, w, nPrefill);
  // uniformWidth ≤ threshold (construction), so a uniform row is a decode row.
  const tok = nUniform * p.uniformWidth + otherTok;
  const nReq = nUniform + nOther;
  const ctxSumAll = rows[COMPUTED]! + tok;
  const pre = w.prefill;
  const preTok = pre[PRE_TOK]!;
  // Decode rows: every row but the prefill rows; Σ their context after the step by difference (exact).
  if (p.bounded.length > 0 && nReq > nPrefill) {
    if (decodeSums === undefined) boundedDecodeSums(p, w, nReq - nPrefill, ctxSumAll - pre[PRE_CTX]!);
    else addDecodeSums(p, w, decodeSums);
  }
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
