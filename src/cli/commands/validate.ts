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
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { progress } from '../../core/io/progress.ts';
import { listStepFiles } from '../../measurements/store.ts';
import { loadRegistryFile } from '../../registry/load.ts';
import { accuracyMarkdown, validationSummaryLines } from '../../report/summary.ts';
import { writeReport } from '../../report/write.ts';
import { defaultValidationDeps } from '../../validate/pricing.ts';
import { displayPath, runValidation } from '../../validate/index.ts';
import { HOST_WEIGHTINGS, type HostWeighting } from '../../validate/hostfit.ts';
import { runRequestValidation } from './validate-requests.ts';
import { COMPOSITIONS, ENGINE_SM_MODES, type Composition, type EngineSmMode, type ValidationResult } from '../../validate/types.ts';

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
}

/**
 * The host-term rule `stepcal calibrate` validates with by default (DECISION, docs/validation.md): per-engine
 * host terms fitted on every 4th row per group, those rows not scored. `validate` without `--fit-host`
 * uses the registry's host terms instead and says so (REGISTRY_HOST_NOTE), so the two never disagree silently.
 */
export const DEFAULT_CALIBRATE_FIT_HOST = 'fraction=0.25';

/** The one line `validate` prints when it prices with the registry's host terms (no --fit-host). */
export const REGISTRY_HOST_NOTE = `host terms: the registry's (no --fit-host); calibrate fits them per engine: pass --fit-host ${DEFAULT_CALIBRATE_FIT_HOST} to match`;

/** Held-out step files for a chip (measurements/<chip>/*.steps.csv[.gz]). */
export function defaultStepFiles(chip: string): string[] {
  return listStepFiles(path.join(REPO_ROOT, 'measurements', chip));
}

/** Run a validation with a progress bar on stderr. */
export function validateWithProgress(args: {
  chip: string;
  registryFile: string;
  stepFiles: string[];
  fitHost?: string;
  engineSm?: EngineSmMode;
  hostWeighting?: HostWeighting;
  composition?: Composition;
  scoreFlagged?: boolean;
  flags: string[];
}): ValidationResult {
  const registry = loadRegistryFile(args.registryFile);
  const deps = defaultValidationDeps(registry);
  let bar: ReturnType<typeof progress> | undefined;
  deps.onRowPriced = (done, total) => {
    bar ??= progress(`pricing held-out rows (${args.chip})`, total);
    bar.tick();
    if (done === total) bar.done();
  };
  return runValidation(
    {
      chip: args.chip,
      registry,
      registryFile: args.registryFile,
      stepFiles: args.stepFiles,
      ...(args.fitHost ? { fitHost: args.fitHost } : {}),
      ...(args.engineSm ? { engineSm: args.engineSm } : {}),
      ...(args.hostWeighting ? { hostWeighting: args.hostWeighting } : {}),
      ...(args.composition ? { composition: args.composition } : {}),
      ...(args.scoreFlagged ? { excludeFlags: {} } : {}),
      flags: args.flags,
    },
    deps,
  );
}

