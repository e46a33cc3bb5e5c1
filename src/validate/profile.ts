/**
 * Engine-profile fit (issue 16): one engine's host terms and compute-efficiency term s, fitted on a
 * declared set of training rows of already priced steps, with the composition chosen on those
 * training rows only. Used by `stepcal fit engine` (all training rows of every deployment given) and
 * by the validation tiers (one fit per fold). Pure given a pricer factory.
 *
 * Per composition (law: src/core/laws/host.ts `engineHostUs`; estimators: ./hostfit.ts):
 * - NoOverlap: host terms and s by linear weighted least squares (s · T_SM is one more regressor);
 * - CMOverlap: s by the bounded 1-D search of `fitHostTermsWithScaleSearch`, the host terms by
 *   weighted least squares inside each trial; the CMOverlap price at s comes from `ScaledCmCache`;
 * - Overlap: host terms only (s does not enter linearly).
 * Every composition shares one large-step collective threshold, chosen first (`chooseLargeStepBytes`).
 * DECISION, composition rule: the composition with the lowest training RMS of the relative residual
 * (the objective every fit minimises; ties → the earlier of NoOverlap, CMOverlap, Overlap). The scored
 * rows never enter the choice.
 */
import { groupBy, type7Sorted } from '../core/numeric/stats.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { engineHostColumns, LARGE_STEP_MESSAGE_BYTES_GRID } from '../core/laws/host.ts';
import {
  applyHostTerms,
  atLargeStepBytes,
  engineSmExtraUs,
  fitHostTerms,
  fitHostTermsWithScaleSearch,
  type HostFeatures,
  type HostWeighting,
  smScaleFor,
} from './hostfit.ts';
import { cmNohostAt, nohostOf, type Priced, type ValidationDeps } from './priced.ts';
import type { StepTermsLog } from '../pricer/terms-log.ts';
import { COMPOSITIONS, type Composition, type HostFitEngine } from './types.ts';

/** Grid steps per doubling of s in the CMOverlap price cache (2^(1/12) ≈ 5.9 % apart). */
const CACHE_STEPS_PER_OCTAVE = 12;

/**
 * CMOverlap price without host of every priced row at engine scale s, µs. Exact on the grid
 * s = 2^(k/12) (a grid point's value of a row is `cmNohostAt` at s: the price a fresh pricer built with
 * `sm_scale = s` gives, bit for bit, and is kept); between grid points, linear in s between the two
 * neighbours (the price is a sum of per-layer max(s · T_SM, T_HBM) terms, piecewise linear in s).
 * Shared by every fold of a validation. A grid point is filled lazily, one group of rows at a time
 * (the rows sharing a recorded log, re-composed by one walk of it; every row without a log as one
 * group): a fold's search reads only its training rows, so the other chip's rows are re-composed only
 * at the grid points tier (c)'s search visits, and this chip's only at those its folds visit (issue 17;
 * each value is the same as filling the whole grid point: `cmNohostAt` of a row does not depend on
 * which other rows are asked with it). The search's coarse grid 2^(k/3) falls on cache points.
 */
export class ScaledCmCache {
  /** Per grid point k, per row, the value (NaN = not yet computed). */
  private readonly at_k = new Map<number, Float64Array>();
  /** Per row, the rows computed together with it (the same array object for a whole group). */
  private readonly groupOf: ReadonlyArray<readonly number[]>;
  constructor(
    private readonly P: Priced,
    private readonly deps: ValidationDeps,
  ) {
    const byLog = groupBy<number, StepTermsLog | undefined>(
      P.rows.map((_, i) => i),
      (i) => P.terms[i],
    );
    this.groupOf = P.rows.map((_, i) => byLog.get(P.terms[i])!);
  }

  private grid(k: number, i: number): number {
    let g = this.at_k.get(k);
    if (!g) {
      g = new Float64Array(this.P.rows.length).fill(Number.NaN);
      this.at_k.set(k, g);
    }
    const v = g[i]!;
    if (!Number.isNaN(v)) return v;
    const idx = this.groupOf[i]!;
    const vals = cmNohostAt(this.P, this.deps, idx, 2 ** (k / CACHE_STEPS_PER_OCTAVE));
    idx.forEach((j, n) => {
      g[j] = vals[n]!;
    });
    return g[i]!;
  }

