/**
 * Validation tiers (issue 16; docs/validation.md "Tiers"): how much of a score was learned from the
 * rows being scored. Every tier scores the chip's scored rows (no flag excludes them) with an engine
 * profile (./profile.ts) fitted on rows that are never scored by it:
 *
 * - (a) `uncalibrated`: no fit; the registry's host terms, CMOverlap (the composition fixed a priori:
 *   the pricer's held-out pick, src/cli/commands/price-run.ts `HELD_OUT_HEADLINE`).
 * - (b) `cross_deployment` (the headline): leave one deployment (model × tp × chip) out: the profile
 *   is fitted on every other deployment of the engine (this chip's and every other chip's given: the
 *   same model × tp on another chip is another deployment) and scores the held-out one; once per
 *   deployment of this chip.
 * - (b′) `cross_deployment_same_chip`: (b) trained on this chip's other deployments only (absent when
 *   no other chip's rows are given: then it is (b)).
 * - (c) `cross_chip`: the profile is fitted on the engine's rows of the other chips given and scores
 *   every row of this chip (absent when no other chip's rows are given).
 * - (d) `in_deployment`: the `fraction=F` rule of `--fit-host` (./hostfit.ts `selectTrainingRows`):
 *   one profile per engine fitted on every k-th row of each group, scoring the rest.
 * In (b)–(d) the composition is the one each fold's profile chose on its training rows (./profile.ts),
 * and the report counts how often each fold picked which. Pure given the priced rows.
 */
import { computeMetrics, metricsOrNull, type ScoredPoint } from './metrics.ts';
import { fitProfile, predictWithFit, predictWithProfile, type ProfileFit, ScaledCmCache } from './profile.ts';
import {
  applyHostTerms,
  largeStepExtraUs,
  parseHostRule,
  selectTrainingRows,
  smScaleFor,
  type HostWeighting,
} from './hostfit.ts';
import { batchSizeOf, stepBatch } from './expand.ts';
import { priceRows, shapeGroup, type Priced, type ValidationDeps } from './priced.ts';
import {
  COMPOSITIONS,
  HEADLINE_TIER,
  REGIMES,
  TIER_OUTLIER_APE_PCT,
  type Composition,
  type DecodeRate,
  type HostFitEngine,
  type Regime,
  type RegimeMetrics,
  type Tier,
  type TierFold,
  type TierOptions,
  type TierOutlier,
  type TierSummary,
} from './types.ts';
import { ENGINE_HOST_TERMS } from '../core/laws/host.ts';
import { engineForChip, type EngineProfile } from '../core/schemas/engine.ts';

/** Letter and title of each tier, as every report prints them. */
export const TIER_TITLE: Record<Tier, string> = {
  uncalibrated: '(a) uncalibrated: registry host terms, CMOverlap',
  cross_deployment: '(b) cross-deployment: leave one deployment (model × tp × chip) out',
  cross_deployment_same_chip: '(b′) cross-deployment, this chip only: trained on its other deployments',
  cross_chip: '(c) cross-chip: profile fitted on another chip’s rows',
  in_deployment: '(d) in-deployment: fraction rule inside each group',
  engine_profile: '(e) the stored engine profile, as it is',
};

interface TierResult {
  tier: Tier;
  regimes: Record<Regime, RegimeMetrics | null>;
  overall: RegimeMetrics;
  picks: Record<Composition, number>;
  folds: TierFold[];
  /** Predicted µs per scored row index (each row scored by exactly one fold). */
  predicted_us: Map<number, number>;
  /** Per scored row index, the fold that scored it. */
  foldOf: Map<number, number>;
  /** Per fold, its profile (undefined: registry host terms; a function: a stored profile). */
  fits: Array<ProfileFit | Predict | undefined>;
}

/** Deployment of a row: model × tp × chip. */
export function deploymentOf(r: { model: string; tp: number; chip: string }): string {
  return `${r.model} tp${r.tp} ${r.chip}`;
}

/** What the tiers read: the priced rows (this chip's first, then the other chips') and the chip. */
interface TierInput {
  P: Priced;
  cache: ScaledCmCache;
  chip: string;
  weighting: HostWeighting;
  /** TierOptions.chip_scales. */
  chipScales: boolean;
  /** The `fraction=F` rule of tier (d). */
  fraction: string;
}

function eligible(P: Priced): number[] {
  return P.rows.map((_, i) => i).filter((i) => P.excl[i] === undefined);
}

type Predict = (i: number) => number;

