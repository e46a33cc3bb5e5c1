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
 * - 16-rank entries are `assumed` width extrapolations made by src/registry/extrapolate.ts (floor
 *   line over the measured widths of one lane, rates copied from the widest, widest width held out),
 *   as BLIS ships them; without them BLIS's kernel cannot price tp = 16. Where that library refuses
 *   (e.g. widths measured on two lanes) no 16-rank entry is written and the refusal is reported.
 *
 * Units: message_bytes bytes, latency µs, rates bytes/µs.
 */
import type { CollectiveRow } from '../measurements/schema.ts';
import type { CoefficientEntry, Evidence } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { collectiveTime } from '../core/laws/collective.ts';
import { BLIS_COLLECTIVES, BLIS_NCCL_ALLREDUCE_FP16_OLD } from './collective-blis.ts';
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
import { fmt, provenance } from './collective-provenance.ts';
import { extrapolateWidth, type WidthExtrapolation, type WidthPoint } from './collective-width.ts';
import { median, roundSig } from '../core/numeric/stats.ts';
import type { FamilyFit, FitContext, FittedCoefficient } from './types.ts';

export { collectiveTime } from '../core/laws/collective.ts';

/** GPU-to-GPU links at or below this many GB/s per direction are PCIe, not NVLink (PCIe 5.0 x16 = 64). */
export const PCIE_MAX_GB_PER_S_PER_DIR = 64;
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
export function collectiveName(kind: 'floor' | 'peak_rate' | 'transition_rate', op: string, dtype: string, ranks: number, chip: string): string {
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
  if (op === 'all_reduce' && dtype === 'fp16' && measured.has('custom_graph') && !(pcieOnly && ranks > 2)) return 'custom_graph';
  if (measured.has('nccl')) return 'nccl';
  if (measured.has('custom_graph')) return 'custom_graph';
  return undefined;
}

/**
 * Fit every collective configuration in `rows` and emit the registry triples.
 * Never throws on data problems: unfittable curves become warnings; a floor that falls as ranks grow
 * on a registry (selected) configuration becomes a refusal.
 */
