/**
 * The format a checkpoint is served in, read from its quantisation config (issue 13 item 4), with the
 * reason in words so `price` can say which format it chose and why.
 *
 * Rules (Hugging Face `config.json` `quantization_config`, or `text_config.quantization_config`; NVIDIA
 * ModelOpt exports may state it only in `hf_quant_config.json`, passed as `hfQuant`):
 *   - none → the checkpoint's torch_dtype (bf16 unless float16 / float32);
 *   - quant_method fp8 with weight_block_size → fp8_block (block-scaled fp8, DeepGEMM-style ramp); without → fp8;
 *   - quant_method mxfp4 → routed experts mxfp4, the rest torch_dtype (gpt-oss);
 *   - quant_method modelopt / compressed-tensors with 4-bit float weights in groups of 16 (NVFP4), or
 *     hf_quant_config quant_algo NVFP4 → nvfp4, FP8 → fp8 (ModelOpt per-tensor); in groups of 32 with uint8 scales (MXFP4, Kimi-K3) → mxfp4;
 *     with 4-bit integer weights → int4 (weight-only);
 *     when the attention projections are excluded (`ignore` / `exclude_modules` match self_attn) only the
 *     routed experts carry the 4-bit format and the rest stays torch_dtype.
 *   - any other quant_method or group layout is refused (UserError naming the field): a format the
 *     deriver does not understand is never silently served as bf16.
 * The KV-cache format the checkpoint declares (`declaredKvFormat`, carried into the graph by `kvDeclaration`) is
 * what KV dtype `auto` prices, as vLLM does (PR #29980; docs/pricer.md DECISION "KV dtype auto follows the
 * checkpoint"); an explicit --kv-dtype wins. Pure.
 */
import { UserError } from '../errors.ts';
import { bytesPerElement, type StorageDtype } from './dtypes.ts';

/** What the checkpoint serves: the global weight format, the routed experts' when different, and why. */
export interface CheckpointFormat {
  global: StorageDtype;
  experts?: StorageDtype;
  reason: string;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : undefined);

function torchDtype(c: Obj): StorageDtype {
  const t = typeof c.torch_dtype === 'string' ? c.torch_dtype : typeof c.dtype === 'string' ? c.dtype : 'bfloat16';
  return t === 'float16' ? 'fp16' : t === 'float32' ? 'fp32' : 'bf16';
}

/** True when an exclusion list names the attention projections (so only the MLP/experts are quantised). */
function excludesAttention(list: unknown): boolean {
  return Array.isArray(list) && list.some((x) => typeof x === 'string' && x.includes('self_attn'));
}

/** The 4-bit format of a compressed-tensors / ModelOpt `config_groups` weights spec, or undefined. */
function fourBit(groups: Obj, where: string): { dtype: StorageDtype; what: string } {
  const specs = Object.values(groups).map((g) => obj(obj(g)?.weights));
  const w = specs[0];
  if (!w || specs.some((s) => JSON.stringify(s) !== JSON.stringify(w))) {
    throw new UserError(
      `${where}: quantization_config.config_groups: expected one weights layout shared by every group`,
    );
  }
  if (w.num_bits === 4 && w.type === 'float' && w.group_size === 16)
    return { dtype: 'nvfp4', what: '4-bit float weights in groups of 16 (NVFP4)' };
  // OCP MX: 4-bit float elements in blocks of 32 sharing one 8-bit (E8M0, stored uint8) scale (Kimi-K3 compressed-tensors
  // mxfp4-pack-quantized).
  if (
    w.num_bits === 4 &&
    w.type === 'float' &&
    w.group_size === 32 &&
    (w.scale_dtype ?? 'torch.uint8') === 'torch.uint8'
  )
    return { dtype: 'mxfp4', what: '4-bit float weights in groups of 32 with 8-bit scales (MXFP4)' };
  if (w.num_bits === 4 && w.type === 'int')
    return { dtype: 'int4', what: `4-bit integer weights in groups of ${String(w.group_size)} (weight-only int4)` };
  throw new UserError(
    `${where}: quantization_config.config_groups weights ${JSON.stringify(w)}: not a layout stepcal understands (NVFP4, MXFP4 or int4)`,
  );
}

