/**
 * Kimi-K3 pieces of the config → graph deriver (issue 14 item 7; model-derive.ts calls these). The config
 * (`text_config` of KimiK3ForConditionalGeneration, KimiLinearForCausalLM) names three structures:
 *   - `linear_attn_config`: which layers are Kimi Delta Attention (`kda_layers`) and which full MLA
 *     (`full_attn_layers`), both 1-based layer numbers that must cover every layer once. A KDA mixer is q, k, v
 *     projections of heads·head_dim each (column), the decay gate's low-rank pair f_a (hidden → head_dim,
 *     replicated) and f_b (head_dim → heads·head_dim, column), the per-head beta b_proj (column), the output
 *     gate g_proj (full rank, hidden → heads·head_dim, column, with `use_full_rank_gate`; else the g_a / g_b
 *     pair), the recurrence (RecurrentUpdate kda, heads × head_dim × head_dim fp32 state; its short q/k/v
 *     convs are inside the measured kernels), a gated norm and o_proj (row).
 *   - `routed_expert_hidden_size` below hidden_size: latent MoE. The router reads the full hidden state; the
 *     routed experts run in the latent width between a down projection (hidden → latent) and an up
 *     projection (latent → hidden, after a norm with `latent_moe_use_norm`), so dispatch and combine move
 *     latent-width messages; the shared experts run on the full hidden state (KNOWN DIVERGENCE 24).
 *   - `attn_res_block_size`: attention residuals: before the mixer and before the MLP each layer mixes the
 *     outputs of the earlier layers of its block (a softmax over depth), priced as reading one block of
 *     bf16 hidden states per token (KNOWN DIVERGENCE 23).
 * Sources: the config fields themselves (../shared/datasets/model-configs/README.md "Kimi-K3") and the
 * published weight names (q_proj, k_proj, v_proj, f_a_proj, f_b_proj, b_proj, g_proj, o_norm, o_proj;
 * block_sparse_moe routed_expert_down_proj / _norm / _up_proj). Pure.
 */
import { UserError } from '../errors.ts';
import type { StorageDtype } from './dtypes.ts';
import type { GraphNode } from './model.ts';

type Obj = Record<string, unknown>;

/** KDA geometry and placement from `linear_attn_config`. */
export interface KimiLinear {
  /** 0-based layers that are KDA (every other layer is full MLA). */
  kda: ReadonlySet<number>;
  heads: number;
  headDim: number;
  fullRankGate: boolean;
}

/** linear_attn_config keys: read, or (gate_lower_bound, short_conv_kernel_size) numerics inside the kernels. */
const LINEAR_KEYS = new Set([
  'kda_layers',
  'full_attn_layers',
  'num_heads',
  'head_dim',
  'use_full_rank_gate',
  'gate_lower_bound',
  'short_conv_kernel_size',
]);

function layerList(v: unknown, name: string, key: string, layers: number): number[] {
  if (!Array.isArray(v) || v.some((x) => !Number.isInteger(x) || x < 1 || x > layers))
    throw new UserError(
      `${name}: config.json linear_attn_config.${key} must list 1-based layer numbers in 1..${layers}, got ${JSON.stringify(v).slice(0, 80)}`,
    );
  return (v as number[]).map((x) => x - 1);
}

/**
 * `linear_attn_config`, checked (module doc), or undefined when the config has none.
 * @throws UserError naming an unknown key, a missing size, or layer lists that overlap or miss a layer
 */
export function kimiLinear(c: Obj, name: string, layers: number): KimiLinear | undefined {
  const l = c.linear_attn_config;
  if (l === undefined || l === null) return undefined;
  if (typeof l !== 'object' || Array.isArray(l)) throw new UserError(`${name}: linear_attn_config must be an object`);
  const o = l as Obj;
  for (const k of Object.keys(o))
    if (!LINEAR_KEYS.has(k))
      throw new UserError(
        `${name}: config.json linear_attn_config.${k} is not a field the graph deriver understands; refusing rather than dropping it`,
      );
  const kda = layerList(o.kda_layers, name, 'kda_layers', layers);
  const full = layerList(o.full_attn_layers, name, 'full_attn_layers', layers);
  const all = new Set([...kda, ...full]);
  if (all.size !== layers || kda.length + full.length !== layers)
    throw new UserError(
      `${name}: config.json linear_attn_config: kda_layers (${kda.length}) and full_attn_layers (${full.length}) must name each of the ${layers} layers exactly once`,
    );
  const size = (k: string): number => {
    const v = o[k];
    if (typeof v !== 'number' || !(v > 0)) throw new UserError(`${name}: config.json linear_attn_config lacks ${k}`);
    return v;
  };
  return {
    kda: new Set(kda),
    heads: size('num_heads'),
    headDim: size('head_dim'),
    fullRankGate: o.use_full_rank_gate === true,
  };
}

