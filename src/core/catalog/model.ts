/**
 * Model graphs: the per-layer operator lists the step pricer walks.
 *
 * A graph lists each kind of layer once, with how its layers repeat (seed "One layer": "A model graph
 * lists each kind of layer once, with how many times it repeats"). It is derived from a Hugging Face
 * `config.json` by `deriveGraph` (src/core/catalog/model-derive.ts) and stored, editable, as
 * `catalog/models/<name>/graph.yaml`; a test checks the stored graph equals the derived one, so an
 * edit is deliberate. Layout follows BLIS's public ModelGraph (reference §3) in spirit, with
 * stepcal's own field names; see docs/pricer.md "Graph format".
 *
 * Units: sizes are element counts (n, k, heads, head dims); `bytes_per_token` is bytes.
 */
import { pathInside } from '../io/paths.ts';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { Document, isMap, isSeq, parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UserError } from '../errors.ts';
import { textMemo } from '../text-memo.ts';
import { readText } from '../io/fs.ts';
import { REPO_ROOT } from './chip.ts';
import { STORAGE_DTYPES } from './dtypes.ts';

export const MODELS_DIR = path.join(REPO_ROOT, 'catalog', 'models');

/** When a node is emitted: always, only when tp > 1, only when ep > 1. */
export const EMIT_CONDITIONS = ['always', 'tp>1', 'ep>1'] as const;

/**
 * Attention kinds (seed "Attention": full, sliding-window, latent, sparse latent) and MiniMax-M3's block-sparse
 * GQA (`msa`, priced as one measured module where the registry has its law; docs/pricer.md "MSA").
 */
export const ATTENTION_KINDS = ['gqa', 'swa', 'mla', 'sparse', 'msa'] as const;

const dtype = z.enum(STORAGE_DTYPES);
const posInt = z.number().int().positive();
const common = {
  role: z.string().optional(),
  /** `prefill`: the node runs only in a step with at least one prefill row (seed "Host time"). */
  phase: z.literal('prefill').optional(),
  emit: z.enum(EMIT_CONDITIONS).optional(),
};

const GemmNode = z
  .object({
    op: z.literal('GEMM'),
    ...common,
    n: posInt,
    k: posInt,
    /** Tensor-parallel split: column (n/tp), row (k/tp) or replicated (whole on every rank). Default column. */
    parallel: z.enum(['column', 'row', 'replicated']).optional(),
    /** Stored weight dtype when it differs from the model's (e.g. an lm_head kept in bf16). */
    weight_dtype: dtype.optional(),
    /** The small mixing GEMM of an mHC half, which its measured kernel already includes (seed "Hyper-connections"). */
    mhc: z.enum(['pre', 'post']).optional(),
    /** A projection inside the measured MSA module (qkv + index, o_proj): not priced again where the module law is. */
    msa: z.literal(true).optional(),
  })
  .strict();

const GroupedGemmNode = z
  .object({
    op: z.literal('GroupedGEMM'),
    ...common,
    /** Expert inner (intermediate) width. */
    n: posInt,
    /** Hidden width. */
    k: posInt,
    experts: posInt,
    top_k: posInt,
    /** Gated (gate, up, down: 3·n·k parameters per expert) or not (2·n·k). Default true. */
    gated: z.boolean().optional(),
    shared_experts: z.number().int().nonnegative().optional(),
    shared_intermediate_size: posInt.optional(),
    weight_dtype: dtype.optional(),
  })
  .strict();

const AttentionNode = z
  .object({
    op: z.literal('Attention'),
    ...common,
    kind: z.enum(ATTENTION_KINDS),
    /** Query heads (whole model, before the tp split). */
    n_q: posInt,
    /** KV heads; 1 for latent (MLA) caches. */
    n_kv: posInt,
    /** Cached width per KV head (MLA: kv_lora_rank + qk_rope_head_dim). */
    d_h: posInt,
    /** Mean head width of the prefill arithmetic when it differs from d_h (MLA prefill runs un-absorbed). */
    prefill_d_h: posInt.optional(),
    /** Sliding window, tokens: the layer reads and attends at most this many keys. */
    window: posInt.optional(),
    /** Sparse: positions the indexer selects per query (top-k); msa: tokens of the selected blocks, local block included. */
    index_topk: posInt.optional(),
    /** msa: the block selector's index heads (whole model) and their width. */
    index_heads: posInt.optional(),
    index_head_dim: posInt.optional(),
    /** Sparse: the compressed stream has one entry per this many tokens. */
    compress_ratio: posInt.optional(),
    /** Position bias with no parameters (ALiBi); informational. */
    alibi: z.boolean().optional(),
    /** Learned attention sinks (gpt-oss); informational. */
    sinks: z.boolean().optional(),
    /**
     * The model's own code breaks CUDA-graph capture around this layer's attention (indexer included), as
     * DeepSeek-V4 does (seed "Host time"): under piecewise capture the layer adds one captured region.
     */
    capture_break: z.boolean().optional(),
  })
  .strict();

