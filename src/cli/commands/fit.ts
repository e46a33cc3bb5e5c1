/**
 * `stepcal fit <family|all> --chip <name> [--lane <lane>] [--check] [--json] [--registry-out <file>] [--fits-out <dir>]`
 *
 * Fits coefficient families from `measurements/<chip>/` and writes `registry/<chip>.yaml`,
 * `fits/<chip>/*.svg` and `fits/<chip>/README.md` (all or nothing). `--check` writes nothing and
 * exits 1 naming every entry or file that would change. Summary on stdout; progress on stderr.
 * Where the outputs go is decided by `planFitOutputs` (docs/fitting.md).
 */
import { type Command, Option } from 'commander';
import { UsageError, UserError } from '../../core/errors.ts';
import { runFitEngine, type FitEngineOpts } from './fit-engine.ts';
import { flagParser } from '../../core/flags.ts';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { note } from '../../core/io/progress.ts';
import { lockRootFor, withOutputLockSync } from '../../core/io/staging.ts';
import { fitAll, FIT_FAMILIES, type FitFamily } from '../../fit/index.ts';
import { coefficientSummaries, fitOutputFiles, type FitOutputOptions, renderFitReport } from '../../report/fit.ts';
import type { FitAllResult } from '../../fit/index.ts';
import { displayPath } from '../../core/io/paths.ts';
import {
  checkFamilyEntries,
  checkFitOutputs,
  partialFitDrops,
  registryOutputFile,
  writeFitOutputs,
} from '../fit-outputs.ts';
import { existsSync } from 'node:fs';
import path from 'node:path';
import v8 from 'node:v8';

/** What a `stepcal fit` invocation writes (or, with --check, compares). */
export interface FitOutputPlan {
  /** False: nothing is written (a partial fit with no --registry-out). */
  write: boolean;
  /** Passed to writeFitOutputs / checkFitOutputs. */
  out: FitOutputOptions;
  /** Why something is not written (printed on stderr). */
  notes: string[];
}

/**
 * Decide the outputs of `stepcal fit` (pure). Rules (docs/fitting.md):
 * - no --registry-out: `fit all` writes registry/<chip>.yaml and the report in `--fits-out`
 *   (default fits/<chip>); a single family writes nothing (it would replace the chip's full
 *   registry with a partial one);
 * - --registry-out F: the registry goes to F, and the report ONLY to an explicit `--fits-out`;
 *   without it no report is written, so a scratch or family-only fit never rewrites the committed
 *   fits/<chip>/.
 * `--check` compares exactly the files that would be written.
 */
export function planFitOutputs(
  chip: string,
  family: string,
  o: { registryOut?: string; fitsOut?: string; check?: boolean },
): FitOutputPlan {
  const notes: string[] = [];
  const out: FitOutputOptions = {};
  if (o.registryOut) out.registryOut = o.registryOut;
  if (o.fitsOut) out.fitsDir = o.fitsOut;
  else if (o.registryOut) {
    out.fitsDir = null;
    notes.push(
      `fit ${chip}: registry redirected to ${o.registryOut}; no fit report written (pass --fits-out <dir> for SVGs and README; fits/${chip}/ is left untouched)`,
    );
  }
  const write = family === 'all' || !!o.registryOut;
  if (!write && !o.check)
    notes.push(
      `fit ${family}: partial fit; use --registry-out <file> to write it (registry/${chip}.yaml holds every family)`,
    );
  return { write, out, notes };
}

/**
 * V8's old-generation growth in a fit process, in per cent over the live heap after each full GC
 * (DECISION, issue 17, fit7: docs/performance.md "fit all, session 12"). By default V8 lets the old
 * generation grow up to 4× what survived the last full GC before it collects again; a fit's garbage
 * (bootstrap buffers, per-family working arrays) is promoted faster than it dies, so h200's one-thread
 * heap reached 169 MB over 40–66 MB live and the process peaked at 255–265 MiB RSS. At 50 % it peaks at
 * 184–189 MiB for about the same GC time (≈ 0.5 s either way). `STEPCAL_FIT_HEAP_GROWING_PERCENT`
 * overrides it (an integer 0–1000; 0: V8's own rule; anything else exits 2); a `--heap-growing-percent`
 * given to node itself is left alone.
 * V8 flags are per process, so the fit's worker threads grow by the same rule.
 */
