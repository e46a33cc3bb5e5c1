/**
 * A live batch (issue 17 "Pricer", docs/pricer.md "Live batches"): a batch its owner keeps across steps,
 * row by row (a row joins, changes, leaves; every decode row advances), whose integer row sums it keeps
 * as it changes, so pricing a step reads O(bounded readers + prefill rows) numbers, not every row
 * (StepPricer.priceLiveInto). Token counts are integers below 2^53, so every kept sum is exact, and a
 * live batch prices as the Batch of its rows (`batch()`) bit for bit.
 */
import { UserError } from '../core/errors.ts';
import { DecodeReads } from './live-reads.ts';
import type { Batch, ColumnBatch, Request } from './types.ts';
import { type BatchWalk, prefillSlots, type WalkPlan, walkRowSums } from './walk.ts';

/** What a row is: a free slot, a row scheduling nothing, a uniform decode row, another decode row, a prefill. */
const FREE = 0;
const ZERO = 1;
const UNIFORM = 2;
const OTHER = 3;
const PREFILL = 4;

/** Slots of LiveBatch's `counts`: uniform and other decode rows, the others' Σ scheduled, decode rows, their Σ stored computed. */
const N_UNIFORM = 0;
const OTHER_DEC_TOK = 1; // Σ scheduled over the other decode rows (prefill rows' added at the walk)
const N_OTHER_DEC = 2;
const N_DEC = 3;
const DEC_COMP = 4; // Σ over the decode rows of computed − clock

/**
 * One pricer's live batch (StepPricer.liveBatch): rows named by the handle `add` returns (a handle is
 * reused after `remove`). The batch it prices as is its rows in handle order (`batch()`, `columns()`).
 * Allocates only when it outgrows every earlier size.
 */
export class LiveBatch {
  /** The walk plan of the pricer that made it (its threshold, decode width and bounded readers). */
  readonly plan: WalkPlan;
  private kind = new Uint8Array(64);
  private sched = new Float64Array(64);
  /** A decode row's computed tokens less `clock` (advanceDecodes moves them all at once); any other row's computed. */
  private comp = new Float64Array(64);
  private freeList = new Int32Array(64);
  private nFree = 0;
  /** Slots handed out so far: every handle is below it. */
  private high = 0;
  private clock = 0;
  /** The prefill rows' handles, ascending (the order the Batch lists them in), and how many. */
  private pre = new Int32Array(16);
  private nPre = 0;
  private readonly counts = new Float64Array(5);
  /** The walk's counts (walkRowSums), written at each walk. */
  private readonly walkCounts = new Float64Array(5);
  /** Per bounded reader (WalkPlan.bounded order), Σ decodeTokensRead over the decode rows, and what advances it. */
  private readonly reads: DecodeReads;

  constructor(plan: WalkPlan) {
    this.plan = plan;
    this.reads = new DecodeReads(Array.from(plan.bounded, (r) => plan.readers[r]!));
  }

  /** Rows in the batch (those scheduling nothing included). */
  get size(): number {
    return this.high - this.nFree;
  }

  /**
   * Add a row scheduling `scheduled` tokens after `computed` cached. @returns its handle
   * @throws UserError unless both are integers in [0, 2^32]
   */
  add(scheduled: number, computed: number): number {
    checkTokens(scheduled, computed);
    const h = this.nFree > 0 ? this.freeList[--this.nFree]! : this.slot();
    this.place(h, scheduled, computed);
    return h;
  }

  /** Row `h` now schedules `scheduled` tokens after `computed` cached. @throws UserError for a handle not in the batch or bad counts */
  set(h: number, scheduled: number, computed: number): void {
    this.check(h);
    checkTokens(scheduled, computed);
    if (this.kind[h] === PREFILL && scheduled > this.plan.threshold) {
      // A prefill row's next chunk: it keeps its place among the prefill rows, and no sum reads it.
      this.sched[h] = scheduled;
      this.comp[h] = computed;
      return;
    }
    this.unplace(h);
    this.place(h, scheduled, computed);
  }

  /** Take row `h` out of the batch (its handle is free for a later `add`). @throws UserError for a handle not in the batch */
  remove(h: number): void {
    this.check(h);
    this.unplace(h);
    this.kind[h] = FREE;
    this.freeList[this.nFree++] = h;
  }