const RecurrentNode = z
  .object({
    op: z.literal('RecurrentUpdate'),
    ...common,
    recurrent_kind: z.enum(['mamba2', 'kda', 'gdn']),
    num_heads: posInt,
    head_dim: posInt,
    state_size: posInt,
  })
  .strict();

const ElementwiseNode = z
  .object({
    op: z.literal('Elementwise'),
    ...common,
    /** Bytes moved per token; default 2·hidden·2 (read + write at bf16). */
    bytes_per_token: z.number().positive().optional(),
    /** An mHC half (DeepSeek-V4 hyper-connections; core/laws/sparse.ts): its bytes are the streams it moves. */
    mhc: z.enum(['pre', 'post']).optional(),
  })
  .strict();

const CollectiveNode = z
  .object({
    op: z.enum(['AllReduce', 'AllGather', 'ReduceScatter', 'All2All']),
    ...common,
    /** Message bytes per token; default hidden·2. */
    bytes_per_token: z.number().positive().optional(),
    /** All2All of a routed expert dispatch/combine: message × top_k. */
    routed: z.boolean().optional(),
  })
  .strict();

export const NodeSchema = z.discriminatedUnion('op', [
  GemmNode,
  GroupedGemmNode,
  AttentionNode,
  RecurrentNode,
  ElementwiseNode,
  CollectiveNode,
]);
export type GraphNode = z.infer<typeof NodeSchema>;

const StackSchema = z
  .object({
    prologue: z.array(z.string()).optional(),
    pattern: z.array(z.string()).min(1),
    repeat: posInt,
    epilogue: z.array(z.string()).optional(),
  })
  .strict();
export type Stack = z.infer<typeof StackSchema>;

export const ModelGraphSchema = z
  .object({
    kind: z.literal('ModelGraph'),
    name: z.string(),
    derived_from: z
      .object({
        format: z.literal('hf_config_json'),
        path: z.string(),
        sha256: z.string(),
        deriver_version: posInt,
        /** Config fields understood but not priced, with why (src/core/catalog/config-fields.ts). */
        not_modelled: z.array(z.string()).optional(),
      })
      .strict()
      .optional(),
    global: z
      .object({
        hidden_size: posInt,
        vocab_size: posInt,
        tie_word_embeddings: z.boolean(),
        /** Checkpoint weight dtype (what `weight_dtype: auto` serves). */
        weight_dtype: dtype,
        /**
         * The KV-cache dtype the checkpoint declares, with the config field(s) that say so (served-format.ts
         * kvDeclaration): what KV dtype `auto` prices (vLLM PR #29980); `not_understood` keeps a declaration
         * stepcal cannot read (auto refuses it, an explicit --kv-dtype prices). Absent: none declared.
         */
        kv_dtype: z
          .union([
            z.object({ dtype: z.enum(['fp8', 'int8']), source: z.string() }).strict(),
            z.object({ not_understood: z.string() }).strict(),
          ])
          .optional(),
      })
      .strict(),
    layer_kinds: z.array(z.object({ id: z.string(), nodes: z.array(NodeSchema).min(1) }).strict()).min(1),
    stack: StackSchema,
    head: z.array(NodeSchema),
    /** Draft module priced under speculative decoding (e.g. DeepSeek's MTP layer). */
    speculator: z
      .object({ method: z.string(), num_spec_tokens: posInt, stack: StackSchema, head: z.boolean().optional() })
      .strict()
      .optional(),
  })
  .strict()
  .superRefine((g, ctx) => {
    const ids = new Set(g.layer_kinds.map((k) => k.id));
    const check = (s: Stack, where: string) => {
      for (const id of [...(s.prologue ?? []), ...s.pattern, ...(s.epilogue ?? [])]) {
        if (!ids.has(id))
          ctx.addIssue({
            code: 'custom',
            message: `${where} names unknown layer kind "${id}" (known: ${[...ids].join(', ')})`,
          });
      }
    };
    check(g.stack, 'stack');
    if (g.speculator) check(g.speculator.stack, 'speculator.stack');
  });
export type ModelGraph = z.infer<typeof ModelGraphSchema>;

/** Expand a stack into its layer-kind ids, in order (prologue + pattern × repeat + epilogue). */
export function expandStack(s: Stack): string[] {
  const out = [...(s.prologue ?? [])];
  for (let i = 0; i < s.repeat; i++) out.push(...s.pattern);
  out.push(...(s.epilogue ?? []));
  return out;
}

/** Validate a parsed object as a graph. @throws UserError naming `source`, the field and the problem. */
export function graphFromObject(obj: unknown, source: string): ModelGraph {
  const r = ModelGraphSchema.safeParse(obj);
  if (!r.success) {
    const issue = r.error.issues[0]!;
    throw new UserError(`${source}: field "${issue.path.join('.')}": ${issue.message}`);
  }
  return r.data;
}