export function fitCollectives(rows: CollectiveRow[], ctx: FitContext): FamilyFit {
  const chip = ctx.chip.name;
  const warnings: string[] = [];
  const refusals: string[] = [];
  const pcieOnly = ctx.chip.nvlink_gb_per_s_per_dir <= PCIE_MAX_GB_PER_S_PER_DIR;

  // 1. Group rows by configuration.
  const groups = new Map<string, { op: string; dtype: 'fp16' | 'int8'; ranks: number; backend: string; lane: string; rows: CollectiveRow[] }>();
  const skippedDtypes = new Set<string>();
  let skippedNodes = 0;
  for (const r of rows) {
    const cls = collectiveDtypeClass(r.dtype);
    if (!cls) {
      skippedDtypes.add(r.dtype);
      continue;
    }
    if (r.nodes > 1) {
      skippedNodes++;
      continue;
    }
    const k = key(r.op, cls, r.ranks, r.backend, r.lane);
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { op: r.op, dtype: cls, ranks: r.ranks, backend: r.backend, lane: r.lane, rows: [] }));
    g.rows.push(r);
  }
  if (skippedDtypes.size) warnings.push(`collective: skipped dtypes without a registry class: ${[...skippedDtypes].sort().join(', ')}`);
  if (skippedNodes) warnings.push(`collective: skipped ${skippedNodes} multi-node rows (registry entries are single-node curves)`);

  // One lane per (op, dtype, ranks, backend): the one with most rows (ties → greatest name).
  const byCfg = new Map<string, typeof groups extends Map<string, infer V> ? V : never>();
  for (const g of [...groups.values()].sort((a, b) => (a.lane < b.lane ? -1 : a.lane > b.lane ? 1 : 0))) {
    const k = key(g.op, g.dtype, g.ranks, g.backend);
    const prev = byCfg.get(k);
    if (prev) {
      warnings.push(`collective: ${k} measured in lanes ${prev.lane} and ${g.lane}; one collection per family is used`);
      if (g.rows.length < prev.rows.length) continue;
    }
    byCfg.set(k, g);
  }

  // 2. Fit every curve.
  const curves: CollectiveCurve[] = [];
  for (const g of [...byCfg.values()].sort(cmpCfg)) {
    const points = reduceRepeats(g.rows.map((r) => ({ message_bytes: r.message_bytes, latency_us: r.latency_us })));
    let fit: CurveFit;
    try {
      fit = fitCurve(points);
    } catch (e) {
      warnings.push(`collective: ${key(g.op, g.dtype, g.ranks, g.backend, g.lane)} not fitted: ${(e as Error).message}`);
      continue;
    }
    const bs = bootstrapTransitionRate(points, fit, ctx.bootstrap);
    curves.push({
      op: g.op,
      dtype: g.dtype,
      ranks: g.ranks,
      backend: g.backend,
      lane: g.lane,
      rows: g.rows.length,
      points,
      fit,
      r_t_ci95: bs.ci95,
      r_t_ci_widened: bs.widened,
      bootstrap_ok: bs.ok,
    });
  }

  // 3. Holdout along rank width, per (op, dtype, backend).
  const families = new Map<string, CollectiveCurve[]>();
  for (const c of curves) {
    const k = key(c.op, c.dtype, c.backend);
    let l = families.get(k);
    if (!l) families.set(k, (l = []));
    l.push(c);
  }
  for (const fam of families.values()) {
    for (const h of leaveOneWidthOut(fam)) {
      const c = fam.find((x) => x.ranks === h.ranks);
      if (c) c.holdout = h;
    }
  }

  // 4. Select the registry backend per (op, dtype, ranks) and check floor monotonicity.
  const selected: CollectiveCurve[] = [];
  const opDtype = new Map<string, CollectiveCurve[]>();
  for (const c of curves) {
    const k = key(c.op, c.dtype);
    let l = opDtype.get(k);
    if (!l) opDtype.set(k, (l = []));
    l.push(c);
  }
  for (const [, list] of [...opDtype.entries()].sort()) {
    const widths = [...new Set(list.map((c) => c.ranks))].sort((a, b) => a - b);
    for (const n of widths) {
      const here = list.filter((c) => c.ranks === n);
      const be = selectBackend(here[0]!.op, here[0]!.dtype, n, new Set(here.map((c) => c.backend)), pcieOnly);
      const c = here.find((x) => x.backend === be);
      if (c) selected.push(c);
    }
  }
  const monotone = floorMonotonicity(selected);
  for (const v of monotone) refusals.push(`collective: floor falls as ranks grow on ${chip}: ${v}`);
  const selectedViolations = new Set(monotone);
  const unselectedViolations: string[] = [];
  for (const fam of families.values()) {
    for (const v of floorMonotonicity(fam)) if (!selectedViolations.has(v)) unselectedViolations.push(v);
  }
  for (const v of unselectedViolations) warnings.push(`collective: floor falls as ranks grow (not a registry curve): ${v}`);
  for (const c of selected) {
    if (c.fit.r_t_bytes_per_us > c.fit.r_peak_bytes_per_us) refusals.push(`collective: r_t above r_peak for ${label(c)}`);
  }

  // 5. Registry entries.
  const coefficients: FittedCoefficient[] = [];
  for (const c of selected) coefficients.push(...entriesFor(c, ctx));
  const widths = extrapolateSelectedWidths(selected, ctx);
  coefficients.push(...widths.coefficients);
  for (const o of widths.outcomes)
    if (o.result.status === 'refused')
      warnings.push(`collective: ${o.op} ${o.dtype} ${EXTRAPOLATED_RANKS}-rank width extrapolation refused (a correct answer; no entry written): ${o.result.reason}`);

  // 6. Report.
  const report = buildReport(chip, curves, selected, unselectedViolations, ctx, widths.outcomes);
  return {
    family: 'collective',
    coefficients,
    summary: report.summary,
    report_md: report.md,
    figures: buildFigures(chip, curves, selected),
    refusals,
    warnings,
  };
}

