/** The deriver's sparse fields (issue 14 item 6): index_topk, indexer_types, compress_ratios, hc_*, refusals. */
import { describe, expect, it } from 'vitest';
import { deriveGraph } from '../../src/core/catalog/model-derive.ts';
import { expandStack, loadHfQuantConfig, loadModelConfigText, type GraphNode } from '../../src/core/catalog/model.ts';

const config = (name: string) => JSON.parse(loadModelConfigText(name)) as Record<string, unknown>;
const derive = (c: Record<string, unknown>, name = 'x', quant?: Record<string, unknown>) =>
  deriveGraph(c, name, JSON.stringify(c), quant);
const counts = (ids: string[]) =>
  Object.fromEntries([...new Set(ids)].map((id) => [id, ids.filter((x) => x === id).length]));
const attn = (nodes: GraphNode[]) => nodes.filter((n) => n.op === 'Attention');

describe('index_topk: DeepSeek Sparse Attention', () => {
  it('deepseek-v3.2: every MLA layer becomes sparse top-2048 with its 64 × 128 indexer', () => {
    const g = derive(config('deepseek-v3.2'));
    expect(counts(expandStack(g.stack))).toEqual({ dsa_dense: 3, dsa_moe: 58 });
    const nodes = g.layer_kinds.find((k) => k.id === 'dsa_moe')!.nodes;
    expect(attn(nodes)).toEqual([
      { op: 'Attention', kind: 'sparse', role: 'indexer', n_q: 64, n_kv: 1, d_h: 128 },
      { op: 'Attention', kind: 'sparse', n_q: 128, n_kv: 1, d_h: 576, prefill_d_h: 160, index_topk: 2048 },
    ]);
    expect(nodes.find((n) => n.role === 'indexer_wq_b')).toMatchObject({
      n: 64 * 128,
      k: 1536,
      parallel: 'replicated',
    });
  });
  it('without index_topk the same config is dense MLA (the field is what makes it sparse)', () => {
    const c = config('deepseek-v3.2');
    for (const k of ['index_topk', 'index_n_heads', 'index_head_dim']) delete c[k];
    expect(derive(c).layer_kinds.map((k) => k.id)).toEqual(['mla_dense', 'mla_moe', 'mtp']);
  });
  it('glm-5.2-nvfp4: indexer_types "shared" layers run no indexer (20 of 78 keep their own)', () => {
    const c = config('glm-5.2-nvfp4');
    const own = (c.indexer_types as string[]).filter((t) => t === 'full').length;
    const ids = expandStack(derive(c, 'glm-5.2-nvfp4', loadHfQuantConfig('glm-5.2-nvfp4')).stack);
    expect(own).toBe(21);
    expect(ids.filter((id) => id.startsWith('dsa_') && !id.startsWith('dsa_shared')).length).toBe(own);
    const g = derive(c);
    const shared = g.layer_kinds.find((k) => k.id === 'dsa_shared_moe')!.nodes;
    expect(shared.some((n) => n.role === 'indexer')).toBe(false);
  });
});

