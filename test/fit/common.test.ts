/**
 * Repeat reduction (src/fit/common.ts): `reduceRepeatsBy` (fields hashed to one number) must give
 * exactly what a reduction keyed by the fields joined into a string gives (`reduceByKey` below, the
 * form every fitter used before issue 17).
 */
import { describe, expect, it } from 'vitest';
import { reduceRepeatsBy } from '../../src/fit/common.ts';
import { median } from '../../src/core/numeric/stats.ts';

/** The reference: rows grouped by `key(r)` in first-seen order, each group's first row with the median latency. */
function reduceByKey<T extends { latency_us: number }>(rows: readonly T[], key: (r: T) => string): T[] {
  const groups = new Map<string, T[]>();
  for (const r of rows) {
    const k = key(r);
    const g = groups.get(k);
    if (g) g.push(r);
    else groups.set(k, [r]);
  }
  return [...groups.values()].map((g) =>
    g.length === 1 ? g[0]! : { ...g[0]!, latency_us: median(g.map((r) => r.latency_us)) },
  );
}

interface Row {
  kernel: string;
  m: number;
  n: number;
  latency_us: number;
}

/** A seeded linear congruential stream in [0, 1). */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('reduceRepeatsBy', () => {
  it('takes the median of each repeated configuration, first-seen order, first row kept', () => {
    const rows: Row[] = [
      { kernel: 'a', m: 1, n: 2, latency_us: 10 },
      { kernel: 'b', m: 1, n: 2, latency_us: 7 },
      { kernel: 'a', m: 1, n: 2, latency_us: 30 },
      { kernel: 'a', m: 1, n: 2, latency_us: 20 },
      { kernel: 'a', m: 2, n: 1, latency_us: 5 },
    ];
    const out = reduceRepeatsBy(rows, ['kernel', 'm', 'n']);
    // (a,1,2) has 10, 30, 20 → median 20; the others are single rows, kept as the same objects
    expect(out).toEqual([
      { kernel: 'a', m: 1, n: 2, latency_us: 20 },
      { kernel: 'b', m: 1, n: 2, latency_us: 7 },
      { kernel: 'a', m: 2, n: 1, latency_us: 5 },
    ]);
    expect(out[1]).toBe(rows[1]);
    // 0 and -0 are one configuration, as their decimal text is
    expect(
      reduceRepeatsBy(
        [
          { kernel: 'a', m: 0, n: 1, latency_us: 1 },
          { kernel: 'a', m: -0, n: 1, latency_us: 3 },
        ],
        ['kernel', 'm', 'n'],
      ),
    ).toEqual([{ kernel: 'a', m: 0, n: 1, latency_us: 2 }]);
  });

  it('equals the joined-string-key reduction on random tables with many repeats', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const rnd = lcg(seed);
      const rows: Row[] = Array.from({ length: 2000 }, () => ({
        kernel: ['x', 'y', 'z'][Math.floor(rnd() * 3)]!,
        m: 2 ** Math.floor(rnd() * 8),
        n: Math.floor(rnd() * 30) * 0.5,
        latency_us: 1 + rnd() * 100,
      }));
      const byString = reduceByKey(rows, (r) => `${r.kernel}|${r.m}|${r.n}`);
      const byFields = reduceRepeatsBy(rows, ['kernel', 'm', 'n']);
      expect(byFields).toEqual(byString);
      expect(byFields.length).toBeLessThan(rows.length);
    }
  });

  it('equals it on a GEMM-like grid of whole numbers, where the probe runs are long (open addressing)', () => {
    // whole-number doubles have a zero low word, so the slot depends on the mixed hash; every
    // (m, n) on a 2^a × 64·b grid, twice, shuffled by the seeded stream: 40 × 200 configurations
    const rnd = lcg(7);
    const rows: Row[] = [];
    for (let rep = 0; rep < 2; rep++)
      for (let a = 0; a < 40; a++)
        for (let b = 1; b <= 200; b++)
          rows.push({ kernel: 'k', m: 2 ** (a % 20) * (a < 20 ? 1 : 3), n: 64 * b, latency_us: 1 + rnd() });
    for (let i = rows.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [rows[i], rows[j]] = [rows[j]!, rows[i]!];
    }
    const out = reduceRepeatsBy(rows, ['kernel', 'm', 'n']);
    expect(out.length).toBe(8000);
    expect(out).toEqual(reduceByKey(rows, (r) => `${r.kernel}|${r.m}|${r.n}`));
  });
});
