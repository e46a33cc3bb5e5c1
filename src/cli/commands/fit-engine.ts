/**
 * `stepcal fit engine --engine <name> --steps <files...> [--out <file>] [--check] [--json]` (issue 16):
 * fit an engine profile (host terms and s, ci95, holdout) on step timings priced with each row's chip
 * registry (`registry/<chip>.yaml`), gate it and write `registry/engines/<name>.yaml` atomically.
 * Core: src/validate/engine-profile.ts; gates: src/registry/engine.ts.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { UsageError, UserError } from '../../core/errors.ts';
import { readText, sha256File, writeFileAtomic } from '../../core/io/fs.ts';
import { displayPath } from '../../core/io/paths.ts';
import { note } from '../../core/io/progress.ts';
import { lockRootFor, withOutputLockSync } from '../../core/io/staging.ts';
import { stringifyEngineProfile, type EngineProfile } from '../../core/schemas/engine.ts';
import { readStepsFile } from '../../measurements/store.ts';
import { engineProfileGates, engineProfilePath } from '../../registry/engine.ts';
import { loadUsableRegistry } from '../../registry/validate.ts';
import { fitEngineProfile } from '../../validate/engine-profile.ts';
import { stepcalVersion } from '../../validate/pin.ts';
import { multiChipValidationDeps } from '../../validate/pricing.ts';
import type { LocatedStepRow } from '../../validate/steps.ts';
import { COMPOSITION_NAME } from '../../validate/types.ts';

export interface FitEngineOpts {
  engine?: string;
  steps?: string[];
  out?: string;
  check?: boolean;
  json?: boolean;
  /** `pooled` (default) or `per-chip`. */
  engineS?: string;
}

/**
 * `--engine-s`: true for `per-chip`, false for `pooled` or absent.
 * @throws UsageError for another value
 */
export function engineSPerChip(mode: string | undefined): boolean {
  if (mode === undefined || mode === 'pooled') return false;
  if (mode === 'per-chip') return true;
  throw new UsageError(`--engine-s: expected pooled or per-chip, got "${mode}"`);
}

/** Read the step files and each chip's registry; fit, gate, print and write (or --check) the profile. */
export function runFitEngine(o: FitEngineOpts): void {
  if (!o.engine) throw new UserError('fit engine: give --engine <name>');
  if (!o.steps?.length) throw new UserError('fit engine: give --steps <files...> (*.steps.csv)');
  const chip_scales = engineSPerChip(o.engineS);
  const out = o.out ?? engineProfilePath(o.engine);
  const rows: LocatedStepRow[] = [];
  const steps: EngineProfile['provenance']['steps'] = [];
  for (const f of o.steps) {
    const r = readStepsFile(f);
    for (const w of r.warnings) note(w);
    rows.push(...r.rows.map((row) => ({ ...row, file: displayPath(f) })));
    steps.push({ file: displayPath(f), sha256: sha256File(f), rows: r.rows.length });
  }
  const mine = rows.filter((r) => r.engine === o.engine);
  const chips = [...new Set(mine.map((r) => r.chip))].sort();
  const byChip: Record<string, ReturnType<typeof loadUsableRegistry>> = {};
  const registries: EngineProfile['provenance']['registries'] = [];
  for (const chip of chips) {
    const file = path.join(REPO_ROOT, 'registry', `${chip}.yaml`);
    if (!existsSync(file))
      throw new UserError(`no registry/${chip}.yaml for the ${chip} rows; run \`stepcal fit all --chip ${chip}\``);
    byChip[chip] = loadUsableRegistry(file, chip);
    registries.push({ chip, file: displayPath(file), sha256: sha256File(file) });
  }
  // With no row of the engine, fitEngineProfile's error (which names the engines found) is the only line.
  if (mine.length) note(`fit engine ${o.engine}: pricing ${mine.length} rows on ${chips.join(', ')} ...`);
  const profile = fitEngineProfile(
    rows,
    { engine: o.engine, chip_scales, provenance: { stepcal_version: stepcalVersion(), steps, registries } },
    multiChipValidationDeps(byChip),
  );
  const text = stringifyEngineProfile(profile);
  process.stdout.write(o.json ? `${JSON.stringify(profile, null, 2)}\n` : summary(profile));
  const failed = engineProfileGates(profile);
  if (failed.length)
    throw new UserError(`fit engine ${o.engine}: gate failed; nothing written:\n  ${failed.join('\n  ')}`);
  if (o.check) {
    if (!existsSync(out) || readText(out) !== text)
      throw new UserError(`fit engine --check: ${displayPath(out)} would change`);
    note(`fit engine --check ${o.engine}: clean`);
    return;
  }
  withOutputLockSync(lockRootFor([out], REPO_ROOT), `fit engine --engine ${o.engine}`, [path.dirname(out)], () =>
    writeFileAtomic(out, text),
  );
  note(`fit engine ${o.engine}: wrote ${displayPath(out)}`);
}

/** One screen: composition, terms with ci95, s, and the holdout per regime. */
function summary(p: EngineProfile): string {
  const lines = [
    `engine profile ${p.name} (${COMPOSITION_NAME[p.composition]}, chosen on ${p.fit.n_train} training rows: ${Object.entries(
      p.fit.training_objective_rel_pct,
    )
      .map(([c, v]) => `${c} ${v.toFixed(2)}%`)
      .join(', ')} relative RMS)`,
  ];
  for (const [name, t] of Object.entries(p.terms)) {
    // µs terms to 0.1 µs; the dimensionless large-step factor (× priced NVLink µs) to 0.01
    const [d, unit] = name.endsWith('_us') ? [1, 'µs'] : [2, '× '];
    lines.push(
      `  ${name.padEnd(24)} ${t.value.toFixed(d).padStart(9)} ${unit}  ci95 [${t.ci95.map((x) => x.toFixed(d)).join(', ')}]${t.identified ? '' : '  (not identified)'}`,
    );
  }
  if (p.large_step_message_bytes !== undefined)
    lines.push(
      `  ${'large_step_message_bytes'.padEnd(24)} ${String(p.large_step_message_bytes).padStart(9)}     (bytes of a step's collective message)`,
    );
  lines.push(
    `  ${'sm_scale s'.padEnd(24)} ${p.sm_scale.value.toFixed(3).padStart(9)}     ci95 [${p.sm_scale.ci95.map((x) => x.toFixed(3)).join(', ')}]`,
  );
  for (const [chip, t] of Object.entries(p.sm_scale_by_chip ?? {}))
    lines.push(
      `  ${`sm_scale s, ${chip}`.padEnd(24)} ${t.value.toFixed(3).padStart(9)}     ci95 [${t.ci95.map((x) => x.toFixed(3)).join(', ')}]`,
    );
  lines.push(`holdout (${p.fit.holdout.rule}, ${p.fit.holdout.n} rows): median / p90 APE, bias`);
  for (const [g, m] of Object.entries(p.fit.holdout.regimes))
    lines.push(
      `  ${g.padEnd(13)} n ${String(m.n).padStart(3)}  ${m.median_ape_pct.toFixed(1)} / ${m.p90_ape_pct.toFixed(1)} %, ${m.bias_pct.toFixed(1)} %`,
    );
  return `${lines.join('\n')}\n`;
}
