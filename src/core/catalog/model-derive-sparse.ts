/**
 * The deriver's sparse-attention rules (issue 14 items 6-7): DeepSeek Sparse Attention (DeepSeek-V3.2,
 * GLM-5: `index_topk`, `index_n_heads`, `index_head_dim`, GLM-5.2's shared indexers) and DeepSeek-V4
 * (`compress_ratios` CSA / HCA / SWA layers, the indexer on CSA layers, the mHC hyper-connections `hc_*`,
 * grouped low-rank output projection, FP4 experts). Called by model-derive.ts; pure, no I/O. Sizes are
 * whole-model (the pricer splits them over tp).
 *
 * The sources are the configs' own fields and the dataset notes in
 * ../shared/datasets/model-configs/README.md (field meanings) and aiconfigurator-modern/README.md
 * (kernel shapes: the indexer is 64 (V4) or 32 (GLM-5) heads × 128 over the whole context; a V4 layer
 * attends a 128-token window plus its compressed stream).
 */
import { UserError } from '../errors.ts';
import { mhcBytesPerToken } from '../laws/sparse.ts';
import type { StorageDtype } from './dtypes.ts';
import type { GraphNode } from './model.ts';

type Cfg = Record<string, unknown>;

function need(c: Cfg, name: string, key: string): number {
  const v = c[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new UserError(`${name}: config.json lacks ${key}`);
  return v;
}

/** A DSA indexer's shape, or undefined when the config states no `index_topk`. */
export interface IndexerShape {
  topk: number;
  heads: number;
  dim: number;
}

/** The indexer of a sparse config (`index_topk` with `index_n_heads` × `index_head_dim`). */
export function indexerShape(c: Cfg, name: string): IndexerShape | undefined {
  if (c.index_topk === undefined) return undefined;
  return {
    topk: need(c, name, 'index_topk'),
    heads: need(c, name, 'index_n_heads'),
    dim: need(c, name, 'index_head_dim'),
  };
}

/**
 * Which layers run their own indexer: every layer, or under GLM-5.2's `indexer_types` only the `full`
 * ones (a `shared` layer reuses the previous full layer's selection, so it runs no scan).
 * @throws UserError for an `indexer_types` of the wrong length or an unknown entry
 */
export function ownIndexer(c: Cfg, name: string, layers: number): boolean[] {
  const t = c.indexer_types;
  if (t === undefined) return Array.from({ length: layers }, () => true);
  if (!Array.isArray(t) || t.length !== layers || t.some((x) => x !== 'full' && x !== 'shared'))
    throw new UserError(`${name}: config.json indexer_types must list "full" or "shared" for each of ${layers} layers`);
  return t.map((x) => x === 'full');
}

/** The indexer nodes of one layer (its projections, key norm and scan) reading a compressed stream of `ratio`. */
function indexerNodes(
  ix: IndexerShape,
  hidden: number,
  qLora: number,
  ratio: number,
  compressed: boolean,
): GraphNode[] {
  const scan: GraphNode = { op: 'Attention', kind: 'sparse', role: 'indexer', n_q: ix.heads, n_kv: 1, d_h: ix.dim };
  if (ratio > 1) Object.assign(scan, { compress_ratio: ratio });
  return [
    { op: 'GEMM', role: 'indexer_wq_b', n: ix.heads * ix.dim, k: qLora, parallel: 'replicated' },
    { op: 'GEMM', role: 'indexer_wk', n: ix.dim, k: hidden, parallel: 'replicated' },
    ...(compressed
      ? [{ op: 'GEMM', role: 'indexer_compressor', n: 4 * ix.dim, k: hidden, parallel: 'replicated' } as GraphNode]
      : []),
    { op: 'Elementwise', role: 'indexer_k_norm', bytes_per_token: ix.dim * 4 },
    { op: 'GEMM', role: 'indexer_weights_proj', n: ix.heads, k: hidden, parallel: 'replicated' },
    scan,
  ];
}

/**
 * DSA (DeepSeek-V3.2, GLM-5): the MLA block with its attention made sparse (top-k over the uncompressed
 * context, ratio 1) and, on a layer with its own indexer, the indexer before it.
 * @param mla the MLA block the deriver built (its Attention node is replaced)
 */
export function dsaBlock(mla: GraphNode[], ix: IndexerShape, hidden: number, qLora: number, own: boolean): GraphNode[] {
  const i = mla.findIndex((n) => n.op === 'Attention');
  const attn = { ...(mla[i] as Extract<GraphNode, { op: 'Attention' }>), kind: 'sparse' as const, index_topk: ix.topk };
  return [...mla.slice(0, i), ...(own ? indexerNodes(ix, hidden, qLora, 1, false) : []), attn, ...mla.slice(i + 1)];
}

/** DeepSeek-V4's per-model facts the layer builder reads. */
export interface V4Shape {
  hidden: number;
  heads: number;
  headDim: number;
  qLora: number;
  oLora: number;
  oGroups: number;
  window: number;
  hc: number;
  ix: IndexerShape;
}

/** The V4 shape from its config. @throws UserError naming a missing field */
export function v4Shape(c: Cfg, name: string): V4Shape {
  const ix = indexerShape(c, name);
  if (!ix) throw new UserError(`${name}: a compress_ratios config needs index_topk, index_n_heads and index_head_dim`);
  return {
    hidden: need(c, name, 'hidden_size'),
    heads: need(c, name, 'num_attention_heads'),
    headDim: need(c, name, 'head_dim'),
    qLora: need(c, name, 'q_lora_rank'),
    oLora: need(c, name, 'o_lora_rank'),
    oGroups: need(c, name, 'o_groups'),
    window: need(c, name, 'sliding_window'),
    hc: need(c, name, 'hc_mult'),
    ix,
  };
}

/**
 * Per-layer compression ratios: the first `layers` entries of `compress_ratios` (0 = window only,
 * 4 = CSA, 128 = HCA), and the entry after them for the MTP layer when there is one.
 * @throws UserError for a list shorter than the layers or a ratio other than 0, 4 or 128
 */
export function compressRatios(c: Cfg, name: string, layers: number): number[] {
  const r = c.compress_ratios;
  if (!Array.isArray(r) || r.length < layers || r.some((x) => x !== 0 && x !== 4 && x !== 128))
    throw new UserError(
      `${name}: config.json compress_ratios must give 0, 4 or 128 for each of ${layers} layers (got ${JSON.stringify(r)})`,
    );
  return r as number[];
}

/** One mHC site's two halves around a sub-block: pre (with its small mixing GEMM), the block, post. */
function mhcSite(s: V4Shape, site: string, block: GraphNode[]): GraphNode[] {
  return [
    {
      op: 'Elementwise',
      role: `mhc_pre_${site}`,
      mhc: 'pre',
      bytes_per_token: mhcBytesPerToken('pre', s.hc, s.hidden),
    },
    // Sinkhorn mixing weights: (2 + hc)·hc outputs from the hc flattened streams (fp32 in the checkpoint).
    {
      op: 'GEMM',
      role: `mhc_mix_${site}`,
      mhc: 'pre',
      n: (2 + s.hc) * s.hc,
      k: s.hc * s.hidden,
      parallel: 'replicated',
      weight_dtype: 'fp32',
    },
    ...block,
    {
      op: 'Elementwise',
      role: `mhc_post_${site}`,
      mhc: 'post',
      bytes_per_token: mhcBytesPerToken('post', s.hc, s.hidden),
    },
  ];
}

/** The attention of a V4 layer of compression `ratio` (module comment). */
function v4Attention(s: V4Shape, ratio: number): GraphNode[] {
  const base = {
    op: 'Attention' as const,
    n_q: s.heads,
    n_kv: 1,
    d_h: s.headDim,
    window: s.window,
    capture_break: true,
  };
  const attn: GraphNode =
    ratio === 0
      ? { ...base, kind: 'mla' }
      : { ...base, kind: 'sparse', compress_ratio: ratio, ...(ratio === 4 ? { index_topk: s.ix.topk } : {}) };
  return [
    { op: 'Elementwise', role: 'attn_norm' },
    { op: 'GEMM', role: 'wq_a', n: s.qLora, k: s.hidden, parallel: 'replicated' },
    { op: 'Elementwise', role: 'q_norm', bytes_per_token: s.qLora * 4 },
    { op: 'GEMM', role: 'wq_b', n: s.heads * s.headDim, k: s.qLora, parallel: 'column' },
    { op: 'GEMM', role: 'wkv', n: s.headDim, k: s.hidden, parallel: 'replicated' },
    { op: 'Elementwise', role: 'kv_norm', bytes_per_token: s.headDim * 4 },
    // Compressor: KV and gate per compressed entry; CSA's overlapping windows compute two sets.
    ...(ratio > 0
      ? [
          {
            op: 'GEMM',
            role: 'compressor',
            n: (ratio === 4 ? 4 : 2) * s.headDim,
            k: s.hidden,
            parallel: 'replicated',
          } as GraphNode,
        ]
      : []),
    ...(ratio === 4 ? indexerNodes(s.ix, s.hidden, s.qLora, 4, true) : []),
    attn,
    // Grouped low-rank output: o_groups groups of heads·head_dim / o_groups → o_lora_rank, then → hidden.
    { op: 'GEMM', role: 'wo_a', n: s.oGroups * s.oLora, k: (s.heads * s.headDim) / s.oGroups, parallel: 'column' },
    { op: 'GEMM', role: 'wo_b', n: s.hidden, k: s.oGroups * s.oLora, parallel: 'row' },
    { op: 'AllReduce', role: 'attn_out', emit: 'tp>1' },
  ];
}

/**
 * One DeepSeek-V4 layer: the attention site and the FFN site, each wrapped in its mHC halves.
 * @param ffn the MoE (or MLP) block the deriver built, without its norm
 */
export function v4LayerNodes(s: V4Shape, ratio: number, ffn: GraphNode[]): GraphNode[] {
  return [
    ...mhcSite(s, 'attn', v4Attention(s, ratio)),
    ...mhcSite(s, 'ffn', [
      { op: 'Elementwise', role: 'ffn_norm' },
      ...ffn,
      { op: 'AllReduce', role: 'mlp_out', emit: 'tp>1' },
    ]),
  ];
}

/** The V4 layer-kind id of a ratio. */
export function v4KindId(ratio: number): string {
  return ratio === 0 ? 'v4_swa_moe' : ratio === 4 ? 'v4_csa_moe' : 'v4_hca_moe';
}

/** The head's stream combine: the hc streams read and the hidden state written, bf16. */
export function v4HeadCombine(s: V4Shape): GraphNode {
  return { op: 'Elementwise', role: 'hc_head', bytes_per_token: s.hc * s.hidden * 2 + s.hidden * 2 };
}

/**
 * The routed experts' format of a V4 checkpoint: NVFP4 where ModelOpt says `moe_quant_algo` NVFP4, else
 * MXFP4 where the config says `expert_dtype` "fp4" (DeepSeek's FP4 experts, ue8m0 scales per 32); undefined
 * keeps the checkpoint's global format.
 * @throws UserError for an expert_dtype it does not understand
 */
export function v4ExpertFormat(c: Cfg, name: string): StorageDtype | undefined {
  const q = c.quantization_config as Cfg | undefined;
  if (q?.moe_quant_algo === 'NVFP4') return 'nvfp4';
  if (c.expert_dtype === undefined) return undefined;
  if (c.expert_dtype === 'fp4') return 'mxfp4';
  throw new UserError(`${name}: config.json expert_dtype ${JSON.stringify(c.expert_dtype)} not understood (fp4 is)`);
}
