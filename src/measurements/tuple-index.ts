/**
 * Distinct rows by a tuple of columns, without building a string key per row (issue 12 item 5,
 * issue 17 "Import"). A joined-string key cost ≈ 80 B and one allocation per row; at 2M rows the
 * repeats collapse and the coverage count held ≈ 500 MiB of keys. This is an open-addressing table of
 * row indices (Int32Array, load ≤ 1/2) keyed by a 32-bit murmur3-style hash of the tuple; every probe that meets an
 * equal hash compares the columns themselves, so the result is exact whatever the hash collides on.
 */

import { RowColumns, type RowList, readerOf } from './row-columns.ts';

const EMPTY = -1;
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

/**
 * One 32-bit word into the running hash (murmur3's per-block step: multiply, rotate, multiply, then
 * mix into h). A bare FNV step would let a word's high bits reach only the hash's high bits, and the
 * table indexes by the low ones: integer cells keep their information in a float64's high word.
 */
function mix(h: number, x: number): number {
  let k = Math.imul(x, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, 0x1b873593);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** murmur3's finaliser: every input bit reaches every output bit. */
function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** 32-bit hash of one cell: a number by its float64 bits, a string by its UTF-16 code units, else by String(). */
function cellHash(h: number, v: unknown): number {
  if (typeof v === 'number') {
    f64[0] = v;
    return mix(mix(h, u32[0]!), u32[1]!);
  }
  const s = typeof v === 'string' ? v : String(v);
  for (let i = 0; i < s.length; i++) h = mix(h, s.charCodeAt(i));
  return mix(h, 0xff); // terminator: ("ab", "c") ≠ ("a", "bc")
}

/**
 * Index of the distinct tuples `cols` of the rows of `source` offered to `add`, in first-seen order.
 * It keeps row indices, not rows: a tuple's first row is read back from `source` only when a probe
 * meets its hash. Memory: 8 bytes per slot, 2–4 slots per distinct tuple, 4–8 bytes per tuple (int32
 * first-row indices, so at most 2³¹ rows).
 */
export class TupleIndex {
  private slots: Int32Array;
  private hashes: Uint32Array;
  /** Input index of each tuple's first row (`size` used). */
  private firsts: Int32Array;
  private n = 0;
  private mask: number;
  /** One reader per tuple column (row-columns.ts `readerOf`): cells are read in place, no row is built. */
  private readonly cols: ReadonlyArray<(i: number) => unknown>;
  /**
   * Per column, the RowColumns typed array its reader reads (`keyArray`), or undefined: hashed and
   * compared straight from the array (no call per cell). `kinds[c]`: 0 reader, 1 int32 or text id, 2 float64.
   */
  private readonly arrays: ReadonlyArray<Int32Array | Uint8Array | Float64Array | undefined>;
  private readonly kinds: Uint8Array;

  /**
   * @param cols the columns that make a tuple (compared with ===; NaN never equals itself)
   * @param source the rows `add` is given indices into (a RowColumns must not be pushed to while the index is used)
   * @param expected how many tuples to size the table for (the rows that will be added, say): no
   *   growth, so no rehash and no old table beside the new one, up to that many
   */
  constructor(cols: readonly string[], source: RowList<object>, expected = 0) {
    // On RowColumns, text columns are compared by dictionary id (same tuples, same first-seen ids).
    this.cols = cols.map((c) => (source instanceof RowColumns ? source.keyReader(c) : readerOf(source, c)));
    this.arrays = cols.map((c) => (source instanceof RowColumns ? source.keyArray(c) : undefined));
    this.kinds = Uint8Array.from(this.arrays, (a) => (a === undefined ? 0 : a instanceof Float64Array ? 2 : 1));
    let size = 1024;
    while (size < 2 * expected) size *= 2;
    this.slots = new Int32Array(size).fill(EMPTY);
    this.hashes = new Uint32Array(size);
    this.mask = size - 1;
    this.firsts = new Int32Array(Math.max(1024, expected));
  }

  /** Distinct tuples seen so far. */
  get size(): number {
    return this.n;
  }

  /** Whether the last `add` met a new tuple. */
  added = false;

  /**
   * The id (0-based, first-seen order) of the tuple of row `index` of the source; a new tuple gets the
   * next id and sets `added`. Allocates nothing per call.
   */
  add(index: number): number {
    const h = this.hash(index);
    let i = h & this.mask;
    for (;;) {
      const id = this.slots[i]!;
      if (id === EMPTY) break;
      if (this.hashes[i] === h && this.equal(this.firsts[id]!, index)) {
        this.added = false;
        return id;
      }
      i = (i + 1) & this.mask;
    }
    const id = this.n++;
    if (id === this.firsts.length) {
      const f = new Int32Array(Math.max(1024, id * 2));
      f.set(this.firsts);
      this.firsts = f;
    }
    this.firsts[id] = index;
    this.slots[i] = id;
    this.hashes[i] = h;
    if (this.n * 2 > this.slots.length) this.grow();
    this.added = true;
    return id;
  }

  private hash(index: number): number {
    let h = 0x811c9dc5 | 0;
    for (let c = 0; c < this.kinds.length; c++) {
      const kind = this.kinds[c]!;
      if (kind === 1) h = mix(h, this.arrays[c]![index]!);
      else if (kind === 2) {
        f64[0] = this.arrays[c]![index]!;
        h = mix(mix(h, u32[0]!), u32[1]!);
      } else h = cellHash(h, this.cols[c]!(index));
    }
    return fmix(h);
  }

  private equal(a: number, b: number): boolean {
    for (let c = 0; c < this.kinds.length; c++) {
      const arr = this.arrays[c];
      if (arr !== undefined ? arr[a] !== arr[b] : this.cols[c]!(a) !== this.cols[c]!(b)) return false;
    }
    return true;
  }

  private grow(): void {
    const n = this.slots.length * 2;
    const slots = new Int32Array(n).fill(EMPTY);
    const hashes = new Uint32Array(n);
    const mask = n - 1;
    for (let j = 0; j < this.slots.length; j++) {
      const id = this.slots[j]!;
      if (id === EMPTY) continue;
      let i = this.hashes[j]! & mask;
      while (slots[i] !== EMPTY) i = (i + 1) & mask;
      slots[i] = id;
      hashes[i] = this.hashes[j]!;
    }
    this.slots = slots;
    this.hashes = hashes;
    this.mask = mask;
  }
}
