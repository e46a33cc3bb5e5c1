/**
 * The decode-attention law with work items (issue 16 piece 1; core/laws/attention.ts decodeAttentionUs):
 *
 *   t = floor + p · item_us + kv_bytes / (r_max · p / (p + p_½)),   p = batch × n_kv (KV heads on the GPU)
 *
 * fitted jointly on every row by minimising mean |ln(pred/meas)| (the attention fitters' objective)
 * by IRLS with analytic derivatives (irlsFit: one pass over the rows per iteration, one log per
 * distinct (work, items) pair). Rows are
 * packed into typed arrays once per fit; the floor + rate searches of src/fit/attention.ts evaluate
 * the same objective as a product of ratios (searchLogL1, floorLogL1: one log per ~150 rows).
 * Deterministic.
 */
import { type DecodeLaw, decodeAttentionUs } from '../core/laws/attention.ts';

/** A decode row as the law needs it: KV bytes, work items (batch × KV heads), measured latency. */
export interface DecodePoint {
  work: number;
  items?: number;
  latency_us: number;
}

/**
 * Rows packed for the objectives: KV bytes, work items and ln(latency µs), one entry per row, and
 * `workInv`, two per row: (work, 1/latency (1/µs)) side by side, what the searches' ratio sums read
 * (one array in their loop: 2.3 instead of 3.8 ns a row).
 */
export interface PackedRows {
  work: Float64Array;
  items: Float64Array;
  lnLat: Float64Array;
  workInv: Float64Array;
}

/** Views of the first `n` rows of `b`. */
const headRows = (b: PackedRows, n: number): PackedRows => ({
  work: b.work.subarray(0, n),
  items: b.items.subarray(0, n),
  lnLat: b.lnLat.subarray(0, n),
  workInv: b.workInv.subarray(0, 2 * n),
});

/** Pack rows (or the rows at `idx`, a resample) into typed arrays; missing items count as 0. */
export function packRows(points: readonly DecodePoint[], idx?: ArrayLike<number>): PackedRows {
  const n = idx ? idx.length : points.length;
  const out = scratchRows(n);
  for (let i = 0; i < n; i++) {
    const p = points[idx ? idx[i]! : i]!;
    out.work[i] = p.work;
    out.items[i] = p.items ?? 0;
    out.lnLat[i] = Math.log(p.latency_us);
    out.workInv[2 * i] = p.work;
    out.workInv[2 * i + 1] = 1 / p.latency_us;
  }
  return out;
}

/** Empty rows with room for `n` (a bootstrap's buffers, filled per resample by gatherRows/gatherClass). */
export function scratchRows(n: number): PackedRows {
  const f = (k: number) => new Float64Array(k);
  return { work: f(n), items: f(n), lnLat: f(n), workInv: f(2 * n) };
}

/**
 * Rows `idx` of `src`, in that order, written into `out` (room for idx.length): views of exactly
 * idx.length rows. The same values as packRows(points, idx) when src = packRows(points), without the
 * allocation and the logs.
 */
export function gatherRows(src: PackedRows, idx: ArrayLike<number>, out: PackedRows): PackedRows {
  const n = idx.length;
  for (let i = 0; i < n; i++) {
    const j = idx[i]!;
    out.work[i] = src.work[j]!;
    out.items[i] = src.items[j]!;
    out.lnLat[i] = src.lnLat[j]!;
    out.workInv[2 * i] = src.workInv[2 * j]!;
    out.workInv[2 * i + 1] = src.workInv[2 * j + 1]!;
  }
  return headRows(out, n);
}

/** Rows `idx` of `src` whose class `cls[j]` is `c`, in idx order, written into `out` (room for idx.length): views. */
export function gatherClass(
  src: PackedRows,
  idx: ArrayLike<number>,
  cls: Uint8Array,
  c: number,
  out: PackedRows,
): PackedRows {
  let n = 0;
  for (let i = 0; i < idx.length; i++) {
    const j = idx[i]!;
    if (cls[j] !== c) continue;
    out.work[n] = src.work[j]!;
    out.items[n] = src.items[j]!;
    out.lnLat[n] = src.lnLat[j]!;
    out.workInv[2 * n] = src.workInv[2 * j]!;
    out.workInv[2 * n++ + 1] = src.workInv[2 * j + 1]!;
  }
  return headRows(out, n);
}

