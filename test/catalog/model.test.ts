/** Model catalog: stored graphs equal the derived ones; config facts; §3.1 quantities. */
import { describe, expect, it } from 'vitest';
import { derivedGraphText } from '../../src/core/catalog/model-regen.ts';
import { compressStack } from '../../src/core/catalog/model-derive.ts';
import { expandStack, knownModels, loadModel, MODELS_DIR } from '../../src/core/catalog/model.ts';
import { readText } from '../../src/core/io/fs.ts';
import path from 'node:path';

describe('stored graphs', () => {
  for (const m of knownModels()) {
    it(`${m}: graph.yaml equals deriveGraph(config.json)`, () => {
      expect(readText(path.join(MODELS_DIR, m, 'graph.yaml'))).toBe(derivedGraphText(m));
    });
  }
  it('unknown model lists the known ones', () => {
    expect(() => loadModel('llama-9')).toThrow(/unknown model "llama-9" \(known: .*llama-3.1-8b/);
  });
});

describe('derived structure', () => {
  const gemmFlops = (m: string, kind: string) =>
    loadModel(m)
      .layer_kinds.find((k) => k.id === kind)!
      .nodes.reduce((a, n) => a + (n.op === 'GEMM' ? 2 * n.n * n.k : 0), 0);
  it('llama-3.1-8b layer: 436,207,616 FLOPs per token (reference §3.1)', () => {
    expect(gemmFlops('llama-3.1-8b', 'gqa_dense')).toBe(436_207_616);
    expect(expandStack(loadModel('llama-3.1-8b').stack)).toHaveLength(32);
  });
  it('llama-3.1-70b shapes of reference §3.1', () => {
    const n = loadModel('llama-3.1-70b')
      .layer_kinds[0]!.nodes.filter((x) => x.op === 'GEMM')
      .map((x) => [x.n, x.k]);
    expect(n).toEqual([
      [10240, 8192],
      [8192, 8192],
      [57344, 8192],
      [8192, 28672],
    ]);
  });
  it('deepseek-v3: 3 dense + 58 MoE MLA layers, MTP speculator', () => {
    const g = loadModel('deepseek-v3');
    expect(g.stack.prologue).toEqual(['mla_dense', 'mla_dense', 'mla_dense']);
    expect(g.stack.pattern).toEqual(['mla_moe']);
    expect(g.stack.repeat).toBe(58);
    expect(g.speculator?.stack.pattern).toEqual(['mtp']);
    const moe = g.layer_kinds.find((k) => k.id === 'mla_moe')!.nodes.find((n) => n.op === 'GroupedGEMM');
    expect(moe).toMatchObject({ experts: 256, top_k: 8, shared_experts: 1, n: 2048, k: 7168 });
    expect(g.global.weight_dtype).toBe('fp8_block'); // weight_block_size [128, 128] in its quantization_config (served-format.ts)
  });
  it('gpt-oss-120b: alternating window-128 / full layers, 128 experts top-4, mxfp4 experts', () => {
    const g = loadModel('gpt-oss-120b');
    expect(g.stack).toEqual({ pattern: ['swa_moe', 'gqa_moe'], repeat: 18 });
    const swa = g.layer_kinds.find((k) => k.id === 'swa_moe')!.nodes;
    expect(swa.find((n) => n.op === 'Attention')).toMatchObject({
      kind: 'swa',
      window: 128,
      n_q: 64,
      n_kv: 8,
      d_h: 64,
    });
    expect(swa.find((n) => n.op === 'GroupedGEMM')).toMatchObject({ experts: 128, top_k: 4, weight_dtype: 'mxfp4' });
  });
  it('bloom-176b: MHA with ALiBi, non-gated 4×hidden MLP, 70 layers, vocab 250,880', () => {
    const g = loadModel('bloom-176b');
    expect(expandStack(g.stack)).toHaveLength(70);
    expect(g.global).toMatchObject({ hidden_size: 14336, vocab_size: 250880, tie_word_embeddings: true });
    const nodes = g.layer_kinds[0]!.nodes;
    expect(nodes.find((n) => n.op === 'Attention')).toMatchObject({
      kind: 'gqa',
      n_q: 112,
      n_kv: 112,
      d_h: 128,
      alibi: true,
    });
    expect(nodes.find((n) => n.role === 'mlp_up')).toMatchObject({ n: 57344, k: 14336 });
  });
  it('mistral-7b states its 4,096 window; qwen2 does not use its nominal one', () => {
    expect(loadModel('mistral-7b').layer_kinds[0]!.id).toBe('swa_dense');
    expect(loadModel('qwen2-7b').layer_kinds[0]!.id).toBe('gqa_dense');
  });
  it('compressStack finds prologue + period', () => {
    expect(compressStack(['a', 'b', 'c', 'b', 'c'])).toEqual({ prologue: ['a'], pattern: ['b', 'c'], repeat: 2 });
  });
});