export function register(program: Command): void {
  program
    .command('validate')
    .description('Price held-out step timings with the registry and report the error per regime (NoOverlap, CMOverlap and Overlap)')
    .requiredOption('--chip <name>', 'chip to validate (registry and held-out rows of this chip)')
    .option('--steps <files...>', 'held-out *.steps.csv files (default: measurements/<chip>/*.steps.csv)')
    .option('--registry <file>', 'coefficient registry (default: registry/<chip>.yaml)')
    .option('--requests <files...>', 'request-level rows replayed through `stepcal serve` and scored per metric (docs/validation.md); a *.steps.csv contributes its static batches')
    .option('--fit-host <rule>', `fit per-engine host terms on a training subset: batch=1 | fraction=F (rows used are not scored); without it the registry's host terms price every row (calibrate uses ${DEFAULT_CALIBRATE_FIT_HOST})`)
    .addOption(
      new Option('--engine-sm <mode>', 'engine compute-efficiency term s on the priced SM time, fitted with the host terms (NoOverlap: linear; CMOverlap: bounded search): auto = held-out evidence picks, on, off')
        .choices([...ENGINE_SM_MODES])
        .default('auto'),
    )
    .addOption(new Option('--host-weighting <w>', 'host-fit least squares: relative (rows weighted by 1/measured) or absolute (µs)').choices([...HOST_WEIGHTINGS]).default('relative'))
    .option('--composition <c>', `force the headline composition (${COMPOSITIONS.join(' | ')}); default: lowest held-out pooled MAPE of the three`)
    .option('--score-flagged', 'score rows carrying exclusion flags too (admitted_fewer, power_capped, ...)')
    .option('--json', 'print the full result as JSON')
    .option('--md', 'print the generated accuracy markdown (for docs/accuracy.md)')
    .option('--out <dir>', 'report directory (default: fits/<chip>)')
    .option('--no-report', 'do not write report.md / report.html')
    .action((opts: ValidateOpts) => {
      if (opts.composition && !(COMPOSITIONS as readonly string[]).includes(opts.composition)) {
        throw new UserError(`--composition: expected one of ${COMPOSITIONS.join(', ')}, got "${opts.composition}"`);
      }
      if (opts.requests) {
        const registryFile = opts.registry ?? path.join(REPO_ROOT, 'registry', `${opts.chip}.yaml`);
        for (const f of opts.requests) if (!existsSync(f)) throw new UserError(`requests file not found: ${f}`);
        return runRequestValidation({ chip: opts.chip, files: opts.requests, registryFile, ...(opts.json ? { json: true } : {}), ...(opts.scoreFlagged ? { scoreFlagged: true } : {}) });
      }
      if (opts.engineSm === 'on' && !opts.fitHost) throw new UserError('--engine-sm on needs --fit-host (s is fitted on the same training rows as the host terms)');
      const stepFiles = opts.steps ?? defaultStepFiles(opts.chip);
      if (stepFiles.length === 0) throw new UserError(`no held-out step files for chip ${opts.chip} (looked in measurements/${opts.chip}/*.steps.csv); pass --steps`);
      for (const f of stepFiles) if (!existsSync(f)) throw new UserError(`steps file not found: ${f}`);
      const registryFile = opts.registry ?? path.join(REPO_ROOT, 'registry', `${opts.chip}.yaml`);
      if (!existsSync(registryFile)) throw new UserError(`registry not found: ${displayPath(registryFile)} (run \`stepcal calibrate --chip ${opts.chip}\` or pass --registry)`);
      const fitFlags = opts.fitHost
        ? [`--fit-host ${opts.fitHost}`, `--engine-sm ${opts.engineSm ?? 'auto'}`, ...(opts.hostWeighting && opts.hostWeighting !== 'relative' ? [`--host-weighting ${opts.hostWeighting}`] : [])]
        : [];
      const flags = [
        `--chip ${opts.chip}`,
        ...fitFlags,
        ...(opts.composition ? [`--composition ${opts.composition}`] : []),
        ...(opts.scoreFlagged ? ['--score-flagged'] : []),
      ];
      const v = validateWithProgress({
        chip: opts.chip,
        registryFile,
        stepFiles,
        ...(opts.fitHost ? { fitHost: opts.fitHost, engineSm: (opts.engineSm ?? 'auto') as EngineSmMode, hostWeighting: (opts.hostWeighting ?? 'relative') as HostWeighting } : {}),
        ...(opts.composition ? { composition: opts.composition as Composition } : {}),
        ...(opts.scoreFlagged ? { scoreFlagged: true } : {}),
        flags,
      });
      let written: string[] = [];
      if (opts.report !== false) written = writeReport(opts.out ?? path.join(REPO_ROOT, 'fits', opts.chip), opts.chip, v);
      if (opts.json || opts.md) {
        // stdout is the machine-readable JSON / markdown; the note goes to stderr
        if (!opts.fitHost) process.stderr.write(`stepcal: note: ${REGISTRY_HOST_NOTE}\n`);
        process.stdout.write(opts.json ? JSON.stringify(v, null, 1) + '\n' : accuracyMarkdown(v, `stepcal validate ${flags.join(' ')}`));
      } else {
        process.stdout.write([...(opts.fitHost ? [] : [REGISTRY_HOST_NOTE]), ...validationSummaryLines(v)].join('\n') + '\n');
        if (written.length) process.stdout.write(`report: ${written.filter((f) => /report\.(md|html)$/.test(f)).map(displayPath).join(', ')}\n`);
      }
    });
}
