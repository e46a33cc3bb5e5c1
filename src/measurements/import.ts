/**
 * Import orchestration: read input files, normalize them, stage the store files with provenance, and
 * write them as one atomic set. Every input is validated before anything is written, so a failed import
 * leaves earlier files untouched.
 */
import { provenanceRelativePath } from '../core/io/paths.ts';
import { groupBy } from '../core/numeric/stats.ts';
import path from 'node:path';
import { UserError } from '../core/errors.ts';
import { sha256File } from '../core/io/fs.ts';
import { type Chip, knownChips } from '../core/catalog/chip.ts';
import { InputError } from '../core/errors.ts';
import {
  AIC_OP_CATEGORY,
  AIC_TABLES,
  type AicImport,
  aicTableFromHeader,
  aicTableFromName,
  checkRepeatSpread,
  collapseDuplicates,
  coverageByDtype,
  type AicTable,
  majorityLane,
  mapAicInto,
  normalizeMappedRows,
  repeatKey,
} from './aiconfigurator.ts';
import { checkMoeUnits } from './moe-units.ts';
import { FAMILY_COLUMNS, type Family, type FamilyRow, type MoeRow, type Provenance } from './schema.ts';
import {
  MeasurementGzip,
  prepareMeasurementsStreaming,
  type StagedMeasurements,
  writeMeasurementSet,
} from './store.ts';
import { csvHeader } from '../core/render/csv.ts';
import { RowColumns, type RowList, type RowSink } from './row-columns.ts';
import { readTableChunks } from './table.ts';
import { type CellTable, CsvChunk } from './cell-table.ts';

/** The AIConfigurator snapshot the shipped data came from (dataset README). */
export const AIC_REPOSITORY = 'ai-dynamo/aiconfigurator';
export const AIC_COMMIT = '095f58a51c4ca8e61b66ec108d86f223f8d559ce';
export const AIC_DATA_ROOT = 'aic-core/src/aiconfigurator_core/systems/data';

/**
 * Upstream repository path of a table, from either layout:
 * - shared CSV copy `.../<sku>/<table>/<framework>-<version>/<table>.csv`
 * - upstream `.../<sku>/<op_category>/<framework>/<version>/<table>.parquet`
 * Returns '' when the path follows neither.
 */
export function aicUpstreamPath(file: string): string {
  const parts = path.resolve(file).split(path.sep);
  const n = parts.length;
  const base = parts[n - 1] ?? '';
  const table = base.replace(/\.(csv(\.gz)?|parquet)$/, '');
  // shared layout
  if (parts[n - 3] === table) {
    const m = /^([a-z]+)-(.+)$/.exec(parts[n - 2] ?? '');
    if (m) {
      const cat = table in AIC_OP_CATEGORY ? AIC_OP_CATEGORY[table as keyof typeof AIC_OP_CATEGORY] : '?';
      return `${AIC_DATA_ROOT}/${parts[n - 4]}/${cat}/${m[1]}/${m[2]}/${table}.parquet`;
    }
  }
  const di = parts.lastIndexOf('data');
  if (di >= 0 && n - di === 6) return `${AIC_DATA_ROOT}/${parts.slice(di + 1).join('/')}`;
  // verbatim upstream layout without the data root (aiconfigurator-modern): <sku>/<category>/<framework>/<version>/<table>
  if (n >= 5 && skuFromPath(parts[n - 5] ?? '') === parts[n - 5])
    return `${AIC_DATA_ROOT}/${parts.slice(n - 5).join('/')}`;
  return '';
}

/** SKU directory in a path (`h200_sxm`), if any segment is one. */
export function skuFromPath(file: string): string | undefined {
  return path
    .resolve(file)
    .split(path.sep)
    .find((p) => /^(h100|h200|b200|b300|a100|a30|l40s|l4|gb200|gb300|rtx_pro_6000)(_sxm|_pcie|_server)?$/.test(p));
}

