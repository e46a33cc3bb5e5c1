/**
 * KV dtype auto follows the checkpoint's declared KV-cache format (docs/pricer.md DECISION "KV dtype auto follows
 * the checkpoint", retiring KNOWN DIVERGENCE 32; vLLM PR #29980). Known answers on the shipped b200 registry.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadModel, stringifyGraph } from '../../src/core/catalog/model.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { kvBytesPerElement, servedDtype } from '../../src/pricer/deployment.ts';
import { setupPricer } from '../../src/pricer/setup.ts';

const batch = decodeBatch(64, 8192);
const setup = (model: string, kv_dtype?: string, chip = 'b200', tp = 4) =>
  setupPricer(model, chip, { tp, ...(kv_dtype ? { kv_dtype } : {}) });

describe('KV dtype auto prices the checkpoint-declared cache', () => {
  it('minimax-m2.5-nvfp4 b200 tp 4 decode 64@8192: auto = --kv-dtype fp8; bf16 is the old, slower price', () => {
    const auto = setup('minimax-m2.5-nvfp4');
    const fp8 = setup('minimax-m2.5-nvfp4', 'fp8');
    const bf16 = setup('minimax-m2.5-nvfp4', 'bf16');
    expect(auto.pricer.price(batch)).toEqual(fp8.pricer.price(batch));
    expect(auto.pricer.info.kv_from_checkpoint).toEqual({
      dtype: 'fp8',
      source:
        'config.json quantization_config kv_cache_scheme 8-bit float; hf_quant_config.json kv_cache_quant_algo FP8',
    });
    expect(fp8.pricer.info.kv_from_checkpoint).toBeUndefined();
    // config.json: 62 layers × (8 KV heads / tp 4 = 2 per rank) × head_dim 128 × 2 (K and V) × bytes.
    expect(auto.pricer.info.kv_bytes_per_token_per_rank).toBe(62 * 2 * 128 * 2 * 1); // 31,744 B
    expect(bf16.pricer.info.kv_bytes_per_token_per_rank).toBe(62 * 2 * 128 * 2 * 2); // 63,488 B
    const a = auto.pricer.price(batch).no_overlap_us;
    const b = bf16.pricer.price(batch).no_overlap_us;
    // Before this change auto priced bf16: NoOverlap 15,320.5 µs; the fp8 cache reads half the KV bytes: 13,037.2 µs
    // (on the registry of session 16: b200's nvfp4 expert law with the token term; 15,308.2 / 13,024.9 at session 15).
    expect(b).toBeCloseTo(15320.5, 1);
    expect(a).toBeCloseTo(13037.2, 1);
    expect(1 - a / b).toBeGreaterThan(0.11);
    expect(1 - a / b).toBeLessThan(0.16);
  });

  it('models that declare none price as the old rule (weights width, sub-byte → bf16) gives', () => {
    for (const [m, chip, tp] of [
      ['deepseek-v3', 'h200', 8],
      ['llama-3.1-70b', 'h200', 4],
    ] as const) {
      const g = loadModel(m);
      expect(g.global.kv_dtype).toBeUndefined();
      const old = kvBytesPerElement(undefined, servedDtype('auto', g.global.weight_dtype));
      const auto = setup(m, undefined, chip, tp);
      expect(auto.pricer.info.kv_bytes_per_element).toBe(old);
      expect(auto.pricer.price(batch)).toEqual(setup(m, old === 1 ? 'fp8' : 'bf16', chip, tp).pricer.price(batch));
    }
  });

  it('a declaration stepcal cannot read: auto refuses, naming it; an explicit --kv-dtype still prices', () => {
    const g = loadModel('minimax-m2.5-nvfp4');
    g.global.kv_dtype = { not_understood: 'minimax-m2.5-nvfp4: kv_cache_quant_algo "FP4" not understood' };
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'stepcal-kv-')), 'graph.yaml');
    writeFileSync(file, stringifyGraph(g));
    expect(() => setup(file)).toThrow(
      /KV dtype auto follows the checkpoint's KV-cache declaration, which is not understood: .*"FP4".*pass --kv-dtype/,
    );
    expect(setup(file, 'fp8').pricer.price(batch)).toEqual(setup('minimax-m2.5-nvfp4').pricer.price(batch));
  });
});
