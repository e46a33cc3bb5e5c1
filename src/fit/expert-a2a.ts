/**
 * Expert-parallel all-to-all fit (issue 13 item 3): DeepEP dispatch and combine, per mode (`ll`, `normal`),
 * phase and EP width, with the collective law of core/laws/collective.ts,
 *   t(b) = max(t0 + b / r_t, b / r_peak),   b = bytes one rank sends (measurements/deepep-import.ts).
 *
 * Procedure (docs/fitting.md "Expert-parallel all-to-all"): t0 and r_t are fitted jointly by least squares
 * on the relative error, min Σ ((t0 + b/r_t)/t − 1)², which is linear in (t0, 1/r_t) (two normal equations;
 * a negative coefficient is pinned at 0 and the other refitted). r_peak is the best achieved bytes/µs over
 * the calls (measured, as collective-curve.ts records it), raised to r_t where the sweep never got there. The collectives' own procedure (t0 = fastest
 * small call, r_peak fixed, r_t by least mean |ln|) was tried first and misses on DeepEP: its floor is the
 * fastest of many shapes and its holdout geo is 1.38–2.20 (docs/fitting.md). ci95: seeded bootstrap over
 * calls (type-7 2.5 / 97.5 % quantiles) for t0 and r_t; r_peak [second-best, best]. Normal mode keeps one SM
 * budget (`sms`, DeepEP's default 20). Holdout: the largest fifth of the distinct message sizes is left out,
 * the law refitted on the rest and scored on the held-out calls. Pure: no I/O. Units: bytes, µs, bytes/µs.
 */
import { collectiveUs } from '../core/laws/collective.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { geometricError, mapePct, percentileType7 } from '../core/numeric/stats.ts';
import { roundSig } from '../core/numeric/stats.ts';
import type { CoefficientEntry, Evidence } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { A2aMode, A2aPhase } from '../core/laws/expert-alltoall.ts';
import type { A2aPoint } from '../measurements/deepep-import.ts';
import type { ExpertA2aRow } from '../measurements/schema.ts';
import { provenance } from './collective-provenance.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

/** SM budget of the normal-mode rows the fit keeps (DeepEP's and SGLang's default `num_sms`). */
export const DEEPEP_NORMAL_SMS = 20;
/** Fraction of the distinct message sizes (the largest) the holdout leaves out. */
export const A2A_HOLDOUT_FRACTION = 0.2;

/** Coefficients of one curve, µs and bytes per µs. */
export interface A2aCoefficients {
  t0_us: number;
  r_t_bytes_per_us: number;
  r_peak_bytes_per_us: number;
}

/** Error of a curve on a set of calls (geo = exp mean |ln(pred/meas)|). */
export interface A2aError {
  geo: number;
  mape_pct: number;
  n: number;
}

/** One fitted (mode, phase, ranks) curve. */
export interface A2aCurve extends A2aCoefficients {
  mode: A2aMode;
  phase: A2aPhase;
  ranks: number;
  t0_ci95: [number, number];
  r_t_ci95: [number, number];
  r_peak_ci95: [number, number];
  train: A2aError;
  /** Largest message sizes held out; `from_bytes` is the smallest held-out size. */
  holdout: A2aError & { from_bytes: number };
}

/**
 * Relative-error least squares of t = t0 + b · s (s = 1/r_t) over `idx` (all calls when omitted):
 * min Σ ((t0 + b·s)/t − 1)², two normal equations; a negative coefficient is pinned at 0 and the other
 * refitted. The estimate is biased low by about σ² (σ the calls' relative noise; 0.1 % at 3 % noise).
 * Reweighting by 1/predicted² or Gauss–Newton on ln(pred/meas) removes that bias but worsens the shipped
 * low-latency dispatch holdout from 1.30 to 1.67–2.2 (docs/fitting.md), so neither is used.
 * @returns t0 (µs) and s (µs per byte), both ≥ 0
 */
