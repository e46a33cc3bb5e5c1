/**
 * Request-level validation (issue 18 §5): rows of measured serving figures (TTFT, TPOT, E2E,
 * tokens/s at a concurrency or a rate) are replayed through `serve` and scored per metric with the
 * same error metrics as step rows (./metrics.ts). The Splitwise static batches are the first such set
 * (`requestRowsFromStaticBatches`): a static batch is a closed loop with concurrency = batch, no
 * chunking, and its measured time is every request's E2E. CSV format: docs/validation.md
 * "Request-level rows".
 */
import Papa from 'papaparse';
import { InputError, UserError } from '../core/errors.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { CUDAGRAPH_MODES, type CudagraphMode } from '../pricer/types.ts';
import { DEFAULT_SCHEDULER, runServe, setupServe, type ServeSetup } from '../serve/run.ts';
import type { ServeMetrics } from '../serve/metrics.ts';
import { generateRequests } from '../serve/workload.ts';
import { computeMetrics, type ScoredPoint } from './metrics.ts';
import { aggregationKey, exclusionOf } from './run.ts';
import type { LocatedStepRow } from './steps.ts';
import { DEFAULT_EXCLUDED_FLAGS, type RegimeMetrics } from './types.ts';

/** The metrics a request-level row may carry (µs, or tokens per second for the rate). */
export const REQUEST_METRICS = ['ttft_mean_us', 'tpot_mean_us', 'e2e_mean_us', 'output_tokens_per_s'] as const;
export type RequestMetric = (typeof REQUEST_METRICS)[number];

/** One request-level row. */
export interface RequestRow {
  file: string;
  /** 1-based data row. */
  row: number;
  model: string;
  chip: string;
  tp: number;
  ep: number;
  dp: number;
  weight_dtype: string;
  kv_dtype: string;
  cudagraph_mode: string;
  engine: string;
  workload: 'closed' | 'open';
  /** Closed loop: clients. */
  concurrency: number;
  /** Open loop: constant arrivals per second. */
  rate_per_s: number;
  requests: number;
  isl: number;
  osl: number;
  max_num_seqs: number;
  /** undefined = the chip's default (serve `defaultMaxNumBatchedTokens`). */
  max_num_batched_tokens: number | undefined;
  chunked_prefill: boolean;
  measured: Partial<Record<RequestMetric, number>>;
  group: string;
  flags: string;
}

/** Columns of a `*.requests.csv` file: required first, then optional ones. */
export const REQUEST_CSV_REQUIRED = [
  'model',
  'chip',
  'tp',
  'weight_dtype',
  'engine',
  'workload',
  'requests',
  'isl',
  'osl',
] as const;

/**
 * Parse request-level rows. Empty optional cells take the serve defaults (ep 1, dp 1, vLLM v1
 * scheduler defaults, chunked prefill on); a metric cell left empty is not scored.
 * @throws InputError naming file, row and column
 */
export function parseRequestsCsv(text: string, file: string): RequestRow[] {
  const parsed = Papa.parse<Record<string, string>>(text.trim(), {
    header: true,
    delimiter: ',',
    skipEmptyLines: true,
    transformHeader: (h) => h.trim(),
  });
  const fields = parsed.meta.fields ?? [];
  for (const c of REQUEST_CSV_REQUIRED) {
    if (!fields.includes(c))
      throw new InputError({ file, row: 0, column: c }, `missing column; required: ${REQUEST_CSV_REQUIRED.join(', ')}`);
  }
  return parsed.data.map((rec, i) => parseRequestRow(rec, file, i + 1));
}

