import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resampleEstimates, seededRandom } from '../../src/core/numeric/resample.ts';

describe('core/numeric resampleEstimates', () => {
  it('draws Math.floor(u · n) from one mulberry32 stream, size draws per resample in order', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 2 ** 32 - 1 }),
        (n, size, resamples, seed) => {
          const got = resampleEstimates(n, resamples, seed, (idx) => Array.from(idx), size);
          const rand = seededRandom(seed);
          const want = Array.from({ length: resamples }, () =>
            Array.from({ length: size }, () => Math.floor(rand() * n)),
          );
          expect(got).toEqual(want);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('gives the pinned first indices of seed 20261129 (the fits default) over 1000 rows', () => {
    // Pinned from this stream (mulberry32, seed 20261129): every stored ci95 depends on it, so a change shows here.
    const first = resampleEstimates(1000, 2, 20261129, (idx) => Array.from(idx.slice(0, 3)));
    expect(first).toEqual([
      [528, 892, 763],
      [445, 32, 447],
    ]);
  });

  it('skips a resample whose estimate is undefined and keeps the rest in order', () => {
    let b = 0;
    const kept = resampleEstimates(10, 5, 7, () => (b++ % 2 ? undefined : b));
    expect(kept).toEqual([1, 3, 5]);
  });
});