/** A ratio pred/meas beyond e^±345 leaves the products' range: such rows take the per-row logs. */
const RATIO_MAX = 1e150;
const RATIO_MIN = 1 / RATIO_MAX;

/**
 * Σ|ln q_i| over the ratios q_i = (floor_us + c_i) · inv_i, c_i = a_i · scale, with (a_i, inv_i) =
 * (`ai[2i]`, `ai[2i + 1]`) (a = work, scale = 1/rate; or a = precomputed read times, scale = 1; inv
 * = 1/latency), with one log per ~150 rows instead of one per row: Σ|ln q| = ln Π_{q≥1} q − ln
 * Π_{q<1} q, each product flushed into the sum of logs before it passes 1e150 (1e-150), so no
 * product leaves the normal range while every q is within [1/RATIO_MAX, RATIO_MAX]; otherwise the
 * per-row sum is returned. Equal to the per-row sum to a few ulps of the total (a test checks it,
 * docs/performance.md), at ~2–4 ns a row instead of ~27.
 */
function ratioAbsLogSum(ai: Float64Array, scale: number, floor_us: number): number {
  // The range test only marks the sum for the fallback, taken after the loop (the same result as
  // returning at the first such row): a return inside the loop cost ≈ 40 % of the row time.
  const max = RATIO_MAX;
  const min = RATIO_MIN;
  let hi = 1;
  let lo = 1;
  let acc = 0;
  let outside = false;
  for (let i = 0; i < ai.length; i += 2) {
    const q = (floor_us + ai[i]! * scale) * ai[i + 1]!;
    if (q >= 1) {
      outside ||= !(q < max);
      hi *= q;
      if (hi > max) {
        acc += Math.log(hi);
        hi = 1;
      }
    } else {
      outside ||= !(q > min);
      lo *= q;
      if (lo < min) {
        acc -= Math.log(lo);
        lo = 1;
      }
    }
  }
  return outside ? rowAbsLogSum(ai, scale, floor_us) : acc + Math.log(hi) - Math.log(lo);
}

/**
 * Calls of ratioAbsLogSum when the module loads on 400 ratios alternating 1e3 and 1e-3, so that both
 * flushes (product above 1e150, below 1e-150) have feedback before V8 optimises the function. Compiled
 * before a fit's rows had reached a flush, it was deoptimised at the first one, and the code compiled
 * again boxed its doubles: 163 MB of heap numbers per h200 decode fit (an allocation profile,
 * docs/performance.md "session 15"). The result is discarded.
 */
function warmRatioAbsLogSum(): void {
  const n = 400;
  const ai = Float64Array.from({ length: 2 * n }, (_, k) => (k % 2 === 0 ? 1 : k % 4 === 1 ? 1e3 : 1e-3));
  for (let k = 0; k < 3; k++) ratioAbsLogSum(ai, 1, 0);
}
warmRatioAbsLogSum();

/** ratioAbsLogSum row by row (one log per row): its fallback outside the products' range. */
function rowAbsLogSum(ai: Float64Array, scale: number, floor_us: number): number {
  let s = 0;
  for (let i = 0; i < ai.length; i += 2) s += Math.abs(Math.log((floor_us + ai[i]! * scale) * ai[i + 1]!));
  return s;
}

/**
 * mean |ln((floor_us + work_i / rate) / meas_i)| over packed rows by ratioAbsLogSum: the objective of
 * the floor + rate searches (fitFloorRate, the bootstrap resamples), packedLogL1 of the floor + rate
 * law to a few ulps.
 */
export function searchLogL1(rows: PackedRows, floor_us: number, rate: number): number {
  return ratioAbsLogSum(rows.workInv, 1 / rate, floor_us) / rows.lnLat.length;
}

/**
 * mean |ln((floor_us + c_i) / meas_i)| over packed rows, c_i = the read time work_i / rate computed
 * once per search (`read`, readTimes: (c_i, 1/latency_i) side by side): searchLogL1 with the rate
 * held (the decode floor stage).
 */
