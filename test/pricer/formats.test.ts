/**
 * Formats (issue 14 item 4; seed "Arithmetic rates"): block-scaled bytes from the one shared definition
 * (core/catalog/dtypes.ts), MXFP8 on Hopper at the bf16 weight-only rate and on Blackwell at its own ramp
 * where measured, FP32 weights at the TF32 rate, grouped four-bit experts on their own fitted efficiency.
 * Every expected value is hand arithmetic written out below.
 */
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { bytesPerElement, EXPERT_DTYPES, expertComputeDtype } from '../../src/core/catalog/dtypes.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { computeFormat, servedDtype } from '../../src/pricer/deployment.ts';
import { BLIS_H200, makePricer, syntheticSets } from './helpers.ts';

const h200 = loadRegistryFile(BLIS_H200);

/** Copy of sets with extra primitives entries (value only; scope from the first entry of the set). */
function withPrimitives(sets: CoefficientSet[], extra: Record<string, number>): CoefficientSet[] {
  return sets.map((s) => {
    if (s.name !== 'cost-model-primitives') return s;
    const base = s.coefficients[0]!.entry;
    const add = Object.entries(extra).map(([name, value]) => ({
      name,
      entry: { ...base, value, units: 'dimensionless' as const, ci95: undefined, evidence: undefined },
    }));
    return { ...s, coefficients: [...s.coefficients.filter((c) => !(c.name in extra)), ...add] };
  });
}

describe('block-scaled bytes per value (one shared definition)', () => {
  it('nvfp4 (16·4/8 + 1)/16 = 0.5625, mxfp4 (32·4/8 + 1)/32 = 0.53125, mxfp8 (32 + 1)/32 = 1.03125', () => {
    expect(bytesPerElement('nvfp4')).toBe(0.5625);
    expect(bytesPerElement('mxfp4')).toBe(0.53125);
    expect(bytesPerElement('mxfp8')).toBe(1.03125);
    expect(bytesPerElement('int4')).toBe(0.5);
  });

  it('the pricer counts nvfp4 weights with their scales: llama-3.1-8b layers 436,207,616 B bf16 → ×0.5625/2', () => {
    const p = makePricer('llama-3.1-8b', 'h200', { weight_dtype: 'nvfp4' }, h200);
    // 218,103,808 values per layer × 0.5625 B = 122,683,392 B; lm_head and embedding stay bf16.
    expect(p.info.weight_bytes_per_rank).toBe(32 * 122_683_392 + 2 * 1_050_673_152);
    const choice = p.info.formats.find((f) => f.weight_dtype === 'nvfp4')!;
    expect(choice.bytes_per_value).toBe(0.5625);
    // h200 has no four-bit peak: the bf16 rate of the weight-only kernels.
    expect(choice).toMatchObject({ use: 'dense', ramp: 'bf16', peak_tflops: 989.5 });
  });
});

describe('mxfp8', () => {
  it('--weight-dtype mxfp8 is accepted', () => {
    expect(servedDtype('mxfp8', 'bf16')).toBe('mxfp8');
    expect(servedDtype('MXFP8', 'bf16')).toBe('mxfp8');
  });

  it('Hopper: bf16 ramp at the bf16 peak; the SM time equals bf16 weights, the weight read is ×1.03125/2', () => {
    const bf = makePricer('llama-3.1-8b', 'h200', {}, h200).price(decodeBatch(1, 1023), { per_kind: true });
    const mx = makePricer('llama-3.1-8b', 'h200', { weight_dtype: 'mxfp8', kv_dtype: 'bf16' }, h200);
    const r = mx.price(decodeBatch(1, 1023), { per_kind: true });
    expect(r.resources_us.sm).toBeCloseTo(bf.resources_us.sm, 9);
    expect(r.resources_us.sm).toBeCloseTo(1697.3, 1); // reference §4.8.1 batch 1
    // per layer HBM: 436,207,616 B at 4.8e6 · 0.8 B/µs = 113.596 µs bf16; mxfp8 reads 218,103,808 · 1.03125 B.
    const layerBf = bf.per_kind!.find((k) => k.kind === 'gqa_dense')!.resources_us.hbm / 32;
    const layerMx = r.per_kind!.find((k) => k.kind === 'gqa_dense')!.resources_us.hbm / 32;
    expect(layerBf - layerMx).toBeCloseTo((436_207_616 - 218_103_808 * 1.03125) / (4.8e6 * 0.8), 6);
    expect(mx.info.formats.find((f) => f.weight_dtype === 'mxfp8')).toMatchObject({ ramp: 'bf16', peak_tflops: 989.5 });
    expect(mx.info.assumptions.some((a) => a.includes('no MX tensor cores'))).toBe(true);
  });

  it('Blackwell: its own gemm_*_mxfp8 ramp at the fp8 peak where the registry has it, else the fp8 ramp (noted)', () => {
    const b200 = loadChip('b200');
    expect(computeFormat('mxfp8', b200, (s) => s === 'mxfp8')).toEqual({ ramp: 'mxfp8', peak_flops_per_us: 4500e6 });
    const fb = computeFormat('mxfp8', b200, () => false);
    expect(fb).toMatchObject({ ramp: 'fp8', peak_flops_per_us: 4500e6 });
    expect(fb.note).toContain('no gemm_*_mxfp8 ramp');
    expect(computeFormat('mxfp8', loadChip('h100'), () => true)).toMatchObject({
      ramp: 'bf16',
      peak_flops_per_us: 989.5e6,
    });
    // A measured mxfp8 ramp is used by the pricer: ε_max 0.5 vs the fp8 ramp's, same peak.
    const sets = syntheticSets('b200');
    const withMx = withPrimitives(sets, { gemm_eps_max_mxfp8: 0.5, gemm_m_half_mxfp8: 0 });
    const p = makePricer('llama-3.1-8b', 'b200', { weight_dtype: 'mxfp8' }, withMx);
    expect(p.info.formats.find((f) => f.weight_dtype === 'mxfp8')).toMatchObject({ ramp: 'mxfp8', peak_tflops: 4500 });
    // m_half 0 → ε = 0.5 flat: one layer's GEMMs 2·218,103,808 FLOPs/token... per token 436,207,616 FLOPs
    // at 4500e6 · 0.5 FLOPs/µs = 0.193870 µs per token; 32 layers at 64 tokens.
    const r = p.price(decodeBatch(64, 1023), { per_kind: true });
    const layer = r.per_kind!.find((k) => k.kind === 'gqa_dense')!;
    const attnFlopsPerToken = 0; // decode attention is HBM, not SM
    expect(layer.resources_us.sm / 32).toBeCloseTo((64 * (436_207_616 + attnFlopsPerToken)) / (4500e6 * 0.5), 6);
  });
});

