/**
 * The units check (issue 12 item 2): every imported table, per family and per group (dtype, op), must
 * show a best achieved rate inside a physically possible band of the chip's datasheet, and a floor
 * (its fastest call) inside [FLOOR_MIN_US, FLOOR_MAX_US]. A table outside names the file, the row,
 * the column, the implied rate and the likely factor (×1000 ms vs µs, ×2 elements vs bytes, ×10).
 *
 * Bands (fractions of the datasheet rate in catalog/chips/<chip>.yaml; measured on every shipped
 * table, docs/measurements.md "Units check"):
 * - gemm, per dtype: best 2·m·n·k / latency over shapes with m, n, k ≥ 1024 in [0.20, 1.2] × dense
 *   peak; every row ≤ 1.2 × peak. Shipped tables reach 47 % (l40s fp8_block) to 97 % (h100 bf16).
 * - attention_decode, per kv_dtype: best KV bytes / latency over working sets above 4 × L2 in
 *   [0.25, 1.05] × HBM; every such row ≤ 1.05 × HBM. Shipped: 67 % (h200 fp8) to 95 % (b200 bf16).
 * - attention_prefill, per dtype: best causal FLOPs (4 · batch · n_q · head_dim · pairs, core/laws
 *   prefillPairs) / latency over calls of ≥ 4096 tokens in [0.15, 1.2] × dense peak. Shipped: 50–87 %.
 * - collective, per (op, dtype, ranks, backend): best bus bandwidth (nccl-tests factor) over
 *   messages ≥ 16 MiB against the per-direction link rate (NVLink, or PCIe without it). On an
 *   NVLink-class part (not `isPcieOnly`, core/catalog/chip.ts) in [0.125, 1.25]: the floor is a
 *   tenth of the ceiling, so a ×10 latency slip of any admissible table lands below it; shipped 21.5 %
 *   (gb200 2-rank custom all-reduce) to 104 % (NVLS all-reduce on Hopper, in-switch reduction). On a
 *   PCIe-class part in [0.02, 1.0]: PCIe has no in-switch reduction, so bus bandwidth cannot pass the
 *   link; shipped 3.7 % (l40s 8 ranks over PCIe switches) to 70 % (docs/measurements.md "Units check").
 * - moe, per dtype with a tensor-core peak (bf16, fp8, fp8_block, nvfp4): best expert FLOPs
 *   (2 · tokens · topk · 3 · hidden · inter / (tp · ep)) / latency over ≥ 1024 tokens in [0.1, 1.2] × peak.
 *   Shipped: 18 % (h100 fp8) to 74 % (h200 bf16), so a ×10 latency slip (≤ 7.4 %) is refused with a
 *   1.8× margin under the slowest real table.
 * - sparse, per op: the mHC halves (bandwidth-bound) over working sets above 4 × L2, best stream bytes
 *   (tokens · mhcBytesPerToken · sites) / latency in [0.10, 1.05] × HBM; the dataset README measures post
 *   at 88–94 % and pre at ≤ 50 %. The attention and indexer rows are judged on their floors only.
 * - mla, per (op, kv_dtype): decode rows (module and kernel) over working sets above 4 × L2, best latent
 *   bytes (batch · attended · 576 · dtype bytes) / latency in [0.25, 1.05] × HBM; the dataset README measures
 *   80–94 % (module) and 54–93 % (kernel). Prefill rows are judged on their floors only.
 * - floors, every family and group: the fastest call ≥ 0.5 µs, and the fastest floor-bound call (under
 *   1 µs of work at the datasheet rate; any call for host tables) ≤ 10 ms. A CUDA kernel launch and
 *   completion costs a few µs (chapter 2, host overheads); the shipped tables' fastest calls are
 *   1.65 µs (l40s bf16 GEMM) to 282 µs (l40s fp8_block GEMM, whose sweep starts large).
 * Pure: rows in, an InputError or nothing out.
 */
