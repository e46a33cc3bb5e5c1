/**
 * `stepcal import <format> <paths...> --chip <name> [--out dir] [--json]`
 *
 * Formats: aiconfigurator (per-operator CSV or Parquet tables; family from the table name, else from the
 * header columns), nccl-tests
 * (stdout text), splitwise (perf_model.csv → held-out steps), system (AIC descriptor YAML → chip file).
 * The pipeline is src/measurements/pipeline.ts (`runImport`: every input is validated before anything
 * is written; the outputs land together atomically). This file parses flags and prints: results go to
 * stdout (a table, or JSON with --json); progress goes to stderr.
 */
import path from 'node:path';
import { Argument, type Command, Option } from 'commander';
import { parsePositive, parsePositiveInt } from '../../analytics/args.ts';
import { IMPORT_FORMATS, type ImportOpts, runImport, type WrittenFile } from '../../measurements/pipeline.ts';
import { COLLECTIVE_OPS } from '../../measurements/schema.ts';

function printTable(written: WrittenFile[]): void {
  const lines = ['file\tfamily\tlane\trows_in\trows_out\trepeated_configs'];
  for (const w of written)
    lines.push([w.file, w.family, w.lane, w.rows_in, w.rows_out, w.duplicate_configs ?? 0].join('\t'));
  process.stdout.write(`${lines.join('\n')}\n`);
  for (const w of written) for (const n of w.notes ?? []) process.stdout.write(`  ${path.basename(w.file)}: ${n}\n`);
}

export function register(program: Command): void {
  program
    .command('import')
    .description(
      'Import measurements: aiconfigurator (CSV/Parquet tables), nccl-tests (stdout), splitwise (perf_model.csv), system (descriptor YAML → chip file)',
    )
    .addArgument(new Argument('<format>', 'input format').choices(IMPORT_FORMATS))
    .argument('<paths...>', 'input files')
    .option(
      '--chip <name>',
      'stepcal chip name (inferred from an AIC <sku> folder when omitted; splitwise: all chips in the file)',
    )
    .option(
      '--out <dir>',
      'output directory (default measurements/<chip>/; system: output file, default catalog/chips/<chip>.yaml)',
    )
    .option('--json', 'print what was written as JSON')
    .option('--force', 'replace existing curated files (refused without it; each replaced file is listed on stderr)')
    .addOption(
      new Option('--ranks <n>', 'nccl-tests: number of ranks (default: from the header)').argParser(parsePositiveInt),
    )
    .addOption(
      new Option('--nodes <n>', 'nccl-tests: number of nodes (default: distinct hosts in the header)').argParser(
        parsePositiveInt,
      ),
    )
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
      if (opts.json) process.stdout.write(`${JSON.stringify({ format, written }, null, 2)}\n`);
      else printTable(written);
    });
}
