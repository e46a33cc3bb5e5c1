/**
 * The config → graph deriver on Kimi-K3 (issue 14 item 7; src/core/catalog/model-derive-kimi.ts): KDA and MLA
 * layers from linear_attn_config's 1-based lists, the KDA projections, the MLA output gate, latent MoE, the
 * attention-residual reads, the MXFP4 experts, and refusal of what the deriver does not understand.
 */
import { describe, expect, it } from 'vitest';
import { expandStack } from '../../src/core/catalog/model.ts';
import { configFixture } from '../helpers/derive.ts';

const { base, edited, derive } = configFixture('kimi-k3');
const g = derive(base);
const nodesOf = (id: string) => g.layer_kinds.find((k) => k.id === id)!.nodes;

describe('Kimi-K3', () => {
  it('93 layers: 69 KDA (layer 0 dense), 24 MLA at 1-based 4, 8, …, 92 and 93', () => {
    const seq = expandStack(g.stack);
    expect(seq).toHaveLength(93);
    expect(seq[0]).toBe('kda_dense');
    expect(seq.filter((k) => k === 'kda_moe')).toHaveLength(68);
    const mla = seq.flatMap((k, i) => (k === 'mla_moe' ? [i + 1] : []));
    expect(mla).toEqual([...Array.from({ length: 23 }, (_, j) => 4 * (j + 1)), 93]);
  });

  it('a KDA mixer: q, k, v of 96·128 = 12,288 each, low-rank decay gate, beta, full-rank output gate', () => {
    const kda = nodesOf('kda_moe');
    expect(kda.find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 3 * 12288, k: 7168, parallel: 'column' });
    expect(kda.find((n) => n.role === 'f_a_proj')).toMatchObject({ n: 128, k: 7168, parallel: 'replicated' });
    expect(kda.find((n) => n.role === 'f_b_proj')).toMatchObject({ n: 12288, k: 128 });
    expect(kda.find((n) => n.role === 'b_proj')).toMatchObject({ n: 96 });
    expect(kda.find((n) => n.role === 'g_proj')).toMatchObject({ n: 12288, k: 7168 });
    expect(kda.find((n) => n.op === 'RecurrentUpdate')).toMatchObject({
      recurrent_kind: 'kda',
      num_heads: 96,
      head_dim: 128,
      state_size: 128,
    });
    expect(kda.find((n) => n.role === 'o_proj')).toMatchObject({ n: 7168, k: 12288, parallel: 'row' });
    // Without use_full_rank_gate the output gate is the low-rank pair.
    const low = derive(edited((t) => ((t.linear_attn_config as Record<string, unknown>).use_full_rank_gate = false)));
    const roles = low.layer_kinds.find((k) => k.id === 'kda_moe')!.nodes.map((n) => n.role);
    expect(roles).toContain('g_a_proj');
    expect(roles).not.toContain('g_proj');
  });

  it('MLA layers: the latent cache (512 + 64) and the output gate g_proj (96·128 = 12,288 columns)', () => {
    const mla = nodesOf('mla_moe');
    expect(mla.find((n) => n.op === 'Attention')).toMatchObject({ kind: 'mla', n_q: 96, n_kv: 1, d_h: 576 });
    expect(mla.find((n) => n.role === 'g_proj')).toMatchObject({ n: 12288, k: 7168 });
  });

  it('latent MoE: router on 7,168, routed experts in 3,584 (mxfp4), latent messages, two shared experts on 7,168', () => {
    const moe = nodesOf('kda_moe');
    expect(moe.find((n) => n.role === 'router')).toMatchObject({ n: 896, k: 7168, weight_dtype: 'bf16' });
    expect(moe.find((n) => n.role === 'routed_down_proj')).toMatchObject({ n: 3584, k: 7168, weight_dtype: 'mxfp4' });
    expect(moe.find((n) => n.op === 'GroupedGEMM')).toMatchObject({
      n: 3072,
      k: 3584,
      experts: 896,
      top_k: 16,
      weight_dtype: 'mxfp4',
    });
    expect(moe.find((n) => n.role === 'dispatch')).toMatchObject({ bytes_per_token: 2 * 3584 });
    expect(moe.find((n) => n.role === 'routed_up_proj')).toMatchObject({ n: 7168, k: 3584 });
    // 2 shared experts of 3,072, gated: gate_up 2·2·3,072 columns, down k = 2·3,072; attention and shared stay bf16
    expect(moe.find((n) => n.role === 'shared_gate_up')).toMatchObject({ n: 12288, k: 7168 });
    expect(moe.find((n) => n.role === 'shared_down')).toMatchObject({ n: 7168, k: 6144 });
    expect(moe.find((n) => n.role === 'shared_down')).not.toHaveProperty('weight_dtype');
    expect(g.global.weight_dtype).toBe('bf16');
  });

  it('attention residuals: 12 bf16 hidden states of 7,168 read before the mixer and before the MLP', () => {
    const kda = nodesOf('kda_moe');
    expect(kda.filter((n) => n.role === 'attn_res' || n.role === 'mlp_res')).toEqual([
      { op: 'Elementwise', role: 'attn_res', bytes_per_token: 12 * 7168 * 2 },
      { op: 'Elementwise', role: 'mlp_res', bytes_per_token: 12 * 7168 * 2 },
    ]);
  });

  it('linear_attn_config: an unknown key, a layer in both lists, or a missing layer is refused', () => {
    const cfg = (t: Record<string, unknown>) => t.linear_attn_config as Record<string, unknown>;
    expect(() => derive(edited((t) => (cfg(t).kda_chunk_size = 64)))).toThrow(
      /linear_attn_config.kda_chunk_size is not a field the graph deriver understands/,
    );
    expect(() => derive(edited((t) => (cfg(t).kda_layers as number[]).push(4)))).toThrow(
      /must name each of the 93 layers exactly once/,
    );
    expect(() => derive(edited((t) => (cfg(t).full_attn_layers as number[]).pop()))).toThrow(
      /must name each of the 93 layers exactly once/,
    );
    expect(() => derive(edited((t) => (cfg(t).kda_layers as number[]).splice(0, 1, 0)))).toThrow(
      /1-based layer numbers in 1..93/,
    );
  });

  it('an unknown top-level Kimi field is refused, naming it', () => {
    expect(() => derive(edited((t) => (t.mla_use_sparse_index = true)))).toThrow(
      /field "mla_use_sparse_index" is not one the graph deriver understands/,
    );
  });
});
