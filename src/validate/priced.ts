/**
 * Priced rows (shared by the validation core, the engine-profile fit and the tiers): what selects a
 * pricer, the row keys and groups, the flag exclusions, and every row priced once. Pure given a
 * pricer factory.
 */
import { UserError } from '../core/errors.ts';
import type { Pricer } from '../pricer/types.ts';
import { StepTermsLog } from '../pricer/terms-log.ts';
import { cmNohostFromLog, priceRow, priceStaticRows, regimeOf, type RowPrice } from './expand.ts';
import type { HostFeatures } from './hostfit.ts';
import type { LocatedStepRow } from './steps.ts';
import { DEFAULT_EXCLUDED_FLAGS, type Composition, type Regime } from './types.ts';

/** What selects a pricer: the deployment a row was measured on. */
export interface PricerKey {
  chip: string;
  model: string;
  tp: number;
  weight_dtype: string;
  /** '' = auto: the checkpoint's declared KV dtype, else follow the weights. */
  kv_dtype: string;
  /** '' = FULL_AND_PIECEWISE. */
  cudagraph_mode: string;
}

export interface ValidationDeps {
  /**
   * Build (or fetch) the pricer for a deployment. May throw UserError (unknown model, ...).
   * `sm_scale` (default 1): the engine compute-efficiency term s multiplying every priced SM time
   * (src/pricer/pricer.ts `PricerOptions.sm_scale`); a factory that ignores it makes the CMOverlap
   * search find no dependence on s (s then held at 1, said so).
   */
  pricerFor(key: PricerKey, opts?: { sm_scale?: number }): Pricer;
  /**
   * KV facts of a deployment (decode-rate figure): KV bytes per token per rank (all layers) and KV
   * heads per GPU (max(1, n_kv / tp)). Absent = the figure is not drawn.
   */
  kvFacts?(key: PricerKey): { kv_bytes_per_token_per_rank: number; kv_heads_per_gpu: number };
  /** Kernels dispatched per step (prefill steps may run more); NaN when unknown. */
  kernelsPerStep?(key: PricerKey, hasPrefill: boolean): number;
  /**
   * Bytes per scheduled token of the deployment's collective message (`PricerInfo.
   * collective_message_bytes_per_token`), for the large-step threshold. Absent = 0 (every message 0 bytes).
   */
  collectiveBytesPerToken?(key: PricerKey): number;
  /** Called after each row is priced (progress display at the edge). */
  onRowPriced?(done: number, total: number): void;
}

/** The first flag of `row` that excludes it under `rules`, or undefined. */
export function exclusionOf(
  row: Pick<LocatedStepRow, 'flags' | 'kind'>,
  rules: Readonly<Record<string, 'all' | 'static_batch'>>,
): string | undefined {
  for (const f of row.flags
    .split(';')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const scope = rules[f];
    if (scope === 'all' || (scope === 'static_batch' && row.kind === 'static_batch')) return f;
  }
  return undefined;
}

export function keyOf(r: LocatedStepRow, chip: string): PricerKey {
  return {
    chip,
    model: r.model,
    tp: r.tp,
    weight_dtype: r.weight_dtype,
    kv_dtype: r.kv_dtype,
    cudagraph_mode: r.cudagraph_mode,
  };
}

/** The aggregation key of issue 7: (model, chip, tp, kind, engine), split by regime. */
export function aggregationKey(r: {
  model: string;
  chip: string;
  tp: number;
  kind: string;
  engine: string;
  regime: Regime;
}): string {
  return `${r.model}|${r.chip}|tp${r.tp}|${r.kind}|${r.engine}|${r.regime}`;
}

/** Shape / host-fit group of a row: its `group` column, else its aggregation key. */
export function shapeGroup(r: LocatedStepRow, regime: Regime): string {
  return r.group !== '' ? r.group : aggregationKey({ ...r, regime });
}

/** The rows of one validation, priced once, and what every later step reads from them. */
export interface Priced {
  rows: LocatedStepRow[];
  priced: RowPrice[];
  features: HostFeatures[];
  regimes: Regime[];
  /** exclusion flag per row, or undefined when it is scored */
  excl: Array<string | undefined>;
  keys: PricerKey[];
  /**
   * Each row's steps as recorded at s = 1 (src/pricer/terms-log.ts), for re-composing its CMOverlap
   * price at another engine scale s (`cmNohostAt`); undefined where the pricer records nothing.
   */
  terms: Array<StepTermsLog | undefined>;
}

/** Host-fit features of one priced row (kernel counts from `deps.kernelsPerStep`, NaN when unknown). */
export function featuresOf(r: LocatedStepRow, p: RowPrice, key: PricerKey, deps: ValidationDeps): HostFeatures {
  let kernel_steps = NaN;
  if (deps.kernelsPerStep) {
    if (r.kind === 'step') kernel_steps = deps.kernelsPerStep(key, r.prefill_requests > 0);
    else kernel_steps = deps.kernelsPerStep(key, true) + (p.steps - 1) * deps.kernelsPerStep(key, false);
  }
  return {
    steps: p.steps,
    request_steps: p.request_steps,
    kernel_steps,
    tp: r.tp,
    sm_us: p.resources_us.sm,
    large_nvlink_us_by_t: p.large_nvlink_us_by_t,
  };
}

