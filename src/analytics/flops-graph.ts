/**
 * Build the FLOP counter's model shape (`FlopsModel`) from a catalog model graph
 * (`catalog/models/<name>/graph.yaml`, format: docs/pricer.md "Graph format"), and turn pricer
 * batch requests (src/pricer/batch.ts `parseBatchSpec`) into scheduled (q, k) rows. The CLI loads
 * graphs with the catalog's `loadModel` (src/core/catalog/model.ts), which validates the full schema.
 *
 * Only the graph fields the counter reads are checked here (zod, non-strict), so the adapter works
 * on any graph the catalog loader accepts, and on hand-made test graphs. Pure.
 */
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../core/errors.ts';
import { REPO_ROOT } from '../core/catalog/chip.ts';
import type { Request } from '../pricer/types.ts';
import type { ComputeFormat, FlopsAttention, FlopsGemm, FlopsLayer, FlopsModel, ScheduledRequest } from './flops.ts';

const posInt = z.number().int().positive();
const node = z
  .object({
    op: z.string(),
    role: z.string().optional(),
    phase: z.string().optional(),
    emit: z.string().optional(),
    n: posInt.optional(),
    k: posInt.optional(),
    weight_dtype: z.string().optional(),
    experts: posInt.optional(),
    top_k: posInt.optional(),
    gated: z.boolean().optional(),
    shared_experts: z.number().int().nonnegative().optional(),
    shared_intermediate_size: posInt.optional(),
    kind: z.string().optional(),
    n_q: posInt.optional(),
    n_kv: posInt.optional(),
    d_h: posInt.optional(),
    prefill_d_h: posInt.optional(),
    window: posInt.optional(),
    index_topk: posInt.optional(),
  })
  .passthrough();
const stack = z
  .object({
    prologue: z.array(z.string()).optional(),
    pattern: z.array(z.string()).min(1),
    repeat: posInt,
    epilogue: z.array(z.string()).optional(),
  })
  .passthrough();

/** The subset of a model graph the FLOP counter reads. */
export const GraphSubsetSchema = z
  .object({
    kind: z.literal('ModelGraph'),
    name: z.string(),
    global: z.object({ hidden_size: posInt, vocab_size: posInt, weight_dtype: z.string() }).passthrough(),
    layer_kinds: z.array(z.object({ id: z.string(), nodes: z.array(node).min(1) }).passthrough()).min(1),
    stack,
    head: z.array(node),
    speculator: z.object({ method: z.string() }).passthrough().optional(),
  })
  .passthrough();
type GraphNodeSubset = z.infer<typeof node>;

/**
 * Compute format of work on weights stored as `dtype`: FP4 formats → fp4; 8-bit → fp8; 16-bit →
 * bf16; int4 → bf16 (weight-only quantisation dequantises and multiplies in 16 bits); fp32/tf32 as is.
 * @throws Error on an unknown dtype
 */
export function computeFormatOf(dtype: string): ComputeFormat {
  switch (dtype.toLowerCase()) {
    case 'nvfp4':
    case 'mxfp4':
    case 'fp4':
      return 'fp4';
    case 'fp8':
    case 'fp8_block':
    case 'int8':
    case 'mxfp8':
      return 'fp8';
    case 'bf16':
    case 'fp16':
    case 'int4':
      return 'bf16';
    case 'tf32':
      return 'tf32';
    case 'fp32':
      return 'fp32';
    default:
      throw new Error(`unknown weight dtype "${dtype}" for FLOP accounting`);
  }
}

/** Options for building the shape. */
export interface ShapeOptions {
  /** Format of every GEMM that names no weight_dtype of its own; default from global.weight_dtype. */
  gemm_format?: ComputeFormat;
  /** Format of attention arithmetic; default bf16. */
  attention_format?: ComputeFormat;
}

function gemmsOf(n: GraphNodeSubset, def: ComputeFormat, where: string): FlopsGemm[] {
  const fmt = n.weight_dtype ? computeFormatOf(n.weight_dtype) : def;
  const role = n.role ?? n.op;
  const extra = n.phase === 'prefill' ? { prompt_only: true } : {};
  if (n.op === 'GEMM') {
    if (!n.n || !n.k) throw new Error(`${where}: GEMM needs n and k`);
    return [{ role, n: n.n, k: n.k, format: fmt, ...extra }];
  }
  if (n.op === 'GroupedGEMM') {
    if (!n.n || !n.k || !n.top_k) throw new Error(`${where}: GroupedGEMM needs n, k and top_k`);
    const mats = n.gated === false ? 2 : 3;
    const out: FlopsGemm[] = [{ role, n: n.n, k: n.k, mult: n.top_k * mats, format: fmt, ...extra }];
    if (n.shared_experts) {
      out.push({
        role: `${role}.shared`,
        n: n.shared_intermediate_size ?? n.n,
        k: n.k,
        mult: n.shared_experts * mats,
        format: fmt,
        ...extra,
      });
    }
    return out;
  }
  return [];
}

