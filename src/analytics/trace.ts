/**
 * Request timelines: queue, prompt span, publish gap, TTFT and later-token gaps per request, and
 * their aggregates. Pure functions (parsing takes text, not paths).
 *
 * Source: seed `shared/seeds/inside-deepinfer-ch02-where-the-time-goes.txt` ("the chapter") §2.4
 * (Listing 2.2, definitions Q = s − a, S = e − s, D = t1 − e, TTFT = t1 − a = Q + S + D,
 * Δi = ti − ti−1) and §2.4.1 (Listing 2.3 nearest-rank percentiles, one-token requests contribute
 * no gap, pooled gaps vs one mean per request, whole-trace throughput = tokens / (last delivery −
 * first arrival)).
 *
 * All times are held in µs (`*_us`); input units are converted once on parsing.
 */
import Papa from 'papaparse';
import { InputError, UserError, type InputLocation } from '../core/errors.ts';
import { fmtSig } from '../core/render/format.ts';
import { mean, percentileNearestRank, percentileType7 } from '../core/numeric/stats.ts';
import { TRACE_CSV_COLUMNS, TraceCsvRowSchema, TraceJsonSchema, TraceRequestSchema } from '../core/schemas/trace.ts';
import type { z } from 'zod';

/** Input time units and their size in µs. */
export const TIME_UNITS = { us: 1, ms: 1000, s: 1e6 } as const;
export type TimeUnit = keyof typeof TIME_UNITS;

/** One request's recorded events, all on one clock, in µs. */
export interface RequestRecord {
  id: string;
  /** a: arrival. */
  arrival_us: number;
  /** s: start of prompt processing. */
  prompt_start_us: number;
  /** e: end of prompt processing. */
  prompt_end_us: number;
  /** t1…tn: token delivery times, in recorded order. */
  token_times_us: number[];
  /** Where the record came from (for error messages): the request's first row, and each token's row. */
  where?: { file: string; row?: number; token_rows?: number[] };
}

/** Derived timeline of one request (chapter §2.4). */
export interface RequestTimeline {
  id: string;
  /** Q = s − a. */
  queue_us: number;
  /** S = e − s. */
  prompt_us: number;
  /** D = t1 − e, the publish gap. */
  publish_us: number;
  /** TTFT = t1 − a = Q + S + D. */
  ttft_us: number;
  /** Δi = ti − ti−1 for i ≥ 2; empty for a one-token request (never a zero). */
  gaps_us: number[];
  /** Delivered tokens n. */
  tokens: number;
}

/** Percentile conventions: the chapter's nearest-rank (default) or type-7 interpolation. */
export type PercentileConvention = 'nearest-rank' | 'type7';

/** How later-token gaps are aggregated (chapter §2.4.1). */
export type GapMode = 'pooled' | 'per-request-mean';

/** Aggregates of a trace. Statistics of an empty sample are null, never 0. */
export interface TraceSummary {
  requests: RequestTimeline[];
  percentile: PercentileConvention;
  /** Human-readable statement of the percentile rule, printed with the numbers. */
  percentile_rule: string;
  ttft: { n: number; mean_us: number; p50_us: number; p95_us: number };
  gap_mode: GapMode;
  /** Pooled: n = number of gaps. Per-request-mean: n = requests with ≥ 2 tokens, values are their mean gaps. */
  gaps: { n: number; mean_us: number | null; p95_us: number | null };
  tokens: number;
  first_arrival_us: number;
  last_delivery_us: number;
  /** last delivery − first arrival. */
  span_us: number;
  /** tokens / span in tokens per second; null when the span is 0. */
  tokens_per_s: number | null;
}

function fmtIn(v_us: number, unit: TimeUnit): string {
  return `${fmtSig(v_us / TIME_UNITS[unit], 12)} ${unit}`;
}

/**
 * Derive one request's timeline (chapter Listing 2.2).
 *
 * @param unit only for error messages (values are shown in the input unit)
 * @throws UserError (InputError when the record knows its file/row) naming the request, when
 *   a ≤ s ≤ e ≤ t1 fails, tokens are not sorted, or there are no tokens
 */
