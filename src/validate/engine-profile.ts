/**
 * `stepcal fit engine` core (issue 16): price every step row of one engine with its chip's registry,
 * hold out a declared subset, fit the engine profile on the rest (./profile.ts), bootstrap its ci95
 * and score the holdout. Returns the registry object (src/core/schemas/engine.ts); writes nothing.
 *
 * DECISION, holdout: the `fraction=0.25` rule of `--fit-host` (./hostfit.ts `selectTrainingRows`)
 * picks the held-out rows (every 4th row of each group, offset rotating by group), so every deployment
 * and regime is both trained and held out; the stored values are the ones fitted WITHOUT the holdout
 * (so the holdout figures describe the stored profile). Rows a flag excludes are neither trained nor
 * scored. Cross-deployment accuracy (the headline) is `stepcal validate`'s tier (b).
 */
import { UserError } from '../core/errors.ts';
import { ENGINE_HOST_TERMS } from '../core/laws/host.ts';
import { roundSig } from '../core/numeric/stats.ts';
import type { EngineProfile } from '../core/schemas/engine.ts';
import { batchSizeOf } from './expand.ts';
import { parseHostRule, selectTrainingRows, type HostWeighting } from './hostfit.ts';
import { computeMetrics } from './metrics.ts';
import { fitProfile, predictWithProfile, profileCi95, ScaledCmCache, type ProfileFit } from './profile.ts';
import { priceRows, shapeGroup, type Priced, type ValidationDeps } from './priced.ts';
import type { LocatedStepRow } from './steps.ts';
import { COMPOSITION_NAME, DEFAULT_EXCLUDED_FLAGS, REGIMES } from './types.ts';
import { deploymentOf } from './tiers.ts';

/** Bootstrap resamples behind every shipped engine profile's ci95. */
export const ENGINE_CI95_RESAMPLES = 200;

/** The holdout rule of `fit engine`. */
export const ENGINE_HOLDOUT_RULE = 'fraction=0.25';

/** Inputs of an engine fit besides the rows. */
export interface EngineFitInput {
  engine: string;
  description?: string;
  weighting?: HostWeighting;
  /** CMOverlap's s per chip of the training rows (`--engine-s per-chip`); default one s. */
  chip_scales?: boolean;
  /**
   * Bootstrap resamples of the ci95 (default `ENGINE_CI95_RESAMPLES`; the CLI always uses the default,
   * recovery tests that check point values use fewer).
   */
  resamples?: number;
  provenance: Omit<EngineProfile['provenance'], 'chips' | 'deployments'>;
}

const sig = (x: number) => roundSig(x, 4);

/**
 * Fit one engine profile from step rows (rows of other engines are ignored).
 * @throws UserError when no row of the engine is given, or when too few are left to train and hold out
 */
export function fitEngineProfile(
  all: readonly LocatedStepRow[],
  input: EngineFitInput,
  deps: ValidationDeps,
): EngineProfile {
  const rows = all.filter((r) => r.engine === input.engine);
  if (!rows.length)
    throw new UserError(
      `no step rows of engine ${input.engine} in the given files (engines: ${[...new Set(all.map((r) => r.engine))].join(', ') || 'none'})`,
    );
  const weighting = input.weighting ?? 'relative';
  const P = priceRows(rows, { excludeFlags: DEFAULT_EXCLUDED_FLAGS }, deps);
  const eligible = rows.map((_, i) => i).filter((i) => P.excl[i] === undefined);
  const held = selectTrainingRows(
    eligible.map((i) => ({ batch: batchSizeOf(rows[i]!), group: shapeGroup(rows[i]!, P.regimes[i]!) })),
    parseHostRule(ENGINE_HOLDOUT_RULE),
  );
  const train = eligible.filter((_, j) => !held.has(j));
  const holdout = eligible.filter((_, j) => held.has(j));
  if (train.length < ENGINE_HOST_TERMS.length + 1 || holdout.length === 0)
    throw new UserError(
      `engine ${input.engine}: ${eligible.length} usable row(s); need at least ${ENGINE_HOST_TERMS.length + 2} to fit and hold out`,
    );
  const cache = new ScaledCmCache(P, deps);
  const fit = fitProfile(P, cache, input.engine, train, weighting, input.chip_scales ?? false);
  const ci = profileCi95(P, cache, fit, weighting, input.resamples ?? ENGINE_CI95_RESAMPLES);
  const regimes = holdoutRegimes(P, cache, fit, holdout);
  return profileOf(input, rows, fit, ci, weighting, { n: holdout.length, regimes });
}

/** Holdout metrics per regime of the profile (4 significant digits). */
function holdoutRegimes(
  P: Priced,
  cache: ScaledCmCache,
  fit: ProfileFit,
  holdout: readonly number[],
): EngineProfile['fit']['holdout']['regimes'] {
  const regimes: EngineProfile['fit']['holdout']['regimes'] = {};
  for (const g of REGIMES) {
    const idx = holdout.filter((i) => P.regimes[i] === g);
    if (!idx.length) continue;
    const m = computeMetrics(
      idx.map((i) => ({
        predicted_us: predictWithProfile(P, cache, i, fit),
        measured_us: P.rows[i]!.measured_us,
        group: '',
        batch: 0,
      })),
    );
    regimes[g] = {
      n: m.n,
      ...{ mape_pct: sig(m.mape_pct), median_ape_pct: sig(m.median_ape_pct) },
      ...{ p90_ape_pct: sig(m.p90_ape_pct), bias_pct: sig(m.bias_pct) },
    };
  }
  return regimes;
}

