/**
 * Coefficient lookup for one deployment, at construction only (seed "Arithmetic rates", "Memory",
 * "Attention", "Collectives", "Host time"; reference §1.5, §4.2–4.10). Turns registry names into the
 * numbers the plan folds: GEMM ramps per compute format, the derated HBM rate, decode-attention
 * floors and rates per kind, collective curves per (op, width) with width snapping and placement, and
 * the host set. Records the assumptions and extrapolation notes it makes. Pure: no I/O.
 */
import { UserError } from '../core/errors.ts';
import type { Chip } from '../core/catalog/chip.ts';
import { bytesPerElement, type StorageDtype } from '../core/catalog/dtypes.ts';
import type { DecodeLaw } from '../core/laws/attention.ts';
import { all2allSpan, nvlinkDomainGpus, ringSpan } from '../core/laws/placement.ts';
import type { MlaDecode, MlaWaveDecode } from '../core/laws/mla.ts';
import type { A2aMode } from '../core/laws/expert-alltoall.ts';
import type { MhcHalf, MsaDecodeLaw, MsaPrefillLaw, PrefillForm } from '../core/laws/sparse.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import { computeFormat, type ComputeFormat } from './deployment.ts';

/** A compute format with its ramp: ε_max, m_½ and, when the registry has both, n_½ and k_½. */
export interface RampFormat extends ComputeFormat {
  eps: number;
  mh: number;
  nh?: number;
  kh?: number;
}

/** One collective curve placed on NVLink or the NIC (coefficients in µs and bytes per µs). */
export interface CollectiveCurve {
  t0: number;
  rt: number | undefined;
  rpeak: number;
  /** The group crosses its NVLink domain: charged to the NIC. */
  nic: boolean;
  /** Message scale for a group that crosses the network (laws/placement.ts), 1 on NVLink. */
  span: number;
}

/** The host set (seed "Host time"; reference §1.5 host set, §4.10), µs. */
export interface HostCoefficients {
  dispatchUs: number;
  replayUs: number;
  pieceUs: number;
  eagerPerKernel: number | undefined;
  eagerPerLayer: number;
}

/** One weight dtype's pricing choice, as `price --json` shows it (info.formats). */
export interface FormatChoice {
  weight_dtype: StorageDtype;
  /** What the weights are priced with: `dense` GEMMs on a ramp, or routed `experts`. */
  use: 'dense' | 'experts';
  /** Ramp suffix (dense) or the expert law's registry dtype / `dense_ramp` fallback (experts). */
  ramp: string;
  /** The peak the arithmetic runs at, TFLOP/s. */
  peak_tflops: number;
  /** Bytes per stored weight value, block scales included (core/catalog/dtypes.ts). */
  bytes_per_value: number;
  /** The fused-MoE kernel whose fitted law prices the experts, and why (experts on a kernel set only). */
  kernel?: string;
  /** The fitted law's weight re-read past the first m-tile (experts on the fitted law only; plan.ts foldExpertLaw). */
  reread?: ExpertRereadChoice;
  note?: string;
}

/**
 * Whether and how the expert law's re-read term applies (core/laws/moe-experts.ts expertRereadPasses,
 * l2MissFraction): a step charges touched · us_per_extra_tile · (⌈(tokens per touched expert) / tile_m⌉ − 1) per layer.
 */
