/**
 * The config → graph deriver on hybrid configs (issue 14 item 6): layer_types with linear attention, the
 * full_attention_interval pattern, MTP under its Qwen3.5 name, the shared-expert width, the gated q, and
 * refusal of any field or value it does not understand (never a silent mis-derivation).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { deriveGraph } from '../../src/core/catalog/model-derive.ts';
import { expandStack, parseConfigJson } from '../../src/core/catalog/model.ts';
import { configFixture } from '../helpers/derive.ts';

const { base, edited, derive } = configFixture('qwen3.5-35b-a3b');

describe('layer_types with linear attention', () => {
  const g = derive(base);
  it('linear_attention layers become Gated DeltaNet mixers, full_attention layers gated GQA', () => {
    const seq = expandStack(g.stack);
    expect(seq).toHaveLength(40);
    expect(seq.filter((k) => k === 'gdn_moe')).toHaveLength(30);
    expect(seq.filter((k) => k === 'gqa_moe')).toHaveLength(10);
    const gdn = g.layer_kinds.find((k) => k.id === 'gdn_moe')!.nodes;
    // K = 16, V = 32 heads of 128: qkvz 2·16·128 + 2·32·128 = 12,288; ba 2·32 = 64; out_proj k = 32·128
    expect(gdn.find((n) => n.role === 'in_proj_qkvz')).toMatchObject({ n: 12288, k: 2048 });
    expect(gdn.find((n) => n.role === 'in_proj_ba')).toMatchObject({ n: 64 });
    expect(gdn.find((n) => n.op === 'RecurrentUpdate')).toMatchObject({
      recurrent_kind: 'gdn',
      num_heads: 32,
      head_dim: 128,
      state_size: 128,
    });
    expect(gdn.find((n) => n.role === 'out_proj')).toMatchObject({ n: 2048, k: 4096 });
    expect(gdn.some((n) => n.op === 'Attention')).toBe(false);
  });

  it('attn_output_gate doubles the q projection: (2·16 + 2·2)·256 = 9,216', () => {
    const gqa = g.layer_kinds.find((k) => k.id === 'gqa_moe')!.nodes;
    expect(gqa.find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 9216 });
    const ungated = derive(edited((t) => (t.attn_output_gate = false)));
    const q = ungated.layer_kinds.find((k) => k.id === 'gqa_moe')!.nodes.find((n) => n.role === 'qkv_proj');
    expect(q).toMatchObject({ n: (16 + 4) * 256 });
  });

  it('shared_expert_intermediate_size: one shared expert of that width', () => {
    const e = g.layer_kinds.find((k) => k.id === 'gdn_moe')!.nodes.find((n) => n.op === 'GroupedGEMM');
    expect(e).toMatchObject({ experts: 256, top_k: 8, n: 512, shared_experts: 1, shared_intermediate_size: 512 });
  });

  it('MTP under its Qwen3.5 name (mtp_num_hidden_layers) is the speculator', () => {
    expect(g.speculator).toMatchObject({ method: 'deepseek_mtp', num_spec_tokens: 1, stack: { pattern: ['mtp'] } });
  });

  it('without layer_types, full_attention_interval places the pattern (every 4th full)', () => {
    const h = derive(edited((t) => delete t.layer_types));
    expect(h.stack).toEqual(g.stack);
  });
});

describe('refusals (never mis-derive silently)', () => {
  it('an unknown layer type is refused, not read as full attention', () => {
    const c = edited((t) => ((t.layer_types as string[])[5] = 'mamba'));
    expect(() => derive(c)).toThrow(/layer_types\[5\] = "mamba": not a layer type the deriver understands/);
  });
  it('layer_types of the wrong length is refused', () => {
    expect(() => derive(edited((t) => (t.layer_types = ['full_attention'])))).toThrow(/one type per layer \(40\)/);
  });
  it('linear layers without their head fields are refused', () => {
    expect(() => derive(edited((t) => delete t.linear_num_value_heads))).toThrow(
      /config.json lacks linear_num_value_heads/,
    );
  });
  it('linear heads with nothing placing them are refused', () => {
    expect(() =>
      derive(
        edited((t) => {
          delete t.layer_types;
          delete t.full_attention_interval;
        }),
      ),
    ).toThrow(/neither layer_types nor full_attention_interval places them/);
  });
  it('a bf16 recurrent state is refused (the laws price fp32)', () => {
    expect(() => derive(edited((t) => (t.mamba_ssm_dtype = 'bfloat16')))).toThrow(
      /mamba_ssm_dtype = "bfloat16": the deriver handles only its default/,
    );
  });
  it('MTP with dedicated embeddings is refused', () => {
    expect(() => derive(edited((t) => (t.mtp_use_dedicated_embeddings = true)))).toThrow(
      /mtp_use_dedicated_embeddings = true/,
    );
  });
  it('an unknown field is refused by name', () => {
    expect(() => derive(edited((t) => (t.linear_gate_rank = 64)))).toThrow(
      /config.json field "linear_gate_rank" is not one the graph deriver understands/,
    );
    expect(() => derive({ ...base, vision_tower_pool: 2 })).toThrow(/"vision_tower_pool"/);
  });
});

describe('hybrid_override_pattern (Nemotron-H, Nemotron-3)', () => {
  const text = readFileSync(path.join(REPO_ROOT, 'catalog/models/nemotron-3-nano-30b-a3b/config.json'), 'utf8');
  const cfg = JSON.parse(text) as Record<string, unknown>;
  const g = deriveGraph(cfg, 'nano', text);
  it('one block per character: M Mamba2, E MoE, * attention; 52 layers', () => {
    const seq = expandStack(g.stack);
    expect(seq).toHaveLength(52);
    expect(seq.filter((k) => k === 'mamba2')).toHaveLength(23);
    expect(seq.filter((k) => k === 'moe')).toHaveLength(23);
    expect(seq.filter((k) => k === 'attention')).toHaveLength(6);
    const m = g.layer_kinds.find((k) => k.id === 'mamba2')!.nodes;
    // d_inner = 64 · 64 = 4096; in_proj 2·4096 + 2·8·128 + 64 = 10,304
    expect(m.find((n) => n.role === 'in_proj')).toMatchObject({ n: 10304, k: 2688 });
    expect(m.find((n) => n.op === 'RecurrentUpdate')).toMatchObject({
      recurrent_kind: 'mamba2',
      num_heads: 64,
      head_dim: 64,
      state_size: 128,
    });
    // relu2 experts are not gated; the shared expert is 3712 wide
    expect(g.layer_kinds.find((k) => k.id === 'moe')!.nodes.find((n) => n.op === 'GroupedGEMM')).toMatchObject({
      gated: false,
      shared_experts: 1,
      shared_intermediate_size: 3712,
    });
  });
  it('an unknown block character is refused', () => {
    const p = String(cfg.hybrid_override_pattern);
    const bad = { ...cfg, hybrid_override_pattern: `${p.slice(0, 3)}X${p.slice(4)}` };
    expect(() => deriveGraph(bad, 'nano', text)).toThrow(/hybrid_override_pattern\[3\] = "X": not a block/);
  });
  it('Nemotron-H-56B: bare Infinity in config.json (time_step_limit) is read, not refused', () => {
    const t = readFileSync(path.join(REPO_ROOT, 'catalog/models/nemotron-h-56b/config.json'), 'utf8');
    expect(() => JSON.parse(t)).toThrow();
    expect(parseConfigJson(t).time_step_limit).toEqual([0, Number.POSITIVE_INFINITY]);
  });
});
