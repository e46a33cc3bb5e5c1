/**
 * `stepcal import <format> <paths...> --chip <name> [--out dir] [--json]`
 *
 * Formats: aiconfigurator (per-operator CSV or Parquet tables; family from the table name, else from the
 * header columns), nccl-tests
 * (stdout text), splitwise (perf_model.csv → held-out steps), system (AIC descriptor YAML → chip file).
 * Every input is validated before anything is written; the outputs land together atomically.
 * Results go to stdout (a table, or JSON with --json); progress goes to stderr.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Argument, type Command, Option } from 'commander';
import { parsePositive, parsePositiveInt } from '../../analytics/args.ts';
import { parse as parseYaml } from 'yaml';
import { chipFromSku, CHIPS_DIR, type Chip, type ChipFile, knownChips, loadChip, REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { parseFlagNumber } from '../../core/flags.ts';
import { readText, sha256, writeFilesAtomic } from '../../core/io/fs.ts';
import { pathInside } from '../../core/io/paths.ts';
import { note, progress } from '../../core/io/progress.ts';
import { lockRootFor, withOutputLockSync } from '../../core/io/staging.ts';
import { AIC_COMMIT, AIC_REPOSITORY, displayPath, type ImportSummary, skuFromPath, stageAicImport } from '../../measurements/import.ts';
import { parseNcclTests, type NcclTestsResult } from '../../measurements/nccl-tests.ts';
import { COLLECTIVE_OPS, type CollectiveOp, type CollectiveRow } from '../../measurements/schema.ts';
import { stageSplitwise } from '../../measurements/splitwise.ts';
import { guardOverwrite, prepareMeasurements } from '../../measurements/store.ts';
import { systemToChip } from '../../measurements/system.ts';

const MEASUREMENTS_DIR = path.join(REPO_ROOT, 'measurements');

export const IMPORT_FORMATS = ['aiconfigurator', 'nccl-tests', 'splitwise', 'system'] as const;
type Format = (typeof IMPORT_FORMATS)[number];

/** Options of runImport. Numeric flags arrive as numbers from the CLI (parsed, a bad value is exit 2) or as strings from callers. */
interface ImportOpts {
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

function posInt(v: string | number | undefined, flag: string): number | undefined {
  return v === undefined ? undefined : parseFlagNumber(flag, v, { integer: true, min: 1 });
}

function resolveChip(opts: ImportOpts, paths: readonly string[], required: boolean): string | undefined {
  if (opts.chip) return checkedChip(opts.chip);
  const skus = [...new Set(paths.map(skuFromPath).filter((s): s is string => !!s))];
  if (skus.length === 1) return checkedChip(chipFromSku(skus[0]!));
  if (required) throw new UserError(`--chip is required (could not infer one chip from the paths; known chips: ${knownChips().join(', ')})`);
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
function commitImport(files: ReadonlyArray<{ file: string; data: string | Uint8Array }>, dataFiles: readonly string[], opts: ImportOpts, label: string): void {
  const targets = files.map((f) => f.file);
  if (opts.force !== true) guardOverwrite(dataFiles, false); // refuse before touching the output folder (no lock file appears)
  withOutputLockSync(lockRootFor(targets, REPO_ROOT), label, [...new Set(targets.map((t) => path.dirname(t)))], () => {
    for (const r of guardOverwrite(dataFiles, opts.force === true)) note(`stepcal: --force: replaced ${r}`);
    writeFilesAtomic(files);
  });
}

function chipInfoOrUndefined(chip: string): Chip | undefined {
  return knownChips().includes(chip) ? loadChip(chip) : undefined;
}

/** Run an import. Exported for tests; returns what was written. */
export async function runImport(format: string, paths: string[], opts: ImportOpts): Promise<WrittenFile[]> {
  if (!(IMPORT_FORMATS as readonly string[]).includes(format)) {
    throw new UserError(`unknown import format "${format}" (expected one of ${IMPORT_FORMATS.join(', ')})`);
  }
  if (paths.length === 0) throw new UserError('no input paths given');
  for (const p of paths) if (!existsSync(p)) throw new UserError(`${p}: no such file`);
  const f = format as Format;
  if (f === 'aiconfigurator') {
    const chip = resolveChip(opts, paths, true)!;
    const chipInfo = chipInfoOrUndefined(chip);
    if (!chipInfo) process.stderr.write(`stepcal: warning: no catalog/chips/${chip}.yaml, so the units-slip check is skipped\n`);
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
    commitImport(staged.flatMap((s) => s.files), staged.map((s) => s.file), opts, `import aiconfigurator --chip ${chip}`);
    return summaries.map((s: ImportSummary) => ({
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
  }
  if (f === 'nccl-tests') {
    const chip = resolveChip(opts, paths, true)!;
    const chipInfo = chipInfoOrUndefined(chip);
    const op = opts.op as CollectiveOp | undefined;
    if (op !== undefined && !(COLLECTIVE_OPS as readonly string[]).includes(op)) {
      throw new UserError(`--op expects one of ${COLLECTIVE_OPS.join(', ')}, got "${op}"`);
    }
    const results: Array<{ file: string; res: NcclTestsResult; sha: string }> = [];
    for (const p of paths) {
      const sha = sha256(readFileSync(p));
      const twin = results.find((x) => x.sha === sha);
      if (twin) throw new UserError(`${p} and ${twin.file} are the same file (sha256 ${sha.slice(0, 12)}…); give it once`);
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
      if (res.wrong_rows) note(`import: ${p}: left out ${res.wrong_rows} row(s) whose #wrong count is not 0 (lines ${res.wrong_lines.slice(0, 8).join(', ')}${res.wrong_lines.length > 8 ? ', …' : ''})`);
    }
    const byLane = new Map<string, typeof results>();
    for (const x of results) {
      const lane = x.res.lane;
      byLane.set(lane, [...(byLane.get(lane) ?? []), x]);
    }
    const staged = [...byLane.entries()].map(([lane, group]) => {
      const rows: CollectiveRow[] = group.flatMap((x) => x.res.rows);
      const flagged = group.reduce((s, x) => s + x.res.in_network_rows, 0);
      const wrong = group.reduce((s, x) => s + x.res.wrong_rows, 0);
      return prepareMeasurements(measurementsOut(opts, chip), 'collective', lane, rows, {
        family: 'collective',
        chip,
        lane,
        source_repository: opts.sourceRepo ?? 'NVIDIA/nccl-tests (stdout)',
        source_path: group.map((x) => displayPath(x.file)).join(', '),
        source_commit: opts.sourceCommit ?? 'unknown',
        licence: 'measurement by the user',
        inputs: group.map((x) => ({ file: displayPath(x.file), sha256: x.sha, rows: x.res.lines.length })),
        filters: [
          'each data line → 2 rows (kernel_source out_of_place / in_place); 0-byte lines skipped',
          'algbw re-derived as size/time and busbw as algbw × bus factor; both checked against the printed values',
          `busbw above the link rate flagged in kernel_source as ";in_network" (NVLS/SHARP), not rejected: ${flagged} rows`,
          ...(wrong ? [`left out ${wrong} rows whose #wrong (data-check error count) is not 0: the collective returned wrong results`] : []),
        ],
        rows_in: group.reduce((s, x) => s + x.res.lines.length, 0),
        rows_out: rows.length,
        units: { latency_us: 'time [µs] as printed', message_bytes: 'size [B] as printed' },
        notes: group.map((x) => `${displayPath(x.file)}: ${x.res.op}, ${x.res.ranks} ranks, ${x.res.nodes} node(s)${x.res.link_GBs ? `, link ${x.res.link_GBs} GB/s` : ''}`),
      });
    });
    commitImport(staged.flatMap((s) => s.files), staged.map((s) => s.file), opts, `import nccl-tests --chip ${chip}`);
    return staged.map((s) => ({
      file: s.file,
      family: s.family,
      lane: s.lane,
      rows_in: byLane.get(s.lane)!.reduce((a, x) => a + x.res.lines.length, 0),
      rows_out: s.rows,
      notes: byLane.get(s.lane)!.map((x) => `${x.res.op} ${x.res.ranks} ranks: ${x.res.in_network_rows} rows flagged in_network, ${x.res.wrong_rows} left out (#wrong ≠ 0)`),
    }));
  }
  if (f === 'splitwise') {
    const chip = opts.chip === undefined ? undefined : checkedChip(opts.chip);
    const all: WrittenFile[] = [];
    const files: Array<{ file: string; data: string }> = [];
    for (const p of paths) {
      const res = stageSplitwise(p, {
        ...(chip ? { chip } : {}),
        ...(opts.out ? { outDir: opts.out } : { outRoot: MEASUREMENTS_DIR }),
      });
      if (opts.out && res.summaries.length > 1) {
        throw new UserError(`${p} holds several chips (${res.summaries.map((s) => s.chip).join(', ')}); pass --chip to pick one, or omit --out`);
      }
      files.push(...res.files);
      for (const s of res.summaries) {
        all.push({
          file: s.file,
          family: 'step',
          lane: 'splitwise',
          rows_in: res.rows_in,
          rows_out: s.rows_out,
          duplicate_configs: res.repeated_configs,
          notes: [`${s.configs} configurations; flagged: ${Object.entries(s.flagged).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`],
        });
      }
    }
    commitImport(files, files.map((x) => x.file).filter((x) => x.endsWith('.csv') || x.endsWith('.csv.gz')), opts, 'import splitwise');
    return all;
  }
  // system
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
  commitImport([{ file: out, data: yaml }], [out], opts, `import system --chip ${chip}`);
  return [{ file: out, family: 'chip', lane: '', rows_in: 1, rows_out: 1 }];
}

function printTable(written: WrittenFile[]): void {
  const lines = ['file\tfamily\tlane\trows_in\trows_out\trepeated_configs'];
  for (const w of written) lines.push([w.file, w.family, w.lane, w.rows_in, w.rows_out, w.duplicate_configs ?? 0].join('\t'));
  process.stdout.write(lines.join('\n') + '\n');
  for (const w of written) for (const n of w.notes ?? []) process.stdout.write(`  ${path.basename(w.file)}: ${n}\n`);
}

export function register(program: Command): void {
  program
    .command('import')
    .description('Import measurements: aiconfigurator (CSV/Parquet tables), nccl-tests (stdout), splitwise (perf_model.csv), system (descriptor YAML → chip file)')
    .addArgument(new Argument('<format>', 'input format').choices(IMPORT_FORMATS))
    .argument('<paths...>', 'input files')
    .option('--chip <name>', 'stepcal chip name (inferred from an AIC <sku> folder when omitted; splitwise: all chips in the file)')
    .option('--out <dir>', 'output directory (default measurements/<chip>/; system: output file, default catalog/chips/<chip>.yaml)')
    .option('--json', 'print what was written as JSON')
    .option('--force', 'replace existing curated files (refused without it; each replaced file is listed on stderr)')
    .addOption(new Option('--ranks <n>', 'nccl-tests: number of ranks (default: from the header)').argParser(parsePositiveInt))
    .addOption(new Option('--nodes <n>', 'nccl-tests: number of nodes (default: distinct hosts in the header)').argParser(parsePositiveInt))
    .option('--op <op>', `nccl-tests: collective (${COLLECTIVE_OPS.join(', ')}; default from the text or file name)`)
    .option('--lane <lane>', 'nccl-tests: lane label (default nccl-tests-<NCCL version>)')
    .option('--source-repo <repo>', 'provenance: source repository')
    .option('--source-commit <sha>', 'provenance: source commit')
    .addOption(new Option('--sm-count <n>', 'system: SM count (the descriptor has none)').argParser(parsePositiveInt))
    .addOption(new Option('--l2-mib <n>', 'system: L2 size in MiB').argParser(parsePositive))
    .addHelpText(
      'after',
      '\nExamples:\n  stepcal import aiconfigurator ../shared/datasets/aiconfigurator/h200_sxm/gemm_perf/vllm-0.24.0/gemm_perf.csv --chip h200\n' +
        '  stepcal import nccl-tests all_reduce_perf.txt --chip h100 --ranks 8\n' +
        '  stepcal import splitwise ../shared/datasets/splitwise/perf_model.csv\n' +
        '  stepcal import system ../shared/datasets/aiconfigurator/systems/h200_sxm.yaml --out /tmp/h200.yaml\n',
    )
    .action(async (format: string, paths: string[], opts: ImportOpts) => {
      const written = await runImport(format, paths, opts);
      if (opts.json) process.stdout.write(JSON.stringify({ format, written }, null, 2) + '\n');
      else printTable(written);
    });
}
