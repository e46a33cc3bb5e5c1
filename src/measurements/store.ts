/**
 * The measurement store: normalized per-family files under `measurements/<chip>/`.
 *
 * Layout: `<dir>/<family>.<lane>.csv.gz` (header = `FAMILY_COLUMNS[family]`) and beside it
 * `<family>.<lane>.provenance.yaml`. Step files may also be plain `*.steps.csv`.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { once } from 'node:events';
import { createGzip, gzipSync } from 'node:zlib';
import Papa from 'papaparse';
import { decimalNumber } from '../core/numeric/decimal.ts';
import { RowColumns, type RowList, readerOf } from './row-columns.ts';
import { compileRowReader, type RowReader } from './row-check.ts';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { InputError, UserError } from '../core/errors.ts';
import { csvHeader, csvRowLines, writeCsv } from '../core/render/csv.ts';
import { encodeText, readText, sha256, writeFilesAtomic } from '../core/io/fs.ts';
import type { z } from 'zod';
import { FAMILY_ROW_SCHEMAS, ProvenanceSchema } from '../core/schemas/measurements.ts';
import {
  FAMILIES,
  FAMILY_COLUMNS,
  TEXT_COLUMNS,
  type Family,
  type FamilyRow,
  type LocatedStepRow,
  type Provenance,
} from './schema.ts';

/** File-name-safe lane slug (`vllm-0.24.0` stays as is; spaces and slashes become `-`). */
export function laneSlug(lane: string): string {
  return lane.replace(/[^A-Za-z0-9._+-]+/g, '-');
}

/** Path of the data file for (family, lane) in `dir`. */
export function measurementPath(dir: string, family: Family, lane: string): string {
  return path.join(dir, `${family}.${laneSlug(lane)}.csv.gz`);
}

/** Path of the provenance file that sits beside `dataFile`. */
export function provenancePath(dataFile: string): string {
  return dataFile.replace(/\.csv(\.gz)?$/, '.provenance.yaml');
}

/**
 * Provenance fields an import does not always produce itself, kept from the file it replaces when it
 * leaves them out: `notes`, a curator's remarks on the input (scripts/curate.ts: "converted upstream
 * from Parquet to CSV unchanged …"), which a plain `import --force` of the same table would drop.
 * Fields computed from the data (coverage, lanes, …) and the collector's run record are not kept.
 */
const KEPT_FIELDS = ['notes'] as const;
type Kept = Pick<Provenance, (typeof KEPT_FIELDS)[number]>;

/**
 * `provenance` with the KEPT_FIELDS it leaves out taken from the provenance file `provFile` it will
 * replace, when that file records the same inputs (the same sha256s, in order): a curator's remarks are about
 * those bytes, not about whatever is imported next. Absent, unreadable or not YAML, or other inputs: nothing
 * kept (the import replaces it either way).
 */