/** Deterministic YAML of a graph (nodes as one-line flow maps). */
export function stringifyGraph(g: ModelGraph): string {
  const header = `# Model graph for ${g.name}. Derived from config.json by deriveGraph (src/core/catalog/model-derive.ts);\n# edit deliberately: test/catalog/model.test.ts checks it equals the derived graph.\n`;
  const doc = new Document(g, { aliasDuplicateObjects: false });
  const flowItems = (seq: unknown) => {
    if (isSeq(seq)) for (const it of seq.items) if (isMap(it)) it.flow = true;
  };
  g.layer_kinds.forEach((_, i) => {
    flowItems(doc.getIn(['layer_kinds', i, 'nodes']));
  });
  flowItems(doc.getIn(['head']));
  for (const key of ['derived_from', 'global']) {
    const m = doc.get(key);
    if (isMap(m)) m.flow = false;
  }
  return header + doc.toString({ lineWidth: 0 });
}

/** Names of shipped models (directories in catalog/models holding a graph.yaml). */
export function knownModels(dir = MODELS_DIR): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((d) => existsSync(path.join(dir, d, 'graph.yaml')))
    .sort();
}

/**
 * Load a model graph by catalog name (`llama-3.1-8b`) or by path to a graph YAML file.
 * @throws UserError listing the known models when the name is unknown, or naming the bad field.
 */
export function loadModel(nameOrPath: string, dir = MODELS_DIR): ModelGraph {
  const file = nameOrPath.endsWith('.yaml')
    ? nameOrPath
    : path.join(pathInside('model', nameOrPath, dir), 'graph.yaml');
  if (!existsSync(file)) {
    throw new UserError(`unknown model "${nameOrPath}" (known: ${knownModels(dir).join(', ')})`);
  }
  return graphOfText(readText(file), file);
}

/**
 * `graphFromObject(parseYaml(text), file)`, memoised per process (core/text-memo.ts): one process builds
 * the same graph many times (a pricer per deployment in validation and serving; the test suite per case:
 * 300 builds in one pricer test). At most 64 graphs, more than the shipped catalog's 50 models.
 */
const graphOfText = textMemo(64, (text: string, file: string): ModelGraph => graphFromObject(parseYaml(text), file));

/** Read a shipped model's `config.json` text. @throws UserError listing known models. */
export function loadModelConfigText(name: string, dir = MODELS_DIR): string {
  const file = path.join(dir, name, 'config.json');
  if (!existsSync(file))
    throw new UserError(`model "${name}" has no config.json (known: ${knownModels(dir).join(', ')})`);
  return readText(file);
}

/**
 * Parse a Hugging Face `config.json`. Python's json writer emits bare `Infinity`, `-Infinity` and `NaN`
 * (Nemotron-H's `time_step_limit: [0.0, Infinity]`), which JSON.parse refuses: outside strings they are read
 * as ±1e999 (= ±Infinity) and null. @throws SyntaxError for anything else that is not JSON
 */
export function parseConfigJson(text: string): Record<string, unknown> {
  const fixed = text.replace(
    /("(?:[^"\\]|\\.)*")|(-?)\bInfinity\b|\bNaN\b/g,
    (m, str: string | undefined, neg: string) => (str !== undefined ? str : m.endsWith('NaN') ? 'null' : `${neg}1e999`),
  );
  return JSON.parse(fixed) as Record<string, unknown>;
}

/** A shipped model's parsed `hf_quant_config.json` (ModelOpt exports), or undefined when it ships none. */
export function loadHfQuantConfig(name: string, dir = MODELS_DIR): Record<string, unknown> | undefined {
  const file = path.join(dir, name, 'hf_quant_config.json');
  return existsSync(file) ? (JSON.parse(readText(file)) as Record<string, unknown>) : undefined;
}

/**
 * The model's context limit, `max_position_embeddings` of the Hugging Face config.json beside its
 * graph (catalog/models/<name>/config.json). Undefined when there is no config.json (a graph given by
 * path elsewhere) or it states no limit.
 * @throws UserError naming the file when config.json is not JSON or the field is not a positive integer
 */
export function maxPositionEmbeddings(nameOrPath: string, dir = MODELS_DIR): number | undefined {
  const graphFile = nameOrPath.endsWith('.yaml') ? nameOrPath : path.join(dir, nameOrPath, 'graph.yaml');
  const file = path.join(path.dirname(graphFile), 'config.json');
  if (!existsSync(file)) return undefined;
  let raw: unknown;
  try {
    raw = parseConfigJson(readText(file));
  } catch (err) {
    throw new UserError(`${file}: not valid JSON: ${(err as Error).message}`);
  }
  // Multimodal configs (Llama-4) keep the language model's fields under text_config.
  const limit = z.object({ max_position_embeddings: z.number().int().positive().optional() });
  const parsed = limit.extend({ text_config: limit.optional() }).safeParse(raw);
  if (!parsed.success)
    throw new UserError(
      `${file}: field "${parsed.error.issues[0]!.path.join('.')}": ${parsed.error.issues[0]!.message}`,
    );
  return parsed.data.max_position_embeddings ?? parsed.data.text_config?.max_position_embeddings;
}