export interface AicImportOptions {
  /** stepcal chip name stored in every row. */
  chip: string;
  /** Datasheet used for the units-slip check (skipped when absent). */
  chipInfo?: Chip;
  /** Output directory (`measurements/<chip>/`). */
  outDir: string;
  sourceRepository?: string;
  sourceCommit?: string;
  licence?: string;
  /** Extra notes per table name, recorded in provenance. */
  notes?: (imp: AicImport) => string[];
  /** Called with each table's repeat verdict and device check (for the summary on stderr). */
  onNote?: (line: string) => void;
  /** Called after each chunk with the rows read so far of the current file (progress). */
  onRows?: (rows: number) => void;
  /**
   * Called when one input file is refused (a UserError from reading, mapping or checking it). Return
   * true to leave that file out and go on with the others (onboarding does so for optional families);
   * false, or no callback, rethrows and nothing is staged.
   */
  onRefusedFile?: (file: string, error: UserError) => boolean;
}

export interface ImportSummary {
  file: string;
  family: Family;
  lane: string;
  rows_in: number;
  rows_out: number;
  duplicate_configs: number;
  inputs: string[];
  coverage: Record<string, { rows: number; shapes: number; of_shapes: number }>;
}

/**
 * Read, map, units-check and normalise one AIConfigurator table file (stageAicImport's per-file step).
 * Its CSV file is compressed while it is read (store.ts MeasurementGzip, on the thread pool): `encoded`
 * is that file when the normalised rows are the mapped rows as they came (no repeat collapsed), else
 * undefined (the stream is dropped and the file is compressed from the final rows when staged).
 */
async function importOneFile(
  f: string,
  named: AicTable | undefined,
  opts: AicImportOptions,
): Promise<{ imp: AicImport; encoded?: Promise<Buffer> }> {
  const gzip = new MeasurementGzip();
  try {
    const { table, rows } = await mapStreaming(f, named, opts.chip, opts.onRows, gzip);
    // The fused-MoE units check (moe-units.ts) judges the mapped rows in input order, so row numbers are the file's.
    if (table === 'moe_perf' && opts.chipInfo) checkMoeUnits(rows as RowList<MoeRow>, opts.chipInfo, f);
    const imp = normalizeMappedRows(table, rows, f, opts.chip, opts.chipInfo);
    if (imp.rows === rows) {
      const encoded = gzip.end();
      encoded.catch(() => undefined); // awaited when staged; a merged group never awaits it
      return { imp, encoded };
    }
    gzip.discard();
    return { imp };
  } catch (e) {
    gzip.discard();
    throw e;
  }
}

/**
 * Read and normalize AIConfigurator tables and stage their store files (nothing written yet).
 * Inputs that map to the same (family, lane) are merged (and repeats collapsed across them).
 * @throws InputError / UserError for any bad input; nothing has been written then.
 */