import { InputError } from '../core/errors.ts';
import { type Chip, isPcieOnly, l2Bytes, peakFlopsPerUs } from '../core/catalog/chip.ts';
import type { GemmDtype } from '../core/catalog/dtypes.ts';
import { prefillPairs } from '../core/laws/attention.ts';
import { decodeKvBytes } from './kv.ts';
import { RowColumns, type RowList } from './row-columns.ts';
import { mhcBytesPerToken } from '../core/laws/sparse.ts';
import { MLA_LATENT_ELEMENTS } from '../core/laws/mla.ts';
import type {
  AttentionDecodeRow,
  AttentionPrefillRow,
  CollectiveRow,
  ExpertA2aRow,
  Family,
  GemmRow,
  MlaRow,
  MoeRow,
  SparseRow,
  RecurrentRow,
} from './schema.ts';

/** A plausible band of a best achieved rate, as fractions of a datasheet rate, with its evidence. */
export interface RateBand {
  lo: number;
  hi: number;
  /** Typical best fraction on real tables (names the likely factor of a slip). */
  typical: number;
  source: string;
}

export const UNITS_BANDS = {
  expert_alltoall: {
    lo: 0.1,
    hi: 1.5,
    typical: 0.6,
    source:
      'DeepEP bytes one rank sends / kernel time on messages ≥ 16 MiB: fitted rates 214–715 GB/s against 450–900 GB/s per direction (docs/fitting.md); own-rank copies never cross the link, hence hi 1.5',
  },
  gemm: { lo: 0.2, hi: 1.2, typical: 0.8, source: 'shipped tables reach 47–97 % of the dense peak' },
  attention_decode: { lo: 0.25, hi: 1.05, typical: 0.88, source: 'shipped tables reach 67–95 % of HBM' },
  attention_prefill: { lo: 0.15, hi: 1.2, typical: 0.65, source: 'shipped tables reach 50–87 % of the dense peak' },
  collective: {
    lo: 0.125,
    hi: 1.25,
    typical: 0.65,
    source: 'shipped NVLink-class tables reach 21.5–104 % of the link (NVLS ≈ 1.07× on Hopper); floor = ceiling / 10',
  },
  collective_pcie: {
    lo: 0.02,
    hi: 1.0,
    typical: 0.6, // the 2-rank groups, the ones that reach the ceiling after a size slip
    source:
      'shipped PCIe-class tables (l40s, rtx-pro-6000) reach 3.7–70 % of the link; PCIe has no in-switch reduction',
  },
  moe: { lo: 0.1, hi: 1.2, typical: 0.5, source: 'shipped tables reach 18–74 % of the dense peak' },
  sparse: { lo: 0.1, hi: 1.05, typical: 0.7, source: 'mHC halves reach 34–94 % of HBM (aiconfigurator-modern README)' },
  recurrent: {
    lo: 0.05,
    hi: 1.2,
    typical: 0.7,
    source:
      'recurrent decode state traffic and conv traffic beyond 4× L2 reach 36–89 % of HBM (aiconfigurator-modern README physical checks)',
  },
  mla: {
    lo: 0.25,
    hi: 1.05,
    typical: 0.85,
    source: 'MLA decode reads reach 54–94 % of HBM (aiconfigurator-modern README)',
  },
} as const satisfies Record<string, RateBand>;

/** The collective band of `chip`'s peer link class (module comment). */
export function collectiveBand(chip: Chip): RateBand {
  return isPcieOnly(chip) ? UNITS_BANDS.collective_pcie : UNITS_BANDS.collective;
}

/** Fastest plausible and slowest plausible single call, µs (see the module comment). */
export const FLOOR_MIN_US = 0.5;
export const FLOOR_MAX_US = 10_000;
/** A typical fastest call (µs), to name the factor of a floor outside the band. */
const TYPICAL_FLOOR_US = 5;
/**
 * One row slower than SLOW_ROW_FACTOR × (its work at the datasheet rate + FLOOR_MAX_US) is refused: a
 * single row given in the wrong unit (×1000) passes the per-group checks, which judge the fastest rows
 * only. 100× that sum means under 1 % of the datasheet rate on a large call and over 1 s on a small
 * one. The slowest shipped row sits at 24× (an 0.8 s fused-MoE call; collective and prefill rows reach
 * 12–16×), so the bound leaves them a 4× margin (test/measurements/units-slip.test.ts).
 */