  /** CMOverlap without host of row `i` at scale `s` (> 0), µs. */
  at(i: number, s: number): number {
    const x = Math.log2(s) * CACHE_STEPS_PER_OCTAVE;
    const k0 = Math.floor(x + 1e-9);
    if (Math.abs(x - k0) < 1e-9) return this.grid(k0, i);
    const s0 = 2 ** (k0 / CACHE_STEPS_PER_OCTAVE);
    const s1 = 2 ** ((k0 + 1) / CACHE_STEPS_PER_OCTAVE);
    const y0 = this.grid(k0, i);
    const y1 = this.grid(k0 + 1, i);
    return y0 + ((y1 - y0) * (s - s0)) / (s1 - s0);
  }
}

/** One engine profile fitted on training rows `train` (indices into the priced rows). */
export interface ProfileFit {
  engine: string;
  /** The composition chosen on the training rows. */
  composition: Composition;
  /** The fit of every composition (NoOverlap and CMOverlap with s). */
  fits: Record<Composition, HostFitEngine>;
  /** Training RMS of the relative residual per composition, percent (the choice's evidence). */
  objective_rel_pct: Record<Composition, number>;
  train: number[];
}

function fitOne(
  P: Priced,
  cache: ScaledCmCache,
  engine: string,
  idx: readonly number[],
  c: Composition,
  weighting: HostWeighting,
  large_step_message_bytes: number,
  chipScales = false,
): HostFitEngine {
  const measured_us = idx.map((i) => P.rows[i]!.measured_us);
  const feats = idx.map((i) => atLargeStepBytes(P.features[i]!, large_step_message_bytes));
  let f: HostFitEngine;
  if (c === 'cm_overlap') {
    const at = (s: number) => idx.map((i) => cache.at(i, s));
    f = fitHostTermsWithScaleSearch(engine, c, feats, measured_us, at, 'fraction', weighting);
    if (chipScales) f = withChipScales(P, cache, idx, feats, measured_us, weighting, f);
  } else {
    const resid = idx.map((i) => P.rows[i]!.measured_us - nohostOf(P, i, c));
    f = fitHostTerms(engine, c, feats, resid, 'fraction', { weighting, measured_us, engineSm: c === 'no_overlap' });
  }
  return { ...f, large_step_message_bytes };
}

/**
 * Most rounds of the per-chip s coordinate descent, and the relative move of every chip's s below
 * which it stops (acc19: on the Splitwise folds the third round moves no tier digit; the generated
 * rows of test/validate/tiers.test.ts need about six).
 */
const CHIP_SCALE_TOL = 1e-4;
const CHIP_SCALE_ROUNDS = 8;

/**
 * CMOverlap with one s per chip of the training rows (acc19; docs/validation.md "s per chip"): from
 * the pooled fit, coordinate descent over the chips (sorted), `CHIP_SCALE_ROUNDS` rounds: each chip's
 * s by the same bounded 1-D search as the pooled one, the other chips' s held, the host terms shared
 * and refitted at every trial. A chip whose rows do not depend on s keeps the pooled s. Rows of one
 * chip → the pooled fit unchanged. The result keeps the pooled `sm_scale` (for a chip absent here).
 */
function withChipScales(
  P: Priced,
  cache: ScaledCmCache,
  idx: readonly number[],
  feats: readonly HostFeatures[],
  measured_us: readonly number[],
  weighting: HostWeighting,
  pooled: HostFitEngine,
): HostFitEngine {
  const chips = [...new Set(idx.map((i) => P.rows[i]!.chip))].sort();
  if (chips.length < 2 || !pooled.sm_scale?.identified) return pooled;
  const s: Record<string, number> = Object.fromEntries(chips.map((c) => [c, pooled.sm_scale!.value]));
  let f = pooled;
  for (let round = 0, moved = true; round < CHIP_SCALE_ROUNDS && moved; round++) {
    moved = false;
    for (const chip of chips) {
      const at = (x: number) =>
        idx.map((i) => {
          const c = P.rows[i]!.chip;
          return cache.at(i, c === chip ? x : s[c]!);
        });
      const g = fitHostTermsWithScaleSearch(pooled.engine, 'cm_overlap', feats, measured_us, at, 'fraction', weighting);
      if (!g.sm_scale?.identified) continue;
      if (Math.abs(g.sm_scale.value / s[chip]! - 1) > CHIP_SCALE_TOL) moved = true;
      s[chip] = g.sm_scale.value;
      f = g;
    }
  }
  return { ...f, sm_scale: pooled.sm_scale, sm_scale_by_chip: s };
}

