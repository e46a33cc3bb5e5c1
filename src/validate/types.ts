/**
 * Types of the held-out validation (issue 7). Times µs; errors in percent.
 *
 * Conventions (stated in every report):
 * - APE = |pred/meas − 1| · 100; MAPE is its mean.
 * - median and p90 APE are nearest-rank percentiles: `sorted[ceil(p·n) − 1]` (src/core/numeric/stats.ts).
 * - bias = mean of the signed (pred/meas − 1) · 100 (negative = predictions too fast).
 * - geo_mean_ratio = exp(mean ln(pred/meas)) (1 = unbiased in the log).
 * - shape error (reference §5.2; robust anchor, issue 16): within a group of ≥ 2 rows, e_i = r_i / r_0 − 1
 *   with r = pred/meas and r_0 the group's median ratio; every row counted; shape_mape_pct = mean |e_i| · 100.
 */
import type { EngineHostTerm } from '../core/laws/host.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import type { EngineProfile } from '../core/schemas/engine.ts';
import type { LocatedStepRow } from '../measurements/schema.ts';
import type { Resource, ResourceTimes } from '../pricer/types.ts';

/** The regimes every metric is reported for. `mixed` = a step with both prefill and decode requests. */
export const REGIMES = ['prefill', 'decode', 'mixed', 'static_batch'] as const;
export type Regime = (typeof REGIMES)[number];

/**
 * The three step estimates of the pricer: the seed's NoOverlap and Overlap ("Composing the step") and
 * stepcal's CMOverlap (`compute_memory_overlap_us`, docs/pricer.md "Three estimates"). The order is
 * the headline tie-break order (NoOverlap first: seed "Which estimate to use").
 */
export const COMPOSITIONS = ['no_overlap', 'cm_overlap', 'overlap'] as const;
export type Composition = (typeof COMPOSITIONS)[number];

/** Display names of the compositions (reports, reasons, CLI output). */
export const COMPOSITION_NAME: Record<Composition, string> = {
  no_overlap: 'NoOverlap',
  cm_overlap: 'CMOverlap',
  overlap: 'Overlap',
};

/**
 * Validation tiers (issue 16; src/validate/tiers.ts, docs/validation.md "Tiers"): how much of a score was
 * learned from the rows being scored. `engine_profile` = a stored profile (`--engine`) as it is.
 */
export const TIERS = [
  'uncalibrated',
  'cross_deployment',
  'cross_deployment_same_chip',
  'cross_chip',
  'in_deployment',
  'engine_profile',
] as const;
export type Tier = (typeof TIERS)[number];

/** The tier every report leads with. */
export const HEADLINE_TIER: Tier = 'cross_deployment';

/** Error metrics of a set of rows. Percent unless named otherwise. */
export interface RegimeMetrics {
  n: number;
  mape_pct: number;
  /** Nearest-rank median of APE. */
  median_ape_pct: number;
  /** Nearest-rank 90th percentile of APE. */
  p90_ape_pct: number;
  /** Signed mean error, mean (pred/meas − 1) · 100. */
  bias_pct: number;
  /** exp(mean ln(pred/meas)). */
  geo_mean_ratio: number;
  /** Shape error over the rows' groups (absent when no group has ≥ 2 held-out rows). */
  shape_mape_pct?: number;
  /** Non-anchor points the shape error was computed on. */
  shape_n?: number;
}

/** One priced held-out row. */
export interface RowResult {
  /** Input file and 1-based data row. */
  file: string;
  row: number;
  model: string;
  chip: string;
  tp: number;
  engine: string;
  kind: 'step' | 'static_batch';
  regime: Regime;
  /** Requests in the step (kind=step) or `batch` (static_batch): the x of shape and error-vs-batch. */
  batch: number;
  /**
   * Context tokens per request (the x of residual vs context): decode steps Σ context / requests;
   * prefill steps (new + computed tokens) / requests; static batches prompt + output tokens (the last step's).
   */
  context_tokens: number;
  group: string;
  flags: string;
  measured_us: number;
  /** Priced µs per composition, host included (fitted host terms when --fit-host is used). */
  predicted_us: Record<Composition, number>;
  /** pred/meas per composition. */
  ratio: Record<Composition, number>;
  /** Host µs included in the headline composition's prediction (registry host, or its fitted host terms). */
  host_us: number;
  /** Resource with the largest total (summed over a static batch's steps). */
  bottleneck: Resource;
  /**
   * Per-resource µs (summed over a static batch's steps) as the headline composition prices them:
   * SM with its engine term s where it uses one, host as in its prediction.
   */
  resources_us: ResourceTimes;
  /** Pricer calls behind this row (1 for a step; 1 + output_tokens − 1 for a static batch). */
  steps_priced: number;
  extrapolated: boolean;
  /**
   * Why the row is extrapolated: one short reason per kind of pricer note (numbers that vary per step,
   * such as GiB or message bytes, are dropped so rows group; `extrapolationReason` in expand.ts).
   */
  extrapolation_reasons: string[];
  /** True when the row trained the host fit: it is then excluded from every reported error. */
  used_for_host_fit: boolean;
  /** Why the row is left out of the scored metrics (a flag, see `DEFAULT_EXCLUDED_FLAGS`); absent = scored. */
  excluded?: string;
}