/** A KDA mixer block (module doc). */
export function kdaBlock(k: KimiLinear, hidden: number): GraphNode[] {
  const p = k.heads * k.headDim;
  const gate: GraphNode[] = k.fullRankGate
    ? [{ op: 'GEMM', role: 'g_proj', n: p, k: hidden, parallel: 'column' }]
    : [
        { op: 'GEMM', role: 'g_a_proj', n: k.headDim, k: hidden, parallel: 'replicated' },
        { op: 'GEMM', role: 'g_b_proj', n: p, k: k.headDim, parallel: 'column' },
      ];
  return [
    { op: 'GEMM', role: 'qkv_proj', n: 3 * p, k: hidden, parallel: 'column' },
    { op: 'GEMM', role: 'f_a_proj', n: k.headDim, k: hidden, parallel: 'replicated' },
    { op: 'GEMM', role: 'f_b_proj', n: p, k: k.headDim, parallel: 'column' },
    { op: 'GEMM', role: 'b_proj', n: k.heads, k: hidden, parallel: 'column' },
    ...gate,
    {
      op: 'RecurrentUpdate',
      role: 'kda',
      recurrent_kind: 'kda',
      num_heads: k.heads,
      head_dim: k.headDim,
      state_size: k.headDim,
    },
    { op: 'Elementwise', role: 'gated_norm', bytes_per_token: 4 * p },
    { op: 'GEMM', role: 'o_proj', n: hidden, k: p, parallel: 'row' },
  ];
}

/** Latent MoE geometry (module doc). */
export interface LatentMoe {
  hidden: number;
  latent: number;
  inter: number;
  experts: number;
  topK: number;
  shared: number;
  norm: boolean;
  /** The routed experts' (and their latent projections') served format, when not the global one. */
  dtype?: StorageDtype;
  /** Gated experts (gate, up, down; default) or up and down only (Nemotron-3's relu2). */
  gated?: boolean;
  /** The shared experts' width when it is not the routed experts' (Nemotron-3 moe_shared_expert_intermediate_size). */
  sharedInter?: number;
}

/** A latent MoE block (module doc): router, down projection, routed experts in the latent width, up projection, shared experts. */
export function latentMoeBlock(m: LatentMoe): GraphNode[] {
  const fmt = m.dtype ? { weight_dtype: m.dtype } : {};
  const msg = 2 * m.latent; // bf16 latent activations per token
  const gated = m.gated !== false;
  const sharedN = m.shared * (m.sharedInter ?? m.inter);
  const shared: GraphNode[] =
    m.shared > 0
      ? [
          gated
            ? { op: 'GEMM', role: 'shared_gate_up', n: 2 * sharedN, k: m.hidden, parallel: 'column' }
            : { op: 'GEMM', role: 'shared_up', n: sharedN, k: m.hidden, parallel: 'column' },
          { op: 'GEMM', role: 'shared_down', n: m.hidden, k: sharedN, parallel: 'row' },
        ]
      : [];
  return [
    { op: 'GEMM', role: 'router', n: m.experts, k: m.hidden, parallel: 'replicated', weight_dtype: 'bf16' },
    { op: 'GEMM', role: 'routed_down_proj', n: m.latent, k: m.hidden, parallel: 'replicated', ...fmt },
    { op: 'All2All', role: 'dispatch', emit: 'ep>1', routed: true, bytes_per_token: msg },
    {
      op: 'GroupedGEMM',
      role: 'experts',
      n: m.inter,
      k: m.latent,
      experts: m.experts,
      top_k: m.topK,
      ...fmt,
      ...(gated ? {} : { gated: false }),
    },
    { op: 'All2All', role: 'combine', emit: 'ep>1', routed: true, bytes_per_token: msg },
    ...(m.norm ? [{ op: 'Elementwise', role: 'latent_norm', bytes_per_token: 4 * m.latent } as GraphNode] : []),
    { op: 'GEMM', role: 'routed_up_proj', n: m.hidden, k: m.latent, parallel: 'replicated', ...fmt },
    ...shared,
  ] as GraphNode[];
}

/** Attention-residual reads before a layer's mixer or MLP: one block of bf16 hidden states per token (module doc). */
export function attnResNode(role: 'attn_res' | 'mlp_res', block: number, hidden: number): GraphNode {
  return { op: 'Elementwise', role, bytes_per_token: 2 * block * hidden };
}