  /**
   * Every decode row (0 < scheduled ≤ the decode threshold) has computed `tokens` more (a decode step's
   * advance; negative rewinds): O(1) without a bounded reader; with them O(readers) a token for up to 8
   * tokens either way (live-reads.ts), else (or for a reader with a fractional window, ratio or cap) one
   * pass over the rows. Contexts must stay ≥ 0 (not checked).
   * @throws UserError unless `tokens` is an integer in [-2^32, 2^32]
   */
  advanceDecodes(tokens = 1): void {
    checkAdvance(tokens);
    const reads = this.reads;
    if (reads.sums.length === 0) {
      this.clock += tokens;
      return;
    }
    if (reads.counted && Number.isInteger(tokens) && Math.abs(tokens) <= 8) {
      for (let i = 0; i < tokens; i++) reads.forward(this.clock++);
      for (let i = 0; i > tokens; i--) reads.back(this.clock--);
      return;
    }
    this.advanceRows(tokens);
    this.clock += tokens;
    reads.recount(this.clock);
  }

  /** Tokens row `h` schedules. */
  scheduled(h: number): number {
    this.check(h);
    return this.sched[h]!;
  }

  /** Tokens row `h` has computed. */
  computed(h: number): number {
    this.check(h);
    const k = this.kind[h]!;
    return this.comp[h]! + (k === UNIFORM || k === OTHER ? this.clock : 0);
  }

  /** The rows as a Batch, in handle order (it prices as this live batch does; allocates). */
  batch(): Batch {
    const requests: Request[] = [];
    for (let h = 0; h < this.high; h++) {
      if (this.kind[h] === FREE) continue;
      const c = this.computed(h);
      requests.push({ scheduled_tokens: this.sched[h]!, computed_tokens: c, prompt_tokens: c + this.sched[h]! });
    }
    return { requests };
  }

  /** The rows as a ColumnBatch, in handle order (allocates). */
  columns(): ColumnBatch {
    const reqs = this.batch().requests;
    return {
      n: reqs.length,
      scheduled: Float64Array.from(reqs, (q) => q.scheduled_tokens),
      computed: Float64Array.from(reqs, (q) => q.computed_tokens),
    };
  }

  /** The longest decode row's context after the step (computed + scheduled), 0 with none: one pass over the slots. */
  longestDecode(): number {
    let hi = 0;
    for (let h = 0; h < this.high; h++) {
      const k = this.kind[h];
      if (k !== UNIFORM && k !== OTHER) continue;
      const x = this.comp[h]! + this.clock + this.sched[h]!;
      if (x > hi) hi = x;
    }
    return hi;
  }

  /** Walk the batch into `w` (walk.ts walkRowSums): the kept sums and the prefill rows in handle order. */
  walkInto(w: BatchWalk): void {
    const n = this.nPre;
    prefillSlots(w, n);
    let preTok = 0;
    let preComp = 0;
    for (let i = 0; i < n; i++) {
      const h = this.pre[i]!;
      const s = this.sched[h]!;
      const c = this.comp[h]!;
      w.preS[i] = s;
      w.preC[i] = c;
      preTok += s;
      preComp += c;
    }
    const k = this.counts;
    const wc = this.walkCounts;
    wc[0] = k[N_UNIFORM]!;
    wc[1] = k[OTHER_DEC_TOK]! + preTok;
    wc[2] = k[DEC_COMP]! + k[N_DEC]! * this.clock + preComp;
    wc[3] = k[N_OTHER_DEC]! + n;
    wc[4] = n;
    walkRowSums(this.plan, w, wc, this.reads.sums);
  }

  /** A new slot at the top, the columns doubled when full. */
  private slot(): number {
    if (this.high === this.kind.length) {
      const m = 2 * this.high;
      this.kind = grown(this.kind, new Uint8Array(m));
      this.sched = grown(this.sched, new Float64Array(m));
      this.comp = grown(this.comp, new Float64Array(m));
      this.freeList = grown(this.freeList, new Int32Array(m));
    }
    return this.high++;
  }

  /** @throws UserError unless `h` is a row of the batch */
  private check(h: number): void {
    if (!(Number.isInteger(h) && h >= 0 && h < this.high && this.kind[h] !== FREE))
      throw new UserError(`LiveBatch: ${h} is not a row of this batch`);
  }

