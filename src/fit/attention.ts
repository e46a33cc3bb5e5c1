/**
 * Attention fitters (reference §4.5 laws, §6.3 methods).
 *
 * Decode (per layer call):   t = floor_us + kv_bytes / rate_bytes_per_us
 *   kv_bytes = batch · context · 2 · n_kv · head_dim · bytes(kv_dtype)   (full attention)
 *   sliding window: context replaced by min(context, window), fitted separately as `_swa`.
 * Prefill (per layer call), two candidates, the lower head-geometry holdout stored:
 *   tokens_ramp:   t = floor_us + causal_flops / (bf16_peak · eps_bf16(batch · S) · work_scale)
 *   sequence_ramp: t = floor_us + causal_flops / (bf16_peak · eps_max_bf16 · work_scale · S/(S + s_half))
 *   causal_flops = batch · 4 · (S·C + S²/2) · n_q · head_dim, S = new tokens per sequence.
 *
 * Objective: mean |ln(pred/meas)| (geometric), minimised by compass search in log parameters.
 * Holdouts: head geometry (n_q, n_kv, head_dim) for full attention; one window width (leave-one-
 * out, median over folds) for SWA. See docs/fitting.md for the cache-resident threshold.
 */
import { l2Bytes, peakFlopsPerUs } from '../core/catalog/chip.ts';
import { floorPlusWork } from '../core/laws/floor-rate.ts';
import { gemmEfficiency } from '../core/laws/gemm.ts';
import type { DecodeLaw } from '../core/laws/attention.ts';
import { gssMinimize2, patternSearch } from '../core/numeric/minimize.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { geometricError, groupBy, median } from '../core/numeric/stats.ts';
import type { FitError } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import { decodeKvBytes } from '../measurements/kv.ts';
import type { AttentionDecodeRow, AttentionPrefillRow } from '../measurements/schema.ts';
import {
  fitParallelLaw,
  floorLogL1,
  gatherClass,
  gatherRows,
  irlsFit,
  type PackedRows,
  packRows,
  pairedResampler,
  pairRows,
  predictLaw,
  readTimes,
  scratchRows,
  searchLogL1,
} from './attention-decode-law.ts';
import {
  ciFromEstimates,
  fitError,
  fmt,
  holdoutValues,
  measuredEntry,
  PREFILL_CONFIG_FIELDS,
  reduceDecodeRepeats,
  reduceRepeatsBy,
} from './common.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

/** A row reduced to what a two-parameter "floor + work / rate" law needs. */
export interface WorkPoint {
  /** Work: bytes (decode) or FLOPs already divided by the ramp (prefill). */
  work: number;
  /** Decode work items (batch × KV heads, the parallelism term); absent = 0 (no item term). */
  items?: number;
  latency_us: number;
  /** Grouping key for holdout (head geometry or window). */
  group: string;
  kernel_source: string;
}

export { decodeKvBytes } from '../measurements/kv.ts';

/** Causal attention FLOPs of a prefill call: batch · 4 · (S·C + S²/2) · n_q · head_dim. */
export function prefillCausalFlops(
  r: Pick<AttentionPrefillRow, 'batch' | 'new_tokens' | 'prefix_tokens' | 'n_q' | 'head_dim'>,
): number {
  const S = r.new_tokens;
  const C = r.prefix_tokens;
  return r.batch * 4 * (S * C + (S * S) / 2) * r.n_q * r.head_dim;
}

/** mean |ln(floorPlusWork(floor, work, rate)/meas)| over points (the law of core/laws/floor-rate.ts). */
export function logL1(points: readonly WorkPoint[], floor_us: number, rate: number): number {
  let s = 0;
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    s += Math.abs(Math.log(floorPlusWork(floor_us, p.work, rate) / p.latency_us));
  }
  return s / points.length;
}

/** Search settings of the full-data floor/rate fit (log-parameter units). */
export const FIT_SEARCH = { minStep: 1e-6, maxEvals: 4000 } as const;
/**
 * Search settings of one bootstrap resample: one start, warm at the full-data optimum, initial step
 * 0.01 expanding up to 0.2 (log units) along a valley, down to 1e-5.
 */
export const BOOTSTRAP_SEARCH = { step0: 0.01, maxStep: 0.2, minStep: 1e-5, maxEvals: 1500 } as const;

/**
 * fitFloorRate's data start: [the 5th percentile of latency (µs) among the smallest-work tenth of
 * the points, floored at 1e-3; the median work/latency of the largest-work tenth, floored at 1e-9].
 * The tenths are those of a stable sort by work (rows of equal work in their given order), found
 * without sorting the points: the works sorted as numbers give the two cut values; every row
 * strictly beyond a cut is in its tenth, and of the rows at the cut, the first ones (smallest tenth)
 * or the last ones (largest tenth) in the given order fill it.
 */
function floorRateDataStart(points: readonly WorkPoint[]): [number, number] {
  const n = points.length;
  const tenth = Math.max(1, Math.floor(n / 10));
  const works = new Float64Array(n);
  for (let i = 0; i < n; i++) works[i] = points[i]!.work;
  const sorted = works.slice().sort();
  const lowCut = sorted[tenth - 1]!;
  const highCut = sorted[n - tenth]!;
  let atLow = tenth;
  let atHigh = tenth;
  let equalHigh = 0;
  for (let i = 0; i < n; i++) {
    if (works[i]! < lowCut) atLow--;
    if (works[i]! > highCut) atHigh--;
    else if (works[i] === highCut) equalHigh++;
  }
  // atLow rows at lowCut fill the smallest tenth (the first ones); the last atHigh at highCut the largest.
  let skipHigh = equalHigh - atHigh;
  const small: number[] = [];
  const large: number[] = [];
  for (let i = 0; i < n; i++) {
    const w = works[i]!;
    if (w < lowCut || (w === lowCut && atLow-- > 0)) small.push(points[i]!.latency_us);
    if (w > highCut || (w === highCut && skipHigh-- <= 0)) large.push(w / points[i]!.latency_us);
  }
  small.sort((a, b) => a - b);
  return [Math.max(small[Math.floor(small.length * 0.05)]!, 1e-3), Math.max(median(large), 1e-9)];
}

