/**
 * Collective fitter: floor, transition rate and peak rate per (op, dtype, ranks) for one chip
 * (issue 3 "Collectives"; reference §1.3 names, §4.7 law, §6.2 lanes, §6.3 procedure).
 *
 * - Curves are fitted per (op, dtype class, ranks, backend, lane), repeats reduced with the median.
 *   dtype class: `fp16` for any 16-bit float (fp16, bf16, half), `int8` for int8; others are skipped.
 * - The registry gets one triple per (op, dtype class, ranks): fp16 all_reduce from vLLM's custom
 *   all-reduce under CUDA graph (backend `custom_graph`) where measured, NCCL otherwise; every other
 *   op and int8 from NCCL. Exception (vLLM's own rule, reference §6.2): on a chip whose GPUs talk over
 *   PCIe (no NVLink), vLLM disables custom all-reduce above 2 ranks, so NCCL is used there.
 * - Floors must not fall as ranks grow (a refusal for the selected backend, a warning otherwise).
 * - Holdout along rank width: leave-one-width-out (floor line a + b·(n−1) from the other widths,
 *   rates from the nearest other width).
 * - 16-rank entries are `assumed` width extrapolations made by collective-width.ts (floor
 *   line over the measured widths of one lane, rates copied from the widest, widest width held out),
 *   as BLIS ships them; without them BLIS's kernel cannot price tp = 16. Where that library refuses
 *   (e.g. widths measured on two lanes) no 16-rank entry is written and the refusal is reported.
 *
 * Units: message_bytes bytes, latency µs, rates bytes/µs.
 */
import { isPcieOnly } from '../core/catalog/chip.ts';
import { groupBy, roundSig } from '../core/numeric/stats.ts';
import type { CoefficientEntry, Evidence } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { CollectiveRow } from '../measurements/schema.ts';
import {
  SMALL_MESSAGE_BYTES,
  bootstrapTransitionRate,
  fitCurve,
  leaveOneWidthOut,
  reduceRepeats,
  type CurveFit,
  type CurvePoint,
  type WidthHoldout,
} from './collective-curve.ts';
import { type FloorRepair, repairFloorInversions } from './collective-isotonic.ts';
import { fmt, provenance } from './collective-provenance.ts';
import { extrapolateWidth, type WidthExtrapolation, type WidthPoint } from './collective-width.ts';
import type { FamilyFit, FitContext, FittedCoefficient } from './types.ts';

/** Width the assumed extrapolation targets (BLIS's kernel needs an exact entry for tp = 16). */
export const EXTRAPOLATED_RANKS = 16;

/** Map an element dtype to the registry's collective dtype class (`fp16` or `int8`), or undefined. */
export function collectiveDtypeClass(dtype: string): 'fp16' | 'int8' | undefined {
  const d = dtype.trim().toLowerCase();
  if (['fp16', 'bf16', 'half', 'float16', 'bfloat16'].includes(d)) return 'fp16';
  if (d === 'int8') return 'int8';
  return undefined;
}

/** Registry name of a collective coefficient (reference §1.3). */
export function collectiveName(
  kind: 'floor' | 'peak_rate' | 'transition_rate',
  op: string,
  dtype: string,
  ranks: number,
  chip: string,
): string {
  return `collective_${kind}_${op}_${dtype}_${ranks}rank_${chip.replace(/-/g, '_')}`;
}

/** One fitted configuration. */
export interface CollectiveCurve {
  op: string;
  dtype: 'fp16' | 'int8';
  ranks: number;
  backend: string;
  lane: string;
  rows: number;
  points: CurvePoint[];
  fit: CurveFit;
  r_t_ci95: [number, number];
  r_t_ci_widened: boolean;
  bootstrap_ok: number;
  holdout?: WidthHoldout;
}

const key = (...xs: Array<string | number>) => xs.join('|');

/** Which backend the registry uses for (op, dtype, ranks), given what was measured. */
export function selectBackend(
  op: string,
  dtype: string,
  ranks: number,
  measured: ReadonlySet<string>,
  pcieOnly: boolean,
): string | undefined {
  if (op === 'all_reduce' && dtype === 'fp16' && measured.has('custom_graph') && !(pcieOnly && ranks > 2))
    return 'custom_graph';
  if (measured.has('nccl')) return 'nccl';
  if (measured.has('custom_graph')) return 'custom_graph';
  return undefined;
}

