import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import type { AttentionDecodeRow, AttentionPrefillRow } from '../../src/measurements/schema.ts';
import { decodeKvBytes, fitAttentionDecode, fitAttentionPrefill, prefillCausalFlops } from '../../src/fit/attention.ts';

const chip = loadChip('h200');
const ctx = (prior: Array<[string, number]> = []) => ({
  chip,
  inputs: [],
  bootstrap: { resamples: 200, seed: 11 },
  prior: new Map(prior),
});

function decodeRows(floor: number, rate: number, window = 0): AttentionDecodeRow[] {
  const rows: AttentionDecodeRow[] = [];
  for (const [n_q, n_kv, head_dim] of [
    [32, 8, 128],
    [64, 8, 128],
    [16, 2, 64],
    [8, 1, 128],
    [40, 4, 64],
  ] as const)
    for (const batch of [1, 4, 16, 64, 256])
      for (const context_tokens of [16, 128, 1024, 8192, 32768]) {
        const r = {
          chip: 'h200',
          lane: 't',
          kernel_source: 'fa3',
          batch,
          context_tokens,
          n_q,
          n_kv,
          head_dim,
          window,
          kv_dtype: 'bf16',
          latency_us: 0,
        };
        const t = floor + decodeKvBytes(r) / rate;
        for (const f of [1.2, 0.8, 1]) rows.push({ ...r, latency_us: t * f });
      }
  return rows;
}

describe('decode attention', () => {
  it('KV bytes = batch · context · 2 · n_kv · head_dim · bytes(kv_dtype); a window caps the context', () => {
    const r = { batch: 4, context_tokens: 1000, n_kv: 8, head_dim: 128, window: 0, kv_dtype: 'fp8' };
    expect(decodeKvBytes(r)).toBe(4 * 1000 * 2 * 8 * 128 * 1);
    expect(decodeKvBytes({ ...r, window: 256, kv_dtype: 'bf16' })).toBe(4 * 256 * 2 * 8 * 128 * 2);
  });

  it('recovers floor and rate (full and swa) from generated rows with ±20% repeats', () => {
    const fit = fitAttentionDecode([...decodeRows(13, 3.9e6), ...decodeRows(15, 0.9e6, 1024)], ctx());
    expect(fit.refusals).toEqual([]);
    const get = (n: string) => fit.coefficients.find((c) => c.name === n)!.entry;
    expect(get('attention_decode_floor').value).toBeCloseTo(13, 1);
    expect(get('attention_decode_rate').value / 3.9e6).toBeCloseTo(1, 2);
    expect(get('attention_decode_floor_swa').value).toBeCloseTo(15, 1);
    expect(get('attention_decode_rate_swa').value / 0.9e6).toBeCloseTo(1, 2);
    for (const n of ['attention_decode_floor', 'attention_decode_rate']) {
      const e = get(n);
      expect(e.units).toBe(n.includes('floor') ? 'us_per_transfer' : 'bytes_per_us');
      expect(e.ci95![0]).toBeLessThanOrEqual(e.value);
      expect(e.ci95![1]).toBeGreaterThanOrEqual(e.value);
      expect(e.evidence!.holdout_error!.split).toMatch(/head geometry/);
    }
    expect(get('attention_decode_rate_swa').evidence!.holdout_error).toBeUndefined(); // one window width only
    expect(fit.results[0]!.train.geo).toBeLessThan(1.001);
  });

  it('keeps cache-resident working sets out of the rate: rows below L2 that run faster do not move it', () => {
    const rows = decodeRows(13, 3.9e6);
    const l2 = 50 * 1024 * 1024;
    for (const r of rows) {
      const b = decodeKvBytes(r);
      if (b >= l2 / 16 && b < l2) r.latency_us = 13 + b / 1.2e7; // L2-speed reads
    }
    const fit = fitAttentionDecode(rows, ctx());
    const rate = fit.coefficients.find((c) => c.name === 'attention_decode_rate')!.entry.value;
    expect(rate / 3.9e6).toBeCloseTo(1, 2);
    expect(fit.coefficients.find((c) => c.name === 'attention_decode_floor')!.entry.value).toBeCloseTo(13, 1);
    expect(fit.results[0]!.excluded_cache_resident).toBeGreaterThan(0);
  });
});

describe('prefill attention', () => {
  it('causal FLOPs = batch · 4 · (S·C + S²/2) · n_q · head_dim', () => {
    expect(prefillCausalFlops({ batch: 2, new_tokens: 100, prefix_tokens: 50, n_q: 8, head_dim: 64 })).toBe(
      2 * 4 * (100 * 50 + 5000) * 8 * 64,
    );
  });

  it('recovers floor and work_scale given the bf16 ramp', () => {
    const eps = 0.9;
    const mh = 100;
    const peak = 989.5e6;
    const rows: AttentionPrefillRow[] = [];
    for (const [n_q, n_kv, head_dim] of [
      [32, 8, 128],
      [64, 8, 128],
      [16, 2, 64],
      [8, 1, 128],
      [40, 4, 64],
    ] as const)
      for (const batch of [1, 2, 8])
        for (const new_tokens of [16, 256, 2048, 8192]) {
          const r = {
            chip: 'h200',
            lane: 't',
            kernel_source: 'fa3',
            batch,
            new_tokens,
            prefix_tokens: 0,
            n_q,
            n_kv,
            head_dim,
            window: 0,
            dtype: 'bf16',
            kv_dtype: 'bf16',
            latency_us: 0,
          };
          const tokens = batch * new_tokens;
          r.latency_us = 20 + prefillCausalFlops(r) / (peak * ((eps * tokens) / (tokens + mh)) * 0.45);
          rows.push(r);
        }
    const fit = fitAttentionPrefill(
      rows,
      ctx([
        ['gemm_eps_max_bf16', eps],
        ['gemm_m_half_bf16', mh],
      ]),
    );
    expect(fit.refusals).toEqual([]);
    expect(fit.result!.floor_us).toBeCloseTo(20, 1);
    expect(fit.result!.work_scale).toBeCloseTo(0.45, 3);
    const noRamp = fitAttentionPrefill(rows, ctx());
    expect(noRamp.refusals.join()).toMatch(/bf16 GEMM ramp/);
  });
});