/**
 * Fit floor (µs) and rate (work per µs) minimising mean |ln(pred/meas)| by generating-set search
 * (`gssMinimize2`, gssMinimize's coordinate and diagonal directions) in (ln floor, ln rate) down to a 1e-6 step.
 * Two starts: `init` when given, and the data start (floor = the 5th percentile of latency among
 * the smallest-work decile, rate = median work/latency of the largest-work decile); the lower
 * objective wins (ties → the first). The objective is not convex: it has a boundary minimum with the
 * floor driven to 0 (h100 SWA rate rows: objective 0.4558 at floor → 0, rate 1.34e6 B/µs, from the
 * joint fit's start; 0.4060 at floor 80.9 µs, rate 2.87e6 B/µs from the data start).
 */
export function fitFloorRate(
  points: readonly WorkPoint[],
  init?: [number, number],
): { floor_us: number; rate: number; objective: number } {
  if (points.length < 2) return { floor_us: NaN, rate: NaN, objective: NaN };
  const dataStart = floorRateDataStart(points);
  let best: { floor_us: number; rate: number; objective: number } | undefined;
  const packed = packRows(points);
  for (const start of init ? [init, dataStart] : [dataStart]) {
    const r = gssMinimize2(
      (lnFloor, lnRate) => searchLogL1(packed, Math.exp(lnFloor), Math.exp(lnRate)),
      [Math.log(start[0]), Math.log(start[1])],
      0.5,
      FIT_SEARCH,
    );
    if (!best || r.value < best.objective)
      best = { floor_us: Math.exp(r.x[0]!), rate: Math.exp(r.x[1]!), objective: r.value };
  }
  return best!;
}

/** The floor + rate law as a DecodeLaw (no work-item term). */
const floorRate = (floor_us: number, rate: number): DecodeLaw => ({ floor_us, rate, item_us: 0, p_half: 0 });

/** Bootstrap sample size cap (rows per resample); see docs/fitting.md. */
export const BOOTSTRAP_ROWS = 3000;

/**
 * Fits (floor, rate) to one resample: the rows `idx` of the packed rows `src` (idx a buffer reused
 * across resamples: read it, do not keep it), warm at `at`.
 */
export type ResampleFitter = (
  src: PackedRows,
  idx: Uint32Array,
  at: [number, number],
) => { floor_us: number; rate: number };

/** The plain resample fitter: the resample's rows gathered into one reused buffer, then warmFit. */
function gatheredWarmFit(size: number): ResampleFitter {
  const scratch = scratchRows(size);
  return (src, idx, at) => warmFit(gatherRows(src, idx, scratch), at);
}

/**
 * Seeded bootstrap of (floor, rate). Resamples min(n, BOOTSTRAP_ROWS) rows with replacement from all
 * n rows (an m-out-of-n bootstrap when n is larger: its CI is wider than the n-row one, so it errs
 * conservative), warm-started at the full-data optimum (warmFit, or `fitter`). The rows are packed
 * once and each resample gathered into one reused buffer (the values packRows(resample) would give).
 */
export function bootstrapFloorRate(
  points: readonly WorkPoint[],
  at: { floor_us: number; rate: number },
  opts: { resamples: number; seed: number },
  fitter?: ResampleFitter,
): { ci_floor: [number, number]; ci_rate: [number, number]; notes: string[] } {
  const n = points.length;
  const size = Math.min(n, BOOTSTRAP_ROWS);
  const packed = packRows(points);
  const fitResample = fitter ?? gatheredWarmFit(size);
  const fits = resampleEstimates(
    n,
    opts.resamples,
    opts.seed,
    (idx) => fitResample(packed, idx, [at.floor_us, at.rate]),
    size,
  );
  const fs = fits.map((f) => f.floor_us);
  const rs = fits.map((f) => f.rate);
  const notes: string[] = [];
  return {
    ci_floor: widen(ciFromEstimates(fs), at.floor_us, 'floor', notes),
    ci_rate: widen(ciFromEstimates(rs), at.rate, 'rate', notes),
    notes,
  };
}

/** A bootstrap bound this close to the value (log scale) on the wrong side is search tolerance. */
export const CI_EXTEND_TOL_LOG = 1e-4;

/**
 * Each resample's search stops at a finite step (1e-5 in log parameters), so a resample's optimum
 * can sit a hair from the full-data one; when the whole bootstrap tail lies on one side within
 * `CI_EXTEND_TOL_LOG`, the bound is extended to the value and a note says so. A CI that misses its
 * value by more is left as it is, and the registry gate refuses it.
 */
function widen(ci: [number, number], v: number, what: string, notes: string[]): [number, number] {
  let [lo, hi] = ci;
  if (lo > v && Math.log(lo / v) <= CI_EXTEND_TOL_LOG) {
    notes.push(
      `${what} ci95 lower bound ${lo} extended to the value (${Math.log(lo / v).toExponential(1)} in log, within the search tolerance)`,
    );
    lo = v;
  }
  if (hi < v && Math.log(v / hi) <= CI_EXTEND_TOL_LOG) {
    notes.push(
      `${what} ci95 upper bound ${hi} extended to the value (${Math.log(v / hi).toExponential(1)} in log, within the search tolerance)`,
    );
    hi = v;
  }
  return [lo, hi];
}

function errorsPerKernel(
  points: readonly WorkPoint[],
  law: DecodeLaw,
): Array<{ kernel: string; err: FitError; before?: number }> {
  const out: Array<{ kernel: string; err: FitError }> = [];
  const g = groupBy(points, (p) => p.kernel_source || '(unknown)');
  for (const k of [...g.keys()].sort()) {
    const ps = g.get(k)!;
    out.push({
      kernel: k,
      err: fitError(
        predictLaw(ps, law),
        ps.map((p) => p.latency_us),
      ),
    });
  }
  return out;
}

/** Head-geometry key. */
function geometry(r: { n_q: number; n_kv: number; head_dim: number }): string {
  return `${r.n_q}/${r.n_kv}/${r.head_dim}`;
}

/**
 * geometry, built once per distinct geometry of a fit's rows (h200 decode: 33k rows, a few dozen
 * geometries): the same strings. Counts that are not integers in [0, 65536) are keyed as built.
 */
