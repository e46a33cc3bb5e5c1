/**
 * A raw input table (header + rows of cells) read from CSV or Parquet, and typed cell accessors that
 * turn bad cells into `InputError`s naming file, row and column.
 *
 * Rows are 1-based data rows (the header is row 0), matching `InputError`.
 */
import { createReadStream } from 'node:fs';
import type { TransformOptions } from 'node:stream';
import { createGunzip, type ZlibOptions } from 'node:zlib';
import type { AsyncBuffer, FileMetaData } from 'hyparquet';
import Papa from 'papaparse';
import { InputError, UserError } from '../core/errors.ts';
import { readBytes } from '../core/io/fs.ts';
import { memoByObject } from '../core/text-memo.ts';
import {
  type Cell,
  type CellTable,
  cellsOf,
  intAt,
  latencyAt,
  numberAt,
  type CsvChunk,
  type RawTable,
  splitCsvBlock,
} from './cell-table.ts';

export type { Cell, RawTable };

/**
 * Parse CSV text into a RawTable (cells stay strings; no type guessing).
 * @throws InputError for an empty file (no header or no data rows).
 */
export function csvTable(text: string, file: string): RawTable {
  const data = text.includes('"')
    ? Papa.parse<string[]>(text, { delimiter: ',', skipEmptyLines: true }).data
    : splitPlainCsv(text);
  if (data.length === 0) throw new InputError({ file }, 'empty file: expected a header row and data rows');
  const header = checkHeader(
    file,
    data[0]!.map((h) => h.trim()),
  );
  if (data.length === 1)
    throw new InputError({ file, row: 1 }, 'no data rows: expected at least one row after the header');
  return { file, header, rows: data.slice(1) };
}

/**
 * Refuse a header that names a column twice: which copy holds the data is a guess (before, the last
 * one silently won). @returns the header. @throws InputError (row 0, the column) naming both positions.
 */
export function checkHeader(file: string, header: string[]): string[] {
  const seen = new Map<string, number>();
  header.forEach((h, i) => {
    const j = seen.get(h);
    if (j !== undefined && h !== '') {
      throw new InputError(
        { file, row: 0, column: h },
        `duplicated column: "${h}" is both column ${j + 1} and column ${i + 1}; keep one (stepcal will not guess which holds the data)`,
      );
    }
    seen.set(h, i);
  });
  return header;
}

/**
 * Split CSV text that has no quoted fields (the AIConfigurator copies never quote): lines on \n (a trailing
 * \r is dropped), cells on commas, blank lines skipped. Several times faster than a general parser.
 */
function splitPlainCsv(text: string): string[][] {
  const out: string[][] = [];
  let start = 0;
  const n = text.length;
  while (start < n) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = n;
    let stop = end;
    if (stop > start && text.charCodeAt(stop - 1) === 13) stop--;
    if (stop > start) out.push(text.slice(start, stop).split(','));
    start = end + 1;
  }
  return out;
}

/**
 * Read a Parquet file (any codec hyparquet-compressors handles: ZSTD, SNAPPY, GZIP, BROTLI, LZ4) into a
 * RawTable. int64 columns arrive as bigint and are converted by the cell accessors.
 * @throws InputError for an unreadable or empty file.
 */
export async function parquetTable(file: string): Promise<RawTable> {
  const { parquetMetadata, parquetRead, parquetSchema } = await import('hyparquet');
  const { compressors } = await import('hyparquet-compressors');
  const buf = readBytes(file);
  const arrayBuffer = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
  let metadata: FileMetaData;
  try {
    metadata = parquetMetadata(arrayBuffer);
  } catch (err) {
    throw new InputError({ file }, `not a readable Parquet file: ${(err as Error).message}`);
  }
  const header = checkHeader(
    file,
    parquetSchema(metadata).children.map((c) => c.element.name),
  );
  let rows: Cell[][] = [];
  try {
    await parquetRead({
      file: arrayBuffer,
      metadata,
      compressors,
      rowFormat: 'array',
      onComplete: (r: Cell[][]) => {
        rows = r;
      },
    });
  } catch (err) {
    throw new InputError({ file }, `could not decode Parquet data: ${(err as Error).message}`);
  }
  if (rows.length === 0) throw new InputError({ file, row: 1 }, 'no data rows: expected at least one row');
  return { file, header, rows };
}

/** Rows per chunk of the Parquet reader (one row group, split to this). */
const CHUNK_ROWS = 65_536;
/** Bytes of CSV text per chunk (about 50k AIConfigurator rows). */
const CHUNK_BYTES = 4 << 20;
/** Gunzip into block-sized buffers, one block buffered ahead (a stream option zlib passes on to its Transform). */
const GUNZIP_OPTIONS: ZlibOptions & Pick<TransformOptions, 'readableHighWaterMark'> = {
  chunkSize: CHUNK_BYTES,
  readableHighWaterMark: CHUNK_BYTES,
};

