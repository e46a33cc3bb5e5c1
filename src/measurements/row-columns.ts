/**
 * Rows held as typed columns (issue 12 item 5, issue 17 "Import": peak memory flat in the number of
 * rows). A mapped GEMM row as a V8 object costs ≈ 112 B (2M rows: 223 MiB of heap); here it costs
 * 24 B: int32 for integer columns, float64 for the others, a dictionary id for text (one byte while a
 * column has at most 256 distinct strings, as chip, lane, kernel and dtype columns do; int32 past that).
 * `at(i)` materialises one row object on demand (short-lived, young-generation garbage), so code
 * written for arrays of rows (`length`, `at`, `for … of`) reads a RowColumns unchanged (`RowList`).
 */

/** What the import's row checks read: an array of rows, or a RowColumns. */
export interface RowList<R> {
  readonly length: number;
  at(i: number): R | undefined;
  [Symbol.iterator](): Iterator<R>;
}

type Kind = 'int' | 'num' | 'str' | 'any';

import { plainCell } from '../core/render/csv.ts';

const INT_MIN = -(2 ** 31);
/** Most distinct integers whose text a column caches (GEMM m, n, k: a few hundred each). */
const TEXT_CACHE_MAX = 65_536;
const INT_MAX = 2 ** 31 - 1;

/** One column: its storage widens int → num → any, or str → any, when a value does not fit. */
class Column {
  kind: Kind | undefined;
  ints = new Int32Array(0);
  nums = new Float64Array(0);
  /** Text ids while the dictionary has ≤ 256 strings (`wide` false); `ints` after. */
  ids8 = new Uint8Array(0);
  wide = false;
  any: unknown[] = [];
  dict: string[] = [];
  private ids = new Map<string, number>();

  /** Store `v` at row `i` (rows are appended in order; `cap` is the current row capacity). */
  set(i: number, v: unknown, cap: number): void {
    this.kind ??= kindOf(v);
    if (this.kind === 'int' && !(typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX))
      this.widen(typeof v === 'number' ? 'num' : 'any', i, cap);
    if (this.kind === 'num' && typeof v !== 'number') this.widen('any', i, cap);
    if (this.kind === 'str' && typeof v !== 'string') this.widen('any', i, cap);
    this.reserve(cap);
    if (this.kind === 'int') this.ints[i] = v as number;
    else if (this.kind === 'num') this.nums[i] = v as number;
    else if (this.kind === 'str') this.setText(i, this.id(v as string), cap);
    else this.any[i] = v;
  }

  get(i: number): unknown {
    if (this.kind === 'int') return this.ints[i];
    if (this.kind === 'num') return this.nums[i];
    if (this.kind === 'str') return this.dict[this.wide ? this.ints[i]! : this.ids8[i]!];
    return this.any[i];
  }

  /** `plainCell` text per dictionary id (null = not computed yet). */
  private texts: Array<string | undefined | null> = [];
  /** `plainCell` text of integer values seen (bounded: TEXT_CACHE_MAX entries). */
  private intTexts = new Map<number, string>();

  /** The CSV text of row i's cell (`plainCell`), from a cache for text and integer columns. */
  text(i: number): string | undefined {
    if (this.kind === 'str') {
      const id = this.wide ? this.ints[i]! : this.ids8[i]!;
      while (this.texts.length <= id) this.texts.push(null);
      const t = this.texts[id];
      if (t !== null) return t;
      const made = plainCell(this.dict[id]);
      this.texts[id] = made;
      return made;
    }
    if (this.kind === 'int') {
      const v = this.ints[i]!;
      let t = this.intTexts.get(v);
      if (t === undefined) {
        t = String(v);
        if (this.intTexts.size < TEXT_CACHE_MAX) this.intTexts.set(v, t);
      }
      return t;
    }
    return plainCell(this.get(i));
  }

  /** Like `get`, but a text cell as its dictionary id (equal ids ⇔ equal text within this column). */
  key(i: number): unknown {
    if (this.kind === 'str') return this.wide ? this.ints[i]! : this.ids8[i]!;
    return this.get(i);
  }

  private id(s: string): number {
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.dict.length;
      this.dict.push(s);
      this.ids.set(s, id);
    }
    return id;
  }

  private setText(i: number, id: number, cap: number): void {
    if (!this.wide && id > 255) {
      this.ints = new Int32Array(cap);
      this.ints.set(this.ids8.subarray(0, i));
      this.ids8 = new Uint8Array(0);
      this.wide = true;
    }
    if (this.wide) this.ints[i] = id;
    else {
      if (this.ids8.length < cap) {
        const b = new Uint8Array(cap);
        b.set(this.ids8);
        this.ids8 = b;
      }
      this.ids8[i] = id;
    }
  }

  private reserve(cap: number): void {
    if (this.kind === 'int' || (this.kind === 'str' && this.wide)) {
      if (this.ints.length < cap) this.ints = grow(this.ints, cap) as Int32Array<ArrayBuffer>;
    } else if (this.kind === 'num' && this.nums.length < cap)
      this.nums = grow(this.nums, cap) as Float64Array<ArrayBuffer>;
  }

  /** Re-store rows 0…n−1 in a wider kind. */
  private widen(to: Kind, n: number, cap: number): void {
    const old: unknown[] = [];
    for (let i = 0; i < n; i++) old.push(this.get(i));
    this.kind = to;
    this.ints = new Int32Array(0);
    this.ids8 = new Uint8Array(0);
    this.any = [];
    if (to === 'num') {
      this.nums = new Float64Array(cap);
      for (let i = 0; i < n; i++) this.nums[i] = old[i] as number;
    } else this.any = old;
  }
}

