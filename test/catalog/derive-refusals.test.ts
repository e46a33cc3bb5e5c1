/**
 * The deriver on the shared configs it does not derive yet (issue 14: "it refuses any field it does not
 * understand; it never mis-derives silently"): each verbatim config from ../shared/datasets/model-configs is
 * refused with the field that stops it, instead of becoming a graph that drops the structure.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { deriveGraph } from '../../src/core/catalog/model-derive.ts';
import { parseConfigJson } from '../../src/core/catalog/model.ts';

const CONFIGS = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'model-configs');

/** Derive a shared config (and its hf_quant_config.json when it ships one). */
function deriveShared(dir: string) {
  const text = readFileSync(path.join(CONFIGS, dir, 'config.json'), 'utf8');
  const hq = path.join(CONFIGS, dir, 'hf_quant_config.json');
  return deriveGraph(
    parseConfigJson(text),
    dir,
    text,
    existsSync(hq) ? JSON.parse(readFileSync(hq, 'utf8')) : undefined,
  );
}

describe.skipIf(!existsSync(CONFIGS))('configs the deriver refuses, naming the field', () => {
  it.each([
    // MiniMax-M3: block-sparse MSA attention and its output gate (no law prices the MSA module yet)
    ['MiniMaxAI--MiniMax-M3', /field "attention_output_gate" is not one the graph deriver understands/],
    // Nemotron-3 Super: latent MoE of the Nemotron form (moe_latent_size), not Kimi's routed_expert_hidden_size
    ['nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4', /field "moe_latent_size" is not one/],
    // Nemotron-3 Ultra and 3.5-Lightning: the layer pattern under another name and no num_hidden_layers
    ['nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16', /field "layers_block_type" is not one/],
    ['nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4', /field "layers_block_type" is not one/],
  ])('%s', (dir, why) => {
    expect(() => deriveShared(dir)).toThrow(why);
  });

  it('the same-format NVFP4 Kimi-K2.6 / K2.7 checkpoints derive to K2.5-NVFP4’s graph (no new format to ship)', () => {
    const nodes = (dir: string) => deriveShared(dir).layer_kinds.map((k) => k.nodes);
    expect(nodes('nvidia--Kimi-K2.6-NVFP4')).toEqual(nodes('nvidia--Kimi-K2.5-NVFP4'));
    expect(nodes('nvidia--Kimi-K2.7-Code-NVFP4')).toEqual(nodes('nvidia--Kimi-K2.5-NVFP4'));
  });
});