export function keptFrom<P extends Partial<Provenance>>(provFile: string, provenance: P): P & Partial<Kept> {
  if (!existsSync(provFile)) return provenance;
  let old: Record<string, unknown> | undefined;
  try {
    old = parseYaml(readText(provFile)) as Record<string, unknown> | undefined;
  } catch {
    return provenance;
  }
  if (!sameInputs(old?.inputs, provenance.inputs)) return provenance;
  const out: P & Partial<Kept> = { ...provenance };
  for (const k of KEPT_FIELDS) {
    const v = old?.[k];
    if (out[k] === undefined && Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string'))
      out[k] = v as string[];
  }
  return out;
}

/** Whether an old provenance's `inputs` (untyped YAML) list the same sha256s, in order, as the new `inputs`. */
function sameInputs(old: unknown, inputs: Provenance['inputs'] | undefined): boolean {
  if (!Array.isArray(old) || !inputs || old.length !== inputs.length) return false;
  return inputs.every((x, i) => (old[i] as { sha256?: unknown } | null)?.sha256 === x.sha256);
}

/**
 * Serialize rows to CSV text with the family's canonical header, written by papaparse (RFC 4180
 * quoting: a cell with a comma, quote, line break or edge space is quoted). Numbers use JS shortest
 * round-trip form; a missing value is an empty cell. Ends with a newline.
 */
export function rowsToCsv<F extends Family>(family: F, rows: ReadonlyArray<FamilyRow[F]>): string {
  return writeCsv(
    FAMILY_COLUMNS[family] as readonly string[],
    rows as unknown as ReadonlyArray<Record<string, unknown>>,
  );
}

/**
 * Write a family's rows and their provenance atomically (both files land, or neither).
 * `provenance.output_sha256` is filled in here.
 * @returns the data file path.
 */
export function writeMeasurements<F extends Family>(
  dir: string,
  family: F,
  lane: string,
  rows: ReadonlyArray<FamilyRow[F]>,
  provenance: Omit<Provenance, 'output_sha256'>,
): string {
  const staged = prepareMeasurements(dir, family, lane, rows, provenance);
  writeFilesAtomic(staged.files);
  return staged.file;
}

/** Encoded data + provenance files for one (family, lane), not yet written. */
export interface StagedMeasurements {
  /** Data file path. */
  file: string;
  family: Family;
  lane: string;
  rows: number;
  /** The data file and its provenance, ready for writeFilesAtomic. */
  files: Array<{ file: string; data: string | Uint8Array }>;
}

/**
 * Encode a family's rows and provenance in memory (nothing is written), so that several files can be
 * committed together with `writeMeasurementSet` after every input has validated.
 */
export function prepareMeasurements<F extends Family>(
  dir: string,
  family: F,
  lane: string,
  rows: ReadonlyArray<FamilyRow[F]>,
  provenance: Omit<Provenance, 'output_sha256'>,
): StagedMeasurements {
  const file = measurementPath(dir, family, lane);
  const data = encodeMeasurementText(file, rowsToCsv(family, rows));
  const prov: Provenance = { ...keptFrom(provenancePath(file), provenance), output_sha256: sha256(data) };
  return {
    file,
    family,
    lane,
    rows: rows.length,
    files: [
      { file, data },
      { file: provenancePath(file), data: stringifyYaml(prov, { lineWidth: 0 }) },
    ],
  };
}

/** Bytes of CSV text a MeasurementGzip may hold uncompressed before `write` waits (about two import chunks). */
const GZIP_BACKLOG = 8 << 20;
/**
 * Bytes of compressed output per piece a MeasurementGzip is drained in. zlib deflates until its output
 * buffer is full, then waits for the main thread; 2 MiB holds a whole import chunk's compressed lines
 * (≈ 0.5 MB of a 3.4 MB text), so a chunk is deflated in one go on the pool while the next is mapped
 * (with 256 KiB the stream fell behind by half a chunk each chunk and the import waited on it).
 */
const GZIP_OUT_CHUNK = 2 << 20;

/**
 * A measurement file's gzip stream (MEASUREMENT_GZIP_LEVEL), compressed on libuv's thread pool while
 * the caller goes on: the import feeds it each chunk's CSV lines as they are mapped, so the deflate
 * work overlaps the reading (`stageAicImport`). The bytes equal gzipSync of the whole text at that
 * level: deflate's output does not depend on how its input is split into writes, nor on the size of
 * the output pieces it is drained in (GZIP_OUT_CHUNK: a callback to the main thread per import chunk
 * instead of one per 16 KiB by default; same bytes).
 */
export class MeasurementGzip {
  private readonly gz = createGzip({ level: MEASUREMENT_GZIP_LEVEL, chunkSize: GZIP_OUT_CHUNK });
  private readonly out: Buffer[] = [];
  private readonly done: Promise<unknown>;

  constructor() {
    this.gz.on('data', (b: Buffer) => this.out.push(b));
    this.done = once(this.gz, 'end');
    this.done.catch(() => undefined); // a stream given up (`discard`) is never awaited
  }

  /**
   * Queue `data`; resolves at once while under GZIP_BACKLOG bytes wait, else once the queue has drained
   * (back-pressure that still lets the caller map the next chunk while this one is compressed: waiting
   * for every write to drain made the import wait for deflate after each chunk).
   */
  async write(data: Buffer | string): Promise<void> {
    if (!this.gz.write(data) && this.gz.writableLength > GZIP_BACKLOG) await once(this.gz, 'drain');
  }

  /** The whole compressed file. */
  async end(): Promise<Buffer> {
    this.gz.end();
    await this.done;
    return Buffer.concat(this.out);
  }

  /** Give the stream up (its text was not the file's after all). */
  discard(): void {
    this.gz.destroy();
  }
}

/**
 * `prepareMeasurements` for large tables: the CSV text is produced CSV_PIECE_ROWS rows at a time and
 * fed to a MeasurementGzip, so the whole text never exists as one string. The data file's bytes are
 * the concatenated gzip output (≈ 1/6 of the text). `encoded`, when given, is that file already
 * compressed (the import compressed each chunk as it read it) and is used as it is.
 */
export async function prepareMeasurementsStreaming<F extends Family>(
  dir: string,
  family: F,
  lane: string,
  rows: RowList<FamilyRow[F]>,
  provenance: Omit<Provenance, 'output_sha256'>,
  encoded?: Buffer,
): Promise<StagedMeasurements> {
  const file = measurementPath(dir, family, lane);
  if (!file.endsWith('.gz')) return prepareMeasurements(dir, family, lane, [...rows], provenance);
  const data = encoded ?? (await gzipRows(family, rows));
  const prov: Provenance = { ...keptFrom(provenancePath(file), provenance), output_sha256: sha256(data) };
  return {
    file,
    family,
    lane,
    rows: rows.length,
    files: [
      { file, data },
      { file: provenancePath(file), data: stringifyYaml(prov, { lineWidth: 0 }) },
    ],
  };
}

/** The gzip bytes of a family's CSV file of `rows` (header, then lines written in pieces). */
async function gzipRows<F extends Family>(family: F, rows: RowList<FamilyRow[F]>): Promise<Buffer> {
  const gz = new MeasurementGzip();
  if (rows.length === 0) await gz.write(rowsToCsv(family, []));
  else {
    const columns = FAMILY_COLUMNS[family] as readonly string[];
    const cells = columns.map((c) => readerOf(rows, c));
    await gz.write(csvHeader(columns));
    // Pieces of text through the readers, or straight from the typed columns as bytes: no row object is built.
    for (let i = 0; i < rows.length; i += CSV_PIECE_ROWS) {
      const end = Math.min(rows.length, i + CSV_PIECE_ROWS);
      await gz.write(rows instanceof RowColumns ? rows.csvLines(columns, i, end) : csvRowLines(cells, i, end));
    }
  }
  return gz.end();
}

/** Rows per piece of streamed CSV text. */
const CSV_PIECE_ROWS = 16_384;

/**
 * Gzip level used for stored measurement files. Level 6 instead of encodeText's 9: on the 107k-row h200
 * GEMM table it is ~2.5× faster for 5 % more bytes (1.46 vs 1.39 MB). Node's gzip writes mtime 0, so the
 * output is byte-reproducible at any level.
 */
export const MEASUREMENT_GZIP_LEVEL = 6;

function encodeMeasurementText(file: string, text: string): Uint8Array {
  return file.endsWith('.gz')
    ? gzipSync(Buffer.from(text, 'utf8'), { level: MEASUREMENT_GZIP_LEVEL })
    : encodeText(file, text);
}

/**
 * Import never loses data (issue 12 item 4): the data files an import would replace. Without `force`
 * any existing one is refused; with it, each is described (rows and sha256 from its provenance) so
 * the caller can say what it replaced.
 * @param targets data files (`.csv.gz`, `.steps.csv`, a chip YAML) about to be written.
 * @returns one line per replaced file (empty when none exists).
 * @throws UserError naming every existing file when `force` is false.
 */
export function guardOverwrite(targets: readonly string[], force: boolean): string[] {
  const lines: string[] = [];
  for (const file of targets) {
    if (!existsSync(file)) continue;
    let what = 'no provenance';
    try {
      const prov = readProvenance(file);
      what = `${prov.rows_out} rows, sha256 ${String(prov.output_sha256).slice(0, 12)}…, from ${prov.inputs?.map((i) => i.file).join(', ') || prov.source_path}`;
    } catch {
      // a chip file or a file without provenance: described by its path only
    }
    lines.push(`${file} (${what})`);
  }
  if (lines.length && !force) {
    // Targets in several folders are several chips' (a multi-chip Splitwise file): one --out folder
    // takes one chip, so the hint names --chip too (import refuses --out alone there).
    const elsewhere =
      new Set(targets.map((t) => path.dirname(t))).size > 1
        ? '--chip <chip> --out <dir> to write one chip elsewhere'
        : '--out <dir> to write elsewhere';
    throw new UserError(
      `refusing to overwrite ${lines.length === 1 ? 'an existing curated file' : `${lines.length} existing curated files`}: ${lines.join('; ')}. ` +
        `Pass --force to replace (stepcal then lists what it replaced), or ${elsewhere}`,
    );
  }
  return lines;
}

/** Write every staged file atomically as one set (all land, or none do). */
export function writeMeasurementSet(staged: ReadonlyArray<StagedMeasurements>): void {
  writeFilesAtomic(staged.flatMap((s) => s.files));
}

/**
 * Parse canonical CSV text of a family. Numeric columns must be finite numbers; `latency_us` and
 * `measured_us` must be positive; every row is then parsed with the family's zod schema
 * (src/core/schemas/measurements.ts: counts are integers, `op`, `backend`, `what` are known values),
 * through its compiled fast path (row-check.ts) with zod for any row that path does not accept.
 * Step files go through the one step reader, `parseStepsCsv`.
 * @throws InputError naming file, row and column.
 */
export function parseCanonicalCsv<F extends Family>(family: F, text: string, file: string): FamilyRow[F][] {
  if (family === 'step')
    return parseStepsCsv(text, file).rows.map(({ file: _f, row: _r, ...row }) => row) as FamilyRow[F][];
  const schema = FAMILY_ROW_SCHEMAS[family];
  const data = csvLines(text);
  if (data.length === 0) throw new InputError({ file }, 'empty file: expected a header row and data rows');
  const header = data.cells(0);
  const cols = FAMILY_COLUMNS[family] as readonly string[];
  const idx = cols.map((c) => header.indexOf(c));
  const missing = cols.filter((_, i) => idx[i]! < 0 && !OPTIONAL_COLUMNS.has(cols[i]!));
  if (missing.length) {
    throw new InputError({ file, row: 0, column: missing[0]! }, `missing column; expected header ${cols.join(',')}`);
  }
  const out: FamilyRow[F][] = new Array(data.length - 1);
  // Rows the compiled reader accepts are the rows zod accepts, in zod's output form; any other row
  // goes through zod, so a bad row's error is zod's (row-check.ts).
  const read = rowReader(family);
  const cells = new RowCells(data, header.length);
  const isText = cols.map((c) => TEXT_COLUMNS.has(c));
  const vals: Array<string | number> = new Array(cols.length).fill(0);
  for (let r = 1; r < data.length; r++) {
    cells.load(r);
    for (let c = 0; c < cols.length; c++) {
      const j = idx[c]!;
      if (isText[c]) {
        vals[c] = cells.text(j, c);
        continue;
      }
      // A plain digit string is read without making its text (the same value Number() gives).
      const d = cells.digits(j);
      vals[c] = d > 0 ? d : numberCell(cols[c]!, cells.text(j, -1), file, r);
    }
    const fast = read?.(vals);
    if (fast) {
      out[r - 1] = fast as FamilyRow[F];
      continue;
    }
    const obj: Record<string, string | number> = {};
    for (let c = 0; c < cols.length; c++) obj[cols[c]!] = vals[c]!;
    const checked = schema.safeParse(obj);
    if (!checked.success) throw rowIssue(checked.error.issues[0]!, obj, file, r);
    out[r - 1] = checked.data as FamilyRow[F];
  }
  return out;
}

/** Each family's compiled row reader (row-check.ts), built on first use; undefined when it must be zod. */
const ROW_READERS = new Map<Family, RowReader | undefined>();
function rowReader(family: Family): RowReader | undefined {
  if (!ROW_READERS.has(family))
    ROW_READERS.set(family, compileRowReader(FAMILY_ROW_SCHEMAS[family], FAMILY_COLUMNS[family] as readonly string[]));
  return ROW_READERS.get(family);
}

/**
 * A numeric cell's value: '' is 0 in an optional column; otherwise a finite decimal number
 * (core/numeric/decimal.ts `decimalNumber`: not `0x10`, `0b1`, `Infinity`), positive for `latency_us` and
 * `measured_us`. @throws InputError naming file, row and column.
 */
function numberCell(col: string, cell: string, file: string, r: number): number {
  const v = cell === '' && OPTIONAL_COLUMNS.has(col) ? 0 : decimalNumber(cell);
  if (cell === '' && !OPTIONAL_COLUMNS.has(col)) {
    throw new InputError({ file, row: r, column: col }, 'expected a number, got an empty cell');
  }
  if (!Number.isFinite(v))
    throw new InputError({ file, row: r, column: col }, `expected a finite number (decimal), got "${cell}"`);
  if ((col === 'latency_us' || col === 'measured_us') && v <= 0) {
    throw new InputError({ file, row: r, column: col }, `expected a positive number (µs), got ${cell}`);
  }
  return v;
}

/**
 * The cells of one row at a time. A plain line (csvLines) is read in place: cell bounds found with
 * indexOf (the cells `split(',')` would give), digit strings parsed from their character codes, and a
 * text cell equal to the column's previous one reused without slicing; other texts give their cell
 * arrays. Text cells are interned per column (one string per distinct chip, lane, kernel, dtype), so
 * rows share them instead of each keeping a slice of the file's text alive.
 */
class RowCells {
  private line = '';
  private cells: readonly string[] | undefined;
  private readonly starts: Int32Array;
  private readonly ends: Int32Array;
  private n = 0;
  private readonly seen: Array<Map<string, string>> = [];
  private readonly last: Array<string | undefined> = [];
  constructor(
    private readonly data: CsvLines,
    private readonly width: number,
  ) {
    this.starts = new Int32Array(width);
    this.ends = new Int32Array(width);
  }

  /** Make row `r` (0 = the header) the current one. */
  load(r: number): void {
    const raw = this.data.line?.(r);
    if (raw === undefined) {
      this.cells = this.data.cells(r);
      return;
    }
    this.cells = undefined;
    this.line = raw;
    let pos = 0;
    let n = 0;
    while (n < this.width) {
      const k = raw.indexOf(',', pos);
      this.starts[n] = pos;
      this.ends[n++] = k < 0 ? raw.length : k;
      if (k < 0) break;
      pos = k + 1;
    }
    this.n = n;
  }

  /** Cell j's value when it is 1–15 decimal digits and not 0 (exact, as Number() reads it); else -1. */
  digits(j: number): number {
    if (this.cells || j < 0 || j >= this.n) return -1;
    const a = this.starts[j]!;
    const b = this.ends[j]!;
    if (b <= a || b - a > 15) return -1;
    let v = 0;
    for (let i = a; i < b; i++) {
      const d = this.line.charCodeAt(i) - 48;
      if (d < 0 || d > 9) return -1;
      v = v * 10 + d;
    }
    return v > 0 ? v : -1;
  }

  /** Cell j's text ('' when absent); interned under column slot `c` when c ≥ 0. */
  text(j: number, c: number): string {
    if (j < 0) return '';
    if (this.cells) return c < 0 ? (this.cells[j] ?? '') : this.intern(c, this.cells[j] ?? '');
    if (j >= this.n) return '';
    const a = this.starts[j]!;
    const b = this.ends[j]!;
    if (c < 0) return this.line.slice(a, b);
    const prev = this.last[c];
    if (prev !== undefined && prev.length === b - a && this.line.startsWith(prev, a)) return prev;
    const t = this.intern(c, this.line.slice(a, b));
    this.last[c] = t;
    return t;
  }

  private intern(c: number, cell: string): string {
    let seen = this.seen[c];
    if (!seen) {
      seen = new Map();
      this.seen[c] = seen;
    }
    const t = seen.get(cell);
    if (t !== undefined) return t;
    seen.set(cell, cell);
    return cell;
  }
}

/** The non-empty lines of a CSV text and each one's cells. */
interface CsvLines {
  length: number;
  cells(i: number): readonly string[];
  /** Line i itself, for a plain text (split on LF only); absent when the cells came from papaparse. */
  line?: (i: number) => string;
}

/**
 * Characters that make a CSV text more than comma-split lines: quotes and CR. (papaparse is told the
 * delimiter, so a `|` or `;` inside a cell, as in the `group` column, is plain text.)
 */
const NOT_PLAIN_CSV = ['"', '\r'];

/**
 * Lines and cells of `text` as `Papa.parse(text, { delimiter: ',', skipEmptyLines: true })` gives
 * them. A plain text (no quote, no CR: what the store itself writes) is split on LF and commas
 * directly, which gives the same cells (nothing is quoted) at a fraction of the time and garbage: reading the stored tables was ≈ 8 µs per
 * row, most of a refit's reading (issue 17). Anything else goes through papaparse.
 */
function csvLines(text: string): CsvLines {
  if (NOT_PLAIN_CSV.some((c) => text.includes(c))) {
    const rows = Papa.parse<string[]>(text, { delimiter: ',', skipEmptyLines: true }).data;
    return { length: rows.length, cells: (i) => rows[i]! };
  }
  const lines = text.split('\n').filter((l) => l !== '');
  return { length: lines.length, cells: (i) => lines[i]!.split(','), line: (i) => lines[i]! };
}

/** An InputError naming file, row and column for the first zod issue of a row. */
function rowIssue(issue: z.core.$ZodIssue, obj: Record<string, unknown>, file: string, row: number): InputError {
  const column = issue.path.length ? String(issue.path[0]) : undefined;
  const got = column !== undefined ? ` (got ${JSON.stringify(obj[column])})` : '';
  return new InputError({ file, row, ...(column !== undefined ? { column } : {}) }, `${issue.message}${got}`);
}

/** Columns that may be absent or empty (defaulting to 0 / ''). */
const OPTIONAL_COLUMNS: ReadonlySet<string> = new Set([
  'kv_dtype',
  'cudagraph_mode',
  'prefill_context_tokens',
  'group',
  'flags',
  'prefill_requests',
  'prefill_tokens',
  'decode_requests',
  'decode_context_tokens',
  'batch',
  'prompt_tokens',
  'output_tokens',
]);

/** One stored data file and its family and lane, as found on disk. */
export interface StoredFile {
  file: string;
  family: Family;
  lane: string;
}

/** List the canonical data files in a chip directory (`<family>.<lane>.csv[.gz]`). */
export function listMeasurementFiles(dir: string): StoredFile[] {
  if (!existsSync(dir)) return [];
  const out: StoredFile[] = [];
  for (const name of readdirSync(dir).sort()) {
    const m = /^([a-z_]+)\.(.+)\.csv(\.gz)?$/.exec(name);
    if (!m) continue;
    const family = m[1] as Family;
    if (!(FAMILIES as readonly string[]).includes(family)) continue;
    out.push({ file: path.join(dir, name), family, lane: m[2]! });
  }
  return out;
}

/**
 * Read every stored file of `family` in `dir` (optionally one lane only), concatenated in file-name order.
 * @throws UserError when no file matches.
 */
export function readMeasurements<F extends Family>(
  dir: string,
  family: F,
  opts: { lane?: string; required?: boolean } = {},
): FamilyRow[F][] {
  const files = listMeasurementFiles(dir).filter(
    (f) => f.family === family && (opts.lane === undefined || f.lane === laneSlug(opts.lane)),
  );
  if (files.length === 0) {
    if (opts.required === false) return [];
    throw new UserError(
      `no ${family} measurements${opts.lane ? ` for lane ${opts.lane}` : ''} in ${dir} ` +
        `(found: ${
          listMeasurementFiles(dir)
            .map((f) => path.basename(f.file))
            .join(', ') || 'nothing'
        })`,
    );
  }
  const rows: FamilyRow[F][] = [];
  for (const f of files) for (const row of parseCanonicalCsv(family, readText(f.file), f.file)) rows.push(row);
  return rows;
}

/** Read the provenance beside a data file, parsed with `ProvenanceSchema`. @throws InputError naming the file and field. */
export function readProvenance(dataFile: string): Provenance {
  const file = provenancePath(dataFile);
  const parsed = ProvenanceSchema.safeParse(parseYaml(readText(file)));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new InputError({ file, ...(issue.path.length ? { column: issue.path.join('.') } : {}) }, issue.message);
  }
  return parsed.data;
}