/** Rows of one configuration (op, dtype class, ranks, backend, lane). */
interface ConfigRows {
  op: string;
  dtype: 'fp16' | 'int8';
  ranks: number;
  backend: string;
  lane: string;
  rows: CollectiveRow[];
}

/**
 * Group single-node rows with a registry dtype class by configuration, then keep one lane per
 * (op, dtype, ranks, backend): the one with most rows (ties → greatest name), warning about the rest.
 */
function configurations(rows: readonly CollectiveRow[], warnings: string[]): ConfigRows[] {
  const skippedDtypes = [...new Set(rows.filter((r) => !collectiveDtypeClass(r.dtype)).map((r) => r.dtype))];
  const skippedNodes = rows.filter((r) => collectiveDtypeClass(r.dtype) && r.nodes > 1).length;
  const usable = rows.filter((r) => collectiveDtypeClass(r.dtype) && !(r.nodes > 1));
  if (skippedDtypes.length)
    warnings.push(`collective: skipped dtypes without a registry class: ${skippedDtypes.sort().join(', ')}`);
  if (skippedNodes)
    warnings.push(`collective: skipped ${skippedNodes} multi-node rows (registry entries are single-node curves)`);
  const groups = groupBy(usable, (r) => key(r.op, collectiveDtypeClass(r.dtype)!, r.ranks, r.backend, r.lane));
  const configs: ConfigRows[] = [...groups.values()].map((g) => ({
    op: g[0]!.op,
    dtype: collectiveDtypeClass(g[0]!.dtype)!,
    ranks: g[0]!.ranks,
    backend: g[0]!.backend,
    lane: g[0]!.lane,
    rows: g,
  }));
  const byCfg = new Map<string, ConfigRows>();
  for (const g of configs.sort((a, b) => (a.lane < b.lane ? -1 : a.lane > b.lane ? 1 : 0))) {
    const k = key(g.op, g.dtype, g.ranks, g.backend);
    const prev = byCfg.get(k);
    if (prev) {
      warnings.push(`collective: ${k} measured in lanes ${prev.lane} and ${g.lane}; one collection per family is used`);
      if (g.rows.length < prev.rows.length) continue;
    }
    byCfg.set(k, g);
  }
  return [...byCfg.values()].sort(cmpCfg);
}

/** Fit one configuration's curve and bootstrap its transition rate; a curve that cannot be fitted is a warning. */
function fitConfiguration(g: ConfigRows, ctx: FitContext, warnings: string[]): CollectiveCurve | undefined {
  const points = reduceRepeats(g.rows.map((r) => ({ message_bytes: r.message_bytes, latency_us: r.latency_us })));
  let fit: CurveFit;
  try {
    fit = fitCurve(points);
  } catch (e) {
    warnings.push(`collective: ${key(g.op, g.dtype, g.ranks, g.backend, g.lane)} not fitted: ${(e as Error).message}`);
    return undefined;
  }
  const bs = bootstrapTransitionRate(points, fit, ctx.bootstrap);
  const { op, dtype, ranks, backend, lane } = g;
  return {
    op,
    dtype,
    ranks,
    backend,
    lane,
    rows: g.rows.length,
    points,
    fit,
    r_t_ci95: bs.ci95,
    r_t_ci_widened: bs.widened,
    bootstrap_ok: bs.ok,
  };
}

/** The registry curve per (op, dtype, ranks): the backend `selectBackend` picks among those measured. */
function selectRegistryCurves(curves: readonly CollectiveCurve[], pcieOnly: boolean): CollectiveCurve[] {
  const selected: CollectiveCurve[] = [];
  const opDtype = groupBy(curves, (c) => key(c.op, c.dtype));
  for (const [, list] of [...opDtype.entries()].sort()) {
    const widths = [...new Set(list.map((c) => c.ranks))].sort((a, b) => a - b);
    for (const n of widths) {
      const here = list.filter((c) => c.ranks === n);
      const be = selectBackend(here[0]!.op, here[0]!.dtype, n, new Set(here.map((c) => c.backend)), pcieOnly);
      const c = here.find((x) => x.backend === be);
      if (c) selected.push(c);
    }
  }
  return selected;
}