function attentionOf(n: GraphNodeSubset, fmt: ComputeFormat, where: string): FlopsAttention | undefined {
  if (n.op !== 'Attention') return undefined;
  if (!n.n_q || !n.d_h) throw new Error(`${where}: Attention needs n_q and d_h`);
  const a: FlopsAttention = { n_q: n.n_q, d_h: n.d_h, format: fmt };
  if (n.prefill_d_h) a.prompt_d_h = n.prefill_d_h;
  if (n.window) a.window = n.window;
  if (n.index_topk) a.topk = n.index_topk;
  return a;
}

/**
 * Turn a graph into the counter's shape: layer kinds counted through the stack, GEMM and
 * GroupedGEMM nodes as matrix work (experts: top_k × 2 or 3 matrices, plus shared experts),
 * Attention nodes as attention, the head's lm_head GEMM as logits (other head GEMMs join the
 * non-attention work of a one-layer group). The speculator is left out (drafter work is excluded
 * from MFU); RecurrentUpdate, Elementwise and collectives carry no counted contraction.
 * @throws UserError naming `source` on a graph it cannot count
 */
export function flopsModelFromGraph(obj: unknown, source: string, opts: ShapeOptions = {}): FlopsModel {
  const parsed = GraphSubsetSchema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`${source}: field "${issue.path.join('.')}": ${issue.message}`);
  }
  const g = parsed.data;
  try {
    const def = opts.gemm_format ?? computeFormatOf(g.global.weight_dtype);
    const attFmt = opts.attention_format ?? 'bf16';
    const counts = new Map<string, number>();
    const ids = [
      ...(g.stack.prologue ?? []),
      ...Array.from({ length: g.stack.repeat }, () => g.stack.pattern).flat(),
      ...(g.stack.epilogue ?? []),
    ];
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    const omitted = new Set<string>();
    const layers: FlopsLayer[] = [];
    for (const lk of g.layer_kinds) {
      const count = counts.get(lk.id) ?? 0;
      if (count === 0) continue;
      const layer: FlopsLayer = { id: lk.id, count, gemms: [], attention: [] };
      lk.nodes.forEach((n, i) => {
        const where = `layer kind "${lk.id}" node ${i + 1}`;
        layer.gemms.push(...gemmsOf(n, def, where));
        const a = attentionOf(n, attFmt, where);
        if (a) layer.attention.push(a);
        if (n.op === 'RecurrentUpdate') omitted.add('recurrent state updates');
      });
      layers.push(layer);
    }
    for (const id of counts.keys())
      if (!g.layer_kinds.some((k) => k.id === id)) throw new Error(`stack names unknown layer kind "${id}"`);
    let logits: FlopsGemm | undefined;
    const headGemms: FlopsGemm[] = [];
    g.head.forEach((n, i) => {
      const gs = gemmsOf(n, def, `head node ${i + 1}`);
      if (n.op === 'GEMM' && (n.role === 'lm_head' || (!logits && n.n === g.global.vocab_size))) logits = gs[0];
      else headGemms.push(...gs);
    });
    if (!logits) logits = { role: 'lm_head', n: g.global.vocab_size, k: g.global.hidden_size, format: def };
    if (headGemms.length) layers.push({ id: 'head', count: 1, gemms: headGemms, attention: [] });
    if (g.speculator) omitted.add(`drafter (${g.speculator.method})`);
    return {
      name: g.name,
      hidden_size: g.global.hidden_size,
      vocab_size: g.global.vocab_size,
      layers,
      logits,
      omitted: [...omitted],
    };
  } catch (err) {
    if (err instanceof UserError) throw err;
    throw new UserError(`${source}: ${(err as Error).message}`);
  }
}

/** Where a catalog model's graph lives: `catalog/models/<name>/graph.yaml` (or the path itself). */
export function graphPath(nameOrPath: string): string {
  return nameOrPath.endsWith('.yaml')
    ? nameOrPath
    : path.join(REPO_ROOT, 'catalog', 'models', nameOrPath, 'graph.yaml');
}

/**
 * Scheduled (q, k) of a pricer request (chapter Listing 2.4): q = scheduled tokens,
 * k = computed + scheduled; a prompt row while computed tokens fall short of the prompt.
 */
export function scheduledFromRequest(r: Request): ScheduledRequest {
  return {
    q: r.scheduled_tokens,
    k: r.computed_tokens + r.scheduled_tokens,
    is_prompt: r.computed_tokens < r.prompt_tokens,
  };
}
