/**
 * The measurement store: normalized per-family files under `measurements/<chip>/`.
 *
 * Layout: `<dir>/<family>.<lane>.csv.gz` (header = `FAMILY_COLUMNS[family]`) and beside it
 * `<family>.<lane>.provenance.yaml`. Step files may also be plain `*.steps.csv`.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import Papa from 'papaparse';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { InputError, UserError } from '../common/errors.ts';
import { encodeText, readText, sha256, writeFilesAtomic } from '../common/fs.ts';
import { FAMILIES, FAMILY_COLUMNS, TEXT_COLUMNS, type Family, type FamilyRow, type Provenance } from './schema.ts';

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

/** Serialize rows to CSV text with the family's canonical header. Numbers use JS shortest round-trip form. */
export function rowsToCsv<F extends Family>(family: F, rows: ReadonlyArray<FamilyRow[F]>): string {
  const cols = FAMILY_COLUMNS[family] as readonly string[];
  const isText = cols.map((c) => TEXT_COLUMNS.has(c));
  const lines: string[] = new Array(rows.length + 1);
  lines[0] = cols.join(',');
  const cells: string[] = new Array(cols.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i] as unknown as Record<string, unknown>;
    for (let j = 0; j < cols.length; j++) {
      const v = r[cols[j]!];
      if (v === undefined || v === null) cells[j] = '';
      else if (!isText[j]) cells[j] = String(v);
      else {
        const s = String(v);
        cells[j] = s.includes('"') || s.includes(',') || s.includes('\n') ? '"' + s.replace(/"/g, '""') + '"' : s;
      }
    }
    lines[i + 1] = cells.join(',');
  }
  return lines.join('\n') + '\n';
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
  const prov: Provenance = { ...provenance, output_sha256: sha256(data) };
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

/**
 * Gzip level used for stored measurement files. Level 6 instead of encodeText's 9: on the 107k-row h200
 * GEMM table it is ~2.5× faster for 5 % more bytes (1.46 vs 1.39 MB). Node's gzip writes mtime 0, so the
 * output is byte-reproducible at any level.
 */
export const MEASUREMENT_GZIP_LEVEL = 6;

function encodeMeasurementText(file: string, text: string): Uint8Array {
  return file.endsWith('.gz') ? gzipSync(Buffer.from(text, 'utf8'), { level: MEASUREMENT_GZIP_LEVEL }) : encodeText(file, text);
}

/** Write every staged file atomically as one set (all land, or none do). */
export function writeMeasurementSet(staged: ReadonlyArray<StagedMeasurements>): void {
  writeFilesAtomic(staged.flatMap((s) => s.files));
}

/**
 * Parse canonical CSV text of a family. Numeric columns must be finite numbers; `latency_us` and
 * `measured_us` must be positive.
 * @throws InputError naming file, row and column.
 */
export function parseCanonicalCsv<F extends Family>(family: F, text: string, file: string): FamilyRow[F][] {
  const parsed = Papa.parse<string[]>(text, { skipEmptyLines: true });
  const data = parsed.data;
  if (data.length === 0) throw new InputError({ file }, 'empty file: expected a header row and data rows');
  const header = data[0]!;
  const cols = FAMILY_COLUMNS[family] as readonly string[];
  const idx = cols.map((c) => header.indexOf(c));
  const missing = cols.filter((_, i) => idx[i]! < 0 && !OPTIONAL_COLUMNS.has(cols[i]!));
  if (missing.length) {
    throw new InputError({ file, row: 0, column: missing[0]! }, `missing column; expected header ${cols.join(',')}`);
  }
  const out: FamilyRow[F][] = new Array(data.length - 1);
  for (let r = 1; r < data.length; r++) {
    const line = data[r]!;
    const obj: Record<string, string | number> = {};
    for (let c = 0; c < cols.length; c++) {
      const col = cols[c]!;
      const j = idx[c]!;
      const cell = j >= 0 ? (line[j] ?? '') : '';
      if (TEXT_COLUMNS.has(col)) {
        obj[col] = cell;
      } else {
        const v = cell === '' && OPTIONAL_COLUMNS.has(col) ? 0 : Number(cell);
        if (cell === '' && !OPTIONAL_COLUMNS.has(col)) {
          throw new InputError({ file, row: r, column: col }, 'expected a number, got an empty cell');
        }
        if (!Number.isFinite(v)) throw new InputError({ file, row: r, column: col }, `expected a finite number, got "${cell}"`);
        if ((col === 'latency_us' || col === 'measured_us') && v <= 0) {
          throw new InputError({ file, row: r, column: col }, `expected a positive latency, got ${cell}`);
        }
        obj[col] = v;
      }
    }
    out[r - 1] = obj as unknown as FamilyRow[F];
  }
  return out;
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
        `(found: ${listMeasurementFiles(dir).map((f) => path.basename(f.file)).join(', ') || 'nothing'})`,
    );
  }
  const rows: FamilyRow[F][] = [];
  for (const f of files) for (const row of parseCanonicalCsv(family, readText(f.file), f.file)) rows.push(row);
  return rows;
}