  /** Store row h (s after c) and add it to the sums. */
  private place(h: number, s: number, c: number): void {
    const p = this.plan;
    const k = this.counts;
    this.sched[h] = s;
    if (s > p.threshold) {
      this.kind[h] = PREFILL;
      this.comp[h] = c;
      this.insertPrefill(h);
      return;
    }
    if (!(s > 0)) {
      this.kind[h] = ZERO;
      this.comp[h] = c;
      return;
    }
    const uniform = s === p.uniformWidth;
    this.kind[h] = uniform ? UNIFORM : OTHER;
    this.comp[h] = c - this.clock;
    if (uniform) k[N_UNIFORM]! += 1;
    else {
      k[N_OTHER_DEC]! += 1;
      k[OTHER_DEC_TOK]! += s;
    }
    k[N_DEC]! += 1;
    k[DEC_COMP]! += c - this.clock;
    this.reads.join(c - this.clock + s, c + s, 1);
  }

  /** Take row h out of the sums (its slot keeps its numbers until overwritten). */
  private unplace(h: number): void {
    const kind = this.kind[h]!;
    if (kind === PREFILL) this.deletePrefill(h);
    if (kind !== UNIFORM && kind !== OTHER) return;
    const k = this.counts;
    const s = this.sched[h]!;
    if (kind === UNIFORM) k[N_UNIFORM]! -= 1;
    else {
      k[N_OTHER_DEC]! -= 1;
      k[OTHER_DEC_TOK]! -= s;
    }
    k[N_DEC]! -= 1;
    k[DEC_COMP]! -= this.comp[h]!;
    this.reads.join(this.comp[h]! + s, this.comp[h]! + this.clock + s, -1);
  }

  /** advanceDecodes row by row: each decode row's tokens read at its context + `tokens`, less at its context. */
  private advanceRows(tokens: number): void {
    for (let h = 0; h < this.high; h++) {
      const kind = this.kind[h]!;
      if (kind === UNIFORM || kind === OTHER) this.reads.moveRow(this.comp[h]! + this.clock + this.sched[h]!, tokens);
    }
  }

  /** Insert prefill handle h into the ascending list. */
  private insertPrefill(h: number): void {
    if (this.nPre === this.pre.length) this.pre = grown(this.pre, new Int32Array(2 * this.nPre));
    let i = this.nPre++;
    for (; i > 0 && this.pre[i - 1]! > h; i--) this.pre[i] = this.pre[i - 1]!;
    this.pre[i] = h;
  }

  /** Delete prefill handle h from the ascending list. */
  private deletePrefill(h: number): void {
    const pre = this.pre;
    const n = this.nPre;
    let i = 0;
    while (pre[i] !== h) i++;
    for (; i + 1 < n; i++) pre[i] = pre[i + 1]!;
    this.nPre = n - 1;
  }
}

/** `to` with `from` copied into its start. */
function grown<T extends Uint8Array | Int32Array | Float64Array>(from: T, to: T): T {
  to.set(from as never);
  return to;
}

/**
 * Most tokens one row may schedule or hold (2^32, far past any context): with fewer than 2^20 rows every
 * kept sum then stays an integer below 2^53, exact in any order (docs/pricer.md "Live batches").
 */
const MAX_ROW_TOKENS = 2 ** 32;

/** Whether `t` is a row's legal token count: an integer in [0, MAX_ROW_TOKENS]. */
function rowTokensOk(t: number): boolean {
  return Number.isInteger(t) && t >= 0 && t <= MAX_ROW_TOKENS;
}

/** @throws UserError unless both token counts are integers in [0, MAX_ROW_TOKENS] */
function checkTokens(scheduled: number, computed: number): void {
  if (!(rowTokensOk(scheduled) && rowTokensOk(computed)))
    throw new UserError(
      `LiveBatch: a row's scheduled and computed tokens must be integers in [0, 2^32] (got ${scheduled} and ${computed})`,
    );
}

/** @throws UserError unless `tokens` is an integer of magnitude ≤ MAX_ROW_TOKENS */
function checkAdvance(tokens: number): void {
  if (!(Number.isInteger(tokens) && Math.abs(tokens) <= MAX_ROW_TOKENS))
    throw new UserError(`LiveBatch: advanceDecodes takes an integer number of tokens in [-2^32, 2^32] (got ${tokens})`);
}
