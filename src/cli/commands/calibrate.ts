/**
 * `stepcal calibrate [--chip h200] [--json] [--no-report] [--fit-host <rule>] [--resamples n]`: the main job.
 *
 * 1. check the measurements (every stored file against its provenance's sha256 and row count;
 *    held-out step files parsed);
 * 2. fit every family (`fitAll`);
 * 3. run the registry gates (refusals and gate failures stop the job; nothing is written);
 * 4. stage `registry/<chip>.yaml` (+ fits/<chip>/*.svg and README.md);
 * 5. validate on the held-out files of that chip (`measurements/<chip>/*.steps.csv`) with the staged
 *    registry, host terms fitted per engine on a declared training subset (default `fraction=0.25`,
 *    rows not scored), and with the registry's host terms for comparison; a chip without held-out
 *    files says so plainly;
 * 6. stage `fits/<chip>/report.md` and `report.html`, then commit registry, fit report and accuracy
 *    report as ONE set (src/core/io/staging.ts): a crash leaves the old set or the new one.
 * The whole job holds the checkout lock (`.stepcal.lock`), and first finishes or removes what a killed
 * run left behind.
 * Then a one-screen summary on stdout (or JSON with --json); progress on stderr.
 */
import { rmSync } from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { flagParser } from '../../core/flags.ts';
import { loadChip, REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { writeFileAtomic, writeFilesAtomic } from '../../core/io/fs.ts';
import { displayPath } from '../../core/io/paths.ts';
import { tempNameFor, withOutputLock } from '../../core/io/staging.ts';
import { note } from '../../core/io/progress.ts';
import { fitAll } from '../../fit/index.ts';
import { checkMeasurements } from '../../measurements/check.ts';
import {
  calibrateSection,
  calibrateSummaryLines,
  calibrateWarnings,
  type CalibrateOutcome,
} from '../../report/calibrate-summary.ts';
import { coefficientSummaries, fitOutputFiles, outputPaths, renderFitReport } from '../../report/fit.ts';
import { reportFiles } from '../../report/write.ts';
import { parseHostRule } from '../../validate/hostfit.ts';
import { ENGINE_SM_MODES, type EngineSmMode } from '../../validate/types.ts';
import { type CalibrateHeldOut, calibrateHeldOut, DEFAULT_CALIBRATE_FIT_HOST } from '../../validate/calibrate.ts';

interface CalibrateOpts {
  chip: string;
  json?: boolean;
  report?: boolean;
  fitHost: string;
  engineSm: string;
  resamples: number;
}

/** DECISION (docs/validation.md): calibrate fits host terms per engine on every 4th row per group by default. */
export { DEFAULT_CALIBRATE_FIT_HOST };

export function register(program: Command): void {
  program
    .command('calibrate')
    .description(
      'The main job: check measurements, fit every family, gate, write registry/<chip>.yaml, validate on held-out steps, write the report',
    )
    .option('--chip <name>', 'chip with measurements under measurements/<chip>/', 'h200')
    .option('--json', 'print the outcome as JSON instead of the summary')
    .option('--no-report', 'do not write fits/<chip>/report.{md,html}')
    .option(
      '--fit-host <rule>',
      'per-engine host fit on a declared training subset (batch=1 | fraction=F); rows used are not scored',
      DEFAULT_CALIBRATE_FIT_HOST,
    )
    .addOption(
      new Option(
        '--engine-sm <mode>',
        'engine compute-efficiency term s on the priced SM time (NoOverlap and CMOverlap), fitted with the host terms: auto = held-out evidence picks (docs/validation.md), on, off',
      )
        .choices([...ENGINE_SM_MODES])
        .default('auto'),
    )
    .addOption(
      new Option('--resamples <n>', 'bootstrap resamples (≥ 200)')
        .argParser(flagParser('--resamples', { integer: true, min: 200 }))
        .default(200),
    )
    .action(async (opts: CalibrateOpts) => {
      const chip = loadChip(opts.chip).name;
      parseHostRule(opts.fitHost); // fail fast on a bad rule
      const paths = outputPaths(chip);
      const dir = path.join(REPO_ROOT, 'measurements', chip);
      await withOutputLock(
        REPO_ROOT,
        `calibrate --chip ${chip}`,
        [path.dirname(paths.registry), paths.fitsDir, dir],
        () => calibrate(chip, dir, opts),
      );
    });
}

/** Calibrate's held-out step (src/validate/calibrate.ts) on the staged registry text: a private temp file beside the target, removed after. */
function validateStaged(
  chip: string,
  registryFile: string,
  registryText: string,
  opts: CalibrateOpts,
): CalibrateHeldOut {
  const tmp = tempNameFor(registryFile);
  writeFileAtomic(tmp, registryText);
  try {
    return calibrateHeldOut(chip, tmp, opts.fitHost, opts.engineSm as EngineSmMode);
  } finally {
    rmSync(tmp, { force: true });
  }
}

async function calibrate(chip: string, dir: string, opts: CalibrateOpts): Promise<void> {
  const resamples = opts.resamples;

  note(`calibrate ${chip}: 1/6 checking measurements in ${displayPath(dir)} ...`);
  const checks = checkMeasurements(dir);
  const bad = checks.filter((c) => c.status !== 'ok');
  if (bad.length)
    throw new UserError(`measurement check failed:\n  ${bad.map((b) => `${b.file}: ${b.status}`).join('\n  ')}`);

  note(`calibrate ${chip}: 2/6 fitting every family ...`);
  const result = await fitAll(chip, {
    bootstrap: { resamples, seed: 20261129 },
    onFamily: (f, phase, ms) =>
      note(phase === 'start' ? `  fit ${f} ...` : `  fit ${f} done in ${((ms ?? 0) / 1000).toFixed(1)} s`),
  });

  note(`calibrate ${chip}: 3/6 registry gates ...`);
  if (result.refusals.length) {
    throw new UserError(
      `calibrate ${chip}: ${result.refusals.length} refusal(s) or gate failure(s); nothing written:\n  ${result.refusals.join('\n  ')}`,
    );
  }

  note(`calibrate ${chip}: 4/6 staging the registry ...`);
  const paths = outputPaths(chip);
  const fitReport = renderFitReport(result);
  const outputs: Array<{ file: string; data: string }> = fitOutputFiles(result, {}, fitReport);

  note(`calibrate ${chip}: 5/6 validating on held-out steps ...`);
  const {
    validation,
    registryHost,
    note: validation_note,
  } = validateStaged(chip, paths.registry, result.registry_text, opts);

  const outcome: CalibrateOutcome = {
    chip,
    checks,
    sets: result.sets,
    fit_refusals: result.refusals,
    fit_warnings: result.warnings,
    registry_file: displayPath(paths.registry),
    validation,
    validation_registry_host: registryHost,
    ...(validation_note ? { validation_note } : {}),
    report_files: [],
  };
  if (opts.report !== false) {
    const report = reportFiles(
      paths.fitsDir,
      chip,
      validation,
      {
        before: [calibrateSection({ ...outcome, report_files: [] })],
        ...(validation_note ? { noValidation: validation_note } : {}),
      },
      fitReport.figures,
    );
    outputs.push(...report);
    outcome.report_files = report
      .map((f) => f.file)
      .filter((f) => /report\.(md|html)$/.test(f))
      .map(displayPath);
  }
  note(
    `calibrate ${chip}: 6/6 writing registry, fit report${opts.report !== false ? ' and accuracy report' : ''} as one set (${outputs.length} files) ...`,
  );
  writeFilesAtomic(outputs);
  // Warnings once each, on stderr (the summary on stdout only counts them; the report lists them).
  for (const w of calibrateWarnings(outcome)) process.stderr.write(`stepcal: warning: ${w}\n`);
  if (opts.json) {
    process.stdout.write(
      `${JSON.stringify(
        {
          chip,
          checks,
          registry_file: outcome.registry_file,
          coefficients: coefficientSummaries(result.sets, { method: true }),
          warnings: calibrateWarnings(outcome),
          held_out: validation
            ? {
                headline: validation.headline,
                headline_reason: validation.headline_reason,
                regimes: validation.regimes,
                regimes_by_composition: validation.regimes_by_composition,
                overall: validation.overall,
                host_fit: validation.host_fit?.fits,
                engine_sm: validation.engine_sm
                  ? {
                      used: validation.engine_sm.used,
                      reason: validation.engine_sm.reason,
                      scales: validation.engine_sm.scales,
                      without: validation.engine_sm.without,
                      with: validation.engine_sm.with,
                    }
                  : null,
                engine_sm_cm_overlap: validation.engine_sm_cm_overlap
                  ? {
                      used: validation.engine_sm_cm_overlap.used,
                      reason: validation.engine_sm_cm_overlap.reason,
                      scales: validation.engine_sm_cm_overlap.scales,
                      without: validation.engine_sm_cm_overlap.without,
                      with: validation.engine_sm_cm_overlap.with,
                    }
                  : null,
                extrapolation: validation.extrapolation ?? [],
                pinned: validation.pinned,
              }
            : null,
          held_out_registry_host: registryHost
            ? { regimes: registryHost.regimes, overall: registryHost.overall }
            : null,
          validation_note: validation_note ?? null,
          report_files: outcome.report_files,
        },
        null,
        1,
      )}\n`,
    );
  } else {
    process.stdout.write(`${calibrateSummaryLines(outcome).join('\n')}\n`);
  }
  if (validation_note?.startsWith('validation failed')) throw new UserError(validation_note);
}
