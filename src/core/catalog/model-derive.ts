/**
 * Derive a model graph from a Hugging Face `config.json` (issue 4 "Model graphs").
 *
 * The rules, per layer (all sizes whole-model; the pricer applies the tp/ep split):
 *   - input norm (Elementwise), attention block, tp all-reduce, post-attention norm, MLP or MoE block,
 *     tp all-reduce — the dense layer of reference §3.1, node for node, so that llama-3.1-8b gives the
 *     §3.1 FLOPs (436,207,616 per token per layer) and kernel counts (258 at tp 1).
 *   - GQA/MHA attention: fused qkv GEMM n = (n_q + 2·n_kv)·d_h, k = hidden (column-parallel);
 *     o_proj n = hidden, k = n_q·d_h (row-parallel).
 *   - A layer states a window (sliding_window, or layer_types "sliding_attention") → kind `swa`.
 *   - MLA (kv_lora_rank present, DeepSeek): fused q_a + kv_a (replicated, as vLLM's
 *     MergedReplicatedLinear), two latent norms, q_b and kv_b (column), latent cache n_kv 1,
 *     d_h = kv_lora_rank + qk_rope_head_dim; prefill arithmetic width (qk_head_dim + v_head_dim)/2.
 *   - MLP: gated (gate_up n = 2·inter, down k = inter) or, for BLOOM, non-gated GELU 4·hidden.
 *   - MoE: a replicated router GEMM (n = experts, kept bf16) and a GroupedGEMM with the shared
 *     experts; All2All dispatch and combine emitted only when ep > 1 (routed: message × top_k).
 *   - Head: final norm + lm_head (n = vocab, k = hidden), lm_head kept bf16 (quantizers leave it).
 *   - DeepSeek MTP (num_nextn_predict_layers; Qwen3.5 mtp_num_hidden_layers): a speculator layer kind `mtp`
 *     (two norms, eh_proj n = hidden, k = 2·hidden, then a full-attention decoder layer), priced with the
 *     head per drafter pass.
 *   - Sparse attention (model-derive-sparse.ts, issue 14): `index_topk` makes an MLA layer DSA (sparse
 *     top-k attention plus its indexer; GLM-5.2's `indexer_types` "shared" layers run no indexer);
 *     `compress_ratios` with `hc_mult` is DeepSeek-V4 (SWA / CSA / HCA layers, mHC around each site,
 *     capture breaks around each layer's attention).
 *   - Linear attention (layer_types "linear_attention", or every layer but each full_attention_interval-th
 *     when only the interval is given; Qwen3.5 Gated DeltaNet, vLLM Qwen3NextGatedDeltaNet): in_proj_qkvz
 *     n = 2·K·d_k + 2·V·d_v and in_proj_ba n = 2·V (column), the GDN recurrence (RecurrentUpdate gdn,
 *     V heads of d_v × d_k state; its causal conv is timed with it), a gated norm, out_proj k = V·d_v (row).
 *     layer_types values other than full / sliding / linear / deepseek_sparse attention are refused, never
 *     read as full.
 *   - attn_output_gate: the q projection carries a gate of the same width (n = (2·n_q + 2·n_kv)·d_h).
 *   - shared_expert_intermediate_size > 0: one shared expert of that width.
 *   - sparse_attention_config (MiniMax-M3, model-derive-msa.ts): the layers sparse_attention_freq marks are MSA
 *     (fused q/k/v + index projection, a `kind: msa` node, o_proj; priced as one measured module), the rest full
 *     attention; moe_layer_freq (a per-layer 0/1 list) must agree with first_k_dense_replace; dense layers use
 *     dense_intermediate_size; shared_intermediate_size sizes the shared expert.
 *   - hybrid_override_pattern (Nemotron-H, Nemotron-3; vLLM NemotronHForCausalLM): one block per character,
 *     each with its own norm and tp all-reduce: M a Mamba2 mixer (in_proj n = 2·d_inner + 2·n_groups·d_state +
 *     heads, d_inner = mamba_num_heads · mamba_head_dim; RecurrentUpdate mamba2; gated norm; out_proj),
 *     * attention, - an MLP, E a MoE block; any other character is refused. mlp_hidden_act relu2 makes MLPs and
 *     experts non-gated (up and down only).
 * Pure: no I/O.
 */
