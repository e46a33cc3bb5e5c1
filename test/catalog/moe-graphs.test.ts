/**
 * The MoE model graphs derived from the shipped configs (issue 13 item 5): their structure and formats
 * from the configs, and that each prices on every chip that has a registry, with that registry.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { knownChips, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { deriveGraph } from '../../src/core/catalog/model-derive.ts';
import { expandStack, loadModel } from '../../src/core/catalog/model.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { setupPricer } from '../../src/pricer/setup.ts';
import { RESOURCES } from '../../src/pricer/types.ts';

const MOE_GRAPHS = [
  'deepseek-r1',
  'kimi-k2',
  'kimi-k2.5',
  'kimi-k2.5-nvfp4',
  'qwen3-235b-a22b',
  'qwen3-235b-a22b-fp8',
  'qwen3-235b-a22b-nvfp4',
  'qwen3-30b-a3b',
  'qwen3-30b-a3b-fp8',
  'llama-4-scout',
  'llama-4-maverick',
  'minimax-m2.5',
  'minimax-m2.5-nvfp4',
] as const;

const experts = (m: string) =>
  loadModel(m)
    .layer_kinds.flatMap((k) => k.nodes)
    .find((n) => n.op === 'GroupedGEMM') as Record<string, unknown>;

describe('derived MoE graphs: structure and format from the config', () => {
  it.each([
    ['deepseek-r1', 61, { experts: 256, top_k: 8, n: 2048, k: 7168, shared_experts: 1 }, 'fp8_block'],
    ['kimi-k2', 61, { experts: 384, top_k: 8, n: 2048, k: 7168, shared_experts: 1 }, 'fp8_block'],
    ['kimi-k2.5', 61, { experts: 384, top_k: 8, weight_dtype: 'int4' }, 'bf16'],
    ['kimi-k2.5-nvfp4', 61, { experts: 384, top_k: 8, weight_dtype: 'nvfp4' }, 'bf16'],
    ['qwen3-235b-a22b', 94, { experts: 128, top_k: 8, n: 1536, k: 4096 }, 'bf16'],
    ['qwen3-235b-a22b-fp8', 94, { experts: 128, top_k: 8 }, 'fp8_block'],
    ['qwen3-235b-a22b-nvfp4', 94, { experts: 128, top_k: 8 }, 'nvfp4'],
    ['qwen3-30b-a3b', 48, { experts: 128, top_k: 8, n: 768, k: 2048 }, 'bf16'],
    ['qwen3-30b-a3b-fp8', 48, { experts: 128, top_k: 8 }, 'fp8_block'],
    ['llama-4-scout', 48, { experts: 16, top_k: 1, n: 8192, k: 5120, shared_experts: 1 }, 'bf16'],
    ['llama-4-maverick', 48, { experts: 128, top_k: 1, shared_experts: 1 }, 'bf16'],
    ['minimax-m2.5', 62, { experts: 256, top_k: 8, n: 1536, k: 3072 }, 'fp8_block'],
    ['minimax-m2.5-nvfp4', 62, { experts: 256, top_k: 8, weight_dtype: 'nvfp4' }, 'bf16'],
  ] as const)('%s: %i layers, experts %o, weights %s', (m, layers, e, w) => {
    const g = loadModel(m);
    expect(expandStack(g.stack)).toHaveLength(layers);
    expect(experts(m)).toMatchObject(e);
    expect(g.global.weight_dtype).toBe(w);
  });
  it('llama-4-maverick: MoE on every other layer, dense layers at intermediate_size_mlp 16,384, chunked layers as 8,192 windows', () => {
    const g = loadModel('llama-4-maverick');
    expect(g.stack).toEqual({ pattern: ['swa_dense', 'swa_moe', 'swa_dense', 'gqa_moe'], repeat: 12 });
    const dense = g.layer_kinds.find((k) => k.id === 'swa_dense')!.nodes;
    expect(dense.find((n) => n.role === 'mlp_down')).toMatchObject({ k: 16384 });
    expect(dense.find((n) => n.op === 'Attention')).toMatchObject({ kind: 'swa', window: 8192 });
    expect(g.derived_from?.not_modelled?.[0]).toMatch(
      /^attention_chunk_size: chunked attention priced as a window of 8192/,
    );
  });
  it('minimax-m2.5 records its MTP modules as not modelled; kimi-k2.5 its vision tower', () => {
    expect(loadModel('minimax-m2.5').derived_from?.not_modelled).toEqual([
      'use_mtp, mtp_transformer_layers, num_mtp_modules: MiniMax MTP drafter modules not derived (served without speculation by default)',
    ]);
    expect(loadModel('kimi-k2.5').derived_from?.not_modelled).toEqual([
      'vision_config: vision tower not priced (text-only steps)',
    ]);
  });
  it('refuses a field it does not understand, and a structural field off its default', () => {
    const base = { hidden_size: 64, num_hidden_layers: 2, num_attention_heads: 4, vocab_size: 100 };
    expect(() => deriveGraph({ ...base, frobnicate: 1 }, 'x', '{}')).toThrow(
      /x: config.json field "frobnicate" is not one the graph deriver understands/,
    );
    expect(() => deriveGraph({ ...base, decoder_sparse_step: 2 }, 'x', '{}')).toThrow(
      /field decoder_sparse_step = 2: the deriver handles only its default/,
    );
    expect(() => deriveGraph({ ...base, decoder_sparse_step: 1 }, 'x', '{}')).not.toThrow();
  });
});

const withRegistry = knownChips().filter((c) => existsSync(path.join(REPO_ROOT, 'registry', `${c}.yaml`)));

describe('every new MoE graph prices on every chip that has a registry', () => {
  it('covers the shipped registries', () =>
    expect(withRegistry).toEqual(['a100', 'b200', 'b300', 'gb200', 'h100', 'h200', 'l40s', 'rtx-pro-6000']));
  it.each(withRegistry)('%s', (chip) => {
    const batch = { requests: [...decodeBatch(16, 3000).requests, ...prefillBatch(1, 1024, 512).requests] };
    for (const m of MOE_GRAPHS) {
      const tp = m.startsWith('qwen3-30b') ? 1 : 8;
      const r = setupPricer(m, chip, { tp }).pricer.price(batch);
      for (const res of RESOURCES) expect(Number.isFinite(r.resources_us[res]), `${m} ${chip} ${res}`).toBe(true);
      expect(r.no_overlap_us, `${m} ${chip}`).toBeGreaterThan(0);
      expect(r.overlap_us).toBeLessThanOrEqual(r.no_overlap_us);
    }
  });
});
