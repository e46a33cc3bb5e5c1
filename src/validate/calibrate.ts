/**
 * The held-out half of `stepcal calibrate` and `stepcal validate` as library calls: the default
 * step files of a chip, a validation with a progress bar on stderr, and calibrate's pair of
 * validations (per-engine host fit, and the registry's host terms for comparison). The CLI commands
 * only parse flags, write files and print (src/cli/commands/calibrate.ts, validate.ts).
 */
import path from 'node:path';
import { REPO_ROOT } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { progress } from '../core/io/progress.ts';
import { listStepFiles } from '../measurements/store.ts';
import { loadRegistryFile } from '../registry/load.ts';
import { loadUsableRegistry } from '../registry/validate.ts';
import type { HostWeighting } from './hostfit.ts';
import { runValidation } from './index.ts';
import { defaultValidationDeps, multiChipValidationDeps } from './pricing.ts';
import { existsSync, readdirSync } from 'node:fs';
import { displayPath } from '../core/io/paths.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { loadEngineProfile } from '../registry/engine.ts';
import { readStepsFile, type LocatedStepRow } from './steps.ts';
import type { Composition, EngineSmMode, TierOptions, ValidationResult } from './types.ts';

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

/** What one validation run needs: chip, registry file, step files, the host-fit choices and the flags recorded in the pins. */
export interface ValidationRun {
  chip: string;
  registryFile: string;
  stepFiles: string[];
  fitHost?: string;
  engineSm?: EngineSmMode;
  hostWeighting?: HostWeighting;
  composition?: Composition;
  scoreFlagged?: boolean;
  flags: string[];
  /** Compute the validation tiers (other chips' shipped step files and registries train tier (c)). */
  tiers?: boolean;
  /** A stored engine profile name (registry/engines/<name>.yaml), scored as tier (e). */
  engine?: string;
  /** The tiers' CMOverlap s per chip of each fold's training rows (TierOptions.chip_scales). */
  chipScales?: boolean;
}

/**
 * Rows of every other chip that ships step timings and a registry (tier (c) trains on them), and
 * those chips' registry sets by chip.
 */
function otherChipRows(chip: string): { rows: LocatedStepRow[]; registries: Record<string, CoefficientSet[]> } {
  const rows: LocatedStepRow[] = [];
  const registries: Record<string, CoefficientSet[]> = {};
  const dir = path.join(REPO_ROOT, 'measurements');
  for (const c of readdirSync(dir).sort()) {
    const reg = path.join(REPO_ROOT, 'registry', `${c}.yaml`);
    if (c === chip || !existsSync(reg)) continue;
    const files = defaultStepFiles(c);
    if (!files.length) continue;
    registries[c] = loadRegistryFile(reg);
    for (const f of files)
      rows.push(
        ...readStepsFile(f)
          .rows.filter((r) => r.chip === c)
          .map((r) => ({ ...r, file: displayPath(f) })),
      );
  }
  return { rows, registries };
}

/**
 * Run a validation with the real pricer built from `args.registryFile`, with a progress bar over the
 * priced rows on stderr (src/core/io/progress.ts decides whether it is drawn).
 * @throws UserError / InputError as runValidation
 */
export function validateWithProgress(args: ValidationRun): ValidationResult {
  const registry = loadUsableRegistry(args.registryFile, args.chip);
  const other = args.tiers ? otherChipRows(args.chip) : { rows: [], registries: {} };
  const deps = args.tiers
    ? multiChipValidationDeps({ ...other.registries, [args.chip]: registry })
    : defaultValidationDeps(registry);
  const tiers: TierOptions | undefined = args.tiers
    ? {
        ...(args.fitHost?.startsWith('fraction=') ? { fraction: args.fitHost } : {}),
        ...(args.hostWeighting ? { weighting: args.hostWeighting } : {}),
        ...(other.rows.length ? { otherRows: other.rows } : {}),
        ...(args.engine ? { profile: loadEngineProfile(args.engine) } : {}),
        ...(args.chipScales ? { chip_scales: true } : {}),
      }
    : undefined;
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
      ...(tiers ? { tiers } : {}),
      flags: args.flags,
    },
    deps,
  );
}

/** Calibrate's held-out outcome: both validations, or the note that says why there is none. */
export interface CalibrateHeldOut {
  validation: ValidationResult | null;
  registryHost: ValidationResult | null;
  /** set when there is no validation: no step files, or `validation failed: <message>` */
  note?: string;
}

/**
 * Step 5 of calibrate: validate `registryFile` on the chip's held-out step files twice, with the
 * per-engine host fit (`fitHost`, `engineSm`) and with the registry's host terms. A chip without step
 * files, or a validation that fails with a UserError, gives a note instead of throwing.
 */
export function calibrateHeldOut(
  chip: string,
  registryFile: string,
  fitHost: string,
  engineSm: EngineSmMode,
): CalibrateHeldOut {
  const stepFiles = defaultStepFiles(chip);
  if (!stepFiles.length) {
    const note =
      `no held-out step timings for ${chip} (no measurements/${chip}/*.steps.csv), so held-out accuracy is not measured on this chip. ` +
      `Splitwise step timings exist for h100 and a100: run \`stepcal calibrate --chip h100\` or \`--chip a100\`.`;
    return { validation: null, registryHost: null, note };
  }
  const base = { chip, registryFile, stepFiles };
  try {
    const validation = validateWithProgress({
      ...base,
      fitHost,
      engineSm,
      tiers: true,
      flags: [`calibrate --chip ${chip}`, `--fit-host ${fitHost}`, `--engine-sm ${engineSm}`],
    });
    const registryHost = validateWithProgress({
      ...base,
      flags: [`calibrate --chip ${chip}`, '(registry host terms)'],
    });
    return { validation, registryHost };
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    return { validation: null, registryHost: null, note: `validation failed: ${err.message}` };
  }
}
