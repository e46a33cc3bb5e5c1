import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The refit-and-compare files, in this order, before every other file (test/helpers/refit.ts). Cold (a
 * fitter or an input changed, a fresh clone), each is minutes of one worker; warm, under a second.
 * vitest's own order is longest-first by the durations it cached from the last run, so after a warm
 * run a cold refit file was started last and ran alone on one core for its whole length while the
 * other worker sat idle (main 3c3a644: check-onboarded started at 660 s of 876 s). check.test.ts
 * first: it refits a100, which test/onboard waits for.
 */
const REFITS_FIRST = [
  'test/registry/check.test.ts',
  'test/registry/check-hopper.test.ts',
  'test/registry/check-onboarded.test.ts',
];

/**
 * The files that take longest outside the refits (seconds of one worker each; docs/performance.md
 * "npm test"), started right after REFITS_FIRST, in vitest's own order among themselves. With the
 * durations of a previous run cached, vitest already starts them early; a clean clone (CI) has no
 * such cache, and vitest then orders by file size, which started all-models.test.ts 101st of 105 and
 * onboard.test.ts 66th, so one of them could run alone at the end while the other worker sat idle.
 * A hint only: a file missing here is still run, in vitest's order.
 */
const HEAVY_NEXT = [
  'test/bad-inputs/io-kill.test.ts',
  'test/measurements/units-slip.test.ts',
  'test/bad-inputs/data-registry.test.ts',
  'test/onboard/onboard.test.ts',
  'test/onboard/complete-folder.test.ts',
  'test/pricer/all-models.test.ts',
  'test/pricer/expert-alltoall.test.ts',
  'test/collector/collect.test.ts',
  'test/fit/orchestrator.test.ts',
];

/** vitest's default order, with REFITS_FIRST moved to the front, then HEAVY_NEXT (stable otherwise). */
class RefitsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const rel = path.relative(f.project.config.root, f.moduleId).split(path.sep).join('/');
      const i = REFITS_FIRST.indexOf(rel);
      if (i >= 0) return i;
      return HEAVY_NEXT.includes(rel) ? REFITS_FIRST.length : REFITS_FIRST.length + 1;
    };
    const sorted = await super.sort(files);
    return sorted
      .map((f, i) => ({ f, i, r: rank(f) }))
      .sort((a, b) => a.r - b.r || a.i - b.i)
      .map((x) => x.f);
  }
}

/**
 * Test files that read the raw datasets in `../shared/datasets` (the importers' and curators' tests on the
 * upstream tables; everything else reads the curated copies in `measurements/`). A clone with no
 * `../shared` beside it (README "Set-up") leaves them out, with a notice, so `npm test` checks what the
 * clone holds; under `CI=true` they always run, so CI fails instead of skipping them (as the collector
 * tests do without PyTorch).
 */
const NEEDS_SHARED = [
  'test/bad-inputs/data-units.test.ts',
  'test/bad-inputs/io-import.test.ts',
  'test/catalog/derive-refusals.test.ts',
  'test/fit/expert-a2a.test.ts',
  'test/measurements/aiconfigurator.test.ts',
  'test/measurements/bad-input.test.ts',
  'test/measurements/cli.test.ts',
  'test/measurements/moe-units.test.ts',
  'test/measurements/parquet-system.test.ts',
  'test/measurements/splitwise.test.ts',
];
const ROOT = path.dirname(fileURLToPath(import.meta.url));
const NO_SHARED = !existsSync(path.join(ROOT, '..', 'shared', 'datasets')) && process.env.CI !== 'true';
if (NO_SHARED)
  process.stderr.write(
    `vitest: ../shared/datasets is missing, so the ${NEEDS_SHARED.length} test files that read the raw datasets are left out (CI=true runs them and fails)\n`,
  );

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['**/node_modules/**', ...(NO_SHARED ? NEEDS_SHARED : [])],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One module graph per worker, not per file: loading src/ afresh for each of ~70 files cost about half
    // of the suite's CPU (measured in docs/performance.md). Tests must not rely on a fresh module state.
    isolate: false,
    maxWorkers: 2,
    // `fit all` in one thread inside tests (and their child CLIs): the two test workers already hold the
    // two cores, and each fit worker thread would register tsx and load the fitters again. The worker path
    // keeps its own tests (test/fit/orchestrator.test.ts passes `workers: 2` explicitly, which wins).
    env: { STEPCAL_FIT_WORKERS: '1' },
    sequence: { sequencer: RefitsFirst },
  },
});