function tierOf(
  tier: Tier,
  T: TierInput,
  folds: TierFold[],
  fits: Array<ProfileFit | Predict | undefined>,
): TierResult {
  const predicted_us = new Map<number, number>();
  const foldOf = new Map<number, number>();
  const picks = Object.fromEntries(COMPOSITIONS.map((c) => [c, 0])) as Record<Composition, number>;
  folds.forEach((f, j) => {
    const est = fits[j];
    if (est && typeof est !== 'function') picks[est.composition]++;
    for (const i of f.scored) foldOf.set(i, j);
    for (const i of f.scored)
      predicted_us.set(
        i,
        typeof est === 'function'
          ? est(i)
          : est
            ? predictWithProfile(T.P, T.cache, i, est)
            : T.P.priced[i]!.cm_overlap_nohost_us + T.P.priced[i]!.host_us,
      );
  });
  const pts = (idx: number[]): ScoredPoint[] =>
    idx.map((i) => ({
      predicted_us: predicted_us.get(i)!,
      measured_us: T.P.rows[i]!.measured_us,
      group: shapeGroup(T.P.rows[i]!, T.P.regimes[i]!),
      batch: batchSizeOf(T.P.rows[i]!),
    }));
  const all = [...predicted_us.keys()].sort((a, b) => a - b);
  const regimes = {} as Record<Regime, RegimeMetrics | null>;
  for (const g of REGIMES) regimes[g] = metricsOrNull(pts(all.filter((i) => T.P.regimes[i] === g)));
  return { tier, regimes, overall: computeMetrics(pts(all)), picks, folds, predicted_us, foldOf, fits };
}

/** A fold from a training and a scored set: the profile fitted per engine of the scored rows. */
function runFold(
  T: TierInput,
  label: string,
  train: number[],
  scored: number[],
): [TierFold[], Array<ProfileFit | undefined>] {
  const folds: TierFold[] = [];
  const fits: Array<ProfileFit | undefined> = [];
  for (const engine of [...new Set(scored.map((i) => T.P.rows[i]!.engine))]) {
    const tr = train.filter((i) => T.P.rows[i]!.engine === engine);
    const sc = scored.filter((i) => T.P.rows[i]!.engine === engine);
    const fit = tr.length ? fitProfile(T.P, T.cache, engine, tr, T.weighting, T.chipScales) : undefined;
    folds.push({
      label: `${label}${tr.length ? '' : ' (no training rows: registry host terms)'}`,
      train: tr,
      scored: sc,
      composition: fit ? fit.composition : 'registry',
      // the scored rows' chip's s (every fold scores one chip's rows)
      sm_scale: fit ? smScaleFor(fit.fits[fit.composition], T.P.rows[sc[0]!]!.chip) : 1,
      ...(fit ? { large_step: largeStepOf(fit.fits[fit.composition]) } : {}),
    });
    fits.push(fit);
  }
  return [folds, fits];
}

/**
 * Leave one deployment out: per deployment of the scored rows `here`, a profile fitted on the rows of
 * `pool` outside that deployment scores it (tier (b) with `pool` = every chip's eligible rows; the
 * same-chip variant with `pool` = this chip's).
 */
function crossDeployment(tier: Tier, T: TierInput, here: number[], pool: number[]): TierResult {
  const folds: TierFold[] = [];
  const fits: Array<ProfileFit | undefined> = [];
  for (const d of [...new Set(here.map((i) => deploymentOf(T.P.rows[i]!)))]) {
    const out = (i: number) => deploymentOf(T.P.rows[i]!) !== d;
    const [f, p] = runFold(
      T,
      `without ${d}`,
      pool.filter(out),
      here.filter((i) => !out(i)),
    );
    folds.push(...f);
    fits.push(...p);
  }
  return tierOf(tier, T, folds, fits);
}

/**
 * Every tier the rows allow, (a) to (d); (c) only when rows of another chip are given.
 * @throws UserError when the fraction rule is malformed (parseHostRule)
 */