export function analyseRequest(r: RequestRecord, unit: TimeUnit = 'us'): RequestTimeline {
  const fail = (problem: string, row?: number): never => {
    const msg = `request "${r.id}": ${problem}`;
    if (r.where) {
      const loc: InputLocation = { file: r.where.file };
      const rr = row ?? r.where.row;
      if (rr !== undefined) loc.row = rr;
      throw new InputError(loc, msg);
    }
    throw new UserError(msg);
  };
  const t = r.token_times_us;
  if (t.length === 0) fail('has no token deliveries; expected at least one');
  const t1 = t[0]!;
  const a = r.arrival_us;
  const s = r.prompt_start_us;
  const e = r.prompt_end_us;
  if (!(a <= s))
    fail(`prompt_start ${fmtIn(s, unit)} is before arrival ${fmtIn(a, unit)}; expected arrival ≤ prompt_start`);
  if (!(s <= e))
    fail(`prompt_end ${fmtIn(e, unit)} is before prompt_start ${fmtIn(s, unit)}; expected prompt_start ≤ prompt_end`);
  if (!(e <= t1))
    fail(`first token ${fmtIn(t1, unit)} is before prompt_end ${fmtIn(e, unit)}; expected prompt_end ≤ first token`);
  const gaps_us: number[] = [];
  for (let i = 1; i < t.length; i++) {
    if (!(t[i]! >= t[i - 1]!)) {
      fail(
        `token ${i + 1} at ${fmtIn(t[i]!, unit)} is before token ${i} at ${fmtIn(t[i - 1]!, unit)}; expected sorted deliveries`,
        r.where?.token_rows?.[i],
      );
    }
    gaps_us.push(t[i]! - t[i - 1]!);
  }
  return {
    id: r.id,
    queue_us: s - a,
    prompt_us: e - s,
    publish_us: t1 - e,
    ttft_us: t1 - a,
    gaps_us,
    tokens: t.length,
  };
}

/** Percentile by the named convention, using the shared helpers in src/core/numeric/stats.ts. */
export function percentileBy(values: readonly number[], p: number, convention: PercentileConvention): number {
  return convention === 'type7' ? percentileType7(values, p) : percentileNearestRank(values, p);
}

/** The rule as printed next to the numbers. */
export function percentileRule(convention: PercentileConvention): string {
  return convention === 'type7'
    ? 'type-7 (linear interpolation between order statistics, h = (n − 1)·p)'
    : 'nearest-rank, sorted[ceil(p·n) − 1] (chapter Listing 2.3)';
}

/**
 * Analyse every request and aggregate (chapter §2.4.1).
 *
 * - TTFT: n, mean, p50, p95 over requests.
 * - Gaps: pooled over all later-token gaps (default), or one mean gap per request with ≥ 2 tokens.
 *   One-token requests contribute no gap.
 * - Whole-trace throughput = total tokens / (last delivery − first arrival).
 *
 * @throws UserError on an empty trace, a duplicate id, or an order violation (naming the request)
 */
export function summariseTrace(
  records: readonly RequestRecord[],
  opts: { percentile?: PercentileConvention; gap_mode?: GapMode; unit?: TimeUnit } = {},
): TraceSummary {
  if (records.length === 0) throw new UserError('trace has no requests');
  const conv = opts.percentile ?? 'nearest-rank';
  const gap_mode = opts.gap_mode ?? 'pooled';
  const seen = new Set<string>();
  for (const r of records) {
    if (seen.has(r.id)) throw new UserError(`request "${r.id}" appears twice`);
    seen.add(r.id);
  }
  const requests = records.map((r) => analyseRequest(r, opts.unit ?? 'us'));
  const ttfts = requests.map((r) => r.ttft_us);
  const gapSample =
    gap_mode === 'pooled'
      ? requests.flatMap((r) => r.gaps_us)
      : requests.filter((r) => r.gaps_us.length > 0).map((r) => mean(r.gaps_us));
  const tokens = requests.reduce((s, r) => s + r.tokens, 0);
  const first_arrival_us = Math.min(...records.map((r) => r.arrival_us));
  const last_delivery_us = Math.max(...records.map((r) => r.token_times_us[r.token_times_us.length - 1]!));
  const span_us = last_delivery_us - first_arrival_us;
  return {
    requests,
    percentile: conv,
    percentile_rule: percentileRule(conv),
    ttft: {
      n: ttfts.length,
      mean_us: mean(ttfts),
      p50_us: percentileBy(ttfts, 0.5, conv),
      p95_us: percentileBy(ttfts, 0.95, conv),
    },
    gap_mode,
    gaps: {
      n: gapSample.length,
      mean_us: gapSample.length ? mean(gapSample) : null,
      p95_us: gapSample.length ? percentileBy(gapSample, 0.95, conv) : null,
    },
    tokens,
    first_arrival_us,
    last_delivery_us,
    span_us,
    tokens_per_s: span_us > 0 ? (tokens * 1e6) / span_us : null,
  };
}