/**
 * Stream a table in chunks so memory stays flat in the number of rows and any file size works (no
 * whole-file string: issue 12 item 5). Each chunk is a CellTable (cell-table.ts; same file and
 * header) of a block of rows; `rowOffset` is how many data rows came before it (its row r is file
 * row rowOffset + r + 1). A chunk is valid during its callback; it keeps its block's bytes.
 * - CSV (`.csv`, `.csv.gz`, `.txt`): read (gunzipped on the fly) in blocks of CHUNK_BYTES of whole
 *   lines, split on newlines and commas as bytes (cell-table.ts `splitCsvBlock`); a line with a quote
 *   goes through papaparse.
 * - Parquet: hyparquet, one row group (or CHUNK_ROWS slice of it) at a time from the file, never
 *   the whole file in memory.
 * @returns total data rows. @throws InputError for an empty or unreadable file; UserError for an unknown type.
 */
export async function readTableChunks(
  file: string,
  onChunk: (chunk: CellTable, rowOffset: number) => void | Promise<void>,
): Promise<number> {
  if (file.endsWith('.parquet')) return parquetChunks(file, (chunk, rowOffset) => onChunk(cellsOf(chunk), rowOffset));
  if (!/\.csv(\.gz)?$/.test(file) && !file.endsWith('.txt'))
    throw new UserError(`${file}: unsupported file type (expected .csv, .csv.gz or .parquet)`);
  let stream: NodeJS.ReadableStream = createReadStream(file, { highWaterMark: 1 << 20 });
  // Gunzipped in whole blocks: zlib inflates one output buffer per main-thread turn, so with 1 MiB
  // buffers the read waited on the pool three times per block; a block-sized buffer is inflated while
  // the block before is mapped (one block ahead: readableHighWaterMark).
  if (file.endsWith('.gz')) stream = stream.pipe(createGunzip(GUNZIP_OPTIONS));
  let header: string[] | undefined;
  let total = 0;
  const blocks = new LineBlocks();
  let done: CsvChunk | undefined;
  /** Split the held bytes up to their last newline (all of them when `last`); keep the rest. */
  const take = async (last: boolean) => {
    const buf = blocks.bytes();
    let from = 0;
    if (!header) {
      const h = firstLine(buf, last);
      if (!h) return;
      header = checkHeader(
        file,
        splitLine(h.line).map((x) => x.trim()),
      );
      from = h.next;
    }
    const end = last ? buf.length : buf.lastIndexOf(10) + 1;
    if (end > from) {
      // The chunk before is done with (valid during its callback only): its offset array is reused.
      const chunk = splitCsvBlock(file, header, buf.subarray(from), end - from, done);
      done = chunk;
      if (chunk.length > 0) {
        await onChunk(chunk, total);
        total += chunk.length;
      }
    }
    blocks.drop(Math.max(from, end));
  };
  try {
    for await (const buf of stream as AsyncIterable<Buffer>) {
      blocks.add(buf);
      if (blocks.held >= CHUNK_BYTES) await take(false);
    }
    await take(true);
  } catch (err) {
    if (err instanceof UserError) throw err;
    throw new UserError(`cannot read ${file}: ${readFailure(err as NodeJS.ErrnoException)}`);
  }
  if (!header) throw new InputError({ file }, 'empty file: expected a header row and data rows');
  if (total === 0) throw new InputError({ file, row: 1 }, 'no data rows: expected at least one row after the header');
  return total;
}

/**
 * Why reading a table failed, for the one-line error: a gzip stream that ends early (zlib's
 * Z_BUF_ERROR, "unexpected end of file") is named as a truncated file; anything else is the system's
 * message.
 */
function readFailure(err: NodeJS.ErrnoException): string {
  if (err.code === 'Z_BUF_ERROR') return `truncated gzip file (${err.message}): copy or download it again`;
  return err.message;
}

/**
 * The input's bytes not yet split, in one buffer reused from block to block (the chunk of a block is
 * read only during its callback): no new block-sized buffer per block, which is what made most of the
 * import's garbage collections (V8 collects on external memory growth).
 */
class LineBlocks {
  private buf = Buffer.allocUnsafe(0);
  held = 0;

  /** Append a piece of the input. */
  add(piece: Buffer): void {
    if (this.held + piece.length > this.buf.length) {
      const b = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.held + piece.length, 2 * CHUNK_BYTES));
      this.buf.copy(b, 0, 0, this.held);
      this.buf = b;
    }
    piece.copy(this.buf, this.held);
    this.held += piece.length;
  }

  /** The held bytes (a view, valid until the next `add` or `drop`). */
  bytes(): Buffer {
    return this.buf.subarray(0, this.held);
  }

  /** Drop the first n held bytes (the rest moves to the front). */
  drop(n: number): void {
    if (n === 0) return;
    this.buf.copyWithin(0, n, this.held);
    this.held -= n;
  }
}

