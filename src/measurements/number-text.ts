/**
 * A number's `String(v)` written as bytes without building the string (issue 17 "Import": the stored
 * CSV's latency column). `String` prints the shortest decimal that reads back as v, and among those of
 * that length the closest to v (ECMA-262 Number::toString); a latency converted ms × 1000 is usually
 * not the double nearest a short decimal, so it needs 16 or 17 digits, which V8 finds through its
 * string path (≈ 0.3–0.6 µs a value on the shared machine). Here:
 * - ≤ 15 significant digits: the fewest decimals k with round(v·10ᵏ) / 10ᵏ === v (an integer below
 *   2⁵³ over an exact power of ten: a correctly rounded quotient, Clinger's fast path, so the test is
 *   exact); below 2⁵⁰ the candidate is the only one of its length that reads back (10⁻ᵏ exceeds v's ulp).
 * - 16, then 17 digits: v·10ᵏ exactly, as hi + lo (Dekker's product of two doubles), rounded to the
 *   nearest integer D; D reads back as v exactly when |D − v·10ᵏ| < ½ulp(v)·10ᵏ (both sides exact up
 *   to one rounding of a sum below 1, far from the bound unless the case is a near tie). D is the
 *   closest of its length, so when it does not read back none of its length does.
 * Anything else (powers of two, whose rounding interval is lopsided, near ties, values outside
 * [1e-6, 1e15), a result that is not the shortest after all) is left to `String(v)`.
 */

/** Powers of ten exact in float64 (10²² is the largest). */
export const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);
/** Veltkamp's splitter for float64 (2²⁷ + 1): x = hi + lo with both halves of 26 bits. */
const SPLITTER = 134217729;
const POW10_HI = POW10.map((p) => {
  const c = SPLITTER * p;
  return c - (c - p);
});
const POW10_LO = POW10.map((p, i) => p - POW10_HI[i]!);

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
/** The 16 or 17 digits of the last `longDigits` result, most significant first. */
const digits = new Uint8Array(17);

/** A byte buffer with room reserved (ByteOut in row-columns.ts). */
export interface ByteSink {
  buf: Buffer;
  pos: number;
  reserve(n: number): void;
}

/** A ByteSink whose buffer doubles (at least) when a reserve outgrows it; `buf` is its first buffer. */
export class GrowingBytes implements ByteSink {
  pos = 0;
  constructor(public buf: Buffer = Buffer.allocUnsafe(1 << 16)) {}
  reserve(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const b = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(b, 0, 0, this.pos);
    this.buf = b;
  }
}

/**
 * Append `String(v)` of a number to `out` as ASCII bytes: the shortest round-trip decimal (module
 * comment) without a string for values in [1e-6, 1e15), `String(v)` otherwise. Exact: equal to
 * `String(v)` for every double (property test in test/measurements/number-text.test.ts).
 */
export function writeNumber(out: ByteSink, v: number): void {
  if (v >= 1e-6 && v < 1e15) {
    // e10 = ⌊log10 v⌋, possibly off by one: then the 15-digit search stops one digit early or late
    // (still exact, see below) and the 16/17-digit candidates fall outside their range (→ String).
    const e10 = Math.floor(Math.log10(v));
    // Most values have a short form (a timer's few digits): search up to 7 digits first, then decide
    // 16/17 digits exactly, and only when that finds a shorter form search 8–15 digits.
    if (readsBackAt(v, Math.min(22, 6 - e10)) && shortDecimal(out, v, e10, 0, 7)) return;
    const n = longDigits(v, e10);
    if (n > 0) {
      writeDigits(out, n, n - 1 - e10);
      return;
    }
    if (n < 0 && shortDecimal(out, v, e10, 7, 15)) return;
  }
  const s = String(v);
  out.reserve(s.length);
  for (let k = 0; k < s.length; k++) out.buf[out.pos++] = s.charCodeAt(k);
}

