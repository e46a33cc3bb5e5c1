/**
 * `stepcal fit all --check` as a test (issue 5, reproducibility): refit a chip from its curated
 * measurements through the library and compare with the committed registry and fit report, byte for
 * byte. The refit is the run's one shared refit of the chip (test/helpers/refit.ts: computed once,
 * content-addressed by every input and source, reused by test/onboard).
 * A fitter changed without regenerating the outputs fails here, naming the drifted entries.
 *
 * Which chips: those with curated per-operator measurements (`measurements/<chip>/*.csv.gz`), not
 * those with a registry. b300 ships a registry copied from b200 (`method: copied`,
 * `stepcal registry copy`) and has nothing to refit; test/registry/copy.test.ts checks that its
 * files regenerate instead. Onboarded chips (`fits/<chip>/onboard.md`: rtx-pro-6000) are refit the
 * way `stepcal onboard` wrote them: entries refused by a non-required gate are left out (issue 15). A measured chip whose registry is missing fails (it is not skipped).
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { driftOfFiles } from '../../src/cli/fit-outputs.ts';
import { sharedRefit } from '../helpers/refit.ts';

/** The two halves checked by check.test.ts and check-hopper.test.ts (two workers share the fitting). */
export const CHECK_SPLIT = {
  main: ['a100', 'l40s', 'b200'],
  hopper: ['h100', 'h200'],
  onboarded: ['gb200', 'rtx-pro-6000'],
} as const;

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
    it.skipIf(!measured.has(chip))(
      `fit all --check ${chip}: committed registry and fits reproduce`,
      async () => {
        expect(
          existsSync(path.join(REPO_ROOT, 'registry', `${chip}.yaml`)),
          `${chip} is measured but registry/${chip}.yaml is missing`,
        ).toBe(true);
        const refit = await sharedRefit(chip);
        const files = refit.files.map((f) => ({ file: path.join(REPO_ROOT, f.file), data: f.data }));
        expect(files.map((f) => f.file)).toContain(path.join(REPO_ROOT, 'fits', chip, 'README.md'));
        const drift = driftOfFiles(files, refit.sets);
        expect(
          drift,
          `${chip} drifted (regenerate with \`stepcal fit all --chip ${chip}\`):\n  ${drift.join('\n  ')}`,
        ).toEqual([]);
      },
      REFIT_TIMEOUT_MS,
    );
  }
}

/** A cold refit of the largest chip is ~30 s of CPU; on a loaded 2-core machine its wall time is several times that. */
const REFIT_TIMEOUT_MS = 900_000;
