/**
 * A live batch's bounded-reader sums (live.ts LiveBatch; docs/pricer.md "Live batches"): per bounded
 * reader, Σ decodeTokensRead(x) over the decode rows (x a row's context after the step), kept as rows
 * join and leave, and moved by a whole-batch advance of one token in O(readers), not O(rows).
 *
 * A row's tokens read through a reader is min(x, W) + min(⌈x / r⌉, cap). One token more adds 1 to the
 * window term iff x < W, and 1 to the compressed term iff x ≡ 0 (mod r) and x ≤ L = r · (cap − 1) (past
 * L the cap binds). So a unit advance adds, per reader, the rows below the window plus the unsaturated
 * rows of one residue class mod r, then moves the rows that cross W or L (those of one key) out of the
 * counts; each distinct crossing context is looked up once an advance, and each reader's residue class
 * of the clock is kept, not divided for. Rows are stored by key k = x − clock (an advance moves the clock, not the keys), counted per key
 * in `keys`. Every count and sum is an integer, so the sums equal the per-row sums exactly. A reader whose
 * window, ratio or cap is not a whole number (or whose ratio is over 4,096) is not kept this way: such a
 * batch advances row by row (LiveBatch.advanceDecodes).
 */
import { decodeTokensRead, type ReaderSpec } from '../core/laws/attention.ts';

/** The largest ratio whose residue classes are counted (one slot each). */
const MAX_RATIO = 4096;

/** Whether `x` is ∞ or a whole number ≥ `lo`. */
const wholeOrInfinite = (x: number, lo: number) => x === Number.POSITIVE_INFINITY || (Number.isInteger(x) && x >= lo);

/** a mod r in [0, r), for integers. */
const mod = (a: number, r: number) => ((a % r) + r) % r;

/** Per bounded reader: the decode sums, and the counts a unit advance reads. */
export class DecodeReads {
  /** Per reader, Σ decodeTokensRead(x) over the decode rows. */
  readonly sums: Float64Array;
  /** Whether every reader's window, ratio and cap allow the counted advance (`step`). */
  readonly counted: boolean;
  private readonly readers: ReaderSpec[];
  private readonly window: Float64Array;
  private readonly ratio: Float64Array;
  /** r · (cap − 1): past it the cap binds; ∞ with no cap. */
  private readonly last: Float64Array;
  /** Per reader, decode rows with x < W. */
  private readonly below: Float64Array;
  /** Per reader with a ratio, its unsaturated rows (x ≤ last) per residue class of k mod r, at histAt[j]. */
  private readonly hist: Float64Array;
  private readonly histAt: Int32Array;
  /** Decode rows per key k = x − clock. */
  private readonly keys = new Map<number, number>();
  /**
   * The distinct crossing contexts of the readers (W − 1 for a window, r · (cap − 1) for a cap): a unit
   * advance moves the rows at x = c out of a count (x = c + 1 back in), looked up once per distinct c.
   */
  private readonly cross: Float64Array;
  /** The rows at each crossing context in this advance (`cross` order). */
  private readonly crossRows: Float64Array;
  /** Per reader, its window's and its cap's index in `cross`; −1 for none. */
  private readonly windowCross: Int32Array;
  private readonly lastCross: Int32Array;
  /** Per reader with a ratio, (−clock) mod r: the residue class a unit advance reads (no division per step). */
  private readonly clockClass: Float64Array;

  constructor(readers: ReaderSpec[]) {
    this.readers = readers;
    const n = readers.length;
    this.sums = new Float64Array(n);
    this.window = Float64Array.from(readers, (r) => r.window);
    this.ratio = Float64Array.from(readers, (r) => r.ratio);
    this.last = Float64Array.from(readers, (r) => (r.ratio > 0 ? r.ratio * (r.cap - 1) : 0));
    this.below = new Float64Array(n);
    this.histAt = new Int32Array(n);
    let size = 0;
    for (let j = 0; j < n; j++) {
      this.histAt[j] = size;
      if (readers[j]!.ratio > 0) size += Math.min(readers[j]!.ratio, MAX_RATIO);
    }
    this.hist = new Float64Array(size);
    const cs: number[] = [];
    const at = (c: number) => (cs.includes(c) ? cs.indexOf(c) : cs.push(c) - 1);
    const finite = (x: number) => x < Number.POSITIVE_INFINITY;
    this.windowCross = Int32Array.from(readers, (r) => (r.window > 0 && finite(r.window) ? at(r.window - 1) : -1));
    this.lastCross = Int32Array.from(this.last, (l, j) => (readers[j]!.ratio > 0 && finite(l) ? at(l) : -1));
    this.cross = Float64Array.from(cs);
    this.crossRows = new Float64Array(cs.length);
    this.clockClass = new Float64Array(n);
    this.counted = readers.every(
      (r) =>
        wholeOrInfinite(r.window, 0) &&
        (r.ratio === 0 || (Number.isInteger(r.ratio) && r.ratio >= 1 && r.ratio <= MAX_RATIO)) &&
        wholeOrInfinite(r.cap, 1),
    );
  }

