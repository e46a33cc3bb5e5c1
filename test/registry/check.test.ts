import { describe, expect, it } from 'vitest';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { CHECK_SPLIT, checkChips, measuredChips } from './check-shared.ts';

// Split over two files (see check-hopper.test.ts) so two workers share the ~1.5 min of fitting.
describe('reproducibility: fit all --check (a100, l40s, b200)', () => checkChips(CHECK_SPLIT.main));

describe('reproducibility: which chips are refit', () => {
  it('the three check files cover exactly the measured chips; every other registry holds only copies', () => {
    expect([...CHECK_SPLIT.main, ...CHECK_SPLIT.hopper, ...CHECK_SPLIT.onboarded].sort()).toEqual(measuredChips());
    const dir = path.join(REPO_ROOT, 'registry');
    const unmeasured = (existsSync(dir) ? readdirSync(dir) : [])
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => f.slice(0, -5))
      .filter((c) => !measuredChips().includes(c));
    expect(unmeasured).toEqual(['b300']);
    for (const chip of unmeasured) {
      const methods = new Set(
        loadRegistryFile(path.join(dir, `${chip}.yaml`)).flatMap((s) => s.coefficients.map((c) => c.entry.method)),
      );
      // Copied values, plus the source's not_charged terms kept as not_charged (a term priced at 0 by design
      // is not a measured value to copy; `registry copy` refuses a copied 0).
      expect(
        [...methods].sort(),
        `${chip}: a registry without measurements must be copied (stepcal registry copy)`,
      ).toEqual(['copied', 'not_charged']);
    }
  });
});