export interface ExpertRereadChoice {
  /**
   * `moe_expert_reread_<set>`: reads of one touched expert's L2-missing weights per m-tile past its first (a
   * fraction of one full read, dimensionless); 0 when the registry has none.
   */
  reads_per_extra_tile: number;
  /** One touched expert's weights on one rank, bytes (block scales included). */
  expert_bytes_per_rank: number;
  /** The chip's L2, bytes; undefined when the chip table has none (no re-read then). */
  l2_bytes: number | undefined;
  /** Share of one expert's weights that does not fit in L2, max(0, 1 − L2 / expert bytes). */
  l2_miss_fraction: number;
  /** What one extra m-tile costs one touched expert, reads_per_extra_tile · L2-missing bytes / (HBM · derate), µs; 0 = never charged. */
  us_per_extra_tile: number;
  /** Tokens per m-tile (EXPERT_TILE_M). */
  tile_m: number;
  /** The layer's routing: experts E, top_k k, experts on the rank L (core/laws/moe.ts expertsTouched). */
  experts: number;
  top_k: number;
  local_experts: number;
  /** Routed (token, expert) pairs on the rank per step token, k · L / E. */
  pairs_per_token: number;
}

/** Registry lookups for one chip, model, tp and ep; caches per format and per collective. */
export class PricerCoefficients {
  /** Choices a reader should know (fallbacks, format choices); may repeat, deduplicated by the caller. */
  readonly assumptions: string[] = [];
  /** Extrapolation notes known at construction, each once. */
  readonly staticNotes = new Set<string>();
  /** Routed-expert pricing choices by weight dtype (plan.ts records them), for `formatChoices`. */
  readonly expertChoices = new Map<StorageDtype, FormatChoice>();
  readonly hbmDerate: number;
  private readonly formats = new Map<StorageDtype, RampFormat>();
  private readonly curves = new Map<string, CollectiveCurve>();
  private readonly collDtype: string;
  private readonly chipKey: string;
  /** Registry widths by name prefix (`widthsOf`), built on first use. */
  private widthIndex: Map<string, number[]> | undefined;

  /**
   * @param served the served weight dtype (collectives run int8 for int8 weights, else fp16)
   * @throws UserError when the registry has no `hbm_derate`.
   */
  constructor(
    readonly chip: Chip,
    private readonly modelName: string,
    private readonly tp: number,
    private readonly ep: number,
    readonly reg: ResolvedCoefficients,
    served: StorageDtype,
  ) {
    this.collDtype = served === 'int8' ? 'int8' : 'fp16';
    this.chipKey = chip.name.replace(/-/g, '_');
    this.hbmDerate = this.need('hbm_derate');
  }

  /**
   * A required coefficient.
   * @throws UserError naming it and listing the family's known names.
   */
  need(name: string): number {
    if (this.reg.has(name)) return this.reg.value(name);
    const fam = name.split('_').slice(0, 2).join('_');
    const near = this.reg.names().filter((n) => n.startsWith(fam));
    throw new UserError(
      `coefficient "${name}" is not in the registry for ${this.chip.name} (${this.modelName}, tp ${this.tp}, ep ${this.ep}); known ${fam}_*: ${near.length ? near.join(', ') : '(none)'}`,
    );
  }

  /** An optional coefficient, undefined when absent. */
  opt(name: string): number | undefined {
    return this.reg.has(name) ? this.reg.value(name) : undefined;
  }

  /**
   * The compute format and ramp a weight dtype runs on (seed "Arithmetic rates"; reference §4.2–4.3).
   * Shape factors only when both halves exist (reference §1.3: both or neither).
   * @throws UserError when the format's `gemm_eps_max_*` or `gemm_m_half_*` is missing.
   */
  format(w: StorageDtype): RampFormat {
    const hit = this.formats.get(w);
    if (hit) return hit;
    const cf = computeFormat(w, this.chip, (s) => this.reg.has(`gemm_eps_max_${s}`));
    if (cf.note) this.assumptions.push(cf.note);
    const nh = this.opt(`gemm_n_half_${cf.ramp}`);
    const kh = this.opt(`gemm_k_half_${cf.ramp}`);
    const f: RampFormat = { ...cf, eps: this.need(`gemm_eps_max_${cf.ramp}`), mh: this.need(`gemm_m_half_${cf.ramp}`) };
    if (nh !== undefined && kh !== undefined) Object.assign(f, { nh, kh });
    this.formats.set(w, f);
    return f;
  }