function geometryMemo(): (r: { n_q: number; n_kv: number; head_dim: number }) => string {
  const seen = new Map<number, string>();
  const small = (v: number) => Number.isInteger(v) && v >= 0 && v < 65536;
  return (r) => {
    if (!(small(r.n_q) && small(r.n_kv) && small(r.head_dim))) return geometry(r);
    const key = (r.n_q * 65536 + r.n_kv) * 65536 + r.head_dim;
    let g = seen.get(key);
    if (g === undefined) {
      g = geometry(r);
      seen.set(key, g);
    }
    return g;
  };
}

/** Fits a floor/rate law to points (the joint fit, or the decode two-stage fit). */
type PointFitter = (points: readonly WorkPoint[], init: [number, number]) => { floor_us: number; rate: number };
/** Fits a decode law (any of the candidates) to points. */
type LawFitter = (points: readonly WorkPoint[]) => DecodeLaw;
const fromPointFitter =
  (fitter: PointFitter, init: [number, number]): LawFitter =>
  (ps) => {
    const f = fitter(ps, init);
    return floorRate(f.floor_us, f.rate);
  };

/** A holdout split of points: the training rows, the held-out rows and their latencies (µs). */
interface HoldoutSplit {
  tr: WorkPoint[];
  ho: WorkPoint[];
  meas: number[];
}

/** Points split by whole group (groups in `held` held out, both sides in point order); undefined when a side is empty. */
function splitGroups(points: readonly WorkPoint[], held: ReadonlySet<string>): HoldoutSplit | undefined {
  const tr: WorkPoint[] = [];
  const ho: WorkPoint[] = [];
  for (const p of points) (held.has(p.group) ? ho : tr).push(p);
  if (!tr.length || !ho.length) return undefined;
  return { tr, ho, meas: ho.map((p) => p.latency_us) };
}

/** Holdout error of a split: fit on its training rows, evaluate on the held-out ones (undefined without a split). */
function splitError(split: HoldoutSplit | undefined, fitter: LawFitter): FitError | undefined {
  return split ? fitError(predictLaw(split.ho, fitter(split.tr)), split.meas) : undefined;
}

/**
 * Decode two-stage fit (docs/fitting.md): the rate is fitted (jointly with a nuisance floor) on
 * rows whose KV working set is at least twice the L2 size (it cannot stay L2-resident), so it is a
 * DRAM rate; the floor is then fitted
 * with that rate fixed on rows whose working set is below L2/16, where the read is a small part of
 * the call whether or not it hits in cache. Falls back to the joint fit on all rows when either
 * subset is empty. `warm` (bootstrap resamples): one warm-started search from the full-data
 * rate-stage optimum (its nuisance floor `rate_floor_us` and rate) with the bootstrap settings.
 */
export function fitDecodeTwoStage(
  points: readonly WorkPoint[],
  l2_bytes: number,
  init?: [number, number],
): { floor_us: number; rate: number; two_stage: boolean; rate_floor_us: number } {
  const big = points.filter((p) => p.work >= 2 * l2_bytes);
  const tiny = points.filter((p) => p.work < l2_bytes / 16);
  if (big.length < 3 || tiny.length < 1) {
    const f = fitFloorRate(points, init);
    return { floor_us: f.floor_us, rate: f.rate, two_stage: false, rate_floor_us: f.floor_us };
  }
  const r = fitFloorRate(big, init);
  const tinyPacked = packRows(tiny);
  const floor_us = floorStage(tinyPacked, r.rate, init?.[0] ?? r.floor_us, false, new Float64Array(2 * tiny.length));
  return { floor_us, rate: r.rate, two_stage: true, rate_floor_us: r.floor_us };
}

/**
 * The staged fit's floor stage: the floor (µs) minimising mean |ln(pred/meas)| over `tiny` with the
 * rate held, by a 1-D pattern search in ln floor from `from_us` (step 0.5 down to 1e-6; warm, a
 * resample: 0.05 down to 1e-5). `buf` (room for two per tiny row) holds work / rate beside 1/latency (readTimes), computed once.
 */
function floorStage(tiny: PackedRows, rate: number, from_us: number, warm: boolean, buf: Float64Array): number {
  const read = readTimes(tiny, rate, buf);
  const fl = patternSearch((x) => floorLogL1(read, Math.exp(x[0]!)), [Math.log(from_us)], [warm ? 0.05 : 0.5], {
    minStep: warm ? 1e-5 : 1e-6,
    maxEvals: 400,
  });
  return Math.exp(fl.x[0]!);
}

/**
 * The staged fit of one bootstrap resample (fitDecodeTwoStage's split and stages on packed rows, in
 * reused buffers for up to `size` rows): the resample's rows are gathered straight into the rate
 * stage's rows (KV bytes ≥ 2·L2) and the floor stage's (< L2/16), in resample order (the rows a full
 * gather followed by selectRows would give); one warm-started rate-stage search from the full-data
 * rate-stage optimum `warm` (its nuisance floor and rate) with the bootstrap settings, then the floor
 * stage from the resample's start floor `at[0]`. With too few rows for a stage, every drawn row is
 * fitted jointly (warmFit from `warm`).
 */
function stagedResampleFitter(
  l2_bytes: number,
  warm: { rate_floor_us: number; rate: number },
  size: number,
): ResampleFitter {
  const [bigBuf, tinyBuf, allBuf, readBuf] = [
    scratchRows(size),
    scratchRows(size),
    scratchRows(size),
    new Float64Array(2 * size),
  ];
  let cls: Uint8Array | undefined;
  let clsOf: PackedRows | undefined;
  return (src, idx, at) => {
    if (clsOf !== src) {
      // Each source row's stage, once per source: 1 = rate stage, 2 = floor stage, 0 = neither.
      cls = new Uint8Array(src.work.length);
      for (let j = 0; j < cls.length; j++) {
        const w = src.work[j]!;
        cls[j] = w >= 2 * l2_bytes ? 1 : w < l2_bytes / 16 ? 2 : 0;
      }
      clsOf = src;
    }
    const big = gatherClass(src, idx, cls!, 1, bigBuf);
    const tiny = gatherClass(src, idx, cls!, 2, tinyBuf);
    if (big.work.length < 3 || tiny.work.length < 1)
      return warmFit(gatherRows(src, idx, allBuf), [warm.rate_floor_us, warm.rate]);
    const r = warmFit(big, [warm.rate_floor_us, warm.rate]);
    return { floor_us: floorStage(tiny, r.rate, at[0], true, readBuf), rate: r.rate };
  };
}