export function floorLogL1(read: Float64Array, floor_us: number): number {
  return ratioAbsLogSum(read, 1, floor_us) / (read.length / 2);
}

/**
 * (work_i / rate as the objective computes it (work · (1/rate)), 1/latency_i) side by side into `out`
 * (room for two per row): a view, floorLogL1's `read`.
 */
export function readTimes(rows: PackedRows, rate: number, out: Float64Array): Float64Array {
  const inv = 1 / rate;
  const wi = rows.workInv;
  for (let i = 0; i < wi.length; i += 2) {
    out[i] = wi[i]! * inv;
    out[i + 1] = wi[i + 1]!;
  }
  return out.subarray(0, wi.length);
}

/**
 * mean |ln(decodeAttentionUs(law)/meas)| over packed rows: the same value as evaluating the core law
 * row by row, with 1/rate hoisted (a test checks they agree). A floor + rate law (item_us = p_half =
 * 0) takes a loop without the ramp: floor + p·0 + work·inv·1 is floor + work·inv exactly.
 */
export function packedLogL1(a: PackedRows, law: DecodeLaw): number {
  const { work, items, lnLat } = a;
  const inv = 1 / law.rate;
  const ph = law.p_half;
  if (law.item_us === 0 && ph === 0) {
    const floor = law.floor_us;
    let t = 0;
    for (let i = 0; i < lnLat.length; i++) t += Math.abs(Math.log(floor + work[i]! * inv) - lnLat[i]!);
    return t / lnLat.length;
  }
  let s = 0;
  for (let i = 0; i < lnLat.length; i++) {
    const p = items[i]!;
    const ramp = ph > 0 && p > 0 ? 1 + ph / p : 1;
    s += Math.abs(Math.log(law.floor_us + p * law.item_us + work[i]! * inv * ramp) - lnLat[i]!);
  }
  return s / lnLat.length;
}

/** Log-coefficients (ln floor, ln rate, ln item_us, ln p_½) → law; a coefficient that is 0 in `fixed` stays exactly 0 (a term left out). */
const toLaw = (x: Float64Array, fixed: DecodeLaw): DecodeLaw => ({
  floor_us: Math.exp(x[0]!),
  rate: Math.exp(x[1]!),
  item_us: fixed.item_us === 0 ? 0 : Math.exp(x[2]!),
  p_half: fixed.p_half === 0 ? 0 : Math.exp(x[3]!),
});

/** An IRLS step that improves mean |ln(pred/meas)| by less than this ends the fit. */
const IRLS_STOP = 1e-8;

/** Residuals below this (log units) get the IRLS weight of this residual (smoothing of |r| at 0). */
const IRLS_EPS = 1e-4;

/**
 * Rows as the IRLS reads them, grouped by their distinct (work, items) pair: pair k is (`work[k]`,
 * `items[k]`), pairs in first-seen order, and its rows' ln latencies are lnLat[start[k]] …
 * lnLat[start[k+1] − 1], in row order. The law's prediction depends on the pair only, so irlsObjective
 * takes one log per pair instead of one per row (h200 decode: 62k rows, 785 pairs), runs over each
 * pair's rows in one tight loop and sums the normal equations once per pair.
 */
export interface PairedRows {
  lnLat: Float64Array;
  start: Uint32Array;
  work: Float64Array;
  items: Float64Array;
}

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
/**
 * `h` mixed with a double's two 32-bit words (murmur3's block step, then its finaliser): the decode
 * sizes are products of powers of two, whose low mantissa bits are all 0, so every bit must reach
 * the slot index (the low bits of the result).
 */