function cmpCfg(a: { op: string; dtype: string; ranks: number; backend: string }, b: typeof a): number {
  return a.op.localeCompare(b.op) || a.dtype.localeCompare(b.dtype) || a.backend.localeCompare(b.backend) || a.ranks - b.ranks;
}

function label(c: Pick<CollectiveCurve, 'op' | 'dtype' | 'ranks' | 'backend'>): string {
  return `${c.op} ${c.dtype} ${c.ranks}-rank ${c.backend}`;
}

/** Violations "floor(n_i) > floor(n_j) for n_i < n_j" within each (op, dtype, backend) of `curves`. */
export function floorMonotonicity(curves: ReadonlyArray<Pick<CollectiveCurve, 'op' | 'dtype' | 'ranks' | 'backend' | 'fit'>>): string[] {
  const out: string[] = [];
  const fam = new Map<string, Array<(typeof curves)[number]>>();
  for (const c of curves) {
    const k = key(c.op, c.dtype);
    let l = fam.get(k);
    if (!l) fam.set(k, (l = []));
    l.push(c);
  }
  for (const list of fam.values()) {
    const s = [...list].sort((a, b) => a.ranks - b.ranks);
    for (let i = 1; i < s.length; i++) {
      const a = s[i - 1]!;
      const b = s[i]!;
      if (b.fit.t0_us < a.fit.t0_us) {
        out.push(`${a.op} ${a.dtype}: ${a.ranks}-rank ${a.backend} ${fmt(a.fit.t0_us)} µs > ${b.ranks}-rank ${b.backend} ${fmt(b.fit.t0_us)} µs`);
      }
    }
  }
  return out;
}

function filterText(c: CollectiveCurve): string {
  return `op=${c.op} dtype class=${c.dtype} ranks=${c.ranks} nodes=1 backend=${c.backend} lane=${c.lane}; repeats reduced by median`;
}

function entriesFor(c: CollectiveCurve, ctx: FitContext): FittedCoefficient[] {
  const chip = ctx.chip.name;
  const set = SET_NAMES.collectives;
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
  const scope = { hardware: [chip] };
  const floor: CoefficientEntry = {
    value: roundSig(c.fit.t0_us, 4),
    units: 'us_per_transfer',
    method: 'measured',
    fitted: false,
    scope,
    sources: prov.sources,
    ci95: [roundSig(c.fit.t0_ci95[0], 4), roundSig(c.fit.t0_ci95[1], 4)],
    evidence: ev({
      ci_method: 'quantiles',
      notes: [
        ...baseNotes,
        `floor = minimum latency over the ${c.fit.n_small} message sizes <= ${SMALL_MESSAGE_BYTES} B; ci95 = [smallest, second-smallest] of those latencies (a bootstrap of a minimum is degenerate)`,
      ],
    }),
  };
  const peak: CoefficientEntry = {
    value: roundSig(c.fit.r_peak_bytes_per_us, 6),
    units: 'bytes_per_us',
    method: 'measured',
    fitted: false,
    scope,
    sources: prov.sources,
    ci95: [roundSig(c.fit.r_peak_ci95[0], 6), roundSig(c.fit.r_peak_ci95[1], 6)],
    evidence: ev({
      ci_method: 'quantiles',
      notes: [
        ...baseNotes,
        `peak = largest message_bytes/latency over the sweep (reached at ${c.fit.r_peak_at_bytes} B; a lower bound if unsaturated); ci95 = [second-largest, largest] achieved rate`,
      ],
    }),
  };
  const rtNotes = [...baseNotes, 'fitted with floor and peak fixed, minimising mean |ln(pred/meas)| over the distinct sizes'];
  if (c.fit.r_t_at_peak) rtNotes.push('optimum sat on the constraint r_t = r_peak');
  if (c.r_t_ci_widened) rtNotes.push('bootstrap percentile interval missed the estimate and was widened to contain it');
  const trans: CoefficientEntry = {
    value: roundSig(c.fit.r_t_bytes_per_us, 6),
    units: 'bytes_per_us',
    method: 'measured',
    fitted: true,
    scope,
    sources: prov.sources,
    ci95: [roundSig(c.r_t_ci95[0], 6), roundSig(c.r_t_ci95[1], 6)],
    evidence: ev({
      ci_method: 'bootstrap',
      bootstrap: { resamples: ctx.bootstrap.resamples, seed: ctx.bootstrap.seed },
      notes: [...rtNotes, `bootstrap over message sizes: ${c.bootstrap_ok}/${ctx.bootstrap.resamples} resamples usable`],
    }),
  };
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
 * 16-rank entries through the registry's extrapolation library (src/registry/extrapolate.ts, the
 * one implementation of reference §6.3 / issue 5: floor(n) = a + b·(n−1) least squares over the
 * measured widths of ONE lane, rates copied from the widest width, the widest width held out and
 * predicted from the narrower ones; refused across lanes, with fewer than three widths, or when the
 * prediction falls below the widest measured floor). The points are the registry values of the
 * selected curves (rounded as stored), so `stepcal registry extrapolate widths` on the written
 * registry reproduces the same floor, rates and refusals. A refusal writes no entry for that
 * (op, dtype): it is reported (warnings and README), never fatal.
 */
