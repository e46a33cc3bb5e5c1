/**
 * `stepcal fit all --check` as a test (issue 5, reproducibility): refit a shipped chip from its
 * curated measurements through the library and compare with the committed registry and fit report.
 * A fitter changed without regenerating the outputs fails here, naming the drifted entries.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/catalog/chip.ts';
import { checkFitOutputs, fitAll } from '../../src/fit/index.ts';

/** A chip ships when its registry is in the repository. */
export function shipped(chip: string): boolean {
  return existsSync(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
}

/** One `it` per chip: fit all, then expect no drift (the message lists every drifted entry). */
export function checkChips(chips: readonly string[]): void {
  for (const chip of chips) {
    it.skipIf(!shipped(chip))(`fit all --check ${chip}: committed registry and fits reproduce`, async () => {
      const result = await fitAll(chip);
      const drift = checkFitOutputs(result);
      expect(drift, `${chip} drifted (regenerate with \`stepcal fit all --chip ${chip}\`):\n  ${drift.join('\n  ')}`).toEqual([]);
    });
  }
}