const FIT_HEAP_GROWING_PERCENT = 50;

function setFitHeapGrowth(): void {
  if ([...process.execArgv, process.env.NODE_OPTIONS ?? ''].some((a) => a.includes('heap-growing-percent'))) return;
  const env = process.env.STEPCAL_FIT_HEAP_GROWING_PERCENT || undefined; // '' = unset
  if (env !== undefined && !(/^\d{1,4}$/.test(env) && Number(env) <= 1000))
    throw new UsageError(`STEPCAL_FIT_HEAP_GROWING_PERCENT must be an integer from 0 to 1000 (got "${env}")`);
  const percent = env !== undefined ? Number(env) : FIT_HEAP_GROWING_PERCENT;
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}

/** How many coefficient entries `sets` hold. */
const entryCount = (sets: ReadonlyArray<{ coefficients: readonly unknown[] }>): number =>
  sets.reduce((n, s) => n + s.coefficients.length, 0);

/**
 * The refusal of a fit with `count` refusals. A chip onboarded from an upstream folder (its report
 * fits/<chip>/onboard.md, as `stepcal onboard` writes it) has a registry that leaves out the entries a
 * non-required gate refuses (docs/onboarding.md), so `fit all` refuses what onboard wrote: the message
 * names the command that checks and regenerates it.
 */
function refusalMessage(chip: string, count: number): string {
  const base = `fit ${chip}: ${count} refusal(s); nothing written`;
  if (!existsSync(path.join(REPO_ROOT, 'fits', chip, 'onboard.md'))) return base;
  return `${base}. registry/${chip}.yaml was written by \`stepcal onboard\` (fits/${chip}/onboard.md), which leaves refused entries out: regenerate it with \`stepcal onboard --chip ${chip} --data <upstream chip folder> --replace-registry\` (without --replace-registry it refuses with the registry diff when the registry would change; docs/onboarding.md)`;
}

/**
 * `fit <family> --check` that fitted no entry of the family compared nothing: not a match to report.
 * @throws UserError naming the family and the lane (its warnings say why, e.g. "not fitted: no measurements")
 */
function refuseEmptyCheck(result: FitAllResult, family: string, lane: string | undefined): void {
  const fit = result.families.find((f) => f.family === family);
  if (fit && fit.coefficients.length > 0) return;
  throw new UserError(
    `fit --check ${result.chip}: ${family} fitted no entries${lane ? ` from lane ${lane}` : ''}, so nothing was compared${fit?.warnings.length ? ` (${fit.warnings.join('; ')})` : ''}`,
  );
}

/**
 * A family-only fit writes a registry holding only what it fits; over an existing `--registry-out` that
 * holds other families' entries it would drop them (an update never drops entries it did not mean to
 * change), so it refuses and says how to merge instead.
 * @throws UserError naming the file, how many entries would go and a few of them
 */
function refuseDroppingWrite(result: FitAllResult, out: FitOutputOptions, family: string): void {
  const drops = partialFitDrops(result, out);
  if (!drops.length) return;
  const file = displayPath(registryOutputFile(result, out));
  throw new UserError(
    `fit ${family} --chip ${result.chip}: --registry-out ${file} holds ${drops.length} entries ${family} does not fit (e.g. ${drops.slice(0, 3).join(', ')}); writing its partial registry there would drop them, so nothing was written. Write to a new file and merge it with \`stepcal registry update --chip ${result.chip} --registry ${file} --from <new file> --only ${family}\`, or run \`fit all\``,
  );
}

