/**
 * Rows held as typed columns (issue 12 item 5, issue 17 "Import": peak memory flat in the number of
 * rows). A mapped GEMM row as a V8 object costs ≈ 112 B (2M rows: 223 MiB of heap); here it costs
 * 24 B: int32 for integer columns, float64 for the others, a dictionary id for text (one byte while a
 * column has at most 256 distinct strings, as chip, lane, kernel and dtype columns do; int32 past that).
 * `at(i)` materialises one row object on demand (short-lived, young-generation garbage), so code
 * written for arrays of rows (`length`, `at`, `for … of`) reads a RowColumns unchanged (`RowList`).
 */

import { csvRowLines, plainCell } from '../core/render/csv.ts';
import { GrowingBytes, writeNumber } from './number-text.ts';

/**
 * Where a mapper writes rows: a value for every column of the row, then `end()`. `int`, `num` and
 * `text` say the value's type (a fast path into a column of that kind; any value still fits).
 */
export interface RowSink {
  set(c: number, v: unknown): void;
  int(c: number, v: number): void;
  num(c: number, v: number): void;
  text(c: number, v: string): void;
  end(): void;
  /**
   * Rows n…n+count−1 at once, where it is offered (RowColumns' sink): `cells[c]` is column c's value for
   * every row (a string) or per row (int32s, float64s); the same rows as `count` rows of `text`/`int`/
   * `num` calls then `end()`.
   */
  bulk?(count: number, cells: ReadonlyArray<string | Int32Array | Float64Array>): void;
}

/** A RowSink that builds plain objects with the keys in `keys` order, into `rows`. */
export function objectSink<R>(keys: readonly string[], rows: R[]): RowSink {
  let row: Record<string, unknown> = {};
  const set = (c: number, v: unknown) => {
    row[keys[c]!] = v;
  };
  return {
    set,
    int: set,
    num: set,
    text: set,
    end: () => {
      rows.push(row as R);
      row = {};
    },
  };
}

/** The row index of a `RowColumns.view` object (a symbol: no column name can shadow it). */
const AT = Symbol('row');

/** A growing byte buffer the CSV lines are written into (`RowColumns.csvLines`). */
class ByteOut extends GrowingBytes {
  bytes(b: Buffer): void {
    this.reserve(b.length);
    this.putText(b);
  }
  utf8(s: string): void {
    this.reserve(Buffer.byteLength(s, 'utf8'));
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }
  /** A number's `String(v)` (number-text.ts `writeNumber`: no string for the usual latencies). */
  num(v: number): void {
    writeNumber(this, v);
  }

  /** An int32's decimal digits (`String(v)`). */
  int(v: number): void {
    this.reserve(11);
    this.putInt(v);
  }

  /** `int` into room already reserved (11 bytes). */
  putInt(v: number): void {
    const buf = this.buf;
    if (v < 0) {
      buf[this.pos++] = 45;
      v = -v;
    }
    let digits = 1;
    for (let t = v; t >= 10; t = (t / 10) | 0) digits++;
    let p = this.pos + digits;
    this.pos = p;
    do {
      const t = (v / 10) | 0;
      buf[--p] = 48 + v - t * 10;
      v = t;
    } while (v > 0);
  }

  /** A text cell's bytes into room already reserved; false, writing nothing, for null (needs quoting). */
  putText(b: Buffer | null): boolean {
    if (b === null) return false;
    const buf = this.buf;
    let p = this.pos;
    for (let k = 0; k < b.length; k++) buf[p++] = b[k]!;
    this.pos = p;
    return true;
  }
}

/** What the import's row checks read: an array of rows, or a RowColumns. */
export interface RowList<R> {
  readonly length: number;
  at(i: number): R | undefined;
  [Symbol.iterator](): Iterator<R>;
}

type Kind = 'int' | 'num' | 'str' | 'any';