/**
 * The large-step threshold (bytes of a step's collective message, one of `LARGE_STEP_MESSAGE_BYTES_GRID`) of a fit on rows `idx`:
 * the one whose large-step column, added alone to the NoOverlap fit with s without it (weighted least
 * squares, terms ≥ 0), lowers its training objective most: the reduction of the weighted residual sum of
 * squares by one column x is (x⊥ · r)² / |x⊥|², x⊥ = x less its projection on the fit's active columns,
 * r the fit's weighted residual; a column whose least-squares coefficient would be negative
 * (x⊥ · r ≤ 0) lowers nothing. Ties (and no reduction anywhere) → the smaller threshold. One fit and six
 * projections instead of six fits (validate's cost, docs/performance.md "acc18"). DECISION
 * (docs/validation.md "Large-step collective factor"): chosen on the training rows only, once per fit,
 * and shared by every composition.
 */
export function chooseLargeStepBytes(
  P: Priced,
  engine: string,
  idx: readonly number[],
  weighting: HostWeighting = 'relative',
): number {
  const measured_us = idx.map((i) => P.rows[i]!.measured_us);
  const w = measured_us.map((m) => (weighting === 'relative' ? 1 / m : 1));
  const feats = idx.map((i) => P.features[i]!);
  const resid = idx.map((i) => P.rows[i]!.measured_us - P.priced[i]!.no_overlap_nohost_us);
  const f = fitHostTerms(engine, 'no_overlap', feats, resid, 'fraction', { weighting, measured_us, engineSm: true });
  const r = feats.map((x, j) => (resid[j]! - applyHostTerms(f, x) - engineSmExtraUs(f, x)) * w[j]!);
  const active: number[][] = [];
  f.terms.forEach((t, k) => {
    if (t.value_us !== 0) active.push(feats.map((x, j) => engineHostColumns(x)[k]! * w[j]!));
  });
  if (f.sm_scale?.identified) active.push(feats.map((x, j) => (x.sm_us ?? 0) * w[j]!));
  const basis = orthonormalBasis(active);
  let best = LARGE_STEP_MESSAGE_BYTES_GRID[0]!;
  let bestGain = 0;
  for (const t of LARGE_STEP_MESSAGE_BYTES_GRID) {
    const x = feats.map((v, j) => (atLargeStepBytes(v, t).large_step_nvlink_us ?? 0) * w[j]!);
    const norm0 = Math.sqrt(dot(x, x));
    for (let pass = 0; pass < 2; pass++) for (const q of basis) axpy(-dot(q, x), q, x);
    const xx = dot(x, x);
    const c = dot(x, r);
    const gain = xx > 1e-18 * norm0 * norm0 && c > 0 ? (c * c) / xx : 0;
    if (gain > bestGain * (1 + 1e-12)) {
      best = t;
      bestGain = gain;
    }
  }
  return best;
}