const bitsHash = (x: number, h: number): number => {
  f64[0] = x;
  h = mixWord(mixWord(h, u32[0]!), u32[1]!);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
};
/** murmur3's step for one 32-bit word `k` into the hash `h`. */
const mixWord = (h: number, k: number): number => {
  k = Math.imul(k, 0xcc9e2d51);
  k = Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  h ^= k;
  return (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0;
};

/** Each row's pair (`pt`) and the distinct pairs in first-seen order (open addressing on the values' bits, equality by ===). */
function pairIds(rows: PackedRows): { pt: Uint32Array; work: Float64Array; items: Float64Array } {
  const n = rows.work.length;
  let size = 16;
  while (size < 2 * n) size *= 2;
  const slots = new Int32Array(size).fill(-1);
  const pt = new Uint32Array(n);
  const work = new Float64Array(n);
  const items = new Float64Array(n);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const w = rows.work[i]!;
    const p = rows.items[i]!;
    let s = bitsHash(p, bitsHash(w, 0x2545f491)) & (size - 1);
    for (;;) {
      const k = slots[s]!;
      if (k < 0) {
        slots[s] = m;
        work[m] = w;
        items[m] = p;
        pt[i] = m++;
        break;
      }
      if (work[k] === w && items[k] === p) {
        pt[i] = k;
        break;
      }
      s = (s + 1) & (size - 1);
    }
  }
  return { pt, work: work.subarray(0, m), items: items.subarray(0, m) };
}

/** PairedRows from its arrays: every PairedRows is made here, so the IRLS loops see one object shape. */
const paired = (lnLat: Float64Array, start: Uint32Array, work: Float64Array, items: Float64Array): PairedRows => ({
  lnLat,
  start,
  work,
  items,
});

/**
 * The bounds of rows i = 0…n−1 grouped by pair (`pt[i]` of `m`), into `start` (room for m + 1):
 * start[k] = the first slot of pair k, start[m] = n. The scatter (scatterRows, scatterDrawn) then
 * moves each bound to its pair's end; unshiftStarts moves them back.
 */
function countStarts(n: number, pt: Uint32Array, m: number, start: Uint32Array): void {
  start.fill(0, 0, m + 1);
  for (let i = 0; i < n; i++) start[pt[i]! + 1]!++;
  for (let k = 0; k < m; k++) start[k + 1]! += start[k]!;
}

/** After the scatter each bound start[k] stands at pair k's end (pair k + 1's start): shifted back. */
function unshiftStarts(m: number, start: Uint32Array): void {
  for (let k = m; k > 0; k--) start[k] = start[k - 1]!;
  start[0] = 0;
}

/** Row i's ln latency `ln[i]` into its pair's next slot of `lnLat` (a stable counting sort, countStarts). */
function scatterRows(n: number, ln: Float64Array, pt: Uint32Array, lnLat: Float64Array, start: Uint32Array): void {
  for (let i = 0; i < n; i++) lnLat[start[pt[i]!]!++] = ln[i]!;
}

/** scatterRows for drawn rows: row i's ln latency is `ln[idx[i]]`. */
function scatterDrawn(
  ln: Float64Array,
  idx: ArrayLike<number>,
  pt: Uint32Array,
  lnLat: Float64Array,
  start: Uint32Array,
): void {
  for (let i = 0; i < idx.length; i++) lnLat[start[pt[i]!]!++] = ln[idx[i]!]!;
}

/** `rows` grouped by their distinct (work, items) pairs (PairedRows). */
export function pairRows(rows: PackedRows): PairedRows {
  const { pt, work, items } = pairIds(rows);
  const n = pt.length;
  const m = work.length;
  const lnLat = new Float64Array(n);
  const start = new Uint32Array(m + 1);
  countStarts(n, pt, m, start);
  scatterRows(n, rows.lnLat, pt, lnLat, start);
  unshiftStarts(m, start);
  return paired(lnLat, start, work, items);
}

/**
 * A resampler of packed rows: `(idx) => rows idx of packed` grouped by pair (pairs in first-seen
 * order of idx), written into buffers reused across calls (room for `size` rows; read the result
 * before the next call). The same as pairRows(gatherRows(packed, idx)), with each row's pair found
 * once per fit (one array lookup per drawn row instead of a hash).
 */
