import { defineConfig } from 'vitest/config';

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
  },
});