function dot(a: readonly number[], b: readonly number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/** x ← x + a · q, in place. */
function axpy(a: number, q: readonly number[], x: number[]): void {
  for (let i = 0; i < x.length; i++) x[i] = x[i]! + a * q[i]!;
}

/** An orthonormal basis of the columns (Gram–Schmidt, orthogonalised twice; dependent columns dropped). */
function orthonormalBasis(cols: readonly number[][]): number[][] {
  const basis: number[][] = [];
  for (const c of cols) {
    const v = [...c];
    const norm0 = Math.sqrt(dot(v, v));
    for (let pass = 0; pass < 2; pass++) for (const q of basis) axpy(-dot(q, v), q, v);
    const norm = Math.sqrt(dot(v, v));
    if (norm > 1e-9 * norm0) basis.push(v.map((x) => x / norm));
  }
  return basis;
}

/**
 * Fit one engine's profile on the training rows `train` for every composition, and choose the
 * composition with the lowest training objective (module comment).
 * @param train indices into `P` (every one of engine `engine`; at least one)
 * @param chipScales CMOverlap with an s per chip of the training rows (`withChipScales`; default: one s)
 */
export function fitProfile(
  P: Priced,
  cache: ScaledCmCache,
  engine: string,
  train: readonly number[],
  weighting: HostWeighting = 'relative',
  chipScales = false,
): ProfileFit {
  const fits = {} as Record<Composition, HostFitEngine>;
  const objective_rel_pct = {} as Record<Composition, number>;
  let composition: Composition = COMPOSITIONS[0];
  const large = chooseLargeStepBytes(P, engine, train, weighting);
  for (const c of COMPOSITIONS) {
    fits[c] = fitOne(P, cache, engine, train, c, weighting, large, chipScales);
    const v = weighting === 'relative' ? fits[c].train_rms_rel_pct! : fits[c].train_rms_us;
    objective_rel_pct[c] = Number.isFinite(v) ? v : Infinity;
    if (objective_rel_pct[c] < objective_rel_pct[composition]) composition = c;
  }
  return { engine, composition, fits, objective_rel_pct, train: [...train] };
}

/** Priced µs of row `i` under composition `c` with fit `f` (host from the engine law, s where fitted). */
export function predictWithFit(P: Priced, cache: ScaledCmCache, i: number, c: Composition, f: HostFitEngine): number {
  const feat = P.features[i]!;
  const host = applyHostTerms(f, feat);
  if (c === 'no_overlap') return P.priced[i]!.no_overlap_nohost_us + engineSmExtraUs(f, feat) + host;
  if (c === 'cm_overlap') return cache.at(i, smScaleFor(f, P.rows[i]!.chip)) + host;
  return P.priced[i]!.overlap_nohost_us + host;
}

/** Priced µs of row `i` under the profile's chosen composition. */
export function predictWithProfile(P: Priced, cache: ScaledCmCache, i: number, fit: ProfileFit): number {
  return predictWithFit(P, cache, i, fit.composition, fit.fits[fit.composition]);
}

/**
 * Bootstrap ci95 of the chosen composition's terms and s: `resamples` seeded resamples of the
 * training rows (with replacement), each refitted the same way; ci95 = type-7 2.5 / 97.5 percentiles.
 * Each refit keeps `large_step_message_bytes` at the value chosen on all the training rows (it is not
 * re-chosen per resample), so every ci95, the large-step factor's above all, is conditional on that
 * threshold (docs/validation.md "Engine profiles").
 * @returns per term name (and `sm_scale`) its [lo, hi]
 */
export function profileCi95(
  P: Priced,
  cache: ScaledCmCache,
  fit: ProfileFit,
  weighting: HostWeighting = 'relative',
  resamples = 200,
  seed = 16,
): Record<string, [number, number]> {
  const c = fit.composition;
  const chips = Object.keys(fit.fits[c].sm_scale_by_chip ?? {});
  const est = resampleEstimates(fit.train.length, resamples, seed, (draw) => {
    const idx = Array.from(draw, (j) => fit.train[j]!);
    const f = fitOne(P, cache, fit.engine, idx, c, weighting, fit.fits[c].large_step_message_bytes!, chips.length > 0);
    return [...f.terms.map((t) => t.value_us), f.sm_scale?.value ?? 1, ...chips.map((ch) => smScaleFor(f, ch))];
  });
  const names = [...fit.fits[c].terms.map((t) => t.name), 'sm_scale', ...chips.map((ch) => `sm_scale:${ch}`)];
  const out: Record<string, [number, number]> = {};
  names.forEach((n, j) => {
    const v = est.map((e) => e[j]!).sort((a, b) => a - b);
    out[n] = v.length ? [type7Sorted(v, 0.025), type7Sorted(v, 0.975)] : [NaN, NaN];
  });
  return out;
}