export const SLOW_ROW_FACTOR = 100;

/** Work (µs at the datasheet rate) below which a call is floor-bound, for the FLOOR_MAX_US bound. */
const TINY_WORK_US = 1;
/** A decode working set counts as "not cache-resident" above this multiple of L2. */
export const NOT_CACHE_RESIDENT_L2_MULTIPLE = 4;
/** A GEMM counts as large and compute-bound when m, n and k are all at least this. */
export const LARGE_GEMM_DIM = 1024;
const LARGE_PREFILL_TOKENS = 4096;
const LARGE_MESSAGE_BYTES = 2 ** 24;
const LARGE_MOE_TOKENS = 1024;
const TENSOR_DTYPES = new Set(['bf16', 'fp8', 'fp8_block', 'nvfp4']);

/** Slips a ratio (implied / typical rate) may come from, most specific first. */
const SLIPS: ReadonlyArray<{ f: number; why: string }> = [
  { f: 1e-3, why: '×1000 too slow: latency in µs labelled ms, or a size in bytes read as KB?' },
  { f: 1e3, why: '×1000 too fast: latency in s labelled ms, ms labelled µs, or a size ×1000?' },
  { f: 1e-6, why: '×10⁶ too slow: latency in µs labelled s?' },
  { f: 1e6, why: '×10⁶ too fast: latency in s labelled µs?' },
  { f: 2, why: '×2 too fast: a size in elements read as bytes of a 2-byte dtype (or a ×2 size)?' },
  { f: 0.5, why: '×2 too slow: a size in bytes read as 2-byte elements?' },
  { f: 8, why: '×8: bits vs bytes?' },
  { f: 0.125, why: '×8: bits vs bytes?' },
  { f: 10, why: '×10 too fast: a decimal slip in latency or size?' },
  { f: 0.1, why: '×10 too slow: a decimal slip in latency or size?' },
];

/**
 * The slip a rate off by `ratio` (implied / typical) most likely is: the nearest of SLIPS in log
 * space (within a factor 3 for ×1000 and ×10⁶, 1.6 for the others), else the bare factor. `sizes` false (FLOP rates: no byte sizes in the
 * rate) leaves out the ×2 and ×8 size slips.
 */
export function likelyFactor(ratio: number, sizes = true): string {
  let best: { d: number; why: string } | undefined;
  for (const s of SLIPS) {
    if (!sizes && (s.f === 2 || s.f === 0.5 || s.f === 8 || s.f === 0.125)) continue;
    const d = Math.abs(Math.log(ratio / s.f));
    // ×1000 and ×10⁶ slips land within a factor 3 (the band's typical rate is only typical); the small ones within 1.6.
    const tol = s.f >= 1e3 || s.f <= 1e-3 ? Math.log(3) : Math.log(1.6);
    if (d < tol && (!best || d < best.d)) best = { d, why: s.why };
  }
  if (best) return best.why;
  return ratio >= 1 ? `×${ratio.toPrecision(2)} too fast` : `×${(1 / ratio).toPrecision(2)} too slow`;
}

/** One row's contribution: its group, implied rate (undefined = not judged) and latency. */
interface Sample {
  group: string;
  rate: number | undefined;
  latency_us: number;
  /** The datasheet rate the fractions are of, per µs (FLOP/µs or bytes/µs). */
  ref?: number;
  /** The row's work at the datasheet rate, µs (when the rate is known). */
  ideal_us?: number;
}

/** Datasheet rate, unit and band a family's rates are judged against; undefined = not judged (no peak). */
type Judge = (row: unknown) => (Sample & { limit?: number }) | undefined;

