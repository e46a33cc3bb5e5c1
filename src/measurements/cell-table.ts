/**
 * Tables read cell by cell (issue 17 "Import": ≥ 500k rows/s). A `CellTable` is what the
 * AIConfigurator mappers read: a `RawTable` (rows of cells, from Parquet or a small CSV) seen through
 * `cellsOf`, or a `CsvChunk`, a block of CSV lines kept as the bytes they were read as plus each cell's
 * offset, so a cell becomes a number or a string only when read: no array per row, no string per
 * numeric cell, and one string per run of equal text cells in a column.
 *
 * Rows are 0-based here; errors name `r + 1` (the header is row 0), as everywhere in the import.
 */
import Papa from 'papaparse';
import { InputError } from '../core/errors.ts';
import { decimalNumber } from '../core/numeric/decimal.ts';
import { GrowingBytes, POW10, writeNumber } from './number-text.ts';

/** Cells as they come from CSV (strings) or Parquet (numbers, bigints, strings). */
export type Cell = string | number | bigint | boolean | null | undefined;

export interface RawTable {
  /** File the table came from (used in error messages). */
  file: string;
  header: string[];
  rows: Cell[][];
}

/** Row and column access to one table (or one chunk of it). */
export interface CellTable {
  readonly file: string;
  readonly header: string[];
  /** Data rows. */
  readonly length: number;
  /** The cell's text, trimmed ('' when empty or missing): `textCell`'s value. */
  text(r: number, j: number): string;
  /**
   * The cell as a number: a number cell itself, a bigint converted, a decimal string's value
   * (core/numeric/decimal.ts `decimalNumber`: a blank, a hex, octal or binary literal or `Infinity` is NaN); NaN
   * for anything else (missing). `numCell`'s value before its finite check.
   */
  num(r: number, j: number): number;
  /** The cell as read (error messages). */
  cell(r: number, j: number): Cell;
  /** The table as rows of cells (for mappers written for RawTable). */
  toRawTable(): RawTable;
}

/** A RawTable as a CellTable (its rows read in place). */
export function cellsOf(t: RawTable): CellTable {
  return {
    file: t.file,
    header: t.header,
    length: t.rows.length,
    text: (r, j) => textOfCell(t.rows[r]![j]),
    num: (r, j) => numberOfCell(t.rows[r]![j]),
    cell: (r, j) => t.rows[r]![j],
    toRawTable: () => t,
  };
}

function textOfCell(cell: Cell): string {
  return cell === null || cell === undefined ? '' : String(cell).trim();
}

/** A number cell itself, a bigint converted, a string through `decimalNumber` (core/numeric/decimal.ts); else NaN. */
function numberOfCell(cell: Cell): number {
  if (typeof cell === 'number') return cell;
  if (typeof cell === 'bigint') return Number(cell);
  if (typeof cell === 'string') return decimalNumber(cell);
  return NaN;
}

/** A finite number. @throws InputError naming file, row and column when the cell is blank or not a number. */
export function numberAt(t: CellTable, r: number, j: number, col: string): number {
  const v = t.num(r, j);
  if (!Number.isFinite(v)) {
    throw new InputError(
      { file: t.file, row: r + 1, column: col },
      `expected a finite number, got "${String(t.cell(r, j) ?? '')}"`,
    );
  }
  return v;
}

/** An integer ≥ `min`. @throws InputError naming file, row and column. */
export function intAt(t: CellTable, r: number, j: number, col: string, min = 0): number {
  const v = numberAt(t, r, j, col);
  if (!Number.isInteger(v) || v < min) {
    throw new InputError({ file: t.file, row: r + 1, column: col }, `expected an integer ≥ ${min}, got ${v}`);
  }
  return v;
}

/** A positive finite latency. @throws InputError naming file, row and column. */
export function latencyAt(t: CellTable, r: number, j: number, col: string): number {
  const v = numberAt(t, r, j, col);
  if (!(v > 0)) {
    throw new InputError({ file: t.file, row: r + 1, column: col }, `expected a positive number (a latency), got ${v}`);
  }
  return v;
}

const MAX_EXACT = 2 ** 53;

/**
 * A block of CSV data lines as bytes: `bounds[r·(ncol+1) + j]` is where cell j of row r starts, and
 * the next entry less one is where it ends (the comma, or the line end). A missing cell (a short row)
 * has length −1, an empty one 0. Lines holding a quote are parsed by papaparse and kept as cells.
 */
