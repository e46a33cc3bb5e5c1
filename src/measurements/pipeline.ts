/**
 * The `stepcal import` pipeline, one function per input format: read and validate every input,
 * normalize it, and stage the store files with provenance (`stageImport`, nothing written), then
 * refuse or list replaced files, take the output lock and write them as one atomic set (`runImport`).
 * The CLI (src/cli/commands/import.ts) only parses flags and prints what `runImport` returns.
 *
 * Formats: aiconfigurator (per-operator CSV or Parquet tables; family from the table name, else from
 * the header columns), nccl-tests (stdout text), splitwise (perf_model.csv → held-out steps), system
 * (AIC descriptor YAML → chip file). docs/measurements.md describes each.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import {
  chipFromSku,
  CHIPS_DIR,
  type Chip,
  type ChipFile,
  knownChips,
  loadChip,
  REPO_ROOT,
} from '../core/catalog/chip.ts';
import { UsageError, UserError } from '../core/errors.ts';
import { parseFlagNumber } from '../core/flags.ts';
import { readText, sha256File, writeFilesAtomic } from '../core/io/fs.ts';
import { pathInside, provenanceRelativePath } from '../core/io/paths.ts';
import { note, progress } from '../core/io/progress.ts';
import { lockRootFor, withOutputLockSync } from '../core/io/staging.ts';
import { groupBy } from '../core/numeric/stats.ts';
import { AIC_COMMIT, AIC_REPOSITORY, type ImportSummary, skuFromPath, stageAicImport } from './import.ts';
import { parseNcclTests, type NcclTestsResult } from './nccl-tests.ts';
import { COLLECTIVE_OPS, type CollectiveOp, type CollectiveRow } from './schema.ts';
import { stageSplitwise } from './splitwise.ts';
import { guardOverwrite, prepareMeasurements, type StagedMeasurements } from './store.ts';
import { systemToChip } from './system.ts';

const MEASUREMENTS_DIR = path.join(REPO_ROOT, 'measurements');

export const IMPORT_FORMATS = ['aiconfigurator', 'nccl-tests', 'splitwise', 'system'] as const;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];

/** Options of an import. Numeric flags arrive as numbers from the CLI (parsed, a bad value is exit 2) or as strings from callers. */
export interface ImportOpts {
  chip?: string;
  out?: string;
  /** Replace existing curated files (each replaced file is listed on stderr). */
  force?: boolean;
  json?: boolean;
  ranks?: string | number;
  op?: string;
  nodes?: string | number;
  lane?: string;
  sourceRepo?: string;
  sourceCommit?: string;
  smCount?: string | number;
  l2Mib?: string | number;
}

/** One written file, as reported. */
export interface WrittenFile {
  file: string;
  family: string;
  lane: string;
  rows_in: number;
  rows_out: number;
  duplicate_configs?: number;
  notes?: string[];
}

/** What an import would write: every file (data and provenance), the data files (the overwrite guard's), the report. Nothing written yet. */
export interface StagedImport {
  files: Array<{ file: string; data: string | Uint8Array }>;
  dataFiles: string[];
  written: WrittenFile[];
  /** Lock label, e.g. `import nccl-tests --chip h100`. */
  label: string;
}

function posInt(v: string | number | undefined, flag: string): number | undefined {
  return v === undefined ? undefined : parseFlagNumber(flag, v, { integer: true, min: 1 });
}

function resolveChip(opts: ImportOpts, paths: readonly string[], required: boolean): string | undefined {
  if (opts.chip) return checkedChip(opts.chip);
  const skus = [...new Set(paths.map(skuFromPath).filter((s): s is string => !!s))];
  if (skus.length === 1) return checkedChip(chipFromSku(skus[0]!));
  if (required)
    throw new UsageError(
      `--chip is required (could not infer one chip from the paths; known chips: ${knownChips().join(', ')})`,
    );
  return undefined;
}

/** A chip name that becomes `measurements/<chip>/` (src/core/io/paths.ts). @throws UsageError. */
function checkedChip(chip: string): string {
  pathInside('--chip', chip, MEASUREMENTS_DIR);
  return chip;
}