/** `f(key)` computed once per distinct key (group names: one string per dtype, not one per row). */
function memo<T>(f: (key: string) => T): (key: string) => T {
  const cache = new Map<string, T>();
  return (key) => {
    let v = cache.get(key);
    if (v === undefined && !cache.has(key)) {
      v = f(key);
      cache.set(key, v);
    }
    return v as T;
  };
}

type GemmSample = Sample & { limit?: number };

/**
 * The GEMM rule for one row, written into `out`: the achieved rate 2·m·n·k / latency (FLOPs per µs) as
 * a fraction of the dtype's dense peak (`peak`, FLOPs per µs, chip datasheet), judged only when every
 * dimension is ≥ LARGE_GEMM_DIM, and the same fraction for every row as its `limit`. @returns out
 */
function gemmSample(
  out: GemmSample,
  group: string,
  peak: number | undefined,
  m: number,
  n: number,
  k: number,
  latency_us: number,
): GemmSample {
  const large = m >= LARGE_GEMM_DIM && n >= LARGE_GEMM_DIM && k >= LARGE_GEMM_DIM;
  const rate = (2 * m * n * k) / latency_us;
  out.group = group;
  out.rate = peak && large ? rate / peak : undefined;
  out.latency_us = latency_us;
  out.limit = peak ? rate / peak : undefined;
  out.ref = peak || undefined;
  return out;
}

/** An empty sample with GemmSample's fields in one order (one hidden class). */
const emptyGemmSample = (): GemmSample => ({
  group: '',
  rate: undefined,
  latency_us: 0,
  limit: undefined,
  ref: undefined,
});

function gemmJudge(chip: Chip): Judge {
  const groupOf = memo((d) => `dtype ${d}`);
  const peakOf = memo((d) => (TENSOR_DTYPES.has(d) ? peakFlopsPerUs(chip, d as GemmDtype) : undefined));
  return (x) => {
    const r = x as GemmRow;
    return gemmSample(emptyGemmSample(), groupOf(r.dtype), peakOf(r.dtype), r.m, r.n, r.k, r.latency_us);
  };
}

function decodeJudge(chip: Chip): Judge {
  const minBytes = NOT_CACHE_RESIDENT_L2_MULTIPLE * l2Bytes(chip.l2_mib);
  const groupOf = memo((d) => `kv_dtype ${d || '(weights)'}`);
  return (x) => {
    const r = x as AttentionDecodeRow;
    const bytes = decodeKvBytes(r);
    const frac = bytes > minBytes ? bytes / r.latency_us / chip.hbm_bytes_per_us : undefined;
    return {
      group: groupOf(r.kv_dtype),
      rate: frac,
      latency_us: r.latency_us,
      ref: chip.hbm_bytes_per_us,
      ideal_us: bytes / chip.hbm_bytes_per_us,
      limit: frac,
    };
  };
}

function prefillJudge(chip: Chip): Judge {
  const groupOf = memo((d) => `dtype ${d}`);
  return (x) => {
    const r = x as AttentionPrefillRow;
    const peak = peakFlopsPerUs(chip, r.dtype === 'fp8' ? 'fp8' : 'bf16');
    const flops =
      4 *
      r.batch *
      r.n_q *
      r.head_dim *
      prefillPairs(r.new_tokens, r.prefix_tokens, { window: r.window || Infinity, ratio: 0, cap: Infinity });
    const large = r.batch * r.new_tokens >= LARGE_PREFILL_TOKENS;
    const frac = peak ? flops / r.latency_us / peak : undefined;
    return {
      group: groupOf(r.dtype),
      rate: large ? frac : undefined,
      latency_us: r.latency_us,
      limit: frac,
      ref: frac !== undefined ? peak : undefined,
    };
  };
}