function kindOf(v: unknown): Kind {
  if (typeof v === 'number') return Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX ? 'int' : 'num';
  return typeof v === 'string' ? 'str' : 'any';
}

function grow(a: Int32Array | Float64Array, cap: number): Int32Array | Float64Array {
  const b = new (a.constructor as Int32ArrayConstructor | Float64ArrayConstructor)(cap);
  b.set(a);
  return b;
}

/**
 * Append-only rows of plain objects whose values are numbers, strings or undefined. A row read back
 * has the same own keys, in first-seen order, and the same values (numbers bit for bit, -0 kept);
 * a key a row lacked reads back as absent.
 */
export class RowColumns<R extends object = Record<string, unknown>> implements RowList<R> {
  /** Column position of each key (its index in `keys`, `list` and `absent`). */
  private readonly index = new Map<string, number>();
  private readonly keys: string[] = [];
  /** The columns in `keys` order (no Map lookup per cell). */
  private readonly list: Column[] = [];
  /** Per column (`list` order), whether row i lacked the key; undefined while every row had it. */
  private readonly absent: Array<Uint8Array | undefined> = [];
  private n = 0;
  private cap = 0;

  get length(): number {
    return this.n;
  }

  push(row: R): void {
    if (this.n === this.cap) this.cap = Math.max(1024, this.cap * 2);
    const rec = row as Record<string, unknown>;
    let seen = 0;
    for (const k in rec) {
      seen++;
      if (!this.index.has(k)) this.addColumn(k);
    }
    const all = seen === this.keys.length;
    for (let c = 0; c < this.keys.length; c++) {
      const k = this.keys[c]!;
      if (!all && !(k in rec)) this.markAbsent(c);
      else this.list[c]!.set(this.n, rec[k], this.cap);
    }
    this.n++;
  }

  at(i: number): R | undefined {
    if (i < 0 || i >= this.n) return undefined;
    const out: Record<string, unknown> = {};
    for (let c = 0; c < this.keys.length; c++) {
      if (this.absent[c]?.[i]) continue;
      out[this.keys[c]!] = this.list[c]!.get(i);
    }
    return out as R;
  }

  /**
   * A reader of one column: `reader(k)(i)` is `at(i)[k]` without building the row (undefined where row
   * i lacked `k`, or for a key no row had). Valid while rows are pushed (it reads the live column).
   */
  reader(k: string): (i: number) => unknown {
    const c = this.index.get(k) ?? -1;
    if (c < 0) return () => undefined;
    const col = this.list[c]!;
    return (i) => (this.absent[c]?.[i] ? undefined : col.get(i));
  }

  /**
   * A reader of column `k`'s CSV text (core/render/csv.ts `plainCell` of the value: '' where a row lacked
   * `k`, undefined where the value needs quoting), computed once per distinct text or integer.
   */
  textReader(k: string): (i: number) => string | undefined {
    const c = this.index.get(k) ?? -1;
    if (c < 0) return () => '';
    const col = this.list[c]!;
    return (i) => (this.absent[c]?.[i] ? '' : col.text(i));
  }

  /**
   * A reader of column `k` for equality only: `keyReader(k)(i) === keyReader(k)(j)` exactly when rows i
   * and j hold the same value of `k` (text compared by its dictionary id, so hashing reads one number
   * instead of every character). Undefined where a row lacked `k`.
   */
  keyReader(k: string): (i: number) => unknown {
    const c = this.index.get(k) ?? -1;
    if (c < 0) return () => undefined;
    const col = this.list[c]!;
    return (i) => (this.absent[c]?.[i] ? undefined : col.key(i));
  }

  *[Symbol.iterator](): Iterator<R> {
    for (let i = 0; i < this.n; i++) yield this.at(i)!;
  }

  private addColumn(k: string): void {
    this.index.set(k, this.keys.length);
    this.keys.push(k);
    this.list.push(new Column());
    let a: Uint8Array | undefined;
    if (this.n > 0) {
      a = new Uint8Array(this.cap);
      a.fill(1, 0, this.n);
    }
    this.absent.push(a);
  }

  private markAbsent(c: number): void {
    let a = this.absent[c];
    if (!a) {
      a = new Uint8Array(this.cap);
      this.absent[c] = a;
    } else if (a.length < this.cap) {
      const b = new Uint8Array(this.cap);
      b.set(a);
      a = b;
      this.absent[c] = a;
    }
    a[this.n] = 1;
  }
}

/**
 * A reader of column `k` of any RowList: a RowColumns' own `reader`, else `rows.at(i)[k]` (an array
 * row is read in place). Undefined for a row that lacks `k`.
 */
export function readerOf<R>(rows: RowList<R>, k: string): (i: number) => unknown {
  if (rows instanceof RowColumns) return rows.reader(k);
  return (i) => (rows.at(i) as Record<string, unknown> | undefined)?.[k];
}