export function extrapolateSelectedWidths(selected: readonly CollectiveCurve[], ctx: FitContext): { coefficients: FittedCoefficient[]; outcomes: CollectiveWidthOutcome[] } {
  const chip = ctx.chip.name;
  const coefficients: FittedCoefficient[] = [];
  const outcomes: CollectiveWidthOutcome[] = [];
  const by = new Map<string, CollectiveCurve[]>();
  for (const c of selected) {
    const k = key(c.op, c.dtype);
    let l = by.get(k);
    if (!l) by.set(k, (l = []));
    l.push(c);
  }
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
    const prov = provenance(ctx, lanes, `floors of ${s.map((c) => `${c.ranks}-rank ${c.backend}`).join(', ')} (${widest.op} ${widest.dtype}); rates of the ${widest.ranks}-rank curve`, s.reduce((a, c) => a + c.rows, 0));
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

/** Median ratio latency(a)/latency(b) over message sizes both measured. */
function matchedRatio(a: CollectiveCurve, b: CollectiveCurve): { ratio: number; n: number } {
  const mb = new Map(b.points.map((p) => [p.message_bytes, p.latency_us]));
  const rs: number[] = [];
  for (const p of a.points) {
    const q = mb.get(p.message_bytes);
    if (q !== undefined) rs.push(p.latency_us / q);
  }
  return { ratio: rs.length ? median(rs) : NaN, n: rs.length };
}

function buildReport(
  chip: string,
  curves: CollectiveCurve[],
  selected: CollectiveCurve[],
  unselectedViolations: string[],
  ctx: FitContext,
  widthOutcomes: readonly CollectiveWidthOutcome[] = [],
): { md: string; summary: string[] } {
  const L: string[] = [];
  const summary: string[] = [];
  L.push(`## Collectives (${chip})`, '');
  L.push(
    'Law `t(b) = max(t0 + b/r_t, b/r_peak)`, b in bytes (per-rank buffer for all_reduce, whole buffer for the other ops). ' +
      `t0 = minimum latency over messages <= ${SMALL_MESSAGE_BYTES} B (measured); r_peak = largest achieved bytes/µs (measured); ` +
      'r_t fitted with both fixed on mean |ln(pred/meas)|. With r_t <= r_peak (a gate) the peak branch never binds, so the 3-parameter ' +
      'law acts as t0 + b/r_t; the 2-parameter comparator is BLIS\'s fallback `max(t0, b/r_peak)`. Repeats reduced by the median. ' +
      `r_t ci95: seeded bootstrap over message sizes (${ctx.bootstrap.resamples} resamples, seed ${ctx.bootstrap.seed}); ` +
      'floor ci95 = [smallest, second-smallest] small-message latency; peak ci95 = [second-largest, largest] achieved rate.',
    '',
  );
  if (curves.length === 0) {
    L.push('No collective rows could be fitted.', '');
    return { md: L.join('\n'), summary: ['collective: nothing fitted'] };
  }
  // Errors before/after.
  const g2 = curves.map((c) => c.fit.geo2);
  const g3 = curves.map((c) => c.fit.geo3);
  const s2 = selected.map((c) => c.fit.geo2);
  const s3 = selected.map((c) => c.fit.geo3);
  const mx = (xs: number[]) => Math.max(...xs);
  L.push('### Geometric error before (2-parameter) and after (3-parameter)', '');
  L.push('| configurations | n | median 2-param | median 3-param | worst 2-param | worst 3-param |', '|---|---|---|---|---|---|');
  L.push(`| all fitted curves | ${curves.length} | ${fmt(median(g2))}x | ${fmt(median(g3))}x | ${fmt(mx(g2))}x | ${fmt(mx(g3))}x |`);
  if (selected.length) {
    L.push(`| registry curves | ${selected.length} | ${fmt(median(s2))}x | ${fmt(median(s3))}x | ${fmt(mx(s2))}x | ${fmt(mx(s3))}x |`);
  }
  L.push('', 'BLIS (136 configurations): median 1.34x -> 1.17x, worst 1.83x -> 1.51x (reference §6.3).', '');
  summary.push(
    `collective: ${curves.length} curves, ${selected.length} in the registry; geo error median ${fmt(median(g2))}x -> ${fmt(median(g3))}x, worst ${fmt(mx(g2))}x -> ${fmt(mx(g3))}x (2-param -> 3-param)`,
  );

  // Per-configuration table.
  L.push('### Fitted curves', '');
  L.push(
    '| op | dtype | ranks | backend | lane | sizes | t0 µs | r_t B/µs (ci95) | r_peak B/µs | geo 2p | geo 3p | MAPE 3p % | holdout geo | registry |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const c of curves) {
    const h = c.holdout ? `${fmt(c.holdout.geo)}x (floor pred ${fmt(c.holdout.t0_pred_us)} vs ${fmt(c.holdout.t0_meas_us)})` : '–';
    L.push(
      `| ${c.op} | ${c.dtype} | ${c.ranks} | ${c.backend} | ${c.lane} | ${c.fit.n} | ${fmt(c.fit.t0_us)} | ${fmt(c.fit.r_t_bytes_per_us, 5)} (${fmt(c.r_t_ci95[0], 4)}–${fmt(c.r_t_ci95[1], 4)}) | ${fmt(c.fit.r_peak_bytes_per_us, 6)} | ${fmt(c.fit.geo2)} | ${fmt(c.fit.geo3)} | ${fmt(c.fit.mape3_pct, 3)} | ${h} | ${selected.includes(c) ? 'yes' : ''} |`,
    );
  }
  L.push('');

  // Holdout summary.
  const hs = selected.filter((c) => c.holdout);
  if (hs.length) {
    const widest = Math.max(...hs.map((c) => c.ranks));
    const atWidest = hs.filter((c) => c.ranks === widest);
    L.push('### Holdout along rank width (registry curves)', '');
    L.push(
      'Each width predicted from the others: floor line a + b·(n−1) fitted on the other widths, rates from the nearest other width (ties → wider).',
      '',
    );
    L.push('| op | dtype | held-out ranks | floor pred/meas | holdout geo | train geo (own fit) |', '|---|---|---|---|---|---|');
    for (const c of hs) {
      L.push(`| ${c.op} | ${c.dtype} | ${c.ranks} | ${fmt(c.holdout!.t0_pred_us / c.holdout!.t0_meas_us)} | ${fmt(c.holdout!.geo)}x | ${fmt(c.fit.geo3)}x |`);
    }
    const ratios = atWidest.map((c) => c.holdout!.t0_pred_us / c.holdout!.t0_meas_us);
    L.push(
      '',
      `Widest width (${widest}) predicted from the narrower ones: median floor pred/meas ${fmt(median(ratios))}, median holdout geo ${fmt(median(atWidest.map((c) => c.holdout!.geo)))}x over ${atWidest.length} curves (BLIS 4->8: pred/meas median 0.987 all_reduce, 1.017 all_gather, 1.018 reduce_scatter, 1.128 alltoall).`,
      '',
    );
    summary.push(
      `collective: holdout (leave one width out) median geo ${fmt(median(hs.map((c) => c.holdout!.geo)))}x, train median ${fmt(median(hs.map((c) => c.fit.geo3)))}x`,
    );
  }

  // Floors vs width.
  L.push('### Floors must not fall as ranks grow', '');
  const selViol = floorMonotonicity(selected);
  L.push(selViol.length ? `Registry curves VIOLATE it: ${selViol.join('; ')}.` : 'Registry curves: floors non-decreasing with ranks for every (op, dtype).');
  L.push(
    unselectedViolations.length
      ? `Curves not used by the registry that violate it (reported, not hidden): ${unselectedViolations.join('; ')}.`
      : 'No violation among the other backends either.',
    '',
  );

  // Backend comparison for fp16 all_reduce.
  const ar = curves.filter((c) => c.op === 'all_reduce' && c.dtype === 'fp16');
  if (ar.some((c) => c.backend !== 'nccl')) {
    L.push('### fp16 all_reduce: custom (CUDA graph), custom (eager), NCCL', '');
    L.push(
      '| ranks | floor graph µs | floor eager µs | floor NCCL µs | median graph/NCCL | median eager/NCCL | registry uses |',
      '|---|---|---|---|---|---|---|',
    );
    for (const n of [...new Set(ar.map((c) => c.ranks))].sort((a, b) => a - b)) {
      const g = ar.find((c) => c.ranks === n && c.backend === 'custom_graph');
      const e = ar.find((c) => c.ranks === n && c.backend === 'custom_eager');
      const nc = ar.find((c) => c.ranks === n && c.backend === 'nccl');
      const rg = g && nc ? matchedRatio(g, nc) : undefined;
      const re = e && nc ? matchedRatio(e, nc) : undefined;
      const used = selected.find((c) => c.op === 'all_reduce' && c.dtype === 'fp16' && c.ranks === n)?.backend ?? '–';
      L.push(
        `| ${n} | ${g ? fmt(g.fit.t0_us) : '–'} | ${e ? fmt(e.fit.t0_us) : '–'} | ${nc ? fmt(nc.fit.t0_us) : '–'} | ${rg ? `${fmt(rg.ratio)} (${rg.n} sizes)` : '–'} | ${re ? `${fmt(re.ratio)} (${re.n} sizes)` : '–'} | ${used} |`,
      );
    }
    L.push(
      '',
      'Rule: custom all-reduce under CUDA graph where measured, NCCL otherwise; eager custom all-reduce is never used (it is slower than NCCL at small sizes, a mispricing if accepted). ' +
        (ctx.chip.nvlink_gb_per_s_per_dir <= PCIE_MAX_GB_PER_S_PER_DIR
          ? `${chip} has no NVLink (GPU link ${ctx.chip.nvlink_gb_per_s_per_dir} GB/s/dir <= ${PCIE_MAX_GB_PER_S_PER_DIR}): vLLM disables custom all-reduce above 2 PCIe-only GPUs, so NCCL is used at > 2 ranks.`
          : ''),
      '',
    );
  }

  // BLIS comparison.
  const blis = BLIS_COLLECTIVES[chip];
  if (blis) {
    L.push(`### Against BLIS's published ${chip} values (registry b4d8e2b8)`, '');
    L.push(
      'BLIS fp16 rates are shown ×2: its fitter most likely read element counts as bytes (reference §1.5 [CHECK]); int8 rates are 1 B/element and shown as published.',
      '',
    );
    L.push(
      '| op | dtype | ranks | t0 ours / BLIS µs | r_peak ours / BLIS(×2) | r_t ours / BLIS(×2) |',
      '|---|---|---|---|---|---|',
    );
    for (const c of selected) {
      const t = blis[c.op]?.[c.dtype]?.[c.ranks];
      if (!t) continue;
      const k = c.dtype === 'fp16' ? 2 : 1;
      L.push(
        `| ${c.op} | ${c.dtype} | ${c.ranks} | ${fmt(c.fit.t0_us)} / ${fmt(t[0])} | ${fmt(c.fit.r_peak_bytes_per_us, 6)} / ${fmt(t[1] * k, 6)} (${fmt(c.fit.r_peak_bytes_per_us / (t[1] * k))}) | ${fmt(c.fit.r_t_bytes_per_us, 5)} / ${fmt(t[2] * k, 5)} (${fmt(c.fit.r_t_bytes_per_us / (t[2] * k))}) |`,
      );
    }
    const old = BLIS_NCCL_ALLREDUCE_FP16_OLD[chip];
    if (old) {
      for (const [n, t] of Object.entries(old)) {
        const nc = curves.find((c) => c.op === 'all_reduce' && c.dtype === 'fp16' && c.backend === 'nccl' && c.ranks === Number(n));
        if (nc) {
          L.push(
            `| all_reduce (NCCL, BLIS @1dd3dc75) | fp16 | ${n} | ${fmt(nc.fit.t0_us)} / ${fmt(t[0])} | ${fmt(nc.fit.r_peak_bytes_per_us, 6)} / ${fmt(t[1] * 2, 6)} (${fmt(nc.fit.r_peak_bytes_per_us / (t[1] * 2))}) | ${fmt(nc.fit.r_t_bytes_per_us, 5)} / ${fmt(t[2] * 2, 5)} (${fmt(nc.fit.r_t_bytes_per_us / (t[2] * 2))}) |`,
          );
        }
      }
    }
    L.push('');
  }
  if (widthOutcomes.length) {
    L.push(`### ${EXTRAPOLATED_RANKS}-rank entries: width extrapolation (method: assumed)`, '');
    L.push(
      `Through \`src/registry/extrapolate.ts\` (the same code as \`stepcal registry extrapolate widths\`): floor(n) = a + b·(n−1) least squares over the registry's measured widths of one lane, evaluated at ${EXTRAPOLATED_RANKS}; peak and transition rates copied from the widest measured width (a stated lower bound on transfer time). Check: the widest width predicted from the narrower ones. Refused (no entry written; a refusal is a correct answer) across lanes, with fewer than three widths, or below the widest measured floor.`,
      '',
    );
    L.push(`| op | dtype | measured widths (lane) | ${EXTRAPOLATED_RANKS}-rank floor µs | holdout: widest floor pred/meas | outcome |`, '|---|---|---|---|---|---|');
    for (const o of widthOutcomes) {
      const r = o.result;
      const h = r.holdout ? `${r.holdout.held_out_ranks} from ${r.holdout.train_widths.join('/')}: ${fmt(r.holdout.predicted_us)} / ${fmt(r.holdout.measured_us)} = ${fmt(r.holdout.ratio, 3)}` : '–';
      L.push(`| ${o.op} | ${o.dtype} | ${r.measured_widths.join('/')} (${r.lane}) | ${r.status === 'extrapolated' ? fmt(r.floor_us!) : '–'} | ${h} | ${r.status === 'extrapolated' ? 'extrapolated' : `**refused**: ${r.reason}`} |`);
    }
    const ratios = widthOutcomes.filter((o) => o.result.holdout).map((o) => o.result.holdout!.ratio);
    const refused = widthOutcomes.filter((o) => o.result.status === 'refused').length;
    L.push(
      '',
      `${widthOutcomes.length - refused} extrapolated, ${refused} refused; median holdout pred/meas ${ratios.length ? fmt(median(ratios), 3) : '–'} (BLIS 4→8: 0.987 all_reduce, 1.017 all_gather, 1.018 reduce_scatter, 1.128 alltoall).`,
      '',
    );
    summary.push(`collective: ${EXTRAPOLATED_RANKS}-rank width extrapolation: ${widthOutcomes.length - refused} extrapolated, ${refused} refused`);
  }
  return { md: L.join('\n'), summary };
}

function buildFigures(chip: string, curves: CollectiveCurve[], selected: CollectiveCurve[]): Array<{ name: string; svg: string }> {
  const figs: Array<{ name: string; svg: string }> = [];
  const ops = [...new Set(selected.map((c) => c.op))].sort();
  for (const op of ops) {
    const series: Series[] = [];
    const here = selected.filter((c) => c.op === op).sort((a, b) => a.dtype.localeCompare(b.dtype) || a.ranks - b.ranks);
    here.forEach((c, i) => {
      const color = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'][i % 8]!;
      const lab = `${c.dtype} ${c.ranks}r ${c.backend === 'nccl' ? 'NCCL' : 'custom'}`;
      series.push({ label: `${lab} measured`, style: 'scatter', color, points: c.points.map((p) => [p.message_bytes, p.latency_us]) });
      const lo = c.points[0]!.message_bytes;
      const hi = c.points[c.points.length - 1]!.message_bytes;
      const pts: Array<[number, number]> = [];
      for (let j = 0; j <= 40; j++) {
        const b = lo * Math.pow(hi / lo, j / 40);
        pts.push([b, collectiveTime(b, { t0_us: c.fit.t0_us, r_t_bytes_per_us: c.fit.r_t_bytes_per_us, r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us })]);
      }
      series.push({ label: `${lab} fit`, style: 'line', color, points: pts });
    });
    figs.push({
      name: `collective_${op}.svg`,
      svg: chart(series, {
        title: `${chip} ${op}: latency vs message size (points measured, lines 3-parameter fit)`,
        x_label: 'message bytes',
        y_label: 'latency µs',
        x_log: true,
        y_log: true,
        width: 760,
        height: Math.max(420, 60 + series.length * 16),
      }),
    });
  }
  // Residuals of every registry curve, 2-param and 3-param.
  const r3: Array<[number, number]> = [];
  const r2: Array<[number, number]> = [];
  for (const c of selected) {
    for (const p of c.points) {
      const t3 = collectiveTime(p.message_bytes, { t0_us: c.fit.t0_us, r_t_bytes_per_us: c.fit.r_t_bytes_per_us, r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us });
      const t2 = collectiveTime(p.message_bytes, { t0_us: c.fit.t0_us, r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us });
      r3.push([p.message_bytes, t3 / p.latency_us]);
      r2.push([p.message_bytes, t2 / p.latency_us]);
    }
  }
  if (r3.length) {
    // Per-size medians of both laws as lines, every 3-parameter residual as a dot.
    const medLine = (pts: Array<[number, number]>): Array<[number, number]> => {
      const by = new Map<number, number[]>();
      for (const [b, r] of pts) {
        let l = by.get(b);
        if (!l) by.set(b, (l = []));
        l.push(r);
      }
      return [...by.keys()].sort((x, y) => x - y).map((b) => [b, median(by.get(b)!)]);
    };
    figs.push({
      name: 'collective_residuals.svg',
      svg: chart(
        [
          { label: '3-param, each curve', style: 'scatter', points: r3, color: '#d62728', radius: 1.5 },
          { label: '3-param, median', style: 'line', points: medLine(r3), color: '#d62728' },
          { label: '2-param max(t0, b/r_peak), median', style: 'line', points: medLine(r2), color: '#7f7f7f', dash: '4 3' },
        ],
        {
          title: `${chip} collectives: predicted / measured, every registry curve`,
          x_label: 'message bytes',
          y_label: 'predicted / measured',
          x_log: true,
          y_log: true,
          h_lines: [{ y: 1, label: 'exact' }],
        },
      ),
    });
  }
  void curves;
  return figs;
}
