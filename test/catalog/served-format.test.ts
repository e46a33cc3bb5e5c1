/** The served format from a checkpoint's quantisation config (issue 13 item 4), on the shipped configs. */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { knownModels, loadHfQuantConfig, loadModelConfigText, parseConfigJson } from '../../src/core/catalog/model.ts';
import {
  checkpointFormat,
  declaredKvFormat,
  kvDeclaration,
  kvFormatNote,
} from '../../src/core/catalog/served-format.ts';
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

/** declaredKvFormat of a model in catalog/models (its config.json and hf_quant_config.json when shipped). */
const shippedKv = (m: string) => declaredKvFormat(parseConfigJson(loadModelConfigText(m)), m, loadHfQuantConfig(m));

describe('declaredKvFormat: the KV-cache format a checkpoint declares (what KV dtype auto prices)', () => {
  it('on the shipped catalog configs, naming the fields that said so', () => {
    expect(shippedKv('minimax-m2.5-nvfp4')).toEqual({
      dtype: 'fp8',
      source:
        'config.json quantization_config kv_cache_scheme 8-bit float; hf_quant_config.json kv_cache_quant_algo FP8',
    });
    expect(shippedKv('qwen3-235b-a22b-nvfp4')).toEqual({
      dtype: 'fp8',
      source: 'hf_quant_config.json kv_cache_quant_algo FP8',
    });
    expect(shippedKv('nemotron-3-super-120b-a12b-fp8')?.dtype).toBe('fp8');
    // kv_cache_quant_algo null (deepseek-v4-flash-nvfp4), kv_cache_scheme null (kimi-k2.5), no quantisation at all.
    expect(shippedKv('deepseek-v4-flash-nvfp4')).toBeUndefined();
    expect(shippedKv('kimi-k2.5')).toBeUndefined();
    expect(shippedKv('llama-3.1-8b')).toBeUndefined();
    expect(shippedKv('deepseek-v3')).toBeUndefined();
  });
  it('every shipped model parses (none is refused), and only 8-bit float caches are declared', () => {
    const declared = knownModels()
      .map((m) => [m, shippedKv(m)?.dtype] as const)
      .filter(([, d]) => d !== undefined);
    expect(new Set(declared.map(([, d]) => d))).toEqual(new Set(['fp8']));
    expect(declared.map(([m]) => m)).toContain('kimi-k2.5-nvfp4');
  });
  it('refuses a value it does not understand and fields that disagree', () => {
    const q = (kv: unknown) => ({ quantization_config: { quant_method: 'fp8', kv_cache_scheme: kv } });
    expect(declaredKvFormat(q({ num_bits: 8, type: 'int' }), 'm')?.dtype).toBe('int8');
    expect(() => declaredKvFormat(q({ num_bits: 4, type: 'float' }), 'm')).toThrow(
      /m: config.json quantization_config.kv_cache_scheme .* not understood/,
    );
    expect(() => declaredKvFormat({}, 'm', { quantization: { kv_cache_quant_algo: 'FP4' } })).toThrow(
      /m: hf_quant_config.json kv_cache_quant_algo "FP4" not understood/,
    );
    expect(() =>
      declaredKvFormat(q({ num_bits: 8, type: 'int' }), 'm', { quantization: { kv_cache_quant_algo: 'FP8' } }),
    ).toThrow(
      /declares different KV-cache dtypes: .*8-bit int → int8; hf_quant_config.json kv_cache_quant_algo FP8 → fp8/,
    );
  });
  it('ModelOpt kv_cache_quant_algo in any case; only FP8 gives a cache dtype (vLLM serves INT8 and NVFP4 at the model dtype)', () => {
    const algo = (v: string) => declaredKvFormat({}, 'm', { quantization: { kv_cache_quant_algo: v } })?.dtype;
    expect(['FP8', 'fp8', 'Fp8'].map(algo)).toEqual(['fp8', 'fp8', 'fp8']);
    expect(['INT8', 'nvfp4', 'NVFP4'].map(algo)).toEqual([undefined, undefined, undefined]);
  });
});

describe('kvDeclaration: the graph carries the declaration, or the refusal instead of throwing', () => {
  it('the declaration as the graph stores it; a value stepcal cannot read kept as not_understood', () => {
    const q = (kv: unknown) => ({ quantization_config: { quant_method: 'fp8', kv_cache_scheme: kv } });
    expect(kvDeclaration(q({ num_bits: 8, type: 'float' }), 'm')).toEqual({
      dtype: 'fp8',
      source: 'config.json quantization_config kv_cache_scheme 8-bit float',
    });
    expect(kvDeclaration(q({ num_bits: 4, type: 'float' }), 'm')).toEqual({
      not_understood:
        'm: config.json quantization_config.kv_cache_scheme {"num_bits":4,"type":"float"} not understood (8-bit float or int)',
    });
    expect(kvDeclaration(q(null), 'm')).toBeUndefined();
  });
});

describe('kvFormatNote: price says when --kv-dtype prices another width than the checkpoint declares', () => {
  const fp8 = { dtype: 'fp8' as const, source: 'hf_quant_config.json kv_cache_quant_algo FP8' };
  it('declared fp8, --kv-dtype bf16 (2 B/element): the line; an unreadable declaration is named', () => {
    expect(kvFormatNote(fp8, { kv_dtype: 'bf16', bytes_per_element: 2 })).toBe(
      'KV cache: priced bf16 as --kv-dtype asks; the checkpoint declares fp8 (hf_quant_config.json kv_cache_quant_algo FP8), which KV dtype auto prices',
    );
    expect(kvFormatNote({ not_understood: 'm: x not understood' }, { kv_dtype: 'fp8', bytes_per_element: 1 })).toBe(
      "KV cache: priced fp8 as --kv-dtype asks; the checkpoint's declaration is not understood (m: x not understood), so KV dtype auto would refuse",
    );
  });
  it('nothing under auto (the header says), when they agree (1 B/element), or when nothing is declared', () => {
    expect(kvFormatNote(fp8, { kv_dtype: undefined, bytes_per_element: 1 })).toBeUndefined();
    expect(kvFormatNote(fp8, { kv_dtype: 'auto', bytes_per_element: 1 })).toBeUndefined();
    expect(kvFormatNote(fp8, { kv_dtype: '', bytes_per_element: 2 })).toBeUndefined(); // '' is auto (validation rows)
    expect(kvFormatNote(fp8, { kv_dtype: 'fp8_e4m3', bytes_per_element: 1 })).toBeUndefined();
    expect(kvFormatNote(undefined, { kv_dtype: 'bf16', bytes_per_element: 2 })).toBeUndefined();
  });
});
