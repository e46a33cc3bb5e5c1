/** How many fit workers a run starts (src/fit/parallel.ts workerCount; DECISION in docs/performance.md). */
import { afterEach, describe, expect, it } from 'vitest';
import { FAMILY_DEPS, RESULT_ORDER } from '../../src/fit/families.ts';
import { besideAsked, besidePlan, workerCount } from '../../src/fit/parallel.ts';

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

  it('besideAsked: only when the caller or STEPCAL_FIT_WORKERS says beside; a count never', () => {
    delete process.env.STEPCAL_FIT_WORKERS;
    expect([undefined, 1, 2, 'beside'].map((w) => besideAsked(w as number | 'beside' | undefined))).toEqual([
      false,
      false,
      false,
      true,
    ]);
    process.env.STEPCAL_FIT_WORKERS = 'beside';
    expect(besideAsked(undefined)).toBe(true);
    expect(besideAsked(2)).toBe(false);
    process.env.STEPCAL_FIT_WORKERS = '2';
    expect(besideAsked(undefined)).toBe(false);
  });
});

describe('besidePlan', () => {
  it('sends the GEMM fit, the families fitted on it and the collectives to the worker; the rest stay', () => {
    const { worker, main } = besidePlan(RESULT_ORDER);
    expect(worker).toEqual(RESULT_ORDER.filter((f) => ['gemm', 'attention_prefill', 'mla', 'collective'].includes(f)));
    expect(main).toEqual(RESULT_ORDER.filter((f) => !worker.includes(f)));
  });

  it('every subset: the two sides partition it in order, and no family depends on one on the other side', () => {
    // Every one of the 2^12 subsets of the families (in RESULT_ORDER).
    for (let mask = 0; mask < 1 << RESULT_ORDER.length; mask++) {
      const families = RESULT_ORDER.filter((_, i) => mask & (1 << i));
      const { worker, main } = besidePlan(families);
      expect([...worker, ...main].sort()).toEqual([...families].sort());
      expect(worker).toEqual(families.filter((f) => worker.includes(f)));
      for (const f of main) for (const d of FAMILY_DEPS[f]) expect(worker).not.toContain(d);
      for (const f of worker) for (const d of FAMILY_DEPS[f]) expect(main).not.toContain(d);
    }
  });
});