/** One warm-started search with the bootstrap settings (a resample near the full-data optimum). */
function warmFit(packed: PackedRows, at: [number, number]): { floor_us: number; rate: number } {
  const r = gssMinimize2(
    (lnFloor, lnRate) => searchLogL1(packed, Math.exp(lnFloor), Math.exp(lnRate)),
    [Math.log(at[0]), Math.log(at[1])],
    BOOTSTRAP_SEARCH.step0,
    BOOTSTRAP_SEARCH,
  );
  return { floor_us: Math.exp(r.x[0]!), rate: Math.exp(r.x[1]!) };
}

/** Cache-resident threshold: KV working sets below this many bytes are treated as L2-resident. */
export function cacheResidentBytes(l2_mib: number | undefined): number {
  return l2Bytes(l2_mib);
}

/** How a stored decode law was fitted (docs/fitting.md "Decode attention"). */
export type DecodeMethod = 'staged' | 'joint' | 'parallel';

/** One candidate decode fit: its law, its errors on every row and on the holdout. */
export interface DecodeCandidate {
  method: DecodeMethod;
  law: DecodeLaw;
  train: FitError;
  holdout?: FitError & { split: string };
}

/** Result of one decode fit, kept for tests and the report. */
export interface DecodeResult {
  kind: 'full' | 'swa';
  /** Which candidate is stored: the lowest holdout geo (ties → staged, joint, parallel). */
  method: DecodeMethod;
  floor_us: number;
  rate: number;
  /** Work-item cost (µs per decode row × KV head) and rate half-point (work items); 0 unless parallel. */
  item_us: number;
  p_half: number;
  ci_floor: [number, number];
  ci_rate: [number, number];
  ci_item?: [number, number];
  ci_p_half?: [number, number];
  /** Bootstrap bounds extended to the value (search tolerance), if any. */
  ci_notes: string[];
  n: number;
  excluded_cache_resident: number;
  with_cache_resident: { floor_us: number; rate: number; geo: number };
  /** Every candidate, in the order staged, joint, parallel. */
  candidates: DecodeCandidate[];
  train: FitError;
  holdout?: FitError & { split: string };
  before_geo: number;
  per_kernel: Array<{ kernel: string; err: FitError }>;
  /** Every row as (KV bytes, latency): the figure's scatter and the residuals' abscissae. */
  points: WorkPoint[];
}

/**
 * The holdout splits of a decode fit, made once for its three candidates: whole head geometries
 * (holdoutValues) for full attention; for sliding window, one split per window width (leave one out).
 */
interface DecodeFolds {
  kind: 'full' | 'swa';
  /** Full: the held geometries' label; swa: the window widths, ascending. */
  label: string;
  splits: Array<HoldoutSplit | undefined>;
}

function decodeFolds(pts: readonly WorkPoint[], kind: 'full' | 'swa'): DecodeFolds {
  if (kind === 'full') {
    const held = holdoutValues(pts.map((p) => p.group));
    return { kind, label: [...held].join(', '), splits: [splitGroups(pts, held)] };
  }
  const windows = [...new Set(pts.map((p) => p.group))].sort((a, b) => Number(a) - Number(b));
  return { kind, label: windows.join(', '), splits: windows.map((w) => splitGroups(pts, new Set([w]))) };
}

/**
 * Holdout of a decode fit on its folds (decodeFolds): the held geometries' error for full attention;
 * for sliding window, the median geo and MAPE over the window folds.
 */
function decodeHoldout(folds: DecodeFolds, fitter: LawFitter): (FitError & { split: string }) | undefined {
  if (folds.kind === 'full') {
    const e = splitError(folds.splits[0], fitter);
    return e ? { ...e, split: `head geometry n_q/n_kv/head_dim ∈ {${folds.label}}` } : undefined;
  }
  const errors: FitError[] = [];
  for (const split of folds.splits) {
    const e = splitError(split, fitter);
    if (e) errors.push(e);
  }
  if (!errors.length) return undefined;
  const geo = median(errors.map((e) => e.geo));
  const mape = median(errors.map((e) => e.mape_pct));
  return {
    geo,
    mape_pct: mape,
    n: errors.reduce((a, e) => a + e.n, 0),
    split: `leave one window width out (${folds.label}), median over ${errors.length} folds`,
  };
}

/** Every ⌈n/4000⌉-th point: the subsample the joint fit's derivative-free start runs on. */
function thinned(pts: readonly WorkPoint[]): WorkPoint[] {
  const step = Math.ceil(pts.length / 4000);
  return step <= 1 ? [...pts] : pts.filter((_, i) => i % step === 0);
}

/**
 * The three candidate decode fits of `pts`: staged (fitDecodeTwoStage), joint floor + rate on every
 * row (irlsFit from fitFloorRate's optimum on a ≤ 4000-row subsample), and the work-item law (both
 * with the rate bounded by `maxRate`, the datasheet HBM rate)
 * (fitParallelLaw) started from the joint fit; each with its holdout (fold fits warm-started).
 */