function sparseJudge(chip: Chip): Judge {
  const minBytes = NOT_CACHE_RESIDENT_L2_MULTIPLE * l2Bytes(chip.l2_mib);
  return (x) => {
    const r = x as SparseRow;
    if (r.op !== 'mhc_pre' && r.op !== 'mhc_post')
      return { group: `op ${r.op}`, rate: undefined, latency_us: r.latency_us };
    const bytes = r.query_tokens * mhcBytesPerToken(r.op === 'mhc_pre' ? 'pre' : 'post', r.hc_mult, r.hidden) * r.sites;
    const frac = bytes / r.latency_us / chip.hbm_bytes_per_us;
    return {
      group: `op ${r.op}`,
      rate: bytes / r.sites > minBytes ? frac : undefined,
      latency_us: r.latency_us,
      ref: chip.hbm_bytes_per_us,
      ideal_us: bytes / chip.hbm_bytes_per_us,
      ...(bytes / r.sites > minBytes ? { limit: frac } : {}),
    };
  };
}

function mlaJudge(chip: Chip): Judge {
  const minBytes = NOT_CACHE_RESIDENT_L2_MULTIPLE * l2Bytes(chip.l2_mib);
  return (x) => {
    const r = x as MlaRow;
    const group = `op ${r.op} kv_dtype ${r.kv_dtype}`;
    if (r.query_tokens > 1) return { group, rate: undefined, latency_us: r.latency_us };
    const bytes = r.batch * (r.past_tokens + 1) * MLA_LATENT_ELEMENTS * (r.kv_dtype === 'fp8' ? 1 : 2);
    const frac = bytes > minBytes ? bytes / r.latency_us / chip.hbm_bytes_per_us : undefined;
    return {
      group,
      rate: frac,
      latency_us: r.latency_us,
      ref: chip.hbm_bytes_per_us,
      ideal_us: bytes / chip.hbm_bytes_per_us,
      ...(frac !== undefined ? { limit: frac } : {}),
    };
  };
}

/** nccl-tests bus-bandwidth factor: all_reduce 2(n−1)/n, the others (n−1)/n. */
function busFactor(op: string, n: number): number {
  return n <= 1 ? 1 : op === 'all_reduce' ? (2 * (n - 1)) / n : (n - 1) / n;
}

function collectiveJudge(chip: Chip): Judge {
  return (x) => {
    const r = x as CollectiveRow;
    const frac = (r.message_bytes * busFactor(r.op, r.ranks)) / r.latency_us / chip.nvlink_bytes_per_us;
    const group = `${r.op} ${r.dtype} ${r.ranks} ranks ${r.backend}`;
    return {
      group,
      rate: r.message_bytes >= LARGE_MESSAGE_BYTES ? frac : undefined,
      latency_us: r.latency_us,
      limit: frac,
      ref: chip.nvlink_bytes_per_us,
    };
  };
}

function expertAlltoallJudge(chip: Chip): Judge {
  return (x) => {
    const r = x as ExpertA2aRow;
    const frac = r.message_bytes / r.latency_us / chip.nvlink_bytes_per_us;
    return {
      group: `${r.mode} ${r.phase} ${r.ranks} ranks`,
      rate: r.message_bytes >= LARGE_MESSAGE_BYTES ? frac : undefined,
      latency_us: r.latency_us,
      limit: frac,
      ref: chip.nvlink_bytes_per_us,
    };
  };
}

function moeJudge(chip: Chip): Judge {
  const groupOf = memo((d) => `dtype ${d}`);
  const peakOf = memo((d) => (TENSOR_DTYPES.has(d) ? peakFlopsPerUs(chip, d as GemmDtype) : undefined));
  return (x) => {
    const r = x as MoeRow;
    const peak = peakOf(r.dtype);
    const flops = (2 * r.tokens * r.topk * 3 * r.hidden * r.inter) / (r.tp * r.ep);
    const frac = peak ? flops / r.latency_us / peak : undefined;
    return {
      group: groupOf(r.dtype),
      rate: r.tokens >= LARGE_MOE_TOKENS ? frac : undefined,
      latency_us: r.latency_us,
      limit: frac,
      ref: frac !== undefined ? peak : undefined,
    };
  };
}

