/**
 * Every Hugging Face config field the graph deriver knows, and what it does with it (issue 13 item 5:
 * "the deriver refuses a config field it does not understand; it never drops one silently").
 *
 * - READ: the deriver reads it (model-derive.ts, served-format.ts).
 * - NO_STEP_EFFECT: understood and without effect on a step's work: numerics (norm eps, rope scaling,
 *   activation choice among gated SiLU-likes), routing scores (the router GEMM is the same), training and
 *   generation defaults, tokenizer ids, naming and packaging metadata.
 * - NOT_MODELLED: understood, changes the served model, and is NOT priced; derived graphs record each
 *   present one in `derived_from.not_modelled` with the reason (so nothing is dropped silently).
 * - REFUSED_UNLESS: structural fields the deriver handles only at their default value; any other value
 *   is refused.
 * A field in none of these lists is refused, naming it. Pure.
 */
import { UserError } from '../errors.ts';

export const READ_FIELDS: ReadonlySet<string> = new Set([
  'model_type',
  'hidden_size',
  'n_embed',
  'd_model',
  'num_hidden_layers',
  'n_layer',
  'num_layers',
  'num_attention_heads',
  'n_head',
  'num_key_value_heads',
  'head_dim',
  'vocab_size',
  'tie_word_embeddings',
  'intermediate_size',
  'n_inner',
  'n_routed_experts',
  'num_local_experts',
  'num_experts',
  'num_experts_per_tok',
  'experts_per_token',
  'first_k_dense_replace',
  'kv_lora_rank',
  'q_lora_rank',
  'qk_rope_head_dim',
  'qk_nope_head_dim',
  'v_head_dim',
  'layer_types',
  'sliding_window',
  'use_sliding_window',
  'moe_intermediate_size',
  'n_shared_experts',
  'num_nextn_predict_layers',
  'quantization_config',
  'torch_dtype',
  'dtype',
  'text_config',
  'interleave_moe_layer_step',
  'intermediate_size_mlp',
  'attention_chunk_size',
  // sparse attention (issue 14; model-derive-sparse.ts)
  'index_topk',
  'index_n_heads',
  'index_head_dim',
  'indexer_types',
  'compress_ratios',
  'hc_mult',
  'o_lora_rank',
  'o_groups',
  'expert_dtype',
  'mlp_layer_types',
  // Qwen3.5 / Qwen3-Next: gated attention output, Gated DeltaNet linear-attention layers, MTP, shared expert
  'attn_output_gate',
  'full_attention_interval',
  'linear_conv_kernel_dim',
  'linear_key_head_dim',
  'linear_num_key_heads',
  'linear_num_value_heads',
  'linear_value_head_dim',
  'mtp_num_hidden_layers',
  'shared_expert_intermediate_size',
  // Nemotron-H / Nemotron-3: per-layer block pattern, Mamba2 mixers, relu2 MLPs, attention head width
  'hybrid_override_pattern',
  'mamba_num_heads',
  'mamba_head_dim',
  'ssm_state_size',
  'n_groups',
  'attention_head_dim',
  'mlp_hidden_act',
  'moe_shared_expert_intermediate_size',
  // gemma-4 (model-derive.ts globalAttention): full-attention geometry, MoE beside the dense MLP
  'global_head_dim',
  'num_global_key_value_heads',
  'attention_k_eq_v',
  'enable_moe_block',
  'top_k_experts',
  'num_experts_per_token',
  // Kimi-K3 (model-derive-kimi.ts): KDA placement and geometry, the MLA output gate, latent MoE, attention residuals
  'linear_attn_config',
  'mla_use_output_gate',
  'num_shared_experts',
  'routed_expert_hidden_size',
  'latent_moe_use_norm',
  'attn_res_block_size',
  // MiniMax-M3 (model-derive-msa.ts): MSA layers, the attention output gate, per-layer MoE placement, the dense
  // layers' MLP width and the shared expert's
  'sparse_attention_config',
  'attention_output_gate',
  'moe_layer_freq',
  'dense_intermediate_size',
  'shared_intermediate_size',
  // Nemotron-3 Super / Ultra / 3.5-Lightning: latent MoE (model-derive-kimi.ts latentMoeBlock), the block list
  'moe_latent_size',
  'layers_block_type',
]);