  /** Every weight format priced so far (dense ramps, then experts): the choices `price --json` shows. */
  formatChoices(): FormatChoice[] {
    const dense = [...this.formats].map(
      ([w, f]): FormatChoice => ({
        weight_dtype: w,
        use: 'dense',
        ramp: f.ramp,
        peak_tflops: f.peak_flops_per_us / 1e6,
        bytes_per_value: bytesPerElement(w),
        ...(f.note ? { note: f.note } : {}),
      }),
    );
    return [...dense, ...this.expertChoices.values()];
  }

  /**
   * Decode-attention law of an attention kind (seed "Attention"; reference §1.5, §4.5; issue 16): floor
   * (µs), rate (bytes per µs) and, where the registry has them, the work-item cost (µs per decode row
   * × KV head) and the rate's half-point (work items), core/laws/attention.ts decodeAttentionUs. The
   * kind's own, else the full-attention law (noted), else undefined.
   */
  decodeAttention(kind: string): DecodeLaw | undefined {
    // Sparse latent attention: the sparse family's own decode law over the bytes it reads (issue 14).
    const sparseRate = kind === 'sparse' ? this.opt('sparse_decode_rate') : undefined;
    if (sparseRate !== undefined)
      return { floor_us: this.opt('sparse_decode_floor') ?? 0, rate: sparseRate, item_us: 0, p_half: 0 };
    const suffix = kind === 'gqa' ? '' : kind === 'sparse' ? '_sparse_mla' : `_${kind}`;
    const baseRate = this.opt('attention_decode_rate');
    const baseFloor = this.opt('attention_decode_floor') ?? 0;
    if (suffix) {
      const rate = this.opt(`attention_decode_rate${suffix}`);
      if (rate !== undefined)
        return this.decodeLaw(suffix, this.opt(`attention_decode_floor${suffix}`) ?? baseFloor, rate);
      if (baseRate !== undefined) {
        this.staticNotes.add(
          `no attention_decode_rate${suffix} in the registry: ${kind} decode priced with the full-attention rate`,
        );
        return this.decodeLaw('', this.opt(`attention_decode_floor${suffix}`) ?? baseFloor, baseRate);
      }
    }
    return baseRate === undefined ? undefined : this.decodeLaw('', baseFloor, baseRate);
  }

  /** The work-item terms stored beside a decode rate (`attention_decode_{item_us,p_half}<suffix>`), else 0. */
  private decodeLaw(suffix: string, floor_us: number, rate: number): DecodeLaw {
    const item_us = this.opt(`attention_decode_item_us${suffix}`) ?? 0;
    const p_half = this.opt(`attention_decode_p_half${suffix}`) ?? 0;
    return { floor_us, rate, item_us, p_half };
  }

  /**
   * The MLA decode law (issue 13 item 2; core/laws/mla.ts), fitted on the vLLM module tables: the cache rate
   * and the per-(head × key) cost of the cache dtype (`mla_decode_{rate,head_token}`, `_fp8kv` for a 1-byte
   * cache), with the decode-attention kernel floor (`attention_decode_floor_mla`, else `attention_decode_floor`):
   * the module's own floor and its per-head and per-request terms are the projections' kernels, weights and
   * arithmetic, which the graph's GEMMs already charge (docs/pricer.md "MLA"). Undefined without a fitted rate.
   * @param kvB cache bytes per element (2 bf16, 1 fp8; another width, or fp8 on a chip whose tables have no fp8
   *   cache, uses the bf16-cache law over its own bytes, noted)
   */
  mlaDecode(kvB: number): MlaDecode | undefined {
    let sfx = kvB === 1 ? '_fp8kv' : '';
    if (sfx && !this.reg.has(`mla_decode_rate${sfx}`)) sfx = '';
    const rate = this.opt(`mla_decode_rate${sfx}`);
    if (rate === undefined) return undefined;
    if (kvB !== 2 && sfx === '')
      this.staticNotes.add(
        `MLA decode: no fit for a ${kvB}-byte cache on ${this.chip.name}; the bf16-cache law priced over its bytes`,
      );
    const floor = this.opt('attention_decode_floor_mla') ?? this.opt('attention_decode_floor') ?? 0;
    return { floor_us: floor, bytes_per_us: rate, head_token_us: this.opt(`mla_decode_head_token${sfx}`) ?? 0 };
  }