export class CsvChunk implements CellTable {
  private readonly stride: number;
  /** Per column: the bytes (start, length) and string of the last text read, so a run of equal cells is one string. */
  private readonly lastAt: Int32Array;
  private readonly lastLen: Int32Array;
  private readonly lastText: string[];

  constructor(
    readonly file: string,
    readonly header: string[],
    private readonly buf: Buffer,
    /** Cell offsets (class comment); `splitCsvBlock` reuses them for the next block once this chunk is done with. */
    readonly bounds: Int32Array,
    readonly length: number,
    /** Cells of the lines that hold a quote (papaparse), by row. */
    private readonly quoted: Map<number, string[]> | undefined,
    /** Cells 0…leadShared−1 hold the same bytes (and commas) in every row (`splitCsvBlock`; 0: not known). */
    private readonly leadShared = 0,
  ) {
    this.stride = header.length + 1;
    this.lastAt = new Int32Array(header.length);
    this.lastLen = new Int32Array(header.length).fill(-1);
    this.lastText = new Array<string>(header.length).fill('');
  }

  text(r: number, j: number): string {
    const q = this.quoted?.get(r);
    if (q) return textOfCell(q[j]);
    const b = r * this.stride + j;
    const s = this.bounds[b]!;
    const len = this.bounds[b + 1]! - 1 - s;
    if (len <= 0) return '';
    const buf = this.buf;
    if (len === this.lastLen[j]) {
      const p = this.lastAt[j]!;
      let k = 0;
      while (k < len && buf[s + k] === buf[p + k]) k++;
      if (k === len) return this.lastText[j]!;
    }
    let plain = buf[s]! > 32 && buf[s + len - 1]! > 32;
    for (let k = 0; plain && k < len; k++) plain = buf[s + k]! < 128;
    const t = plain ? buf.toString('latin1', s, s + len) : buf.toString('utf8', s, s + len).trim();
    this.lastAt[j] = s;
    this.lastLen[j] = len;
    this.lastText[j] = t;
    return t;
  }

  num(r: number, j: number): number {
    const q = this.quoted?.get(r);
    if (q) return numberOfCell(q[j]);
    const b = r * this.stride + j;
    const s = this.bounds[b]!;
    const e = this.bounds[b + 1]! - 1;
    if (e <= s) return NaN;
    const v = this.decimal(s, e);
    return Number.isNaN(v) ? numberOfCell(this.buf.toString('utf8', s, e)) : v;
  }

  /**
   * `[-]digits[.digits]` with at most 2⁵³ as its digits and at most 22 after the point, as a number:
   * the integer of its digits divided by a power of ten, both exact, so the quotient is the correctly
   * rounded value, the one `Number()` returns (Clinger's fast path). NaN for any other text (a
   * number, never undefined, so the caller's arithmetic stays unboxed).
   */
  private decimal(s: number, e: number): number {
    const buf = this.buf;
    let i = s;
    const neg = buf[i] === 45;
    if (neg) i++;
    let m = 0;
    let digits = 0;
    let frac = -1;
    for (; i < e; i++) {
      const c = buf[i]!;
      if (c >= 48 && c <= 57) {
        m = m * 10 + (c - 48);
        digits++;
        if (frac >= 0) frac++;
      } else if (c === 46 && frac < 0) frac = 0;
      else return NaN;
    }
    if (digits === 0 || m > MAX_EXACT || frac > 22) return NaN;
    const v = frac > 0 ? m / POW10[frac]! : m;
    return neg ? -v : v;
  }

  /**
   * Column j's text when every row holds the same bytes there (`text(0, j)`); undefined when one differs,
   * a cell is missing, or a line was quoted. One tight byte loop over the chunk (bulk mappers).
   */
  sameText(j: number): string | undefined {
    return this.sameSpan(j, j + 1) ? this.text(0, j) : undefined;
  }

  /**
   * `sameText` of each of the columns `js`, through one byte loop per row over the cells from the first
   * to the last of them (commas included) when that whole span repeats; column by column otherwise.
   */
  sameTexts(js: readonly number[]): Array<string | undefined> {
    const j0 = Math.min(...js);
    const j1 = Math.max(...js) + 1;
    const whole = js.every((j) => this.cellLength(j) >= 0) && this.sameSpan(j0, j1);
    return js.map((j) => (whole ? this.text(0, j) : this.sameText(j)));
  }

  /** Row 0's cell j length in bytes (−1: missing). */
  private cellLength(j: number): number {
    return this.length === 0 ? -1 : this.bounds[j + 1]! - 1 - this.bounds[j]!;
  }