function parseRequestRow(rec: Record<string, string>, file: string, row: number): RequestRow {
  const cell = (c: string) => (rec[c] ?? '').trim();
  const int = (c: string, dflt?: number): number => {
    const s = cell(c);
    if (s === '' && dflt !== undefined) return dflt;
    const v = Number(s);
    if (!Number.isInteger(v) || v < 1)
      throw new InputError({ file, row, column: c }, `expected a positive integer, got "${s}"`);
    return v;
  };
  const workload = cell('workload');
  if (workload !== 'closed' && workload !== 'open')
    throw new InputError({ file, row, column: 'workload' }, `expected closed or open, got "${workload}"`);
  const mode = cell('cudagraph_mode');
  if (mode !== '' && !(CUDAGRAPH_MODES as readonly string[]).includes(mode)) {
    throw new InputError(
      { file, row, column: 'cudagraph_mode' },
      `expected one of ${CUDAGRAPH_MODES.join(', ')} or empty, got "${mode}"`,
    );
  }
  const chunk = cell('chunked_prefill').toLowerCase();
  if (!['', 'on', 'off', 'true', 'false', '1', '0'].includes(chunk)) {
    throw new InputError({ file, row, column: 'chunked_prefill' }, `expected on/off, got "${chunk}"`);
  }
  const measured: Partial<Record<RequestMetric, number>> = {};
  for (const m of REQUEST_METRICS) {
    const s = cell(m);
    if (s === '') continue;
    const v = Number(s);
    if (!(Number.isFinite(v) && v > 0))
      throw new InputError({ file, row, column: m }, `expected a positive number or empty, got "${s}"`);
    measured[m] = v;
  }
  const r: RequestRow = {
    file,
    row,
    model: cell('model'),
    chip: cell('chip'),
    tp: int('tp'),
    ep: int('ep', 1),
    dp: int('dp', 1),
    weight_dtype: cell('weight_dtype'),
    kv_dtype: cell('kv_dtype'),
    cudagraph_mode: mode,
    engine: cell('engine'),
    workload,
    concurrency: workload === 'closed' ? int('concurrency') : 0,
    rate_per_s: 0,
    requests: int('requests'),
    isl: int('isl'),
    osl: int('osl'),
    max_num_seqs: int('max_num_seqs', DEFAULT_SCHEDULER.max_num_seqs),
    max_num_batched_tokens: cell('max_num_batched_tokens') === '' ? undefined : int('max_num_batched_tokens'),
    chunked_prefill: !['off', 'false', '0'].includes(chunk),
    measured,
    group: cell('group'),
    flags: cell('flags'),
  };
  if (workload === 'open') {
    const v = Number(cell('rate_per_s'));
    if (!(Number.isFinite(v) && v > 0)) {
      throw new InputError(
        { file, row, column: 'rate_per_s' },
        `expected a rate > 0 per second for an open loop, got "${cell('rate_per_s')}"`,
      );
    }
    r.rate_per_s = v;
  }
  if (!Object.keys(measured).length)
    throw new InputError({ file, row }, `no measured metric; expected at least one of ${REQUEST_METRICS.join(', ')}`);
  return r;
}

/**
 * Static-batch step rows as request-level rows: closed loop, concurrency = requests = batch, ISL =
 * prompt_tokens, OSL = output_tokens, no chunking, max_num_seqs = batch and a budget that admits the
 * whole batch in one step (batch · prompt, at least prompt + output); measured E2E = the row's time.
 */
export function requestRowsFromStaticBatches(rows: readonly LocatedStepRow[]): RequestRow[] {
  return rows
    .filter((r) => r.kind === 'static_batch')
    .map((r) => ({
      file: r.file,
      row: r.row,
      model: r.model,
      chip: r.chip,
      tp: r.tp,
      ep: 1,
      dp: 1,
      weight_dtype: r.weight_dtype,
      kv_dtype: r.kv_dtype,
      cudagraph_mode: r.cudagraph_mode,
      engine: r.engine,
      workload: 'closed' as const,
      concurrency: r.batch,
      rate_per_s: 0,
      requests: r.batch,
      isl: r.prompt_tokens,
      osl: r.output_tokens,
      max_num_seqs: r.batch,
      max_num_batched_tokens: Math.max(r.batch * r.prompt_tokens, r.prompt_tokens + r.output_tokens),
      chunked_prefill: false,
      measured: { e2e_mean_us: r.measured_us },
      group: r.group,
      flags: r.flags,
    }));
}

/** One priced request-level row. */
export interface RequestRowResult {
  file: string;
  row: number;
  model: string;
  chip: string;
  tp: number;
  dp: number;
  engine: string;
  workload: 'closed' | 'open';
  concurrency: number;
  rate_per_s: number;
  isl: number;
  osl: number;
  measured: Partial<Record<RequestMetric, number>>;
  predicted: Partial<Record<RequestMetric, number>>;
  /** APE per measured metric, percent. */
  ape_pct: Partial<Record<RequestMetric, number>>;
  preemptions: number;
  refused: number;
  /** The flag that keeps the row out of the scores, if any. */
  excluded?: string;
}

export interface RequestValidation {
  chip: string;
  rows: RequestRowResult[];
  /** Held-out metrics per request-level metric (null = no scored row carries it). */
  metrics: Record<RequestMetric, RegimeMetrics | null>;
  warnings: string[];
}

/** The figure of a run that a metric column measures. */
function predictedOf(m: ServeMetrics, k: RequestMetric): number | null {
  if (k === 'ttft_mean_us') return m.ttft.mean_us;
  if (k === 'tpot_mean_us') return m.tpot.mean_us;
  if (k === 'e2e_mean_us') return m.e2e.mean_us;
  return m.whole.output_tokens_per_s;
}