/** Held-out step files (`<name>.steps.csv` or `.steps.csv.gz`) in a chip directory, sorted by name. */
export function listStepFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => /\.steps\.csv(\.gz)?$/.test(n))
    .sort()
    .map((n) => path.join(dir, n));
}

/** Step-file columns every row needs (issue 7). */
export const STEP_ALWAYS_REQUIRED = [
  'model',
  'chip',
  'tp',
  'weight_dtype',
  'engine',
  'kind',
  'measured_us',
  'source',
] as const;
/** Columns a row of each kind needs (`prefill_context_tokens` defaults to 0). */
export const STEP_KIND_REQUIRED: Readonly<Record<'step' | 'static_batch', readonly string[]>> = {
  step: ['prefill_requests', 'prefill_tokens', 'decode_requests', 'decode_context_tokens'],
  static_batch: ['batch', 'prompt_tokens', 'output_tokens'],
};
const STEP_KNOWN: ReadonlySet<string> = new Set(FAMILY_COLUMNS.step);
/**
 * Step columns that count tokens, requests or sequences: whole numbers (tp is checked on its own, ≥ 1).
 * By the naming rule (the unit in the name): every `*_tokens` and `*_requests` column of the step
 * family, and `batch`.
 */
const STEP_COUNT_COLUMNS: ReadonlySet<string> = new Set(
  FAMILY_COLUMNS.step.filter((c) => c === 'batch' || c.endsWith('_tokens') || c.endsWith('_requests')),
);

