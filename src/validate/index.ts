/**
 * Held-out validation of the composed step pricer (issue 7). Public entry: `runValidation`.
 * Types and metric conventions: ./types.ts.
 */
export * from './types.ts';
import { UserError } from '../common/errors.ts';
import type { ValidationOptions, ValidationResult } from './types.ts';

/**
 * Price every row of the given `*.steps.csv` files with NoOverlap and Overlap, and score them.
 * @throws UserError / InputError on bad inputs (file, row, column named).
 */
export function runValidation(_opts: ValidationOptions): ValidationResult {
  throw new UserError('runValidation is being built (issue 7)');
}