export function fitFloorRate(points: readonly A2aPoint[], idx?: ArrayLike<number>): { t0_us: number; s: number } {
  let [a11, a12, a22, y1, y2] = [0, 0, 0, 0, 0];
  const n = idx ? idx.length : points.length;
  for (let i = 0; i < n; i++) {
    const p = points[idx ? idx[i]! : i]!;
    const x1 = 1 / p.latency_us;
    const x2 = p.message_bytes / p.latency_us;
    a11 += x1 * x1;
    a12 += x1 * x2;
    a22 += x2 * x2;
    y1 += x1;
    y2 += x2;
  }
  const det = a11 * a22 - a12 * a12;
  const t0 = (y1 * a22 - y2 * a12) / det;
  const s = (a11 * y2 - a12 * y1) / det;
  if (t0 >= 0 && s >= 0) return { t0_us: t0, s };
  return t0 < 0 ? { t0_us: 0, s: y2 / a22 } : { t0_us: y1 / a11, s: 0 };
}

function errorOn(points: readonly A2aPoint[], c: A2aCoefficients): A2aError {
  const pred = points.map((p) => collectiveUs(p.message_bytes, c.t0_us, c.r_t_bytes_per_us, c.r_peak_bytes_per_us));
  const meas = points.map((p) => p.latency_us);
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: points.length };
}

function coefficients(points: readonly A2aPoint[]): A2aCoefficients & { r_peak_second: number } {
  const f = fitFloorRate(points);
  const rates = points.map((p) => p.message_bytes / p.latency_us).sort((a, b) => b - a);
  const r_t = 1 / f.s;
  // r_peak ≥ r_t (collective-curve.ts's gate): a best achieved rate below r_t is a sweep that never
  // saturated, and would make the peak branch bind on messages larger than any measured.
  const r_peak = Math.max(r_t, rates[0]!);
  return {
    t0_us: f.t0_us,
    r_t_bytes_per_us: r_t,
    r_peak_bytes_per_us: r_peak,
    r_peak_second: Math.min(r_peak, rates[1] ?? r_peak),
  };
}

function ci95(vals: number[], v: number): [number, number] {
  if (vals.length === 0) return [v, v];
  return [Math.min(v, percentileType7(vals, 0.025)), Math.max(v, percentileType7(vals, 0.975))];
}

/** Fit one curve with its bootstrap and its largest-sizes holdout. @throws Error with fewer than 3 sizes */
function fitOne(points: readonly A2aPoint[], boot: { resamples: number; seed: number }) {
  const sizes = [...new Set(points.map((p) => p.message_bytes))].sort((a, b) => a - b);
  if (sizes.length < 3) throw new Error(`needs at least 3 distinct message sizes, got ${sizes.length}`);
  const c = coefficients(points);
  const fits = resampleEstimates(points.length, boot.resamples, boot.seed, (idx) => fitFloorRate(points, idx));
  const cut = sizes[Math.max(2, Math.floor(sizes.length * (1 - A2A_HOLDOUT_FRACTION)))]!;
  const train = coefficients(points.filter((p) => p.message_bytes < cut));
  const held = points.filter((p) => p.message_bytes >= cut);
  return {
    t0_us: c.t0_us,
    r_t_bytes_per_us: c.r_t_bytes_per_us,
    r_peak_bytes_per_us: c.r_peak_bytes_per_us,
    t0_ci95: ci95(
      fits.map((f) => f.t0_us),
      c.t0_us,
    ),
    r_t_ci95: ci95(
      fits.filter((f) => f.s > 0).map((f) => 1 / f.s),
      c.r_t_bytes_per_us,
    ),
    r_peak_ci95: [c.r_peak_second, c.r_peak_bytes_per_us] as [number, number],
    train: errorOn(points, c),
    holdout: { ...errorOn(held, train), from_bytes: cut },
  };
}

/**
 * Fit every (mode, phase, ranks) curve present in `points`.
 * @param points calls from mapDeepepTable; normal-mode calls at other SM budgets than `sms` are dropped
 * @param boot seeded bootstrap settings
 * @param sms the normal-mode SM budget kept
 * @returns curves sorted by mode, phase, ranks
 * @throws Error when a curve has fewer than 3 distinct message sizes
 */
export function fitA2aCurves(
  points: readonly A2aPoint[],
  boot: { resamples: number; seed: number },
  sms = DEEPEP_NORMAL_SMS,
): A2aCurve[] {
  const groups = new Map<string, A2aPoint[]>();
  for (const p of points) {
    if (p.mode === 'normal' && p.sms !== sms) continue;
    const k = `${p.mode}|${p.phase}|${String(p.ranks).padStart(3, '0')}`;
    const g = groups.get(k);
    if (g) g.push(p);
    else groups.set(k, [p]);
  }
  return [...groups.keys()].sort().map((k) => {
    const g = groups.get(k)!;
    const { mode, phase, ranks } = g[0]!;
    return { mode, phase, ranks, ...fitOne(g, boot) };
  });
}