/** What the collective fit found, for the report. */
export interface CollectiveResult {
  /** Every fitted curve (sorted by op, dtype, backend, ranks), holdouts attached. */
  curves: CollectiveCurve[];
  /** The registry's curves (a subset of `curves`, the same objects). */
  selected: CollectiveCurve[];
  /** Floor-monotonicity violations among curves the registry does not use. */
  unselected_violations: string[];
  /** Registry floor inversions repaired within noise or refused beyond it (collective-isotonic.ts). */
  floor_repairs: FloorRepair[];
  width_outcomes: CollectiveWidthOutcome[];
  /** No NVLink (core/catalog/chip.ts `isPcieOnly`). */
  pcie_only: boolean;
  bootstrap: { resamples: number; seed: number };
}

/** Collective family result. */
export type CollectiveFit = FamilyFit & { result: CollectiveResult };

/**
 * Fit every collective configuration in `rows` and emit the registry triples.
 * Never throws on data problems: unfittable curves become warnings; a floor that falls as ranks grow
 * on a registry (selected) configuration becomes a refusal.
 */
export function fitCollectives(rows: CollectiveRow[], ctx: FitContext): CollectiveFit {
  const chip = ctx.chip.name;
  const warnings: string[] = [];
  const refusals: string[] = [];
  const pcieOnly = isPcieOnly(ctx.chip);
  const curves = configurations(rows, warnings).flatMap((g) => fitConfiguration(g, ctx, warnings) ?? []);
  // Holdout along rank width, per (op, dtype, backend).
  const families = groupBy(curves, (c) => key(c.op, c.dtype, c.backend));
  for (const fam of families.values()) {
    for (const h of leaveOneWidthOut(fam)) {
      const c = fam.find((x) => x.ranks === h.ranks);
      if (c) c.holdout = h;
    }
  }
  const chosen = selectRegistryCurves(curves, pcieOnly);
  const before = floorMonotonicity(chosen);
  // Noise is not a refusal: within-noise inversions are pooled (isotonic), beyond-noise ones refuse the wider curve.
  const { repairs, refused } = repairFloorInversions(chosen);
  const selected = chosen.filter((c) => !refused.includes(c));
  for (const r of repairs)
    if (r.status === 'refused')
      refusals.push(
        `${collectiveName('floor', r.op, r.dtype, r.ranks[1]!, chip)}: collective floor falls as ranks grow on ${chip}: ${r.note}`,
      );
    else warnings.push(`collective: repaired within noise: ${r.note}`);
  const unselected = [...families.values()].flatMap((fam) => floorMonotonicity(fam)).filter((v) => !before.includes(v));
  for (const v of unselected) warnings.push(`collective: floor falls as ranks grow (not a registry curve): ${v}`);
  for (const c of selected) {
    if (c.fit.r_t_bytes_per_us > c.fit.r_peak_bytes_per_us)
      refusals.push(`collective: r_t above r_peak for ${label(c)}`);
  }
  const widths = extrapolateSelectedWidths(selected, ctx);
  for (const o of widths.outcomes)
    if (o.result.status === 'refused')
      warnings.push(
        `collective: ${o.op} ${o.dtype} ${EXTRAPOLATED_RANKS}-rank width extrapolation refused (a correct answer; no entry written): ${o.result.reason}`,
      );
  return {
    family: 'collective',
    coefficients: [...selected.flatMap((c) => entriesFor(c, ctx, repairs)), ...widths.coefficients],
    refusals,
    warnings,
    result: {
      curves,
      selected,
      unselected_violations: unselected,
      floor_repairs: repairs,
      width_outcomes: widths.outcomes,
      pcie_only: pcieOnly,
      bootstrap: ctx.bootstrap,
    },
  };
}

function cmpCfg(a: { op: string; dtype: string; ranks: number; backend: string }, b: typeof a): number {
  return (
    a.op.localeCompare(b.op) ||
    a.dtype.localeCompare(b.dtype) ||
    a.backend.localeCompare(b.backend) ||
    a.ranks - b.ranks
  );
}

function label(c: Pick<CollectiveCurve, 'op' | 'dtype' | 'ranks' | 'backend'>): string {
  return `${c.op} ${c.dtype} ${c.ranks}-rank ${c.backend}`;
}

/** Violations "floor(n_i) > floor(n_j) for n_i < n_j" within each (op, dtype, backend) of `curves`. */
export function floorMonotonicity(
  curves: ReadonlyArray<Pick<CollectiveCurve, 'op' | 'dtype' | 'ranks' | 'backend' | 'fit'>>,
): string[] {
  const out: string[] = [];
  const fam = groupBy(curves, (c) => key(c.op, c.dtype));
  for (const list of fam.values()) {
    const s = [...list].sort((a, b) => a.ranks - b.ranks);
    for (let i = 1; i < s.length; i++) {
      const a = s[i - 1]!;
      const b = s[i]!;
      if (b.fit.t0_us < a.fit.t0_us) {
        out.push(
          `${a.op} ${a.dtype}: ${a.ranks}-rank ${a.backend} ${fmt(a.fit.t0_us)} µs > ${b.ranks}-rank ${b.backend} ${fmt(b.fit.t0_us)} µs`,
        );
      }
    }
  }
  return out;
}