/**
 * Row flags that keep a row out of the scored metrics (still priced and listed). DECISION
 * (docs/validation.md): `admitted_fewer` (the engine ran fewer requests than the row states) and
 * `power_capped` (a different operating point of the chip than the registry was fitted on) on every
 * row; `stopped_early` and `e2e_inconsistent` (the end-to-end time disagrees with prompt + (output − 1)
 * · token time) only on static_batch rows, whose measurement they concern.
 */
export const DEFAULT_EXCLUDED_FLAGS: Readonly<Record<string, 'all' | 'static_batch'>> = {
  admitted_fewer: 'all',
  power_capped: 'all',
  stopped_early: 'static_batch',
  e2e_inconsistent: 'static_batch',
};

/** Key of an aggregation group (issue 7: per model, chip, tp, kind, engine), split by regime. */
export interface GroupKey {
  model: string;
  chip: string;
  tp: number;
  kind: 'step' | 'static_batch';
  engine: string;
  regime: Regime;
}

export interface GroupMetrics {
  key: GroupKey;
  /** Held-out metrics for each composition. */
  metrics: Record<Composition, RegimeMetrics>;
}

/** One host term of the per-engine host fit, µs. */
export interface HostTerm {
  /** One of `ENGINE_HOST_TERMS` (`large_step_nvlink_factor` is dimensionless: µs per priced NVLink µs). */
  name: EngineHostTerm;
  value_us: number;
  /** False when the training rows cannot separate it (value then 0 and the term folded, see note). */
  identified: boolean;
  note?: string;
}

/** Host terms fitted for one engine and one composition on the training subset. */
export interface HostFitEngine {
  engine: string;
  composition: Composition;
  n_train: number;
  terms: HostTerm[];
  /**
   * Engine compute-efficiency term s (NoOverlap and CMOverlap fits with the term only): the priced SM
   * time is multiplied by s (NoOverlap: linear least squares; CMOverlap: bounded 1-D search, s inside
   * max(s·SM, HBM)). identified = false or a note → held at 1 (a CMOverlap s at a search bound keeps
   * its value and says so in the note).
   */
  sm_scale?: { value: number; identified: boolean; note?: string };
  /**
   * CMOverlap with training rows of two or more chips: s per chip (acc19; docs/validation.md "s per
   * chip"), each fitted on the training rows with the host terms shared; `sm_scale` is then the pooled
   * s, used for a chip absent here (`smScaleFor`).
   */
  sm_scale_by_chip?: Record<string, number>;
  /** Least-squares weighting (`relative` = rows weighted by 1/measured). */
  weighting?: 'relative' | 'absolute';
  /**
   * Threshold of the large-step collective term, bytes of a step's collective message (one of `LARGE_STEP_MESSAGE_BYTES_GRID`,
   * chosen on the training rows); absent = the features' `large_step_nvlink_us` as given.
   */
  large_step_message_bytes?: number;
  /** RMS of the training residual after the fit, µs. */
  train_rms_us: number;
  /** RMS of the training residual relative to measured, percent. */
  train_rms_rel_pct?: number;
  /** Human-readable statements (e.g. the batch=1 non-identifiability). */
  notes: string[];
}

/** Whether the NoOverlap and CMOverlap headlines use the engine compute-efficiency term: never, always, or by held-out evidence. */
export const ENGINE_SM_MODES = ['off', 'on', 'auto'] as const;
export type EngineSmMode = (typeof ENGINE_SM_MODES)[number];