/**
 * Whether round(v·10ᵏ) / 10ᵏ === v (k ≥ 0): `shortDecimal`'s test at one k. Below 10⁸ the test is
 * monotone in k: if it holds at k with n = round(v·10ᵏ), then v·10ᵏ⁺¹ is within 10n·2.2e-16 < ½ of 10n,
 * so it rounds to 10n, and 10n / 10ᵏ⁺¹ is the same correctly rounded quotient, v. So when it fails at
 * the largest k of the ≤ 7-digit search (n ≤ 10⁸ there), every smaller k fails too: one test instead of
 * seven for a value that needs 16 or 17 digits.
 */
function readsBackAt(v: number, k: number): boolean {
  if (k < 0) return false;
  const p = POW10[k]!;
  return Math.round(v * p) / p === v;
}

/**
 * The shortest decimal of `from` + 1 to `to` (≤ 15) significant digits that reads back as v, when none
 * of ≤ `from` does: the fewest decimals k with round(v·10ᵏ) / 10ᵏ === v (module comment), written to
 * `out`. @returns false when there is none.
 */
function shortDecimal(out: ByteSink, v: number, e10: number, from: number, to: number): boolean {
  const kMax = Math.min(22, to - 1 - e10);
  for (let k = Math.max(0, from - e10); k <= kMax; k++) {
    const p = POW10[k]!;
    const n = Math.round(v * p);
    if (n >= 2 ** 50) return false;
    if (n / p === v) {
      writeFixed(out, n, k);
      return true;
    }
  }
  return false;
}

/** The halves of the integer of the last `scaled` call: q·10⁸ + r, r in [0, 10⁸) (both int32). */
let wholeQ = 0;
let wholeR = 0;
/** The last `scaled` call's v·10ᵏ − (wholeQ·10⁸ + wholeR), and ½ulp(v)·10ᵏ (the rounding half-width, exact). */
let rem = 0;
let bound = 0;

/**
 * v·10ᵏ exactly (Dekker's product: hi + lo), as the integer nearest hi in two int32 halves plus the
 * remainder `rem`, and the half-width of v's rounding interval at that scale (`bound`).
 */
function scaled(v: number, vh: number, vl: number, k: number, halfUlp: number): void {
  const hi = v * POW10[k]!;
  const lo = vh * POW10_HI[k]! - hi + vh * POW10_LO[k]! + vl * POW10_HI[k]! + vl * POW10_LO[k]!;
  const whole = Math.round(hi);
  rem = hi - whole + lo; // hi − whole is exact (|·| ≤ ½, a multiple of hi's ulp)
  bound = halfUlp * POW10[k]!;
  let q = Math.floor(whole / 1e8);
  let r = whole - q * 1e8; // q·10⁸ is exact (q·5⁸ < 2⁵³), so is the difference (an integer < 2⁵³)
  if (r < 0) {
    q--;
    r += 1e8;
  } else if (r >= 1e8) {
    q++;
    r -= 1e8;
  }
  wholeQ = q | 0; // whole < 10¹⁷: q < 10⁹
  wholeR = r | 0;
}

/**
 * Whether an integer within `bound` of the last scaled value is a multiple of 10 (then a shorter
 * decimal reads back as v). Integers at the bound itself (near ties) make it undecided: undefined.
 */
function shorterInside(): boolean | undefined {
  const low = rem - bound;
  const high = rem + bound;
  if (Math.abs(low - Math.round(low)) < 1e-7 || Math.abs(high - Math.round(high)) < 1e-7) return undefined;
  for (let j = Math.floor(low) + 1; j < high; j++) if ((wholeR + j) % 10 === 0) return true;
  return false;
}

/**
 * v's closest 16-digit, else 17-digit, decimal that reads back, when no shorter one does, into `digits`.
 * @returns its digit count; −1 when a shorter decimal reads back (≤ 15 digits: `shortDecimal`); 0 when
 * not decided here (a power of two, a near tie, or e10 off by one: the caller uses String).
 */
