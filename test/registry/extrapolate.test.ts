import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadChip, type Chip } from '../../src/core/catalog/chip.ts';
import { extrapolateFamily, mergeEntries, type ChipRegistry } from '../../src/registry/extrapolate.ts';
import {
  extrapolateCollectiveWidths,
  extrapolateWidth,
  fitFloorLine,
  floorAt,
  widthHoldoutMedians,
} from '../../src/fit/collective-width.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { errorsOf, validateRegistry } from '../../src/registry/validate.ts';
import { chipRegistry, clone, findEntry, REF_16RANK_FLOORS } from './fixtures.ts';

describe('collective width extrapolation', () => {
  it('fitFloorLine recovers a known line exactly (property)', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.5, max: 50, noNaN: true }), fc.double({ min: 0, max: 5, noNaN: true }), (a, b) => {
        const pts = [2, 4, 8].map((n) => ({ ranks: n, floor_us: a + b * (n - 1) }));
        const l = fitFloorLine(pts);
        expect(l.a_us).toBeCloseTo(a, 9);
        expect(l.b_us_per_rank).toBeCloseTo(b, 9);
        expect(floorAt(l, 16)).toBeCloseTo(a + 15 * b, 8);
      }),
    );
  });

  it("reproduces BLIS's published 16-rank (a) floors from the 2/4/8 floors (reference §1.5)", () => {
    for (const chip of ['h200', 'h100'] as const) {
      const res = extrapolateCollectiveWidths(chipRegistry(chip), chip, [16]);
      expect(res).toHaveLength(5);
      for (const r of res) {
        expect(r.status).toBe('extrapolated');
        const want = REF_16RANK_FLOORS[chip]![`${r.op}_${r.dtype}`]!;
        // BLIS prints two decimals; our floors are stored to 0.01 µs.
        expect(Math.abs(r.floor_us! - want)).toBeLessThanOrEqual(0.011);
      }
    }
    // Hand arithmetic, h200 all_reduce fp16: x = n−1 = 1,3,7; y = 4.38,4.43,4.71 → b = 1.06667/18.6667 = 0.057143,
    // a = 4.50667 − 0.057143·3.66667 = 4.29714; floor(16) = 4.29714 + 15·0.057143 = 5.1543 → 5.15.
    const ar = extrapolateCollectiveWidths(chipRegistry('h200'), 'h200').find(
      (r) => r.op === 'all_reduce' && r.dtype === 'fp16',
    )!;
    expect(ar.line!.b_us_per_rank).toBeCloseTo(0.0571429, 6);
    expect(ar.line!.a_us).toBeCloseTo(4.297143, 5);
    expect(ar.floor_us).toBe(5.15);
  });

  it('holds out the widest width (4→8) and reports predicted/measured', () => {
    const res = extrapolateCollectiveWidths(chipRegistry('h200'), 'h200');
    const ar = res.find((r) => r.op === 'all_reduce' && r.dtype === 'fp16')!;
    // line through (1, 4.38), (3, 4.43): slope 0.025 → pred(8) = 4.43 + 4·0.025 = 4.53; 4.53/4.71 = 0.96178
    expect(ar.holdout!.predicted_us).toBeCloseTo(4.53, 10);
    expect(ar.holdout!.ratio).toBeCloseTo(4.53 / 4.71, 10);
    const ag = res.find((r) => r.op === 'all_gather')!;
    // (1, 5.08), (3, 7.13): slope 1.025 → pred(8) = 7.13 + 4·1.025 = 11.23; /10.3 = 1.0903
    expect(ag.holdout!.ratio).toBeCloseTo(11.23 / 10.3, 10);
    const med = widthHoldoutMedians([...res, ...extrapolateCollectiveWidths(chipRegistry('h100'), 'h100')]);
    expect(Object.keys(med).sort()).toEqual(['all_gather', 'all_reduce', 'alltoall', 'reduce_scatter']);
    expect(med.all_reduce!.n).toBe(4); // 2 chips × 2 dtypes
  });

  it('stores assumed entries flagged with evidence.extrapolation, rates copied from the widest width; the result validates', () => {
    const sets = chipRegistry('h200');
    const res = extrapolateCollectiveWidths(sets, 'h200');
    const add = res.flatMap((r) => r.entries.map((e) => ({ ...e, set: 'cost-model-collectives' })));
    expect(add).toHaveLength(15);
    const merged = mergeEntries(sets, add);
    expect(merged.added).toHaveLength(15);
    const floor = findEntry(merged.sets, 'collective_floor_all_reduce_fp16_16rank_h200');
    expect(floor).toMatchObject({ value: 5.15, method: 'assumed', fitted: false, units: 'us_per_transfer' });
    expect(floor.evidence!.extrapolation!.predictor).toBe('floor_linear_in_ranks');
    expect(floor.evidence!.extrapolation!.from).toEqual(['h200:2rank', 'h200:4rank', 'h200:8rank']);
    expect(floor.rationale).toMatch(/Not measured/);
    const peak = findEntry(merged.sets, 'collective_peak_rate_all_reduce_fp16_16rank_h200');
    expect(peak.value).toBe(134_260);
    expect(peak.rationale).toMatch(/lower bound on transfer time/);
    expect(errorsOf(validateRegistry(merged.sets, 'x'))).toEqual([]);
    // Re-running on the extended registry replaces the assumed entries (never fits on them).
    const again = extrapolateCollectiveWidths(merged.sets, 'h200');
    expect(again.map((r) => r.floor_us)).toEqual(res.map((r) => r.floor_us));
  });

  it('refuses a prediction below the widest measured floor', () => {
    const pts = [
      { ranks: 2, floor_us: 9, lane: 'nccl' },
      { ranks: 4, floor_us: 8, lane: 'nccl' },
      { ranks: 8, floor_us: 6, peak_rate_bytes_per_us: 1e5, lane: 'nccl' },
    ];
    const r = extrapolateWidth('x', 'all_reduce', 'fp16', pts, 16);
    expect(r.status).toBe('refused');
    expect(r.reason).toMatch(/below the widest measured floor 6 µs/);
    expect(r.entries).toEqual([]);
  });

  it('refuses a fit across lanes, and too few widths for a holdout', () => {
    const sets = clone(chipRegistry('h200'));
    findEntry(sets, 'collective_floor_all_reduce_fp16_8rank_h200').evidence!.lane = 'custom_graph-vllm-0.24.0';
    const r = extrapolateCollectiveWidths(sets, 'h200').find((x) => x.op === 'all_reduce' && x.dtype === 'fp16')!;
    expect(r.status).toBe('refused');
    expect(r.reason).toMatch(/more than one lane/);
    const two = extrapolateWidth(
      'x',
      'alltoall',
      'fp16',
      [
        { ranks: 2, floor_us: 6, lane: 'a' },
        { ranks: 4, floor_us: 7, peak_rate_bytes_per_us: 1, lane: 'a' },
      ],
      16,
    );
    expect(two.status).toBe('refused');
    expect(two.reason).toMatch(/no same-lane holdout/);
  });
});

