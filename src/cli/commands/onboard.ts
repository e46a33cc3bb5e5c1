/**
 * `stepcal onboard --chip <name> --data <dir> --system <descriptor.yaml> [--out-root dir]`:
 * a chip never seen, from raw upstream tables to a registry in one command (src/registry/onboard.ts).
 * Exit 0 on success; 1 when the data cannot support a required family (the coverage list is
 * printed), on bad input, or when a fit, gate or check fails. `--json` prints `onboardJson` on
 * success, `{status: "failed", reason, coverage, registry_written: false}` on a failure (exit 1).
 */
import { Option, type Command } from 'commander';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { parseFlagList, parseFlagNumber } from '../../core/flags.ts';
import { withOutputLock } from '../../core/io/staging.ts';
import path from 'node:path';
import { coverageJson, coverageOf, findTables, onboardChip, onboardJson } from '../../registry/onboard.ts';
import { fitReportOutputs } from '../../report/fit.ts';

export function register(program: Command): void {
  program
    .command('onboard')
    .description('import → chip file → gates → fit all → extrapolation → registry → report, for a new chip')
    .requiredOption('--chip <name>', 'stepcal name of the new chip')
    .requiredOption('--data <dir>', 'directory of upstream per-operator tables (Parquet or CSV, any depth)')
    .requiredOption('--system <descriptor>', 'AIConfigurator system descriptor YAML')
    .addOption(
      new Option('--out-root <dir>', 'root for catalog/, measurements/, registry/ and fits/').default(
        REPO_ROOT,
        'the repository',
      ),
    )
    .option('--sm-count <n>', 'SM count (not in the descriptor)')
    .option('--l2-mib <n>', 'L2 size in MiB (not in the descriptor)')
    .option('--widths <list>', 'collective widths to extrapolate when missing', '16')
    .option('--sibling-registry-dir <dir>', 'registries that may serve as same-generation siblings')
    .option(
      '--json',
      'print the outcome as JSON (coverage, files written, registry path, summary); a failure prints status "failed" with the coverage and exits 1',
    )
    .action(
      async (o: {
        chip: string;
        data: string;
        system: string;
        outRoot: string;
        smCount?: string;
        l2Mib?: string;
        widths: string;
        siblingRegistryDir?: string;
        json?: boolean;
      }) => {
        const sm =
          o.smCount === undefined ? undefined : parseFlagNumber('--sm-count', o.smCount, { integer: true, min: 1 });
        const l2 =
          o.l2Mib === undefined ? undefined : parseFlagNumber('--l2-mib', o.l2Mib, { min: 0, minExclusive: true });
        const widths = parseFlagList('--widths', o.widths, { integer: true, min: 2 });
        const root = path.resolve(o.outRoot);
        const dirs = [
          'registry',
          path.join('fits', o.chip),
          path.join('measurements', o.chip),
          path.join('catalog', 'chips'),
        ].map((d) => path.join(root, d));
        const run = () =>
          withOutputLock(root, `onboard --chip ${o.chip}`, dirs, () =>
            onboardChip({
              chip: o.chip,
              dataDir: o.data,
              systemFile: o.system,
              outRoot: o.outRoot,
              ...(sm !== undefined ? { sm_count: sm } : {}),
              ...(l2 !== undefined ? { l2_mib: l2 } : {}),
              widths,
              ...(o.siblingRegistryDir ? { siblingRegistryDir: o.siblingRegistryDir } : {}),
              log: (l) => process.stderr.write(l + '\n'),
              fitOutputs: fitReportOutputs,
            }),
          );
        if (!o.json) {
          process.stdout.write((await run()).report);
          return;
        }
        const found = findTables(o.data);
        const coverage = coverageJson(coverageOf(found.tables, found.ignored));
        try {
          process.stdout.write(JSON.stringify(onboardJson(await run()), null, 2) + '\n');
        } catch (err) {
          if (err instanceof UserError)
            process.stdout.write(
              JSON.stringify(
                { status: 'failed', chip: o.chip, reason: err.message, coverage, registry_written: false },
                null,
                2,
              ) + '\n',
            );
          throw err;
        }
      },
    );
}
