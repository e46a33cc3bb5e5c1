/**
 * Deployment defaults and the dtype choices they imply (reference §4.2, seed "Arithmetic rates").
 */
import { UserError } from '../core/errors.ts';
import type { Chip } from '../core/catalog/chip.ts';
import { bytesPerElement, type StorageDtype } from '../core/catalog/dtypes.ts';
import type { GraphNode, ModelGraph } from '../core/catalog/model.ts';
import { isAutoKvDtype, type KvDeclaration } from '../core/catalog/served-format.ts';
import { CUDAGRAPH_MODES, type Deployment } from './types.ts';

/**
 * A full deployment from a partial one. Defaults: tp 1, ep 1, weight_dtype `auto` (the checkpoint's),
 * KV cache auto (kvBytesPerElement: the checkpoint's declared dtype, else the weights'), FULL_AND_PIECEWISE (vLLM's default), max capture 512 tokens (vLLM's
 * default `max_cudagraph_capture_size`), decode threshold 1 (vLLM's default), no speculation.
 * @throws UserError on a non-positive width or an unknown CUDA-graph mode.
 */
export function defaultDeployment(partial: Partial<Deployment> = {}): Deployment {
  const d: Deployment = {
    tp: 1,
    ep: 1,
    weight_dtype: 'auto',
    cudagraph_mode: 'FULL_AND_PIECEWISE',
    max_capture_size: 512,
    decode_threshold: 1,
    ...partial,
  };
  for (const k of ['tp', 'ep', 'max_capture_size', 'decode_threshold'] as const) {
    if (!Number.isInteger(d[k]) || d[k] < (k === 'max_capture_size' ? 0 : 1))
      throw new UserError(`deployment ${k} must be a positive integer, got ${d[k]}`);
  }
  if (!(CUDAGRAPH_MODES as readonly string[]).includes(d.cudagraph_mode)) {
    throw new UserError(`unknown cudagraph mode "${d.cudagraph_mode}" (known: ${CUDAGRAPH_MODES.join(', ')})`);
  }
  if (d.speculative && (!Number.isInteger(d.speculative.num_spec_tokens) || d.speculative.num_spec_tokens < 0)) {
    throw new UserError(`speculative num_spec_tokens must be a non-negative integer`);
  }
  return d;
}

/** Every node of a graph: its layer kinds and its head. */
function graphNodes(g: ModelGraph): GraphNode[] {
  return [...g.layer_kinds.flatMap((k) => k.nodes), ...g.head];
}

/** Positive integers 1..max that satisfy `ok`. */
function valid(max: number, ok: (x: number) => boolean): number[] {
  const out: number[] = [];
  for (let x = 1; x <= max; x++) if (ok(x)) out.push(x);
  return out;
}

/**
 * Refuse a tensor/expert-parallel layout the engine cannot run (vLLM's checks), naming what is valid.
 *
 * tp (vLLM `ModelConfig.verify_with_parallel_config` and `QKVParallelLinear`): every attention layer's
 * query heads n_q divisible by tp, and its KV heads n_kv divisible by tp or tp divisible by n_kv
 * (KV heads replicated when tp > n_kv); a recurrent mixer's heads divisible by tp. A latent (MLA)
 * cache has n_kv 1, which every tp satisfies; an indexer's heads are not split and are not checked.
 * Together these bound tp by the graph: at most n_q (one query head per rank). A tp group wider than
 * the chip's NVLink domain is allowed (vLLM runs multi-node tp); it is priced on the NIC and flagged
 * where the registry has no coefficients for its width.
 *
 * ep: the expert count of every GroupedGEMM divisible by ep; ep > 1 on a graph with no experts refused.
 *
 * @param graphs the target graph and, if any, a separate drafter graph (run at the same tp)
 * @throws UserError naming the rule broken and listing the valid tp (or ep) values.
 */
