/**
 * Held-out validation of the composed step pricer (issue 7). Public entry: `runValidation`.
 * Types and metric conventions: ./types.ts; mapping of rows to batches: ./expand.ts and
 * docs/validation.md.
 */
export * from './types.ts';
export type { ValidationDeps } from './run.ts';
import { sha256, sha256File } from '../core/io/fs.ts';
import { displayPath } from '../core/io/paths.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import { stepcalVersion } from './pin.ts';
import { defaultValidationDeps } from './pricing.ts';
import { validateRows, type ValidationDeps } from './run.ts';
import { readStepsFile, type LocatedStepRow } from './steps.ts';
import type { ValidationOptions, ValidationResult } from './types.ts';

/**
 * Price every row of the given `*.steps.csv` files with NoOverlap and Overlap and score them on
 * `opts.chip` (rows of other chips are skipped with a warning).
 * @param deps pricer factory; default: the real pricer built from `opts.registry` (src/validate/pricing.ts).
 * @throws UserError / InputError on bad inputs (file, row, column named), or when no row is left.
 */
export function runValidation(opts: ValidationOptions, deps?: ValidationDeps): ValidationResult {
  const rows: LocatedStepRow[] = [];
  const warnings: string[] = [];
  const inputs: Array<{ file: string; sha256: string }> = [];
  for (const f of opts.stepFiles) {
    const r = readStepsFile(f);
    for (const row of r.rows) rows.push({ ...row, file: displayPath(f) });
    warnings.push(...r.warnings);
    inputs.push({ file: displayPath(f), sha256: sha256File(f) });
  }
  const core = validateRows(rows, opts, deps ?? defaultValidationDeps(opts.registry));
  const flags = opts.flags ?? [
    `--chip ${opts.chip}`,
    ...(opts.fitHost ? [`--fit-host ${opts.fitHost}`] : []),
    ...(opts.composition ? [`--composition ${opts.composition}`] : []),
  ];
  return {
    ...core,
    warnings: [...warnings, ...core.warnings],
    pinned: {
      registry_sha256: opts.registryFile
        ? sha256File(opts.registryFile)
        : sha256(stringifyCoefficientSets(opts.registry)),
      stepcal_version: stepcalVersion(),
      flags,
      inputs,
    },
  };
}
