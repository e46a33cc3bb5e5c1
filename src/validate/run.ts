/**
 * The validation core: price held-out rows, optionally refit host terms on a declared training
 * subset, and score the rest. Pure given a pricer factory (no file I/O here; see index.ts).
 */
import { checkStepRowUnits, checkStepUnits } from './step-units.ts';
import { UserError } from '../core/errors.ts';
import type { ResourceTimes } from '../pricer/types.ts';
import { batchSizeOf, bottleneckOf, extrapolationReason, type RowPrice } from './expand.ts';
import { chooseLargeStepBytes } from './profile.ts';
import {
  applyHostTerms,
  atLargeStepBytes,
  engineSmExtraUs,
  fitHostTerms,
  fitHostTermsWithScaleSearch,
  parseHostRule,
  selectTrainingRows,
  type HostRule,
  type HostWeighting,
} from './hostfit.ts';
import { computeMetrics, metricsOrNull, type ScoredPoint } from './metrics.ts';
import type { LocatedStepRow } from './steps.ts';
import {
  COMPOSITION_NAME,
  COMPOSITIONS,
  REGIMES,
  type Composition,
  type GroupMetrics,
  type HostFitEngine,
  type HostFitResult,
  type Regime,
  type RegimeMetrics,
  type RowResult,
  type ValidationResult,
  type EngineSmMode,
  type EngineSmOutcome,
  type ExtrapolationCount,
  type TierOptions,
} from './types.ts';
import { groupBy } from '../core/numeric/stats.ts';
import { memoByObject } from '../core/text-memo.ts';
import { validationTiers } from './tiers.ts';
import {
  aggregationKey,
  cmNohostAt,
  nohostOf,
  priceRows,
  shapeGroup,
  type Priced,
  type ValidationDeps,
} from './priced.ts';

/** SM/HBM ratio on decode steps at batch ≤ 4 above which the ramp is suspected to contain the weight reads. */
export const DOUBLE_CHARGE_SM_OVER_HBM = 0.25;

export type { ValidationDeps } from './priced.ts';
export { aggregationKey, exclusionOf } from './priced.ts';

export interface CoreOptions {
  chip: string;
  fitHost?: string;
  composition?: Composition;
  excludeFlags?: Readonly<Record<string, 'all' | 'static_batch'>>;
  /** Engine compute-efficiency term (needs fitHost for `on`): off (default) | on | auto. */
  engineSm?: EngineSmMode;
  /** Host-fit least-squares weighting (default `relative`). */
  hostWeighting?: HostWeighting;
  /** Compute the validation tiers (src/validate/tiers.ts); absent = none. */
  tiers?: TierOptions;
}

/**
 * Which variant of a composition (NoOverlap or CMOverlap) the headline uses: without or with the
 * engine compute-efficiency term s. Rule (`auto`): the variant with the lower mean over regimes of
 * that composition's held-out MAPE (each regime present weighs the same, so a regime is not outvoted
 * by a larger one); ties → without (fewer fitted parameters). Both are scored on the same held-out
 * rows (same training subset).
 */
export function engineSmChoice(
  without: Record<Regime, RegimeMetrics | null>,
  withSm: Record<Regime, RegimeMetrics | null>,
  mode: EngineSmMode,
  composition: Composition = 'no_overlap',
): { use: boolean; reason: string } {
  const present = REGIMES.filter((g) => without[g] && withSm[g]);
  const mean = (m: Record<Regime, RegimeMetrics | null>) =>
    present.reduce((a, g) => a + m[g]!.mape_pct, 0) / Math.max(1, present.length);
  const a = mean(without);
  const b = mean(withSm);
  const detail =
    `mean over regimes of held-out ${COMPOSITION_NAME[composition]} MAPE: without s ${a.toFixed(1)}%, with s ${b.toFixed(1)}% (` +
    present.map((g) => `${g} ${without[g]!.mape_pct.toFixed(1)}% → ${withSm[g]!.mape_pct.toFixed(1)}%`).join('; ') +
    ')';
  if (mode === 'on') return { use: true, reason: `forced by --engine-sm on; ${detail}` };
  if (mode === 'off') return { use: false, reason: `--engine-sm off; ${detail}` };
  const use = b < a;
  return { use, reason: `${use ? 'with s' : 'without s'}: ${detail}${a === b ? '; tie → without s' : ''}` };
}