function filterText(c: CollectiveCurve): string {
  return `op=${c.op} dtype class=${c.dtype} ranks=${c.ranks} nodes=1 backend=${c.backend} lane=${c.lane}; repeats reduced by median`;
}

/** Errors, provenance and notes every entry of one registry curve shares. */
function curveEvidence(c: CollectiveCurve, ctx: FitContext) {
  const prov = provenance(ctx, [c.lane], filterText(c), c.rows);
  const train = { geo: roundSig(c.fit.geo3, 4), mape_pct: roundSig(c.fit.mape3_pct, 4), n: c.fit.n };
  const holdout = c.holdout
    ? {
        geo: roundSig(c.holdout.geo, 4),
        mape_pct: roundSig(c.holdout.mape_pct, 4),
        n: c.holdout.n,
        split: `leave-one-width-out: ${c.ranks}-rank curve predicted from widths ${c.holdout.from_ranks.join('/')} (floor a+b(n-1), rates from ${c.holdout.rates_from}-rank)`,
      }
    : undefined;
  const baseNotes = [
    `law t(b) = max(t0 + b/r_t, b/r_peak), b in bytes (nccl-tests convention); 2-parameter max(t0, b/r_peak) geo ${fmt(c.fit.geo2)}x, 3-parameter geo ${fmt(c.fit.geo3)}x`,
  ];
  const ev = (extra: Partial<Evidence>): Evidence => ({
    family: 'collective',
    lane: c.lane,
    inputs: prov.inputs,
    train_error: train,
    ...(holdout ? { holdout_error: holdout } : {}),
    ...extra,
  });
  return { sources: prov.sources, baseNotes, ev };
}

/** A measured entry of a curve, rounded to `digits` significant digits (value and ci95). */
function curveEntry(
  value: number,
  ci: [number, number],
  digits: number,
  units: CoefficientEntry['units'],
  fitted: boolean,
  chip: string,
  sources: CoefficientEntry['sources'],
  evidence: Evidence,
): CoefficientEntry {
  return {
    value: roundSig(value, digits),
    units,
    method: 'measured',
    fitted,
    scope: { hardware: [chip] },
    sources,
    ci95: [roundSig(ci[0], digits), roundSig(ci[1], digits)],
    evidence,
  };
}

/** The registry triple (floor, peak rate, transition rate) of one selected curve. */
function entriesFor(c: CollectiveCurve, ctx: FitContext, repairs: readonly FloorRepair[]): FittedCoefficient[] {
  const chip = ctx.chip.name;
  const set = SET_NAMES.collectives;
  const { sources, baseNotes, ev } = curveEvidence(c, ctx);
  const repaired = repairs.find(
    (r) => r.status === 'repaired' && r.op === c.op && r.dtype === c.dtype && r.ranks.includes(c.ranks),
  );
  const floorNote =
    `floor = minimum latency over the ${c.fit.n_small} message sizes <= ${SMALL_MESSAGE_BYTES} B; ci95 = [smallest, second-smallest] of those latencies (a bootstrap of a minimum is degenerate)` +
    (repaired ? `; ${repaired.note} (ci95 widened to contain it)` : '');
  const floor = curveEntry(
    c.fit.t0_us,
    c.fit.t0_ci95,
    4,
    'us_per_transfer',
    false,
    chip,
    sources,
    ev({ ci_method: 'quantiles', notes: [...baseNotes, floorNote] }),
  );
  const peakNote = `peak = largest message_bytes/latency over the sweep (reached at ${c.fit.r_peak_at_bytes} B; a lower bound if unsaturated); ci95 = [second-largest, largest] achieved rate`;
  const peak = curveEntry(
    c.fit.r_peak_bytes_per_us,
    c.fit.r_peak_ci95,
    6,
    'bytes_per_us',
    false,
    chip,
    sources,
    ev({ ci_method: 'quantiles', notes: [...baseNotes, peakNote] }),
  );
  const rtNotes = [
    ...baseNotes,
    'fitted with floor and peak fixed, minimising mean |ln(pred/meas)| over the distinct sizes',
  ];
  if (c.fit.r_t_at_peak) rtNotes.push('optimum sat on the constraint r_t = r_peak');
  if (c.r_t_ci_widened) rtNotes.push('bootstrap percentile interval missed the estimate and was widened to contain it');
  const trans = curveEntry(
    c.fit.r_t_bytes_per_us,
    c.r_t_ci95,
    6,
    'bytes_per_us',
    true,
    chip,
    sources,
    ev({
      ci_method: 'bootstrap',
      bootstrap: { resamples: ctx.bootstrap.resamples, seed: ctx.bootstrap.seed },
      notes: [
        ...rtNotes,
        `bootstrap over message sizes: ${c.bootstrap_ok}/${ctx.bootstrap.resamples} resamples usable`,
      ],
    }),
  );
  // Keep the rate gate exact after rounding.
  if (trans.value > peak.value) trans.value = peak.value;
  return [
    { set, name: collectiveName('floor', c.op, c.dtype, c.ranks, chip), entry: floor },
    { set, name: collectiveName('peak_rate', c.op, c.dtype, c.ranks, chip), entry: peak },
    { set, name: collectiveName('transition_rate', c.op, c.dtype, c.ranks, chip), entry: trans },
  ];
}