import { UserError } from '../errors.ts';
import { sha256 } from '../io/fs.ts';
import { checkConfigFields } from './config-fields.ts';
import { checkpointFormat, kvDeclaration } from './served-format.ts';
import {
  compressRatios,
  dsaBlock,
  indexerShape,
  ownIndexer,
  v4ExpertFormat,
  v4HeadCombine,
  v4KindId,
  v4LayerNodes,
  v4Shape,
} from './model-derive-sparse.ts';
import { attnResNode, kdaBlock, kimiLinear, latentMoeBlock } from './model-derive-kimi.ts';
import { msaBlock, msaConfig } from './model-derive-msa.ts';
import type { GraphNode, ModelGraph, Stack } from './model.ts';

export const DERIVER_VERSION = 1;

/** The subset of a Hugging Face config the deriver reads (all optional; aliases accepted). */
export type HfConfig = Record<string, unknown>;

function num(c: HfConfig, ...keys: string[]): number | undefined {
  for (const k of keys) {
    const v = c[k];
    if (typeof v === 'number' && Number.isFinite(v)) return v;
  }
  return undefined;
}

function req(c: HfConfig, name: string, ...keys: string[]): number {
  const v = num(c, ...keys);
  if (v === undefined) throw new UserError(`${name}: config.json lacks ${keys.join(' / ')}`);
  return v;
}

/**
 * The language model's config: a multimodal checkpoint (Llama-4, Kimi-K2.5) nests it under `text_config`;
 * the file's quantisation config and dtype apply to it when it states none of its own.
 */
export function languageConfig(c: HfConfig): HfConfig {
  const t = c.text_config;
  if (c.hidden_size !== undefined || !t || typeof t !== 'object' || Array.isArray(t)) return c;
  const text = t as HfConfig;
  return {
    ...text,
    ...(text.quantization_config === undefined && c.quantization_config !== undefined
      ? { quantization_config: c.quantization_config }
      : {}),
    ...(text.torch_dtype === undefined && text.dtype === undefined && (c.torch_dtype ?? c.dtype) !== undefined
      ? { torch_dtype: c.torch_dtype ?? c.dtype }
      : {}),
    ...(text.tie_word_embeddings === undefined && c.tie_word_embeddings !== undefined
      ? { tie_word_embeddings: c.tie_word_embeddings }
      : {}),
  };
}

/** Compress a sequence of layer-kind ids into prologue + pattern × repeat (period ≤ 4). */
export function compressStack(seq: readonly string[]): Stack {
  for (let p = 0; p < seq.length; p++) {
    for (let q = 1; q <= 4 && p + q <= seq.length; q++) {
      if ((seq.length - p) % q !== 0) continue;
      let ok = true;
      for (let i = p; i < seq.length && ok; i++) ok = seq[i] === seq[p + ((i - p) % q)];
      if (ok) {
        const s: Stack = { pattern: seq.slice(p, p + q), repeat: (seq.length - p) / q };
        if (p > 0) return { prologue: seq.slice(0, p), ...s };
        return s;
      }
    }
  }
  throw new Error('unreachable: a period-1 tail always exists');
}

/**
 * Derive a graph from a parsed `config.json`.
 * @param config parsed Hugging Face config
 * @param name catalog name written into the graph
 * @param configText the file's exact text, hashed into `derived_from.sha256`
 * @param hfQuant parsed `hf_quant_config.json` when the checkpoint ships one (ModelOpt exports)
 * @throws UserError naming the missing field, or a quantisation config it does not understand (served-format.ts)
 */
