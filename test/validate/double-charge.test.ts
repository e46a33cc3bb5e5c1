/**
 * Issue 7's known trap: a GEMM ramp fitted with memory-bound small-m rows already contains the
 * weight-read time, so NoOverlap charges the weights twice on decode steps. Priced with the real
 * pricer: with a compute-only ramp (small m_half, as the fitter produces by keeping memory-bound
 * rows out) a batch-1 decode step's SM time is a small fraction of its HBM time, so the weights are
 * not re-charged as SM time; with BLIS's ramp (m_half 170, fitted on every row) SM time at m = 1 is
 * close to half the weight read again, and the validation check flags it.
 */
import { describe, expect, it } from 'vitest';
import { loadRegistryFile } from '../../src/registry/load.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { validateRows } from '../../src/validate/run.ts';
import { defaultValidationDeps } from '../../src/validate/pricing.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import { stepsCsv } from './fake-pricer.ts';

const BLIS = loadRegistryFile('test/fixtures/registry/blis-h100.yaml');

function withMHalf(sets: CoefficientSet[], m_half: number): CoefficientSet[] {
  return sets.map((s) => ({
    ...s,
    coefficients: s.coefficients.map((c) =>
      c.name === 'gemm_m_half_bf16' ? { name: c.name, entry: { ...c.entry, value: m_half } } : c,
    ),
  }));
}

const rows = parseStepsCsv(
  stepsCsv(
    [1, 2, 4].map((n) => ({
      model: 'llama-2-70b',
      chip: 'h100',
      tp: 2,
      weight_dtype: 'fp16',
      engine: 'e',
      source: 't',
      kind: 'step',
      prefill_requests: 0,
      prefill_tokens: 0,
      decode_requests: n,
      decode_context_tokens: 576 * n,
      measured_us: 40000,
    })),
  ),
  'dc.steps.csv',
).rows;

describe('decode steps are not double-charged for weights', () => {
  it('compute-only ramp: SM at batch 1 is a small fraction of HBM; the check passes', () => {
    const v = validateRows(rows, { chip: 'h100' }, defaultValidationDeps(withMHalf(BLIS, 1)));
    const r = v.rows[0]!;
    // fp16 70B weights over tp 2 ≈ 69 GB per GPU: HBM ≥ 69e9 / (3.35e6 B/µs) ≈ 20.6 ms even at derate 1
    expect(r.resources_us.hbm).toBeGreaterThan(20_000);
    // SM = 2·(GEMM params/tp)·m / (989 TFLOP/s · eps(1)), eps(1) = 1 · 1/(1 + 1) = 0.5 → ≈ 0.14 ms
    expect(r.resources_us.sm / r.resources_us.hbm).toBeLessThan(0.02);
    expect(v.double_charge!.suspicious).toBe(false);
    // NoOverlap − Overlap on a decode step is then small (weights are charged once, to HBM)
    expect((r.predicted_us.no_overlap - r.predicted_us.overlap) / r.predicted_us.no_overlap).toBeLessThan(0.15);
  });

  it('a ramp fitted on memory-bound rows re-charges the weight read as SM time, and the check flags it', () => {
    const v = validateRows(rows, { chip: 'h100' }, defaultValidationDeps(BLIS));
    const r = v.rows[0]!;
    // eps(1) = 1/171: SM/HBM ≈ 171 · 0.8 / (989/3.35) ≈ 0.46 (1 FLOP per weight byte at m = 1)
    expect(r.resources_us.sm / r.resources_us.hbm).toBeGreaterThan(0.4);
    expect(r.resources_us.sm / r.resources_us.hbm).toBeLessThan(0.5);
    expect(v.double_charge!.suspicious).toBe(true);
    expect(v.double_charge!.note).toMatch(/may contain the weight reads/);
  });
});