/** A zod issue path ([field] or ['tokens', j]) as the column an InputError names. */
function columnOf(path: readonly PropertyKey[]): string | undefined {
  if (path.length === 0) return undefined;
  const [field, j] = path;
  return j === undefined ? String(field) : `${String(field)}[${String(j)}]`;
}

/** The first issue of a failed parse as an InputError at `row`, naming the column and the expected time unit. */
function traceIssue(
  error: z.ZodError,
  file: string,
  row: number,
  unit: TimeUnit,
  value: (col: string) => unknown,
): InputError {
  // A misspelt field also leaves its real one missing: name the unknown field first, it explains both.
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0]!;
  const column = columnOf(issue.path);
  const loc: InputLocation = column === undefined ? { file, row } : { file, row, column };
  if (issue.code === 'unrecognized_keys')
    return new InputError({ file, row }, `unknown field(s) ${issue.keys.join(', ')}`);
  if (column === 'id') return new InputError(loc, 'expected a non-empty string or number id');
  if (column === 'tokens') return new InputError(loc, 'expected an array of delivery times');
  if (column === undefined) return new InputError(loc, 'expected an object');
  return new InputError(loc, `expected a finite time in ${unit}, got ${JSON.stringify(value(column)) ?? 'nothing'}`);
}

/** A value at a column path of a raw request (`tokens[3]` included), for error messages. */
function rawAt(o: unknown, column: string): unknown {
  const m = /^(\w+)\[(\d+)\]$/.exec(column);
  const rec = (o ?? {}) as Record<string, unknown>;
  return m ? (rec[m[1]!] as unknown[] | undefined)?.[Number(m[2])] : rec[column];
}

/** A JSON trace's requests, in µs, and the unit they were read in. */
export interface ParsedTrace {
  records: RequestRecord[];
  unit: TimeUnit;
}

/**
 * The unit a JSON trace declares (`{"unit": "us", "requests": [...]}`, as `stepcal serve --timelines`
 * writes it), or undefined for a bare array or an object without `unit`.
 * @throws InputError naming the file and field "unit" when it is not ms, us or s (in any case)
 */
function declaredUnit(top: unknown, file: string): TimeUnit | undefined {
  if (Array.isArray(top) || typeof top !== 'object' || top === null || !('unit' in top)) return undefined;
  const u = (top as { unit: unknown }).unit;
  // Any case, as the CLI's choices accept (`"US"`, `"Ms"`).
  const l = typeof u === 'string' ? u.toLowerCase() : undefined;
  if (l !== undefined && Object.hasOwn(TIME_UNITS, l)) return l as TimeUnit;
  throw new InputError({ file, column: 'unit' }, `expected "ms", "us" or "s", got ${JSON.stringify(u)}`);
}