function computeTiers(T: TierInput): TierResult[] {
  const el = eligible(T.P);
  const here = el.filter((i) => T.P.rows[i]!.chip === T.chip);
  const other = el.filter((i) => T.P.rows[i]!.chip !== T.chip);
  const out: TierResult[] = [];
  out.push(
    tierOf(
      'uncalibrated',
      T,
      [{ label: 'registry', train: [], scored: here, composition: 'registry', sm_scale: 1 }],
      [undefined],
    ),
  );
  out.push(crossDeployment('cross_deployment', T, here, el));
  if (other.length) out.push(crossDeployment('cross_deployment_same_chip', T, here, here));
  if (other.length) {
    const chips = [...new Set(other.map((i) => T.P.rows[i]!.chip))].join(', ');
    const [f, p] = runFold(T, `fitted on ${chips}`, other, here);
    out.push(tierOf('cross_chip', T, f, p));
  }
  const rule = parseHostRule(T.fraction);
  const chosen = selectTrainingRows(
    here.map((i) => ({ batch: batchSizeOf(T.P.rows[i]!), group: shapeGroup(T.P.rows[i]!, T.P.regimes[i]!) })),
    rule,
  );
  const train = here.filter((_, j) => chosen.has(j));
  const [f, p] = runFold(
    T,
    T.fraction,
    train,
    here.filter((_, j) => !chosen.has(j)),
  );
  out.push(tierOf('in_deployment', T, f, p));
  return out;
}

/** A fit's large-step threshold and factor (threshold 0 when the fit has none). */
function largeStepOf(f: HostFitEngine): { message_bytes: number; factor: number } {
  const t = f.terms.find((x) => x.name === 'large_step_nvlink_factor');
  return { message_bytes: f.large_step_message_bytes ?? 0, factor: t?.value_us ?? 0 };
}

/** A stored profile as a host fit of its composition (terms and s as stored). */
function profileAsFit(p: EngineProfile): HostFitEngine {
  return {
    engine: p.name,
    composition: p.composition,
    n_train: p.fit.n_train,
    terms: ENGINE_HOST_TERMS.map((name) => ({
      name,
      value_us: p.terms[name].value,
      identified: p.terms[name].identified,
    })),
    sm_scale: { value: p.sm_scale.value, identified: p.sm_scale.identified },
    ...(p.sm_scale_by_chip
      ? { sm_scale_by_chip: Object.fromEntries(Object.entries(p.sm_scale_by_chip).map(([c, t]) => [c, t.value])) }
      : {}),
    ...(p.large_step_message_bytes !== undefined ? { large_step_message_bytes: p.large_step_message_bytes } : {}),
    train_rms_us: NaN,
    notes: [],
  };
}

/**
 * The tiers of one validation, as reported: this chip's priced rows `P` (ValidationResult.rows order),
 * the other chips' rows priced here and appended.
 */
export function validationTiers(
  P: Priced,
  chip: string,
  o: TierOptions,
  deps: ValidationDeps,
): { tiers: TierSummary[]; decode_rates: DecodeRate[]; warnings: string[] } {
  const other = o.otherRows?.length ? priceRows([...o.otherRows], {}, deps) : undefined;
  const all: Priced = other
    ? {
        rows: [...P.rows, ...other.rows],
        priced: [...P.priced, ...other.priced],
        features: [...P.features, ...other.features],
        regimes: [...P.regimes, ...other.regimes],
        excl: [...P.excl, ...other.excl],
        keys: [...P.keys, ...other.keys],
        terms: [...P.terms, ...other.terms],
      }
    : P;
  const T: TierInput = {
    P: all,
    cache: new ScaledCmCache(all, deps),
    chip,
    weighting: o.weighting ?? 'relative',
    chipScales: o.chip_scales ?? false,
    fraction: o.fraction ?? 'fraction=0.25',
  };
  const tiers = computeTiers(T);
  const warnings: string[] = [];
  if (o.profile) {
    const fit = profileAsFit(o.profile);
    const scored = eligible(all).filter((i) => all.rows[i]!.chip === chip && all.rows[i]!.engine === o.profile!.name);
    const files = new Set(o.profile.provenance.steps.map((s) => s.file));
    const inSample = scored.some((i) => files.has(all.rows[i]!.file));
    if (!scored.length) warnings.push(noProfileRowsLine(all, chip, o.profile.name));
    else
      tiers.push(
        tierOf(
          'engine_profile',
          T,
          [
            {
              label: `${o.profile.name}${inSample ? ' (in-sample: fitted on these files; its own holdout is in the profile)' : ''}; ${engineForChip(o.profile, all.rows[scored[0]!]!.chip).sm_scale.note}`,
              ...{ composition: o.profile.composition, sm_scale: smScaleFor(fit, all.rows[scored[0]!]!.chip) },
              ...{ train: [], scored },
            },
          ],
          [(i) => predictWithFit(all, T.cache, i, o.profile!.composition, fit)],
        ),
      );
  }
  const b = tiers.find((t) => t.tier === 'cross_deployment')!;
  const summaries = tiers.map((t) => ({
    tier: t.tier,
    title: TIER_TITLE[t.tier],
    regimes: t.regimes,
    overall: t.overall,
    picks: t.picks,
    folds: t.folds,
    predicted_us: P.rows.map((_, i) => t.predicted_us.get(i) ?? null),
    ...(t.tier === HEADLINE_TIER ? { outliers: outliersOf(T, t, P.rows.length) } : {}),
  }));
  return { tiers: summaries, decode_rates: decodeRates(P, deps, b.predicted_us), warnings };
}