/**
 * Recurrent kernels by their least HBM traffic (README physical checks): a decode recurrence reads and writes
 * the fp32 state, 2·B·V·d_v·d_k·4 B; a causal conv reads and writes its channels in bf16, 4·tokens·channels B.
 * Judged only beyond 4× L2. Prefill recurrences (compute-bound scans, ≤ 7 % of HBM) and the eager, host-bound
 * KDA `causal_conv1d_fn_qkv3` rows (README quirks: physically impossible rates on l40s) get the floor check only.
 */
function recurrentJudge(chip: Chip): Judge {
  const min = NOT_CACHE_RESIDENT_L2_MULTIPLE * l2Bytes(chip.l2_mib);
  return (x) => {
    const r = x as RecurrentRow;
    const conv = r.kernel_source.includes('conv1d') && r.kernel_source !== 'causal_conv1d_fn_qkv3';
    const state = r.phase === 'generation' && !r.kernel_source.includes('conv1d');
    const bytes = conv
      ? 4 * r.tokens * r.conv_channels
      : state
        ? 2 * r.batch * r.v_heads * r.head_v_dim * r.head_k_dim * 4
        : 0;
    const frac = bytes / r.latency_us / chip.hbm_bytes_per_us;
    const judged = bytes > min;
    return {
      group: `${r.mixer} ${conv ? 'conv' : 'recurrence'}`,
      rate: judged ? frac : undefined,
      latency_us: r.latency_us,
      ...(judged ? { limit: frac, ref: chip.hbm_bytes_per_us } : {}),
    };
  };
}

const RATE_WHAT: Record<string, { judge: (c: Chip) => Judge; flops: boolean; of: (c: Chip) => string }> = {
  gemm: { judge: gemmJudge, flops: true, of: (c) => `${c.name}'s dense tensor-core peak` },
  attention_decode: { judge: decodeJudge, flops: false, of: (c) => `${c.name}'s HBM rate` },
  attention_prefill: { judge: prefillJudge, flops: true, of: (c) => `${c.name}'s dense tensor-core peak` },
  sparse: { judge: sparseJudge, flops: false, of: (c) => `${c.name}'s HBM rate` },
  mla: { judge: mlaJudge, flops: false, of: (c) => `${c.name}'s HBM rate` },
  expert_alltoall: { judge: expertAlltoallJudge, flops: false, of: (c) => `${c.name}'s NVLink rate per direction` },
  collective: {
    judge: collectiveJudge,
    flops: false,
    of: (c) => `${c.name}'s per-direction link rate (bus bandwidth)`,
  },
  moe: { judge: moeJudge, flops: true, of: (c) => `${c.name}'s dense tensor-core peak` },
  recurrent: { judge: recurrentJudge, flops: false, of: (c) => `${c.name}'s HBM rate` },
};

/** `9.5 % (94 TFLOP/s of 989 TFLOP/s)`: a fraction of a datasheet rate with both absolute rates. */
function rateText(frac: number, ref: number | undefined, flops: boolean): string {
  if (ref === undefined) return pct(frac);
  const f = (x: number) => (flops ? `${(x / 1e6).toPrecision(3)} TFLOP/s` : `${(x / 1e3).toPrecision(3)} GB/s`);
  return `${f(frac * ref)}, ${pct(frac)} of ${f(ref)}`;
}

const pct = (x: number) => `${x < 0.01 ? (x * 100).toPrecision(2) : (x * 100).toFixed(1)} %`;

/** Options of `checkUnits`. */
export interface UnitsCheckOptions {
  /** Column the latency came from in the input (error messages); default 'latency_us'. */
  latencyColumn?: string;
  /** Input row number of rows[i] (default i + 1). */
  rowOf?: (i: number) => number;
}

/**
 * Check one table's rows against the chip's datasheet bands (module comment). Families without a rate
 * (host, step) get the floor check only.
 * @param rows canonical rows of `family` (µs, bytes), in input order
 * @throws InputError naming file, row and column, the implied rate as a fraction of the datasheet,
 *   the band and its source, and the likely factor; its message contains "check units".
 */