export type CoreResult = Omit<ValidationResult, 'pinned'>;

/** Host terms fitted per `${engine}|${composition}`, without (false) and with (true) the engine term s. */
interface HostFits {
  host_fit?: HostFitResult;
  training: Set<number>;
  fittedBy: Record<'false' | 'true', Map<string, HostFitEngine>>;
  /** Row index → CMOverlap without host at its engine's fitted s (the "with s" variant). */
  cmScaled: Map<number, number>;
}

/** Which compositions take their s variant. */
type Use = Record<Composition, boolean>;

/** The rows measured on `chip`; a warning names the other chips' rows that are skipped. @throws UserError when none is left */
function rowsOnChip(all: readonly LocatedStepRow[], chip: string): { rows: LocatedStepRow[]; warnings: string[] } {
  const rows = all.filter((r) => r.chip === chip);
  const skipped = all.length - rows.length;
  const warnings: string[] = [];
  if (skipped > 0) {
    const chips = [...new Set(all.filter((r) => r.chip !== chip).map((r) => r.chip))].join(', ');
    warnings.push(`${skipped} row(s) measured on another chip (${chips}) skipped: this validation prices ${chip}`);
  }
  if (rows.length === 0) throw new UserError(`no held-out rows for chip ${chip} in the given files`);
  return { rows, warnings };
}

/**
 * Fit one engine's host terms per composition on its training rows `idx`, without and with s:
 * NoOverlap by linear least squares, CMOverlap by a bounded 1-D search (s inside max(s·SM, HBM);
 * skipped under --engine-sm off); Overlap keeps the host-only fit in both.
 */
function fitEngine(
  P: Priced,
  deps: ValidationDeps,
  F: HostFits,
  engine: string,
  idx: number[],
  rule: HostRule,
  o: { weighting: HostWeighting; cmSearch: boolean },
): void {
  const measured_us = idx.map((i) => P.rows[i]!.measured_us);
  const weighting = o.weighting;
  const large_step_message_bytes = chooseLargeStepBytes(P, engine, idx, weighting);
  const feats = idx.map((i) => atLargeStepBytes(P.features[i]!, large_step_message_bytes));
  for (const c of COMPOSITIONS) {
    const resid = idx.map((i) => P.rows[i]!.measured_us - nohostOf(P, i, c));
    const base: HostFitEngine = {
      ...fitHostTerms(engine, c, feats, resid, rule.kind, { weighting, measured_us }),
      large_step_message_bytes,
    };
    F.fittedBy.false.set(`${engine}|${c}`, base);
    let withS = base;
    if (c === 'no_overlap')
      withS = fitHostTerms(engine, c, feats, resid, rule.kind, { weighting, measured_us, engineSm: true });
    else if (c === 'cm_overlap' && o.cmSearch) {
      withS = fitHostTermsWithScaleSearch(
        engine,
        c,
        feats,
        measured_us,
        (s) => cmNohostAt(P, deps, idx, s),
        rule.kind,
        weighting,
      );
      const all = P.rows.map((_, i) => i).filter((i) => P.rows[i]!.engine === engine);
      const at = cmNohostAt(P, deps, all, withS.sm_scale!.value);
      all.forEach((i, j) => {
        F.cmScaled.set(i, at[j]!);
      });
    }
    F.fittedBy.true.set(`${engine}|${c}`, { ...withS, large_step_message_bytes });
  }
}

