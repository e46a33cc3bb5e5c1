/**
 * Helpers shared by stepcal's own family fitters (GEMM, HBM, attention): repeat reduction,
 * holdout selection, error summaries, a derivative-free minimiser for the log-L1 objective, and
 * the builder of a measured registry entry with its `evidence`. Pure: no I/O, no clock.
 *
 * Rounding (docs/fitting.md): stored values and ci95 bounds use 4 significant digits
 * (`VALUE_DIGITS`); error figures use 4 significant digits too. `roundSig` is monotone, so a
 * rounded ci95 still contains the rounded value.
 */
import type { CoefficientEntry, FitError, Units } from '../core/schemas/registry.ts';
import { geometricError, mapePct, median, roundSig } from '../core/numeric/stats.ts';
import type { FitContext } from './types.ts';

/** Significant digits of stored values and ci95 bounds. */
export const VALUE_DIGITS = 4;

/** Train/holdout error of predictions against measurements (geo ≥ 1, MAPE in percent), rounded. */
export function fitError(pred: readonly number[], meas: readonly number[]): FitError {
  return { geo: roundSig(geometricError(pred, meas), 4), mape_pct: roundSig(mapePct(pred, meas), 4), n: pred.length };
}

/**
 * Reduce repeated measurements of the same configuration to their median latency, so symmetric
 * noise on repeats cannot bias a fit. Keeps the first row of each group (with the median latency)
 * in first-seen order.
 */
export function reduceRepeats<T extends { latency_us: number }>(rows: readonly T[], key: (r: T) => string): T[] {
  const groups = new Map<string, { first: T; lats: number[] }>();
  for (const r of rows) {
    const k = key(r);
    const g = groups.get(k);
    if (g) g.lats.push(r.latency_us);
    else groups.set(k, { first: r, lats: [r.latency_us] });
  }
  const out: T[] = [];
  for (const g of groups.values()) out.push(g.lats.length === 1 ? g.first : { ...g.first, latency_us: median(g.lats) });
  return out;
}

/**
 * Deterministic holdout of whole values along one dimension: of the sorted distinct values, every
 * fourth one starting at the second (indices 1, 5, 9, ...) is held out. With fewer than 4 distinct
 * values nothing is held out (the caller reports "no holdout").
 */
export function holdoutValues<T extends number | string>(values: Iterable<T>): Set<T> {
  const distinct = [...new Set(values)].sort((a, b) =>
    typeof a === 'number' && typeof b === 'number' ? a - b : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0,
  );
  const out = new Set<T>();
  if (distinct.length < 4) return out;
  for (let i = 1; i < distinct.length; i += 4) out.add(distinct[i]!);
  return out;
}

/**
 * Compass (pattern) search minimiser: tries ±step along each coordinate, keeps improvements, halves
 * the steps when none helps. Derivative-free, so it handles the non-smooth mean |ln(pred/meas)|
 * objective. Deterministic.
 */
export function patternSearch(
  f: (p: readonly number[]) => number,
  x0: readonly number[],
  step0: readonly number[],
  opts: { minStep?: number; maxEvals?: number } = {},
): { x: number[]; value: number; evals: number } {
  const minStep = opts.minStep ?? 1e-4;
  const maxEvals = opts.maxEvals ?? 2000;
  const x = [...x0];
  const step = [...step0];
  let best = f(x);
  let evals = 1;
  while (evals < maxEvals) {
    let improved = false;
    for (let i = 0; i < x.length && evals < maxEvals; i++) {
      for (const dir of [1, -1]) {
        const y = [...x];
        y[i] = y[i]! + dir * step[i]!;
        const v = f(y);
        evals++;
        if (v < best) {
          best = v;
          x[i] = y[i]!;
          improved = true;
          break;
        }
      }
    }
    if (!improved) {
      let allSmall = true;
      for (let i = 0; i < step.length; i++) {
        step[i] = step[i]! / 2;
        if (step[i]! > minStep) allSmall = false;
      }
      if (allSmall) break;
    }
  }
  return { x, value: best, evals };
}

/**
 * Generating-set search with step expansion (a derivative-free minimiser for the non-smooth log-L1
 * objective of two or more correlated parameters). Polls ±step along every coordinate AND every
 * pairwise diagonal (e_i ± e_j)/√2, trying the last successful direction first; on success the
 * step doubles (capped at `maxStep`, default `step0`), so the search walks along a diagonal valley in a few moves; on
 * failure it halves, until below `minStep`. The coordinate-only `patternSearch` stalls in such
 * valleys: on l40s hbm_derate (floor and rate trade off along a diagonal) it stopped at
 * derate 0.8397 / floor 10.0 µs while the optimum is 0.8384 / 8.55 µs (objective 0.038054 vs
 * 0.038019), which is what pushed every bootstrap bound to one side of the value (docs/fitting.md).
 * Deterministic.
 */