/**
 * Every `quantization_config` field stepcal knows (issue 13 item 5: a config field the deriver does not understand is
 * refused, never dropped). Read: quant_method, weight_block_size, config_groups, ignore, moe_quant_algo
 * (model-derive-sparse.ts). No effect on a step's price: activation_scheme, fmt, scale_fmt (fp8 numerics: dynamic
 * activation scales are in the measured GEMM rows), producer, format, quantization_status, global_compression_ratio
 * (metadata), group_size and quantized_layers (ModelOpt restatements of config_groups / moe_quant_algo), and
 * modules_to_not_convert (the shipped lists name routers/gates, norms, embeddings, lm_head and, for mxfp4, attention:
 * the graph prices routers and lm_head in bf16, and mxfp4 quantises the routed experts only). kv_cache_scheme and
 * kv_cache_quant_algo: the cache's format, read by `declaredKvFormat` (what KV dtype auto prices).
 */
const QUANT_CONFIG_FIELDS: ReadonlySet<string> = new Set([
  'quant_method',
  'weight_block_size',
  'config_groups',
  'ignore',
  'moe_quant_algo',
  'quant_algo',
  'activation_scheme',
  'fmt',
  'scale_fmt',
  'producer',
  'format',
  'quantization_status',
  'global_compression_ratio',
  'group_size',
  'quantized_layers',
  'modules_to_not_convert',
  'kv_cache_scheme',
  'kv_cache_quant_algo',
]);

/** `hf_quant_config.json` fields (ModelOpt exports), top level and under `quantization`; the same rules. */
const HF_QUANT_FIELDS: ReadonlySet<string> = new Set(['producer', 'quantization']);
const HF_QUANTIZATION_FIELDS: ReadonlySet<string> = new Set([
  'quant_algo',
  'exclude_modules',
  'group_size',
  'quantized_layers',
  'kv_cache_quant_algo',
]);

function refuseUnknown(o: Obj, known: ReadonlySet<string>, what: string, where: string): void {
  for (const k of Object.keys(o))
    if (!known.has(k))
      throw new UserError(
        `${where}: ${what} field "${k}" is not one the graph deriver understands (src/core/catalog/served-format.ts lists them); refusing rather than dropping it`,
      );
}

/** The checkpoint's `quantization_config` (top level, else under `text_config`) and hf_quant_config.json's `quantization`. */
function quantConfigs(config: Obj, hfQuant: Obj | undefined): { q: Obj | undefined; hq: Obj | undefined } {
  return {
    q: obj(config.quantization_config) ?? obj(obj(config.text_config)?.quantization_config),
    hq: obj(hfQuant?.quantization),
  };
}

/**
 * Serve format of a checkpoint (see the module doc).
 * @param config parsed config.json
 * @param where name used in errors (model or file)
 * @param hfQuant parsed hf_quant_config.json, when the checkpoint ships one
 * @throws UserError for a quantisation config it does not understand
 */
export function checkpointFormat(config: Obj, where: string, hfQuant?: Obj): CheckpointFormat {
  const base = torchDtype(config);
  const { q, hq } = quantConfigs(config, hfQuant);
  if (q) refuseUnknown(q, QUANT_CONFIG_FIELDS, 'config.json quantization_config', where);
  if (hfQuant) refuseUnknown(hfQuant, HF_QUANT_FIELDS, 'hf_quant_config.json', where);
  if (hq) refuseUnknown(hq, HF_QUANTIZATION_FIELDS, 'hf_quant_config.json quantization', where);
  if (!q && !hq) return { global: base, reason: `no quantization_config: the checkpoint's torch_dtype (${base})` };
  if (!q && hq) {
    // ModelOpt exports: NVFP4, or FP8 (per-tensor scales, Nemotron-3 Super / Ultra FP8) → fp8.
    const fmt = hq.quant_algo === 'NVFP4' ? 'nvfp4' : hq.quant_algo === 'FP8' ? 'fp8' : undefined;
    if (fmt === undefined)
      throw new UserError(
        `${where}: hf_quant_config.json quant_algo ${JSON.stringify(hq.quant_algo)} not understood (NVFP4 and FP8 are)`,
      );
    const attn = excludesAttention(hq.exclude_modules);
    return {
      global: attn ? base : fmt,
      ...(attn ? { experts: fmt } : {}),
      reason: `hf_quant_config.json quant_algo ${String(hq.quant_algo)}${attn ? ' (attention excluded: experts only)' : ''} → ${fmt}`,
    };
  }
  const method = typeof q!.quant_method === 'string' ? q!.quant_method.toLowerCase() : undefined;
  if (method === 'fp8') {
    const block = q!.weight_block_size;
    if (Array.isArray(block))
      return {
        global: 'fp8_block',
        reason: `quantization_config quant_method fp8 with weight_block_size [${block.join(', ')}]: block-quantised fp8 → fp8_block`,
      };
    return {
      global: 'fp8',
      reason: 'quantization_config quant_method fp8 without weight_block_size: per-tensor fp8 → fp8',
    };
  }
  if (method === 'mxfp4')
    return {
      global: base,
      experts: 'mxfp4',
      reason: `quantization_config quant_method mxfp4: routed experts mxfp4, the rest ${base}`,
    };
  if ((method === 'modelopt' || method === 'compressed-tensors') && obj(q!.config_groups)) {
    const f = fourBit(obj(q!.config_groups)!, where);
    const attn = excludesAttention(q!.ignore);
    return {
      global: attn ? base : f.dtype,
      ...(attn ? { experts: f.dtype } : {}),
      reason: `quantization_config quant_method ${method}, ${f.what}${attn ? `; attention excluded, so experts ${f.dtype} and the rest ${base}` : ''} → ${f.dtype}`,
    };
  }
  throw new UserError(
    `${where}: config.json quantization_config quant_method ${JSON.stringify(q!.quant_method)} is not a format stepcal understands (fp8, mxfp4, modelopt/compressed-tensors NVFP4 or int4)`,
  );
}