export function register(program: Command): void {
  program
    .command('fit')
    .description(
      `fit coefficients from stored measurements: <family> is one of ${FIT_FAMILIES.join(', ')}, all or engine (an engine profile from step timings)`,
    )
    .argument('<family>', `${FIT_FAMILIES.join(' | ')} | all | engine`)
    .option('--chip <name>', 'chip name (catalog/chips/<name>.yaml); required except for `fit engine`')
    .option('--engine <name>', 'fit engine: the engine whose profile is fitted (registry/engines/<name>.yaml)')
    .option(
      '--steps <files...>',
      'fit engine: step timings (*.steps.csv; each row priced with registry/<its chip>.yaml)',
    )
    .option('--out <file>', 'fit engine: output file (default registry/engines/<name>.yaml)')
    .option(
      '--engine-s <mode>',
      'fit engine: CMOverlap s "pooled" (one per engine, default) or "per-chip" (one per chip of the rows; docs/validation.md "s per chip")',
    )
    .option('--lane <lane>', 'measurement lane for gemm/attention/moe (default: the vllm-* lane)')
    .option('--check', 'write nothing; exit 1 naming entries that would change')
    .option('--json', 'print the summary, refusals and coefficients as JSON')
    .option(
      '--registry-out <file>',
      'registry output path (default registry/<chip>.yaml); without --fits-out no fit report is written',
    )
    .option(
      '--fits-out <dir>',
      'fit report directory for SVGs and README (default fits/<chip> when the registry is not redirected)',
    )
    .option('--measurements <dir>', 'measurement directory (default measurements/<chip>)')
    .addOption(
      new Option('--resamples <n>', 'bootstrap resamples (≥ 200)')
        .argParser(flagParser('--resamples', { integer: true, min: 200 }))
        .default(200),
    )
    .action(
      async (
        family: string,
        o: FitEngineOpts & {
          chip?: string;
          lane?: string;
          check?: boolean;
          json?: boolean;
          registryOut?: string;
          fitsOut?: string;
          measurements?: string;
          resamples: number;
        },
      ) => {
        if (family === 'engine') return runFitEngine(o);
        if (family !== 'all' && !(FIT_FAMILIES as readonly string[]).includes(family)) {
          throw new UsageError(`unknown family "${family}" (known: ${FIT_FAMILIES.join(', ')}, all, engine)`);
        }
        if (!o.chip) throw new UsageError(`fit ${family}: --chip <name> is required`);
        const families = family === 'all' ? undefined : [family as FitFamily];
        setFitHeapGrowth();
        const result = await fitAll(o.chip, {
          ...(families ? { families } : {}),
          ...(o.lane ? { lane: o.lane } : {}),
          ...(o.measurements ? { measurementsDir: o.measurements } : {}),
          bootstrap: { resamples: o.resamples, seed: 20261129 },
          onFamily: (f, phase, ms) =>
            note(
              phase === 'start'
                ? `fit ${o.chip}: ${f} ...`
                : `fit ${o.chip}: ${f} done in ${((ms ?? 0) / 1000).toFixed(1)} s`,
            ),
        });
        const report = renderFitReport(result);
        const plan = planFitOutputs(o.chip, family, o);
        for (const n of plan.notes) note(n);
        const out = plan.out;
        if (o.json) {
          process.stdout.write(
            `${JSON.stringify(
              {
                chip: result.chip,
                refusals: result.refusals,
                warnings: result.warnings,
                summary: report.summary,
                coefficients: coefficientSummaries(result.sets),
              },
              null,
              2,
            )}\n`,
          );
        } else {
          process.stdout.write(`${report.summary.join('\n')}\n`);
        }
        if (result.refusals.length) throw new UserError(refusalMessage(result.chip, result.refusals.length));
        if (o.check) {
          const partial = family !== 'all';
          if (partial) refuseEmptyCheck(result, family, o.lane);
          const drift = partial ? checkFamilyEntries(result, out) : checkFitOutputs(result, out, report);
          if (drift.length)
            throw new UserError(`fit --check ${o.chip}: committed outputs would change:\n  ${drift.join('\n  ')}`);
          note(
            partial
              ? `fit --check ${o.chip}: the ${entryCount(result.sets)} entries of ${family} and the families it is fitted from match ${displayPath(registryOutputFile(result, out))} (the report is checked by \`fit all --check\`)`
              : `fit --check ${o.chip}: clean`,
          );
          return;
        }
        if (!plan.write) return;
        if (family !== 'all') refuseDroppingWrite(result, out, family);
        const targets = fitOutputFiles(result, out, report).map((f) => f.file);
        const dirs = [...new Set(targets.map((t) => path.dirname(t)))];
        const written = withOutputLockSync(
          lockRootFor(targets, REPO_ROOT),
          `fit ${family} --chip ${o.chip}`,
          dirs,
          () => writeFitOutputs(result, out, report),
        );
        note(`fit ${o.chip}: wrote ${written.length} files`);
      },
    );
}
