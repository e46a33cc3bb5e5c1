/** The pure laws checked against exact counterparts and hand arithmetic. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { attendedKeys, decodeTokensRead, prefillPairs } from '../../src/core/laws/attention.ts';
import { collectiveTime } from '../../src/core/laws/collective.ts';
import { gemmEfficiency } from '../../src/core/laws/gemm.ts';
import { GRAPH_EAGER, GRAPH_FULL, GRAPH_PIECEWISE, graphModeFor, launchUs } from '../../src/core/laws/host.ts';
import { expertsTouched } from '../../src/core/laws/moe.ts';
import { all2allSpan, ringSpan } from '../../src/core/laws/placement.ts';
import { collectiveTimeInline } from '../../src/pricer/pricer.ts';

describe('GEMM ramp (reference §4.3 sanity values)', () => {
  it('H200 bf16: 0.0089 at m=1, 0.496 at m=110, 0.941 at m=2048', () => {
    expect(gemmEfficiency(1, 0.992, 110)).toBeCloseTo(0.992 / 111, 12);
    expect(gemmEfficiency(110, 0.992, 110)).toBeCloseTo(0.496, 12);
    expect(gemmEfficiency(2048, 0.992, 110)).toBeCloseTo(0.941, 3);
    expect(gemmEfficiency(0, 0.992, 110)).toBe(0);
  });
});

describe('attention pairs', () => {
  it('full attention: 4·(S·C + S²/2) of reference §4.5 (without the 4)', () => {
    expect(attendedKeys(512, 2048, 1, Infinity)).toBe(2048 * 512 + (2048 * 2048) / 2);
  });
  it('windowed integral equals a fine Riemann sum of min(p, W)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 1, max: 5000 }), fc.integer({ min: 1, max: 6000 }), (c, s, w) => {
        let sum = 0;
        const steps = 4 * s;
        for (let i = 0; i < steps; i++) {
          const p = c + (i + 0.5) * (s / steps);
          sum += Math.min(p, w) * (s / steps);
        }
        expect(attendedKeys(c, s, 1, w)).toBeCloseTo(sum, 3);
      }),
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

describe('MoE distinct experts', () => {
  it('L·(1 − ((E−k)/E)^T), all local experts when k ≥ E', () => {
    expect(expertsTouched(1, 256, 8, 256)).toBeCloseTo(8, 12);
    expect(expertsTouched(2, 8, 2, 8)).toBeCloseTo(8 * (1 - (6 / 8) ** 2), 12);
    expect(expertsTouched(5, 4, 4, 4)).toBe(4);
    expect(expertsTouched(0, 8, 2, 8)).toBe(0);
  });
});

describe('collectives', () => {
  it('inline law equals laws/collective.ts for any message', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e10, noNaN: true }), fc.double({ min: 0.1, max: 50, noNaN: true }), fc.double({ min: 1e4, max: 1e6, noNaN: true }), (b, t0, rp) => {
        const rt = rp * 0.75;
        expect(collectiveTimeInline(b, t0, rt, rp)).toBe(collectiveTime(b, { t0_us: t0, r_t_bytes_per_us: rt, r_peak_bytes_per_us: rp }));
        expect(collectiveTimeInline(b, t0, undefined, rp)).toBe(collectiveTime(b, { t0_us: t0, r_peak_bytes_per_us: rp }));
      }),
    );
  });
  it('spans: one node = 1; 16 ranks over two 8-GPU nodes with ratio 9', () => {
    expect(ringSpan(8, 8, 9)).toBe(1);
    expect(ringSpan(16, 8, 9)).toBeCloseTo(1 + (8 * 1) / 15, 12);
    expect(all2allSpan(16, 8, 9)).toBeCloseTo(1 + (8 * 8) / 15, 12);
  });
});

describe('host (reference §4.10 table)', () => {
  it('graph mode per batch', () => {
    expect(graphModeFor('FULL_AND_PIECEWISE', true)).toBe(GRAPH_FULL);
    expect(graphModeFor('FULL_AND_PIECEWISE', false)).toBe(GRAPH_PIECEWISE);
    expect(graphModeFor('FULL_DECODE_ONLY', false)).toBe(GRAPH_EAGER);
    expect(graphModeFor('FULL', false)).toBe(GRAPH_FULL);
    expect(graphModeFor('NONE', true)).toBe(GRAPH_EAGER);
  });
  it('past the largest capture: eager, never cheaper than captured', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 100, noNaN: true }), fc.double({ min: 0, max: 2000, noNaN: true }), fc.integer({ min: 1, max: 200 }), (rep, eager, pieces) => {
        for (const gm of [GRAPH_FULL, GRAPH_PIECEWISE]) {
          expect(launchUs(gm, true, rep, rep, pieces, eager)).toBeGreaterThanOrEqual(launchUs(gm, false, rep, rep, pieces, eager));
          expect(launchUs(gm, true, rep, rep, pieces, eager)).toBeGreaterThanOrEqual(eager);
        }
      }),
    );
  });
});