export function deriveGraph(file: HfConfig, name: string, configText: string, hfQuant?: HfConfig): ModelGraph {
  const config = languageConfig(file);
  const notModelled = [
    ...new Set([...(config === file ? [] : checkConfigFields(file, name)), ...checkConfigFields(config, name)]),
  ];
  const modelType = String(config.model_type ?? '');
  const hidden = req(config, name, 'hidden_size', 'n_embed', 'd_model');
  const layers =
    num(config, 'num_hidden_layers', 'n_layer', 'num_layers') ??
    (Array.isArray(config.layers_block_type) ? config.layers_block_type.length : undefined) ??
    req(config, name, 'num_hidden_layers', 'n_layer', 'num_layers');
  const nQ = req(config, name, 'num_attention_heads', 'n_head');
  const nKv = num(config, 'num_key_value_heads') ?? nQ;
  const dH = num(config, 'head_dim', 'attention_head_dim') ?? hidden / nQ;
  const relu2 = config.mlp_hidden_act === 'relu2';
  const pattern = hybridPattern(config, name, layers);
  const vocab = req(config, name, 'vocab_size');
  const tie = config.tie_word_embeddings === undefined ? modelType === 'bloom' : Boolean(config.tie_word_embeddings);
  const dt = checkpointFormat(config, name, hfQuant);
  const kvDecl = kvDeclaration(file, name, hfQuant);
  const expertsDt = (config.compress_ratios !== undefined ? v4ExpertFormat(config, name) : undefined) ?? dt.experts;
  const isBloom = modelType === 'bloom';
  const inter =
    num(config, 'dense_intermediate_size', 'intermediate_size_mlp', 'intermediate_size', 'n_inner') ?? 4 * hidden;
  // Llama-4: MoE every interleave_moe_layer_step-th layer with one shared expert of intermediate_size,
  // dense layers at intermediate_size_mlp; chunked attention on the RoPE layers (every 4th is global, NoPE).
  const moeStep = num(config, 'interleave_moe_layer_step');
  const chunk = num(config, 'attention_chunk_size');
  if (chunk !== undefined)
    notModelled.push(
      `attention_chunk_size: chunked attention priced as a window of ${chunk} tokens on three of every four layers (every 4th is global)`,
    );
  const experts =
    config.enable_moe_block === false ? undefined : num(config, 'n_routed_experts', 'num_local_experts', 'num_experts');
  const topK = num(config, ...TOP_K_KEYS);
  // gemma-4: an MoE block beside the dense MLP in every layer (enable_moe_block; KNOWN DIVERGENCE 22: in sequence).
  const moeAndMlp = config.enable_moe_block === true;
  const global = globalAttention(config, name);
  const kimi = kimiLinear(config, name, layers);
  const attnRes = num(config, 'attn_res_block_size');
  const firstDense = num(config, 'first_k_dense_replace') ?? 0;
  const isMla = num(config, 'kv_lora_rank') !== undefined;
  const layerTypes = layerTypesOf(config, name, layers);
  const linear = linearAttention(config, name);
  const ix = indexerShape(config, name);
  const msa = msaConfig(config, name, layers);
  const moeFreq = moeLayerFreq(config, name, layers);
  const v4 = config.compress_ratios !== undefined ? v4Shape(config, name) : undefined;
  const ratios = v4 ? compressRatios(config, name, layers) : [];
  const own = ix ? ownIndexer(config, name, layers) : [];
  if (layerTypes?.some((t) => t === 'deepseek_sparse_attention') && !ix)
    throw new UserError(`${name}: layer_types says deepseek_sparse_attention but config.json has no index_topk`);
  if (ix && !isMla && !v4)
    throw new UserError(
      `${name}: index_topk without kv_lora_rank or compress_ratios: no sparse layout the deriver knows`,
    );
  const window = num(config, 'sliding_window');
  const useSw = config.use_sliding_window !== false;

  const attnBlock = (windowed: boolean, ownIdx = true): GraphNode[] => {
    if (isMla && ix) return dsaBlock(mlaBlock(), ix, hidden, req(config, name, 'q_lora_rank'), ownIdx);
    if (isMla) return mlaBlock();
    // A full-attention layer of gemma-4 has its own kv heads and head size, and with attention_k_eq_v no v_proj
    // (KNOWN DIVERGENCE 21: its cache is still priced with a V copy).
    const g = windowed || !global ? { nKv, dH, kEqV: false } : global;
    const attn: GraphNode = windowed
      ? { op: 'Attention', kind: 'swa', n_q: nQ, n_kv: nKv, d_h: dH, window: (chunk ?? window)! }
      : { op: 'Attention', kind: 'gqa', n_q: nQ, n_kv: g.nKv, d_h: g.dH };
    if (isBloom) (attn as { alibi?: boolean }).alibi = true;
    if (modelType === 'gpt_oss') (attn as { sinks?: boolean }).sinks = true;
    const gate = config.attn_output_gate === true || config.attention_output_gate === true;
    const qkvN = ((gate ? 2 : 1) * nQ + (g.kEqV ? 1 : 2) * g.nKv) * g.dH;
    return [
      { op: 'GEMM', role: 'qkv_proj', n: qkvN, k: hidden, parallel: 'column' },
      attn,
      { op: 'GEMM', role: 'o_proj', n: hidden, k: nQ * g.dH, parallel: 'row' },
    ];
  };

  function mlaBlock(): GraphNode[] {
    {
      const qLora = req(config, name, 'q_lora_rank');
      const kvLora = req(config, name, 'kv_lora_rank');
      const rope = req(config, name, 'qk_rope_head_dim');
      const nope = req(config, name, 'qk_nope_head_dim');
      const vDim = req(config, name, 'v_head_dim');
      return [
        { op: 'GEMM', role: 'qkv_a_proj', n: qLora + kvLora + rope, k: hidden, parallel: 'replicated' },
        { op: 'Elementwise', role: 'q_a_norm', bytes_per_token: qLora * 4 },
        { op: 'Elementwise', role: 'kv_a_norm', bytes_per_token: kvLora * 4 },
        { op: 'GEMM', role: 'q_b_proj', n: nQ * (nope + rope), k: qLora, parallel: 'column' },
        { op: 'GEMM', role: 'kv_b_proj', n: nQ * (nope + vDim), k: kvLora, parallel: 'column' },
        { op: 'Attention', kind: 'mla', n_q: nQ, n_kv: 1, d_h: kvLora + rope, prefill_d_h: (nope + rope + vDim) / 2 },
        // Kimi-K3 mla_use_output_gate: a sigmoid gate on the attention output, its own projection.
        ...(config.mla_use_output_gate === true
          ? [{ op: 'GEMM', role: 'g_proj', n: nQ * vDim, k: hidden, parallel: 'column' } as GraphNode]
          : []),
        { op: 'GEMM', role: 'o_proj', n: hidden, k: nQ * vDim, parallel: 'row' },
      ];
    }
  }

  const mlpBlock = (): GraphNode[] =>
    isBloom || relu2
      ? [
          { op: 'GEMM', role: 'mlp_up', n: inter, k: hidden, parallel: 'column' },
          { op: 'GEMM', role: 'mlp_down', n: hidden, k: inter, parallel: 'row' },
        ]
      : [
          { op: 'GEMM', role: 'mlp_gate_up', n: 2 * inter, k: hidden, parallel: 'column' },
          { op: 'GEMM', role: 'mlp_down', n: hidden, k: inter, parallel: 'row' },
        ];

  const moeBlock = (): GraphNode[] => {
    const moeInter = num(config, 'moe_intermediate_size') ?? num(config, 'intermediate_size') ?? inter;
    const sharedInter =
      num(
        config,
        'shared_expert_intermediate_size',
        'moe_shared_expert_intermediate_size',
        'shared_intermediate_size',
      ) ?? 0;
    const shared =
      num(config, 'n_shared_experts', 'num_shared_experts') ?? (moeStep !== undefined || sharedInter > 0 ? 1 : 0);
    // Latent MoE: Kimi-K3 routed_expert_hidden_size, Nemotron-3 moe_latent_size (relu2 experts, shared expert
    // of its own width on the full hidden state; KNOWN DIVERGENCE 30).
    const latent = num(config, 'routed_expert_hidden_size', 'moe_latent_size');
    if (latent !== undefined && latent < hidden)
      return latentMoeBlock({
        hidden,
        latent,
        inter: moeInter,
        experts: experts!,
        topK: req(config, name, ...TOP_K_KEYS),
        shared,
        norm: config.latent_moe_use_norm === true,
        ...(expertsDt ? { dtype: expertsDt } : {}),
        ...(relu2 ? { gated: false } : {}),
        ...(sharedInter > 0 ? { sharedInter } : {}),
      });
    const g: GraphNode = {
      op: 'GroupedGEMM',
      role: 'experts',
      n: moeInter,
      k: hidden,
      experts: experts!,
      top_k: req(config, name, ...TOP_K_KEYS),
    };
    if (shared > 0)
      Object.assign(g, { shared_experts: shared, shared_intermediate_size: sharedInter > 0 ? sharedInter : moeInter });
    if (expertsDt) Object.assign(g, { weight_dtype: expertsDt });
    if (relu2) Object.assign(g, { gated: false });
    return [
      { op: 'GEMM', role: 'router', n: experts!, k: hidden, parallel: 'replicated', weight_dtype: 'bf16' },
      { op: 'All2All', role: 'dispatch', emit: 'ep>1', routed: true },
      g,
      { op: 'All2All', role: 'combine', emit: 'ep>1', routed: true },
    ];
  };

  type Mixer = 'linear' | 'kda' | 'msa';
  const mixerNodes = (windowed: boolean, ownIdx: boolean, mixer?: Mixer): GraphNode[] =>
    mixer === 'linear'
      ? gdnBlock(linear!, hidden)
      : mixer === 'kda'
        ? kdaBlock(kimi!, hidden)
        : mixer === 'msa'
          ? msaBlock(msa!, { nQ, nKv, dH, hidden, gate: config.attention_output_gate === true })
          : attnBlock(windowed, ownIdx);
  const layerNodes = (windowed: boolean, moe: boolean, ownIdx = true, mixer?: Mixer): GraphNode[] => [
    ...(attnRes ? [attnResNode('attn_res', attnRes, hidden)] : []),
    { op: 'Elementwise', role: 'input_norm' },
    ...mixerNodes(windowed, ownIdx, mixer),
    { op: 'AllReduce', role: 'attn_out', emit: 'tp>1' },
    ...(attnRes ? [attnResNode('mlp_res', attnRes, hidden)] : []),
    { op: 'Elementwise', role: 'post_attn_norm' },
    ...(moe ? (moeAndMlp ? [...mlpBlock(), ...moeBlock()] : moeBlock()) : mlpBlock()),
    { op: 'AllReduce', role: 'mlp_out', emit: 'tp>1' },
  ];

  const kinds = new Map<string, GraphNode[]>();
  const seq: string[] = [];
  // A block pattern (Nemotron-H): one block per layer, each with its own norm and all-reduce.
  const blocks: Record<string, () => GraphNode[]> = {
    M: () => mamba2Block(config, name, hidden),
    '*': () => attnBlock(false),
    '-': mlpBlock,
    E: moeBlock,
  };
  const ids: Record<string, string> = { M: 'mamba2', '*': 'attention', '-': 'mlp', E: 'moe' };
  for (let i = 0; pattern && i < layers; i++) {
    const c = pattern[i]!;
    if (!kinds.has(ids[c]!))
      kinds.set(ids[c]!, [
        { op: 'Elementwise', role: 'input_norm' },
        ...blocks[c]!(),
        { op: 'AllReduce', role: 'block_out', emit: 'tp>1' },
      ]);
    seq.push(ids[c]!);
  }
  for (let i = 0; !pattern && i < layers; i++) {
    if (v4) {
      const id = v4KindId(ratios[i]!);
      if (!kinds.has(id)) kinds.set(id, v4LayerNodes(v4, ratios[i]!, experts !== undefined ? moeBlock() : mlpBlock()));
      seq.push(id);
      continue;
    }
    const isLinear = layerTypes
      ? layerTypes[i] === 'linear_attention'
      : linear !== undefined && (i + 1) % linear.interval !== 0;
    const isKda = kimi?.kda.has(i) === true;
    const windowed =
      chunk !== undefined
        ? (i + 1) % 4 !== 0
        : layerTypes
          ? layerTypes[i] === 'sliding_attention'
          : window !== undefined && useSw && !isMla && window > 0;
    if (windowed && (chunk ?? window) === undefined)
      throw new UserError(`${name}: layer ${i} slides but config.json has no sliding_window`);
    const moe =
      experts !== undefined &&
      topK !== undefined &&
      i >= firstDense &&
      (moeStep === undefined || (i + 1) % moeStep === 0);
    if (moeFreq && moeFreq[i] !== moe)
      throw new UserError(
        `${name}: config.json moe_layer_freq[${i}] = ${moeFreq[i] ? 1 : 0} disagrees with first_k_dense_replace / the expert fields`,
      );
    const mlpTypes = config.mlp_layer_types;
    if (
      mlpTypes !== undefined &&
      (!Array.isArray(mlpTypes) ||
        (mlpTypes[i] === 'sparse') !== moe ||
        !['sparse', 'dense'].includes(String(mlpTypes[i])))
    )
      throw new UserError(
        `${name}: config.json mlp_layer_types[${i}] = ${JSON.stringify(Array.isArray(mlpTypes) ? mlpTypes[i] : mlpTypes)} disagrees with first_k_dense_replace / the expert fields`,
      );
    const isMsa = msa?.sparse[i] === true;
    const mixer = isLinear ? 'linear' : isKda ? 'kda' : isMsa ? 'msa' : undefined;
    const attnId = isLinear
      ? 'gdn'
      : isKda
        ? 'kda'
        : isMsa
          ? 'msa'
          : ix
            ? own[i]
              ? 'dsa'
              : 'dsa_shared'
            : isMla
              ? 'mla'
              : windowed
                ? 'swa'
                : 'gqa';
    const id = `${attnId}_${moe ? 'moe' : 'dense'}`;
    if (!kinds.has(id)) kinds.set(id, layerNodes(windowed, moe, own[i] ?? true, mixer));
    seq.push(id);
  }

  const g: ModelGraph = {
    kind: 'ModelGraph',
    name,
    derived_from: {
      format: 'hf_config_json',
      path: 'config.json',
      sha256: sha256(configText),
      deriver_version: DERIVER_VERSION,
      ...(notModelled.length ? { not_modelled: notModelled } : {}),
    },
    global: {
      hidden_size: hidden,
      vocab_size: vocab,
      tie_word_embeddings: tie,
      weight_dtype: dt.global,
      ...(kvDecl ? { kv_dtype: kvDecl } : {}),
    },
    layer_kinds: [...kinds].map(([id, nodes]) => ({ id, nodes })),
    stack: compressStack(seq),
    head: [
      ...(v4 ? [v4HeadCombine(v4)] : []),
      { op: 'Elementwise', role: 'final_norm' },
      { op: 'GEMM', role: 'lm_head', n: vocab, k: hidden, parallel: 'column', weight_dtype: 'bf16' },
    ],
  };
  const mtp = num(config, 'num_nextn_predict_layers', 'mtp_num_hidden_layers') ?? 0;
  if (mtp > 0) {
    const moe = experts !== undefined && topK !== undefined;
    g.layer_kinds.push({
      id: 'mtp',
      nodes: [
        { op: 'Elementwise', role: 'enorm' },
        { op: 'Elementwise', role: 'hnorm' },
        { op: 'GEMM', role: 'eh_proj', n: hidden, k: 2 * hidden, parallel: 'replicated' },
        ...(v4 ? v4LayerNodes(v4, ratios[layers] ?? 0, moe ? moeBlock() : mlpBlock()) : layerNodes(false, moe)),
      ],
    });
    g.speculator = {
      method: 'deepseek_mtp',
      num_spec_tokens: mtp,
      stack: { pattern: ['mtp'], repeat: mtp },
      head: true,
    };
  }
  return g;
}