/** The output folder of a chip's measurements: `--out`, else `<repo>/measurements/<chip>` (checked to stay inside). */
function measurementsOut(opts: ImportOpts, chip: string): string {
  return opts.out ?? pathInside('--chip', chip, MEASUREMENTS_DIR);
}

/** Refuse or list replaced files, take the lock of the output's checkout, clean up after killed runs, write the set. */
function commitImport(staged: StagedImport, opts: ImportOpts): void {
  const targets = staged.files.map((f) => f.file);
  if (opts.force !== true) guardOverwrite(staged.dataFiles, false); // refuse before touching the output folder (no lock file appears)
  withOutputLockSync(
    lockRootFor(targets, REPO_ROOT),
    staged.label,
    [...new Set(targets.map((t) => path.dirname(t)))],
    () => {
      for (const r of guardOverwrite(staged.dataFiles, opts.force === true)) note(`stepcal: --force: replaced ${r}`);
      writeFilesAtomic(staged.files);
    },
  );
}

function chipInfoOrUndefined(chip: string): Chip | undefined {
  return knownChips().includes(chip) ? loadChip(chip) : undefined;
}

/** The files of staged store sets, and their data files. */
function filesOf(staged: readonly StagedMeasurements[]): Pick<StagedImport, 'files' | 'dataFiles'> {
  return { files: staged.flatMap((s) => s.files), dataFiles: staged.map((s) => s.file) };
}

/** AIConfigurator tables → one store file per (family, lane), with a progress bar over the inputs. */
async function stageAiconfigurator(paths: readonly string[], opts: ImportOpts): Promise<StagedImport> {
  const chip = resolveChip(opts, paths, true)!;
  const chipInfo = chipInfoOrUndefined(chip);
  if (!chipInfo)
    process.stderr.write(`stepcal: warning: no catalog/chips/${chip}.yaml, so the units-slip check is skipped\n`);
  const bar = progress('import aiconfigurator', paths.length);
  const { staged, summaries } = await stageAicImport(
    paths,
    {
      chip,
      ...(chipInfo ? { chipInfo } : {}),
      outDir: measurementsOut(opts, chip),
      sourceRepository: opts.sourceRepo ?? AIC_REPOSITORY,
      sourceCommit: opts.sourceCommit ?? (opts.sourceRepo ? 'unknown' : AIC_COMMIT),
      onNote: (l) => note(`import: ${l}`),
    },
    (p) => bar.tick(path.basename(p)),
  );
  bar.done();
  const written = summaries.map((s: ImportSummary) => ({
    file: s.file,
    family: s.family,
    lane: s.lane,
    rows_in: s.rows_in,
    rows_out: s.rows_out,
    duplicate_configs: s.duplicate_configs,
    notes: Object.entries(s.coverage)
      .filter(([, c]) => c.shapes < c.of_shapes)
      .map(([d, c]) => `ragged sweep: ${d} covers ${c.shapes} of ${c.of_shapes} shapes (no rows invented)`),
  }));
  return { ...filesOf(staged), written, label: `import aiconfigurator --chip ${chip}` };
}

type NcclInput = { file: string; res: NcclTestsResult; sha: string };

/** Parse every nccl-tests stdout file (flags override what the text says); the same file twice is refused. */
function parseNcclInputs(paths: readonly string[], opts: ImportOpts, chip: string): NcclInput[] {
  const chipInfo = chipInfoOrUndefined(chip);
  const op = opts.op as CollectiveOp | undefined;
  if (op !== undefined && !(COLLECTIVE_OPS as readonly string[]).includes(op)) {
    throw new UserError(`--op expects one of ${COLLECTIVE_OPS.join(', ')}, got "${op}"`);
  }
  const results: NcclInput[] = [];
  for (const p of paths) {
    const sha = sha256File(p);
    const twin = results.find((x) => x.sha === sha);
    if (twin)
      throw new UserError(`${p} and ${twin.file} are the same file (sha256 ${sha.slice(0, 12)}…); give it once`);
    const text = readText(p);
    const ranks = posInt(opts.ranks, '--ranks');
    const nodes = posInt(opts.nodes, '--nodes');
    const res = parseNcclTests(text, p, {
      chip,
      ...(ranks ? { ranks } : {}),
      ...(nodes ? { nodes } : {}),
      ...(op ? { op } : {}),
      ...(chipInfo ? { chipInfo } : {}),
      ...(opts.lane ? { lane: opts.lane } : {}),
    });
    results.push({ file: p, res, sha });
    if (res.wrong_rows)
      note(
        `import: ${p}: left out ${res.wrong_rows} row(s) whose #wrong count is not 0 (lines ${res.wrong_lines.slice(0, 8).join(', ')}${res.wrong_lines.length > 8 ? ', …' : ''})`,
      );
  }
  return results;
}

