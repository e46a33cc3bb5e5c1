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
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Option, type Command } from 'commander';
import { flagParser } from '../../core/flags.ts';
import { loadChip, REPO_ROOT } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { sha256File, writeFileAtomic, writeFilesAtomic } from '../../core/io/fs.ts';
import { tempNameFor, withOutputLock } from '../../core/io/staging.ts';
import { note } from '../../core/io/progress.ts';
import { fitAll } from '../../fit/index.ts';
import { listMeasurementFiles, listStepFiles, provenancePath, readProvenance } from '../../measurements/store.ts';
import { calibrateSection, calibrateSummaryLines, calibrateWarnings, type CalibrateOutcome, type MeasurementCheck } from '../../report/calibrate-summary.ts';
import { fitOutputFiles, outputPaths, renderFitReport } from '../../report/fit.ts';
import { reportFiles } from '../../report/write.ts';
import { displayPath } from '../../validate/index.ts';
import { parseHostRule } from '../../validate/hostfit.ts';
import { readStepsFile } from '../../validate/steps.ts';
import { ENGINE_SM_MODES, type EngineSmMode, type ValidationResult } from '../../validate/types.ts';
import { DEFAULT_CALIBRATE_FIT_HOST, validateWithProgress } from './validate.ts';

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

/**
 * Step 1: check every stored file of a chip. Per-operator files: sha256 against the provenance's
 * output_sha256, row count from the provenance. Step files: parsed (format errors stop the job).
 * @throws UserError when the chip has no measurements.
 */
export function checkMeasurements(dir: string): MeasurementCheck[] {
  const out: MeasurementCheck[] = [];
  const files = listMeasurementFiles(dir);
  if (!files.length) throw new UserError(`no measurements in ${displayPath(dir)} (import some with \`stepcal import\`)`);
  for (const f of files) {
    if (!existsSync(provenancePath(f.file))) {
      out.push({ file: displayPath(f.file), family: f.family, lane: f.lane, rows: 0, status: 'no provenance file' });
      continue;
    }
    const prov = readProvenance(f.file);
    const ok = prov.output_sha256 === sha256File(f.file);
    out.push({ file: displayPath(f.file), family: f.family, lane: f.lane, rows: prov.rows_out, status: ok ? 'ok' : 'sha256 differs from provenance output_sha256' });
  }
  for (const f of listStepFiles(dir)) {
    const { rows } = readStepsFile(f);
    const lane = path.basename(f).replace(/\.steps\.csv(\.gz)?$/, '');
    let status = 'ok';
    if (existsSync(provenancePath(f))) {
      const prov = readProvenance(f);
      if (prov.output_sha256 && prov.output_sha256 !== sha256File(f)) status = 'sha256 differs from provenance output_sha256';
    }
    out.push({ file: displayPath(f), family: 'step (held-out)', lane, rows: rows.length, status });
  }
  return out;
}

export function register(program: Command): void {
  program
    .command('calibrate')
    .description('The main job: check measurements, fit every family, gate, write registry/<chip>.yaml, validate on held-out steps, write the report')
    .option('--chip <name>', 'chip with measurements under measurements/<chip>/', 'h200')
    .option('--json', 'print the outcome as JSON instead of the summary')
    .option('--no-report', 'do not write fits/<chip>/report.{md,html}')
    .option('--fit-host <rule>', 'per-engine host fit on a declared training subset (batch=1 | fraction=F); rows used are not scored', DEFAULT_CALIBRATE_FIT_HOST)
    .addOption(
      new Option('--engine-sm <mode>', 'engine compute-efficiency term s on the priced SM time (NoOverlap and CMOverlap), fitted with the host terms: auto = held-out evidence picks (docs/validation.md), on, off')
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
      await withOutputLock(REPO_ROOT, `calibrate --chip ${chip}`, [path.dirname(paths.registry), paths.fitsDir, dir], () => calibrate(chip, dir, opts));
    });
}

/** Validate with the staged registry text (a private temp file beside the target, removed after). */
function validateStaged(chip: string, registryFile: string, registryText: string, stepFiles: string[], opts: CalibrateOpts) {
  const tmp = tempNameFor(registryFile);
  writeFileAtomic(tmp, registryText);
  try {
    const base = { chip, registryFile: tmp, stepFiles };
    const validation = validateWithProgress({
      ...base,
      fitHost: opts.fitHost,
      engineSm: opts.engineSm as EngineSmMode,
      flags: [`calibrate --chip ${chip}`, `--fit-host ${opts.fitHost}`, `--engine-sm ${opts.engineSm}`],
    });
    const registryHost = validateWithProgress({ ...base, flags: [`calibrate --chip ${chip}`, '(registry host terms)'] });
    return { validation, registryHost };
  } finally {
    rmSync(tmp, { force: true });
  }
}

