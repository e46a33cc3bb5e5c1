import path from 'node:path';
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

/** vitest's default order, with REFITS_FIRST moved to the front (stable otherwise). */
class RefitsFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification) => {
      const i = REFITS_FIRST.indexOf(path.relative(f.project.config.root, f.moduleId).split(path.sep).join('/'));
      return i < 0 ? REFITS_FIRST.length : i;
    };
    const sorted = await super.sort(files);
    return sorted
      .map((f, i) => ({ f, i, r: rank(f) }))
      .sort((a, b) => a.r - b.r || a.i - b.i)
      .map((x) => x.f);
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // One module graph per worker, not per file: loading src/ afresh for each of ~70 files cost about half
    // of the suite's CPU (measured in docs/performance.md). Tests must not rely on a fresh module state.
    isolate: false,
    maxWorkers: 2,
    sequence: { sequencer: RefitsFirst },
  },
});