  /**
   * Whether the registry's MLA laws are the kernel tables' (no module law: a100), whose prefill and decode terms
   * the pricer then charges: no module projection term (`mla_decode_per_request*`, `mla_prefill_per_token`; a
   * module fit writes them even when pinned at 0). A kernel fit's linear decode form has a rate too, so the rate
   * does not tell them apart.
   */
  mlaKernelOnly(): boolean {
    return !['mla_decode_per_request', 'mla_decode_per_request_fp8kv', 'mla_prefill_per_token'].some((n) =>
      this.reg.has(n),
    );
  }

  /**
   * The MLA decode kernel's wave law (core/laws/mla.ts MlaWaveDecode; docs/fitting.md "MLA"), fitted on the
   * kernel tables where a chip has no module table (a100), at `heads` local query heads: the one-head kernel's
   * law (`_h1`) at one head where the registry has it. Used only where the registry has no module law
   * (mlaKernelOnly); the floor as mlaDecode's. Undefined without `mla_decode_wave_us`.
   * @param kvB cache bytes per element (`_fp8kv` entries for 1 where fitted, else the bf16-cache law, noted)
   * @param heads local query heads (n_q / tp)
   * @throws UserError when the registry has `mla_decode_wave_us` but not every other entry of its law
   */
  mlaWaveDecode(kvB: number, heads: number): MlaWaveDecode | undefined {
    if (!this.mlaKernelOnly()) return undefined;
    let sfx = kvB === 1 ? '_fp8kv' : '';
    if (sfx && !this.reg.has(`mla_decode_wave_us${sfx}`)) sfx = '';
    const h1 = heads === 1 && this.reg.has(`mla_decode_wave_us_h1${sfx}`) ? '_h1' : '';
    const name = (n: string) => `mla_decode_${n}${h1}${sfx}`;
    if (!this.reg.has(name('wave_us'))) return undefined;
    const needed = ['key_us', 'splits', ...(h1 ? [] : ['key_head_us', 'block_heads'])].map(name);
    const missing = needed.filter((n) => !this.reg.has(n));
    if (missing.length)
      throw new UserError(
        `registry for ${this.chip.name}: ${name('wave_us')} is present but ${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} missing; the MLA decode wave law needs all of ${[name('wave_us'), ...needed].join(', ')} (refit with \`stepcal fit mla --chip ${this.chip.name}\`)`,
      );
    this.staticNotes.add(
      `MLA decode: no module fit on ${this.chip.name}; the kernel tables' wave law${h1 ? ' (one-head kernel)' : ''}, a mixed batch at its mean context bounded by one wave of its longest row (KNOWN DIVERGENCE 34); below the kernel rows' eager floor (${name('floor')} ${this.opt(name('floor'))?.toPrecision(4) ?? '?'} µs) its wave times are extrapolated from the longer contexts${kvB !== 2 && sfx === '' ? `; the bf16-cache law for a ${kvB}-byte cache` : ''}`,
    );
    const v = (n: string) => this.reg.value(name(n));
    return {
      floor_us: this.opt('attention_decode_floor_mla') ?? this.opt('attention_decode_floor') ?? 0,
      wave_us: v('wave_us'),
      key_us: v('key_us'),
      key_head_us: h1 ? 0 : v('key_head_us'),
      block_heads: h1 ? 1 : v('block_heads'),
      splits: v('splits'),
    };
  }

