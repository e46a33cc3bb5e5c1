/**
 * The MoE routing fit's grouping of rows by shape and kernel (moe.ts pairMoeAll; issue 17: its cost).
 * A shape is keyed by the string of its fields joined with `|` (lane, kernel_source, dtype, tokens, hidden,
 * inter, topk, experts, tp, ep), and the pairs come in that key's order. Here rows are grouped by their
 * fields (hashed, no string per row), each group's latencies kept per column (balanced, then each
 * skewed distribution) in flat arrays, and the key strings built once per group to order them; groups
 * of one key string (fields that differ but print alike) are merged, as one key held them all.
 * Pure: no I/O.
 */
import { median } from '../core/numeric/stats.ts';
import type { MoeRow } from '../measurements/schema.ts';

/**
 * Rows grouped by shape and kernel: each group's first row, and its latencies by column (0 balanced,
 * 1 + d the distribution d): slot g·cols + c holds the first latency in `first`, how many in `count`,
 * and all of them in `more` once there are two.
 */
export class ShapeGroups {
  readonly rows: MoeRow[] = [];
  private first: Float64Array;
  private count: Int32Array;
  private readonly more = new Map<number, number[]>();

  constructor(
    readonly cols: number,
    capacity: number,
  ) {
    this.first = new Float64Array(cols * capacity);
    this.count = new Int32Array(cols * capacity);
  }

  /** A new group whose first row is `r`; its index. */
  add(r: MoeRow): number {
    const g = this.rows.length;
    this.rows.push(r);
    if ((g + 1) * this.cols > this.first.length) {
      const first = new Float64Array(2 * this.first.length + this.cols);
      first.set(this.first);
      this.first = first;
      const count = new Int32Array(first.length);
      count.set(this.count);
      this.count = count;
    }
    return g;
  }

  /** Add latency `v` to group g's column c. */
  push(g: number, c: number, v: number): void {
    const slot = g * this.cols + c;
    const k = this.count[slot]!;
    if (k === 0) this.first[slot] = v;
    else if (k === 1) this.more.set(slot, [this.first[slot]!, v]);
    else this.more.get(slot)!.push(v);
    this.count[slot] = k + 1;
  }

  /** How many latencies group g's column c holds. */
  size(g: number, c: number): number {
    return this.count[g * this.cols + c]!;
  }

  /** median() of group g's column c (non-empty); one value without the copy and sort (type 7 at h = 0: v + 0·(v − v)). */
  median(g: number, c: number): number {
    const slot = g * this.cols + c;
    if (this.count[slot] !== 1) return median(this.more.get(slot)!);
    const v = this.first[slot]!;
    return v + 0 * (v - v);
  }

  /** Move every latency of group `from` into group `into` (a median does not depend on their order). */
  merge(into: number, from: number): void {
    for (let c = 0; c < this.cols; c++) {
      const slot = from * this.cols + c;
      const k = this.count[slot]!;
      if (k === 1) this.push(into, c, this.first[slot]!);
      else if (k > 1) for (const v of this.more.get(slot)!) this.push(into, c, v);
    }
  }
}

/** FNV-1a's step on one 32-bit word. */
const fnv = (h: number, w: number) => Math.imul(h ^ w, 0x01000193);
const HASH_BITS = new Float64Array(1);
const HASH_WORDS = new Int32Array(HASH_BITS.buffer);
/** FNV-1a's steps on a number's two 32-bit words (±0 as 0). */
function fnvNumber(h: number, v: number): number {
  HASH_BITS[0] = v === 0 ? 0 : v;
  return fnv(fnv(h, HASH_WORDS[0]!), HASH_WORDS[1]!);
}

/** Whether two rows are of one shape and kernel: lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp, ep. */
const sameShape = (a: MoeRow, b: MoeRow): boolean =>
  a.tokens === b.tokens &&
  a.hidden === b.hidden &&
  a.inter === b.inter &&
  a.topk === b.topk &&
  a.experts === b.experts &&
  a.tp === b.tp &&
  a.ep === b.ep &&
  a.lane === b.lane &&
  a.kernel_source === b.kernel_source &&
  a.dtype === b.dtype;

/** One row's fields hashed (a string by the small id of its text in `ids`). */
function shapeHash(r: MoeRow, ids: Map<string, number>): number {
  const h = fnv(fnv(fnv(0x811c9dc5, idOf(ids, r.lane)), idOf(ids, r.kernel_source)), idOf(ids, r.dtype));
  const n = fnvNumber(fnvNumber(fnvNumber(fnvNumber(h, r.tokens), r.hidden), r.inter), r.topk);
  return fnvNumber(fnvNumber(fnvNumber(n, r.experts), r.tp), r.ep);
}

