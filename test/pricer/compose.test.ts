/**
 * The three estimates of the composition site (src/pricer/compose.ts): Overlap ≤ CMOverlap ≤ NoOverlap,
 * hand arithmetic, determinism, and CMOverlap's one-for-one response to collective time.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { ACC_LEN, composeHead, composeHost, composeLayers, finishStep } from '../../src/pricer/compose.ts';
import type { Batch, Request } from '../../src/pricer/types.ts';
import { inflate, makePricer, syntheticSets } from './helpers.ts';

const t = fc.double({ min: 0, max: 1e6, noNaN: true });
const layerArb = fc.record({
  count: fc.integer({ min: 1, max: 128 }),
  sm: t,
  hbm: t,
  nvlink: t,
  nic: t,
  esm: t,
  ehbm: t,
});

interface Layer {
  count: number;
  sm: number;
  hbm: number;
  nvlink: number;
  nic: number;
  esm: number;
  ehbm: number;
}

function compose(layers: readonly Layer[], head: [number, number], host: number) {
  const acc = new Float64Array(ACC_LEN);
  for (const l of layers) composeLayers(acc, l.count, l.sm, l.hbm, l.nvlink, l.nic, l.esm, l.ehbm);
  composeHead(acc, head[0], head[1]);
  composeHost(acc, host);
  return finishStep(acc, []);
}

describe('composition site: three estimates', () => {
  it('hand arithmetic: two layer kinds, head and host', () => {
    // kind A ×3: sm 10, hbm 4, nvlink 2, nic 1, experts 0.5 + 0.25; kind B ×2: sm 3, hbm 7, nvlink 5
    // head sm 6 hbm 9; host 20.
    const p = compose(
      [
        { count: 3, sm: 10, hbm: 4, nvlink: 2, nic: 1, esm: 0.5, ehbm: 0.25 },
        { count: 2, sm: 3, hbm: 7, nvlink: 5, nic: 0, esm: 0, ehbm: 0 },
      ],
      [6, 9],
      20,
    );
    // Overlap   = 3·(10 + 0.75) + 2·7 + 9 + 20 = 75.25
    // CMOverlap = 3·(10 + 2 + 1 + 0.75) + 2·(7 + 5) + 9 + 20 = 94.25
    // NoOverlap = sm (3·10.5 + 2·3 + 6) + hbm (3·4.25 + 2·7 + 9) + nvlink 16 + nic 3 + host 20 = 118.25
    expect(p.overlap_us).toBe(75.25);
    expect(p.compute_memory_overlap_us).toBe(94.25);
    expect(p.no_overlap_us).toBe(118.25);
  });

  it('Overlap ≤ CMOverlap ≤ NoOverlap for any non-negative terms (fast-check)', () => {
    fc.assert(
      fc.property(fc.array(layerArb, { maxLength: 6 }), t, t, t, (layers, hs, hh, host) => {
        const p = compose(layers, [hs, hh], host);
        expect(p.overlap_us).toBeLessThanOrEqual(p.compute_memory_overlap_us);
        expect(p.compute_memory_overlap_us).toBeLessThanOrEqual(p.no_overlap_us);
      }),
      { numRuns: 300 },
    );
  });

  it('adding δ to one kind’s NVLink (or NIC) time moves CMOverlap by count · δ, one for one (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.array(layerArb, { minLength: 1, maxLength: 5 }),
        fc.double({ min: 0, max: 1e4, noNaN: true }),
        fc.boolean(),
        (layers, delta, nic) => {
          const base = compose(layers, [1, 2], 3);
          const bumped = layers.map((l, i) =>
            i === 0 ? { ...l, ...(nic ? { nic: l.nic + delta } : { nvlink: l.nvlink + delta }) } : l,
          );
          const more = compose(bumped, [1, 2], 3);
          const want = layers[0]!.count * delta;
          const tol = 1e-9 * (base.no_overlap_us + want) + 1e-9;
          expect(Math.abs(more.compute_memory_overlap_us - base.compute_memory_overlap_us - want)).toBeLessThanOrEqual(
            tol,
          );
          expect(Math.abs(more.no_overlap_us - base.no_overlap_us - want)).toBeLessThanOrEqual(tol);
          // Overlap hides collective time under the layer's max: it moves by at most count · δ.
          expect(more.overlap_us - base.overlap_us).toBeLessThanOrEqual(want + tol);
        },
      ),
      { numRuns: 200 },
    );
  });
});

const reqArb = fc.record({
  scheduled_tokens: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3000 })),
  computed_tokens: fc.integer({ min: 0, max: 20000 }),
  prompt_tokens: fc.constant(0),
});

describe('the real pricer: CMOverlap', () => {
  const pricers = [
    makePricer('llama-3.1-8b', 'h200', {}),
    makePricer('gpt-oss-120b', 'h200', { tp: 4 }),
    makePricer('deepseek-v3', 'h200', { tp: 8, weight_dtype: 'fp8', speculative: { num_spec_tokens: 1 } }),
    makePricer('llama-3.1-70b', 'h200', { tp: 16 }),
  ];

  it('Overlap ≤ CMOverlap ≤ NoOverlap and repeat pricing is bit-identical (fast-check)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: pricers.length - 1 }), fc.array(reqArb, { maxLength: 30 }), (i, reqs) => {
        const p = pricers[i]!;
        const a = p.price({ requests: reqs as Request[] });
        expect(a.overlap_us).toBeLessThanOrEqual(a.compute_memory_overlap_us);
        expect(a.compute_memory_overlap_us).toBeLessThanOrEqual(a.no_overlap_us);
        const b = p.price({ requests: reqs as Request[] });
        expect(Object.is(b.compute_memory_overlap_us, a.compute_memory_overlap_us)).toBe(true);
        expect(Object.is(b.overlap_us, a.overlap_us)).toBe(true);
        expect(Object.is(b.no_overlap_us, a.no_overlap_us)).toBe(true);
      }),
      { numRuns: 120 },
    );
  });

  it('equals Σ_kinds (max(SM, HBM) + NVLink + NIC) + host from the per-kind breakdown (dense model)', () => {
    const p = makePricer('llama-3.1-70b', 'h200', { tp: 8 });
    for (const b of [
      decodeBatch(8, 2000),
      prefillBatch(2, 1024),
      { requests: [...decodeBatch(64, 3000).requests, ...prefillBatch(1, 512).requests] } as Batch,
    ]) {
      const r = p.price(b, { per_kind: true });
      const kinds = r.per_kind!;
      expect(kinds.every((k) => k.experts_us === 0)).toBe(true);
      const cm =
        kinds.reduce(
          (a, k) => a + Math.max(k.resources_us.sm, k.resources_us.hbm) + k.resources_us.nvlink + k.resources_us.nic,
          0,
        ) + r.resources_us.host;
      expect(r.compute_memory_overlap_us).toBeCloseTo(cm, 6);
      // the three differ on this deployment: weights and arithmetic overlap, the all-reduces do not
      expect(r.compute_memory_overlap_us).toBeLessThan(r.no_overlap_us);
      expect(r.compute_memory_overlap_us).toBeGreaterThan(r.overlap_us);
    }
  });

  it('inflating the all-reduce floor moves CMOverlap by exactly the NVLink increase', () => {
    const sets = syntheticSets('h200');
    const name = 'collective_floor_all_reduce_fp16_8rank_h200';
    for (const b of [decodeBatch(16, 2000), prefillBatch(1, 2048)]) {
      const base = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets).price(b);
      const more = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, inflate(sets, name, 3)).price(b);
      const dNvl = more.resources_us.nvlink - base.resources_us.nvlink;
      expect(dNvl).toBeGreaterThan(0);
      expect(more.compute_memory_overlap_us - base.compute_memory_overlap_us).toBeCloseTo(dNvl, 6);
      expect(more.no_overlap_us - base.no_overlap_us).toBeCloseTo(dNvl, 6);
    }
  });

  it('sm_scale multiplies SM time only; CMOverlap sees max(s·SM, HBM); a non-positive scale is refused', () => {
    const sets = syntheticSets('h200');
    const b = prefillBatch(2, 1024);
    const one = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets).price(b, { per_kind: true });
    const same = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets, { sm_scale: 1 }).price(b, { per_kind: true });
    expect(same).toEqual(one);
    const two = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets, { sm_scale: 2 }).price(b, { per_kind: true });
    expect(two.resources_us.sm).toBeCloseTo(2 * one.resources_us.sm, 6);
    for (const r of ['hbm', 'nvlink', 'nic', 'host'] as const) expect(two.resources_us[r]).toBe(one.resources_us[r]);
    const cm =
      two.per_kind!.reduce(
        (a, k) => a + Math.max(k.resources_us.sm, k.resources_us.hbm) + k.resources_us.nvlink + k.resources_us.nic,
        0,
      ) + two.resources_us.host;
    expect(two.compute_memory_overlap_us).toBeCloseTo(cm, 6);
    expect(() => makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets, { sm_scale: 0 })).toThrow(
      /sm_scale must be a finite number > 0/,
    );
    expect(() => makePricer('llama-3.1-70b', 'h200', { tp: 8 }, sets, { sm_scale: NaN })).toThrow(/sm_scale/);
  });
});