  /**
   * The indexer scan's decode floor (µs) and rate (bytes per µs) over its index keys (issue 14), else the
   * sparse / full decode-attention law (noted).
   */
  indexerDecode(): DecodeLaw | undefined {
    const rate = this.opt('indexer_decode_rate');
    if (rate !== undefined) return { floor_us: this.opt('indexer_decode_floor') ?? 0, rate, item_us: 0, p_half: 0 };
    this.staticNotes.add(
      'no indexer_decode_rate in the registry: the indexer scan priced with the decode-attention law',
    );
    return this.decodeAttention('sparse');
  }

  /**
   * A model's own measured prefill form `<prefix>_prefill_{fixed,per_request,per_token,rate}` (seed
   * "Attention"): used only when every term is present (scoped to this model); otherwise undefined, with a
   * note naming the missing terms, and the caller prices the general prefill arithmetic.
   */
  prefillForm(prefix: 'sparse' | 'indexer'): PrefillForm | undefined {
    const names = ['fixed', 'per_request', 'per_token', 'rate'].map((t) => `${prefix}_prefill_${t}`);
    const missing = names.filter((n) => !this.reg.has(n));
    if (missing.length) {
      this.staticNotes.add(
        `${prefix === 'sparse' ? 'sparse attention' : 'indexer'} prefill: the model's own prefill form is incomplete for ${this.modelName} on ${this.chip.name} (missing ${missing.join(', ')}); priced as prefill arithmetic`,
      );
      return undefined;
    }
    const [fixed_us, per_request_us, per_token_us, bytes_per_us] = names.map((n) => this.reg.value(n)) as [
      number,
      number,
      number,
      number,
    ];
    return { fixed_us, per_request_us, per_token_us, bytes_per_us };
  }

  /**
   * MiniMax-M3's measured MSA module laws (issue 14; core/laws/sparse.ts; docs/pricer.md "MSA"): both phases'
   * terms `msa_decode_*` and `msa_prefill_*` (scoped to minimax-m3), or undefined with a note naming the
   * missing ones, and the caller prices the layer's projections and attention by the general laws.
   */
  msaModule(): { decode: MsaDecodeLaw; prefill: MsaPrefillLaw } | undefined {
    const names = [
      'decode_floor',
      'decode_per_request',
      'decode_flop_rate',
      'decode_rate',
      'decode_index_rate',
      'prefill_fixed',
      'prefill_per_request',
      'prefill_per_token',
      'prefill_flop_rate',
      'prefill_attn_rate',
      'prefill_index_rate',
    ].map((t) => `msa_${t}`);
    const missing = names.filter((n) => !this.reg.has(n));
    if (missing.length) {
      this.staticNotes.add(
        `MSA: the module law is incomplete for ${this.modelName} on ${this.chip.name} (missing ${missing.join(', ')}); its projections priced as GEMMs and its attention as block-sparse decode / prefill arithmetic`,
      );
      return undefined;
    }
    const v = names.map((n) => this.reg.value(n));
    return {
      decode: {
        floor_us: v[0]!,
        per_request_us: v[1]!,
        flops_per_us: v[2]!,
        bytes_per_us: v[3]!,
        index_bytes_per_us: v[4]!,
      },
      prefill: {
        fixed_us: v[5]!,
        per_request_us: v[6]!,
        per_token_us: v[7]!,
        proj_flops_per_us: v[8]!,
        attn_flops_per_us: v[9]!,
        index_flops_per_us: v[10]!,
      },
    };
  }

  /** The measured mHC half (seed "Hyper-connections"): floor µs and rate bytes per µs, or undefined (noted). */
  mhc(half: MhcHalf): { floor: number; rate: number } | undefined {
    const rate = this.opt(`mhc_${half}_rate`);
    const floor = this.opt(`mhc_${half}_floor`);
    if (rate !== undefined && floor !== undefined) return { floor, rate };
    this.staticNotes.add(
      `no mhc_${half}_{floor,rate} in the registry: mHC ${half} charged as memory traffic with its mixing GEMM`,
    );
    return undefined;
  }