/**
 * The static-batch rows that share their steps, by row index: same pricer key, batch and prompt
 * (their steps differ only in how many decode steps each runs; expand.ts `priceStaticRows`).
 */
function staticTrajectories(rows: readonly LocatedStepRow[]): Map<number, number[]> {
  const first = new Map<string, number[]>();
  const out = new Map<number, number[]>();
  rows.forEach((r, i) => {
    if (r.kind !== 'static_batch') return;
    const k = `${JSON.stringify(keyOf(r, r.chip))}|${r.batch}|${r.prompt_tokens}`;
    const g = first.get(k);
    if (g) g.push(i);
    else {
      first.set(k, [i]);
      out.set(i, first.get(k)!);
    }
  });
  return out;
}

/**
 * Price every row once (one pricer per deployment; static batches sharing their steps priced as one,
 * each with the price it would have alone), recording every row's steps (`Priced.terms`).
 * @throws UserError naming file and row when a row cannot be priced (a shared static batch: its first row)
 */
export function priceRows(
  rows: LocatedStepRow[],
  opts: { excludeFlags?: Readonly<Record<string, 'all' | 'static_batch'>> },
  deps: ValidationDeps,
): Priced {
  const pricers = new Map<string, Pricer>();
  const priced: RowPrice[] = new Array(rows.length);
  const terms: Array<StepTermsLog | undefined> = new Array(rows.length);
  const shared = staticTrajectories(rows);
  let done = 0;
  rows.forEach((r, i) => {
    if (priced[i]) return;
    const key = keyOf(r, r.chip);
    const ks = JSON.stringify(key);
    let pricer = pricers.get(ks);
    try {
      if (!pricer) {
        pricer = deps.pricerFor(key);
        pricers.set(ks, pricer);
      }
      const log = new StepTermsLog();
      const bpt = deps.collectiveBytesPerToken?.(key) ?? 0;
      const idx =
        r.kind === 'static_batch'
          ? [...shared.get(i)!].sort((a, b) => rows[a]!.output_tokens - rows[b]!.output_tokens || a - b)
          : [i];
      const ps =
        r.kind === 'static_batch'
          ? priceStaticRows(
              r.batch,
              r.prompt_tokens,
              idx.map((j) => rows[j]!.output_tokens),
              pricer,
              log,
              bpt,
            )
          : [priceRow(r, pricer, log, bpt)];
      const recorded = log.steps === ps[ps.length - 1]!.steps;
      idx.forEach((j, n) => {
        priced[j] = ps[n]!;
        terms[j] = recorded ? log : undefined;
      });
    } catch (err) {
      if (err instanceof UserError) throw new UserError(`${r.file} row ${r.row}: cannot price (${err.message})`);
      throw err;
    }
    done += r.kind === 'static_batch' ? shared.get(i)!.length : 1;
    deps.onRowPriced?.(done, rows.length);
  });
  const features = rows.map((r, i) => featuresOf(r, priced[i]!, keyOf(r, r.chip), deps));
  const regimes = rows.map(regimeOf);
  const excl = rows.map((r) => exclusionOf(r, opts.excludeFlags ?? DEFAULT_EXCLUDED_FLAGS));
  return { rows, priced, features, regimes, excl, keys: rows.map((r) => keyOf(r, r.chip)), terms };
}

/**
 * CMOverlap without host of rows `idx` with every SM time scaled by the engine term s, µs: each row
 * re-composed from its recorded steps (`Priced.terms`, each shared log walked once; the same number as
 * pricing the row again with `sm_scale = s`), or, where nothing was recorded, priced again with a
 * fresh pricer at s.
 */
export function cmNohostAt(P: Priced, deps: ValidationDeps, idx: readonly number[], s: number): number[] {
  if (s === 1) return idx.map((i) => P.priced[i]!.cm_overlap_nohost_us);
  const out = new Array<number>(idx.length);
  const byLog = new Map<StepTermsLog, number[]>();
  const scaled = new Map<string, Pricer>();
  idx.forEach((i, j) => {
    const log = P.terms[i];
    if (log) {
      const js = byLog.get(log);
      if (js) js.push(j);
      else byLog.set(log, [j]);
      return;
    }
    const ks = JSON.stringify(P.keys[i]);
    let p = scaled.get(ks);
    if (!p) {
      p = deps.pricerFor(P.keys[i]!, { sm_scale: s });
      scaled.set(ks, p);
    }
    out[j] = priceRow(P.rows[i]!, p, undefined, deps.collectiveBytesPerToken?.(P.keys[i]!) ?? 0).cm_overlap_nohost_us;
  });
  for (const [log, js] of byLog) {
    const steps = (j: number) => P.priced[idx[j]!]!.steps;
    js.sort((a, b) => steps(a) - steps(b));
    const sums = cmNohostFromLog(
      log,
      s,
      js.map((j) => steps(j)),
    );
    js.forEach((j, n) => {
      out[j] = sums[n]!;
    });
  }
  return out;
}

/** A row's price without host under composition `c`, µs. */
export function nohostOf(P: Priced, i: number, c: Composition): number {
  const p = P.priced[i]!;
  return c === 'no_overlap' ? p.no_overlap_nohost_us : c === 'overlap' ? p.overlap_nohost_us : p.cm_overlap_nohost_us;
}
