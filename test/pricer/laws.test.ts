/** The pure laws checked against exact counterparts and hand arithmetic. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attendedKeys, decodeAttentionUs, decodeTokensRead, prefillPairs } from '../../src/core/laws/attention.ts';
import { collectiveTime, collectiveUs } from '../../src/core/laws/collective.ts';
import {
  achievedEfficiency,
  gemmEfficiency,
  rampSlowdown,
  rampUs,
  rampUsPerToken,
  shapeEfficiency,
  shapeFactor,
} from '../../src/core/laws/gemm.ts';
import { floorPlusUnits, floorPlusWork } from '../../src/core/laws/floor-rate.ts';
import {
  eagerLaunchUs,
  GRAPH_EAGER,
  GRAPH_FULL,
  GRAPH_PIECEWISE,
  graphModeFor,
  launchUs,
  passHostUs,
} from '../../src/core/laws/host.ts';
import { expertsTouched } from '../../src/core/laws/moe.ts';
import { all2allSpan, ringSpan } from '../../src/core/laws/placement.ts';

describe('GEMM ramp (reference §4.3 sanity values)', () => {
  it('H200 bf16: 0.0089 at m=1, 0.496 at m=110, 0.941 at m=2048', () => {
    expect(gemmEfficiency(1, 0.992, 110)).toBeCloseTo(0.992 / 111, 12);
    expect(gemmEfficiency(110, 0.992, 110)).toBeCloseTo(0.496, 12);
    expect(gemmEfficiency(2048, 0.992, 110)).toBeCloseTo(0.941, 3);
    expect(gemmEfficiency(0, 0.992, 110)).toBe(0);
  });
});

describe('the folded ramp (what the pricer evaluates per step) is the ramp law', () => {
  it('hand arithmetic: 2·4096·4096 FLOPs per token at peak 989,000 FLOPs/µs, ε_max 0.8, m_½ 100, at m = 300', () => {
    const a = rampUsPerToken(2 * 4096 * 4096, 989_000, 0.8);
    expect(a).toBe((2 * 4096 * 4096) / (989_000 * 0.8));
    expect(rampUs(a, 300, 100)).toBe(a * 400);
    // FLOPs / (peak · ε(m)) with ε(300) = 0.8 · 300/400 = 0.6: 300 · 33,554,432 / (989,000 · 0.6) µs.
    expect(rampUs(a, 300, 100)).toBeCloseTo((300 * 2 * 4096 * 4096) / (989_000 * 0.6), 9);
    expect(rampSlowdown(300, 100)).toBe(400 / 300);
    expect(rampSlowdown(300, 100)).toBeCloseTo(0.8 / gemmEfficiency(300, 0.8, 100), 14);
  });
  it('a·(m + m_½) equals FLOPs / (peak · shapeEfficiency) to rounding, for any shape', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.integer({ min: 64, max: 65_536 }),
        fc.integer({ min: 64, max: 65_536 }),
        fc.double({ min: 0.05, max: 1, noNaN: true }),
        fc.double({ min: 1, max: 2000, noNaN: true }),
        fc.double({ min: 10, max: 5000, noNaN: true }),
        fc.double({ min: 10, max: 5000, noNaN: true }),
        (m, n, k, eps, mh, nh, kh) => {
          const peak = 989_000;
          const c = { eps_max: eps, m_half: mh, n_half: nh, k_half: kh };
          const law = (2 * m * n * k) / (peak * shapeEfficiency(m, n, k, c));
          const folded = rampUs(rampUsPerToken(2 * n * k, peak, eps, shapeFactor(n, nh) * shapeFactor(k, kh)), m, mh);
          expect(Math.abs(folded - law) / law).toBeLessThan(1e-13);
          // and the timing inverts back to the efficiency it was priced at
          expect(achievedEfficiency(m, n, k, folded, peak)).toBeCloseTo(shapeEfficiency(m, n, k, c), 12);
        },
      ),
    );
  });
  it('floorPlusUnits with us_per_unit = floorPlusWork(0, bytes per unit, rate) is floorPlusWork to rounding', () => {
    // 2 µs floor, 4,096 tokens of 256 KV bytes at 3.2e6 B/µs: 2 + 4096·256/3.2e6 = 2.32768 µs.
    expect(floorPlusUnits(2, 4096, floorPlusWork(0, 256, 3.2e6))).toBeCloseTo(2.32768, 12);
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 50, noNaN: true }),
        fc.integer({ min: 0, max: 1e7 }),
        fc.double({ min: 1, max: 1e6, noNaN: true }),
        fc.double({ min: 1e3, max: 1e7, noNaN: true }),
        (f, u, b, r) => {
          const law = floorPlusWork(f, u * b, r);
          expect(Math.abs(floorPlusUnits(f, u, floorPlusWork(0, b, r)) - law)).toBeLessThanOrEqual(
            1e-12 * Math.max(1, law),
          );
        },
      ),
    );
  });
});

describe('attention pairs', () => {
  it('full attention: 4·(S·C + S²/2) of reference §4.5 (without the 4)', () => {
    expect(attendedKeys(512, 2048, 1, Infinity)).toBe(2048 * 512 + (2048 * 2048) / 2);
  });
  it('windowed integral equals a fine Riemann sum of min(p, W)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 5000 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 1, max: 6000 }),
        (c, s, w) => {
          let sum = 0;
          const steps = 4 * s;
          for (let i = 0; i < steps; i++) {
            const p = c + (i + 0.5) * (s / steps);
            sum += Math.min(p, w) * (s / steps);
          }
          expect(attendedKeys(c, s, 1, w)).toBeCloseTo(sum, 3);
        },
      ),
      { numRuns: 60 },
    );
  });
  it('a window never sees more than full attention, and binds only past it', () => {
    expect(attendedKeys(0, 100, 1, 128)).toBe(attendedKeys(0, 100, 1, Infinity));
    expect(attendedKeys(1000, 100, 1, 128)).toBe(128 * 100);
  });
  it('decode reads: window bounds, sparse reads window + top-k of the compressed stream', () => {
    expect(decodeTokensRead(4096, { window: 128, ratio: 0, cap: Infinity })).toBe(128);
    expect(decodeTokensRead(100, { window: 128, ratio: 0, cap: Infinity })).toBe(100);
    expect(decodeTokensRead(100_000, { window: 128, ratio: 4, cap: 2048 })).toBe(128 + 2048);
    expect(decodeTokensRead(1000, { window: 128, ratio: 4, cap: 2048 })).toBe(128 + 250);
    expect(decodeTokensRead(1000, { window: 0, ratio: 4, cap: Infinity })).toBe(250);
    expect(prefillPairs(10, 0, { window: 0, ratio: 1, cap: 4 })).toBeCloseTo(4 * 10 - 8, 12);
  });
});

describe('decode attention with work items (issue 16)', () => {
  const law = { floor_us: 12, rate: 4e6, item_us: 0.025, p_half: 2.5 };
  it('hand arithmetic: floor + p·item + bytes/(rate·p/(p + p_half))', () => {
    // p = 4 rows × 2 KV heads = 8; 8 MB at 4e6 B/µs = 2 µs, ramp (8 + 2.5)/8 = 1.3125 → 2.625 µs.
    expect(decodeAttentionUs(law, 8, 8e6)).toBeCloseTo(12 + 8 * 0.025 + 2.625, 12);
  });
  it('is floor + bytes/rate with no work-item terms, and the rate ramp only slows a read', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 1e4, noNaN: true }),
        fc.double({ min: 0, max: 1e10, noNaN: true }),
        (p, b) => {
          const plain = decodeAttentionUs({ ...law, item_us: 0, p_half: 0 }, p, b);
          expect(plain).toBeCloseTo(floorPlusWork(12, b, 4e6), 9);
          expect(decodeAttentionUs({ ...law, item_us: 0 }, p, b)).toBeGreaterThanOrEqual(plain);
          // Folded as the pricer does (rate in tokens per µs): the same time for the same read.
          const perToken = 4096;
          const folded = { ...law, rate: 1 / floorPlusWork(0, perToken, law.rate) };
          expect(decodeAttentionUs(folded, p, b / perToken)).toBeCloseTo(decodeAttentionUs(law, p, b), 6);
        },
      ),
    );
  });
});

describe('MoE distinct experts', () => {
  it('L·(1 − ((E−k)/E)^T), all local experts when k ≥ E', () => {
    expect(expertsTouched(1, 256, 8, 256)).toBeCloseTo(8, 12);
    expect(expertsTouched(2, 8, 2, 8)).toBeCloseTo(8 * (1 - (6 / 8) ** 2), 12);
    expect(expertsTouched(5, 4, 4, 4)).toBe(4);
    expect(expertsTouched(0, 8, 2, 8)).toBe(0);
  });
});

describe('collectives', () => {
  it("the scalar form (the pricer's) equals collectiveTime for any message", () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e10, noNaN: true }),
        fc.double({ min: 0.1, max: 50, noNaN: true }),
        fc.double({ min: 1e4, max: 1e6, noNaN: true }),
        (b, t0, rp) => {
          const rt = rp * 0.75;
          expect(collectiveUs(b, t0, rt, rp)).toBe(
            collectiveTime(b, { t0_us: t0, r_t_bytes_per_us: rt, r_peak_bytes_per_us: rp }),
          );
          expect(collectiveUs(b, t0, undefined, rp)).toBe(collectiveTime(b, { t0_us: t0, r_peak_bytes_per_us: rp }));
        },
      ),
    );
  });
  it('t(b) by hand: floor, transition and peak regimes; a one-rank group is free', () => {
    // t0 = 10 µs, r_t = 1,000 B/µs, r_peak = 4,000 B/µs.
    expect(collectiveUs(0, 10, 1000, 4000)).toBe(10); // no message: the floor
    expect(collectiveUs(2000, 10, 1000, 4000)).toBe(12); // 10 + 2000/1000 = 12 > 2000/4000
    expect(collectiveUs(2e6, 10, 1e6, 1e5)).toBe(20); // max(10 + 2, 2e6/1e5 = 20): the peak rate binds
    expect(collectiveUs(2000, 10, undefined, 4000)).toBe(10); // two-parameter law: max(t0, b/r_peak)
    expect(collectiveTime(2000, { t0_us: 10, r_peak_bytes_per_us: 4000 }, 1)).toBe(0);
  });
  it('spans: one node = 1; 16 ranks over two 8-GPU nodes with ratio 9', () => {
    expect(ringSpan(8, 8, 9)).toBe(1);
    expect(ringSpan(16, 8, 9)).toBeCloseTo(1 + (8 * 1) / 15, 12);
    expect(all2allSpan(16, 8, 9)).toBeCloseTo(1 + (8 * 8) / 15, 12);
  });
});

describe('host (reference §4.10 table)', () => {
  it('eager per kernel where measured, else per layer; a pass adds its dispatch per kernel', () => {
    expect(eagerLaunchUs(3, 99, 258, 32)).toBe(774); // 3 µs × 258 kernels
    expect(eagerLaunchUs(undefined, 40, 258, 32)).toBe(1280); // 40 µs × 32 layers
    expect(passHostUs(launchUs(GRAPH_PIECEWISE, false, 20, 5, 33, 774), 1.5, 258)).toBe(5 * 33 + 1.5 * 258);
  });
  it('graph mode per batch', () => {
    expect(graphModeFor('FULL_AND_PIECEWISE', true)).toBe(GRAPH_FULL);
    expect(graphModeFor('FULL_AND_PIECEWISE', false)).toBe(GRAPH_PIECEWISE);
    expect(graphModeFor('FULL_DECODE_ONLY', false)).toBe(GRAPH_EAGER);
    expect(graphModeFor('FULL', false)).toBe(GRAPH_FULL);
    expect(graphModeFor('NONE', true)).toBe(GRAPH_EAGER);
  });
  it('past the largest capture: eager, never cheaper than captured', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0, max: 2000, noNaN: true }),
        fc.integer({ min: 1, max: 200 }),
        (rep, eager, pieces) => {
          for (const gm of [GRAPH_FULL, GRAPH_PIECEWISE]) {
            expect(launchUs(gm, true, rep, rep, pieces, eager)).toBeGreaterThanOrEqual(
              launchUs(gm, false, rep, rep, pieces, eager),
            );
            expect(launchUs(gm, true, rep, rep, pieces, eager)).toBeGreaterThanOrEqual(eager);
          }
        },
      ),
    );
  });
});