/**
 * One line for `price`: which weight format a deployment serves and why.
 * @param checkpoint the shipped model's format (`checkpointFormat` of its config)
 * @param weightDtype the deployment's `weight_dtype` (`auto` = the checkpoint's)
 */
export function servedFormatNote(checkpoint: CheckpointFormat, weightDtype: string): string {
  const ck = `${checkpoint.global}${checkpoint.experts ? ` (routed experts ${checkpoint.experts})` : ''}`;
  if (weightDtype === 'auto') return `served format ${ck}: ${checkpoint.reason}`;
  return `served format ${weightDtype}: set by the deployment (--weight-dtype); the checkpoint's is ${ck}: ${checkpoint.reason}`;
}

/** The KV-cache format a checkpoint declares and the field or fields that said so (the graph's `global.kv_dtype`). */
export interface DeclaredKvFormat {
  dtype: 'fp8' | 'int8';
  /** e.g. `hf_quant_config.json kv_cache_quant_algo FP8`; several fields joined by "; ". */
  source: string;
}

/** Whether a deployment's KV dtype is `auto` (also unset or empty: validation rows write '' for auto). */
export const isAutoKvDtype = (kvDtype: string | undefined): boolean =>
  kvDtype === undefined || kvDtype === '' || kvDtype.toLowerCase() === 'auto';

/**
 * A ModelOpt `kv_cache_quant_algo` value as the KV dtype vLLM serves for it (any case, as vLLM lowercases it): FP8
 * → fp8; INT8 and NVFP4 → undefined, since vLLM maps only FP8 (its ModelOpt KV map) and otherwise warns and keeps
 * `auto` at the model dtype; null states none. @throws UserError for another value
 */
function kvAlgo(v: unknown, field: string, where: string): DeclaredKvFormat['dtype'] | undefined {
  if (v === null || v === undefined) return undefined;
  const u = typeof v === 'string' ? v.toUpperCase() : undefined;
  if (u === 'FP8') return 'fp8';
  if (u === 'INT8' || u === 'NVFP4') return undefined;
  throw new UserError(`${where}: ${field} ${JSON.stringify(v)} not understood (FP8, INT8, NVFP4 or null are)`);
}

/** A compressed-tensors `kv_cache_scheme` as a KV dtype; null states none. @throws UserError for another layout */
function kvScheme(v: unknown, where: string): DeclaredKvFormat['dtype'] | undefined {
  if (v === null || v === undefined) return undefined;
  const s = obj(v);
  if (s?.num_bits === 8 && (s.type === 'float' || s.type === 'int')) return s.type === 'float' ? 'fp8' : 'int8';
  throw new UserError(
    `${where}: config.json quantization_config.kv_cache_scheme ${JSON.stringify(v)} not understood (8-bit float or int)`,
  );
}