/**
 * Read the chapter's JSON trace (core/schemas/trace.ts `TraceJsonSchema`, `TraceRequestSchema`):
 * an array (or `{unit?, requests: [...]}`) of `{id, arrival, prompt_start, prompt_end, tokens: [t1, …]}`.
 * Times are in the unit the file declares (`unit`: ms, us or s), else in `given`, else ms. Rows in
 * errors are 1-based request positions in the array.
 * @param given the unit the caller was told (`stepcal trace --unit`); undefined = none
 * @throws InputError naming the file and field "unit" when `given` contradicts the declared unit (the
 *   file knows its own unit: a contradicting flag would silently scale every time by 10³ or 10⁶), or
 *   naming file, request position and field for a bad request
 */
export function readTraceJson(text: string, file: string, given?: TimeUnit): ParsedTrace {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new InputError({ file }, `not valid JSON: ${(err as Error).message}`);
  }
  const top = TraceJsonSchema.safeParse(raw);
  if (!top.success)
    throw new InputError({ file }, 'expected a JSON array of requests (or an object with a "requests" array)');
  const declared = declaredUnit(top.data, file);
  if (declared !== undefined && given !== undefined && given !== declared)
    throw new InputError(
      { file, column: 'unit' },
      `the file declares its times in ${declared}, but they were to be read in ${given} (--unit ${given}); drop --unit, or fix the file's "unit"`,
    );
  const unit = declared ?? given ?? 'ms';
  const list = Array.isArray(top.data) ? top.data : top.data.requests;
  const k = TIME_UNITS[unit];
  const records = list.map((item, i): RequestRecord => {
    const row = i + 1;
    const r = TraceRequestSchema.safeParse(item);
    if (!r.success) throw traceIssue(r.error, file, row, unit, (c) => rawAt(item, c));
    const q = r.data;
    return {
      id: q.id,
      arrival_us: q.arrival * k,
      prompt_start_us: q.prompt_start * k,
      prompt_end_us: q.prompt_end * k,
      token_times_us: q.tokens.map((t) => t * k),
      where: { file, row },
    };
  });
  return { records, unit };
}

/**
 * Parse a CSV with one row per token delivery (`id, arrival, prompt_start, prompt_end, token_time`).
 * Rows of one request need not be adjacent; their deliveries keep row order, and their arrival and
 * prompt markers must agree. Requests are listed in first-seen order.
 * @throws InputError naming file, row and column
 */
export function parseTraceCsv(text: string, file: string, unit: TimeUnit): RequestRecord[] {
  const parsed = Papa.parse<Record<string, string>>(text.trim(), {
    header: true,
    skipEmptyLines: true,
    transformHeader: (h) => h.trim(),
  });
  const fields = parsed.meta.fields ?? [];
  const missing = TRACE_CSV_COLUMNS.filter((c) => !fields.includes(c));
  if (missing.length)
    throw new InputError(
      { file, row: 0 },
      `missing column(s) ${missing.join(', ')}; expected ${TRACE_CSV_COLUMNS.join(', ')}`,
    );
  const byId = new Map<string, RequestRecord>();
  const k = TIME_UNITS[unit];
  parsed.data.forEach((rec, i) => {
    const row = i + 1;
    const cells = TraceCsvRowSchema.safeParse(rec);
    if (!cells.success) throw traceIssue(cells.error, file, row, unit, (c) => rec[c]);
    const { id } = cells.data;
    const a = cells.data.arrival * k;
    const s = cells.data.prompt_start * k;
    const e = cells.data.prompt_end * k;
    const t = cells.data.token_time * k;
    const r = byId.get(id);
    if (!r) {
      byId.set(id, {
        id,
        arrival_us: a,
        prompt_start_us: s,
        prompt_end_us: e,
        token_times_us: [t],
        where: { file, row, token_rows: [row] },
      });
      return;
    }
    for (const [col, v, w] of [
      ['arrival', a, r.arrival_us],
      ['prompt_start', s, r.prompt_start_us],
      ['prompt_end', e, r.prompt_end_us],
    ] as const) {
      if (v !== w) {
        throw new InputError(
          { file, row, column: col },
          `request "${id}": ${col} ${fmtIn(v, unit)} differs from ${fmtIn(w, unit)} on row ${r.where?.row}; expected one value per request`,
        );
      }
    }
    r.token_times_us.push(t);
    r.where?.token_rows?.push(row);
  });
  return [...byId.values()];
}