/**
 * Host terms: the registry's (inside the pricer, no `opts.fitHost`), or fitted per engine on the
 * training subset `opts.fitHost` selects among the rows no flag excludes (those rows are not scored).
 * @throws UserError when --engine-sm on lacks --fit-host, or when the rule selects every row
 */
function fitHost(P: Priced, opts: CoreOptions, deps: ValidationDeps): HostFits {
  const F: HostFits = {
    training: new Set<number>(),
    fittedBy: { false: new Map(), true: new Map() },
    cmScaled: new Map(),
  };
  const engineSmMode: EngineSmMode = opts.engineSm ?? 'off';
  if (opts.fitHost === undefined && engineSmMode === 'on')
    throw new UserError('--engine-sm on needs --fit-host (s is fitted on the same training rows as the host terms)');
  if (opts.fitHost === undefined) return F;
  const rule = parseHostRule(opts.fitHost);
  const weighting: HostWeighting = opts.hostWeighting ?? 'relative';
  const { rows } = P;
  const eligible = rows.map((_, i) => i).filter((i) => P.excl[i] === undefined);
  const chosen = selectTrainingRows(
    eligible.map((i) => ({ batch: batchSizeOf(rows[i]!), group: shapeGroup(rows[i]!, P.regimes[i]!) })),
    rule,
  );
  for (const j of chosen) F.training.add(eligible[j]!);
  const notes: string[] = [];
  for (const engine of [...new Set(rows.map((r) => r.engine))]) {
    const idx = [...F.training].filter((i) => rows[i]!.engine === engine).sort((a, b) => a - b);
    if (idx.length === 0)
      notes.push(`engine ${engine}: no training rows under ${opts.fitHost}; its rows keep the registry's host terms`);
    else fitEngine(P, deps, F, engine, idx, rule, { weighting, cmSearch: engineSmMode !== 'off' });
  }
  F.host_fit = {
    rule: opts.fitHost,
    weighting,
    fits: [],
    training_rows: [...F.training]
      .sort((a, b) => a - b)
      .map((i) => ({ file: rows[i]!.file, row: rows[i]!.row, engine: rows[i]!.engine, group: rows[i]!.group })),
    notes: [...notes, ...(rule.kind === 'batch1' ? [[...F.fittedBy.false.values()][0]?.notes[0] ?? ''] : [])].filter(
      (s) => s !== '',
    ),
  };
  if (F.training.size === P.excl.filter((e) => e === undefined).length) {
    throw new UserError(`--fit-host ${opts.fitHost} selects every row for training; nothing is left to validate on`);
  }
  return F;
}

/**
 * One row's result under `use` (which compositions take their s variant); `resFor` is the
 * composition whose resources and host the row reports (the headline; predictions do not depend on it).
 */