export const NO_STEP_EFFECT: ReadonlySet<string> = new Set([
  // numerics and positional encoding
  'rms_norm_eps',
  'layer_norm_epsilon',
  'rope_scaling',
  'rope_theta',
  'rope_parameters',
  'rotary_dim',
  'partial_rotary_factor',
  'hidden_act',
  'swiglu_limit',
  'max_position_embeddings',
  'initial_context_length',
  'use_qk_norm',
  'qk_norm_type',
  'attention_bias',
  'mlp_bias',
  'use_bias',
  'use_conv_bias',
  // Mamba2 kernel internals: conv width and scan chunk are inside the measured kernels; dt parameters are numerics
  'conv_kernel',
  'chunk_size',
  'expand' /* vLLM sizes the mixer by mamba_num_heads · mamba_head_dim, which is read */,
  'mamba_hidden_act',
  'use_mamba_kernels',
  'time_step_floor',
  'time_step_limit',
  'time_step_max',
  'time_step_min',
  'time_step_rank',
  'residual_in_fp32',
  'rescale_prenorm_residual',
  'num_logits_to_keep',
  'norm_eps',
  'offset_alibi',
  'apply_residual_connection_post_layernorm',
  'masked_softmax_fusion',
  'skip_bias_add',
  'skip_bias_add_qkv',
  'slow_but_exact',
  'pretraining_tp',
  'attn_type_list',
  'max_window_layers' /* only with use_sliding_window, which is read */,
  // sparse attention numerics (issue 14)
  'hc_eps',
  'compress_rope_theta',
  'qk_head_dim' /* = qk_nope_head_dim + qk_rope_head_dim, which are read */,
  'indexer_rope_interleave',
  'rope_interleave',
  'rope_parameters',
  'index_topk_freq' /* the period of indexer_types, which is read */,
  // routing scores (same router GEMM)
  'scoring_func',
  'norm_topk_prob',
  'routed_scaling_factor',
  'topk_method',
  'n_group',
  'topk_group',
  'use_routing_bias',
  'seq_aux',
  'aux_loss_alpha',
  'router_aux_loss_coef',
  'router_jitter_noise',
  'output_router_logits',
  'ep_size',
  // training, generation and output defaults
  'attention_dropout',
  'hidden_dropout',
  'initializer_range',
  'use_cache',
  'output_attentions',
  'output_hidden_states',
  'output_scores',
  'return_dict',
  'return_dict_in_generate',
  'torchscript',
  'use_bfloat16',
  'tf_legacy_loss',
  'chunk_size_feed_forward',
  'pruned_heads',
  'temperature',
  'top_k',
  'top_p',
  'typical_p',
  'do_sample',
  'num_beams',
  'num_beam_groups',
  'num_return_sequences',
  'max_length',
  'min_length',
  'length_penalty',
  'repetition_penalty',
  'diversity_penalty',
  'no_repeat_ngram_size',
  'encoder_no_repeat_ngram_size',
  'bad_words_ids',
  'begin_suppress_tokens',
  'suppress_tokens',
  'early_stopping',
  'exponential_decay_length_penalty',
  'remove_invalid_values',
  'forced_bos_token_id',
  'forced_eos_token_id',
  'decoder_start_token_id',
  // tokenizer ids and naming / packaging metadata
  'bos_token_id',
  'eos_token_id',
  'pad_token_id',
  'sep_token_id',
  'unk_token_id',
  'ignore_index',
  'tokenizer_class',
  'architectures',
  'auto_map',
  'transformers_version',
  '_name_or_path',
  'id2label',
  'label2id',
  'finetuning_task',
  'problem_type',
  'prefix',
  'task_specific_params',
  'is_decoder',
  'is_encoder_decoder',
  'add_cross_attention',
  'cross_attention_hidden_size',
  'tie_encoder_decoder',
  // multimodal placeholders (token ids only)
  'image_token_id',
  'video_token_id',
  'vision_start_token_id',
  'vision_end_token_id',
  'media_placeholder_token_id',
  'video_placeholder',
  'use_unified_vision_chunk',
  'audio_token_id',
  'boa_token_id',
  'eoa_token_id',
  'eoa_token_index',
  'boi_token_id',
  'eoi_token_id',
  'vision_soft_tokens_per_image',
  // gemma-4: logits softcap (elementwise on the head's output), the gated GELU choice, and the per-layer
  // input vocabulary, used only with hidden_size_per_layer_input (refused unless 0 below)
  'final_logit_softcapping',
  'hidden_activation',
  'vocab_size_per_layer_input',
  // Kimi-K3: SiTU activation numerics, NoPE on the MLA layers (positional only), routing scores and grouping
  // (the same router GEMM), and a multimodal placeholder string
  'activation_situ_beta',
  'activation_situ_linear_beta',
  'mla_use_nope',
  'moe_renormalize',
  'moe_router_activation_func',
  'num_expert_group',
  'use_grouped_topk',
  'image_placeholder',
  // MiniMax-M3: the clamped SwiGLU's slope (the gated activation is the same two GEMMs) and gemma-style norm weights
  'swiglu_alpha',
  'use_gemma_norm',
]);