function longDigits(v: number, e10: number): number {
  f64[0] = v;
  const hiWord = u32[1]!;
  // A power of two: the gap below is half the gap above (lopsided interval); left to String.
  if ((hiWord & 0xfffff) === 0 && u32[0] === 0) return 0;
  const exp = ((hiWord >>> 20) & 0x7ff) - 1023;
  // ½ulp(v) = 2^(exp − 53), built from its bits (exact).
  u32[1] = (exp - 53 + 1023) << 20;
  u32[0] = 0;
  const halfUlp = f64[0];
  const vh = v * SPLITTER - (v * SPLITTER - v);
  const vl = v - vh;
  for (let n = 16; n <= 17; n++) {
    const k = n - 1 - e10;
    if (k < 1 || k > 22) return 0;
    scaled(v, vh, vl, k, halfUlp);
    const shorter = shorterInside();
    if (shorter === undefined) return 0;
    if (shorter) return n === 16 ? -1 : 0;
    const d = Math.round(rem);
    // Halfway between two integers String takes the even one: left to it.
    if (Math.abs(rem - d) > 0.4999) return 0;
    if (Math.abs(rem - d) < bound) return splitDigits(d, n) ? n : 0;
  }
  return 0;
}

/**
 * The n digits (16 or 17) of wholeQ·10⁸ + wholeR + d into `digits`. @returns false when that integer
 * does not have n digits (e10 was off by one) or ends in 0.
 */
function splitDigits(d: number, n: number): boolean {
  let q = wholeQ;
  let r = wholeR + d;
  if (r < 0) {
    q--;
    r += 1e8;
  } else if (r >= 1e8) {
    q++;
    r -= 1e8;
  }
  if (r % 10 === 0 || q < POW10[n - 9]! || q >= POW10[n - 8]!) return false;
  // Both halves are below 2³¹: int32 arithmetic (a float64 `%` is a library call).
  let ri = r | 0;
  let qi = q | 0;
  for (let i = n - 1; i >= n - 8; i--) {
    const t = (ri / 10) | 0;
    digits[i] = 48 + ri - t * 10;
    ri = t;
  }
  for (let i = n - 9; i >= 0; i--) {
    const t = (qi / 10) | 0;
    digits[i] = 48 + qi - t * 10;
    qi = t;
  }
  return true;
}

/** `digits[0, n)` × 10⁻ᵏ (k ≥ 1) in plain notation: `ddd.ddd`, or `0.000ddd`. */
function writeDigits(out: ByteSink, n: number, k: number): void {
  const lead = n - k;
  out.reserve(n + 2 + Math.max(0, -lead));
  const buf = out.buf;
  let p = out.pos;
  if (lead <= 0) {
    buf[p++] = 48;
    buf[p++] = 46;
    for (let i = lead; i < 0; i++) buf[p++] = 48;
    for (let i = 0; i < n; i++) buf[p++] = digits[i]!;
  } else {
    for (let i = 0; i < lead; i++) buf[p++] = digits[i]!;
    buf[p++] = 46;
    for (let i = lead; i < n; i++) buf[p++] = digits[i]!;
  }
  out.pos = p;
}

/**
 * The integer n < 2⁵⁰ divided by 10ᵏ, in plain decimal notation (no trailing zeros when n is not a
 * multiple of 10), digits from two int32 halves.
 */
function writeFixed(out: ByteSink, n: number, k: number): void {
  const q = Math.floor(n / 1e8);
  let lowI = (n - q * 1e8) | 0;
  let highI = q | 0;
  let count = 1;
  for (let t = highI > 0 ? highI : lowI; t >= 10; t = (t / 10) | 0) count++;
  if (highI > 0) count += 8;
  const width = Math.max(count, k + 1) + (k > 0 ? 1 : 0);
  out.reserve(width);
  const buf = out.buf;
  let p = out.pos + width;
  out.pos = p;
  const places = Math.max(count, k + 1);
  for (let d = 0; d < places; d++) {
    if (d === k && k > 0) buf[--p] = 46;
    const t = (lowI / 10) | 0;
    buf[--p] = 48 + lowI - t * 10;
    lowI = t;
    if (d === 7) {
      lowI = highI;
      highI = 0;
    }
  }
}
