/**
 * `stepcal fit all --check` as a test (issue 5, reproducibility): refit a chip from its curated
 * measurements through the library and compare with the committed registry and fit report.
 * A fitter changed without regenerating the outputs fails here, naming the drifted entries.
 *
 * Which chips: those with curated per-operator measurements (`measurements/<chip>/*.csv.gz`), not
 * those with a registry. b300 and gb200 ship registries copied from b200 (`method: copied`,
 * `stepcal registry copy`) and have nothing to refit; test/registry/copy.test.ts checks that their
 * files regenerate instead. A measured chip whose registry is missing fails (it is not skipped).
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { checkFitOutputs } from '../../src/cli/fit-outputs.ts';
import { fitAll } from '../../src/fit/index.ts';

/** The two halves checked by check.test.ts and check-hopper.test.ts (two workers share the fitting). */
export const CHECK_SPLIT = { main: ['a100', 'l40s', 'b200'], hopper: ['h100', 'h200'] } as const;

/** Chips with curated per-operator measurements (what `fit all` refits), sorted. */
export function measuredChips(root = REPO_ROOT): string[] {
  const dir = path.join(root, 'measurements');
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && readdirSync(path.join(dir, d.name)).some((f) => f.endsWith('.csv.gz')))
    .map((d) => d.name)
    .sort();
}

/** One `it` per chip: fit all, then expect no drift (the message lists every drifted entry). */
export function checkChips(chips: readonly string[]): void {
  const measured = new Set(measuredChips());
  for (const chip of chips) {
    it.skipIf(!measured.has(chip))(`fit all --check ${chip}: committed registry and fits reproduce`, async () => {
      expect(
        existsSync(path.join(REPO_ROOT, 'registry', `${chip}.yaml`)),
        `${chip} is measured but registry/${chip}.yaml is missing`,
      ).toBe(true);
      const result = await fitAll(chip);
      const drift = checkFitOutputs(result);
      expect(
        drift,
        `${chip} drifted (regenerate with \`stepcal fit all --chip ${chip}\`):\n  ${drift.join('\n  ')}`,
      ).toEqual([]);
    });
  }
}