export interface HostFitResult {
  /** The rule as given: `batch=1` or `fraction=F`. */
  rule: string;
  /** Least-squares weighting of the training rows. */
  weighting?: 'relative' | 'absolute';
  fits: HostFitEngine[];
  /** The rows used for training ("file:row"), excluded from every reported error. */
  training_rows: Array<{ file: string; row: number; engine: string; group: string }>;
  notes: string[];
}

export interface ValidationPinned {
  registry_sha256: string;
  stepcal_version: string;
  /** Flags as given (`--fit-host fraction=0.25`, ...). */
  flags: string[];
  inputs: Array<{ file: string; sha256: string }>;
}

/** Options of `runValidation`. */
export interface ValidationOptions {
  chip: string;
  registry: CoefficientSet[];
  stepFiles: string[];
  /** `batch=1` or `fraction=F` (0 < F < 1). */
  fitHost?: string;
  /** Force the headline composition; default: the one of the three with the lowest held-out pooled MAPE. */
  composition?: Composition;
  /** Registry file the sets came from: its bytes are hashed for the pin (else the canonical YAML of the sets). */
  registryFile?: string;
  /** Row flags that exclude rows from the scored metrics (default `DEFAULT_EXCLUDED_FLAGS`; {} = score every row). */
  excludeFlags?: Readonly<Record<string, 'all' | 'static_batch'>>;
  /** Engine compute-efficiency term: off (default) | on | auto (held-out evidence). */
  engineSm?: EngineSmMode;
  /** Host-fit least-squares weighting (default relative). */
  hostWeighting?: 'relative' | 'absolute';
  /** Flags to pin (defaults to the options above rendered as flags). */
  flags?: string[];
  /** Validation tiers (src/validate/tiers.ts `TierOptions`); absent = none. */
  tiers?: TierOptions;
}

export interface ValidationResult {
  chip: string;
  rows: RowResult[];
  /** Held-out metrics per regime for the headline composition (null = no rows of that regime). */
  regimes: Record<Regime, RegimeMetrics | null>;
  /** Held-out metrics per regime for every composition. */
  regimes_by_composition: Record<Composition, Record<Regime, RegimeMetrics | null>>;
  groups: GroupMetrics[];
  /** Pooled held-out metrics, headline composition (never reported without the per-regime figures). */
  overall: RegimeMetrics;
  overall_by_composition: Record<Composition, RegimeMetrics>;
  headline: Composition;
  /** Why the headline composition was chosen (the held-out evidence, or the forced flag). */
  headline_reason: string;
  host_fit?: HostFitResult;
  /** Scored metrics of the rows excluded by a flag, per flag and regime (headline composition), for information. */
  flagged?: Array<{ flag: string; regime: Regime; metrics: RegimeMetrics }>;
  /**
   * The engine compute-efficiency term (with --fit-host) for NoOverlap: held-out NoOverlap metrics
   * without and with s (same training rows), the fitted s per engine, and which the headline uses and why.
   */
  engine_sm?: EngineSmOutcome;
  /**
   * The same for CMOverlap (s enters through max(s·SM, HBM); fitted by a bounded 1-D search with the
   * host terms solved by weighted least squares inside). Absent without --fit-host or with --engine-sm off.
   */
  engine_sm_cm_overlap?: EngineSmOutcome;
  /**
   * Rows per extrapolation reason (the pricer's notes grouped, docs/validation.md), most frequent first:
   * every priced row, the scored ones, and the scored ones per regime.
   */
  extrapolation?: ExtrapolationCount[];
  /** Decode double-charge check (issue 7): SM vs HBM share on decode rows. */
  double_charge?: { checked_rows: number; max_sm_over_hbm: number; suspicious: boolean; note: string };
  /** Validation tiers (a)–(d) (and the stored profile's), when asked; (b) is the headline. */
  tiers?: TierSummary[];
  /** Decode-attention rate implied by each scored decode step under tier (b), with the tiers. */
  decode_rates?: DecodeRate[];
  warnings: string[];
  pinned: ValidationPinned;
}

/** Options of the validation tiers (src/validate/tiers.ts `validationTiers`). */
export interface TierOptions {
  /** The `fraction=F` rule of tier (d) (default fraction=0.25). */
  fraction?: string;
  weighting?: 'relative' | 'absolute';
  /** Rows of other chips (tier (c) trains on them); the pricer factory must price their chips. */
  otherRows?: readonly LocatedStepRow[];
  /** A stored engine profile: scored as it is, on the rows of its engine (tier (e)). */
  profile?: EngineProfile;
  /**
   * Fit CMOverlap's s per chip of each fold's training rows (acc19, `--engine-s per-chip`; docs/validation.md
   * "s per chip"); default one s per engine.
   */
  chip_scales?: boolean;
}