function rowResult(P: Priced, F: HostFits, i: number, use: Use, resFor: Composition, reasons: string[]): RowResult {
  const r = P.rows[i]!;
  const p = P.priced[i]!;
  const fitOf = (c: Composition) => (use[c] ? F.fittedBy.true : F.fittedBy.false).get(`${r.engine}|${c}`);
  const hostFor = (c: Composition): number => {
    const f = fitOf(c);
    return f ? applyHostTerms(f, P.features[i]!) : p.host_us;
  };
  const noFit = fitOf('no_overlap');
  const sm_extra_us = noFit ? engineSmExtraUs(noFit, P.features[i]!) : 0;
  const cmNohost = use.cm_overlap ? (F.cmScaled.get(i) ?? p.cm_overlap_nohost_us) : p.cm_overlap_nohost_us;
  const predicted_us: Record<Composition, number> = {
    no_overlap: p.no_overlap_nohost_us + sm_extra_us + hostFor('no_overlap'),
    cm_overlap: cmNohost + hostFor('cm_overlap'),
    overlap: p.overlap_nohost_us + hostFor('overlap'),
  };
  const ratio = {} as Record<Composition, number>;
  for (const c of COMPOSITIONS) ratio[c] = predicted_us[c] / r.measured_us;
  // Resources of the reported composition: SM with its s (NoOverlap: + (s − 1)·T_SM; CMOverlap: s·T_SM,
  // as the scaled pricer charges it; Overlap: none), host as its fit prices it.
  const cmFit = fitOf('cm_overlap');
  const smOf: Record<Composition, number> = {
    no_overlap: p.resources_us.sm + sm_extra_us,
    cm_overlap: p.resources_us.sm * (use.cm_overlap && F.cmScaled.has(i) ? (cmFit?.sm_scale?.value ?? 1) : 1),
    overlap: p.resources_us.sm,
  };
  const host_us = hostFor(resFor);
  const resources_us: ResourceTimes = { ...p.resources_us, sm: smOf[resFor], host: host_us };
  const regime = P.regimes[i]!;
  return {
    ...{ file: r.file, row: r.row, model: r.model, chip: r.chip, tp: r.tp, engine: r.engine, kind: r.kind, regime },
    ...{
      batch: batchSizeOf(r),
      context_tokens: contextTokensOf(r),
      group: shapeGroup(r, regime),
      flags: r.flags,
      measured_us: r.measured_us,
      predicted_us,
      ratio,
      host_us,
    },
    ...{
      bottleneck: bottleneckOf(resources_us),
      resources_us,
      steps_priced: p.steps,
      extrapolated: p.extrapolated,
      extrapolation_reasons: reasons,
    },
    used_for_host_fit: F.training.has(i),
    ...(P.excl[i] !== undefined ? { excluded: P.excl[i] } : {}),
  };
}

/** Context tokens per request of a row (RowResult.context_tokens). */
function contextTokensOf(r: LocatedStepRow): number {
  if (r.kind === 'static_batch') return r.prompt_tokens + r.output_tokens;
  if (r.decode_requests > 0 && r.prefill_requests === 0) return r.decode_context_tokens / r.decode_requests;
  const n = r.prefill_requests + r.decode_requests;
  return (r.prefill_tokens + r.prefill_context_tokens + r.decode_context_tokens + r.decode_requests) / n;
}

/**
 * Extrapolation reasons per row (the pricer's notes grouped; see extrapolationReason), computed once
 * per priced set: every buildResults call of a validation reads the same (a static batch carries one
 * note per priced step, so regrouping them on each call cost ≈ 0.1 s of a validation).
 */
const reasonsOf: (P: Priced) => string[][] = memoByObject((P) =>
  P.priced.map((p) => [...new Set(p.notes.map(extrapolationReason))]),
);

/** Every row's result under `use`, reporting `resFor`'s resources (rowResult). */
function buildResults(P: Priced, F: HostFits, use: Use, resFor: Composition = 'no_overlap'): RowResult[] {
  const reasons = reasonsOf(P);
  return P.rows.map((_, i) => rowResult(P, F, i, use, resFor, reasons[i]!));
}

const pts = (rs: readonly RowResult[], c: Composition): ScoredPoint[] =>
  rs.map((r) => ({ predicted_us: r.predicted_us[c], measured_us: r.measured_us, group: r.group, batch: r.batch }));
const heldOf = (results: readonly RowResult[]) =>
  results.filter((r) => !r.used_for_host_fit && r.excluded === undefined);
function regimesOf(held: readonly RowResult[], c: Composition): Record<Regime, RegimeMetrics | null> {
  const o = {} as Record<Regime, RegimeMetrics | null>;
  for (const g of REGIMES)
    o[g] = metricsOrNull(
      pts(
        held.filter((r) => r.regime === g),
        c,
      ),
    );
  return o;
}

/**
 * The engine compute-efficiency term: for NoOverlap and CMOverlap, both variants are scored on the
 * same held-out rows; each composition's headline variant follows `mode` (auto = held-out evidence,
 * rule in engineSmChoice), independently. Sets `host_fit.fits` to the variants used.
 */