/** Fields understood but not priced, with the reason recorded in the derived graph. */
export const NOT_MODELLED: Readonly<Record<string, string>> = {
  vision_config: 'vision tower not priced (text-only steps)',
  audio_config: 'audio tower not priced (text-only steps)',
  use_mtp: 'MiniMax MTP drafter modules not derived (served without speculation by default)',
  num_mtp_modules: 'MiniMax MTP drafter modules not derived (served without speculation by default)',
  mtp_transformer_layers: 'MiniMax MTP drafter modules not derived (served without speculation by default)',
  num_hash_layers: 'hash-routed first layers priced with the learned router GEMM (a 1-expert-wide GEMM over-count)',
  index_skip_topk_offset: 'the first layers skip top-k selection in the engine; priced as top-k layers like the rest',
  moe_shared_expert_overlap:
    'the engine overlaps the shared expert with the routed experts on a side stream; priced in sequence (an upper bound)',
  index_share_for_mtp_iteration:
    'the MTP drafter reuses the target indexer across draft steps; its own indexer is priced',
};

/** Structural fields handled only at their default; the predicate says whether a value is the default. */
export const REFUSED_UNLESS: Readonly<Record<string, (v: unknown) => boolean>> = {
  decoder_sparse_step: (v) => v === 1,
  mlp_only_layers: (v) => Array.isArray(v) && v.length === 0,
  // mHC is priced from kernels measured at 20 Sinkhorn iterations (aiconfigurator-modern mhc_module_perf).
  hc_sinkhorn_iters: (v) => v === 20,
  index_topk_pattern: (v) => v === null,
  // The recurrent laws price an fp32 state (core/laws/recurrent.ts); MTP sharing the target's embedding.
  mamba_ssm_dtype: (v) => v === 'float32',
  mamba_ssm_cache_dtype: (v) => v === 'float32',
  mamba_proj_bias: (v) => v === false,
  mtp_use_dedicated_embeddings: (v) => v === false,
  // Nemotron-3: the MTP layer's blocks (an attention block and a MoE block, the drafter layer the deriver builds),
  // and the shared expert run in sequence with the routed ones (not on a side stream).
  mtp_hybrid_override_pattern: (v) => v === '*E',
  mtp_layers_block_type: (v) => Array.isArray(v) && v.length === 2 && v[0] === 'attention' && v[1] === 'moe',
  // gemma-4: per-layer input embeddings and cross-layer KV sharing (the E2B/E4B features) and the double-wide
  // MLP are not derived; bidirectional attention among image tokens only leaves text steps causal.
  hidden_size_per_layer_input: (v) => v === 0,
  num_kv_shared_layers: (v) => v === 0,
  use_double_wide_mlp: (v) => v === false,
  use_bidirectional_attention: (v) => v === 'vision' || v === false || v === null,
};

/**
 * Check every field of a (language-model) config. Returns the not-modelled notes (fields sharing a reason
 * joined), in field order.
 * @throws UserError naming the first field the deriver does not understand, or a structural field off its default
 */
export function checkConfigFields(config: Record<string, unknown>, name: string): string[] {
  const byReason = new Map<string, string[]>();
  for (const [k, v] of Object.entries(config)) {
    if (k in REFUSED_UNLESS) {
      if (!REFUSED_UNLESS[k]!(v))
        throw new UserError(
          `${name}: config.json field ${k} = ${JSON.stringify(v)}: the deriver handles only its default`,
        );
      continue;
    }
    if (READ_FIELDS.has(k) || NO_STEP_EFFECT.has(k)) continue;
    if (k in NOT_MODELLED) {
      if (v !== false && v !== 0 && v !== null)
        byReason.set(NOT_MODELLED[k]!, [...(byReason.get(NOT_MODELLED[k]!) ?? []), k]);
      continue;
    }
    throw new UserError(
      `${name}: config.json field "${k}" is not one the graph deriver understands (src/core/catalog/config-fields.ts lists them); refusing rather than dropping it`,
    );
  }
  return [...byReason].map(([why, keys]) => `${keys.join(', ')}: ${why}`);
}