/**
 * `moe_layer_freq` (MiniMax): 1 = every layer may be MoE (the scalar default), or a per-layer 0/1 list, which the
 * caller checks against first_k_dense_replace. Undefined for the scalar 1 or when absent.
 * @throws UserError for any other value
 */
function moeLayerFreq(c: HfConfig, name: string, layers: number): boolean[] | undefined {
  const v = c.moe_layer_freq;
  if (v === undefined || v === 1) return undefined;
  if (!Array.isArray(v) || v.length !== layers || v.some((x) => x !== 0 && x !== 1))
    throw new UserError(
      `${name}: config.json moe_layer_freq must be 1 or list 0 / 1 for each of the ${layers} layers, got ${JSON.stringify(v).slice(0, 80)}`,
    );
  return v.map((x) => x === 1);
}

/** Config keys of the routed experts per token (Hugging Face, gpt-oss, gemma-4, Kimi). */
const TOP_K_KEYS = ['num_experts_per_tok', 'experts_per_token', 'top_k_experts', 'num_experts_per_token'];

/** A full-attention layer's own geometry (gemma-4): kv heads, head size, and whether V reuses K's projection. */
interface GlobalAttention {
  nKv: number;
  dH: number;
  kEqV: boolean;
}

/**
 * gemma-4's full-attention layers (HF Gemma4 text attention): `num_global_key_value_heads` × `global_head_dim`,
 * and with `attention_k_eq_v` no v_proj (the values are the keys' projection); sliding layers keep
 * num_key_value_heads × head_dim with their own v_proj. Undefined when the config states none of these.
 * @throws UserError when global_head_dim or num_global_key_value_heads is missing while the other (or k_eq_v) is set
 */