/**
 * The first non-blank line of `buf` (a trailing `\r` dropped) and where the next one starts;
 * undefined when it has not all arrived (with `last`, a line without `\n` ends the buffer) or there is none.
 */
function firstLine(buf: Buffer, last: boolean): { line: string; next: number } | undefined {
  let from = 0;
  while (from < buf.length) {
    let nl = buf.indexOf(10, from);
    if (nl < 0 && !last) return undefined;
    if (nl < 0) nl = buf.length;
    const line = buf.toString('utf8', from, nl).replace(/\r$/, '');
    from = nl + 1;
    if (line !== '') return { line, next: Math.min(from, buf.length) };
  }
  return undefined;
}

/** One CSV line to cells; a line with a quote goes through papaparse. */
function splitLine(line: string): string[] {
  return line.includes('"') ? (Papa.parse<string[]>(line, { delimiter: ',' }).data[0] ?? []) : line.split(',');
}

async function parquetChunks(
  file: string,
  onChunk: (chunk: RawTable, rowOffset: number) => void | Promise<void>,
): Promise<number> {
  const { asyncBufferFromFile, parquetMetadataAsync, parquetRead, parquetSchema } = await import('hyparquet');
  const { compressors } = await import('hyparquet-compressors');
  let metadata: FileMetaData;
  let buffer: AsyncBuffer;
  try {
    buffer = await asyncBufferFromFile(file);
    metadata = await parquetMetadataAsync(buffer);
  } catch (err) {
    throw new InputError({ file }, `not a readable Parquet file: ${(err as Error).message}`);
  }
  const header = checkHeader(
    file,
    parquetSchema(metadata).children.map((c) => c.element.name),
  );
  const total = Number(metadata.num_rows);
  if (total === 0) throw new InputError({ file, row: 1 }, 'no data rows: expected at least one row');
  for (let start = 0; start < total; start += CHUNK_ROWS) {
    let rows: Cell[][] = [];
    try {
      await parquetRead({
        file: buffer,
        metadata,
        compressors,
        rowFormat: 'array',
        rowStart: start,
        rowEnd: Math.min(total, start + CHUNK_ROWS),
        onComplete: (r: Cell[][]) => (rows = r),
      });
    } catch (err) {
      throw new InputError({ file }, `could not decode Parquet data: ${(err as Error).message}`);
    }
    await onChunk({ file, header, rows }, start);
  }
  return total;
}

/** Column index lookup that names the missing column and the expected header. */
export class Columns {
  private readonly index = new Map<string, number>();
  constructor(
    readonly table: { readonly file: string; readonly header: readonly string[] },
    readonly expected: readonly string[],
  ) {
    table.header.forEach((h, i) => {
      this.index.set(h, i);
    });
  }
  /** Index of a required column. @throws InputError (row 0) when absent. */
  req(name: string): number {
    const i = this.index.get(name);
    if (i === undefined) {
      throw new InputError(
        { file: this.table.file, row: 0, column: name },
        `missing column; expected columns ${this.expected.join(', ')} (found ${this.table.header.join(', ')})`,
      );
    }
    return i;
  }
  /** Index of an optional column, or -1. */
  opt(name: string): number {
    return this.index.get(name) ?? -1;
  }
}

/** The CellTable view of each RawTable given to the cell readers below (made once per table, not per call). */
const viewOf: (table: RawTable) => CellTable = memoByObject(cellsOf);

/** A finite number from a cell (cell-table.ts `numberAt`). @throws InputError naming file, row and column when empty or non-numeric. */
export function numCell(table: RawTable, r: number, j: number, col: string): number {
  return numberAt(viewOf(table), r, j, col);
}

/** An integer count ≥ `min` from a cell (`intAt`). @throws InputError naming file, row and column. */
export function intCell(table: RawTable, r: number, j: number, col: string, min = 0): number {
  return intAt(viewOf(table), r, j, col, min);
}

/** A positive finite latency from a cell (`latencyAt`). @throws InputError naming file, row and column. */
export function latencyCell(table: RawTable, r: number, j: number, col: string): number {
  return latencyAt(viewOf(table), r, j, col);
}

/** A text cell (trimmed; '' for empty). */
export function textCell(table: RawTable, r: number, j: number): string {
  return viewOf(table).text(r, j);
}

/**
 * Index of column `name` in `t`'s header.
 * @throws InputError naming the file and the column (row 0) when the header lacks it.
 */
export function columnIndex(t: RawTable, name: string): number {
  const j = t.header.indexOf(name);
  if (j < 0) throw new InputError({ file: t.file, row: 0, column: name }, `missing column "${name}"`);
  return j;
}

/** ms → µs, rounded to 12 significant digits so 0.0098 ms is written 9.8, not 9.799999999999999. */
export function msToUs(ms: number): number {
  return Number((ms * 1000).toPrecision(12));
}