/** One lane's nccl-tests inputs → its collective store file and provenance. */
function stageNcclLane(
  dir: string,
  lane: string,
  group: readonly NcclInput[],
  opts: ImportOpts,
  chip: string,
): StagedMeasurements {
  const rows: CollectiveRow[] = group.flatMap((x) => x.res.rows);
  const flagged = group.reduce((s, x) => s + x.res.in_network_rows, 0);
  const wrong = group.reduce((s, x) => s + x.res.wrong_rows, 0);
  return prepareMeasurements(dir, 'collective', lane, rows, {
    family: 'collective',
    chip,
    lane,
    source_repository: opts.sourceRepo ?? 'NVIDIA/nccl-tests (stdout)',
    source_path: group.map((x) => provenanceRelativePath(x.file)).join(', '),
    source_commit: opts.sourceCommit ?? 'unknown',
    licence: 'measurement by the user',
    inputs: group.map((x) => ({ file: provenanceRelativePath(x.file), sha256: x.sha, rows: x.res.lines.length })),
    filters: [
      'each data line → 2 rows (kernel_source out_of_place / in_place); 0-byte lines skipped',
      'algbw re-derived as size/time and busbw as algbw × bus factor; both checked against the printed values',
      `busbw above the link rate flagged in kernel_source as ";in_network" (NVLS/SHARP), not rejected: ${flagged} rows`,
      ...(wrong
        ? [
            `left out ${wrong} rows whose #wrong (data-check error count) is not 0: the collective returned wrong results`,
          ]
        : []),
    ],
    rows_in: group.reduce((s, x) => s + x.res.lines.length, 0),
    rows_out: rows.length,
    units: { latency_us: 'time [µs] as printed', message_bytes: 'size [B] as printed' },
    notes: group.map(
      (x) =>
        `${provenanceRelativePath(x.file)}: ${x.res.op}, ${x.res.ranks} ranks, ${x.res.nodes} node(s)${x.res.link_GBs ? `, link ${x.res.link_GBs} GB/s` : ''}`,
    ),
  });
}

/** nccl-tests stdout files → one collective store file per lane. */
function stageNccl(paths: readonly string[], opts: ImportOpts): StagedImport {
  const chip = resolveChip(opts, paths, true)!;
  const byLane = groupBy(parseNcclInputs(paths, opts, chip), (x) => x.res.lane);
  const staged = [...byLane].map(([lane, group]) =>
    stageNcclLane(measurementsOut(opts, chip), lane, group, opts, chip),
  );
  const written = staged.map((s) => ({
    file: s.file,
    family: s.family,
    lane: s.lane,
    rows_in: byLane.get(s.lane)!.reduce((a, x) => a + x.res.lines.length, 0),
    rows_out: s.rows,
    notes: byLane
      .get(s.lane)!
      .map(
        (x) =>
          `${x.res.op} ${x.res.ranks} ranks: ${x.res.in_network_rows} rows flagged in_network, ${x.res.wrong_rows} left out (#wrong ≠ 0)`,
      ),
  }));
  return { ...filesOf(staged), written, label: `import nccl-tests --chip ${chip}` };
}