function decodeCandidates(
  pts: readonly WorkPoint[],
  kind: 'full' | 'swa',
  l2: number,
  maxRate: number,
): {
  candidates: DecodeCandidate[];
  staged: ReturnType<typeof fitDecodeTwoStage>;
  joint: { floor_us: number; rate: number; objective: number };
} {
  // Paired once for both full-data IRLS fits (irlsFit would pair the packed rows per call).
  const paired = pairRows(packRows(pts));
  const start = fitFloorRate(thinned(pts));
  const joint = irlsFit(paired, floorRate(start.floor_us, start.rate), 40, maxRate);
  const staged = fitDecodeTwoStage(pts, l2, [joint.floor_us, joint.rate]);
  const parallel = fitParallelLaw(paired, joint, 'cold', maxRate);
  const fitters: Array<[DecodeMethod, DecodeLaw, LawFitter]> = [
    [
      'staged',
      floorRate(staged.floor_us, staged.rate),
      fromPointFitter((ps, init) => fitDecodeTwoStage(ps, l2, init), [staged.floor_us, staged.rate]),
    ],
    [
      'joint',
      floorRate(joint.floor_us, joint.rate),
      (ps) => irlsFit(packRows(ps), floorRate(joint.floor_us, joint.rate), 40, maxRate),
    ],
    ['parallel', parallel, (ps) => fitParallelLaw(packRows(ps), parallel, 'warm', maxRate)],
  ];
  const meas = pts.map((p) => p.latency_us);
  const folds = decodeFolds(pts, kind);
  const candidates = fitters.map(([method, law, fitter]) => {
    const holdout = decodeHoldout(folds, fitter);
    return { method, law, train: fitError(predictLaw(pts, law), meas), ...(holdout ? { holdout } : {}) };
  });
  return { candidates, staged, joint };
}

/**
 * Decode candidates that may be stored (DECISION, docs/fitting.md "Decode attention"): all three, the
 * lowest head-geometry holdout wins (the parallel law on every measured chip, both kinds). Measured end
 * to end (Splitwise tiers and engine profile, h100 and a100) it moves no regime by more than 0.6 pp; the
 * 15.4% → 27.2% a100 regression reported before did not reproduce.
 */
const STORABLE_DECODE: ReadonlySet<DecodeMethod> = new Set<DecodeMethod>(['staged', 'joint', 'parallel']);

/** The storable candidate with the lowest holdout geo (strictly lower replaces; no holdout → the first). */
function bestCandidate(cs: readonly DecodeCandidate[]): DecodeCandidate {
  const ok = cs.filter((c) => STORABLE_DECODE.has(c.method));
  let best = ok[0]!;
  for (const c of ok.slice(1)) if (c.holdout && best.holdout && c.holdout.geo < best.holdout.geo) best = c;
  return best;
}

/** Seeded bootstrap of the stored candidate, with the fitter that produced it (warm-started). */
function decodeBootstrap(
  pts: readonly WorkPoint[],
  chosen: DecodeCandidate,
  staged: ReturnType<typeof fitDecodeTwoStage>,
  l2: number,
  bootstrap: { resamples: number; seed: number },
  maxRate: number,
): Pick<DecodeResult, 'ci_floor' | 'ci_rate' | 'ci_item' | 'ci_p_half' | 'ci_notes'> {
  const law = chosen.law;
  if (chosen.method === 'parallel') {
    const size = Math.min(pts.length, BOOTSTRAP_ROWS);
    const resample = pairedResampler(packRows(pts), size);
    const fits = resampleEstimates(
      pts.length,
      bootstrap.resamples,
      bootstrap.seed,
      (idx) => fitParallelLaw(resample(idx), law, 'resample', maxRate),
      size,
    );
    const notes: string[] = [];
    const ci = (k: keyof DecodeLaw) => widen(ciFromEstimates(fits.map((f) => f[k])), law[k], k, notes);
    return {
      ci_floor: ci('floor_us'),
      ci_rate: ci('rate'),
      ci_item: ci('item_us'),
      ci_p_half: ci('p_half'),
      ci_notes: notes,
    };
  }
  const size = Math.min(pts.length, BOOTSTRAP_ROWS);
  const fitter = chosen.method === 'staged' ? stagedResampleFitter(l2, staged, size) : gatheredWarmFit(size);
  const b = bootstrapFloorRate(pts, law, bootstrap, fitter);
  return { ci_floor: b.ci_floor, ci_rate: b.ci_rate, ci_notes: b.notes };
}

/**
 * Decode fit for one kind: three candidates (decodeCandidates), the one with the lowest holdout geo
 * stored (issue 16: the work-item term is kept only where it lowers the holdout error), the others
 * reported beside it. `rows`: the kind's rows with repeats reduced (reduceDecodeRepeats).
 */
export function fitDecodeKind(
  rows: readonly AttentionDecodeRow[],
  kind: 'full' | 'swa',
  ctx: FitContext,
): DecodeResult | string {
  const geo = geometryMemo();
  const pts: WorkPoint[] = rows.map((r) => ({
    work: decodeKvBytes(r),
    items: r.batch * r.n_kv,
    latency_us: r.latency_us,
    group: kind === 'full' ? geo(r) : String(r.window),
    kernel_source: r.kernel_source,
  }));
  if (pts.length < 3) return `attention_decode ${kind}: only ${pts.length} rows`;
  const l2 = cacheResidentBytes(ctx.chip.l2_mib);
  const { candidates, staged, joint } = decodeCandidates(pts, kind, l2, ctx.chip.hbm_bytes_per_us);
  const chosen = bestCandidate(candidates);
  const meas = pts.map((p) => p.latency_us);
  return {
    kind,
    method: chosen.method,
    ...chosen.law,
    ...decodeBootstrap(pts, chosen, staged, l2, ctx.bootstrap, ctx.chip.hbm_bytes_per_us),
    n: pts.length,
    excluded_cache_resident:
      chosen.method === 'staged' && staged.two_stage ? pts.filter((p) => p.work < 2 * l2).length : 0,
    with_cache_resident: { floor_us: joint.floor_us, rate: joint.rate, geo: Math.exp(joint.objective) },
    candidates,
    train: chosen.train,
    ...(chosen.holdout ? { holdout: chosen.holdout } : {}),
    before_geo: geometricError(
      pts.map((p) => p.work / ctx.chip.hbm_bytes_per_us),
      meas,
    ),
    per_kernel: errorsPerKernel(pts, chosen.law),
    points: pts,
  };
}

/** Decode attention family result: one `DecodeResult` per kind fitted (full first, then swa). */
export type DecodeFit = FamilyFit & { results: DecodeResult[] };

/** The decode kinds, in result order: full attention (window = 0), then sliding window (window > 0). */
export const DECODE_KINDS = ['full', 'swa'] as const;
export type DecodeKind = (typeof DECODE_KINDS)[number];