const INT_MIN = -(2 ** 31);
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
    else if (this.kind === 'str') this.setText(i, v === this.lastText ? this.lastId : this.id(v as string), cap);
    else this.any[i] = v;
  }

  /** `set` of an int32 (a value that is not one goes through `set`). */
  setInt(i: number, v: number, cap: number): void {
    if (this.kind !== 'int' || (v | 0) !== v) this.set(i, v, cap);
    else {
      if (this.ints.length < cap) this.ints = grow(this.ints, cap) as Int32Array<ArrayBuffer>;
      this.ints[i] = v;
    }
  }

  /** `set` of a number into a float64 column (any other column goes through `set`). */
  setNum(i: number, v: number, cap: number): void {
    if (this.kind !== 'num') this.set(i, v, cap);
    else {
      if (this.nums.length < cap) this.nums = grow(this.nums, cap) as Float64Array<ArrayBuffer>;
      this.nums[i] = v;
    }
  }

  /** `set` of a string: a run of the same string skips the dictionary lookup. */
  setString(i: number, v: string, cap: number): void {
    if (this.kind !== 'str') this.set(i, v, cap);
    else this.setText(i, v === this.lastText ? this.lastId : this.id(v), cap);
  }

  /** `setString(i, v, cap)` for i = start…start+count−1 (cap > start + count): the first store, then a fill of its id. */
  fillString(start: number, count: number, v: string, cap: number): void {
    if (count === 0) return;
    this.setString(start, v, cap);
    if (this.kind !== 'str') {
      for (let i = 1; i < count; i++) this.setString(start + i, v, cap);
      return;
    }
    const ids = this.wide ? this.ints : this.ids8;
    ids.fill(ids[start]!, start + 1, start + count);
  }

  /**
   * `setInt` (Int32Array values) or `setNum` (Float64Array) of a[0…count−1] at rows start…: the first
   * store (which settles the column's kind), then one copy when the kind is the array's own.
   */
  copyNumbers(start: number, a: Int32Array | Float64Array, count: number, cap: number): void {
    if (count === 0) return;
    const ints = a instanceof Int32Array;
    if (ints) this.setInt(start, a[0]!, cap);
    else this.setNum(start, a[0]!, cap);
    if (this.kind === (ints ? 'int' : 'num')) {
      const to = ints ? this.ints : this.nums;
      to.set(a.subarray(1, count), start + 1);
      return;
    }
    for (let i = 1; i < count; i++) {
      if (ints) this.setInt(start + i, a[i]!, cap);
      else this.setNum(start + i, a[i]!, cap);
    }
  }

  get(i: number): unknown {
    if (this.kind === 'int') return this.ints[i];
    if (this.kind === 'num') return this.nums[i];
    if (this.kind === 'str') return this.dict[this.wide ? this.ints[i]! : this.ids8[i]!];
    return this.any[i];
  }

  /** `plainCell` bytes per dictionary id (undefined = not computed yet, null = needs quoting). */
  private textBytes: Array<Buffer | null | undefined> = [];
  /** The longest of `textBytes` computed so far (bytes). */
  private textBytesMax = 0;

  /** Dictionary id `id`'s `plainCell` bytes, null when the text needs quoting (computed once per id). */
  private bytesOf(id: number): Buffer | null {
    let b = this.textBytes[id];
    if (b === undefined) {
      const t = plainCell(this.dict[id]);
      b = t === undefined ? null : Buffer.from(t, 'utf8');
      this.textBytes[id] = b;
      if (b && b.length > this.textBytesMax) this.textBytesMax = b.length;
    }
    return b;
  }

  /**
   * Every dictionary id's `plainCell` bytes (null: needs quoting) and the longest of them, for a text
   * column (`csvLines`' fast path reads them by id with no per-cell test).
   */
  allTextBytes(): { bytes: ReadonlyArray<Buffer | null>; max: number } {
    for (let id = this.textBytes.length; id < this.dict.length; id++) this.bytesOf(id);
    return { bytes: this.textBytes as ReadonlyArray<Buffer | null>, max: this.textBytesMax };
  }

  /**
   * Append row i's cell as CSV text (`plainCell` of the value) to `out`.
   * @returns false, writing nothing, when the value needs quoting (or is not a primitive).
   */
  writeCell(i: number, out: ByteOut): boolean {
    if (this.kind === 'int') {
      out.int(this.ints[i]!);
      return true;
    }
    if (this.kind === 'num') {
      out.num(this.nums[i]!);
      return true;
    }
    if (this.kind === 'str') {
      const b = this.bytesOf(this.wide ? this.ints[i]! : this.ids8[i]!);
      if (b === null) return false;
      out.bytes(b);
      return true;
    }
    const t = plainCell(this.get(i));
    if (t === undefined) return false;
    out.utf8(t);
    return true;
  }

  /** The typed array `key` reads (ints, float64s or text ids), or undefined for a plain-array column. */
  keyArray(): Int32Array | Uint8Array | Float64Array | undefined {
    if (this.kind === 'int') return this.ints;
    if (this.kind === 'num') return this.nums;
    if (this.kind === 'str') return this.wide ? this.ints : this.ids8;
    return undefined;
  }

  /** Like `get`, but a text cell as its dictionary id (equal ids ⇔ equal text within this column). */
  key(i: number): unknown {
    if (this.kind === 'str') return this.wide ? this.ints[i]! : this.ids8[i]!;
    return this.get(i);
  }

  /** The last text stored and its id: a run of equal cells skips the dictionary lookup. */
  private lastText: unknown = undefined;
  private lastId = 0;

  private id(s: string): number {
    let id = this.ids.get(s);
    if (id === undefined) {
      id = this.dict.length;
      this.dict.push(s);
      this.ids.set(s, id);
    }
    this.lastText = s;
    this.lastId = id;
    return id;
  }

  private setText(i: number, id: number, cap: number): void {
    if (!this.wide && id > 255) {
      this.ints = new Int32Array(cap);
      this.ints.set(this.ids8.subarray(0, i));
      this.ids8 = new Uint8Array(0);
      this.wide = true;
    }
    if (this.wide) {
      // The sink's `setString` comes here without `reserve`: a wide column grows like an int column.
      if (this.ints.length < cap) this.ints = grow(this.ints, cap) as Int32Array<ArrayBuffer>;
      this.ints[i] = id;
    } else {
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

  /**
   * A writer of whole rows as cells, `keys[c]` being column c: `set(c, v)` for every key, then `end()`;
   * the same rows as `push` of `{ [keys[0]]: v0, … }` (columns of this RowColumns not in `keys` read
   * back as absent), with no object per row (the importers' mappers write here).
   */
  sink(keys: readonly string[]): RowSink {
    for (const k of keys) if (!this.index.has(k)) this.addColumn(k);
    const cols = keys.map((k) => this.list[this.index.get(k)!]!);
    const others = this.keys.flatMap((k, c) => (keys.includes(k) ? [] : [c]));
    if (this.n === this.cap) this.cap = Math.max(1024, this.cap * 2);
    // `set` writes row n below the capacity `end` keeps ahead of it.
    return {
      set: (c, v) => cols[c]!.set(this.n, v, this.cap),
      int: (c, v) => cols[c]!.setInt(this.n, v, this.cap),
      num: (c, v) => cols[c]!.setNum(this.n, v, this.cap),
      text: (c, v) => cols[c]!.setString(this.n, v, this.cap),
      end: () => {
        for (const c of others) this.markAbsent(c);
        if (++this.n === this.cap) this.cap *= 2;
      },
      bulk: (count, cells) => this.bulk(cols, others, count, cells),
    };
  }

  /** The sink's `bulk`: each column's cells in one loop through the same per-cell stores, then the rows' absent marks. */
  private bulk(
    cols: readonly Column[],
    others: readonly number[],
    count: number,
    cells: ReadonlyArray<string | Int32Array | Float64Array>,
  ): void {
    while (this.cap <= this.n + count) this.cap *= 2;
    const n0 = this.n;
    const cap = this.cap;
    for (let c = 0; c < cells.length; c++) {
      const col = cols[c]!;
      const v = cells[c]!;
      if (typeof v === 'string') col.fillString(n0, count, v, cap);
      else col.copyNumbers(n0, v, count, cap);
    }
    for (let i = 0; i < count; i++) {
      for (const c of others) this.markAbsent(c);
      this.n++;
    }
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
   * The CSV data lines of rows `start`…`end − 1` under the header `columns`, as UTF-8 bytes, each line
   * ending in `\n`: exactly core/render/csv.ts `csvRowLines` of those rows (`writeCsv`'s lines), with
   * no row object and no string per cell (text and integers go in as bytes). Each column is written by
   * the writer of its storage kind (`linePlan`), with one room check per line. A row with a cell that
   * needs quoting is written by `csvRowLines` (papaparse).
   */
  csvLines(columns: readonly string[], start: number, end: number): Buffer {
    const cols = columns.map((k) => this.index.get(k) ?? -1);
    // Sized from the last call's bytes per line: one buffer per call instead of doubling into it.
    const out = new ByteOut(Buffer.allocUnsafe(Math.ceil((end - start) * this.lineBytes * 1.05) + 4096));
    const plan = this.linePlan(cols);
    // The leading text columns every row has (chip, lane, kernel, dtype): while their ids repeat, a
    // line starts with the previous line's bytes of them (copied: one id compare per column instead).
    const lead = plan.lead.length;
    let prevAt = -1;
    let prevLen = 0;
    for (let i = start; i < end; i++) {
      out.reserve(plan.maxLine);
      const lineAt = out.pos;
      let c = 0;
      if (prevAt >= 0 && sameLead(plan.lead, i)) {
        out.buf.copyWithin(lineAt, prevAt, prevAt + prevLen);
        out.pos += prevLen;
        c = lead;
      }
      let plain = true;
      for (; c < cols.length; c++) {
        if (c > 0) out.buf[out.pos++] = 44;
        if (!this.writePlanned(plan, cols[c]!, c, i, out)) {
          plain = false;
          break;
        }
        if (c === lead - 1) {
          prevAt = lineAt;
          prevLen = out.pos - lineAt;
        }
      }
      if (plain) {
        out.buf[out.pos++] = 10;
        continue;
      }
      prevAt = -1;
      out.pos = lineAt;
      const row = this.at(i) as Record<string, unknown>;
      out.utf8(
        csvRowLines(
          columns.map((k) => () => row[k]),
          0,
          1,
        ),
      );
    }
    if (end > start) this.lineBytes = out.pos / (end - start);
    return out.buf.subarray(0, out.pos);
  }

  /** Bytes per line of the last `csvLines` (its next buffer's size per row). */
  private lineBytes = 64;

  /**
   * How `csvLines` writes each of the columns at `cols` (positions in `list`, −1: no row has it): by
   * storage kind, from the typed array itself; a column some row lacks, or of plain values, through
   * `Column.writeCell`. `lead`: the id arrays of the text columns `cols` starts with that no row lacks.
   */
  private linePlan(cols: readonly number[]): LinePlan {
    const plan: LinePlan = {
      kinds: new Uint8Array(cols.length),
      ints: [],
      nums: [],
      ids8: [],
      texts: [],
      lead: [],
      maxLine: cols.length + 1,
    };
    cols.forEach((at, c) => {
      const col = at >= 0 ? this.list[at]! : undefined;
      const kind = col === undefined ? CELL_EMPTY : this.absent[at] ? CELL_ANY : cellKind(col);
      plan.kinds[c] = kind;
      if (kind === CELL_INT || kind === CELL_ID32) plan.ints[c] = col!.ints;
      if (kind === CELL_NUM) plan.nums[c] = col!.nums;
      if (kind === CELL_ID8) plan.ids8[c] = col!.ids8;
      if (kind === CELL_ID8 || kind === CELL_ID32) {
        const { bytes, max } = col!.allTextBytes();
        plan.texts[c] = bytes;
        plan.maxLine += max;
        if (plan.lead.length === c) plan.lead.push(col!.keyArray() as Int32Array | Uint8Array);
      }
      plan.maxLine += kind === CELL_INT ? 11 : kind === CELL_NUM ? NUMBER_BYTES : 0;
    });
    return plan;
  }

  /**
   * Row i's cell of plan column c (list position `at`) into `out`, whose room for the line's planned
   * cells is reserved (`LinePlan.maxLine`). @returns false, writing nothing, when the cell needs quoting.
   */
  private writePlanned(plan: LinePlan, at: number, c: number, i: number, out: ByteOut): boolean {
    switch (plan.kinds[c]) {
      case CELL_EMPTY:
        return true;
      case CELL_INT:
        out.putInt(plan.ints[c]![i]!);
        return true;
      case CELL_NUM:
        writeNumber(out, plan.nums[c]![i]!);
        return true;
      case CELL_ID8:
        return out.putText(plan.texts[c]![plan.ids8[c]![i]!]!);
      case CELL_ID32:
        return out.putText(plan.texts[c]![plan.ints[c]![i]!]!);
      default: {
        if (this.absent[at]?.[i]) return true;
        const plain = this.list[at]!.writeCell(i, out);
        out.reserve(plan.maxLine); // the room the line's remaining planned cells assume
        return plain;
      }
    }
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

  /**
   * The typed array behind `keyReader(k)` (`keyArray(k)[i] === keyReader(k)(i)` for i < length): int32s,
   * float64s, or text ids (Uint8Array or Int32Array). Undefined when a row lacks `k` or the column holds
   * other values. Valid until the next push (a push may grow or widen it).
   */
  keyArray(k: string): Int32Array | Uint8Array | Float64Array | undefined {
    const c = this.index.get(k) ?? -1;
    if (c < 0 || this.absent[c]) return undefined;
    return this.list[c]!.keyArray();
  }

  /**
   * How column `k` is stored: 'int' (int32), 'num' (float64), 'str' (text ids into `dictionary(k)`),
   * 'any' (plain values); undefined for a key no row had, or one some row lacks.
   */
  kindOf(k: string): Kind | undefined {
    const c = this.index.get(k) ?? -1;
    return c < 0 || this.absent[c] ? undefined : this.list[c]!.kind;
  }

  /** The distinct texts of a text column by id (`keyArray(k)[i]` indexes it); undefined for another kind. */
  dictionary(k: string): readonly string[] | undefined {
    return this.kindOf(k) === 'str' ? this.list[this.index.get(k)!]!.dict : undefined;
  }

  /**
   * A reader of whole rows through one reused view: `view()(i)` has row i's values as properties
   * (getters on the columns; undefined where row i lacks a key) and is the same object at every call,
   * so it is valid until the next call. For code that reads a few fields of each row in turn.
   */
  view(): (i: number) => R {
    const cols = this.list;
    const absent = this.absent;
    class View {
      [AT] = 0;
    }
    this.keys.forEach((k, c) => {
      Object.defineProperty(View.prototype, k, {
        get(this: View) {
          const i = this[AT];
          return absent[c]?.[i] ? undefined : cols[c]!.get(i);
        },
      });
    });
    const v = new View();
    return (i) => {
      v[AT] = i;
      return v as unknown as R;
    };
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

/** How `RowColumns.csvLines` writes a column (`LinePlan.kinds`). */
const CELL_EMPTY = 0;
const CELL_INT = 1;
const CELL_NUM = 2;
/** Text by one-byte dictionary id. */
const CELL_ID8 = 3;
/** Text by int32 dictionary id. */
const CELL_ID32 = 4;
/** Through `Column.writeCell` (plain values, or rows lacking the key). */
const CELL_ANY = 5;
/** Room for one number's `String(v)` (at most 25 bytes: 17 digits, sign, point, exponent or zeros). */
const NUMBER_BYTES = 32;

/** `csvLines`' writers per column: its kind and the typed array it reads (by plan position). */
interface LinePlan {
  kinds: Uint8Array;
  /** CELL_INT values and CELL_ID32 ids. */
  ints: Array<Int32Array | undefined>;
  nums: Array<Float64Array | undefined>;
  ids8: Array<Uint8Array | undefined>;
  /** Text bytes per dictionary id (null: needs quoting), for CELL_ID8 and CELL_ID32. */
  texts: Array<ReadonlyArray<Buffer | null> | undefined>;
  /** Id arrays of the leading text columns no row lacks (the copied line prefix). */
  lead: Array<Int32Array | Uint8Array>;
  /** The most bytes a line's planned cells (not CELL_ANY), commas and newline take. */
  maxLine: number;
}

function cellKind(col: Column): number {
  if (col.kind === 'int') return CELL_INT;
  if (col.kind === 'num') return CELL_NUM;
  if (col.kind === 'str') return col.wide ? CELL_ID32 : CELL_ID8;
  return CELL_ANY;
}

/** Whether row i's leading text ids equal row i − 1's. */
function sameLead(lead: ReadonlyArray<Int32Array | Uint8Array>, i: number): boolean {
  if (lead.length === 0) return false;
  for (let t = 0; t < lead.length; t++) if (lead[t]![i] !== lead[t]![i - 1]) return false;
  return true;
}

/**
 * A reader of column `k` of any RowList: a RowColumns' own `reader`, else `rows.at(i)[k]` (an array
 * row is read in place). Undefined for a row that lacks `k`.
 */
export function readerOf<R>(rows: RowList<R>, k: string): (i: number) => unknown {
  if (rows instanceof RowColumns) return rows.reader(k);
  return (i) => (rows.at(i) as Record<string, unknown> | undefined)?.[k];
}