export function checkUnits(
  family: Family,
  rows: RowList<unknown>,
  chip: Chip,
  file: string,
  opts: UnitsCheckOptions = {},
): void {
  if (family === 'step' || rows.length === 0) return;
  const column = opts.latencyColumn ?? 'latency_us';
  const rowOf = opts.rowOf ?? ((i: number) => i + 1);
  const what = RATE_WHAT[family];
  const band: RateBand | undefined =
    family === 'collective' ? collectiveBand(chip) : (UNITS_BANDS as Record<string, RateBand>)[family];
  const judge: Judge =
    what?.judge(chip) ??
    ((x: unknown) => ({
      group: groupOfOther(x),
      rate: undefined,
      latency_us: (x as { latency_us: number }).latency_us,
    }));
  const groups = new Map<string, Group>();
  const sizes = !(what?.flops ?? false);
  // Typed columns are read in place (gemm); other RowColumns through one reused row view (no object built per row).
  const rowAt = rows instanceof RowColumns ? rows.view() : (i: number) => rows.at(i);
  const sample = (family === 'gemm' && gemmColumns(rows, chip)) || ((i: number) => judge(rowAt(i)));
  let last: { name: string; g: Group } | undefined;
  for (let i = 0; i < rows.length; i++) {
    const s = sample(i);
    if (!s) continue;
    let g = last?.name === s.group ? last.g : groups.get(s.group);
    if (!g) {
      g = newGroup();
      groups.set(s.group, g);
    }
    if (last?.g !== g) last = { name: s.group, g };
    addSample(g, s, i, what !== undefined);
  }
  for (const [group, g] of groups) {
    const at = (i: number) => ({ file, row: rowOf(i), column });
    const tail = (ratio: number) => `likely ${likelyFactor(ratio, sizes)}; check units (ms vs µs vs s?)`;
    if (band && g.top > band.hi)
      throw new InputError(
        at(g.topI),
        `${family} ${group}: the fastest row implies ${rateText(g.top, g.ref, what!.flops)} (${what!.of(chip)}), above the physical bound ${pct(band.hi)} (${band.source}); ${tail(g.top / band.typical)}`,
      );
    if (band && g.judged > 0 && g.best < band.lo)
      throw new InputError(
        at(g.bestI),
        `${family} ${group}: the fastest of ${g.judged} rows that can be judged implies ${rateText(g.best, g.ref, what!.flops)} (${what!.of(chip)}), ` +
          `below the plausible band [${pct(band.lo)}, ${pct(band.hi)}] (${band.source}); ${tail(g.best / band.typical)}`,
      );
    if (g.slow > SLOW_ROW_FACTOR) throw new InputError(at(g.slowI), slowRowProblem(family, group, g));
    const floorBad = !(g.floor >= FLOOR_MIN_US)
      ? { v: g.floor, i: g.floorI }
      : g.tinyI >= 0 && g.tiny > FLOOR_MAX_US
        ? { v: g.tiny, i: g.tinyI }
        : undefined;
    if (floorBad)
      throw new InputError(
        at(floorBad.i),
        `${family} ${group}: the fastest ${floorBad.v === g.floor ? 'call' : `floor-bound call (under ${TINY_WORK_US} µs of work at the datasheet rate)`} takes ${floorBad.v} µs, ` +
          `outside the plausible floor band [${FLOOR_MIN_US} µs, ${FLOOR_MAX_US / 1000} ms] (a kernel launch costs a few µs); ${tail(TYPICAL_FLOOR_US / floorBad.v)}`,
      );
  }
}

