/**
 * The config → graph deriver on gemma-4-26B-A4B (issue 14 item 7): 25 sliding-window layers of 30, the
 * full-attention layers' own kv heads and head size with V reusing K's projection (attention_k_eq_v), the
 * MoE block beside the dense MLP (enable_moe_block), the NVFP4 checkpoint's format, and refusal of the
 * gemma fields the deriver handles only at their default (per-layer inputs, KV sharing, double-wide MLP).
 */
import { describe, expect, it } from 'vitest';
import { expandStack, loadModel } from '../../src/core/catalog/model.ts';
import { configFixture } from '../helpers/derive.ts';

const { base, edited, derive } = configFixture('gemma-4-26b-a4b');
const nodesOf = (g: ReturnType<typeof derive>, id: string) => g.layer_kinds.find((k) => k.id === id)!.nodes;

describe('gemma-4-26B-A4B', () => {
  const g = derive(base);
  it('layer_types: 25 sliding-window (1,024) layers and 5 full-attention layers, every 6th', () => {
    const seq = expandStack(g.stack);
    expect(seq).toHaveLength(30);
    expect(seq.filter((k) => k === 'swa_moe')).toHaveLength(25);
    expect(seq.flatMap((k, i) => (k === 'gqa_moe' ? [i] : []))).toEqual([5, 11, 17, 23, 29]);
    expect(nodesOf(g, 'swa_moe').find((n) => n.op === 'Attention')).toMatchObject({
      kind: 'swa',
      n_q: 16,
      n_kv: 8,
      d_h: 256,
      window: 1024,
    });
  });

  it('sliding layers: q, k and v of 256 each: (16 + 2·8)·256 = 8,192; o_proj k = 16·256', () => {
    const swa = nodesOf(g, 'swa_moe');
    expect(swa.find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 8192, k: 2816 });
    expect(swa.find((n) => n.role === 'o_proj')).toMatchObject({ n: 2816, k: 4096 });
  });

  it('full layers: 2 global kv heads of 512, V = K (no v_proj): (16 + 2)·512 = 9,216; o_proj k = 16·512', () => {
    const full = nodesOf(g, 'gqa_moe');
    expect(full.find((n) => n.op === 'Attention')).toMatchObject({ kind: 'gqa', n_q: 16, n_kv: 2, d_h: 512 });
    expect(full.find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 9216 });
    expect(full.find((n) => n.role === 'o_proj')).toMatchObject({ k: 8192 });
    // Without attention_k_eq_v the full layers carry their own v_proj: (16 + 2·2)·512 = 10,240.
    const kv = derive(edited((t) => (t.attention_k_eq_v = false)));
    expect(nodesOf(kv, 'gqa_moe').find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 10240 });
  });

  it('a global head size without its kv heads is refused, naming the missing field', () => {
    expect(() => derive(edited((t) => delete t.num_global_key_value_heads))).toThrow(
      /lacks num_global_key_value_heads/,
    );
  });

  it('enable_moe_block: the dense GeGLU MLP (2,112) and the MoE block (128 experts, top 8, 704) in every layer', () => {
    const swa = nodesOf(g, 'swa_moe');
    expect(swa.find((n) => n.role === 'mlp_gate_up')).toMatchObject({ n: 2 * 2112, k: 2816 });
    expect(swa.find((n) => n.role === 'mlp_down')).toMatchObject({ n: 2816, k: 2112 });
    expect(swa.find((n) => n.op === 'GroupedGEMM')).toMatchObject({ experts: 128, top_k: 8, n: 704, k: 2816 });
    expect(swa.find((n) => n.op === 'GroupedGEMM')).not.toHaveProperty('shared_experts');
    const dense = derive(edited((t) => (t.enable_moe_block = false)));
    expect(expandStack(dense.stack).every((k) => k.endsWith('_dense'))).toBe(true);
    expect(dense.layer_kinds.flatMap((k) => k.nodes).some((n) => n.op === 'GroupedGEMM')).toBe(false);
  });

  it('the NVFP4 checkpoint: routed experts nvfp4, the rest (attention, dense MLP, router excluded) bf16', () => {
    const q = loadModel('gemma-4-26b-a4b-nvfp4');
    expect(q.global.weight_dtype).toBe('bf16');
    const nodes = q.layer_kinds.flatMap((k) => k.nodes);
    expect(nodes.filter((n) => n.op === 'GroupedGEMM').every((n) => n.weight_dtype === 'nvfp4')).toBe(true);
    expect(nodes.filter((n) => n.op === 'GEMM').some((n) => n.weight_dtype === 'nvfp4')).toBe(false);
  });

  it.each([
    ['hidden_size_per_layer_input', 256],
    ['num_kv_shared_layers', 10],
    ['use_double_wide_mlp', true],
    ['use_bidirectional_attention', 'all'],
  ])('%s off its default is refused', (field, value) => {
    expect(() => derive(edited((t) => (t[field] = value)))).toThrow(
      new RegExp(`field ${field} = ${JSON.stringify(value)}: the deriver handles only its default`),
    );
  });

  it('an unknown gemma field is refused, naming it', () => {
    expect(() => derive(edited((t) => (t.altup_num_inputs = 4)))).toThrow(
      /field "altup_num_inputs" is not one the graph deriver understands/,
    );
  });
});