/**
 * One kind of the decode family (its rows selected from `rows`, fitted, bootstrapped): a part of the
 * family fit, independent of the other kind, so the orchestrator can run the two on separate workers
 * (issue 17). `mergeDecodeFits` of the parts in DECODE_KINDS order is `fitAttentionDecode`.
 */
export function fitAttentionDecodeKind(
  rows: readonly AttentionDecodeRow[],
  kind: DecodeKind,
  ctx: FitContext,
): DecodeFit {
  const fit: DecodeFit = { ...emptyFamilyFit('attention_decode'), results: [] };
  const sel = reduceDecodeRepeats(rows).filter((r) => (kind === 'full' ? r.window === 0 : r.window > 0));
  if (!sel.length) {
    if (kind === 'full') fit.refusals.push('attention_decode: no full-attention rows (window = 0)');
    else fit.warnings.push('attention_decode: no sliding-window rows; no _swa pair');
    return fit;
  }
  const r = fitDecodeKind(sel, kind, ctx);
  if (typeof r === 'string') fit.refusals.push(r);
  else {
    fit.results.push(r);
    fit.coefficients.push(...decodeCoefficients(r, ctx));
  }
  return fit;
}

/** The decode family fit from its parts (fitAttentionDecodeKind per kind, in DECODE_KINDS order). */
export function mergeDecodeFits(parts: ReadonlyArray<FamilyFit & { results?: DecodeResult[] }>): DecodeFit {
  return {
    ...emptyFamilyFit('attention_decode'),
    coefficients: parts.flatMap((p) => p.coefficients),
    refusals: parts.flatMap((p) => p.refusals),
    warnings: parts.flatMap((p) => p.warnings),
    results: parts.flatMap((p) => p.results ?? []),
  };
}

/**
 * Decode attention family: full attention → attention_decode_floor / attention_decode_rate;
 * sliding window → attention_decode_floor_swa / attention_decode_rate_swa (set cost-model-attention).
 */
export function fitAttentionDecode(rows: readonly AttentionDecodeRow[], ctx: FitContext): DecodeFit {
  return mergeDecodeFits(DECODE_KINDS.map((kind) => fitAttentionDecodeKind(rows, kind, ctx)));
}

/** Evidence notes of a decode entry: the stored method, every candidate's errors, per kernel, CI notes. */
function decodeNotes(r: DecodeResult, ctx: FitContext): string[] {
  const cand = (c: DecodeCandidate) =>
    `${c.method}: floor ${fmt(c.law.floor_us)} us, rate ${fmt(c.law.rate)} B/us${c.method === 'parallel' ? `, item ${fmt(c.law.item_us)} us, p_half ${fmt(c.law.p_half)}` : ''}; train geo ${c.train.geo}, holdout geo ${c.holdout?.geo ?? '—'}`;
  return [
    `law: ${r.method === 'parallel' ? 't = floor + p·item_us + kv_bytes/(rate·p/(p + p_half)), p = batch × n_kv' : 't = floor + kv_bytes/rate'}; stored fit: ${r.method} (the lowest holdout geo of the candidates below: docs/fitting.md)`,
    ...r.candidates.map((c) => `candidate ${cand(c)}`),
    `geometric error before (pure KV read at datasheet ${fmt(ctx.chip.hbm_bytes_per_us)} B/us): ${fmt(r.before_geo)}; after: ${r.train.geo}`,
    ...r.per_kernel.map((k) => `kernel ${k.kernel}: geo ${k.err.geo}, MAPE ${k.err.mape_pct}% (n ${k.err.n})`),
    ...r.ci_notes,
  ];
}

function decodeCoefficients(r: DecodeResult, ctx: FitContext): FittedCoefficient[] {
  const sfx = r.kind === 'full' ? '' : '_swa';
  const l2 = cacheResidentBytes(ctx.chip.l2_mib);
  const filter = `${r.kind === 'full' ? 'window == 0' : 'window > 0; context capped at window'}${r.excluded_cache_resident ? `; rate from KV bytes ≥ ${2 * l2} (2×L2), floor from KV bytes < ${l2 / 16} (L2/16)` : '; every row'}`;
  const used = { filter, rows_used: r.n };
  const base = {
    family: 'attention_decode',
    ctx,
    used,
    ci_method: 'bootstrap' as const,
    train: r.train,
    ...(r.holdout ? { holdout: r.holdout } : {}),
    notes: decodeNotes(r, ctx),
  };
  const entry = (
    name: string,
    value: number,
    units: 'us_per_transfer' | 'bytes_per_us' | 'us_per_request' | 'dimensionless',
    ci95: [number, number],
  ) => ({
    set: SET_NAMES.attention,
    name: `${name}${sfx}`,
    entry: measuredEntry({ ...base, value, units, ci95 }),
  });
  const out = [
    entry('attention_decode_floor', r.floor_us, 'us_per_transfer', r.ci_floor),
    entry('attention_decode_rate', r.rate, 'bytes_per_us', r.ci_rate),
  ];
  if (r.method === 'parallel' && r.ci_item)
    out.push(entry('attention_decode_item_us', r.item_us, 'us_per_request', r.ci_item));
  // p_half 0 (no ramp, fitParallelLaw) is left out: a measured entry cannot hold 0 and the pricer reads none as 0.
  if (r.method === 'parallel' && r.ci_p_half && r.p_half > 0)
    out.push(entry('attention_decode_p_half', r.p_half, 'dimensionless', r.ci_p_half));
  return out;
}

/** How prefill attention's arithmetic rate ramps: over the call's tokens (batch · S, the bf16 GEMM ramp) or per sequence (S). */
export type PrefillMethod = 'tokens_ramp' | 'sequence_ramp';

/** One prefill candidate: its law (rate = work_scale; p_half = s_half for the sequence ramp), rows and errors. */
interface PrefillCandidate {
  method: PrefillMethod;
  law: DecodeLaw;
  points: WorkPoint[];
  train: FitError;
  holdout?: FitError & { split: string };
}

