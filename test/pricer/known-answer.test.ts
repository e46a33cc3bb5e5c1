/**
 * Hand-computed known answers: reference §4.8.1 (llama-3.1-8b on H200, bf16, tp 1, §1.5 coefficients,
 * decode at 1,024 context, FULL_AND_PIECEWISE → one full replay) and the §3.1 plan quantities.
 */
import { describe, expect, it } from 'vitest';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { BLIS_H100, BLIS_H200, makePricer } from './helpers.ts';

const h200 = loadRegistryFile(BLIS_H200);
const HBM_BYTES_PER_US = 4.8e6 * 0.8;
/** stepcal also reads the final norm over every row (2·4096·2 B/token); reference §4.8.1 omits it. */
const headNormUs = (b: number) => (b * 4 * 4096) / HBM_BYTES_PER_US;

describe('reference §4.8.1 worked vector', () => {
  const p = makePricer('llama-3.1-8b', 'h200', {}, h200);

  it('plan quantities of §3.1: 258 kernels, 131,072 KV bytes per token, bf16', () => {
    expect(p.info.kernels_decode_only).toBe(258);
    expect(p.info.kv_bytes_per_token_per_rank).toBe(131072);
    expect(p.info.total_layers).toBe(32);
    // 32 layers × 436,207,616 B + head 1,050,673,152 B + the input embedding 128,256 × 4,096 × 2 B
    expect(p.info.embedding_bytes_per_rank).toBe(128_256 * 4096 * 2);
    expect(p.info.weight_bytes_per_rank).toBe(32 * 436_207_616 + 1_050_673_152 + 1_050_673_152);
  });

  it('batch 1: NoOverlap 6922.6 µs, Overlap 5225.3 µs, SM 1697.3, HBM 4392.7, host 832.6', () => {
    const r = p.price(decodeBatch(1, 1023), { per_kind: true });
    expect(r.resources_us.host).toBeCloseTo(7 + 3.2 * 258, 9);
    expect(r.resources_us.sm).toBeCloseTo(1697.3, 1);
    expect(r.resources_us.hbm - headNormUs(1)).toBeCloseTo(4392.7, 1);
    expect(r.no_overlap_us - headNormUs(1)).toBeCloseTo(6922.6, 1);
    expect(r.overlap_us - headNormUs(1)).toBeCloseTo(5225.3, 1);
    expect(r.bottleneck).toBe('hbm');
    // per layer: SM 49.33 µs, HBM 128.72 µs (attention decode 15.118 µs inside it)
    const layer = r.per_kind!.find((k) => k.kind === 'gqa_dense')!;
    expect(layer.resources_us.sm / 32).toBeCloseTo(49.33, 2);
    expect(layer.resources_us.hbm / 32).toBeCloseTo(128.72, 2);
    // The only extrapolation: one token is below the compute-bound ridge the GEMM ramp is taken as
    // fitted above (the fixture states no range): 989.5e6 FLOPs/µs · 2 B / (2 · 4.8e6 B/µs) = 206.1.
    expect(r.extrapolation_notes).toEqual([
      "GEMM ramp below its fitted m range: the bf16 ramp at fewer than 206.1 tokens per step (gemm_m_half_bf16 states no fitted range; taken as h200's bf16 compute-bound ridge peak·bytes/(2·HBM) = 206.1)",
    ]);
  });

  it('batch 32: NoOverlap 9010.3 µs, Overlap 6839.0 µs, SM 2171.3, HBM 6006.4', () => {
    const r = p.price(decodeBatch(32, 1023), { per_kind: true });
    expect(r.resources_us.sm).toBeCloseTo(2171.3, 1);
    expect(r.resources_us.hbm - headNormUs(32)).toBeCloseTo(6006.4, 1);
    expect(r.no_overlap_us - headNormUs(32)).toBeCloseTo(9010.3, 1);
    expect(r.overlap_us - headNormUs(32)).toBeCloseTo(6839.0, 0);
    const layer = r.per_kind!.find((k) => k.kind === 'gqa_dense')!;
    expect(layer.resources_us.sm / 32).toBeCloseTo(63.1, 1);
    expect(layer.resources_us.hbm / 32).toBeCloseTo(179.15, 2);
  });

  it('piecewise capture (the seed: one replay per piece) adds 32 replays to the same batch', () => {
    const full = makePricer('llama-3.1-8b', 'h200', {}, h200).price(decodeBatch(8, 1023));
    const pw = makePricer('llama-3.1-8b', 'h200', { cudagraph_mode: 'PIECEWISE' }, h200).price(decodeBatch(8, 1023));
    expect(pw.resources_us.host - full.resources_us.host).toBeCloseTo(7 * 33 - 7, 9);
    expect(pw.resources_us.hbm).toBe(full.resources_us.hbm);
  });

  it('H100 fixture: the same laws with H100 coefficients (hand arithmetic)', () => {
    const r = makePricer('llama-3.1-8b', 'h100', {}, loadRegistryFile(BLIS_H100)).price(decodeBatch(1, 1023));
    const hbm = 3.35e6 * 0.8;
    const eff = 1.0 / 171;
    const sm = (32 * 436_207_616 + 1_050_673_152) / (989.5e6 * eff);
    const attn = 14.5 + (1024 * 4096) / 2_412_000;
    const hbmUs = (32 * 436_207_616 + 1_050_673_152 + 32 * 32768 + 16384) / hbm + 32 * attn;
    expect(r.resources_us.sm).toBeCloseTo(sm, 6);
    expect(r.resources_us.hbm).toBeCloseTo(hbmUs, 6);
    expect(r.no_overlap_us).toBeCloseTo(sm + hbmUs + 832.6, 6);
  });
});