export function validateParallelism(graphs: readonly ModelGraph[], tp: number, ep: number): void {
  const name = graphs[0]!.name;
  const nodes = graphs.flatMap(graphNodes);
  const heads: Array<{ n_q: number; n_kv: number }> = [];
  const recurrentHeads: number[] = [];
  const experts: number[] = [];
  for (const n of nodes) {
    if (n.op === 'Attention' && n.role !== 'indexer') heads.push({ n_q: n.n_q, n_kv: n.n_kv });
    else if (n.op === 'RecurrentUpdate') recurrentHeads.push(n.num_heads);
    else if (n.op === 'GroupedGEMM') experts.push(n.experts);
  }
  const tpOk = (t: number) =>
    heads.every((h) => h.n_q % t === 0 && (h.n_kv % t === 0 || t % h.n_kv === 0)) &&
    recurrentHeads.every((r) => r % t === 0);
  if (!tpOk(tp)) {
    const maxHeads = Math.max(1, ...heads.map((h) => h.n_q), ...recurrentHeads);
    const qs = [...new Set(heads.map((h) => h.n_q))].join('/');
    const kvs = [...new Set(heads.map((h) => h.n_kv))].join('/');
    const rule = heads.length
      ? `query heads (${qs}) divisible by tp, and KV heads (${kvs}) divisible by tp or tp divisible by them` +
        (recurrentHeads.length ? `; recurrent heads (${[...new Set(recurrentHeads)].join('/')}) divisible by tp` : '')
      : `recurrent heads (${[...new Set(recurrentHeads)].join('/')}) divisible by tp`;
    throw new UserError(
      `${name} cannot run at tp ${tp}: vLLM needs ${rule}; valid tp: ${valid(maxHeads, tpOk).join(', ')}`,
    );
  }
  if (ep > 1) {
    if (!experts.length) throw new UserError(`${name} has no experts (a dense model): ep must be 1, got ep ${ep}`);
    const epOk = (e: number) => experts.every((x) => x % e === 0);
    if (!epOk(ep)) {
      throw new UserError(
        `${name} cannot run at ep ${ep}: its ${[...new Set(experts)].join('/')} experts must divide evenly over ep; valid ep: ${valid(Math.min(...experts), epOk).join(', ')}`,
      );
    }
  }
}

const QUANTIZATION: Record<string, StorageDtype | 'checkpoint'> = {
  auto: 'checkpoint',
  bf16: 'bf16',
  bfloat16: 'bf16',
  fp16: 'fp16',
  float16: 'fp16',
  half: 'fp16',
  fp32: 'fp32',
  fp8: 'fp8',
  ptpc_fp8: 'fp8',
  fbgemm_fp8: 'fp8',
  modelopt: 'fp8',
  fp8_block: 'fp8_block',
  mxfp8: 'mxfp8',
  int8: 'int8',
  nvfp4: 'nvfp4',
  modelopt_fp4: 'nvfp4',
  mxfp4: 'mxfp4',
  int4: 'int4',
  awq: 'int4',
  awq_marlin: 'int4',
  gptq: 'int4',
  gptq_marlin: 'int4',
};

/** The weight dtypes and quantizations a deployment may name (compared lower-cased); `auto` = the checkpoint's. */
export const WEIGHT_DTYPES: readonly string[] = Object.keys(QUANTIZATION);

/**
 * The dtype the weights are served in: the checkpoint's, overridden by the deployment's quantization
 * (reference §4.2 mapping). @throws UserError listing the known names.
 */
export function servedDtype(weightDtype: string, checkpoint: StorageDtype): StorageDtype {
  const m = QUANTIZATION[weightDtype.toLowerCase()];
  if (!m)
    throw new UserError(`unknown weight dtype or quantization "${weightDtype}" (known: ${WEIGHT_DTYPES.join(', ')})`);
  return m === 'checkpoint' ? checkpoint : m;
}

/**
 * Bytes per cached element. An explicit KV dtype always wins. Under `auto`/undefined: the checkpoint's declared
 * KV-cache dtype when its graph carries one (`global.kv_dtype`, served-format.ts kvDeclaration), as vLLM does
 * (PR #29980: hf_quant_config.json kv_cache_quant_algo and compressed-tensors kv_cache_scheme give an fp8 cache);
 * else the served weights' width, sub-byte widths falling back to bf16 (reference §4.2).
 * @param kvDtype the deployment's kv_dtype
 * @param served the served weight dtype
 * @param declared the graph's `global.kv_dtype`
 * @throws UserError for an unknown KV dtype, or under auto for a declaration stepcal could not read
 */
