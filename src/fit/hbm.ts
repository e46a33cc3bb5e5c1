/**
 * HBM derate: achieved / datasheet bandwidth on memory-bound reads (reference §4.4: the pricer
 * charges bytes / (datasheet · hbm_derate)).
 *
 * Rows (docs/fitting.md): bf16 GEMMs with m ≤ 16 whose weight matrix (n·k·2 bytes) is at least
 * 2 × L2 (weight streaming, not cache-resident), achieved = weight bytes / latency; and full-
 * attention decode rows whose KV bytes are at least 2 × L2, achieved = KV bytes / latency.
 * Law: t = t0 + bytes / (datasheet · derate), minimising mean |ln(pred/meas)| on the GEMM weight
 * reads (the bytes hbm_derate prices); holdout: the decode-attention KV reads (the other source),
 * with their own per-call cost refitted and the derate fixed. The raw ratio bytes/latency/datasheet
 * is reported too; it includes the per-call cost and so understates the streaming rate.
 */
import { hbmReadUs } from '../core/laws/floor-rate.ts';
import { patternSearch } from '../core/numeric/minimize.ts';
import { median } from '../core/numeric/stats.ts';
import type { FitError } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { AttentionDecodeRow, GemmRow } from '../measurements/schema.ts';
import {
  bootstrapFloorRate,
  cacheResidentBytes,
  decodeKvBytes,
  fitFloorRate,
  logL1,
  type WorkPoint,
} from './attention.ts';
import { fitError, fmt, measuredEntry, reduceDecodeRepeats } from './common.ts';
import { groupedWarmFit } from './floor-rate-grouped.ts';
import { reduceGemmRepeats } from './gemm.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** Largest m counted as a pure weight read. */
export const HBM_MAX_M = 16;

/** One qualifying memory-bound read: bytes streamed from HBM and its latency (µs). */
export interface Read {
  source: 'gemm' | 'attention_decode';
  bytes: number;
  latency_us: number;
}

/** Qualifying memory-bound reads of a chip. */
export function memoryBoundReads(
  gemm: readonly GemmRow[],
  decode: readonly AttentionDecodeRow[],
  l2_mib: number | undefined,
): Read[] {
  const min = 2 * cacheResidentBytes(l2_mib);
  const out: Read[] = [];
  // Index loops: a for-of over 60k rows made an iterator result per row until the loop was optimised.
  const gemmRows = reduceGemmRepeats(gemm);
  for (let i = 0; i < gemmRows.length; i++) {
    const r = gemmRows[i]!;
    if (r.dtype !== 'bf16' || r.m > HBM_MAX_M) continue;
    const bytes = r.n * r.k * 2;
    if (bytes >= min) out.push({ source: 'gemm', bytes, latency_us: r.latency_us });
  }
  // Decode repeats (same kernel and configuration) are reduced by their median too, like the GEMM
  // rows (docs/fitting.md "Repeats"); the shipped decode tables have none, so this changes nothing there.
  const decodeRows = reduceDecodeRepeats(decode);
  for (let i = 0; i < decodeRows.length; i++) {
    const r = decodeRows[i]!;
    if (r.window !== 0) continue;
    const bytes = decodeKvBytes(r);
    if (bytes >= min) out.push({ source: 'attention_decode', bytes, latency_us: r.latency_us });
  }
  return out;
}

/** What the HBM fit found, for the report. Bandwidths in bytes per µs, times in µs. */
export interface HbmResult {
  derate: number;
  ci95: [number, number];
  /** The system descriptor's prior (AIC mem_bw_empirical_scaling_factor), 0.8 when absent. */
  prior: number;
  /** Datasheet HBM bandwidth. */
  hbm_bytes_per_us: number;
  /** Which reads the stored derate comes from (GEMM weight reads unless fewer than 3). */
  primary: 'gemm' | 'attention_decode';
  /** Per-call cost of the fit rows, and of the holdout rows refitted with the derate fixed (NaN without a holdout). */
  t0_us: number;
  holdout_t0_us: number;
  train: FitError;
  holdout?: FitError & { split: string };
  /** Per source: rows, derate fitted on that source alone, raw median bytes/latency/datasheet (NaN when too few). */
  by_source: Record<'gemm' | 'attention_decode', { n: number; derate_alone: number; raw_median: number }>;
  /** The reads themselves (figure data). */
  gemm_reads: Read[];
  decode_reads: Read[];
}

/** HBM family result (`result` absent with fewer than 3 qualifying reads). */
export type HbmFit = FamilyFit & { result?: HbmResult };

const asWorkPoints = (rs: readonly Read[]): WorkPoint[] =>
  rs.map((r) => ({ work: r.bytes, latency_us: r.latency_us, group: r.source, kernel_source: '' }));
const predictReads = (rs: readonly Read[], derate: number, t0: number, bw: number) =>
  rs.map((r) => t0 + hbmReadUs(r.bytes, bw, derate));

/** Derate and per-call cost of `t0 + bytes/(datasheet·derate)` on the primary reads, with a seeded bootstrap. */
function fitDerate(primary: readonly Read[], bw: number, bootstrap: FitContext['bootstrap']) {
  const pf = fitFloorRate(asWorkPoints(primary));
  // The reads share few distinct byte counts (h200: 3,168 reads, 39 sizes): each resample's search
  // runs on per-size sums (floor-rate-grouped.ts).
  const boot = bootstrapFloorRate(asWorkPoints(primary), pf, bootstrap, groupedWarmFit());
  return {
    pf,
    derate: pf.rate / bw,
    ci95: [boot.ci_rate[0] / bw, boot.ci_rate[1] / bw] as [number, number],
    notes: boot.notes,
  };
}