function globalAttention(c: HfConfig, name: string): GlobalAttention | undefined {
  const kEqV = c.attention_k_eq_v === true;
  if (c.global_head_dim === undefined && c.num_global_key_value_heads === undefined && !kEqV) return undefined;
  return { nKv: req(c, name, 'num_global_key_value_heads'), dH: req(c, name, 'global_head_dim'), kEqV };
}

/** Layer types the deriver understands; any other value is refused, never read as full attention. */
const LAYER_TYPES: ReadonlySet<string> = new Set([
  'full_attention',
  'sliding_attention',
  'linear_attention',
  'deepseek_sparse_attention',
]);

/**
 * `layer_types`, checked: one known type per layer.
 * @throws UserError naming the layer and value the deriver does not understand, or a length mismatch
 */
function layerTypesOf(c: HfConfig, name: string, layers: number): string[] | undefined {
  if (c.layer_types === undefined) return undefined;
  const t = c.layer_types;
  if (!Array.isArray(t) || t.length !== layers)
    throw new UserError(
      `${name}: config.json layer_types must list one type per layer (${layers}), got ${JSON.stringify(t).slice(0, 80)}`,
    );
  t.forEach((v, i) => {
    if (typeof v !== 'string' || !LAYER_TYPES.has(v))
      throw new UserError(
        `${name}: config.json layer_types[${i}] = ${JSON.stringify(v)}: not a layer type the deriver understands (${[...LAYER_TYPES].join(', ')})`,
      );
  });
  return t as string[];
}