/** The small id of text `t` in `ids` (its first-seen index). */
function idOf(ids: Map<string, number>, t: string): number {
  let id = ids.get(t);
  if (id === undefined) {
    id = ids.size;
    ids.set(t, id);
  }
  return id;
}

/**
 * The balanced rows and those of `distributions`, grouped by shape and kernel (sameShape) in first-seen
 * order, with the rows counted: rows of one hash (shapeHash) told apart by comparing their fields.
 */
export function groupShapes(
  rows: ReadonlyArray<MoeRow>,
  distributions: readonly string[],
): { groups: ShapeGroups; balanced_rows: number; skewed_rows: number[] } {
  const ids = new Map<string, number>();
  // hash → the group of its first row, or every group with that hash once two differ
  const slots = new Map<number, number | number[]>();
  const groups = new ShapeGroups(1 + distributions.length, Math.min(rows.length, 1024));
  const same = (g: number, r: MoeRow) => sameShape(groups.rows[g]!, r);
  let balanced_rows = 0;
  const skewed_rows = distributions.map(() => 0);
  for (const r of rows) {
    const d = r.distribution === 'balanced' ? -1 : distributions.indexOf(r.distribution);
    if (d >= 0) skewed_rows[d]!++;
    else if (r.distribution === 'balanced') balanced_rows++;
    else continue;
    const c = 1 + d; // the column: 0 balanced, 1 + d the distribution d
    const h = shapeHash(r, ids);
    const at = slots.get(h);
    let g = typeof at === 'number' ? (same(at, r) ? at : undefined) : at?.find((x) => same(x, r));
    if (g === undefined) {
      g = groups.add(r);
      if (at === undefined) slots.set(h, g);
      else slots.set(h, typeof at === 'number' ? [at, g] : [...at, g]);
    }
    groups.push(g, c, r.latency_us);
  }
  return { groups, balanced_rows, skewed_rows };
}

/** A shape's key string after its lane, kernel and dtype: `tokens|hidden|inter|topk|experts|tp|ep`. */
const numbersKey = (r: MoeRow) => `${r.tokens}|${r.hidden}|${r.inter}|${r.topk}|${r.experts}|${r.tp}|${r.ep}`;

/**
 * The groups' indices in the order of their key strings `lane|kernel_source|dtype|` + numbersKey, groups of
 * one key merged into the first. Sorted by the `lane|kernel_source|dtype|` part, then by the rest within
 * each: the same order, as no part before the numbers holds a `|` (each then has exactly three, so none
 * is a proper prefix of another); where one does, the whole key strings are sorted.
 */
export function sortedByKey(groups: ShapeGroups): number[] {
  const buckets = new Map<string, number[]>();
  let last: MoeRow | undefined;
  let bucket: number[] = [];
  for (let g = 0; g < groups.rows.length; g++) {
    const r = groups.rows[g]!;
    if (!last || r.lane !== last.lane || r.kernel_source !== last.kernel_source || r.dtype !== last.dtype) {
      if ([r.lane, r.kernel_source, r.dtype].some((t) => `${t}`.includes('|')))
        return sortedBy(
          groups,
          groups.rows.map((_, i) => i),
          (x) => `${x.lane}|${x.kernel_source}|${x.dtype}|${numbersKey(x)}`,
        );
      const prefix = `${r.lane}|${r.kernel_source}|${r.dtype}|`;
      bucket = buckets.get(prefix) ?? [];
      buckets.set(prefix, bucket);
      last = r;
    }
    bucket.push(g);
  }
  const out: number[] = [];
  for (const prefix of [...buckets.keys()].sort()) out.push(...sortedBy(groups, buckets.get(prefix)!, numbersKey));
  return out;
}

/** The groups `of` sorted by key(row) (string order), groups of one key merged into the first. */
function sortedBy(groups: ShapeGroups, of: readonly number[], key: (r: MoeRow) => string): number[] {
  const byKey = new Map<string, number>();
  for (const g of of) {
    const k = key(groups.rows[g]!);
    const into = byKey.get(k);
    if (into === undefined) byKey.set(k, g);
    else groups.merge(into, g);
  }
  return [...byKey.keys()].sort().map((k) => byKey.get(k)!);
}
