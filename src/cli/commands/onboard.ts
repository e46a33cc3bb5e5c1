/**
 * `stepcal onboard --chip <name> --data <upstream chip folder> [--system desc.yaml] [--out-root dir]
 * [--lane l]... [--update-catalog] [--replace-registry] [--json]`: a chip from its complete upstream
 * folder to a registry and coverage report in one command (src/registry/onboard.ts, docs/onboarding.md).
 * Exit 0 on success; 1 when the data cannot support a required family (the coverage list is printed),
 * on bad input, when a required family's fit or a gate fails, or when the run would replace an existing
 * catalog entry or registry without the flag that allows it (the diff is printed; nothing written).
 * `--json` prints `onboardJson` on success, `{status: "failed", reason, coverage, registry_written: false}`
 * on a failure (exit 1).
 */
import path from 'node:path';
import { type Command, Option } from 'commander';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { parseFlagList, parseFlagNumber } from '../../core/flags.ts';
import { withOutputLock } from '../../core/io/staging.ts';
import { scanUpstreamFolder } from '../../measurements/upstream-folder.ts';
import { chosenTables, coverageJson, coverageOf, onboardChip, onboardJson } from '../../registry/onboard.ts';
import { fitReportOutputs } from '../../report/fit.ts';

interface OnboardFlags {
  chip: string;
  data: string;
  system?: string;
  outRoot: string;
  lane: string[];
  updateCatalog?: boolean;
  replaceRegistry?: boolean;
  smCount?: string;
  l2Mib?: string;
  widths: string;
  siblingRegistryDir?: string;
  json?: boolean;
}

const collect = (v: string, prev: string[]) => [...prev, ...v.split(',').filter(Boolean)];

export function register(program: Command): void {
  program
    .command('onboard')
    .description(
      'upstream chip folder → catalog entry → import → fit all → extrapolation → gates → registry + coverage',
    )
    .requiredOption('--chip <name>', 'stepcal name of the chip (its catalog entry is read when one exists)')
    .requiredOption('--data <dir>', 'the upstream chip folder (<op>/<framework>/<version>/<table>.parquet), any depth')
    .option('--system <descriptor>', 'AIConfigurator system descriptor (default <data>/../systems/<folder>.yaml)')
    .addOption(
      new Option('--out-root <dir>', 'root for catalog/, measurements/, registry/ and fits/').default(
        REPO_ROOT,
        'the repository',
      ),
    )
    .option(
      '--lane <lane>',
      'lane override, `lane` or `table=lane` (repeatable; default: newest vLLM lane with data)',
      collect,
      [],
    )
    .option(
      '--update-catalog',
      'replace the catalog entry with the descriptor-derived facts (default: read it, show the diff)',
    )
    .option(
      '--replace-registry',
      'replace an existing registry / measurement set that would change (default: refuse with the diff)',
    )
    .option('--sm-count <n>', 'SM count (not in the descriptor; overrides the catalog)')
    .option('--l2-mib <n>', 'L2 size in MiB (not in the descriptor; overrides the catalog)')
    .option('--widths <list>', 'collective widths to extrapolate when missing', '16')
    .option('--sibling-registry-dir <dir>', 'registries that may serve as same-generation siblings')
    .option(
      '--json',
      'print the outcome as JSON (coverage per family, files written, summary); a failure prints status "failed" and exits 1',
    )
    .action(async (o: OnboardFlags) => {
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
            ...(o.system ? { systemFile: o.system } : {}),
            outRoot: o.outRoot,
            lanes: o.lane,
            updateCatalog: !!o.updateCatalog,
            replaceRegistry: !!o.replaceRegistry,
            ...(sm !== undefined ? { sm_count: sm } : {}),
            ...(l2 !== undefined ? { l2_mib: l2 } : {}),
            widths,
            ...(o.siblingRegistryDir ? { siblingRegistryDir: o.siblingRegistryDir } : {}),
            log: (l) => process.stderr.write(`${l}\n`),
            fitOutputs: fitReportOutputs,
          }),
        );
      if (!o.json) {
        process.stdout.write((await run()).report);
        return;
      }
      try {
        process.stdout.write(`${JSON.stringify(onboardJson(await run()), null, 2)}\n`);
      } catch (err) {
        if (err instanceof UserError) {
          const scan = await scanUpstreamFolder(o.data, o.lane).catch(() => undefined);
          const coverage = scan ? coverageJson(coverageOf(chosenTables(scan))) : undefined;
          process.stdout.write(
            `${JSON.stringify(
              { status: 'failed', chip: o.chip, reason: err.message, coverage, registry_written: false },
              null,
              2,
            )}\n`,
          );
        }
        throw err;
      }
    });
}