describe('compress_ratios and hc_*: DeepSeek-V4', () => {
  it('deepseek-v4-flash: 2 window-only, 21 CSA and 20 HCA layers, mHC around both sites, capture breaks', () => {
    const g = derive(config('deepseek-v4-flash'));
    expect(counts(expandStack(g.stack))).toEqual({ v4_swa_moe: 2, v4_csa_moe: 21, v4_hca_moe: 20 });
    const csa = g.layer_kinds.find((k) => k.id === 'v4_csa_moe')!.nodes;
    expect(attn(csa)).toEqual([
      { op: 'Attention', kind: 'sparse', role: 'indexer', n_q: 64, n_kv: 1, d_h: 128, compress_ratio: 4 },
      {
        op: 'Attention',
        n_q: 64,
        n_kv: 1,
        d_h: 512,
        window: 128,
        capture_break: true,
        kind: 'sparse',
        compress_ratio: 4,
        index_topk: 512,
      },
    ]);
    const hca = attn(g.layer_kinds.find((k) => k.id === 'v4_hca_moe')!.nodes);
    expect(hca).toEqual([
      {
        op: 'Attention',
        n_q: 64,
        n_kv: 1,
        d_h: 512,
        window: 128,
        capture_break: true,
        kind: 'sparse',
        compress_ratio: 128,
      },
    ]);
    // hc_mult 4, hidden 4096: pre 4·4096·2 + 4096·2 = 40960 B, post 4096·2 + 2·4·4096·2 = 73728 B per token and site.
    const mhc = csa.filter((n) => n.op === 'Elementwise' && n.mhc);
    expect(mhc.map((n) => [n.role, (n as { bytes_per_token: number }).bytes_per_token])).toEqual([
      ['mhc_pre_attn', 40960],
      ['mhc_post_attn', 73728],
      ['mhc_pre_ffn', 40960],
      ['mhc_post_ffn', 73728],
    ]);
    expect(csa.find((n) => n.role === 'mhc_mix_attn')).toMatchObject({
      n: 24,
      k: 16384,
      mhc: 'pre',
      weight_dtype: 'fp32',
    });
    // expert_dtype "fp4": MXFP4 experts; the MTP layer takes the entry after the layers (0: window only).
    expect(csa.find((n) => n.op === 'GroupedGEMM')).toMatchObject({ weight_dtype: 'mxfp4', top_k: 6 });
    expect(attn(g.layer_kinds.find((k) => k.id === 'mtp')!.nodes)).toMatchObject([{ kind: 'mla', window: 128 }]);
  });
  it('deepseek-v4-flash-nvfp4: moe_quant_algo NVFP4 gives NVFP4 experts, the rest fp8_block', () => {
    const g = derive(config('deepseek-v4-flash-nvfp4'), 'n', loadHfQuantConfig('deepseek-v4-flash-nvfp4'));
    expect(g.global.weight_dtype).toBe('fp8_block');
    const moe = g.layer_kinds[0]!.nodes.find((n) => n.op === 'GroupedGEMM');
    expect(moe).toMatchObject({ weight_dtype: 'nvfp4' });
  });
  it('deepseek-v4-pro: 61 layers with the grouped low-rank output (16 groups of 1024)', () => {
    const g = derive(config('deepseek-v4-pro'));
    expect(expandStack(g.stack).length).toBe(61);
    expect(g.layer_kinds[0]!.nodes.find((n) => n.role === 'wo_a')).toMatchObject({ n: 16 * 1024, k: (128 * 512) / 16 });
  });
});

describe('refusals: never mis-derive silently', () => {
  const v4 = config('deepseek-v4-flash');
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    [
      'hc_sinkhorn_iters off the measured 20',
      { ...v4, hc_sinkhorn_iters: 10 },
      /hc_sinkhorn_iters = 10: the deriver handles only its default/,
    ],
    [
      'a compress ratio it does not know',
      { ...v4, compress_ratios: [...(v4.compress_ratios as number[])].fill(8, 5, 6) },
      /compress_ratios must give 0, 4 or 128/,
    ],
    [
      'compress_ratios shorter than the layers',
      { ...v4, compress_ratios: [0, 4] },
      /compress_ratios must give 0, 4 or 128 for each of 43 layers/,
    ],
    ['compress_ratios without an indexer', { ...v4, index_topk: undefined }, /needs index_topk/],
    [
      'an unknown V4 field',
      { ...v4, hc_topology: 'ring' },
      /field "hc_topology" is not one the graph deriver understands/,
    ],
    [
      'indexer_types of the wrong length',
      { ...config('glm-5.2-nvfp4'), indexer_types: ['full'] },
      /indexer_types must list "full" or "shared" for each of 78 layers/,
    ],
    [
      'sparse layer types without index_topk',
      { ...config('glm-5.2-nvfp4'), index_topk: undefined },
      /deepseek_sparse_attention but config.json has no index_topk/,
    ],
    [
      'mlp_layer_types disagreeing with first_k_dense_replace',
      { ...config('glm-5.2-nvfp4'), first_k_dense_replace: 2 },
      /mlp_layer_types\[2\] = "dense" disagrees/,
    ],
  ];
  for (const [what, c, msg] of cases) {
    it(what, () => {
      const clean = Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined));
      expect(() => derive(clean, 'x')).toThrow(msg);
    });
  }
});