  /** A decode row of context x (key k) joins (sign 1) or leaves (sign −1): its reads and its counts. */
  join(k: number, x: number, sign: number): void {
    const sums = this.sums;
    for (let j = 0; j < sums.length; j++) sums[j]! += sign * decodeTokensRead(x, this.readers[j]!);
    if (!this.counted) return;
    const n = (this.keys.get(k) ?? 0) + sign;
    if (n === 0) this.keys.delete(k);
    else this.keys.set(k, n);
    this.count(k, x, sign);
  }

  /** Row (key k, context x) into (sign 1) or out of (−1) the per-reader counts. */
  private count(k: number, x: number, sign: number): void {
    for (let j = 0; j < this.sums.length; j++) {
      if (x < this.window[j]!) this.below[j]! += sign;
      const r = this.ratio[j]!;
      if (r > 0 && x <= this.last[j]!) this.hist[this.histAt[j]! + mod(k, r)]! += sign;
    }
  }

  /** The rows at each crossing context + `shift`, at clock t, into crossRows. */
  private crossings(t: number, shift: number): void {
    const { cross, crossRows } = this;
    for (let u = 0; u < cross.length; u++) crossRows[u] = this.keys.get(cross[u]! + shift - t) ?? 0;
  }

  /**
   * Every decode row one token on (the clock at `t` before): per reader the rows under its window plus its
   * unsaturated rows of the residue class x ≡ 0 (mod r), then out of those counts the rows at W − 1 and
   * at r · (cap − 1) (whose class is that same one: r · (cap − 1) ≡ 0).
   */
  forward(t: number): void {
    const { sums, ratio, below, hist, histAt, windowCross, lastCross, crossRows, clockClass } = this;
    this.crossings(t, 0);
    for (let j = 0; j < sums.length; j++) {
      let d = below[j]!;
      const wc = windowCross[j]!;
      if (wc >= 0) below[j]! -= crossRows[wc]!;
      const r = ratio[j]!;
      if (r > 0) {
        const idx = clockClass[j]!;
        const at = histAt[j]! + idx;
        d += hist[at]!;
        const lc = lastCross[j]!;
        if (lc >= 0) hist[at]! -= crossRows[lc]!;
        clockClass[j] = idx === 0 ? r - 1 : idx - 1;
      }
      sums[j]! += d;
    }
  }

  /** Every decode row one token back (the clock at `t` before): `forward` undone, in reverse order. */
  back(t: number): void {
    const { sums, ratio, below, hist, histAt, windowCross, lastCross, crossRows, clockClass } = this;
    this.crossings(t, 1);
    for (let j = 0; j < sums.length; j++) {
      const wc = windowCross[j]!;
      if (wc >= 0) below[j]! += crossRows[wc]!;
      let d = below[j]!;
      const r = ratio[j]!;
      if (r > 0) {
        const idx = clockClass[j]! + 1 === r ? 0 : clockClass[j]! + 1;
        clockClass[j] = idx;
        const at = histAt[j]! + idx;
        const lc = lastCross[j]!;
        if (lc >= 0) hist[at]! += crossRows[lc]!;
        d += hist[at]!;
      }
      sums[j]! -= d;
    }
  }

  /** After an advance done row by row: the counts again from the rows' keys at clock `t`. */
  recount(t: number): void {
    if (!this.counted) return;
    this.below.fill(0);
    this.hist.fill(0);
    for (const [k, n] of this.keys) this.count(k, k + t, n);
    for (let j = 0; j < this.ratio.length; j++) this.clockClass[j] = this.ratio[j]! > 0 ? mod(-t, this.ratio[j]!) : 0;
  }

  /** One decode row at context x moved by `tokens` (an advance done row by row). */
  moveRow(x: number, tokens: number): void {
    const sums = this.sums;
    for (let j = 0; j < sums.length; j++)
      sums[j]! += decodeTokensRead(x + tokens, this.readers[j]!) - decodeTokensRead(x, this.readers[j]!);
  }
}