/** Outcome of the 16-rank width extrapolation for one (op, dtype), as the report shows it. */
export interface CollectiveWidthOutcome {
  op: string;
  dtype: string;
  result: WidthExtrapolation;
}

/**
 * 16-rank entries through the width extrapolation library (collective-width.ts, also behind `stepcal registry extrapolate widths`, the
 * one implementation of reference §6.3 / issue 5: floor(n) = a + b·(n−1) least squares over the
 * measured widths of ONE lane, rates copied from the widest width, the widest width held out and
 * predicted from the narrower ones; refused across lanes, with fewer than three widths, or when the
 * prediction falls below the widest measured floor). The points are the registry values of the
 * selected curves (rounded as stored), so `stepcal registry extrapolate widths` on the written
 * registry reproduces the same floor, rates and refusals. A refusal writes no entry for that
 * (op, dtype): it is reported (warnings and README), never fatal.
 */
export function extrapolateSelectedWidths(
  selected: readonly CollectiveCurve[],
  ctx: FitContext,
): { coefficients: FittedCoefficient[]; outcomes: CollectiveWidthOutcome[] } {
  const chip = ctx.chip.name;
  const coefficients: FittedCoefficient[] = [];
  const outcomes: CollectiveWidthOutcome[] = [];
  const by = groupBy(selected, (c) => key(c.op, c.dtype));
  for (const k of [...by.keys()].sort()) {
    const s = [...by.get(k)!].sort((a, b) => a.ranks - b.ranks);
    const widest = s[s.length - 1]!;
    if (widest.ranks >= EXTRAPOLATED_RANKS) continue;
    const points: WidthPoint[] = s.map((c) => {
      const peak = roundSig(c.fit.r_peak_bytes_per_us, 6);
      return {
        ranks: c.ranks,
        floor_us: roundSig(c.fit.t0_us, 4),
        peak_rate_bytes_per_us: peak,
        transition_rate_bytes_per_us: Math.min(roundSig(c.fit.r_t_bytes_per_us, 6), peak),
        lane: c.lane,
      };
    });
    const result = extrapolateWidth(chip, widest.op, widest.dtype, points, EXTRAPOLATED_RANKS);
    outcomes.push({ op: widest.op, dtype: widest.dtype, result });
    if (result.status !== 'extrapolated') continue;
    // Provenance of the measured curves the extrapolation rests on (the library names the method).
    const lanes = [...new Set(s.map((c) => c.lane))];
    const prov = provenance(
      ctx,
      lanes,
      `floors of ${s.map((c) => `${c.ranks}-rank ${c.backend}`).join(', ')} (${widest.op} ${widest.dtype}); rates of the ${widest.ranks}-rank curve`,
      s.reduce((a, c) => a + c.rows, 0),
    );
    for (const e of result.entries) {
      coefficients.push({
        set: SET_NAMES.collectives,
        name: e.name,
        entry: {
          ...e.entry,
          sources: [...(e.entry.sources ?? []), ...prov.sources.map((x) => ({ ...x, role: 'supporting' as const }))],
          evidence: { ...e.entry.evidence!, inputs: prov.inputs, ci_method: 'none' },
        },
      });
    }
  }
  return { coefficients, outcomes };
}