/**
 * Parse held-out step text (format: issue 7; columns `FAMILY_COLUMNS.step`). The one step reader:
 * the validator (src/validate/steps.ts re-exports it), `calibrate`'s measurement check and the tests
 * all use it.
 * - Columns may come in any order; an unknown column is ignored with one warning per column.
 * - `kv_dtype`, `cudagraph_mode`, `group`, `flags` (text, default '') and `prefill_context_tokens`
 *   (default 0) are optional; the columns of the other kind may be absent or empty (default 0).
 * - A required column that is absent or empty is an error naming the file, the 1-based data row that
 *   needs it (the header is row 0) and the column: the always-required columns on the first data row,
 *   the per-kind columns on the first row of that kind.
 * @returns the rows (with file and row) and the warnings.
 * @throws InputError naming file and row: a row whose field count differs from the header's; naming
 *   file, row and column: missing/empty required cell, non-numeric, negative or fractional count,
 *   non-integer or zero tp, non-positive measured_us, unknown kind, a step with no request or
 *   fewer prefill tokens than prefill requests, a static batch with batch, prompt_tokens or
 *   output_tokens < 1; an empty file.
 */
export function parseStepsCsv(text: string, file: string): { rows: LocatedStepRow[]; warnings: string[] } {
  const data = Papa.parse<string[]>(text, { delimiter: ',', skipEmptyLines: 'greedy' }).data;
  if (data.length < 2) throw new InputError({ file }, 'empty file: expected a header row and at least one data row');
  const header = data[0]!.map((h) => h.trim());
  const warnings: string[] = [];
  for (const h of header) if (!STEP_KNOWN.has(h)) warnings.push(`${file}: unknown column "${h}" ignored`);
  const col = new Map<string, number>();
  header.forEach((h, i) => {
    col.set(h, i);
  });
  const rows: LocatedStepRow[] = [];
  for (let r = 1; r < data.length; r++) {
    const line = data[r]!;
    if (line.length !== header.length)
      throw new InputError(
        { file, row: r },
        `expected ${header.length} fields (as in the header, row 0), got ${line.length}`,
      );
    const cell = (name: string): string | undefined => {
      const j = col.get(name);
      return j === undefined ? undefined : (line[j] ?? '').trim();
    };
    const need = (name: string, why: string): string => {
      const v = cell(name);
      if (v === undefined)
        throw new InputError(
          { file, row: r, column: name },
          `missing column: not in row 0 (header); required ${why}, first needed on this row`,
        );
      if (v === '') throw new InputError({ file, row: r, column: name }, `empty cell; a value is required ${why}`);
      return v;
    };
    for (const c of STEP_ALWAYS_REQUIRED) need(c, 'by every row');
    const kind = need('kind', 'by every row');
    if (kind !== 'step' && kind !== 'static_batch') {
      throw new InputError({ file, row: r, column: 'kind' }, `expected "step" or "static_batch", got "${kind}"`);
    }
    const why = `for kind=${kind}`;
    const kindNeeds = new Set(STEP_KIND_REQUIRED[kind]);
    const num = (name: string): number => {
      const v = kindNeeds.has(name)
        ? need(name, why)
        : name === 'measured_us' || name === 'tp'
          ? need(name, 'by every row')
          : (cell(name) ?? '');
      if (v === '') return 0;
      const x = decimalNumber(v);
      if (!Number.isFinite(x))
        throw new InputError({ file, row: r, column: name }, `expected a finite number (decimal), got "${v}"`);
      if (name === 'measured_us' && !(x > 0))
        throw new InputError({ file, row: r, column: name }, `expected a positive number (µs), got ${v}`);
      if (x < 0) throw new InputError({ file, row: r, column: name }, `expected a non-negative number, got ${v}`);
      if (STEP_COUNT_COLUMNS.has(name) && !Number.isInteger(x))
        throw new InputError({ file, row: r, column: name }, `expected a whole number (a count), got ${v}`);
      return x;
    };
    const measured_us = num('measured_us');
    if (!(measured_us > 0))
      throw new InputError(
        { file, row: r, column: 'measured_us' },
        `expected a positive number (µs), got ${measured_us}`,
      );
    const tp = num('tp');
    if (!(tp >= 1 && Number.isInteger(tp)))
      throw new InputError({ file, row: r, column: 'tp' }, `expected an integer ≥ 1, got ${tp}`);
    const out: LocatedStepRow = {
      file,
      row: r,
      model: need('model', 'by every row'),
      chip: need('chip', 'by every row'),
      tp,
      weight_dtype: need('weight_dtype', 'by every row'),
      kv_dtype: cell('kv_dtype') ?? '',
      cudagraph_mode: cell('cudagraph_mode') ?? '',
      engine: need('engine', 'by every row'),
      kind,
      prefill_requests: num('prefill_requests'),
      prefill_tokens: num('prefill_tokens'),
      prefill_context_tokens: num('prefill_context_tokens'),
      decode_requests: num('decode_requests'),
      decode_context_tokens: num('decode_context_tokens'),
      batch: num('batch'),
      prompt_tokens: num('prompt_tokens'),
      output_tokens: num('output_tokens'),
      measured_us,
      group: cell('group') ?? '',
      source: need('source', 'by every row'),
      flags: cell('flags') ?? '',
    };
    if (kind === 'step') {
      if (out.prefill_requests + out.decode_requests < 1) {
        throw new InputError(
          { file, row: r, column: 'prefill_requests' },
          'a step needs at least one prefill or decode request',
        );
      }
      if (out.prefill_requests > 0 && out.prefill_tokens < out.prefill_requests) {
        throw new InputError(
          { file, row: r, column: 'prefill_tokens' },
          `expected ≥ prefill_requests (${out.prefill_requests}) new tokens, got ${out.prefill_tokens}`,
        );
      }
    } else {
      for (const c of ['batch', 'prompt_tokens', 'output_tokens'] as const) {
        if (out[c] < 1) throw new InputError({ file, row: r, column: c }, `expected ≥ 1, got ${out[c]}`);
      }
    }
    rows.push(out);
  }
  return { rows, warnings };
}

/**
 * Read and parse one held-out step file (`*.steps.csv` or `.steps.csv.gz`). @see parseStepsCsv
 * @throws InputError naming the file when it cannot be read (readText: "file not found", "it is a
 *   folder, expected a file", "truncated gzip file", …), else as parseStepsCsv.
 */
export function readStepsFile(file: string): { rows: LocatedStepRow[]; warnings: string[] } {
  const text = readText(file);
  return parseStepsCsv(text, file);
}
