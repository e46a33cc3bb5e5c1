/** How many fit workers a run starts (src/fit/parallel.ts workerCount; DECISION in docs/performance.md). */
import { afterEach, describe, expect, it } from 'vitest';
import { workerCount } from '../../src/fit/parallel.ts';

describe('workerCount', () => {
  const saved = process.env.STEPCAL_FIT_WORKERS;
  afterEach(() => {
    if (saved === undefined) delete process.env.STEPCAL_FIT_WORKERS;
    else process.env.STEPCAL_FIT_WORKERS = saved;
  });

  it('by default: one thread under 4 cores, min(cores, 4) workers from 4', () => {
    delete process.env.STEPCAL_FIT_WORKERS;
    const got = [1, 2, 3, 4, 6, 16].map((n) => workerCount(undefined, n));
    expect(got).toEqual([1, 1, 1, 4, 4, 4]);
  });

  it('STEPCAL_FIT_WORKERS and the caller override the core count, capped at 4; junk means one thread', () => {
    process.env.STEPCAL_FIT_WORKERS = '3';
    expect(workerCount(undefined, 2)).toBe(3);
    process.env.STEPCAL_FIT_WORKERS = '9';
    expect(workerCount(undefined, 2)).toBe(4);
    process.env.STEPCAL_FIT_WORKERS = 'two';
    expect(workerCount(undefined, 8)).toBe(1);
    process.env.STEPCAL_FIT_WORKERS = '';
    expect(workerCount(undefined, 8)).toBe(4);
    expect(workerCount(2, 8)).toBe(2);
    expect(workerCount(0, 8)).toBe(1);
  });
});