  /** Widths with coefficients for `op` (ascending): both a floor and a peak rate. */
  private fittedWidths(op: string): number[] {
    return this.widthsOf(`collective_floor_${op}_${this.collDtype}`).filter((w) =>
      this.reg.has(`collective_peak_rate_${this.tail(op, w)}`),
    );
  }

  /**
   * The widths N (ascending) of this chip's entries named `<prefix>_<N>rank_<chip>`; [] when none. Every
   * name is parsed once per pricer into one index (a pricer asks for several prefixes, each of which
   * used to sort and scan the registry's ~200 names: 2.2 s of 304 DeepEP pricers in
   * test/pricer/expert-alltoall.test.ts, docs/performance.md "npm test").
   */
  private widthsOf(prefix: string): readonly number[] {
    if (this.widthIndex === undefined) {
      const index = new Map<string, number[]>();
      const suffix = `rank_${this.chipKey}`;
      for (const n of this.reg.entries.keys()) {
        if (!n.endsWith(suffix)) continue;
        const m = /^(.+)_(\d+)$/.exec(n.slice(0, n.length - suffix.length));
        if (m === null) continue;
        const list = index.get(m[1]!);
        if (list === undefined) index.set(m[1]!, [Number(m[2])]);
        else list.push(Number(m[2]));
      }
      for (const list of index.values()) list.sort((a, b) => a - b);
      this.widthIndex = index;
    }
    return this.widthIndex.get(prefix) ?? [];
  }

  private tail(op: string, width: number): string {
    return `${op}_${this.collDtype}_${width}rank_${this.chipKey}`;
  }

  /** A width's coefficients count as measured only when its floor and peak rate both say so. */
  private isMeasured(op: string, width: number): boolean {
    const e = this.reg.entries;
    return (
      e.get(`collective_floor_${this.tail(op, width)}`)?.entry.method === 'measured' &&
      e.get(`collective_peak_rate_${this.tail(op, width)}`)?.entry.method === 'measured'
    );
  }

  /**
   * The curve of collective `op` over `width` ranks (seed "Collectives"; reference §4.7). Width
   * snapping: exact, else the next width above, else the widest (noted); assumed widths noted. One
   * domain rule (laws/placement.ts) decides whether the group crosses and by how much.
   * @throws UserError when the registry has no width at all for the op.
   */
  collective(op: string, width: number): CollectiveCurve {
    const key = `${op}/${width}`;
    const hit = this.curves.get(key);
    if (hit) return hit;
    const widths = this.fittedWidths(op);
    if (!widths.length)
      throw new UserError(
        `cannot price ${op} over ${width} ranks on ${this.chip.name} (${this.modelName}, tp ${this.tp}, ep ${this.ep}): the registry has no ${op} collective at any width (no collective_floor_${op}_* entry; the chip's measurements had no comm table with ${op} rows). Measure it (nccl-tests or an upstream comm table) and onboard again, or price tp 1${op === 'alltoall' ? ' / ep 1' : ''}`,
      );
    const measured = widths.filter((x) => this.isMeasured(op, x));
    const assumed = widths.filter((x) => !this.isMeasured(op, x));
    const widthList =
      `measured widths: ${measured.length ? measured.join(', ') : 'none'}` +
      (assumed.length ? `; assumed (not measured) widths: ${assumed.join(', ')}` : '');
    const w = widths.find((x) => x >= width) ?? widths[widths.length - 1]!;
    if (w !== width)
      this.staticNotes.add(
        `${op} over ${width} ranks priced with the ${w}-rank ${this.chipKey} coefficients (${widthList})`,
      );
    else if (!this.isMeasured(op, w))
      this.staticNotes.add(
        `${op} over ${width} ranks priced with assumed (not measured) ${w}-rank ${this.chipKey} coefficients (${widthList})`,
      );
    const domain = nvlinkDomainGpus(this.chip);
    const linkRatio = this.chip.nvlink_bytes_per_us / this.chip.nic_bytes_per_us;
    const tail = this.tail(op, w);
    const c: CollectiveCurve = {
      t0: this.need(`collective_floor_${tail}`),
      rt: this.opt(`collective_transition_rate_${tail}`),
      rpeak: this.need(`collective_peak_rate_${tail}`),
      nic: width > domain,
      span: op === 'alltoall' ? all2allSpan(width, domain, linkRatio) : ringSpan(width, domain, linkRatio),
    };
    this.curves.set(key, c);
    return c;
  }