/** Registry name of an all-to-all coefficient: `expert_alltoall_<param>_<mode>_<phase>_<N>rank_<chip>`. */
export function expertA2aName(
  param: 'floor' | 'transition_rate' | 'peak_rate',
  c: Pick<A2aCurve, 'mode' | 'phase' | 'ranks'>,
  chip: string,
): string {
  return `expert_alltoall_${param}_${c.mode}_${c.phase}_${c.ranks}rank_${chip.replace(/-/g, '_')}`;
}

/** The `expert_alltoall` family's result: the coefficients and every curve (for the report). */
export interface ExpertA2aFit extends FamilyFit {
  expert_alltoall: A2aCurve[];
}

function curveEntries(c: A2aCurve, rows: number, ctx: FitContext): FittedCoefficient[] {
  const chip = ctx.chip.name;
  const lanes = [...new Set(ctx.inputs.map((i) => i.lane))];
  const filter = `mode=${c.mode} phase=${c.phase} ranks=${c.ranks} nodes=1${c.mode === 'normal' ? ` sms=${DEEPEP_NORMAL_SMS}` : ''}`;
  const prov = provenance(ctx, lanes, filter, rows);
  const r4 = (x: number) => roundSig(x, 4);
  const evidence: Evidence = {
    family: 'expert_alltoall',
    inputs: prov.inputs,
    ci_method: 'bootstrap',
    bootstrap: { resamples: ctx.bootstrap.resamples, seed: ctx.bootstrap.seed },
    train_error: { geo: r4(c.train.geo), mape_pct: r4(c.train.mape_pct), n: c.train.n },
    holdout_error: {
      geo: r4(c.holdout.geo),
      mape_pct: r4(c.holdout.mape_pct),
      n: c.holdout.n,
      split: `largest ${A2A_HOLDOUT_FRACTION * 100}% of message sizes (≥ ${Math.round(c.holdout.from_bytes)} B) held out`,
    },
    notes: [
      'law t(b) = max(t0 + b/r_t, b/r_peak), b = bytes one rank sends (docs/fitting.md "Expert-parallel all-to-all")',
    ],
  };
  const entry = (
    value: number,
    ci: [number, number],
    units: CoefficientEntry['units'],
    fitted: boolean,
  ): CoefficientEntry => ({
    value: r4(value),
    units,
    method: 'measured',
    fitted,
    scope: { hardware: [chip] },
    sources: prov.sources,
    ci95: [Math.min(r4(ci[0]), r4(value)), Math.max(r4(ci[1]), r4(value))],
    evidence,
  });
  const set = SET_NAMES.collectives;
  return [
    { set, name: expertA2aName('floor', c, chip), entry: entry(c.t0_us, c.t0_ci95, 'us_per_transfer', true) },
    {
      set,
      name: expertA2aName('transition_rate', c, chip),
      entry: entry(c.r_t_bytes_per_us, c.r_t_ci95, 'bytes_per_us', true),
    },
    {
      set,
      name: expertA2aName('peak_rate', c, chip),
      entry: entry(c.r_peak_bytes_per_us, c.r_peak_ci95, 'bytes_per_us', false),
    },
  ];
}

/**
 * Fit the `expert_alltoall` family for one chip (module comment): every (mode, phase, ranks) curve, three registry
 * entries each. A curve that cannot be fitted is a refusal naming it.
 * @param rows the chip's stored `expert_alltoall` rows
 * @param ctx chip, inputs (provenance) and bootstrap settings
 */
export function fitExpertA2a(rows: readonly ExpertA2aRow[], ctx: FitContext): ExpertA2aFit {
  const out: ExpertA2aFit = { ...emptyFamilyFit('expert_alltoall'), expert_alltoall: [] };
  try {
    out.expert_alltoall = fitA2aCurves(rows, ctx.bootstrap);
  } catch (e) {
    out.refusals.push(`expert_alltoall: ${(e as Error).message}`);
    return out;
  }
  for (const c of out.expert_alltoall) {
    const n = rows.filter((r) => r.mode === c.mode && r.phase === c.phase && r.ranks === c.ranks).length;
    out.coefficients.push(...curveEntries(c, n, ctx));
  }
  return out;
}