/** One row's sample into its group's running state (checkUnits; `rated`: the family has a rate). */
function addSample(g: Group, s: Sample & { limit?: number }, i: number, rated: boolean): void {
  if (s.latency_us < g.floor) [g.floor, g.floorI] = [s.latency_us, i];
  // A call whose work takes under TINY_WORK_US at the datasheet rate is floor-bound: it must not take over FLOOR_MAX_US.
  const ideal = s.ideal_us ?? (s.limit !== undefined ? s.limit * s.latency_us : rated ? undefined : 0);
  if (ideal !== undefined && ideal < TINY_WORK_US && s.latency_us < g.tiny) [g.tiny, g.tinyI] = [s.latency_us, i];
  const work = s.ideal_us ?? (s.limit !== undefined ? s.limit * s.latency_us : undefined);
  if (work !== undefined && s.latency_us / (work + FLOOR_MAX_US) > g.slow)
    [g.slow, g.slowI, g.slowWork] = [s.latency_us / (work + FLOOR_MAX_US), i, work];
  if (s.ref !== undefined) g.ref = s.ref;
  if (s.limit !== undefined && s.limit > g.top) [g.top, g.topI] = [s.limit, i];
  if (s.rate !== undefined) {
    g.judged++;
    if (s.rate > g.best) [g.best, g.bestI] = [s.rate, i];
  }
}

/**
 * gemmJudge read from a RowColumns' typed columns (m, n, k int32, latency_us float64, dtype text ids):
 * the same sample values, into one reused object (valid until the next call), with the group name and
 * peak looked up once per dtype id. Undefined when the columns are not stored that way.
 */
function gemmColumns(rows: RowList<unknown>, chip: Chip): ((i: number) => GemmSample) | undefined {
  if (!(rows instanceof RowColumns)) return undefined;
  const cols = rows as RowColumns<object>;
  const kinds = ['dtype', 'm', 'n', 'k', 'latency_us'].map((c) => cols.kindOf(c)).join(' ');
  if (kinds !== 'str int int int num') return undefined;
  const [dt, m, n, k] = ['dtype', 'm', 'n', 'k'].map((c) => cols.keyArray(c)!) as [
    Uint8Array,
    Int32Array,
    Int32Array,
    Int32Array,
  ];
  const lat = cols.keyArray('latency_us') as Float64Array;
  const dict = cols.dictionary('dtype')!;
  const names = dict.map((d) => `dtype ${d}`);
  const peaks = dict.map((d) => (TENSOR_DTYPES.has(d) ? peakFlopsPerUs(chip, d as GemmDtype) : undefined));
  const s = emptyGemmSample();
  return (i) => gemmSample(s, names[dt[i]!]!, peaks[dt[i]!], m[i]!, n[i]!, k[i]!, lat[i]!);
}

/** Per-group running state of `checkUnits`: best judged rate, highest rate of any row, fastest call. */
interface Group {
  best: number;
  bestI: number;
  judged: number;
  top: number;
  topI: number;
  floor: number;
  floorI: number;
  /** Fastest floor-bound call (work under TINY_WORK_US at the datasheet rate). */
  tiny: number;
  tinyI: number;
  /** Largest latency / (work at the datasheet rate + FLOOR_MAX_US) of one row, its index and work (µs). */
  slow: number;
  slowI: number;
  slowWork: number;
  ref?: number;
}

/** A group before its first row: nothing judged, no fastest or slowest row yet. */
function newGroup(): Group {
  return {
    best: -1,
    bestI: -1,
    judged: 0,
    top: -1,
    topI: -1,
    floor: Infinity,
    floorI: -1,
    tiny: Infinity,
    tinyI: -1,
    slow: 0,
    slowI: -1,
    slowWork: 0,
  };
}

/** The problem text of a row slower than SLOW_ROW_FACTOR allows (checkUnits). */
function slowRowProblem(family: Family, group: string, g: Group): string {
  const latency_us = g.slow * (g.slowWork + FLOOR_MAX_US);
  return (
    `${family} ${group}: this row takes ${Number(latency_us.toPrecision(4))} µs, ${g.slow.toFixed(0)}× its work at the datasheet rate ` +
    `(${Number(g.slowWork.toPrecision(3))} µs) plus the largest plausible floor (${FLOOR_MAX_US / 1000} ms); above ${SLOW_ROW_FACTOR}× no kernel ` +
    'runs that slowly, so this row alone is in another unit; check units (ms vs µs vs s?)'
  );
}

/** Group of a row of a family without a rate band (host: per `what`). */
function groupOfOther(x: unknown): string {
  const r = x as { what?: string };
  return r.what !== undefined ? `what ${r.what}` : 'all rows';
}