export function gssMinimize(
  f: (p: readonly number[]) => number,
  x0: readonly number[],
  step0: number,
  opts: { minStep?: number; maxEvals?: number; maxStep?: number } = {},
): { x: number[]; value: number; evals: number } {
  const minStep = opts.minStep ?? 1e-6;
  const maxStep = opts.maxStep ?? step0;
  const maxEvals = opts.maxEvals ?? 4000;
  const n = x0.length;
  const dirs: number[][] = [];
  for (let i = 0; i < n; i++) dirs.push(Array.from({ length: n }, (_, k) => (k === i ? 1 : 0)));
  for (let i = 0; i < n; i++)
    for (let j = i + 1; j < n; j++)
      for (const sj of [1, -1]) dirs.push(Array.from({ length: n }, (_, k) => (k === i ? Math.SQRT1_2 : k === j ? sj * Math.SQRT1_2 : 0)));
  let x = [...x0];
  let best = f(x);
  let evals = 1;
  let step = step0;
  let last = 0;
  while (evals < maxEvals && step >= minStep) {
    let moved = false;
    const order = [last, ...dirs.keys()].filter((d, i, a) => a.indexOf(d) === i);
    poll: for (const d of order) {
      for (const sign of [1, -1]) {
        const y = x.map((v, k) => v + sign * step * dirs[d]![k]!);
        const v = f(y);
        evals++;
        if (v < best) {
          best = v;
          x = y;
          moved = true;
          if (sign < 0) dirs[d] = dirs[d]!.map((c) => -c);
          last = d;
          break poll;
        }
        if (evals >= maxEvals) break poll;
      }
    }
    step = moved ? Math.min(step * 2, maxStep) : step / 2;
  }
  return { x, value: best, evals };
}

/** A description of the rows an entry was fitted on. */
export interface RowsUsed {
  filter: string;
  rows_used: number;
}

/** Fields of a measured entry a fitter supplies. */
export interface MeasuredSpec {
  value: number;
  units: Units;
  family: string;
  ctx: FitContext;
  /** Which rows of the context's inputs were used (filter in words, count). */
  used: RowsUsed;
  ci95?: [number, number];
  ci_method: 'bootstrap' | 'lm_covariance' | 'quantiles' | 'none';
  train: FitError;
  holdout?: FitError & { split: string };
  notes?: string[];
  /** `fitted: false` for order statistics (medians of ratios). Default true. */
  fitted?: boolean;
}

/** Inputs of the context that belong to `family` (by file-name prefix), for provenance. */
export function familyInputs(ctx: FitContext, family: string): FitContext['inputs'] {
  if (!family) return ctx.inputs;
  return ctx.inputs.filter((i) => i.file.split('/').pop()!.startsWith(family + '.'));
}

/**
 * Build a measured CoefficientEntry in BLIS's layout, with stepcal's `evidence` key. Values and
 * ci95 bounds are rounded to `VALUE_DIGITS` significant digits.
 */
export function measuredEntry(s: MeasuredSpec, inputFamily = s.family): CoefficientEntry {
  const inputs = familyInputs(s.ctx, inputFamily);
  const value = roundSig(s.value, VALUE_DIGITS);
  const lane = inputs[0]?.lane;
  const entry: CoefficientEntry = {
    value,
    units: s.units,
    method: 'measured',
    fitted: s.fitted ?? true,
    scope: { hardware: [s.ctx.chip.name] },
    sources: inputs.map((i) => ({
      kind: 'model' as const,
      cite: `${i.file} (sha256 ${i.sha256.slice(0, 12)}; ${s.used.filter}; ${s.used.rows_used} rows)`,
      role: 'primary' as const,
    })),
  };
  if (s.ci95 && Number.isFinite(s.ci95[0]) && Number.isFinite(s.ci95[1])) {
    entry.ci95 = [roundSig(s.ci95[0], VALUE_DIGITS), roundSig(s.ci95[1], VALUE_DIGITS)];
  }
  entry.evidence = {
    family: s.family,
    ...(lane !== undefined ? { lane } : {}),
    inputs: inputs.map((i) => ({ file: i.file, sha256: i.sha256, filter: s.used.filter, rows_used: s.used.rows_used })),
    ci_method: s.ci_method,
    ...(s.ci_method === 'bootstrap' ? { bootstrap: { resamples: s.ctx.bootstrap.resamples, seed: s.ctx.bootstrap.seed } } : {}),
    train_error: s.train,
    ...(s.holdout ? { holdout_error: s.holdout } : {}),
    ...(s.notes && s.notes.length ? { notes: s.notes } : {}),
  };
  return entry;
}

/** Format a number for reports: 4 significant digits, no exponent for ordinary magnitudes. */
export function fmt(x: number, digits = 4): string {
  if (!Number.isFinite(x)) return String(x);
  const r = roundSig(x, digits);
  return Math.abs(r) >= 1e-3 && Math.abs(r) < 1e15 ? String(r) : r.toExponential(digits - 1);
}

/** Deterministic thinning for plots: at most `max` items, evenly strided. */
export function thin<T>(items: readonly T[], max: number): T[] {
  if (items.length <= max) return [...items];
  const out: T[] = [];
  const stride = items.length / max;
  for (let i = 0; i < max; i++) out.push(items[Math.floor(i * stride)]!);
  return out;
}

/** Quantiles (type-7) of bootstrap estimates, or NaN bounds when none succeeded. */
export function ciFromEstimates(values: readonly number[]): [number, number] {
  const v = values.filter(Number.isFinite);
  if (v.length === 0) return [NaN, NaN];
  const s = [...v].sort((a, b) => a - b);
  const q = (p: number) => {
    const h = (s.length - 1) * p;
    const lo = Math.floor(h);
    const hi = Math.ceil(h);
    return s[lo]! + (h - lo) * (s[hi]! - s[lo]!);
  };
  return [q(0.025), q(0.975)];
}