export function pairedResampler(packed: PackedRows, size: number): (idx: ArrayLike<number>) => PairedRows {
  const src = pairIds(packed);
  const local = new Int32Array(src.work.length).fill(-1);
  const [lnLat, pt, work, items, ids, start] = [
    new Float64Array(size),
    new Uint32Array(size),
    new Float64Array(size),
    new Float64Array(size),
    new Uint32Array(size),
    new Uint32Array(size + 1),
  ];
  return (idx) => {
    // Each pair's rows are counted as they are met (start[k + 1], zeroed when pair k is first seen):
    // countStarts' counts without its second pass over the rows.
    let m = 0;
    start[0] = 0;
    for (let i = 0; i < idx.length; i++) {
      const s = src.pt[idx[i]!]!;
      let k = local[s]!;
      if (k < 0) {
        k = local[s] = m;
        work[m] = src.work[s]!;
        items[m] = src.items[s]!;
        ids[m++] = s;
        start[m] = 0;
      }
      pt[i] = k;
      start[k + 1]!++;
    }
    for (let k = 0; k < m; k++) local[ids[k]!] = -1;
    const n = idx.length;
    for (let k = 0; k < m; k++) start[k + 1]! += start[k]!;
    scatterDrawn(packed.lnLat, idx, pt, lnLat, start);
    unshiftStarts(m, start);
    return paired(lnLat.subarray(0, n), start.subarray(0, m + 1), work.subarray(0, m), items.subarray(0, m));
  };
}
/** Per distinct pair, what the IRLS reads: pred, ln pred, −(read + extra), p·item, extra. */
const PAIR_STRIDE = 5;

/**
 * Each pair's prediction pred = floor + p·item_us + read + extra, read = work·(1/rate), extra =
 * read·p_½/p (0 without a ramp), its log and the derivatives of ln pred times pred, into `out`
 * (PAIR_STRIDE per pair). The logs are taken in a loop of their own: Math.log is a call that
 * clobbers every floating-point register, which cost the first loop its live values each pair.
 */
function pairTerms(d: PairedRows, law: DecodeLaw, out: Float64Array): void {
  const { floor_us, item_us, p_half } = law;
  const inv = 1 / law.rate;
  const { work, items } = d;
  const np = work.length;
  for (let k = 0; k < np; k++) {
    const p = items[k]!;
    const read = work[k]! * inv;
    const extra = p_half > 0 && p > 0 ? (read * p_half) / p : 0;
    const o = k * PAIR_STRIDE;
    out[o] = floor_us + p * item_us + read + extra;
    out[o + 2] = -(read + extra);
    out[o + 3] = p * item_us;
    out[o + 4] = extra;
  }
  for (let o = 0; o < np * PAIR_STRIDE; o += PAIR_STRIDE) out[o + 1] = Math.log(out[o]!);
}

/**
 * mean |ln(pred/meas)| over the rows at a law, with the normal equations of the IRLS step there in
 * `ne` (the 10 distinct entries of the symmetric JᵀWJ, a00, a10, a11, a20, a21, a22, a30, a31, a32,
 * a33, then the 4 of JᵀWr; `terms`: PAIR_STRIDE per pair, scratch): r_i = ln pred_i − ln meas_i,
 * W_i = 1/max(|r_i|, IRLS_EPS), J the analytic derivatives of ln pred_i with respect to (ln floor,
 * ln rate, ln item_us, ln p_½). pred_i = floor + p·item_us + read + read·p_½/p with read =
 * work·(1/rate): packedLogL1's prediction to rounding (for a floor + rate law, bit for bit). The row
 * pass takes |r_i| and sums, per pair k, S1_k = Σ 1/max(|r_i|, ε) and S2_k = Σ r_i/max(|r_i|, ε);
 * since J_i·pred_i depends on the pair only, JᵀWJ = Σ_k (S1_k/pred_k²)·(pred J)(pred J)ᵀ and JᵀWr =
 * Σ_k (S2_k/pred_k)·(pred J): 14 products per pair instead of per row (docs/fitting.md "Decode
 * attention": the reassociation moves the sums in their last bits). The normal equations are summed
 * in the row pass (irlsPairSums), at every point, also one whose step irlsFit then rejects.
 */
function irlsObjective(rows: PairedRows, law: DecodeLaw, terms: Float64Array, ne: Float64Array): number {
  pairTerms(rows, law, terms);
  return irlsPairSums(rows, law.floor_us, terms, ne) / rows.lnLat.length;
}