/** Serve one row: its deployment's setup (cached), its scheduler, its workload (seed 1, fixed lengths). */
function serveRow(r: RequestRow, registry: CoefficientSet[], cache: Map<string, ServeSetup>): ServeMetrics {
  const deployment = {
    tp: r.tp,
    ep: r.ep,
    weight_dtype: r.weight_dtype,
    ...(r.kv_dtype ? { kv_dtype: r.kv_dtype } : {}),
    cudagraph_mode: (r.cudagraph_mode || 'FULL_AND_PIECEWISE') as CudagraphMode,
  };
  const key = JSON.stringify([r.model, r.chip, deployment, r.dp]);
  let s = cache.get(key);
  if (!s) {
    // A measured row ran, whatever the model's stated context limit (Splitwise ran llama-2-70b at
    // 4096 + 128 tokens, over its 4096): replay it, as the step path prices such rows, without refusing.
    s = setupServe({
      model: r.model,
      chip: r.chip,
      deployment,
      dp: r.dp,
      registry,
      scheduler: DEFAULT_SCHEDULER,
      allow_over_capacity: true,
    });
    cache.set(key, s);
  }
  const { max_num_seqs, max_num_batched_tokens, chunked_prefill } = r;
  const budget = max_num_batched_tokens ?? s.config.scheduler.max_num_batched_tokens;
  const scheduler = { ...s.config.scheduler, max_num_seqs, max_num_batched_tokens: budget, chunked_prefill };
  const config = { ...s.config, scheduler };
  const fixed = (value: number) => ({ kind: 'fixed' as const, value });
  const reqs = generateRequests(
    r.requests,
    fixed(r.isl),
    fixed(r.osl),
    1,
    r.workload === 'open' ? { kind: 'constant', rate_per_s: r.rate_per_s } : undefined,
  );
  const w =
    r.workload === 'closed'
      ? { kind: 'closed' as const, concurrency: r.concurrency, requests: reqs }
      : { kind: 'open' as const, requests: reqs };
  return runServe(w, s.pricer, config).metrics;
}

/**
 * Replay every row of `chip` through serve and score each metric column over the rows that carry it.
 * Flags exclude rows as for step rows (DEFAULT_EXCLUDED_FLAGS, every scope applies: request rows are
 * end-to-end measurements). Shape groups: the `group` column, x = concurrency (or rate).
 * @throws UserError naming file and row when a row cannot be served; when no row is of `chip`
 */
export function validateRequestRows(
  all: readonly RequestRow[],
  opts: { chip: string; registry: CoefficientSet[]; excludeFlags?: Readonly<Record<string, 'all' | 'static_batch'>> },
): RequestValidation {
  const rows = all.filter((r) => r.chip === opts.chip);
  const warnings =
    rows.length < all.length
      ? [`skipped ${all.length - rows.length} request-level row(s) of other chips (validating ${opts.chip})`]
      : [];
  if (!rows.length) throw new UserError(`no request-level rows for chip ${opts.chip}`);
  const cache = new Map<string, ServeSetup>();
  const results = rows.map((r): RequestRowResult => {
    let m: ServeMetrics;
    try {
      m = serveRow(r, opts.registry, cache);
    } catch (e) {
      if (e instanceof UserError) throw new InputError({ file: r.file, row: r.row }, e.message);
      throw e;
    }
    const predicted: RequestRowResult['predicted'] = {};
    const ape: RequestRowResult['ape_pct'] = {};
    for (const k of Object.keys(r.measured) as RequestMetric[]) {
      const p = predictedOf(m, k);
      if (p === null) continue;
      predicted[k] = p;
      ape[k] = Math.abs(p / r.measured[k]! - 1) * 100;
    }
    const excluded = exclusionOf({ flags: r.flags, kind: 'static_batch' }, opts.excludeFlags ?? DEFAULT_EXCLUDED_FLAGS);
    const { file, row, model, chip, tp, dp, engine, workload, concurrency, rate_per_s, isl, osl, measured } = r;
    const counts = { preemptions: m.requests.preemptions, refused: m.requests.refused };
    const where = { file, row, model, chip, tp, dp, engine, workload, concurrency, rate_per_s, isl, osl };
    return { ...where, measured, predicted, ape_pct: ape, ...counts, ...(excluded ? { excluded } : {}) };
  });
  const metrics = Object.fromEntries(
    REQUEST_METRICS.map((k) => [k, scoreMetric(results, rows, k)]),
  ) as RequestValidation['metrics'];
  return { chip: opts.chip, rows: results, metrics, warnings };
}

function scoreMetric(
  results: readonly RequestRowResult[],
  rows: readonly RequestRow[],
  k: RequestMetric,
): RegimeMetrics | null {
  const pts: ScoredPoint[] = [];
  results.forEach((res, i) => {
    if (res.excluded || res.predicted[k] === undefined) return;
    const r = rows[i]!;
    const group = r.group !== '' ? r.group : aggregationKey({ ...r, kind: 'request', regime: 'static_batch' });
    pts.push({
      predicted_us: res.predicted[k]!,
      measured_us: r.measured[k]!,
      group,
      batch: r.workload === 'closed' ? r.concurrency : r.rate_per_s,
    });
  });
  return pts.length ? computeMetrics(pts) : null;
}