export async function stageAicImport(
  files: readonly string[],
  opts: AicImportOptions,
  onProgress?: (file: string) => void,
): Promise<{ staged: StagedMeasurements[]; summaries: ImportSummary[] }> {
  const imports: Array<{ imp: AicImport; sha: string; encoded?: Promise<Buffer> }> = [];
  const shas = new Map<string, string>();
  for (const f of files) {
    const sha = sha256File(f);
    const twin = shas.get(sha);
    if (twin !== undefined) {
      throw new UserError(
        `${f} and ${twin} are the same file (sha256 ${sha.slice(0, 12)}…); each row would count twice as a repeat. Give it once`,
      );
    }
    shas.set(sha, f);
    const named = aicTableFromName(f);
    let imp: AicImport;
    let encoded: Promise<Buffer> | undefined;
    try {
      ({ imp, encoded } = await importOneFile(f, named, opts));
    } catch (e) {
      if (e instanceof UserError && opts.onRefusedFile?.(f, e)) continue;
      throw e;
    }
    if (!named)
      imp.filters.unshift(
        `table ${imp.table} inferred from the header columns (file name ${path.basename(f)} does not say it)`,
      );
    imports.push({ imp, sha, ...(encoded ? { encoded } : {}) });
    if (imp.duplicate_configs > 0) opts.onNote?.(`${path.basename(f)}: ${imp.repeat_spread}`);
    onProgress?.(f);
  }
  const groups = groupBy(imports, (x) => `${x.imp.family}.${x.imp.lane}`);
  const staged: StagedMeasurements[] = [];
  const summaries: ImportSummary[] = [];
  for (const group of groups.values()) {
    const first = group[0]!.imp;
    const family = first.family;
    let rows = (group.length === 1 ? first.rows : concatRows(group.map((x) => x.imp.rows))) as RowList<
      FamilyRow[Family]
    >;
    let dup = group.reduce((s, x) => s + x.imp.duplicate_configs, 0);
    const filters = [...first.filters];
    if (group.length > 1) {
      const c = collapseDuplicates(family, rows as never);
      const at = (i: number) =>
        inputOf(
          group.map((x) => x.imp.rows.length),
          i,
        );
      checkRepeatSpread(c, group.map((x) => x.imp.file).join(' + '), () => undefined);
      if (c.worst_spread)
        opts.onNote?.(
          `merged ${group.length} inputs: worst repeat spread ${c.worst_spread.ratio.toFixed(3)}× (input ${at(c.worst_spread.index) + 1})`,
        );
      rows = c.rows as never;
      dup += c.duplicate_configs;
      filters.push(
        `merged ${group.length} inputs; collapsed ${c.duplicate_configs} configurations repeated across them`,
      );
    }
    const { lane, counts } = majorityLane(rows as RowList<{ lane: string }>);
    const rowsIn = group.reduce((s, x) => s + x.imp.rows_in, 0);
    const coverage = group.length > 1 ? coverageByDtype(family, rows as never, repeatKey(family)) : first.coverage;
    const upstream = group.map((x) => aicUpstreamPath(x.imp.file)).filter(Boolean);
    const prov: Omit<Provenance, 'output_sha256'> = {
      family,
      chip: opts.chip,
      lane,
      source_repository: opts.sourceRepository ?? AIC_REPOSITORY,
      source_path: upstream.join(', '),
      source_commit: opts.sourceCommit ?? 'unknown',
      licence: opts.licence ?? 'Apache-2.0',
      inputs: group.map((x) => ({ file: provenanceRelativePath(x.imp.file), sha256: x.sha, rows: x.imp.rows_in })),
      filters,
      rows_in: rowsIn,
      rows_out: rows.length,
      units: first.units,
      duplicate_configs: dup,
      lanes: counts,
      coverage,
      notes: group.flatMap((x) => opts.notes?.(x.imp) ?? []),
    };
    if (prov.notes!.length === 0) delete prov.notes;
    // One input whose rows were stored as read: its file was compressed while it was read.
    const encoded = group.length === 1 ? await group[0]!.encoded : undefined;
    const s = await prepareMeasurementsStreaming(opts.outDir, family, lane, rows as never, prov, encoded);
    staged.push(s);
    summaries.push({
      file: s.file,
      family,
      lane,
      rows_in: rowsIn,
      rows_out: rows.length,
      duplicate_configs: dup,
      inputs: group.map((x) => x.imp.file),
      coverage,
    });
  }
  return { staged, summaries };
}

/**
 * Read one table chunk by chunk (table.ts readTableChunks) and map each chunk to canonical rows as it
 * arrives, so only mapped rows are kept (never the file's text or its cells): the device column is
 * checked and the table recognised on the way. Text values are interned (one string per distinct value).
 * @throws InputError naming the file row (chunk rows are renumbered), UserError when the table is unknown.
 */