/** Gated DeltaNet geometry (Qwen3.5 `linear_*` fields), or undefined when the config has none. */
interface LinearAttention {
  kHeads: number;
  vHeads: number;
  dK: number;
  dV: number;
  /** Every interval-th layer is full attention when layer_types is absent. */
  interval: number;
}

/** @throws UserError when some but not all of the linear-attention fields are present */
function linearAttention(c: HfConfig, name: string): LinearAttention | undefined {
  const keys = ['linear_num_key_heads', 'linear_num_value_heads', 'linear_key_head_dim', 'linear_value_head_dim'];
  const present = keys.filter((k) => c[k] !== undefined);
  const usesLinear = Array.isArray(c.layer_types) && c.layer_types.includes('linear_attention');
  if (!present.length) {
    if (usesLinear)
      throw new UserError(`${name}: layer_types has linear_attention but config.json lacks ${keys.join(', ')}`);
    return undefined;
  }
  const [kHeads, vHeads, dK, dV] = keys.map((k) => req(c, name, k)) as [number, number, number, number];
  const interval = num(c, 'full_attention_interval') ?? 0;
  if (!usesLinear && !(interval > 1))
    throw new UserError(
      `${name}: config.json has linear-attention heads but neither layer_types nor full_attention_interval places them`,
    );
  return { kHeads, vHeads, dK, dV, interval: interval > 1 ? interval : Number.POSITIVE_INFINITY };
}