/** Splitwise perf_model.csv files → one held-out step file per chip. */
function stageSplitwiseFiles(paths: readonly string[], opts: ImportOpts): StagedImport {
  const chip = opts.chip === undefined ? undefined : checkedChip(opts.chip);
  const written: WrittenFile[] = [];
  const files: StagedImport['files'] = [];
  for (const p of paths) {
    const res = stageSplitwise(p, {
      ...(chip ? { chip } : {}),
      ...(opts.out ? { outDir: opts.out } : { outRoot: MEASUREMENTS_DIR }),
    });
    if (opts.out && res.summaries.length > 1) {
      throw new UserError(
        `${p} holds several chips (${res.summaries.map((s) => s.chip).join(', ')}); pass --chip to pick one, or omit --out`,
      );
    }
    files.push(...res.files);
    for (const s of res.summaries) {
      written.push({
        file: s.file,
        family: 'step',
        lane: 'splitwise',
        rows_in: res.rows_in,
        rows_out: s.rows_out,
        duplicate_configs: res.repeated_configs,
        notes: [
          `${s.configs} configurations; flagged: ${
            Object.entries(s.flagged)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ') || 'none'
          }`,
        ],
      });
    }
  }
  const dataFiles = files.map((x) => x.file).filter((x) => x.endsWith('.csv') || x.endsWith('.csv.gz'));
  return { files, dataFiles, written, label: 'import splitwise' };
}

/** One AIC system descriptor YAML → a chip file (merged with the existing catalog/chips/<chip>.yaml). */
function stageSystem(paths: readonly string[], opts: ImportOpts): StagedImport {
  if (paths.length !== 1) throw new UserError('import system takes exactly one descriptor YAML');
  const p = paths[0]!;
  const base = path.basename(p).replace(/\.ya?ml$/, '');
  const chip = checkedChip(opts.chip ?? chipFromSku(base));
  const existingFile = path.join(CHIPS_DIR, `${chip}.yaml`);
  const existing = existsSync(existingFile) ? (parseYaml(readText(existingFile)) as ChipFile) : undefined;
  const sm = posInt(opts.smCount, '--sm-count');
  const l2 = opts.l2Mib !== undefined ? Number(opts.l2Mib) : undefined;
  if (l2 !== undefined && !(l2 > 0)) throw new UserError(`--l2-mib expects a positive number, got "${opts.l2Mib}"`);
  const upstreamRef = `${AIC_REPOSITORY}@${AIC_COMMIT.slice(0, 8)} aic-core/src/aiconfigurator_core/systems/${path.basename(p)}`;
  const { yaml } = systemToChip(readText(p), p, chip, upstreamRef, {
    ...(sm ? { sm_count: sm } : {}),
    ...(l2 ? { l2_mib: l2 } : {}),
    ...(existing ? { existing } : {}),
  });
  const out = opts.out ?? pathInside('--chip', chip, CHIPS_DIR, '.yaml');
  return {
    files: [{ file: out, data: yaml }],
    dataFiles: [out],
    written: [{ file: out, family: 'chip', lane: '', rows_in: 1, rows_out: 1 }],
    label: `import system --chip ${chip}`,
  };
}

/**
 * Validate and stage an import (nothing is written).
 * @param format one of IMPORT_FORMATS
 * @param paths input files, each must exist
 * @throws UserError for an unknown format, no or missing paths, a bad flag; UsageError for a chip name that leaves
 *   its folder; InputError (file, row, column) for bad input data
 */
export async function stageImport(format: string, paths: readonly string[], opts: ImportOpts): Promise<StagedImport> {
  if (!(IMPORT_FORMATS as readonly string[]).includes(format)) {
    throw new UserError(`unknown import format "${format}" (expected one of ${IMPORT_FORMATS.join(', ')})`);
  }
  if (paths.length === 0) throw new UserError('no input paths given');
  for (const p of paths) if (!existsSync(p)) throw new UserError(`${p}: no such file`);
  const f = format as ImportFormat;
  if (f === 'aiconfigurator') return stageAiconfigurator(paths, opts);
  if (f === 'nccl-tests') return stageNccl(paths, opts);
  if (f === 'splitwise') return stageSplitwiseFiles(paths, opts);
  return stageSystem(paths, opts);
}

/**
 * Run an import: stage it, refuse to replace curated files without `force` (listing each replaced file
 * on stderr with it), and write every file under the output's lock as one atomic set (all land, or none do).
 * @returns what was written, one entry per data file
 * @throws as stageImport, and UserError when a file exists without `force`; nothing is written then
 */
export async function runImport(format: string, paths: string[], opts: ImportOpts): Promise<WrittenFile[]> {
  const staged = await stageImport(format, paths, opts);
  commitImport(staged, opts);
  return staged.written;
}