describe('fp32 weights at the tf32 rate', () => {
  it('h200: the bf16 ramp at 494.7 TFLOP/s, 4 B per value', () => {
    const p = makePricer('llama-3.1-8b', 'h200', { weight_dtype: 'fp32' }, h200);
    expect(p.info.formats.find((f) => f.weight_dtype === 'fp32')).toMatchObject({
      use: 'dense',
      ramp: 'bf16',
      peak_tflops: 494.7,
      bytes_per_value: 4,
    });
    const bf = makePricer('llama-3.1-8b', 'h200', {}, h200).price(decodeBatch(64, 1023), { per_kind: true });
    const r = p.price(decodeBatch(64, 1023), { per_kind: true });
    const sm = (x: typeof r) => x.per_kind!.find((k) => k.kind === 'gqa_dense')!.resources_us.sm;
    // Same ramp, peak 989.5 → 494.7: the layers' GEMM time scales by 989.5 / 494.7.
    expect(sm(r) / sm(bf)).toBeCloseTo(989.5 / 494.7, 9);
  });
});

describe('grouped four-bit experts on their own fitted efficiency', () => {
  it('mxfp4 and int4 experts are weight-only: their law runs at the bf16 peak', () => {
    expect(EXPERT_DTYPES).toEqual(['bf16', 'fp8', 'fp8_block', 'nvfp4', 'mxfp4', 'int4']);
    expect(expertComputeDtype('mxfp4')).toBe('bf16');
    expect(expertComputeDtype('int4')).toBe('bf16');
    expect(expertComputeDtype('nvfp4')).toBe('nvfp4');
  });

  it('gpt-oss-120b (mxfp4 experts) on h200: 36 layers × 32 pairs × 2·3·2880·2880 FLOPs / (989.5e6 · ε)', () => {
    const price = (eps: number) => {
      const sets = withPrimitives(h200, { moe_expert_eps_max_mxfp4: eps });
      const p = makePricer('gpt-oss-120b', 'h200', {}, sets);
      return { p, r: p.price(decodeBatch(8, 1023), { per_kind: true }) };
    };
    const a = price(0.5);
    const b = price(0.25);
    expect(a.p.info.formats.find((f) => f.use === 'experts')).toMatchObject({
      weight_dtype: 'mxfp4',
      ramp: 'moe_expert_mxfp4',
      peak_tflops: 989.5,
      bytes_per_value: 0.53125,
    });
    // No floor, m_half or route entry: experts' SM = pairs · W / (peak · ε); 8 tokens × top-4 = 32 pairs.
    const perLayerAt05 = (32 * 2 * 3 * 2880 * 2880) / (989.5e6 * 0.5); // 3.21885 µs
    expect(perLayerAt05).toBeCloseTo(3.21885, 4);
    expect(b.r.resources_us.sm - a.r.resources_us.sm).toBeCloseTo(36 * perLayerAt05, 6);
  });

  it('nvfp4 experts on h200 (no four-bit peak, no nvfp4 law) borrow the measured mxfp4 weight-only law at nvfp4 bytes', () => {
    const price = (eps: number) => {
      const sets = withPrimitives(h200, { moe_expert_eps_max_mxfp4: eps });
      const p = makePricer('qwen3-30b-a3b', 'h200', { weight_dtype: 'nvfp4' }, sets);
      return { p, r: p.price(decodeBatch(8, 1023), { per_kind: true }) };
    };
    const a = price(0.5);
    const b = price(0.25);
    const e = a.p.info.formats.find((f) => f.use === 'experts')!;
    expect(e).toMatchObject({
      weight_dtype: 'nvfp4',
      ramp: 'moe_expert_mxfp4',
      peak_tflops: 989.5,
      bytes_per_value: 0.5625,
    });
    expect(e.note).toContain('priced on the fitted moe_expert_mxfp4 law');
    // 8 tokens × top-8 = 64 pairs per layer, W = 2·3·2048·768 FLOPs per pair, 48 layers, tp 1.
    const perLayerAt05 = (64 * 2 * 3 * 2048 * 768) / (989.5e6 * 0.5); // 603,979,776 / 494.75e6 = 1.22078 µs
    expect(perLayerAt05).toBeCloseTo(1.22078, 4);
    expect(b.r.resources_us.sm - a.r.resources_us.sm).toBeCloseTo(48 * perLayerAt05, 6);
  });

  it('without the entry the experts fall back to the dense ramp, and --json says so', () => {
    const p = makePricer('gpt-oss-120b', 'h200', {}, h200);
    const e = p.info.formats.find((f) => f.use === 'experts')!;
    expect(e.ramp).toBe('dense_ramp:bf16');
    expect(e.note).toContain('no moe_expert_eps_max_mxfp4');
  });
});
