/**
 * MiniMax-M3's block-sparse attention (MSA; issue 14 item 7) for the graph deriver: `sparse_attention_config`
 * read and checked, and the MSA layer's attention block. Pure: no I/O.
 *
 * An MSA layer (vLLM MiniMaxM3 sparse attention; the dataset README "MLA / DSA / MSA modules"): one fused
 * q/k/v + index projection, QK-norm, partial RoPE, the paged KV and index-key insert, top-k block selection over
 * the index keys, block-sparse GQA attention over the selected blocks, o_proj. The graph carries the two
 * projections (`msa: true`, resident weights) and one `kind: msa` Attention node; the pricer prices the three
 * as one measured module where the registry has its law (docs/pricer.md "MSA").
 */
import { UserError } from '../errors.ts';
import type { GraphNode } from './model.ts';

/** The MSA facts a graph needs. */
export interface MsaConfig {
  /** Per layer: true = an MSA layer, false = full attention. */
  sparse: boolean[];
  indexHeads: number;
  indexDim: number;
  /** Tokens one query reads: (top-k + local + init blocks) × block size (KNOWN DIVERGENCE 28). */
  capTokens: number;
}

const KNOWN = new Set([
  'use_sparse_attention',
  'sparse_attention_freq',
  'sparse_block_size',
  'sparse_topk_blocks',
  'sparse_local_block',
  'sparse_init_block',
  'sparse_num_index_heads',
  'sparse_index_dim',
  'sparse_score_type',
  'sparse_disable_index_value',
]);

function posInt(o: Record<string, unknown>, k: string, name: string, min = 1): number {
  const v = o[k];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min)
    throw new UserError(
      `${name}: config.json sparse_attention_config.${k} must be an integer ≥ ${min}, got ${JSON.stringify(v)}`,
    );
  return v;
}

/** A per-layer 0/1 list of `layers` entries. */
function flags(o: Record<string, unknown>, k: string, name: string, layers: number): boolean[] {
  const v = o[k];
  if (!Array.isArray(v) || v.length !== layers || v.some((x) => x !== 0 && x !== 1))
    throw new UserError(
      `${name}: config.json sparse_attention_config.${k} must list 0 or 1 for each of the ${layers} layers, got ${JSON.stringify(v).slice(0, 80)}`,
    );
  return v.map((x) => x === 1);
}

/**
 * `sparse_attention_config`, checked, or undefined when the config has none (or `use_sparse_attention` false).
 * `sparse_disable_index_value` must equal `sparse_attention_freq` (the index carries keys only on every MSA
 * layer, which is what the pricer counts); `sparse_score_type` must be "max" (block score = the max of its
 * tokens' index scores, the measured kernels').
 * @throws UserError naming the key the deriver does not understand or a value it does not handle
 */
export function msaConfig(c: Record<string, unknown>, name: string, layers: number): MsaConfig | undefined {
  const o = c.sparse_attention_config;
  if (o === undefined) return undefined;
  if (!o || typeof o !== 'object' || Array.isArray(o))
    throw new UserError(`${name}: config.json sparse_attention_config must be an object`);
  const m = o as Record<string, unknown>;
  for (const k of Object.keys(m))
    if (!KNOWN.has(k))
      throw new UserError(
        `${name}: config.json sparse_attention_config.${k} is not a key the graph deriver understands (${[...KNOWN].join(', ')})`,
      );
  if (m.use_sparse_attention === false) return undefined;
  if (m.sparse_score_type !== undefined && m.sparse_score_type !== 'max')
    throw new UserError(
      `${name}: sparse_attention_config.sparse_score_type ${JSON.stringify(m.sparse_score_type)}: only "max" is priced`,
    );
  const sparse = flags(m, 'sparse_attention_freq', name, layers);
  if (m.sparse_disable_index_value !== undefined) {
    const noValue = flags(m, 'sparse_disable_index_value', name, layers);
    if (noValue.some((x, i) => x !== sparse[i]))
      throw new UserError(
        `${name}: sparse_attention_config.sparse_disable_index_value differs from sparse_attention_freq: an index with values is not priced`,
      );
  }
  const block = posInt(m, 'sparse_block_size', name);
  const blocks =
    posInt(m, 'sparse_topk_blocks', name) +
    (m.sparse_local_block === undefined ? 0 : posInt(m, 'sparse_local_block', name, 0)) +
    (m.sparse_init_block === undefined ? 0 : posInt(m, 'sparse_init_block', name, 0));
  return {
    sparse,
    indexHeads: posInt(m, 'sparse_num_index_heads', name),
    indexDim: posInt(m, 'sparse_index_dim', name),
    capTokens: blocks * block,
  };
}

/**
 * An MSA layer's attention block: the fused q/k/v + index projection (n = (n_q + 2·n_kv)·d_h + 2·index_heads·
 * index_dim; KNOWN DIVERGENCE 27: one index query and one index key per index head), the `kind: msa` node, and
 * o_proj, the projections marked `msa` (inside the measured module). `gate`: attention_output_gate, a gate of
 * the query width on the same projection.
 */
export function msaBlock(
  m: MsaConfig,
  a: { nQ: number; nKv: number; dH: number; hidden: number; gate: boolean },
): GraphNode[] {
  const qkvN = ((a.gate ? 2 : 1) * a.nQ + 2 * a.nKv) * a.dH + 2 * m.indexHeads * m.indexDim;
  return [
    { op: 'GEMM', role: 'qkv_index_proj', n: qkvN, k: a.hidden, parallel: 'column', msa: true },
    {
      op: 'Attention',
      kind: 'msa',
      n_q: a.nQ,
      n_kv: a.nKv,
      d_h: a.dH,
      index_topk: m.capTokens,
      index_heads: m.indexHeads,
      index_head_dim: m.indexDim,
    },
    { op: 'GEMM', role: 'o_proj', n: a.hidden, k: a.nQ * a.dH, parallel: 'row', msa: true },
  ];
}