describe('missing family by generation', () => {
  /** A hypothetical Hopper part: h100's facts renamed, HBM 4.0 TB/s. */
  function newHopper(): Chip {
    const h100 = loadChip('h100');
    return { ...h100, name: 'hnew', hbm_tb_per_s: 4.0, hbm_bytes_per_us: 4.0e6 };
  }
  const reg = (chip: Chip, sets: CoefficientSet[]): ChipRegistry => ({ chip, sets });

  it('refuses with no sibling, and with one sibling (no holdout)', () => {
    const b200 = loadChip('b200');
    const r0 = extrapolateFamily(reg(b200, []), [reg(loadChip('h100'), chipRegistry('h100'))], 'attention_decode');
    expect(r0.status).toBe('refused');
    expect(r0.reason).toMatch(/no same-generation sibling/);
    const r1 = extrapolateFamily(
      reg(newHopper(), []),
      [reg(loadChip('h200'), chipRegistry('h200'))],
      'attention_decode',
    );
    expect(r1.status).toBe('refused');
    expect(r1.reason).toMatch(/only one same-generation sibling \(h200\)/);
  });

  it('chooses by leave-one-chip-out holdout and records predictor, error and chips', () => {
    const h100 = loadChip('h100');
    const h200 = loadChip('h200');
    const others = [reg(h100, chipRegistry('h100')), reg(h200, chipRegistry('h200'))];
    // The new part has everything but decode attention (its prefill floor anchors the ratio predictor).
    const sets = clone(chipRegistry('h200'));
    for (const s of sets) for (const c of s.coefficients) c.entry.scope = { hardware: ['hnew'] };
    for (const s of sets) if (s.name === 'cost-model-collectives') s.coefficients = [];
    const att = sets.find((s) => s.name === 'cost-model-attention')!;
    att.coefficients = att.coefficients.filter((c) => !c.name.startsWith('attention_decode'));
    findEntry(sets, 'attention_prefill_floor').value = 20;
    const target = reg(newHopper(), sets);
    const r = extrapolateFamily(target, others, 'attention_decode');
    expect(r.status).toBe('extrapolated');
    expect(r.siblings).toEqual(['h100', 'h200']);
    const rate = r.coefficients.find((c) => c.name === 'attention_decode_rate')!;
    // LOCO for the rate: generation median predicts h100 by h200's 2,592,000 (vs 2,412,000) and back:
    //   geo = exp(mean |ln(2592/2412)|) = 1.07463.
    // ratio to HBM: h100 = 2,412,000/3,350,000 = 0.72, h200 = 0.54 → predict h100 = 0.54·3.35e6 = 1,809,000,
    //   h200 = 0.72·4.8e6 = 3,456,000; geo = exp(mean(ln(2412/1809), ln(3456/2592))) = 1.3333.
    const med = rate.scores.find((s) => s.predictor === 'generation_median')!;
    const ratio = rate.scores.find((s) => s.predictor === 'ratio_to_datasheet_hbm_bytes_per_us')!;
    expect(med.holdout_geo).toBeCloseTo(2592 / 2412, 6);
    expect(ratio.holdout_geo).toBeCloseTo(4 / 3, 6);
    expect(rate.predictor).toBe('generation_median');
    expect(rate.value).toBe(2_502_000); // median of 2,412,000 and 2,592,000
    expect(rate.entry!.entry).toMatchObject({ method: 'assumed', fitted: false, scope: { hardware: ['hnew'] } });
    expect(rate.entry!.entry.evidence!.extrapolation).toEqual({
      predictor: 'generation_median',
      from: ['h100', 'h200'],
      holdout_error: { geo: med.holdout_geo, mape_pct: med.holdout_mape_pct, n: 2 },
    });
    // The decode floors use the within-chip ratio to the prefill floor when it holds out better:
    // 13.5/18.5 = 0.72973 (h200), 14.5/19.5 = 0.74359 (h100): ratio predicts h100 = 0.72973·19.5 = 14.2297
    // (geo ≈ 1.019) vs median (h200's 13.5 for h100: geo 1.0741) → ratio wins.
    const floor = r.coefficients.find((c) => c.name === 'attention_decode_floor')!;
    expect(floor.predictor).toBe('ratio_to_attention_prefill_floor');
    expect(floor.value).toBe(Number((((13.5 / 18.5 + 14.5 / 19.5) / 2) * 20).toPrecision(4)));
    const merged = mergeEntries(
      target.sets,
      r.coefficients.filter((c) => c.entry).map((c) => c.entry!),
    );
    expect(
      errorsOf(validateRegistry(merged.sets, 'x', { chip: (n) => (n === 'hnew' ? newHopper() : loadChip(n)) })),
    ).toEqual([]);
  });

  it('skips when the family is present, and never fills a dtype the chip has no peak for', () => {
    const a100 = loadChip('a100');
    const l40s = loadChip('l40s');
    const fake = (chip: string, v: number): CoefficientSet[] => [
      {
        kind: 'CoefficientSet',
        name: 'cost-model-primitives',
        coefficients: [
          {
            name: 'gemm_eps_max_fp8',
            entry: {
              value: v,
              units: 'dimensionless',
              method: 'measured',
              fitted: true,
              scope: { hardware: [chip] },
              sources: [{ kind: 'model', cite: 'x', role: 'primary' }],
            },
          },
        ],
      },
    ];
    const anotherAda: Chip = { ...l40s, name: 'l4x' };
    const r = extrapolateFamily(
      reg(a100, []),
      [reg(l40s, fake('l40s', 0.7)), reg(anotherAda, fake('l4x', 0.8))],
      'gemm',
    );
    expect(r.coefficients[0]!.status).toBe('refused');
    expect(r.coefficients[0]!.reason).toMatch(/no native fp8 peak/);
    expect(r.status).toBe('refused');
  });
});
