import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT, loadChip } from '../../src/core/catalog/chip.ts';
import { readMeasurements } from '../../src/measurements/store.ts';
import { gssMinimize, patternSearch } from '../../src/core/numeric/minimize.ts';
import { bootstrapFloorRate, fitFloorRate, logL1, type WorkPoint } from '../../src/fit/attention.ts';
import { memoryBoundReads } from '../../src/fit/hbm.ts';

describe('gssMinimize (coordinate + diagonal directions, step expansion)', () => {
  // Non-smooth valley along x = y with its minimum at (1, 1): no coordinate step from (0, 0) helps.
  const valley = (p: readonly number[]) => 100 * Math.abs(p[0]! - p[1]!) + Math.abs(p[0]! + p[1]! - 2);

  it('walks a diagonal valley where the compass search stalls', () => {
    const stuck = patternSearch(valley, [0, 0], [0.5, 0.5], { minStep: 1e-6 });
    expect(stuck.value).toBeCloseTo(2, 9); // never moved
    const r = gssMinimize(valley, [0, 0], 0.5, { minStep: 1e-7 });
    expect(r.x[0]).toBeCloseTo(1, 5);
    expect(r.x[1]).toBeCloseTo(1, 5);
    expect(r.value).toBeLessThan(1e-5);
  });

  it('recovers floor and rate from exact floor + work/rate data from a far start', () => {
    const pts: WorkPoint[] = [];
    for (let i = 0; i < 40; i++) {
      const work = 1e6 * 1.2 ** i;
      pts.push({ work, latency_us: 7.5 + work / 3.2e6, group: '', kernel_source: '' });
    }
    const f = fitFloorRate(pts, [50, 1e5]);
    expect(f.floor_us / 7.5).toBeCloseTo(1, 4);
    expect(f.rate / 3.2e6).toBeCloseTo(1, 4);
  });
});

describe('searches skip a poll that lands on a former best point (issue 17), bit-identically', () => {
  // The searches as they were before the skip: every poll calls f.
  function plainPattern(
    f: (p: readonly number[]) => number,
    x0: number[],
    step0: number[],
    minStep: number,
    maxEvals: number,
  ) {
    const x = [...x0];
    const step = [...step0];
    let best = f(x);
    let evals = 1;
    while (evals < maxEvals) {
      let improved = false;
      for (let i = 0; i < x.length && evals < maxEvals; i++)
        for (const dir of [1, -1]) {
          const y = [...x];
          y[i] = y[i]! + dir * step[i]!;
          const v = f(y);
          evals++;
          if (v < best) {
            best = v;
            x[i] = y[i]!;
            improved = true;
            break;
          }
        }
      if (!improved) {
        let allSmall = true;
        for (let i = 0; i < step.length; i++) {
          step[i] = step[i]! / 2;
          if (step[i]! > minStep) allSmall = false;
        }
        if (allSmall) break;
      }
    }
    return { x, value: best, evals };
  }
  // Objectives with kinks, plateaus and a valley: a seeded L1 fit, a step function and the diagonal valley.
  const xs = Array.from({ length: 50 }, (_, i) => i / 7);
  const ys = xs.map((x, i) => 3 + 0.7 * x + (((i * 7919) % 13) - 6) / 10);
  const l1 = (p: readonly number[]) => xs.reduce((s, x, i) => s + Math.abs(p[0]! + p[1]! * x - ys[i]!), 0);
  const steps = (p: readonly number[]) => Math.floor(4 * Math.abs(p[0]! - 0.3)) + Math.abs(p[1]! + 0.2);
  const valley = (p: readonly number[]) => 100 * Math.abs(p[0]! - p[1]!) + Math.abs(p[0]! + p[1]! - 2);

  it('patternSearch: same point, value and evaluation count as calling f on every poll, with fewer calls', () => {
    for (const f of [l1, steps, valley]) {
      let calls = 0;
      const counted = (p: readonly number[]) => {
        calls++;
        return f(p);
      };
      const r = patternSearch(counted, [0, 0], [0.5, 0.5], { minStep: 1e-6, maxEvals: 3000 });
      const ref = plainPattern(f, [0, 0], [0.5, 0.5], 1e-6, 3000);
      expect(r).toEqual(ref);
      expect(calls).toBeLessThanOrEqual(r.evals);
    }
    // 1-D |x − 0.3| from 0, step 0.25: after the move to 0.25, the poll back to 0 is skipped.
    let calls = 0;
    const abs = (p: readonly number[]) => {
      calls++;
      return Math.abs(p[0]! - 0.3);
    };
    const r = patternSearch(abs, [0], [0.25], { minStep: 0.1 });
    expect(r.x).toEqual([0.25]);
    // 0 (0.3); 0.25 (0.05, move); 0.5 (0.2) and 0 (a former best: skipped); step 0.125: 0.375 (0.075)
    // and 0.125 (0.175); step 0.0625 < minStep: stop. Six evaluations, five calls.
    expect(r.evals).toBe(6);
    expect(calls).toBe(5);
  });
});

describe('hbm_derate on l40s (floor and rate trade off along a diagonal)', () => {
  const chip = loadChip('l40s');
  const gemm = readMeasurements(path.join(REPO_ROOT, 'measurements', 'l40s'), 'gemm', { lane: 'vllm-0.24.0' });
  const wp: WorkPoint[] = memoryBoundReads(gemm, [], chip.l2_mib).map((r) => ({
    work: r.bytes,
    latency_us: r.latency_us,
    group: '',
    kernel_source: '',
  }));

  it('reaches the optimum the compass search missed, and its bootstrap CI contains it with no bound extended', () => {
    expect(wp).toHaveLength(1108);
    const f = fitFloorRate(wp);
    const bw = chip.hbm_bytes_per_us;
    // Previously stored: derate 0.8397, floor 10.01 µs, objective 0.038054 (a stall of the compass search).
    expect(f.objective).toBeLessThan(logL1(wp, 10.005762516971746, 0.8396645194402615 * bw) - 3e-5);
    expect(f.rate / bw).toBeCloseTo(0.8384, 4);
    expect(f.floor_us).toBeCloseTo(8.55, 1);
    const b = bootstrapFloorRate(wp, f, { resamples: 200, seed: 20261129 });
    expect(b.notes).toEqual([]);
    expect(b.ci_rate[0]).toBeLessThan(f.rate * (1 - 1e-3));
    expect(b.ci_rate[1]).toBeGreaterThan(f.rate * (1 + 1e-3));
  });
});