/**
 * Σ |r| over the rows, and the normal equations from each pair's Σ w and Σ w·r and its terms (`j0` =
 * floor, pred·∂ln pred/∂ln floor) into `ne` (irlsObjective). One loop over the pairs: the 14 sums of
 * a pair overlap its rows' dependent additions (summed after the row pass in a loop of their own,
 * they cost ≈ 10 ns a pair more; the same operations in the same order, bit for bit). In a function
 * of its own: with the step's solve after it in one function, the loop-entry (OSR) code reached that
 * call without its feedback and was deoptimised ≈ 70 times per h200 fit.
 */
function irlsPairSums(rows: PairedRows, j0: number, terms: Float64Array, ne: Float64Array): number {
  const { lnLat, start } = rows;
  const eps = IRLS_EPS;
  const np = rows.work.length;
  let obj = 0;
  let a00 = 0;
  let a10 = 0;
  let a11 = 0;
  let a20 = 0;
  let a21 = 0;
  let a22 = 0;
  let a30 = 0;
  let a31 = 0;
  let a32 = 0;
  let a33 = 0;
  let b0 = 0;
  let b1 = 0;
  let b2 = 0;
  let b3 = 0;
  for (let k = 0; k < np; k++) {
    const o = k * PAIR_STRIDE;
    const lnPred = terms[o + 1]!;
    let s1 = 0;
    let s2 = 0;
    for (let i = start[k]!, end = start[k + 1]!; i < end; i++) {
      const r = lnPred - lnLat[i]!;
      const ar = Math.abs(r);
      obj += ar;
      const iw = 1 / Math.max(ar, eps);
      s1 += iw;
      s2 += r * iw;
    }
    const pred = terms[o]!;
    const w = s1 / (pred * pred);
    const wr = s2 / pred;
    // Derivatives of ln pred times pred: floor, −(read + extra), p·item, extra.
    const j1 = terms[o + 2]!;
    const j2 = terms[o + 3]!;
    const j3 = terms[o + 4]!;
    b0 += wr * j0;
    b1 += wr * j1;
    b2 += wr * j2;
    b3 += wr * j3;
    a00 += w * j0 * j0;
    a10 += w * j1 * j0;
    a11 += w * j1 * j1;
    a20 += w * j2 * j0;
    a21 += w * j2 * j1;
    a22 += w * j2 * j2;
    a30 += w * j3 * j0;
    a31 += w * j3 * j1;
    a32 += w * j3 * j2;
    a33 += w * j3 * j3;
  }
  ne[0] = a00;
  ne[1] = a10;
  ne[2] = a11;
  ne[3] = a20;
  ne[4] = a21;
  ne[5] = a22;
  ne[6] = a30;
  ne[7] = a31;
  ne[8] = a32;
  ne[9] = a33;
  ne[10] = b0;
  ne[11] = b1;
  ne[12] = b2;
  ne[13] = b3;
  return obj;
}

/**
 * Calls of irlsPairSums before irlsFit's first fit (two pairs of 256 rows, three times: enough
 * bytecode run for V8 to allocate the function's feedback and fill it), so that the code after its
 * row loop (the stores into `ne`) has feedback before V8 optimises it: the loop-entry (OSR) code,
 * compiled during the first fit's first pass, otherwise left the loop into stores it had no feedback
 * for and was deoptimised at every later call (196 times per h200 decode + prefill fit, finishing
 * each pass in the interpreter). Run at the first fit rather than when the module loads, so that no
 * garbage collection in between can age the feedback out. The results are discarded.
 */
function warmIrlsPairSums(): void {
  const n = 512;
  const ln = Float64Array.from({ length: n }, (_, i) => (i % 7) * 0.25);
  const rows = paired(ln, Uint32Array.of(0, n / 2, n), Float64Array.of(1, 2), Float64Array.of(1, 1));
  const terms = Float64Array.of(1, 0.5, -1, 0, 0, 2, 1, -1, 0, 0);
  const ne = new Float64Array(14);
  for (let k = 0; k < 3; k++) irlsPairSums(rows, 1, terms, ne);
}
let irlsWarmed = false;

/** Entry (u, k) of the symmetric JᵀWJ, row by row, as its index in irlsPairSums' `ne`. */
const NE_ENTRY = Uint8Array.of(0, 1, 3, 6, 1, 2, 4, 7, 3, 4, 5, 8, 6, 7, 8, 9);