async function mapStreaming(
  file: string,
  named: AicTable | undefined,
  chip: string,
  onRows: ((rows: number) => void) | undefined,
  gzip: MeasurementGzip,
): Promise<{ table: AicTable; rows: RowColumns<object> }> {
  let table = named;
  const rows = new RowColumns<object>();
  let sink: RowSink | undefined;
  await readTableChunks(file, async (chunk, offset) => {
    // This chunk's lines of the stored file when the mapper took them from the input's bytes (GEMM in bulk).
    let stored: Buffer | undefined;
    try {
      // A file whose name does not say its table (`good.csv`) is recognised by its header columns.
      table ??= aicTableFromHeader(chunk) ?? unknownTable(file, chunk.header);
      checkDevice(chunk, chip);
      // Cells go from the chunk's bytes into the typed columns: no row object (RowColumns.sink).
      mapAicInto(
        table,
        chunk,
        chip,
        (keys) => (sink ??= rows.sink(keys)),
        rows,
        (lines) => {
          stored = lines;
        },
      );
    } catch (err) {
      const e = err as InputError;
      if (e instanceof InputError && e.location.row !== undefined && e.location.row > 0)
        throw new InputError({ ...e.location, row: e.location.row + offset }, e.problem);
      throw err;
    }
    onRows?.(offset + chunk.length);
    // This chunk's lines of the stored file, compressed on the thread pool while the next chunk is read.
    const columns = FAMILY_COLUMNS[AIC_TABLES[table!]] as readonly string[];
    if (offset === 0) await gzip.write(csvHeader(columns));
    await gzip.write(stored ?? rows.csvLines(columns, offset, rows.length));
  });
  return { table: table!, rows };
}

function unknownTable(f: string, header: readonly string[]): never {
  const base = path.basename(f).replace(/\.(csv(\.gz)?|parquet)$/, '');
  throw new UserError(
    `${f}: cannot infer the measurement family from the table name "${base}" (expected one of ${Object.keys(AIC_TABLES).join(', ')}) ` +
      `nor from the header (${header.slice(0, 12).join(', ')}${header.length > 12 ? ', …' : ''}): no gemm_dtype, moe_dtype, nccl_dtype or ` +
      `allreduce_dtype column, nor attn_dtype + kv_cache_dtype with op_name context_attention / generation_attention`,
  );
}

/** The rows of several inputs, in order, as one RowColumns (inputs merged into one family and lane). */
function concatRows(lists: ReadonlyArray<RowList<unknown>>): RowColumns<object> {
  const out = new RowColumns<object>();
  for (const l of lists) for (const r of l) out.push(r as object);
  return out;
}

/** Which input (0-based) of concatenated row blocks of `sizes` holds row `index`. */
function inputOf(sizes: readonly number[], index: number): number {
  let i = 0;
  let acc = 0;
  while (i < sizes.length - 1 && index >= acc + sizes[i]!) acc += sizes[i++]!;
  return i;
}

/**
 * The `device` column must be the chip being imported (issue 12: an A100 table imported as h200 fitted
 * eps_max 0.30 "for h200"). A device string names a chip when one of its tokens (lower case, split on
 * anything but letters and digits) is a catalog chip name: `NVIDIA A100-SXM4-80GB` → a100. A device
 * naming another catalog chip is refused; one naming no catalog chip (a new part) is accepted.
 * @throws InputError at the first row whose device names another chip.
 */
export function checkDevice(raw: CellTable, chip: string): void {
  const j = raw.header.indexOf('device');
  if (j < 0) return;
  const known = new Set(knownChips());
  const verdict = new Map<string, string | undefined>();
  let passed: string | undefined;
  // One device throughout a CSV chunk (one byte loop): its first row is the only one to judge.
  const rows = raw instanceof CsvChunk && raw.sameText(j) !== undefined ? 1 : raw.length;
  for (let r = 0; r < rows; r++) {
    const device = raw.text(r, j);
    if (device === passed) continue;
    let other = verdict.get(device);
    if (!verdict.has(device)) {
      const tokens = device.toLowerCase().split(/[^a-z0-9]+/);
      other = tokens.includes(chip) ? undefined : tokens.find((t) => known.has(t));
      verdict.set(device, other);
    }
    if (other !== undefined) {
      throw new InputError(
        { file: raw.file, row: r + 1, column: 'device' },
        `device "${device}" names chip ${other}, not --chip ${chip}; import it with --chip ${other} (its timings would fit ${chip}'s coefficients)`,
      );
    }
    passed = device;
  }
}

/** Stage then write (atomically, as one set). */
export async function importAicFiles(
  files: readonly string[],
  opts: AicImportOptions,
  onProgress?: (file: string) => void,
): Promise<ImportSummary[]> {
  const { staged, summaries } = await stageAicImport(files, opts, onProgress);
  writeMeasurementSet(staged);
  return summaries;
}