/** Prefill result kept for tests and the report. */
export interface PrefillResult {
  /** Stored candidate: the lower head-geometry holdout geo (DECISION, docs/fitting.md); both are in `candidates`. */
  method: PrefillMethod;
  floor_us: number;
  work_scale: number;
  /** Sequence length (new tokens) at which the per-sequence rate is half (tokens); 0 for tokens_ramp. */
  s_half: number;
  ci_floor: [number, number];
  ci_scale: [number, number];
  ci_s_half?: [number, number];
  n: number;
  excluded: string[];
  train: FitError;
  holdout?: FitError & { split: string };
  /** Both candidates' errors (tokens_ramp, sequence_ramp). */
  candidates: Array<{ method: PrefillMethod; law: DecodeLaw; train: FitError; holdout?: FitError }>;
  per_kernel: Array<{ kernel: string; err: FitError }>;
  /** The bf16 ramp the work is divided by (this run's gemm fit, from `ctx.prior`). */
  ramp: { eps_max: number; m_half: number };
  /** Every row as (work, latency), work = causal FLOPs / (bf16 peak · ε_bf16(batch·S)) for tokens_ramp,
   * / (bf16 peak · eps_max) with items = S for sequence_ramp: the figure's data. */
  points: WorkPoint[];
}

/** Prefill attention family result (`result` absent when the fit refused). */
export type PrefillFit = FamilyFit & { result?: PrefillResult };

/** Usable prefill rows: full attention, bf16 compute, new_tokens > 1; repeats reduced by the median. */
function prefillRows(rowsIn: readonly AttentionPrefillRow[]): { rows: AttentionPrefillRow[]; excluded: string[] } {
  const excluded: string[] = [];
  const full = rowsIn.filter((r) => r.window === 0 && (r.dtype === 'bf16' || r.dtype === 'bfloat16'));
  if (full.length < rowsIn.length)
    excluded.push(`${rowsIn.length - full.length} rows with window > 0 or non-bf16 compute`);
  const sel = full.filter((r) => r.new_tokens > 1);
  if (sel.length < full.length) excluded.push(`${full.length - sel.length} rows with new_tokens = 1 (decode calls)`);
  const rows = reduceRepeatsBy(sel, PREFILL_CONFIG_FIELDS);
  return { rows, excluded };
}

/**
 * Prefill attention family: attention_prefill_floor (µs), attention_prefill_work_scale
 * (dimensionless) and, when the per-sequence ramp is stored, attention_prefill_s_half (tokens),
 * using the bf16 ramp from `ctx.prior` (`gemm_eps_max_bf16`, `gemm_m_half_bf16`).
 * Rows: full attention (window 0), bf16 compute; rows with new_tokens = 1 are decode calls (some
 * engines dispatch a decode kernel for them) and are excluded.
 * Both candidates (prefillCandidates) are fitted; the one with the lower head-geometry holdout geo
 * is stored and bootstrapped (DECISION, docs/fitting.md "Prefill attention": sequence_ramp on every
 * measured chip).
 */
export function fitAttentionPrefill(rowsIn: readonly AttentionPrefillRow[], ctx: FitContext): PrefillFit {
  const fit: PrefillFit = emptyFamilyFit('attention_prefill');
  const eps = ctx.prior.get('gemm_eps_max_bf16');
  const mh = ctx.prior.get('gemm_m_half_bf16');
  const peak = peakFlopsPerUs(ctx.chip, 'bf16')!;
  if (eps === undefined || mh === undefined) {
    fit.refusals.push(
      'attention_prefill: needs the bf16 GEMM ramp (gemm_eps_max_bf16, gemm_m_half_bf16); fit gemm first',
    );
    return fit;
  }
  const { rows, excluded } = prefillRows(rowsIn);
  if (rows.length < 3) {
    fit.refusals.push(`attention_prefill: only ${rows.length} usable rows`);
    return fit;
  }
  const candidates = prefillCandidates(rows, eps, mh, peak);
  // DECISION (docs/fitting.md "Prefill attention"): the candidate with the lower head-geometry
  // holdout geo is stored (the per-sequence ramp on every measured chip; end to end neutral).
  const chosen = lowerHoldout(candidates);
  const ci = prefillBootstrap(chosen, ctx.bootstrap);
  const result: PrefillResult = {
    method: chosen.method,
    floor_us: chosen.law.floor_us,
    work_scale: chosen.law.rate,
    s_half: chosen.law.p_half,
    ci_floor: ci.ci_floor,
    ci_scale: ci.ci_rate,
    ...(ci.ci_s_half ? { ci_s_half: ci.ci_s_half } : {}),
    n: chosen.points.length,
    excluded,
    train: chosen.train,
    ...(chosen.holdout ? { holdout: chosen.holdout } : {}),
    candidates: candidates.map((c) => ({
      method: c.method,
      law: c.law,
      train: c.train,
      ...(c.holdout ? { holdout: c.holdout } : {}),
    })),
    per_kernel: errorsPerKernel(chosen.points, chosen.law),
    ramp: { eps_max: eps, m_half: mh },
    points: chosen.points,
  };
  fit.result = result;
  fit.coefficients.push(...prefillCoefficients(result, ci.notes, ctx));
  return fit;
}

/** A fitted per-sequence half-point below this many tokens is refitted as no ramp (s_half = 0). */
const S_HALF_MIN_TOKENS = 1;

/**
 * The candidate with the strictly lower holdout geo (ties, or a missing holdout → the first: tokens_ramp).
 * A sequence ramp refitted without a ramp (s_half 0) is not storable: a measured entry cannot hold 0, and
 * the pricer reads a missing s_half as the GEMM m_half, not as no ramp.
 */
function lowerHoldout(cs: readonly PrefillCandidate[]): PrefillCandidate {
  const [a, b] = [cs[0]!, cs[1]];
  return b?.holdout && a.holdout && b.law.p_half > 0 && b.holdout.geo < a.holdout.geo ? b : a;
}

/**
 * The two prefill candidates (issue 16 piece 5; docs/fitting.md "Prefill attention"): the seed's
 * ramp over the call's tokens (work = FLOPs / (peak · ε_bf16(batch · S)), floor + work / work_scale,
 * fitFloorRate), and a per-sequence ramp (work = FLOPs / (peak · eps_max_bf16), the decode law with
 * items = S and no item cost: floor + work / (work_scale · S/(S + s_half)), irlsFit from s_half 64 and
 * 1024, the lower objective wins; a half-point under S_HALF_MIN_TOKENS is refitted as s_half = 0). Holdout: whole head geometries, for both.
 */
