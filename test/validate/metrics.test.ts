import { describe, expect, it } from 'vitest';
import { apeCdf, computeMetrics, shapeErrors } from '../../src/validate/metrics.ts';

const pt = (predicted_us: number, measured_us: number, batch: number, group = 'g') => ({
  predicted_us,
  measured_us,
  batch,
  group,
});

describe('metrics: known answers on a hand-made table', () => {
  // ratios 1.1, 0.9, 1.3, 1.0, 0.5 → APE 10, 10, 30, 0, 50
  const t = [pt(110, 100, 1), pt(90, 100, 2), pt(130, 100, 4), pt(100, 100, 8), pt(50, 100, 16)];
  const m = computeMetrics(t);
  it('MAPE, nearest-rank median and p90, bias, geometric mean', () => {
    expect(m.n).toBe(5);
    expect(m.mape_pct).toBeCloseTo(20, 10);
    // sorted APE [0, 10, 10, 30, 50]: median = sorted[ceil(2.5)-1] = sorted[2] = 10; p90 = sorted[ceil(4.5)-1] = 50
    expect(m.median_ape_pct).toBeCloseTo(10, 10);
    expect(m.p90_ape_pct).toBeCloseTo(50, 10);
    expect(m.bias_pct).toBeCloseTo(-4, 10); // (10 − 10 + 30 + 0 − 50)/5
    expect(m.geo_mean_ratio).toBeCloseTo((1.1 * 0.9 * 1.3 * 1.0 * 0.5) ** (1 / 5), 12);
  });
  it('shape: ratios normalised to the group median ratio, every row counted', () => {
    // ratios 1.1, 0.9, 1.3, 1.0, 0.5 → median 1.0; |e| = 0.1, 0.1, 0.3, 0, 0.5 → mean 0.2
    expect(m.shape_mape_pct).toBeCloseTo(20, 10);
    expect(m.shape_n).toBe(5);
    // ratios 2, 1, 1.5 → median 1.5 whatever the batch order: e = 2/1.5 − 1, 1/1.5 − 1, 0
    const e = shapeErrors([pt(200, 100, 8), pt(100, 100, 2), pt(150, 100, 4)]);
    expect(e[0]).toBeCloseTo(1 / 3, 12);
    expect(e[1]).toBeCloseTo(-1 / 3, 12);
    expect(e[2]).toBe(0);
    // even count: the median is the mean of the two middle ratios (1.0 and 1.2 → 1.1)
    expect(shapeErrors([pt(100, 100, 1), pt(120, 100, 2)]).map((x) => x * 1.1)).toEqual([
      expect.closeTo(-0.1, 12),
      expect.closeTo(0.1, 12),
    ]);
  });
  it('shape: one bad lowest-batch row does not inflate the rest of its group (issue 16)', () => {
    // a well-shaped group (ratios within ±2 %) whose lowest-batch row is 5× too fast
    const ratios = [0.2, 1.0, 1.02, 0.98, 1.01, 0.99];
    const g = ratios.map((r, i) => pt(100 * r, 100, 2 ** i));
    const m2 = computeMetrics(g);
    // median of [0.2, 0.98, 0.99, 1.0, 1.01, 1.02] = (0.99 + 1.0)/2 = 0.995
    const expected = (ratios.reduce((a, r) => a + Math.abs(r / 0.995 - 1), 0) / 6) * 100;
    expect(m2.shape_mape_pct).toBeCloseTo(expected, 10);
    expect(expected).toBeLessThan(15); // 0.80 from the outlier, ≤ 0.026 from each other row
    // anchored on the lowest-batch row (the old rule) the same group read ≈ 400 %
    const old = ratios.slice(1).reduce((a, r) => a + Math.abs(r / 0.2 - 1), 0) / 5;
    expect(old).toBeGreaterThan(3.9);
    // the other rows' errors stay within 2.6 %
    const e = shapeErrors(g);
    for (const x of e.slice(1)) expect(Math.abs(x)).toBeLessThan(0.026);
  });
  it('a constant factor cancels in the shape error but not in MAPE', () => {
    const c = computeMetrics([pt(200, 100, 1), pt(400, 200, 2), pt(600, 300, 3)]);
    expect(c.shape_mape_pct).toBe(0);
    expect(c.mape_pct).toBeCloseTo(100, 10);
  });
  it('p90 with n = 10 is the 9th smallest APE', () => {
    const pts = Array.from({ length: 10 }, (_, i) => pt(100 + (i + 1), 100, 1, ''));
    const q = computeMetrics(pts);
    expect(q.p90_ape_pct).toBeCloseTo(9, 10);
    expect(q.median_ape_pct).toBeCloseTo(5, 10);
    expect(q.shape_mape_pct).toBeUndefined(); // no group
  });
  it('groups of one row give no shape; APE CDF ends at 1', () => {
    expect(shapeErrors([pt(1, 2, 1, 'a'), pt(1, 2, 1, 'b')])).toEqual([]);
    expect(apeCdf([30, 10, 20])).toEqual([
      [10, 1 / 3],
      [20, 2 / 3],
      [30, 1],
    ]);
  });
});