async function calibrate(chip: string, dir: string, opts: CalibrateOpts): Promise<void> {
  const resamples = opts.resamples;

  note(`calibrate ${chip}: 1/6 checking measurements in ${displayPath(dir)} ...`);
  const checks = checkMeasurements(dir);
  const bad = checks.filter((c) => c.status !== 'ok');
  if (bad.length) throw new UserError(`measurement check failed:\n  ${bad.map((b) => `${b.file}: ${b.status}`).join('\n  ')}`);

  note(`calibrate ${chip}: 2/6 fitting every family ...`);
  const result = await fitAll(chip, {
    bootstrap: { resamples, seed: 20261129 },
    onFamily: (f, phase, ms) => note(phase === 'start' ? `  fit ${f} ...` : `  fit ${f} done in ${((ms ?? 0) / 1000).toFixed(1)} s`),
  });

  note(`calibrate ${chip}: 3/6 registry gates ...`);
  if (result.refusals.length) {
    throw new UserError(`calibrate ${chip}: ${result.refusals.length} refusal(s) or gate failure(s); nothing written:\n  ${result.refusals.join('\n  ')}`);
  }

  note(`calibrate ${chip}: 4/6 staging the registry ...`);
  const paths = outputPaths(chip);
  const fitReport = renderFitReport(result);
  const outputs: Array<{ file: string; data: string }> = fitOutputFiles(result, {}, fitReport);

  note(`calibrate ${chip}: 5/6 validating on held-out steps ...`);
  const stepFiles = listStepFiles(dir);
  let validation: ValidationResult | null = null;
  let registryHost: ValidationResult | null = null;
  let validation_note: string | undefined;
  if (!stepFiles.length) {
    validation_note =
      `no held-out step timings for ${chip} (no measurements/${chip}/*.steps.csv), so held-out accuracy is not measured on this chip. ` +
      `Splitwise step timings exist for h100 and a100: run \`stepcal calibrate --chip h100\` or \`--chip a100\`.`;
  } else {
    try {
      ({ validation, registryHost } = validateStaged(chip, paths.registry, result.registry_text, stepFiles, opts));
    } catch (err) {
      if (!(err instanceof UserError)) throw err;
      validation_note = `validation failed: ${err.message}`;
    }
  }

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
    const report = reportFiles(paths.fitsDir, chip, validation, {
      before: [calibrateSection({ ...outcome, report_files: [] })],
      ...(validation_note ? { noValidation: validation_note } : {}),
    }, fitReport.figures);
    outputs.push(...report);
    outcome.report_files = report.map((f) => f.file).filter((f) => /report\.(md|html)$/.test(f)).map(displayPath);
  }
  note(`calibrate ${chip}: 6/6 writing registry, fit report${opts.report !== false ? ' and accuracy report' : ''} as one set (${outputs.length} files) ...`);
  writeFilesAtomic(outputs);
  // Warnings once each, on stderr (the summary on stdout only counts them; the report lists them).
  for (const w of calibrateWarnings(outcome)) process.stderr.write(`stepcal: warning: ${w}\n`);
  if (opts.json) {
    process.stdout.write(
      JSON.stringify(
        {
          chip,
          checks,
          registry_file: outcome.registry_file,
          coefficients: result.sets.flatMap((s) => s.coefficients.map((c) => ({ set: s.name, name: c.name, value: c.entry.value, units: c.entry.units, ci95: c.entry.ci95, method: c.entry.method, train_error: c.entry.evidence?.train_error, holdout_error: c.entry.evidence?.holdout_error }))),
          warnings: calibrateWarnings(outcome),
          held_out: validation
            ? { headline: validation.headline, headline_reason: validation.headline_reason, regimes: validation.regimes, regimes_by_composition: validation.regimes_by_composition, overall: validation.overall, host_fit: validation.host_fit?.fits, engine_sm: validation.engine_sm ? { used: validation.engine_sm.used, reason: validation.engine_sm.reason, scales: validation.engine_sm.scales, without: validation.engine_sm.without, with: validation.engine_sm.with } : null, engine_sm_cm_overlap: validation.engine_sm_cm_overlap ? { used: validation.engine_sm_cm_overlap.used, reason: validation.engine_sm_cm_overlap.reason, scales: validation.engine_sm_cm_overlap.scales, without: validation.engine_sm_cm_overlap.without, with: validation.engine_sm_cm_overlap.with } : null, extrapolation: validation.extrapolation ?? [], pinned: validation.pinned }
            : null,
          held_out_registry_host: registryHost ? { regimes: registryHost.regimes, overall: registryHost.overall } : null,
          validation_note: validation_note ?? null,
          report_files: outcome.report_files,
        },
        null,
        1,
      ) + '\n',
    );
  } else {
    process.stdout.write(calibrateSummaryLines(outcome).join('\n') + '\n');
  }
  if (validation_note?.startsWith('validation failed')) throw new UserError(validation_note);
}