/**
 * The damped Gauss–Newton step: the solution of (JᵀWJ + λ·diag(JᵀWJ + 1e-12))·d = −JᵀWr (`ne`,
 * irlsPairSums) into `d`, computed as solveLinear (core/numeric/lsq.ts) computes it (partial
 * pivoting, the same eliminations in the same order, bit for bit) in the 4×5 buffer `M`. Returns false
 * where solveLinear returns undefined (a pivot of magnitude ≤ 1e-300 or NaN).
 */
export function dampedStep(ne: Float64Array, lambda: number, M: Float64Array, d: Float64Array): boolean {
  for (let u = 0; u < 4; u++) {
    for (let k = 0; k < 4; k++) {
      const v = ne[NE_ENTRY[u * 4 + k]!]!;
      M[u * 5 + k] = u === k ? v + lambda * (v + 1e-12) : v;
    }
    M[u * 5 + 4] = -ne[10 + u]!;
  }
  for (let c = 0; c < 4; c++) {
    let p = c;
    for (let r = c + 1; r < 4; r++) if (Math.abs(M[r * 5 + c]!) > Math.abs(M[p * 5 + c]!)) p = r;
    const piv = M[p * 5 + c]!;
    if (!(Math.abs(piv) > 1e-300)) return false;
    if (p !== c)
      for (let k = 0; k < 5; k++) {
        const t = M[c * 5 + k]!;
        M[c * 5 + k] = M[p * 5 + k]!;
        M[p * 5 + k] = t;
      }
    for (let r = 0; r < 4; r++) {
      if (r === c) continue;
      const f = M[r * 5 + c]! / piv;
      for (let k = c; k <= 4; k++) M[r * 5 + k]! -= f * M[c * 5 + k]!;
    }
  }
  for (let i = 0; i < 4; i++) d[i] = M[i * 5 + 4]! / M[i * 5 + i]!;
  return true;
}

/**
 * irlsFit's buffers, shared by its calls (it calls nothing that fits, and reads no entry it has not
 * written in the same call): the 4×5 solve, the step, the point and the trial point (log
 * coefficients), and the two normal-equation sets. Allocated per call they were 7 typed arrays per
 * bootstrap resample, the larger ones outside the heap.
 */
const IRLS_STATE = {
  M: new Float64Array(20),
  d: new Float64Array(4),
  x: new Float64Array(4),
  trial: new Float64Array(4),
  ne: new Float64Array(14),
  tNe: new Float64Array(14),
};

/** Room for PAIR_STRIDE terms per pair, `np` pairs, shared by irlsFit's calls (grown, never shrunk). */
let irlsTermsBuf = new Float64Array(0);
function irlsTerms(np: number): Float64Array {
  if (irlsTermsBuf.length < np * PAIR_STRIDE) irlsTermsBuf = new Float64Array(np * PAIR_STRIDE);
  return irlsTermsBuf;
}

/**
 * Minimise mean |ln(pred/meas)| by iteratively reweighted least squares with analytic derivatives
 * (a work-item coefficient that is 0 in `from` stays 0: the floor + rate law is the same search)
 * (each iteration one pass over the rows, irlsObjective, and a 4×4 solve, dampedStep),
 * Levenberg-damped: a step is taken only when it lowers the L1 objective, else the damping grows ×10
 * (the normal equations of the point kept are reused; they are summed only at a point the next
 * iteration steps from). Stops after `iters` iterations or when a step improves the objective by less
 * than IRLS_STOP. `maxRate` (bytes per µs): the rate is projected onto ≤ maxRate (the datasheet HBM
 * rate: a fitted asymptote above it is an L2 rate, and the registry gates refuse it). `rows`: packed
 * rows (paired here) or rows already paired (a resample, pairedResampler). Deterministic; 10–40
 * passes where the derivative-free search needs ~1000.
 */
