/** The MLA report section (src/report/fit-mla.ts, fit-mla-residuals.ts): residual plots and the missed-goal reason. */
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import type { MlaFit, MlaLawFit } from '../../src/fit/mla.ts';
import { emptyFamilyFit } from '../../src/fit/types.ts';
import { mlaSection } from '../../src/report/fit-mla.ts';
import { mlaMissReason } from '../../src/report/fit-mla-residuals.ts';

type Point = MlaLawFit['points'][number];
const pts = (n: number, p: Omit<Point, 'holdout' | 'heads'>): Point[] =>
  Array.from({ length: n }, (_, i) => ({ ...p, heads: 16, holdout: i % 4 === 0 }));

/**
 * 30 rows, floor 100 µs: 10 at the floor measured exactly (past 0, batch 1), 10 at the floor measured 200 µs
 * (past 0, batch 2: ln(100/200) = −0.6931, off by 2×), 10 far from the floor measured exactly (past 4095, batch 1).
 */
const law = (holdout: number): MlaLawFit => ({
  what: 'kernel decode, bf16 KV',
  priced: true,
  beta: [100, 1e-6, 1e-5],
  names: ['mla_decode_floor', 'mla_decode_rate', 'mla_decode_head_token'],
  train_geo: 1.3,
  holdout_geo: { all: holdout, context: 1.25, batch: 1.35 },
  context_name: 'past_tokens',
  points: [
    ...pts(10, { context: 0, batch: 1, measured_us: 100, predicted_us: 100 }),
    ...pts(10, { context: 0, batch: 2, measured_us: 200, predicted_us: 100 }),
    ...pts(10, { context: 4095, batch: 1, measured_us: 1000, predicted_us: 1000 }),
  ],
});
const familyFit = (l: MlaLawFit): MlaFit => ({ ...emptyFamilyFit('mla'), mla: [l] });

describe('mlaMissReason: the missed-goal sentence, from the rows', () => {
  it('states the floor-bound rows, the outliers and the worst values, hand-computed', () => {
    const s = mlaMissReason(law(1.3), 1.15);
    expect(s).toContain('Holdout geo 1.3 (along past_tokens 1.25, along batch 1.35) is above the 1.15× goal');
    expect(s).toContain("the fit rows miss it too (train geo 1.3), so the law's form");
    // The 20 floor-bound rows measure 10 × 100 and 10 × 200 µs: type-7 median 150, p10 100, p90 200;
    // geo exp(10 · 0.6931 / 20) = √2 = 1.414.
    expect(s).toContain(
      '20 rows are floor-bound (the fitted floor 100 µs is ≥ 90 % of their prediction): they measure median 150 µs (p10 100, p90 200, max 200), geo 1.414.',
    );
    // 10 of 30 rows off by 2× carry all the error; without them the law is exact.
    expect(s).toContain(
      '10 rows (33 %) are off by more than 1.5× and carry 100 % of the summed |ln error|; without them geo 1.',
    );
    // past 0: geo √2, bias 1/√2 = 0.7071; batch 2: geo 2, bias 0.5; heads 16 (all 30): geo exp(6.931/30) = 1.26.
    expect(s).toContain(
      'at past_tokens 0 (geo 1.414, bias 0.7071, 20 rows); batch 2 (geo 2, bias 0.5, 10 rows); heads 16 (geo 1.26, bias 0.7937, 30 rows).',
    );
    expect(s).not.toContain('4095');
  });
});

describe('mlaSection', () => {
  const chip = loadChip('a100');
  it('a law above 1.15×: the reason and both residual plots are linked and drawn', () => {
    const s = mlaSection(familyFit(law(1.3)), chip);
    expect(s.md).toContain('- **above the 1.15× goal.** Holdout geo 1.3 (along past_tokens 1.25');
    expect(s.md).toContain(
      '![kernel decode, bf16 KV: residuals along context](mla_kernel_decode_bf16_kv_residuals_context.svg)',
    );
    expect(s.md).toContain(
      '![kernel decode, bf16 KV: residuals along batch](mla_kernel_decode_bf16_kv_residuals_batch.svg)',
    );
    expect(s.figures.map((f) => f.name)).toEqual([
      'mla_kernel_decode_bf16_kv.svg',
      'mla_kernel_decode_bf16_kv_residuals_context.svg',
      'mla_kernel_decode_bf16_kv_residuals_batch.svg',
    ]);
    const ctx = s.figures[1]!.svg;
    expect(ctx.match(/<circle/g)).toHaveLength(30);
    expect(ctx).toContain('residuals along context (holdout geo 1.3)');
    expect(ctx).toContain('past_tokens + 1 (tokens)');
    expect(s.figures[2]!.svg).toContain('batch (requests)');
  });
  it('a law within 1.15×: residual plots, no missed-goal line', () => {
    const s = mlaSection(familyFit(law(1.1)), chip);
    expect(s.md).not.toContain('above the 1.15× goal');
    expect(s.md).toContain('(mla_kernel_decode_bf16_kv_residuals_batch.svg)');
  });
});