/** Read the provenance beside a data file. */
export function readProvenance(dataFile: string): Provenance {
  return parseYaml(readText(provenancePath(dataFile))) as Provenance;
}

/** Held-out step files (`<name>.steps.csv` or `.steps.csv.gz`) in a chip directory, sorted by name. */
export function listStepFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => /\.steps\.csv(\.gz)?$/.test(n))
    .sort()
    .map((n) => path.join(dir, n));
}

/** Step-file columns that must be present in the header. */
const STEP_REQUIRED: readonly string[] = ['model', 'chip', 'tp', 'weight_dtype', 'engine', 'kind', 'measured_us', 'source'];
/** Per-kind columns that must hold a number on every row of that kind. */
const STEP_KIND_REQUIRED: Record<'step' | 'static_batch', readonly string[]> = {
  step: ['prefill_requests', 'prefill_tokens', 'decode_requests', 'decode_context_tokens'],
  static_batch: ['batch', 'prompt_tokens', 'output_tokens'],
};

/**
 * Parse held-out step text (format: issue 7 / `FAMILY_COLUMNS.step`). Unknown columns are ignored with
 * a warning passed to `warn` (default: stderr). Optional numeric columns default to 0, optional text to ''.
 * @throws InputError naming file, row and column for a missing required column or cell, a non-numeric
 *   cell, an unknown `kind`, or a non-positive `measured_us`.
 */
export function parseStepCsv(text: string, file: string, warn: (msg: string) => void = (m) => process.stderr.write(m + '\n')): StepRowOut[] {
  const parsed = Papa.parse<string[]>(text, { skipEmptyLines: true });
  const data = parsed.data;
  if (data.length === 0) throw new InputError({ file }, 'empty file: expected a header row and data rows');
  const header = data[0]!.map((h) => h.trim());
  const cols = FAMILY_COLUMNS.step as readonly string[];
  for (const c of STEP_REQUIRED) {
    if (!header.includes(c)) throw new InputError({ file, row: 0, column: c }, `missing required column; expected at least ${STEP_REQUIRED.join(', ')}`);
  }
  const unknown = header.filter((h) => !cols.includes(h));
  if (unknown.length) warn(`${file}: ignoring unknown column(s) ${unknown.join(', ')}`);
  const idx = new Map(cols.map((c) => [c, header.indexOf(c)]));
  const out: StepRowOut[] = [];
  for (let r = 1; r < data.length; r++) {
    const line = data[r]!;
    const obj: Record<string, string | number> = {};
    const kindCell = (line[idx.get('kind')!] ?? '').trim();
    if (kindCell !== 'step' && kindCell !== 'static_batch') {
      throw new InputError({ file, row: r, column: 'kind' }, `expected "step" or "static_batch", got "${kindCell}"`);
    }
    const needed = new Set([...STEP_REQUIRED, ...STEP_KIND_REQUIRED[kindCell]]);
    for (const c of cols) {
      const j = idx.get(c)!;
      const cell = j >= 0 ? (line[j] ?? '').trim() : '';
      if (cell === '' && needed.has(c)) {
        throw new InputError({ file, row: r, column: c }, `required for kind=${kindCell}, got an empty cell${j < 0 ? ' (column absent)' : ''}`);
      }
      if (TEXT_COLUMNS.has(c)) {
        obj[c] = cell;
        continue;
      }
      const v = cell === '' ? 0 : Number(cell);
      if (!Number.isFinite(v)) throw new InputError({ file, row: r, column: c }, `expected a finite number, got "${cell}"`);
      if (c === 'measured_us' && v <= 0) throw new InputError({ file, row: r, column: c }, `expected a positive time in µs, got ${cell}`);
      if (c !== 'measured_us' && v < 0) throw new InputError({ file, row: r, column: c }, `expected a non-negative count, got ${cell}`);
      obj[c] = v;
    }
    out.push(obj as unknown as StepRowOut);
  }
  return out;
}

type StepRowOut = FamilyRow['step'];

/** Read one held-out step file (`*.steps.csv[.gz]`). @see parseStepCsv */
export function readStepFile(file: string, warn?: (msg: string) => void): StepRowOut[] {
  return parseStepCsv(readText(file), file, warn);
}