export function irlsFit(
  rows: PackedRows | PairedRows,
  from: DecodeLaw,
  iters = 40,
  maxRate = Infinity,
): DecodeLaw & { objective: number } {
  if (!irlsWarmed) {
    warmIrlsPairSums();
    irlsWarmed = true;
  }
  const pairs = 'start' in rows ? rows : pairRows(rows);
  const terms = irlsTerms(pairs.work.length);
  const { M, d, x, trial } = IRLS_STATE;
  // The normal equations of the point kept (`ne`) and of the trial point (`tNe`), swapped on a step taken.
  let ne = IRLS_STATE.ne;
  let tNe = IRLS_STATE.tNe;
  const lnMax = Math.log(maxRate);
  x.set([
    Math.log(from.floor_us),
    Math.min(Math.log(from.rate), lnMax),
    Math.log(Math.max(from.item_us, 1e-9)),
    Math.log(Math.max(from.p_half, 1e-9)),
  ]);
  let law = toLaw(x, from);
  let objective = irlsObjective(pairs, law, terms, ne);
  let lambda = 1e-3;
  for (let it = 0; it < iters && lambda < 1e8; it++) {
    if (dampedStep(ne, lambda, M, d)) {
      for (let k = 0; k < 4; k++) trial[k] = x[k]! + Math.max(-2, Math.min(2, d[k]!));
      trial[1] = Math.min(trial[1]!, lnMax);
      const tLaw = toLaw(trial, from);
      const tObjective = irlsObjective(pairs, tLaw, terms, tNe);
      if (tObjective < objective) {
        const gain = objective - tObjective;
        x.set(trial);
        law = tLaw;
        objective = tObjective;
        const kept = ne;
        ne = tNe;
        tNe = kept;
        lambda = Math.max(lambda / 10, 1e-9);
        if (gain < IRLS_STOP) break;
        continue;
      }
    }
    lambda *= 10;
  }
  return { floor_us: law.floor_us, rate: law.rate, item_us: law.item_us, p_half: law.p_half, objective };
}

/**
 * Fit the four coefficients of the work-item law on `packed` (mean |ln(pred/meas)|; packed rows are
 * paired once for every IRLS run here, pairRows).
 * - 'cold' (`init` = the floor + rate fit of the same rows): IRLS (irlsFit) from two starts, (init
 *   floor, init rate, item_us = floor/1000, p_½ = 1) and (…, floor/100, 4); the lower objective
 *   (ties → the first) wins; a p_½ under 1e-3 items (no ramp) is refitted with p_½ held at 0.
 * - 'warm' (a holdout fold, `init` = the full-data optimum): IRLS from `init`.
 * - 'resample' (a bootstrap resample, `init` = the full-data optimum): IRLS from `init` only.
 * `maxRate`: the rate's upper bound (irlsFit).
 * @returns the law and its objective over the rows
 */
export function fitParallelLaw(
  packed: PackedRows | PairedRows,
  init: DecodeLaw,
  mode: 'cold' | 'warm' | 'resample' = 'cold',
  maxRate = Infinity,
): DecodeLaw & { objective: number } {
  const rows = 'start' in packed ? packed : pairRows(packed);
  if (mode === 'resample') return irlsFit(rows, init, 25, maxRate);
  if (mode === 'warm') return irlsFit(rows, init, 40, maxRate);
  let best: (DecodeLaw & { objective: number }) | undefined;
  for (const [d, p_half] of [
    [1000, 1],
    [100, 4],
  ] as const) {
    const r = irlsFit(
      rows,
      { floor_us: init.floor_us, rate: init.rate, item_us: init.floor_us / d, p_half },
      40,
      maxRate,
    );
    if (!best || r.objective < best.objective) best = r;
  }
  // A half-point under P_HALF_MIN_ITEMS changes no row's read by 0.1 % (every row has p ≥ 1): no ramp,
  // refitted with p_½ held at 0 (l40s full attention stopped at 1e-22 items).
  return best!.p_half >= P_HALF_MIN_ITEMS ? best! : irlsFit(rows, { ...best!, p_half: 0 }, 40, maxRate);
}

/** A fitted p_½ below this many work items is no ramp (fitParallelLaw refits it as 0). */
const P_HALF_MIN_ITEMS = 1e-3;

/** Predictions of the law for rows (µs). */
export function predictLaw(points: readonly DecodePoint[], law: DecodeLaw): number[] {
  return points.map((p) => decodeAttentionUs(law, p.items ?? 0, p.work));
}
