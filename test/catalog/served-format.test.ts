/** The served format from a checkpoint's quantisation config (issue 13 item 4), on the shipped configs. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { checkpointFormat } from '../../src/core/catalog/served-format.ts';
import { readText } from '../../src/core/io/fs.ts';

const CONFIGS = path.join(REPO_ROOT, '..', 'shared', 'datasets', 'model-configs');
const load = (d: string) => {
  const cfg = JSON.parse(readText(path.join(CONFIGS, d, 'config.json'))) as Record<string, unknown>;
  const hq = path.join(CONFIGS, d, 'hf_quant_config.json');
  return checkpointFormat(cfg, d, existsSync(hq) ? (JSON.parse(readText(hq)) as Record<string, unknown>) : undefined);
};

describe.skipIf(!existsSync(CONFIGS))('checkpointFormat on the shipped configs', () => {
  it.each([
    ['deepseek-ai--DeepSeek-V3', 'fp8_block', undefined],
    ['deepseek-ai--DeepSeek-R1', 'fp8_block', undefined],
    ['moonshotai--Kimi-K2-Instruct', 'fp8_block', undefined],
    ['Qwen--Qwen3-30B-A3B-FP8', 'fp8_block', undefined],
    ['MiniMaxAI--MiniMax-M2.5', 'fp8_block', undefined],
    ['Qwen--Qwen3-235B-A22B', 'bf16', undefined],
    ['meta-llama--Llama-4-Scout-17B-16E-Instruct', 'bf16', undefined],
    ['moonshotai--Kimi-K2.5', 'bf16', 'int4'],
    ['nvidia--Kimi-K2.5-NVFP4', 'bf16', 'nvfp4'],
    ['nvidia--MiniMax-M2.5-NVFP4', 'bf16', 'nvfp4'],
    ['nvidia--Qwen3-235B-A22B-NVFP4', 'nvfp4', undefined],
  ] as const)('%s → %s (experts %s)', (d, global, experts) => {
    const f = load(d);
    expect(f.global).toBe(global);
    expect(f.experts).toBe(experts);
    expect(f.reason.length).toBeGreaterThan(10);
  });
  it('says why: block-quantised fp8', () => {
    expect(load('deepseek-ai--DeepSeek-V3').reason).toBe(
      'quantization_config quant_method fp8 with weight_block_size [128, 128]: block-quantised fp8 → fp8_block',
    );
  });
});

describe('checkpointFormat refuses what it does not understand', () => {
  it('per-tensor fp8 stays fp8', () =>
    expect(checkpointFormat({ quantization_config: { quant_method: 'fp8' } }, 'm').global).toBe('fp8'));
  it('an unknown quant_method names the field', () => {
    expect(() => checkpointFormat({ quantization_config: { quant_method: 'awq' } }, 'm')).toThrow(
      /m: config.json quantization_config quant_method "awq" is not a format stepcal understands/,
    );
  });
  it('an unknown 4-bit layout', () => {
    const q = { quant_method: 'compressed-tensors', config_groups: { g: { weights: { num_bits: 8, type: 'float' } } } };
    expect(() => checkpointFormat({ quantization_config: q }, 'm')).toThrow(/not a layout stepcal understands/);
  });
  it('a quantisation field it does not know is refused naming it, not dropped (issue 13 item 5)', () => {
    const q = { quant_method: 'fp8', weight_block_size: [128, 128], bogus_q: 1 };
    expect(() => checkpointFormat({ quantization_config: q }, 'm')).toThrow(
      /m: config.json quantization_config field "bogus_q" is not one the graph deriver understands/,
    );
    expect(() =>
      checkpointFormat({ text_config: { quantization_config: { quant_method: 'mxfp4', x: 1 } } }, 'm'),
    ).toThrow(/quantization_config field "x"/);
    expect(() => checkpointFormat({}, 'm', { quantization: { quant_algo: 'NVFP4', kv_cache_dtype: 'fp8' } })).toThrow(
      /m: hf_quant_config.json quantization field "kv_cache_dtype"/,
    );
    expect(() => checkpointFormat({}, 'm', { quantization: { quant_algo: 'NVFP4' }, extra: {} })).toThrow(
      /m: hf_quant_config.json field "extra"/,
    );
  });
  it('an unknown ModelOpt algorithm', () => {
    expect(() => checkpointFormat({}, 'm', { quantization: { quant_algo: 'W4A8_AWQ' } })).toThrow(
      /quant_algo "W4A8_AWQ" not understood/,
    );
  });
});