/** The line `validate --engine` prints when no row of the profile's engine on `chip` is scored (no tier (e)). */
function noProfileRowsLine(all: Priced, chip: string, engine: string): string {
  const engines = [...new Set(all.rows.filter((r) => r.chip === chip).map((r) => r.engine))].sort();
  return `--engine ${engine}: no rows of engine ${engine} on ${chip} were scored (the rows' engines: ${engines.join(', ') || 'none'}), so there is no tier (e)`;
}

/** Tokens a row schedules (TierOutlier.tokens). */
function tokensOf(r: Priced['rows'][number]): number {
  return r.kind === 'static_batch' ? r.batch * r.prompt_tokens : r.prefill_tokens + r.decode_requests;
}

/**
 * The rows of this chip (indices below `n`) a tier prices more than `TIER_OUTLIER_APE_PCT` off, with
 * the registry's resource terms at s = 1 and the scoring fold's host and s (types.ts `TierOutlier`).
 */
function outliersOf(T: TierInput, t: TierResult, n: number): TierOutlier[] {
  const out: TierOutlier[] = [];
  for (const [i, pred] of t.predicted_us) {
    const r = T.P.rows[i]!;
    const error_pct = (pred / r.measured_us - 1) * 100;
    if (i >= n || !(Math.abs(error_pct) > TIER_OUTLIER_APE_PCT)) continue;
    const j = t.foldOf.get(i)!;
    const est = t.fits[j];
    const fit = est && typeof est !== 'function' ? est.fits[est.composition] : undefined;
    const { sm, hbm, nvlink, nic } = T.P.priced[i]!.resources_us;
    out.push({
      ...{ row: i, tokens: tokensOf(r), measured_us: r.measured_us, predicted_us: pred, error_pct },
      resources_us: { sm, hbm, nvlink, nic },
      host_us: fit
        ? applyHostTerms(fit, T.P.features[i]!) - largeStepExtraUs(fit, T.P.features[i]!)
        : T.P.priced[i]!.host_us,
      large_step_us: fit ? largeStepExtraUs(fit, T.P.features[i]!) : 0,
      sm_scale: t.folds[j]!.sm_scale,
    });
  }
  return out.sort((a, b) => a.row - b.row);
}

/**
 * Implied decode-attention rate of every scored decode step (types.ts `DecodeRate`): the step is
 * priced again with every request at 0 context (registry, s = 1); the NoOverlap difference is the
 * priced attention (KV read) time.
 */
function decodeRates(P: Priced, deps: ValidationDeps, predicted: Map<number, number>): DecodeRate[] {
  if (!deps.kvFacts) return [];
  const out: DecodeRate[] = [];
  for (const [i, pred] of predicted) {
    const r = P.rows[i]!;
    if (i >= P.rows.length || P.regimes[i] !== 'decode' || r.kind !== 'step') continue;
    const batch = stepBatch(r);
    const pricer = deps.pricerFor(P.keys[i]!);
    const at0 = pricer.price({ requests: batch.requests.map((q) => ({ ...q, computed_tokens: 0, prompt_tokens: 1 })) });
    const p = pricer.price(batch);
    const attention = p.no_overlap_us - p.resources_us.host - (at0.no_overlap_us - at0.resources_us.host);
    const f = deps.kvFacts(P.keys[i]!);
    const kv_bytes = r.decode_context_tokens * f.kv_bytes_per_token_per_rank;
    const left = r.measured_us - pred + attention;
    out.push({
      row: i,
      kv_heads_per_gpu: f.kv_heads_per_gpu,
      kv_bytes,
      priced_attention_us: attention,
      priced_tb_per_s: attention > 0 ? kv_bytes / attention / 1e6 : NaN,
      implied_tb_per_s: left > 0 ? kv_bytes / left / 1e6 : NaN,
    });
  }
  return out.sort((a, b) => a.row - b.row);
}
