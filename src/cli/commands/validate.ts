/**
 * `stepcal validate --chip <c> [--steps <files...>] [--registry <file>] [--fit-host <rule>]
 *   [--composition no_overlap|cm_overlap|overlap] [--score-flagged] [--json | --md] [--out <dir>] [--no-report]`
 *
 * Prices every held-out row with NoOverlap, CMOverlap and Overlap and reports the error per regime
 * (issue 7; docs/validation.md). Defaults: steps = measurements/<chip>/*.steps.csv, registry =
 * registry/<chip>.yaml, report written to fits/<chip>/report.{md,html}. Results on stdout (a table,
 * JSON with --json, or the generated accuracy markdown with --md); progress on stderr.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { oneOf } from '../../analytics/args.ts';
import { loadChip, REPO_ROOT } from '../../core/catalog/chip.ts';
import { UsageError, UserError } from '../../core/errors.ts';
import { displayPath } from '../../core/io/paths.ts';
import { accuracyMarkdown, validationSummaryLines } from '../../report/summary.ts';
import { writeReport } from '../../report/write.ts';
import {
  DEFAULT_CALIBRATE_FIT_HOST,
  defaultStepFiles,
  REGISTRY_HOST_NOTE,
  validateWithProgress,
} from '../../validate/calibrate.ts';
import { HOST_WEIGHTINGS, type HostWeighting } from '../../validate/hostfit.ts';
import { runRequestValidation } from './validate-requests.ts';
import { engineSPerChip } from './fit-engine.ts';
import { COMPOSITIONS, ENGINE_SM_MODES, type Composition, type EngineSmMode } from '../../validate/types.ts';

interface ValidateOpts {
  chip: string;
  steps?: string[];
  requests?: string[];
  registry?: string;
  fitHost?: string;
  engineSm?: string;
  hostWeighting?: string;
  composition?: string;
  scoreFlagged?: boolean;
  json?: boolean;
  md?: boolean;
  out?: string;
  report?: boolean;
  tiers?: boolean;
  engineS?: string;
  engine?: string;
}

export function register(program: Command): void {
  program
    .command('validate')
    .description(
      'Price held-out step timings with the registry and report the error per regime (NoOverlap, CMOverlap and Overlap)',
    )
    .requiredOption('--chip <name>', 'chip to validate (registry and held-out rows of this chip)')
    .option('--steps <files...>', 'held-out *.steps.csv files (default: measurements/<chip>/*.steps.csv)')
    .option('--registry <file>', 'coefficient registry (default: registry/<chip>.yaml)')
    .option(
      '--requests <files...>',
      'request-level rows replayed through `stepcal serve` and scored per metric (docs/validation.md); a *.steps.csv contributes its static batches',
    )
    .option(
      '--fit-host <rule>',
      `fit per-engine host terms on a training subset: batch=1 | fraction=F (rows used are not scored); without it the registry's host terms price every row (calibrate uses ${DEFAULT_CALIBRATE_FIT_HOST})`,
    )
    .addOption(
      new Option(
        '--engine-sm <mode>',
        'engine compute-efficiency term s on the priced SM time, fitted with the host terms (NoOverlap: linear; CMOverlap: bounded search): auto = held-out evidence picks, on, off',
      )
        .choices([...ENGINE_SM_MODES])
        .default('auto'),
    )
    .addOption(
      new Option(
        '--host-weighting <w>',
        'host-fit least squares: relative (rows weighted by 1/measured) or absolute (µs)',
      )
        .choices([...HOST_WEIGHTINGS])
        .default('relative'),
    )
    .option(
      '--composition <c>',
      `force the headline composition (${COMPOSITIONS.join(' | ')}); default: lowest held-out pooled MAPE of the three`,
      oneOf(COMPOSITIONS),
    )
    .option('--score-flagged', 'score rows carrying exclusion flags too (admitted_fewer, power_capped, ...)')
    .option('--json', 'print the full result as JSON')
    .option('--md', 'print the generated accuracy markdown (for docs/accuracy.md)')
    .option('--out <dir>', 'report directory (default: fits/<chip>)')
    .option('--no-report', 'do not write report.md / report.html')
    .option(
      '--no-tiers',
      'skip the validation tiers (a) uncalibrated, (b) cross-deployment (the headline), (c) cross-chip, (d) in-deployment (docs/validation.md "Tiers")',
    )
    .option(
      '--engine-s <mode>',
      'tiers: CMOverlap s "pooled" (one per engine, default) or "per-chip" (one per chip of each fold\'s training rows; docs/validation.md "s per chip")',
    )
    .option('--engine <name>', 'also score a stored engine profile (registry/engines/<name>.yaml) as it is: tier (e)')
    .action((opts: ValidateOpts) => {
      loadChip(opts.chip); // an unknown chip is named as price names it, listing the known ones
      if (opts.requests) {
        const registryFile = opts.registry ?? path.join(REPO_ROOT, 'registry', `${opts.chip}.yaml`);
        for (const f of opts.requests) if (!existsSync(f)) throw new UserError(`requests file not found: ${f}`);
        return runRequestValidation({
          chip: opts.chip,
          files: opts.requests,
          registryFile,
          ...(opts.json ? { json: true } : {}),
          ...(opts.scoreFlagged ? { scoreFlagged: true } : {}),
        });
      }
      // A flag that needs another is a usage error (exit 2), as a bad flag value is.
      if (opts.engineSm === 'on' && !opts.fitHost)
        throw new UsageError(
          '--engine-sm on needs --fit-host (s is fitted on the same training rows as the host terms)',
        );
      const stepFiles = opts.steps ?? defaultStepFiles(opts.chip);
      if (stepFiles.length === 0)
        throw new UserError(
          `no held-out step files for chip ${opts.chip} (looked in measurements/${opts.chip}/*.steps.csv); pass --steps`,
        );
      for (const f of stepFiles) if (!existsSync(f)) throw new UserError(`steps file not found: ${f}`);
      const registryFile = opts.registry ?? path.join(REPO_ROOT, 'registry', `${opts.chip}.yaml`);
      if (!existsSync(registryFile))
        throw new UserError(
          `registry not found: ${displayPath(registryFile)} (run \`stepcal calibrate --chip ${opts.chip}\` or pass --registry)`,
        );
      const fitFlags = opts.fitHost
        ? [
            `--fit-host ${opts.fitHost}`,
            `--engine-sm ${opts.engineSm ?? 'auto'}`,
            ...(opts.hostWeighting && opts.hostWeighting !== 'relative'
              ? [`--host-weighting ${opts.hostWeighting}`]
              : []),
          ]
        : [];
      const flags = [
        `--chip ${opts.chip}`,
        ...fitFlags,
        ...(opts.composition ? [`--composition ${opts.composition}`] : []),
        ...(opts.scoreFlagged ? ['--score-flagged'] : []),
        ...(opts.engine ? [`--engine ${opts.engine}`] : []),
        ...(engineSPerChip(opts.engineS) ? ['--engine-s per-chip'] : []),
      ];
      const v = validateWithProgress({
        chip: opts.chip,
        registryFile,
        stepFiles,
        ...(opts.fitHost
          ? {
              fitHost: opts.fitHost,
              engineSm: (opts.engineSm ?? 'auto') as EngineSmMode,
              hostWeighting: (opts.hostWeighting ?? 'relative') as HostWeighting,
            }
          : {}),
        ...(opts.composition ? { composition: opts.composition as Composition } : {}),
        ...(opts.scoreFlagged ? { scoreFlagged: true } : {}),
        ...(opts.tiers !== false ? { tiers: true } : {}),
        ...(engineSPerChip(opts.engineS) ? { chipScales: true } : {}),
        ...(opts.engine ? { engine: opts.engine } : {}),
        flags,
      });
      let written: string[] = [];
      if (opts.report !== false)
        written = writeReport(opts.out ?? path.join(REPO_ROOT, 'fits', opts.chip), opts.chip, v);
      if (opts.json || opts.md) {
        // stdout is the machine-readable JSON / markdown; the note goes to stderr
        if (!opts.fitHost) process.stderr.write(`stepcal: note: ${REGISTRY_HOST_NOTE}\n`);
        process.stdout.write(
          opts.json ? `${JSON.stringify(v, null, 1)}\n` : accuracyMarkdown(v, `stepcal validate ${flags.join(' ')}`),
        );
      } else {
        process.stdout.write(
          `${[...(opts.fitHost ? [] : [REGISTRY_HOST_NOTE]), ...validationSummaryLines(v)].join('\n')}\n`,
        );
        if (written.length)
          process.stdout.write(
            `report: ${written
              .filter((f) => /report\.(md|html)$/.test(f))
              .map(displayPath)
              .join(', ')}\n`,
          );
      }
    });
}