function prefillCandidates(rows: readonly AttentionPrefillRow[], eps: number, mh: number, peak: number) {
  const tokPts: WorkPoint[] = [];
  const seqPts: WorkPoint[] = [];
  const geo = geometryMemo();
  for (const r of rows) {
    const flops = prefillCausalFlops(r);
    const { latency_us, kernel_source } = r;
    const group = geo(r);
    tokPts.push({
      work: flops / (peak * gemmEfficiency(r.batch * r.new_tokens, eps, mh)),
      latency_us,
      group,
      kernel_source,
    });
    seqPts.push({ work: flops / (peak * eps), items: r.new_tokens, latency_us, group, kernel_source });
  }
  const held = holdoutValues(tokPts.map((p) => p.group));
  const split = `head geometry n_q/n_kv/head_dim ∈ {${[...held].join(', ')}}`;
  const f = fitFloorRate(tokPts);
  const packed = packRows(seqPts);
  const start = fitFloorRate(thinned(seqPts));
  const seqFit = (packed: PackedRows, from?: DecodeLaw) => {
    const ps = pairRows(packed);
    if (from) return irlsFit(ps, from);
    const [a, b] = [64, 1024].map((p_half) => irlsFit(ps, { ...floorRate(start.floor_us, start.rate), p_half }));
    const best = b!.objective < a!.objective ? b! : a!;
    // A half-point under one token is no ramp over the rows (every S ≥ 2) and leaves s_half unidentified
    // (its bootstrap collapses beside the value): refitted with s_half held at 0, the law without a ramp.
    return best.p_half >= S_HALF_MIN_TOKENS ? best : irlsFit(ps, floorRate(best.floor_us, best.rate));
  };
  const seq = seqFit(packed);
  const out: Array<[PrefillMethod, DecodeLaw, WorkPoint[], LawFitter]> = [
    ['tokens_ramp', floorRate(f.floor_us, f.rate), tokPts, fromPointFitter(fitFloorRate, [f.floor_us, f.rate])],
    ['sequence_ramp', seq, seqPts, (ps) => seqFit(packRows(ps), seq)],
  ];
  return out.map(([method, law, points, fitter]): PrefillCandidate => {
    const he = splitError(splitGroups(points, held), fitter);
    const train = fitError(
      predictLaw(points, law),
      points.map((p) => p.latency_us),
    );
    return { method, law, points, train, ...(he ? { holdout: { ...he, split } } : {}) };
  });
}

/** Seeded bootstrap of the stored prefill candidate (its own fitter, warm at the full-data optimum). */
function prefillBootstrap(
  c: PrefillCandidate,
  bootstrap: { resamples: number; seed: number },
): { ci_floor: [number, number]; ci_rate: [number, number]; ci_s_half?: [number, number]; notes: string[] } {
  if (c.method === 'tokens_ramp') return bootstrapFloorRate(c.points, c.law, bootstrap);
  const size = Math.min(c.points.length, BOOTSTRAP_ROWS);
  const resample = pairedResampler(packRows(c.points), size);
  const fits = resampleEstimates(
    c.points.length,
    bootstrap.resamples,
    bootstrap.seed,
    (idx) => irlsFit(resample(idx), c.law, 25),
    size,
  );
  const notes: string[] = [];
  const ci = (k: keyof DecodeLaw, what: string) => widen(ciFromEstimates(fits.map((f) => f[k])), c.law[k], what, notes);
  return { ci_floor: ci('floor_us', 'floor'), ci_rate: ci('rate', 'rate'), ci_s_half: ci('p_half', 's_half'), notes };
}

function prefillCoefficients(result: PrefillResult, ciNotes: readonly string[], ctx: FitContext): FittedCoefficient[] {
  const cand = (c: PrefillResult['candidates'][number]) =>
    `candidate ${c.method}: floor ${fmt(c.law.floor_us)} us, work_scale ${fmt(c.law.rate)}${c.method === 'sequence_ramp' ? `, s_half ${fmt(c.law.p_half)} tokens` : ''}; train geo ${c.train.geo}, holdout geo ${c.holdout?.geo ?? '—'}`;
  const notes = [
    result.method === 'sequence_ramp'
      ? `law: t = floor + causal_flops/(bf16 peak · eps_max ${result.ramp.eps_max} · work_scale · S/(S + s_half)), S = new tokens per sequence; stored fit: sequence_ramp (the lower head-geometry holdout geo)`
      : `bf16 ramp used: eps_max ${result.ramp.eps_max}, m_half ${result.ramp.m_half} (this run's gemm fit), tokens = batch · new_tokens; stored fit: tokens_ramp (the lower head-geometry holdout geo: docs/fitting.md)`,
    ...result.candidates.map(cand),
    ...result.excluded.map((e) => `excluded ${e}`),
    ...result.per_kernel.map((k) => `kernel ${k.kernel}: geo ${k.err.geo}, MAPE ${k.err.mape_pct}% (n ${k.err.n})`),
    ...ciNotes.map((n) => n.replace(/^rate /, 'work_scale ')),
  ];
  const used = { filter: 'window == 0; dtype bf16; new_tokens > 1', rows_used: result.n };
  const base = {
    family: 'attention_prefill',
    ctx,
    used,
    ci_method: 'bootstrap' as const,
    train: result.train,
    ...(result.holdout ? { holdout: result.holdout } : {}),
    notes,
  };
  return [
    {
      set: SET_NAMES.attention,
      name: 'attention_prefill_floor',
      entry: measuredEntry({ ...base, value: result.floor_us, units: 'us_per_transfer', ci95: result.ci_floor }),
    },
    {
      set: SET_NAMES.attention,
      name: 'attention_prefill_work_scale',
      entry: measuredEntry({ ...base, value: result.work_scale, units: 'dimensionless', ci95: result.ci_scale }),
    },
    ...(result.method === 'sequence_ramp' && result.ci_s_half
      ? [
          {
            set: SET_NAMES.attention,
            name: 'attention_prefill_s_half',
            entry: measuredEntry({ ...base, value: result.s_half, units: 'tokens', ci95: result.ci_s_half }),
          },
        ]
      : []),
  ];
}