  /**
   * Whether the bytes of cells j0…j1−1 (with the commas between them) are the same in every row, so that
   * each of those cells holds one value throughout. False with a quoted line.
   */
  private sameSpan(j0: number, j1: number): boolean {
    if (this.quoted || this.length === 0) return false;
    if (j1 <= this.leadShared) return true;
    const { bounds, buf, stride } = this;
    const s0 = bounds[j0]!;
    const len = bounds[j1]! - 1 - s0;
    if (len < 0) return false;
    for (let b = stride; b < this.length * stride; b += stride) {
      const s = bounds[b + j0]!;
      if (bounds[b + j1]! - 1 - s !== len) return false;
      for (let k = 0; k < len; k++) if (buf[s + k] !== buf[s0 + k]) return false;
    }
    return true;
  }

  /**
   * Column j as int32s ≥ min into `out` (one per row): the values `intAt` returns. False, with `out`
   * partly written, when a cell is not `[-]digits[.digits]` (which `num` parses itself), not an integer
   * ≥ min, or not an int32: the caller then reads the rows one by one (their errors).
   */
  ints(j: number, min: number, out: Int32Array): boolean {
    if (this.quoted) return false;
    for (let r = 0, b = j; r < this.length; r++, b += this.stride) {
      const s = this.bounds[b]!;
      const e = this.bounds[b + 1]! - 1;
      const v = e > s ? this.decimal(s, e) : NaN;
      if (!(v >= min) || (v | 0) !== v) return false;
      out[r] = v;
    }
    return true;
  }

  /**
   * Column j as positive latencies × `scale` into `out`: `latencyAt(…) * scale` of each row. False as for `ints`.
   */
  latencies(j: number, scale: number, out: Float64Array): boolean {
    if (this.quoted) return false;
    for (let r = 0, b = j; r < this.length; r++, b += this.stride) {
      const s = this.bounds[b]!;
      const e = this.bounds[b + 1]! - 1;
      const v = e > s ? this.decimal(s, e) : NaN;
      if (!(v > 0)) return false;
      out[r] = v * scale;
    }
    return true;
  }

  /**
   * Lines of text, one per row: `prefix`, the row's bytes of cells j0…j1−1 with the commas between them,
   * `,`, `String(tail[r])` (number-text.ts `writeNumber`) and `\n`. Undefined when one of those cells is not
   * a plain positive integer's digits (`[1-9][0-9]*`, what `String` prints for the int32 `ints` reads there),
   * a cell is missing, or a line was quoted: the caller then writes the lines from the values.
   */
  spanLines(prefix: Buffer, j0: number, j1: number, tail: Float64Array): Buffer | undefined {
    if (this.quoted) return undefined;
    const { bounds, buf, stride } = this;
    let spans = 0;
    for (let b = j0; b < this.length * stride; b += stride) spans += bounds[b + j1 - j0]! - 1 - bounds[b]!;
    // The first size leaves room for the usual lines.
    const out = new GrowingBytes(Buffer.allocUnsafe(spans + this.length * (prefix.length + 34)));
    for (let r = 0, b = j0; r < this.length; r++, b += stride) {
      const o = out.buf;
      o.set(prefix, out.pos);
      let p = out.pos + prefix.length;
      const e = bounds[b + j1 - j0]! - 1;
      let s = bounds[b]!;
      if (e <= s) return undefined;
      // A cell starts at s or after a comma; its first digit is 1–9, the rest 0–9.
      let first = true;
      for (; s < e; s++) {
        const c = buf[s]!;
        if (c === 44) {
          if (first) return undefined;
          first = true;
        } else if (c < (first ? 49 : 48) || c > 57) return undefined;
        else first = false;
        o[p++] = c;
      }
      if (first) return undefined;
      o[p++] = 44;
      out.pos = p;
      writeNumber(out, tail[r]!);
      out.buf[out.pos++] = 10;
    }
    return out.buf.subarray(0, out.pos);
  }

  cell(r: number, j: number): Cell {
    const q = this.quoted?.get(r);
    if (q) return q[j];
    const b = r * this.stride + j;
    const s = this.bounds[b]!;
    const e = this.bounds[b + 1]! - 1;
    return e < s ? undefined : this.buf.toString('utf8', s, e);
  }