/**
 * The KV-cache dtype a checkpoint declares, or undefined when it declares none (absent or null): config.json
 * `quantization_config.kv_cache_scheme` (compressed-tensors: 8-bit float → fp8, 8-bit int → int8) or
 * `.kv_cache_quant_algo`, and `hf_quant_config.json` `quantization.kv_cache_quant_algo` (ModelOpt: FP8 → fp8; INT8
 * and NVFP4 are read and give none, as vLLM serves them at the model dtype).
 * Pure; KV dtype auto prices the cache at this dtype (vLLM PR #29980), an explicit --kv-dtype overrides it.
 * @param config parsed config.json
 * @param where name used in errors (model or file)
 * @param hfQuant parsed hf_quant_config.json, when the checkpoint ships one
 * @throws UserError for a value it does not understand, or fields that declare different dtypes
 */
export function declaredKvFormat(config: Obj, where: string, hfQuant?: Obj): DeclaredKvFormat | undefined {
  const { q, hq } = quantConfigs(config, hfQuant);
  const found: Array<{ dtype: DeclaredKvFormat['dtype']; field: string }> = [];
  const scheme = kvScheme(q?.kv_cache_scheme, where);
  if (scheme) {
    const s = obj(q!.kv_cache_scheme)!;
    found.push({ dtype: scheme, field: `config.json quantization_config kv_cache_scheme 8-bit ${String(s.type)}` });
  }
  for (const [v, file] of [
    [q?.kv_cache_quant_algo, 'config.json quantization_config'],
    [hq?.kv_cache_quant_algo, 'hf_quant_config.json'],
  ] as const) {
    const d = kvAlgo(v, `${file} kv_cache_quant_algo`, where);
    if (d) found.push({ dtype: d, field: `${file} kv_cache_quant_algo ${String(v)}` });
  }
  if (!found.length) return undefined;
  if (found.some((f) => f.dtype !== found[0]!.dtype))
    throw new UserError(
      `${where}: the checkpoint declares different KV-cache dtypes: ${found.map((f) => `${f.field} → ${f.dtype}`).join('; ')}`,
    );
  return { dtype: found[0]!.dtype, source: found.map((f) => f.field).join('; ') };
}

/**
 * The graph's `global.kv_dtype` (model.ts): the declaration (`declaredKvFormat`), or `{ not_understood }` with the
 * refusal's message when the checkpoint declares a value stepcal cannot read or fields that disagree. The refusal is
 * kept, not thrown, so a deployment that names its own --kv-dtype still prices; KV dtype auto refuses it
 * (deployment.ts kvBytesPerElement). Undefined when nothing is declared.
 * @param config parsed config.json (the whole file: multimodal checkpoints keep quantization_config at its top)
 * @param where name used in the message
 * @param hfQuant parsed hf_quant_config.json, when the checkpoint ships one
 */
export function kvDeclaration(config: Obj, where: string, hfQuant?: Obj): KvDeclaration | undefined {
  try {
    return declaredKvFormat(config, where, hfQuant);
  } catch (err) {
    if (err instanceof UserError) return { not_understood: err.message };
    throw err;
  }
}

/** A graph's record of the checkpoint's KV-cache declaration (model.ts `global.kv_dtype`). */
export type KvDeclaration = DeclaredKvFormat | { not_understood: string };

/**
 * One line for `price` when the deployment's own --kv-dtype prices a cache of another width than the checkpoint
 * declares (or the declaration could not be read); undefined under KV dtype auto (the header says what auto
 * priced and why), when nothing is declared, or when they agree (same bytes per element).
 * @param declared the graph's `global.kv_dtype`
 * @param priced the priced cache: its KV dtype flag (undefined = auto) and bytes per element
 */
export function kvFormatNote(
  declared: KvDeclaration | undefined,
  priced: { kv_dtype: string | undefined; bytes_per_element: number },
): string | undefined {
  const flag = priced.kv_dtype;
  if (!declared || flag === undefined || isAutoKvDtype(flag)) return undefined;
  if ('not_understood' in declared)
    return `KV cache: priced ${flag} as --kv-dtype asks; the checkpoint's declaration is not understood (${declared.not_understood}), so KV dtype auto would refuse`;
  if (bytesPerElement(declared.dtype) === priced.bytes_per_element) return undefined;
  return `KV cache: priced ${flag} as --kv-dtype asks; the checkpoint declares ${declared.dtype} (${declared.source}), which KV dtype auto prices`;
}