/** One fit of a tier: the rows it trained on and the rows it scored (never the same). */
export interface TierFold {
  label: string;
  /** The composition the fold's profile chose on its training rows (`registry`: no fit). */
  composition: Composition | 'registry';
  sm_scale: number;
  /** The fold's large-step threshold (bytes of a step's collective message) and factor (absent with no fit). */
  large_step?: { message_bytes: number; factor: number };
  /** Indices into the tier's rows: this chip's rows (`ValidationResult.rows` order), then the other chips'. */
  train: number[];
  scored: number[];
}

/** One tier's scores (scored rows of this chip, each by exactly one fold). */
export interface TierSummary {
  tier: Tier;
  title: string;
  regimes: Record<Regime, RegimeMetrics | null>;
  overall: RegimeMetrics;
  /** Folds per composition chosen on their training rows. */
  picks: Record<Composition, number>;
  folds: TierFold[];
  /** Per `ValidationResult.rows` index: the tier's predicted µs, null = not scored in this tier. */
  predicted_us: Array<number | null>;
  /** The headline tier only: its scored rows with APE above `TIER_OUTLIER_APE_PCT`, by row index. */
  outliers?: TierOutlier[];
}

/** APE above which a headline-tier row is listed with its resource terms (issue 16, acc17), %. */
export const TIER_OUTLIER_APE_PCT = 25;

/**
 * One headline-tier row priced more than `TIER_OUTLIER_APE_PCT` off, with what its price is made of:
 * the registry's resource terms at s = 1 (the pricer's NoOverlap parts, µs) and the host and s of the
 * fold that scored it.
 */
export interface TierOutlier {
  /** Index into `ValidationResult.rows`. */
  row: number;
  /** Tokens the row schedules: a step's new prefill tokens + decode requests; a static batch's batch × prompt. */
  tokens: number;
  measured_us: number;
  predicted_us: number;
  /** predicted / measured − 1, %. */
  error_pct: number;
  /** The registry's SM, HBM, NVLink and NIC time of the row at s = 1, µs. */
  resources_us: { sm: number; hbm: number; nvlink: number; nic: number };
  /** Host µs under the scoring fold's fit (without the large-step collective extra). */
  host_us: number;
  /** The large-step collective extra under the scoring fold's fit, µs (0 with no fit). */
  large_step_us: number;
  /** The scoring fold's s (1 with no fit). */
  sm_scale: number;
}

/**
 * The decode-attention rate a measured decode step implies (issue 16): KV bytes read per GPU over the
 * attention time left when tier (b)'s price of everything else is taken from the measured time.
 * attention_us = the priced NoOverlap time of the step minus the same step at 0 context (registry, s = 1).
 */
export interface DecodeRate {
  /** Index into `ValidationResult.rows`. */
  row: number;
  kv_heads_per_gpu: number;
  /** Σ context tokens · KV bytes per token per rank (all layers). */
  kv_bytes: number;
  priced_attention_us: number;
  /** kv_bytes / priced_attention_us, TB/s (10¹² B/s). */
  priced_tb_per_s: number;
  /** kv_bytes / (measured − tier (b) predicted + priced_attention_us), TB/s; NaN when that time is ≤ 0. */
  implied_tb_per_s: number;
}

/** Outcome of the engine compute-efficiency term for one composition. */
export interface EngineSmOutcome {
  mode: EngineSmMode;
  /** The composition it applies to (NoOverlap or CMOverlap). */
  composition: Composition;
  used: boolean;
  reason: string;
  scales: Array<{ engine: string; value: number; identified: boolean; note?: string }>;
  without: { regimes: Record<Regime, RegimeMetrics | null>; overall: RegimeMetrics };
  with: { regimes: Record<Regime, RegimeMetrics | null>; overall: RegimeMetrics };
  /** Fits with the term (host terms + s), shown whether or not the headline uses them. */
  with_fits: HostFitEngine[];
}

/** Rows carrying one extrapolation reason. */
export interface ExtrapolationCount {
  reason: string;
  /** Priced rows with the reason (scored, training and flag-excluded). */
  rows: number;
  /** Scored rows with the reason. */
  scored_rows: number;
  /** Scored rows with the reason, per regime (regimes with none omitted). */
  scored_by_regime: Partial<Record<Regime, number>>;
}