/** A Gated DeltaNet mixer block (module doc; vLLM Qwen3NextGatedDeltaNet). */
function gdnBlock(l: LinearAttention, hidden: number): GraphNode[] {
  return [
    { op: 'GEMM', role: 'in_proj_qkvz', n: 2 * l.kHeads * l.dK + 2 * l.vHeads * l.dV, k: hidden, parallel: 'column' },
    { op: 'GEMM', role: 'in_proj_ba', n: 2 * l.vHeads, k: hidden, parallel: 'column' },
    {
      op: 'RecurrentUpdate',
      role: 'gated_delta_rule',
      recurrent_kind: 'gdn',
      num_heads: l.vHeads,
      head_dim: l.dV,
      state_size: l.dK,
    },
    { op: 'Elementwise', role: 'gated_norm', bytes_per_token: 4 * l.vHeads * l.dV },
    { op: 'GEMM', role: 'out_proj', n: hidden, k: l.vHeads * l.dV, parallel: 'row' },
  ];
}

/** Block characters of hybrid_override_pattern the deriver understands. */
const PATTERN_BLOCKS = 'M*-E';

/**
 * `hybrid_override_pattern`, checked: one known block character per layer.
 * @throws UserError naming the position and character the deriver does not understand, or a length mismatch
 */
