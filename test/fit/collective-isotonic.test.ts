/**
 * Noise is not a refusal (issue 15 item 3): collective floor inversions within the measured repeat
 * noise are pooled (isotonic regression), beyond it only the wider curve is refused.
 */
import { describe, expect, it } from 'vitest';
import type { CurveFit } from '../../src/fit/collective-curve.ts';
import { floorNoise, repairFloorInversions } from '../../src/fit/collective-isotonic.ts';

const curve = (ranks: number, t0: number, second: number) => ({
  op: 'all_reduce',
  dtype: 'fp16',
  ranks,
  backend: 'nccl',
  fit: { t0_us: t0, t0_ci95: [t0, second] } as unknown as CurveFit,
});

describe('collective floor isotonic repair', () => {
  it("the issue's 0.24 % inversion (4-rank 7.008 µs below 2-rank 7.025 µs) is within noise and pooled to the mean", () => {
    // Repeat noise: 2-rank (7.060 − 7.025)/7.025 = 0.498 %, 4-rank (7.030 − 7.008)/7.008 = 0.314 %.
    const cs = [curve(2, 7.025, 7.06), curve(4, 7.008, 7.03), curve(8, 7.5, 7.6)];
    expect(floorNoise(cs[0]!.fit)).toBeCloseTo(0.035 / 7.025, 12);
    const { repairs, refused } = repairFloorInversions(cs);
    expect(refused).toEqual([]);
    expect(repairs).toHaveLength(1);
    expect(repairs[0]).toMatchObject({ status: 'repaired', ranks: [2, 4], before_us: [7.025, 7.008] });
    expect(repairs[0]!.inversion).toBeCloseTo(0.017 / 7.025, 12); // 0.242 %
    // Pooled: (7.025 + 7.008) / 2 = 7.0165 µs for both; the 8-rank floor is untouched; ci95 contains the value.
    const [a, b, c] = cs.map((x) => x.fit.t0_us);
    expect(a).toBeCloseTo(7.0165, 12);
    expect(b).toBe(a);
    expect(c).toBe(7.5);
    expect(cs[0]!.fit.t0_ci95[0]).toBeCloseTo(7.0165, 12);
    expect(cs[0]!.fit.t0_ci95[1]).toBe(7.06);
    expect(cs[1]!.fit.t0_ci95).toEqual([7.008, 7.03]);
    expect(repairs[0]!.note).toContain('within the measured repeat noise 0.50%');
  });

  it('an inversion beyond the noise refuses only the wider curve', () => {
    const cs = [curve(2, 7.0, 7.01), curve(4, 6.0, 6.01), curve(8, 7.5, 7.6)];
    const { repairs, refused } = repairFloorInversions(cs);
    expect(refused.map((c) => c.ranks)).toEqual([4]);
    expect(repairs.map((r) => r.status)).toEqual(['refused']);
    expect(repairs[0]!.inversion).toBeCloseTo(1 / 7, 12); // 14.29 % below, noise 0.17 %
    expect(cs.map((c) => c.fit.t0_us)).toEqual([7.0, 6.0, 7.5]);
  });

  it('non-decreasing floors are left alone', () => {
    const cs = [curve(2, 5, 5.1), curve(4, 6, 6.1), curve(8, 7, 7.1)];
    expect(repairFloorInversions(cs)).toEqual({ repairs: [], refused: [] });
  });
});