  /** EP widths (ranks, ascending) with a fitted `mode` `phase` all-to-all curve in the registry; [] when none. */
  expertAlltoallWidths(mode: A2aMode, phase: 'dispatch' | 'combine'): readonly number[] {
    return this.widthsOf(`expert_alltoall_floor_${mode}_${phase}`);
  }

  /**
   * The fitted expert-parallel all-to-all curve of `mode` and `phase` over `width` ranks (issue 13 item 3;
   * docs/pricer.md "Expert-parallel all-to-all"), or undefined when the registry has none for the mode (the
   * caller then charges the NCCL alltoall curve). Width snapping as `collective`: exact, else the next width
   * above, else the widest (noted). Placement as every collective (laws/placement.ts): within the NVLink
   * domain on NVLink, else on the NIC with the all-to-all span (KNOWN DIVERGENCE 31).
   */
  expertAlltoall(mode: A2aMode, phase: 'dispatch' | 'combine', width: number): CollectiveCurve | undefined {
    const key = `ep:${mode}/${phase}/${width}`;
    const hit = this.curves.get(key);
    if (hit) return hit;
    const widths = this.expertAlltoallWidths(mode, phase);
    if (!widths.length) return undefined;
    const w = widths.find((x) => x >= width) ?? widths[widths.length - 1]!;
    if (w !== width)
      this.staticNotes.add(
        `${mode === 'mnnvl' ? 'TRT-LLM MNNVL' : 'DeepEP'} ${mode} ${phase} over ${width} ranks priced with the ${w}-rank ${this.chipKey} coefficients (measured widths: ${widths.join(', ')})`,
      );
    const tail = `${mode}_${phase}_${w}rank_${this.chipKey}`;
    const domain = nvlinkDomainGpus(this.chip);
    const c: CollectiveCurve = {
      t0: this.need(`expert_alltoall_floor_${tail}`),
      rt: this.opt(`expert_alltoall_transition_rate_${tail}`),
      rpeak: this.need(`expert_alltoall_peak_rate_${tail}`),
      nic: width > domain,
      span: all2allSpan(width, domain, this.chip.nvlink_bytes_per_us / this.chip.nic_bytes_per_us),
    };
    this.curves.set(key, c);
    return c;
  }

  /**
   * The host set for a CUDA-graph mode: without graphs no replay is charged.
   * @throws UserError when `host_launch_per_kernel`, the replay cost (with graphs) or both eager costs are missing.
   */
  host(graphsUsed: boolean): HostCoefficients {
    const dispatchUs = this.need('host_launch_per_kernel');
    const replayUs = graphsUsed ? this.need('host_replay_graph_per_step') : 0;
    const pieceUs = graphsUsed ? (this.opt('host_replay_graph_per_node') ?? replayUs) : 0;
    const eagerPerKernel = this.opt('host_launch_eager_per_kernel');
    const eagerPerLayer = eagerPerKernel === undefined ? this.need('host_launch_eager_per_layer') : 0;
    return { dispatchUs, replayUs, pieceUs, eagerPerKernel, eagerPerLayer };
  }
}