function chooseEngineSm(
  P: Priced,
  F: HostFits,
  mode: EngineSmMode,
): { use: Use; engine_sm?: EngineSmOutcome; engine_sm_cm_overlap?: EngineSmOutcome } {
  const use: Use = { no_overlap: false, cm_overlap: false, overlap: false };
  if (!F.host_fit) return { use };
  const heldNone = heldOf(buildResults(P, F, { no_overlap: false, cm_overlap: false, overlap: false }));
  const heldAll = heldOf(buildResults(P, F, { no_overlap: true, cm_overlap: true, overlap: false }));
  const outcome = (c: Composition): EngineSmOutcome => {
    const without = regimesOf(heldNone, c);
    const withSm = regimesOf(heldAll, c);
    const choice = engineSmChoice(without, withSm, mode, c);
    use[c] = choice.use;
    const withFits = [...F.fittedBy.true.values()].filter((f) => f.composition === c);
    return {
      ...{ mode, composition: c, used: choice.use, reason: choice.reason },
      scales: withFits.filter((f) => f.sm_scale).map((f) => ({ engine: f.engine, ...f.sm_scale! })),
      without: { regimes: without, overall: computeMetrics(pts(heldNone, c)) },
      with: { regimes: withSm, overall: computeMetrics(pts(heldAll, c)) },
      with_fits: withFits,
    };
  };
  const engine_sm = outcome('no_overlap');
  const engine_sm_cm_overlap = mode !== 'off' ? outcome('cm_overlap') : undefined;
  F.host_fit.fits = [...F.fittedBy.false.keys()].map(
    (k) => (use[k.slice(k.lastIndexOf('|') + 1) as Composition] ? F.fittedBy.true : F.fittedBy.false).get(k)!,
  );
  return { use, engine_sm, ...(engine_sm_cm_overlap ? { engine_sm_cm_overlap } : {}) };
}

/** @throws UserError naming file and row when any composition's prediction is not positive */
function checkPositive(results: readonly RowResult[]): void {
  for (const rr of results) {
    for (const c of COMPOSITIONS) {
      if (!(rr.predicted_us[c] > 0)) {
        throw new UserError(
          `${rr.file} row ${rr.row}: ${c} prediction is ${rr.predicted_us[c]} µs (not positive); check the registry's host terms`,
        );
      }
    }
  }
}

/** Held-out metrics per composition: per regime, pooled, and per aggregation group. */
function scoreHeldOut(
  held: readonly RowResult[],
): Pick<CoreResult, 'regimes_by_composition' | 'overall_by_composition' | 'groups'> {
  const regimes_by_composition = {} as Record<Composition, Record<Regime, RegimeMetrics | null>>;
  const overall_by_composition = {} as Record<Composition, RegimeMetrics>;
  for (const c of COMPOSITIONS) {
    regimes_by_composition[c] = regimesOf(held, c);
    overall_by_composition[c] = computeMetrics(pts(held, c));
  }
  const groups: GroupMetrics[] = [...groupBy(held, aggregationKey).values()].map((g) => {
    const metrics = {} as Record<Composition, RegimeMetrics>;
    for (const c of COMPOSITIONS) metrics[c] = computeMetrics(pts(g, c));
    return {
      key: {
        model: g[0]!.model,
        chip: g[0]!.chip,
        tp: g[0]!.tp,
        kind: g[0]!.kind,
        engine: g[0]!.engine,
        regime: g[0]!.regime,
      },
      metrics,
    };
  });
  return { regimes_by_composition, overall_by_composition, groups };
}

/**
 * Decode double-charge check (issue 7 "one known trap"): a GEMM ramp that already contains the
 * weight reads makes small-batch decode SM time comparable to the HBM weight read. A compute-only
 * ramp gives SM/HBM ≈ (FLOPs per weight byte = m) · (1 + m_half/m) · derate / (ridge · eps_max),
 * with ridge = peak/bandwidth ≈ 150–300 FLOP/B on the shipped chips: well under 0.1 at batch ≤ 4.
 * DECISION: flag above 0.25. Uses the registry's SM (the pricer's, before any engine
 * compute-efficiency term): the check is about the ramp.
 */