  toRawTable(): RawTable {
    const rows: Cell[][] = new Array(this.length);
    for (let r = 0; r < this.length; r++) {
      const q = this.quoted?.get(r);
      if (q) {
        rows[r] = q;
        continue;
      }
      const cells: Cell[] = [];
      for (let j = 0; j < this.header.length; j++) {
        const c = this.cell(r, j);
        if (c === undefined) break;
        cells.push(c);
      }
      rows[r] = cells;
    }
    return { file: this.file, header: this.header, rows };
  }
}

/**
 * Split `buf[0, end)` (whole lines; a last line without `\n` is fine) into a CsvChunk of `ncol`
 * columns: lines on `\n` (a trailing `\r` dropped, blank lines skipped), cells on commas, cells past
 * `ncol` ignored. A line with a quote goes through papaparse. `reuse`: a chunk no longer read, whose
 * offset array is written over (no new 5 MB array per block).
 */
export function splitCsvBlock(file: string, header: string[], buf: Buffer, end: number, reuse?: CsvChunk): CsvChunk {
  const ncol = header.length;
  const stride = ncol + 1;
  const size = Math.max(1024, (end >> 5) * stride);
  let bounds = reuse && reuse.bounds.length >= size ? reuse.bounds : new Int32Array(size);
  let quoted: Map<number, string[]> | undefined;
  let rows = 0;
  let pos = 0;
  // Whether the block holds a quote at all (one memchr): most do not, and their byte loop skips the test.
  const firstQuote = buf.indexOf(34);
  const quotes = firstQuote >= 0 && firstQuote < end;
  /** The fewest leading cells a line repeated of the line before (so every line holds row 0's bytes there). */
  let shared = ncol;
  let prevStop = 0;
  while (pos < end) {
    const start = pos;
    let b = rows * stride;
    if (b + stride > bounds.length) {
      const g = new Int32Array(bounds.length * 2);
      g.set(bounds);
      bounds = g;
    }
    bounds[b] = start;
    let j = 1;
    let quote = false;
    if (quotes) {
      for (; pos < end; pos++) {
        const c = buf[pos]!;
        if (c === 10) break;
        if (c === 44) {
          if (j <= ncol) bounds[b + j++] = pos + 1;
        } else if (c === 34) quote = true;
      }
    } else {
      // The leading cells that repeat the line before are compared, not scanned (one test per byte, no stores).
      if (rows > 0) {
        const n = repeatedCells(buf, bounds, b, b - stride, prevStop, end, ncol);
        if (n < shared) shared = n;
        if (n > 0) {
          j = n + 1;
          pos = bounds[b + n]!;
        }
      }
      for (; pos < end; pos++) {
        const c = buf[pos]!;
        if (c === 44) {
          if (j <= ncol) bounds[b + j++] = pos + 1;
        } else if (c === 10) break;
      }
    }
    let stop = pos;
    pos++;
    if (stop > start && buf[stop - 1] === 13) stop--;
    if (stop === start) continue;
    prevStop = stop;
    // The cell after the last comma ends at the line end; cells the line lacks are missing (length −1).
    for (b += j; j <= ncol; j++) bounds[b++] = stop + 1;
    if (quote) {
      quoted ??= new Map();
      quoted.set(rows, Papa.parse<string[]>(buf.toString('utf8', start, stop)).data[0] ?? []);
    }
    rows++;
  }
  return new CsvChunk(file, header, buf, bounds, rows, quoted, quotes || rows < 2 ? 0 : shared);
}

/**
 * How many leading cells of the line at `bounds[b]` hold the same bytes as in the line before (its offsets
 * at `bounds[pb…]`, its content ending at `prevStop`), each up to and including its comma; their offsets are
 * written, shifted from the line before's, into `bounds[b + 1…]`. A cell that ends the line before (no
 * comma) is never counted. `end`: where the block's bytes end.
 */
function repeatedCells(
  buf: Buffer,
  bounds: Int32Array,
  b: number,
  pb: number,
  prevStop: number,
  end: number,
  ncol: number,
): number {
  const prevStart = bounds[pb]!;
  const d = bounds[b]! - prevStart;
  const lim = Math.min(prevStop, end - d);
  let q = prevStart;
  while (q < lim && buf[q] === buf[q + d]) q++;
  // Bytes before q repeat; a cell counts when its comma is one of them (a cell ending the line, or missing,
  // ends at prevStop ≥ q: never counted).
  let n = 0;
  for (; n < ncol; n++) {
    const comma = bounds[pb + n + 1]! - 1;
    if (comma >= q) break;
    bounds[b + n + 1] = comma + 1 + d;
  }
  return n;
}
