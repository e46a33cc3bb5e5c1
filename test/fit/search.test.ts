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
