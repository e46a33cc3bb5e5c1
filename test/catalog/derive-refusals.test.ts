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
    // Nemotron-3.5-Lightning: a ModelOpt MIXED_PRECISION checkpoint (per-layer formats the file does not list)
    ['nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4', /quant_algo "MIXED_PRECISION" not understood/],
  ])('%s', (dir, why) => {
    expect(() => deriveShared(dir)).toThrow(why);
  });

  describe('MiniMax-M3 (sparse_attention_config, moe_layer_freq lists): each new field checked', () => {
    const text = readFileSync(path.join(CONFIGS, 'MiniMaxAI--MiniMax-M3', 'config.json'), 'utf8');
    type M3 = Record<string, unknown> & {
      sparse_attention_config: Record<string, unknown> & { sparse_disable_index_value: number[] };
      moe_layer_freq: number[] | number;
    };
    const edit = (f: (c: M3) => void) => {
      const c = parseConfigJson(text) as M3;
      f(c);
      return () => deriveGraph(c, 'minimax-m3', text);
    };
    it('derives: 57 MSA layers where sparse_attention_freq says 1', () => {
      const g = deriveShared('MiniMaxAI--MiniMax-M3');
      expect(g.stack).toMatchObject({ pattern: ['msa_moe'], repeat: 57 });
    });
    it('an unknown sparse_attention_config key is refused, naming it', () => {
      expect(
        edit((c) => {
          c.sparse_attention_config.sparse_stride = 2;
        }),
      ).toThrow(/sparse_attention_config\.sparse_stride is not a key the graph deriver understands/);
    });
    it('a score type other than max, and an index with values, are refused', () => {
      expect(
        edit((c) => {
          c.sparse_attention_config.sparse_score_type = 'mean';
        }),
      ).toThrow(/sparse_score_type "mean": only "max" is priced/);
      expect(
        edit((c) => {
          c.sparse_attention_config.sparse_disable_index_value[10] = 0;
        }),
      ).toThrow(/sparse_disable_index_value differs from sparse_attention_freq/);
    });
    it('sparse_init_block adds its blocks to the selected tokens: (16 + 1 + 2) × 128 = 2432', () => {
      const g = edit((c) => {
        c.sparse_attention_config.sparse_init_block = 2;
      })();
      const attn = g.layer_kinds.find((k) => k.id === 'msa_moe')!.nodes.find((n) => n.op === 'Attention');
      expect(attn).toMatchObject({ index_topk: 2432 });
    });
    it('a moe_layer_freq list that disagrees with first_k_dense_replace is refused, naming the layer', () => {
      expect(
        edit((c) => {
          (c.moe_layer_freq as number[])[5] = 0;
        }),
      ).toThrow(/moe_layer_freq\[5\] = 0 disagrees with first_k_dense_replace/);
      expect(
        edit((c) => {
          c.moe_layer_freq = 2;
        }),
      ).toThrow(/moe_layer_freq must be 1 or list 0 \/ 1/);
    });
    it('a sparse_attention_freq of the wrong length is refused', () => {
      expect(
        edit((c) => {
          c.sparse_attention_config.sparse_attention_freq = [1, 1];
        }),
      ).toThrow(/sparse_attention_freq must list 0 or 1 for each of the 60 layers/);
    });
    it('attention_output_gate true puts a gate of the query width on the projection: + 64·128', () => {
      const g = edit((c) => {
        c.attention_output_gate = true;
      })();
      const qkv = g.layer_kinds.find((k) => k.id === 'msa_moe')!.nodes.find((n) => n.role === 'qkv_index_proj');
      expect(qkv).toMatchObject({ n: 10240 + 64 * 128 });
    });
  });

  describe('Nemotron-3 Super / Ultra (moe_latent_size, layers_block_type, ModelOpt FP8): each new field checked', () => {
    const ultra = readFileSync(
      path.join(CONFIGS, 'nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16', 'config.json'),
      'utf8',
    );
    const edit = (f: (c: Record<string, unknown>) => void) => {
      const c = parseConfigJson(ultra) as Record<string, unknown>;
      f(c);
      return () => deriveGraph(c, 'nemotron-3-ultra', ultra);
    };
    it('moe_latent_size: relu2 experts in the 1,024-wide latent between replicated down / up projections; the shared expert 5,376 wide on the full state', () => {
      const g = deriveShared('nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4');
      const moe = g.layer_kinds.find((k) => k.id === 'moe')!.nodes;
      expect(moe.find((n) => n.role === 'routed_down_proj')).toMatchObject({
        n: 1024,
        k: 4096,
        parallel: 'replicated',
      });
      expect(moe.find((n) => n.op === 'GroupedGEMM')).toMatchObject({
        n: 2688,
        k: 1024,
        experts: 512,
        top_k: 22,
        gated: false,
      });
      expect(moe.find((n) => n.role === 'routed_up_proj')).toMatchObject({ n: 4096, k: 1024 });
      expect(moe.find((n) => n.role === 'shared_up')).toMatchObject({ n: 5376, k: 4096 });
      expect(moe.find((n) => n.op === 'All2All')).toMatchObject({ bytes_per_token: 2048 });
      expect(g.global.weight_dtype).toBe('nvfp4');
    });
    it('hf_quant_config quant_algo FP8 (ModelOpt per-tensor) serves fp8', () => {
      expect(deriveShared('nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8').global.weight_dtype).toBe('fp8');
      expect(deriveShared('nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8').global.weight_dtype).toBe('fp8');
    });
    it('layers_block_type reads as hybrid_override_pattern (mamba M, attention *, mlp -, moe E), its length the layer count', () => {
      const c = parseConfigJson(ultra) as Record<string, unknown>;
      const types = c.layers_block_type as string[];
      const map: Record<string, string> = { mamba: 'M', attention: '*', mlp: '-', moe: 'E' };
      const { layers_block_type: _, ...rest } = c;
      const asPattern = {
        ...rest,
        num_hidden_layers: types.length,
        hybrid_override_pattern: types.map((t) => map[t]).join(''),
      };
      const a = deriveGraph(c, 'u', ultra);
      const b = deriveGraph(asPattern, 'u', ultra);
      expect(a.layer_kinds).toEqual(b.layer_kinds);
      expect(a.stack).toEqual(b.stack);
    });
    it('an unknown block type, a wrong length against num_hidden_layers, or both spellings, are refused', () => {
      expect(
        edit((c) => {
          (c.layers_block_type as string[])[3] = 'gdn';
        }),
      ).toThrow(/layers_block_type\[3\] = "gdn": not a block the deriver understands/);
      expect(
        edit((c) => {
          c.num_hidden_layers = 7;
        }),
      ).toThrow(/layers_block_type must list one block per layer \(7\)/);
      expect(
        edit((c) => {
          c.hybrid_override_pattern = 'M';
        }),
      ).toThrow(/both hybrid_override_pattern and layers_block_type/);
    });
    it('an MTP block list other than attention + moe is refused; an overlapped shared expert is noted', () => {
      expect(
        edit((c) => {
          c.mtp_layers_block_type = ['mamba', 'moe'];
        }),
      ).toThrow(/mtp_layers_block_type = .*: the deriver handles only its default/);
      const g = edit((c) => {
        c.moe_shared_expert_overlap = true;
      })();
      expect(g.derived_from!.not_modelled!.join('\n')).toMatch(/moe_shared_expert_overlap: .*priced in sequence/);
    });
  });

  it('the same-format NVFP4 Kimi-K2.6 / K2.7 checkpoints derive to K2.5-NVFP4’s graph (no new format to ship)', () => {
    const nodes = (dir: string) => deriveShared(dir).layer_kinds.map((k) => k.nodes);
    expect(nodes('nvidia--Kimi-K2.6-NVFP4')).toEqual(nodes('nvidia--Kimi-K2.5-NVFP4'));
    expect(nodes('nvidia--Kimi-K2.7-Code-NVFP4')).toEqual(nodes('nvidia--Kimi-K2.5-NVFP4'));
  });
});