function doubleChargeCheck(results: readonly RowResult[], priced: readonly RowPrice[]): CoreResult['double_charge'] {
  const dec = results
    .map((r, i) => ({ r, p: priced[i]! }))
    .filter(({ r, p }) => r.regime === 'decode' && r.batch <= 4 && p.resources_us.hbm > 0);
  if (!dec.length) return undefined;
  const max = Math.max(...dec.map(({ p }) => p.resources_us.sm / p.resources_us.hbm));
  const suspicious = max > DOUBLE_CHARGE_SM_OVER_HBM;
  const note = suspicious
    ? `decode steps at batch ≤ 4 price SM at up to ${(100 * max).toFixed(0)}% of HBM: the GEMM ramp may contain the weight reads (double charge under NoOverlap)`
    : `decode steps at batch ≤ 4 price SM at most ${(100 * max).toFixed(0)}% of HBM: weight reads are not re-charged as SM time`;
  return { checked_rows: dec.length, max_sm_over_hbm: max, suspicious, note };
}

/** Metrics of the flag-excluded rows per (flag, regime), under the headline composition. */
function flaggedMetrics(results: readonly RowResult[], headline: Composition): NonNullable<CoreResult['flagged']> {
  const flagged: NonNullable<CoreResult['flagged']> = [];
  for (const [k, g] of groupBy(
    results.filter((r) => r.excluded !== undefined),
    (r) => `${r.excluded}|${r.regime}`,
  )) {
    const [flag, regime] = k.split('|') as [string, Regime];
    flagged.push({ flag, regime, metrics: computeMetrics(pts(g, headline)) });
  }
  return flagged;
}

/**
 * Validate parsed rows on `opts.chip`: price every row, fit the host terms (and the engine term s)
 * on the training subset when asked, score the held-out rows per composition and regime, and pick
 * the headline composition. Rows of another chip are skipped with a warning (the registry is per chip).
 * @throws UserError when no row is left, or naming file and row when pricing fails.
 */
export function validateRows(all: readonly LocatedStepRow[], opts: CoreOptions, deps: ValidationDeps): CoreResult {
  const { rows, warnings } = rowsOnChip(all, opts.chip);
  const P = priceRows(rows, opts, deps);
  const F = fitHost(P, opts, deps);
  const { use, engine_sm, engine_sm_cm_overlap } = chooseEngineSm(P, F, opts.engineSm ?? 'off');
  let results = buildResults(P, F, use);
  checkPositive(results);
  checkStepUnits(
    results,
    results.map((r) => r.predicted_us.no_overlap),
  );
  // After the file-level check, whose message suits a whole file in another unit better.
  checkStepRowUnits(P.rows, P.priced);
  // Tiers after the unit checks above, so a file in the wrong unit is refused before any tier fit.
  const T = opts.tiers ? validationTiers(P, opts.chip, opts.tiers, deps) : undefined;
  const held = heldOf(results);
  if (held.length === 0)
    throw new UserError(
      `no scored rows left for chip ${opts.chip} (every row is excluded by a flag or trains the host fit)`,
    );
  const scores = scoreHeldOut(held);
  const { headline, headline_reason } = headlineChoice(
    scores.overall_by_composition,
    scores.regimes_by_composition,
    held.length,
    opts.composition,
  );
  // Rows report the headline's resources and host (same predictions, same held-out set).
  if (headline !== 'no_overlap') results = buildResults(P, F, use, headline);
  const double_charge = doubleChargeCheck(results, P.priced);
  const flagged = flaggedMetrics(results, headline);
  return {
    chip: opts.chip,
    rows: results,
    regimes: scores.regimes_by_composition[headline],
    regimes_by_composition: scores.regimes_by_composition,
    groups: scores.groups,
    overall: scores.overall_by_composition[headline],
    overall_by_composition: scores.overall_by_composition,
    headline,
    headline_reason,
    ...(F.host_fit ? { host_fit: F.host_fit } : {}),
    ...(engine_sm ? { engine_sm } : {}),
    ...(engine_sm_cm_overlap ? { engine_sm_cm_overlap } : {}),
    extrapolation: extrapolationCounts(results),
    ...(double_charge ? { double_charge } : {}),
    ...(flagged.length ? { flagged } : {}),
    ...(T ? { tiers: T.tiers } : {}),
    ...(T?.decode_rates.length ? { decode_rates: T.decode_rates } : {}),
    warnings: [...warnings, ...(T?.warnings ?? [])],
  };
}

