/** Impossible deployments and empty batch specs are refused, saying what is valid (vLLM's rules). */
import { describe, expect, it } from 'vitest';
import { loadModel } from '../../src/core/catalog/model.ts';
import { parseBatchSpec } from '../../src/pricer/batch.ts';
import { validateParallelism } from '../../src/pricer/deployment.ts';
import { makePricer } from './helpers.ts';

describe('tensor parallelism (vLLM: n_q % tp == 0; n_kv % tp == 0 or tp % n_kv == 0)', () => {
  it('llama-3.1-8b (32 query, 8 KV heads): tp 3 refused, listing 1, 2, 4, 8, 16, 32', () => {
    expect(() => makePricer('llama-3.1-8b', 'h200', { tp: 3 })).toThrow(
      'llama-3.1-8b cannot run at tp 3: vLLM needs query heads (32) divisible by tp, and KV heads (8) divisible by tp or tp divisible by them; valid tp: 1, 2, 4, 8, 16, 32',
    );
    // tp 16 > 8 KV heads replicates them (tp % n_kv == 0): allowed
    expect(() => makePricer('llama-3.1-8b', 'h200', { tp: 16 })).not.toThrow();
  });
  it('tp is bounded by the query heads: tp 64 refused on llama-3.1-8b (32 heads)', () => {
    expect(() => makePricer('llama-3.1-8b', 'h200', { tp: 64 })).toThrow(
      /cannot run at tp 64.*valid tp: 1, 2, 4, 8, 16, 32$/,
    );
  });
  it('qwen2-7b (28 query, 4 KV heads) refuses tp 8 as vLLM does; tp 12 fails the KV rule only', () => {
    expect(() => makePricer('qwen2-7b', 'h200', { tp: 8 })).toThrow(/valid tp: 1, 2, 4, 28$/);
    // 28 % 14 == 0 but neither 4 % 14 nor 14 % 4 is 0
    expect(() => validateParallelism([loadModel('qwen2-7b')], 14, 1)).toThrow(/tp 14/);
  });
  it('MLA (latent cache, n_kv 1) needs only the query heads to divide: deepseek-v3 tp 16 ok, tp 6 refused', () => {
    expect(() => validateParallelism([loadModel('deepseek-v3')], 16, 1)).not.toThrow();
    expect(() => validateParallelism([loadModel('deepseek-v3')], 6, 1)).toThrow(
      /query heads \(128\).*valid tp: 1, 2, 4, 8, 16, 32, 64, 128$/,
    );
  });
});

describe('expert parallelism', () => {
  it('deepseek-v3 (256 experts): ep 3 refused listing the divisors; ep 8 prices', () => {
    expect(() => makePricer('deepseek-v3', 'h200', { tp: 8, ep: 3 })).toThrow(
      'deepseek-v3 cannot run at ep 3: its 256 experts must divide evenly over ep; valid ep: 1, 2, 4, 8, 16, 32, 64, 128, 256',
    );
    expect(() => makePricer('deepseek-v3', 'h200', { tp: 8, ep: 8 })).not.toThrow();
  });
  it('ep > 1 on a dense model is refused', () => {
    expect(() => makePricer('llama-3.1-8b', 'h200', { ep: 2 })).toThrow(
      'llama-3.1-8b has no experts (a dense model): ep must be 1, got ep 2',
    );
  });
});

describe('batch specs that schedule nothing', () => {
  it('zero requests or zero tokens per request are refused', () => {
    expect(() => parseBatchSpec('decode:0@1024')).toThrow(/request count N must be at least 1/);
    expect(() => parseBatchSpec('decode:4x0@1024')).toThrow(/tokens per request T must be at least 1/);
    expect(() => parseBatchSpec('prefill:0x2048')).toThrow(/request count/);
    expect(() => parseBatchSpec('prefill:2x0@16')).toThrow(/tokens per request/);
    expect(parseBatchSpec('decode:1@1')).toHaveLength(1);
  });
  it('a decode against nothing cached is refused (that step is a prefill); a prefill at @0 is fine', () => {
    expect(() => parseBatchSpec('decode:32@0')).toThrow(/context must be ≥ 1 for decode/);
    expect(() => parseBatchSpec('decode:4x2@0')).toThrow(/context must be ≥ 1 for decode/);
    expect(parseBatchSpec('prefill:1x16@0')).toEqual([{ scheduled_tokens: 16, computed_tokens: 0, prompt_tokens: 16 }]);
  });
  it('an explicitly empty batch through the library still prices as host only', () => {
    const r = makePricer('llama-3.1-8b', 'h200').price({ requests: [] });
    expect(r.no_overlap_us).toBe(r.resources_us.host);
    expect(r.resources_us.sm + r.resources_us.hbm).toBe(0);
  });
});