function hybridPattern(c: HfConfig, name: string, layers: number): string | undefined {
  if (c.layers_block_type !== undefined) {
    if (c.hybrid_override_pattern !== undefined)
      throw new UserError(`${name}: config.json states both hybrid_override_pattern and layers_block_type`);
    return blockTypesPattern(c.layers_block_type, 'layers_block_type', name, layers);
  }
  const p = c.hybrid_override_pattern;
  if (p === undefined) return undefined;
  if (typeof p !== 'string' || p.length !== layers)
    throw new UserError(
      `${name}: config.json hybrid_override_pattern must have one block per layer (${layers}), got ${JSON.stringify(p)}`,
    );
  for (let i = 0; i < p.length; i++)
    if (!PATTERN_BLOCKS.includes(p[i]!))
      throw new UserError(
        `${name}: config.json hybrid_override_pattern[${i}] = "${p[i]}": not a block the deriver understands (M Mamba2, * attention, - MLP, E MoE)`,
      );
  return p;
}

/** `layers_block_type` names (Nemotron-3 Ultra, 3.5-Lightning) as hybrid_override_pattern characters. */
const BLOCK_TYPES: Readonly<Record<string, string>> = { mamba: 'M', attention: '*', mlp: '-', moe: 'E' };

/**
 * A per-layer block-type list (`layers_block_type`, `mtp_layers_block_type`) as a pattern string.
 * @throws UserError naming the position and value the deriver does not understand, or a length mismatch
 */
export function blockTypesPattern(v: unknown, field: string, name: string, layers?: number): string {
  if (!Array.isArray(v) || (layers !== undefined && v.length !== layers))
    throw new UserError(
      `${name}: config.json ${field} must list one block per layer${layers === undefined ? '' : ` (${layers})`}, got ${JSON.stringify(v).slice(0, 80)}`,
    );
  return v
    .map((t, i) => {
      const ch = typeof t === 'string' ? BLOCK_TYPES[t] : undefined;
      if (ch === undefined)
        throw new UserError(
          `${name}: config.json ${field}[${i}] = ${JSON.stringify(t)}: not a block the deriver understands (${Object.keys(BLOCK_TYPES).join(', ')})`,
        );
      return ch;
    })
    .join('');
}

/** A Mamba2 mixer block (module doc; vLLM MambaMixer2). */
function mamba2Block(c: HfConfig, name: string, hidden: number): GraphNode[] {
  const heads = req(c, name, 'mamba_num_heads');
  const dHead = req(c, name, 'mamba_head_dim');
  const dState = req(c, name, 'ssm_state_size');
  const groups = req(c, name, 'n_groups');
  const inner = heads * dHead;
  return [
    { op: 'GEMM', role: 'in_proj', n: 2 * inner + 2 * groups * dState + heads, k: hidden, parallel: 'column' },
    {
      op: 'RecurrentUpdate',
      role: 'ssd',
      recurrent_kind: 'mamba2',
      num_heads: heads,
      head_dim: dHead,
      state_size: dState,
    },
    { op: 'Elementwise', role: 'gated_norm', bytes_per_token: 4 * inner },
    { op: 'GEMM', role: 'out_proj', n: hidden, k: inner, parallel: 'row' },
  ];
}