export function kvBytesPerElement(kvDtype: string | undefined, served: StorageDtype, declared?: KvDeclaration): number {
  const k = (kvDtype ?? 'auto').toLowerCase();
  if (isAutoKvDtype(kvDtype)) {
    if (declared && 'not_understood' in declared)
      throw new UserError(
        `KV dtype auto follows the checkpoint's KV-cache declaration, which is not understood: ${declared.not_understood}; pass --kv-dtype to choose the cache`,
      );
    if (declared) return kvBytesPerElement(declared.dtype, served);
    // The value width without block scales (mxfp8 weights → an 8-bit cache, as fp8's).
    const b = Math.floor(bytesPerElement(served));
    return b < 1 ? 2 : Math.min(b, 2);
  }
  const b = explicitKvBytes(k);
  if (b === undefined) throw new UserError(`unknown KV-cache dtype "${kvDtype}" (known: ${KV_DTYPES.join(', ')})`);
  return b;
}

/** The KV-cache dtypes a deployment may name, as listed in messages (their fp8_* / nvfp4_* variants and spelt-out aliases are accepted too). */
export const KV_DTYPES = ['auto', 'bf16', 'fp16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'int8', 'nvfp4', 'fp32'] as const;

/** Bytes per element of an explicit (not auto) lower-cased KV dtype; undefined for a name stepcal does not know. */
function explicitKvBytes(k: string): number | undefined {
  if (k.startsWith('fp8') || k === 'int8') return 1;
  if (k === 'bf16' || k === 'bfloat16' || k === 'fp16' || k === 'float16' || k === 'half') return 2;
  if (k.startsWith('nvfp4')) return bytesPerElement('nvfp4');
  if (k === 'fp32' || k === 'float32') return 4;
  return undefined;
}

/** Whether kvBytesPerElement accepts `kvDtype` (auto, or a KV dtype it knows; see KV_DTYPES). */
export function isKnownKvDtype(kvDtype: string): boolean {
  return isAutoKvDtype(kvDtype) || explicitKvBytes(kvDtype.toLowerCase()) !== undefined;
}

/**
 * The checkpoint's declaration when KV dtype auto priced it (for headers: `price`, `serve`), else undefined (an
 * explicit KV dtype, or nothing declared).
 */
export function kvFromCheckpoint(
  kvDtype: string | undefined,
  declared: KvDeclaration | undefined,
): { dtype: string; source: string } | undefined {
  return isAutoKvDtype(kvDtype) && declared && 'dtype' in declared ? { ...declared } : undefined;
}

/** The compute format of a GEMM: which ramp coefficients (suffix) and which chip peak. */
export interface ComputeFormat {
  /** Registry suffix of gemm_eps_max_<suffix> / gemm_m_half_<suffix>. */
  ramp: 'bf16' | 'fp8' | 'fp8_block' | 'mxfp8' | 'nvfp4';
  /** Peak rate, FLOPs per µs. */
  peak_flops_per_us: number;
  /** Why this format was chosen when it is not the weights' own (an assumption to report). */
  note?: string;
}

/**
 * Which format a GEMM with weights in `w` computes in (seed "Arithmetic rates"): bf16/fp16 at the
 * bf16 rate; fp32 at the tf32 rate (bf16 ramp); fp8/int8 at the fp8 rate where the chip has one, else
 * at bf16 (weight-only kernels); four-bit at the four-bit rate only where the chip has a four-bit
 * peak AND the registry a four-bit ramp, else at the bf16 rate of vLLM's weight-only kernels; mxfp8
 * (mxfp8Format) on Hopper at the bf16 weight-only rate, on Blackwell at its own ramp where measured.
 * `hasRamp(suffix)` says whether the registry carries that ramp.
 */
export function computeFormat(w: StorageDtype, chip: Chip, hasRamp: (s: string) => boolean): ComputeFormat {
  const bf16 = chip.peak_tflops.bf16 * 1e6;
  switch (w) {
    case 'bf16':
    case 'fp16':
      return { ramp: 'bf16', peak_flops_per_us: bf16 };
    case 'fp32':
    case 'tf32':
      return {
        ramp: 'bf16',
        peak_flops_per_us: (chip.peak_tflops.tf32 ?? chip.peak_tflops.bf16 / 2) * 1e6,
        note: 'fp32 weights at the tf32 rate with the bf16 ramp',
      };
    case 'fp8':
    case 'fp8_block':
    case 'int8': {
      const fp8 = chip.peak_tflops.fp8;
      if (fp8 === undefined)
        return {
          ramp: 'bf16',
          peak_flops_per_us: bf16,
          note: `${w} weights on ${chip.name} (no fp8 peak) at the bf16 rate of weight-only kernels`,
        };
      // KNOWN DIVERGENCE 11 (reference §1.3): BLIS cannot reach its fp8_block ramp; stepcal uses it where the registry has one.
      if (w === 'fp8_block' && hasRamp('fp8_block')) return { ramp: 'fp8_block', peak_flops_per_us: fp8 * 1e6 };
      return { ramp: 'fp8', peak_flops_per_us: fp8 * 1e6 };
    }
    case 'mxfp8':
      return mxfp8Format(chip, hasRamp);
    case 'nvfp4':
    case 'mxfp4':
    case 'int4': {
      const fp4 = chip.peak_tflops.nvfp4;
      if (w !== 'int4' && fp4 !== undefined && hasRamp('nvfp4')) return { ramp: 'nvfp4', peak_flops_per_us: fp4 * 1e6 };
      // KNOWN DIVERGENCE 7 (reference §4.2 falls back to fp8): the seed prices four-bit weights on a part
      // without a four-bit peak at the bf16 rate of vLLM's weight-only kernels.
      return {
        ramp: 'bf16',
        peak_flops_per_us: bf16,
        note:
          fp4 === undefined || w === 'int4'
            ? `${w} weights on ${chip.name} at the bf16 rate of weight-only kernels (seed "Arithmetic rates")`
            : `${w} weights on ${chip.name}: registry has no gemm_*_nvfp4 ramp, priced at the bf16 rate`,
      };
    }
  }
}

/** Blackwell (sm_100 and later) has MX-format tensor cores; Hopper (sm_90) does not (NVIDIA PTX ISA, `mma` block-scale). */
const MX_TENSOR_CORE_SM = 100;

/**
 * MXFP8 weights (seed "Arithmetic rates"): on a part without MX tensor cores (Hopper and older) at the
 * bf16 rate of vLLM's weight-only kernels; on Blackwell at the fp8 peak on the registry's own
 * `gemm_*_mxfp8` ramp where one is measured, else on the fp8 ramp (noted: the shipped tables have no
 * MXFP8 GEMM rows; KNOWN DIVERGENCE 19).
 */
function mxfp8Format(chip: Chip, hasRamp: (s: string) => boolean): ComputeFormat {
  const fp8 = chip.peak_tflops.fp8;
  if ((chip.sm_version ?? 0) < MX_TENSOR_CORE_SM || fp8 === undefined)
    return {
      ramp: 'bf16',
      peak_flops_per_us: chip.peak_tflops.bf16 * 1e6,
      note: `mxfp8 weights on ${chip.name} (sm_${chip.sm_version ?? 'unknown'}, no MX tensor cores) at the bf16 rate of weight-only kernels (seed "Arithmetic rates")`,
    };
  if (hasRamp('mxfp8')) return { ramp: 'mxfp8', peak_flops_per_us: fp8 * 1e6 };
  return {
    ramp: 'fp8',
    peak_flops_per_us: fp8 * 1e6,
    note: `mxfp8 weights on ${chip.name}: registry has no gemm_*_mxfp8 ramp (no MXFP8 GEMM rows measured), priced on the fp8 ramp at the fp8 peak`,
  };
}
