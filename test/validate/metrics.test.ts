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
  it('shape: ratios normalised to the lowest batch, anchor excluded', () => {
    // anchor r0 = 1.1; |e| = 0.2/1.1, 0.2/1.1, 0.1/1.1, 0.6/1.1 → mean = (1.1/1.1)/4 = 0.25
    expect(m.shape_mape_pct).toBeCloseTo(25, 10);
    expect(m.shape_n).toBe(4);
    // anchor is the lowest batch even when it is not first
    const e = shapeErrors([pt(200, 100, 8), pt(100, 100, 2), pt(150, 100, 4)]);
    expect(e).toEqual([1, 0.5]);
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
