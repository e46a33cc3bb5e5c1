import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupBy, median, percentileNearestRank, percentileType7 } from '../../src/core/numeric/stats.ts';

/** The textbook definitions on a sorted copy, to check the selection-based implementations against. */
const sortedCopy = (v: readonly number[]) => [...v].sort((a, b) => a - b);
const nearestRankBySort = (v: readonly number[], p: number) => sortedCopy(v)[Math.max(0, Math.ceil(p * v.length) - 1)]!;
const type7BySort = (v: readonly number[], p: number) => {
  const s = sortedCopy(v);
  const h = (s.length - 1) * p;
  const lo = Math.floor(h);
  return s[lo]! + (h - lo) * (s[Math.ceil(h)]! - s[lo]!);
};

describe('core/numeric percentiles', () => {
  it('nearest-rank, type 7 and the median on a hand-worked list', () => {
    const v = [50, 15, 40, 20, 35];
    // nearest rank: sorted [15 20 35 40 50][ceil(p·n) − 1]: p 0.3 → ceil(1.5) − 1 = 1 → 20; p 0.9 → 5 − 1 → 50
    expect(percentileNearestRank(v, 0.3)).toBe(20);
    expect(percentileNearestRank(v, 0.9)).toBe(50);
    expect(percentileNearestRank(v, 0.2)).toBe(15);
    // type 7: h = (n − 1)·p = 1.6 → 20 + 0.6·(35 − 20) = 29; p 0.5 → h = 2 → 35
    expect(percentileType7(v, 0.4)).toBeCloseTo(29, 12);
    expect(median(v)).toBe(35);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(v).toEqual([50, 15, 40, 20, 35]);
    expect(() => median([])).toThrow(/empty/);
    expect(() => percentileNearestRank([1], 0)).toThrow(/\(0, 1\]/);
  });
  it('selection gives exactly what sorting gives (property)', () => {
    const values = fc.array(fc.double({ min: -1e9, max: 1e9, noNaN: true }), { minLength: 1, maxLength: 300 });
    fc.assert(
      fc.property(values, fc.double({ min: 0, max: 1, noNaN: true }), (v, p) => {
        expect(percentileType7(v, p)).toBe(type7BySort(v, p));
        if (p > 0) expect(percentileNearestRank(v, p)).toBe(nearestRankBySort(v, p));
      }),
      { seed: 20261201, numRuns: 400 },
    );
  });
  it('groupBy keeps first-seen key order and item order within a key', () => {
    const g = groupBy(['b1', 'a1', 'b2', 'c1', 'a2'], (s) => s[0]!);
    expect([...g.keys()]).toEqual(['b', 'a', 'c']);
    expect(g.get('a')).toEqual(['a1', 'a2']);
  });
});