/**
 * The steps the training rows span (EngineProfile.training_range): the most tokens one step schedules
 * (a static batch's prefill: batch × prompt) and the most rows of a pure-decode step (a decode row
 * without prefill requests: its decode requests; a static batch's decode steps: batch).
 */
function trainingRange(train: readonly LocatedStepRow[]): NonNullable<EngineProfile['training_range']> {
  let max_step_tokens = 0;
  let max_decode_rows = 0;
  for (const r of train) {
    const tokens = r.kind === 'static_batch' ? r.batch * r.prompt_tokens : r.prefill_tokens + r.decode_requests;
    const decodeRows = r.kind === 'static_batch' ? r.batch : r.prefill_requests === 0 ? r.decode_requests : 0;
    max_step_tokens = Math.max(max_step_tokens, tokens);
    max_decode_rows = Math.max(max_decode_rows, decodeRows);
  }
  return { max_step_tokens, max_decode_rows };
}

/** The registry object of a fitted profile. */
function profileOf(
  input: EngineFitInput,
  rows: readonly LocatedStepRow[],
  fit: ProfileFit,
  ci: Record<string, [number, number]>,
  weighting: HostWeighting,
  holdout: { n: number; regimes: EngineProfile['fit']['holdout']['regimes'] },
): EngineProfile {
  const chosen = fit.fits[fit.composition];
  const terms = Object.fromEntries(
    chosen.terms.map((t) => [
      t.name,
      {
        value: sig(t.value_us),
        ci95: [sig(ci[t.name]![0]), sig(ci[t.name]![1])] as [number, number],
        identified: t.identified,
        ...(t.note ? { note: t.note } : {}),
      },
    ]),
  ) as EngineProfile['terms'];
  const s = chosen.sm_scale;
  return {
    kind: 'EngineProfile',
    name: input.engine,
    description:
      input.description ??
      `${input.engine} engine: host terms and compute-efficiency term s fitted on its step timings`,
    composition: fit.composition,
    law: 'host_us = per_step_us·steps + per_request_step_us·Σrequests + per_step_tp_gt1_us·steps·[tp>1] + per_kernel_us·Σkernels + per_step_per_rank_us·steps·tp; + large_step_nvlink_factor·(priced NVLink µs of a step whose collective message, tokens × collective bytes per token, is ≥ large_step_message_bytes), charged as NVLink; SM time × sm_scale (src/core/laws/host.ts engineHostUs)',
    terms,
    ...(chosen.large_step_message_bytes !== undefined
      ? { large_step_message_bytes: chosen.large_step_message_bytes }
      : {}),
    sm_scale: {
      value: sig(s?.value ?? 1),
      ci95: [sig(ci.sm_scale![0]), sig(ci.sm_scale![1])],
      identified: s?.identified ?? false,
      ...(s?.note
        ? { note: s.note }
        : s
          ? {}
          : { note: `${COMPOSITION_NAME[fit.composition]} is not refitted with s: held at 1` }),
    },
    ...(chosen.sm_scale_by_chip
      ? {
          sm_scale_by_chip: Object.fromEntries(
            Object.entries(chosen.sm_scale_by_chip).map(([chip, v]) => [
              chip,
              {
                value: sig(v),
                ci95: [sig(ci[`sm_scale:${chip}`]![0]), sig(ci[`sm_scale:${chip}`]![1])] as [number, number],
                identified: true,
              },
            ]),
          ),
        }
      : {}),
    training_range: trainingRange(fit.train.map((i) => rows[i]!)),
    fit: {
      method: `weighted least squares of measured − priced-without-host on the host columns, terms ≥ 0 (src/validate/hostfit.ts); s: NoOverlap linear, CMOverlap bounded 1-D search in log s ∈ [0.25, 4]${chosen.sm_scale_by_chip ? ', then one s per chip of the training rows (coordinate descent, host terms shared)' : ''}`,
      weighting,
      composition_rule:
        'the composition with the lowest training RMS of the relative residual (training rows only; ties → NoOverlap, CMOverlap, Overlap)',
      training_objective_rel_pct: Object.fromEntries(
        Object.entries(fit.objective_rel_pct).map(([c, v]) => [c, sig(v)]),
      ),
      n_train: fit.train.length,
      train_rms_rel_pct: sig(chosen.train_rms_rel_pct ?? NaN),
      ci95_method: `bootstrap: ${input.resamples ?? ENGINE_CI95_RESAMPLES} seeded resamples of the training rows (seed 16), each refitted; type-7 2.5 / 97.5 percentiles`,
      holdout: { rule: `${ENGINE_HOLDOUT_RULE} (held out, not trained)`, ...holdout },
    },
    provenance: {
      ...input.provenance,
      chips: [...new Set(rows.map((r) => r.chip))].sort(),
      deployments: [...new Set(rows.map(deploymentOf))].sort(),
    },
  };
}