/** Holdout: only the derate crosses; the other source's per-call cost is refitted with the derate fixed. */
function derateHoldout(
  other: readonly Read[],
  rate: number,
  derate: number,
  bw: number,
): { t0_us: number; error?: FitError & { split: string } } {
  if (!other.length) return { t0_us: NaN };
  const points = asWorkPoints(other);
  const t0 = patternSearch((x) => logL1(points, Math.exp(x[0]!), rate), [Math.log(10)], [0.5], {
    minStep: 1e-4,
    maxEvals: 200,
  });
  const t0_us = Math.exp(t0.x[0]!);
  const split = 'derate from GEMM weight reads, evaluated on decode-attention KV reads (their per-call cost refitted)';
  return {
    t0_us,
    error: {
      ...fitError(
        predictReads(other, derate, t0_us, bw),
        other.map((r) => r.latency_us),
      ),
      split,
    },
  };
}

/** HBM family fitter: `hbm_derate` (dimensionless) in cost-model-primitives. */
export function fitHbm(gemm: readonly GemmRow[], decode: readonly AttentionDecodeRow[], ctx: FitContext): HbmFit {
  const fit: HbmFit = emptyFamilyFit('hbm');
  const bw = ctx.chip.hbm_bytes_per_us;
  const reads = memoryBoundReads(gemm, decode, ctx.chip.l2_mib);
  if (reads.length < 3) {
    fit.warnings.push(`hbm: only ${reads.length} memory-bound reads beyond 2×L2; hbm_derate not measured`);
    return fit;
  }
  const ratio = (r: Read) => r.bytes / r.latency_us / bw;
  const g = reads.filter((r) => r.source === 'gemm');
  const a = reads.filter((r) => r.source === 'attention_decode');
  // Stored: the streaming slope of GEMM weight reads (what hbm_derate prices); decode KV reads are
  // the holdout. Falls back to the KV reads when a chip has fewer than 3 qualifying GEMM reads.
  const primary = g.length >= 3 ? g : a;
  const d = fitDerate(primary, bw, ctx.bootstrap);
  // The primary source's fit alone is d.pf (the same call on the same points): not fitted twice.
  const alone = (rs: readonly Read[]) =>
    rs === primary ? d.derate : rs.length >= 3 ? fitFloorRate(asWorkPoints(rs)).rate / bw : NaN;
  const hold = derateHoldout(primary === g ? a : [], d.pf.rate, d.derate, bw);
  const result: HbmResult = {
    derate: d.derate,
    ci95: d.ci95,
    prior: ctx.chip.priors?.hbm_derate ?? 0.8,
    hbm_bytes_per_us: bw,
    primary: primary === g ? 'gemm' : 'attention_decode',
    t0_us: d.pf.floor_us,
    holdout_t0_us: hold.t0_us,
    train: fitError(
      predictReads(primary, d.derate, d.pf.floor_us, bw),
      primary.map((r) => r.latency_us),
    ),
    ...(hold.error ? { holdout: hold.error } : {}),
    by_source: {
      gemm: { n: g.length, derate_alone: alone(g), raw_median: g.length ? median(g.map(ratio)) : NaN },
      attention_decode: { n: a.length, derate_alone: alone(a), raw_median: a.length ? median(a.map(ratio)) : NaN },
    },
    gemm_reads: g,
    decode_reads: a,
  };
  fit.result = result;
  fit.coefficients.push({ set: SET_NAMES.primitives, name: 'hbm_derate', entry: derateEntry(result, d.notes, ctx) });
  return fit;
}

function derateEntry(r: HbmResult, bootNotes: readonly string[], ctx: FitContext) {
  const fromGemm = r.primary === 'gemm';
  const gs = r.by_source.gemm;
  const as = r.by_source.attention_decode;
  const notes = [
    `law t = t0 + bytes/(datasheet·derate) on ${fromGemm ? 'GEMM weight' : 'decode KV'} reads, log objective; t0 ${fmt(r.t0_us)} us`,
    `GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, ≥ 2×L2): n ${gs.n}, derate alone ${fmt(gs.derate_alone)}, raw median bytes/latency/datasheet ${fmt(gs.raw_median)}`,
    `decode-attention KV reads (full, ≥ 2×L2): n ${as.n}, derate alone ${fmt(as.derate_alone)}, raw median ${fmt(as.raw_median)}`,
    `prior (AIC mem_bw_empirical_scaling_factor, BLIS vendor_spec): ${r.prior}; measured/prior ${fmt(r.derate / r.prior, 3)}`,
    ...bootNotes.filter((n) => n.startsWith('rate ')).map((n) => n.replace(/^rate /, 'derate (as rate) ')),
  ];
  return measuredEntry(
    {
      value: r.derate,
      units: 'dimensionless',
      family: 'hbm',
      ctx: { ...ctx, inputs: ctx.inputs.filter((i) => /^(gemm|attention_decode)\./.test(i.file.split('/').pop()!)) },
      used: {
        filter: fromGemm
          ? `bf16 GEMM m ≤ ${HBM_MAX_M} with weights ≥ 2×L2 (holdout: full decode attention with KV ≥ 2×L2)`
          : 'full decode attention with KV ≥ 2×L2',
        rows_used: fromGemm ? gs.n : as.n,
      },
      ci95: r.ci95,
      ci_method: 'bootstrap',
      train: r.train,
      ...(r.holdout ? { holdout: r.holdout } : {}),
      notes,
    },
    '',
  );
}
