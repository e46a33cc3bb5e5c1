/**
 * The real pricer behind validation (edge module: loads chip and model files).
 * Placeholder until the pricer (src/pricer) lands: it refuses clearly rather than pretending.
 */
import { UserError } from '../common/errors.ts';
import type { CoefficientSet } from '../registry/types.ts';
import type { ValidationDeps } from './run.ts';

export function defaultValidationDeps(_registry: CoefficientSet[]): ValidationDeps {
  return {
    pricerFor() {
      throw new UserError('the step pricer is not built yet');
    },
  };
}
