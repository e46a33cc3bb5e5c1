import { describe, expect, it } from 'vitest';
import { parseBatchSpec, parseBatchSpecs } from '../../src/pricer/batch.ts';
import { defaultDeployment, kvBytesPerElement, servedDtype } from '../../src/pricer/deployment.ts';

describe('batch specs', () => {
  it('decode:N@CTX, decode:NxT@CTX, prefill:NxT, prefill:NxT@CTX', () => {
    expect(parseBatchSpec('decode:2@1024')).toEqual([
      { scheduled_tokens: 1, computed_tokens: 1024, prompt_tokens: 1024 },
      { scheduled_tokens: 1, computed_tokens: 1024, prompt_tokens: 1024 },
    ]);
    expect(parseBatchSpec('decode:1x3@10')[0]!.scheduled_tokens).toBe(3);
    expect(parseBatchSpec('prefill:4x2048')).toHaveLength(4);
    expect(parseBatchSpec('prefill:1x2048@512')[0]).toEqual({
      scheduled_tokens: 2048,
      computed_tokens: 512,
      prompt_tokens: 2560,
    });
    expect(parseBatchSpecs(['decode:3@5', 'prefill:2x7']).requests).toHaveLength(5);
  });
  it('rejects malformed specs with the accepted forms', () => {
    expect(() => parseBatchSpec('decode:32')).toThrow(/decode:N@CTX/);
    expect(() => parseBatchSpec('prefill:4')).toThrow(/prefill:NxTOKENS/);
    expect(() => parseBatchSpec('foo')).toThrow(/expected/);
  });
});

describe('deployment', () => {
  it('defaults follow vLLM', () => {
    expect(defaultDeployment()).toEqual({
      tp: 1,
      ep: 1,
      weight_dtype: 'auto',
      cudagraph_mode: 'FULL_AND_PIECEWISE',
      max_capture_size: 512,
      decode_threshold: 1,
    });
    expect(() => defaultDeployment({ tp: 0 })).toThrow(/tp/);
  });
  it('served dtype and KV width (reference §4.2)', () => {
    expect(servedDtype('auto', 'bf16')).toBe('bf16');
    expect(servedDtype('modelopt_fp4', 'bf16')).toBe('nvfp4');
    expect(() => servedDtype('zzz', 'bf16')).toThrow(/known/);
    expect(kvBytesPerElement(undefined, 'nvfp4')).toBe(2);
    expect(kvBytesPerElement('fp8_e4m3', 'bf16')).toBe(1);
    expect(kvBytesPerElement(undefined, 'fp8')).toBe(1);
    // auto follows the checkpoint's declaration (graph global.kv_dtype); an explicit KV dtype wins.
    const fp8 = { dtype: 'fp8' as const, source: 'hf_quant_config.json kv_cache_quant_algo FP8' };
    expect(kvBytesPerElement(undefined, 'nvfp4', fp8)).toBe(1);
    expect(kvBytesPerElement('auto', 'bf16', fp8)).toBe(1);
    expect(kvBytesPerElement('bf16', 'nvfp4', fp8)).toBe(2);
    expect(kvBytesPerElement(undefined, 'bf16', { dtype: 'int8', source: 's' })).toBe(1);
    expect(() => kvBytesPerElement(undefined, 'bf16', { not_understood: 'm: FP4 not understood' })).toThrow(
      /not understood: m: FP4 not understood; pass --kv-dtype/,
    );
    expect(kvBytesPerElement('fp8', 'bf16', { not_understood: 'm: FP4 not understood' })).toBe(1);
  });
});