/**
 * The headline composition: forced, or the one of the three with the lowest held-out pooled MAPE;
 * ties go to the earlier of NoOverlap, CMOverlap, Overlap (NoOverlap first: seed "Which estimate to
 * use"). The reason names every composition's pooled and per-regime MAPE (the evidence).
 */
export function headlineChoice(
  overall: Record<Composition, RegimeMetrics>,
  byRegime: Record<Composition, Record<Regime, RegimeMetrics | null>>,
  nHeld: number,
  forced?: Composition,
): { headline: Composition; headline_reason: string } {
  const names = COMPOSITIONS.map((c) => COMPOSITION_NAME[c]).join(' / ');
  const pooled = COMPOSITIONS.map((c) => `${COMPOSITION_NAME[c]} ${overall[c].mape_pct.toFixed(1)}%`).join(', ');
  const perRegime = REGIMES.filter((g) => COMPOSITIONS.every((c) => byRegime[c][g]))
    .map((g) => `${g} ${COMPOSITIONS.map((c) => `${byRegime[c][g]!.mape_pct.toFixed(1)}%`).join(' / ')}`)
    .join('; ');
  if (forced)
    return { headline: forced, headline_reason: `forced by --composition ${forced} (held-out pooled MAPE ${pooled})` };
  let headline: Composition = COMPOSITIONS[0];
  for (const c of COMPOSITIONS) if (overall[c].mape_pct < overall[headline].mape_pct) headline = c;
  const tied = COMPOSITIONS.filter((c) => c !== headline && overall[c].mape_pct === overall[headline].mape_pct);
  return {
    headline,
    headline_reason:
      `${COMPOSITION_NAME[headline]} has the lowest held-out pooled MAPE over ${nHeld} rows (${pooled}; per regime ${names}: ${perRegime})` +
      (tied.length
        ? `; tie with ${tied.map((c) => COMPOSITION_NAME[c]).join(', ')} → the earlier of NoOverlap, CMOverlap, Overlap (seed "Which estimate to use")`
        : ''),
  };
}

/**
 * Rows per extrapolation reason, most frequent first (ties by reason): every priced row, the scored
 * rows, and the scored rows per regime. A row with several reasons counts once under each.
 */
export function extrapolationCounts(results: readonly RowResult[]): ExtrapolationCount[] {
  const by = new Map<string, ExtrapolationCount>();
  for (const r of results) {
    const scored = !r.used_for_host_fit && r.excluded === undefined;
    for (const reason of r.extrapolation_reasons) {
      let e = by.get(reason);
      if (!e) {
        e = { reason, rows: 0, scored_rows: 0, scored_by_regime: {} };
        by.set(reason, e);
      }
      e.rows++;
      if (scored) {
        e.scored_rows++;
        e.scored_by_regime[r.regime] = (e.scored_by_regime[r.regime] ?? 0) + 1;
      }
    }
  }
  return [...by.values()].sort((a, b) => b.rows - a.rows || (a.reason < b.reason ? -1 : a.reason > b.reason ? 1 : 0));
}
