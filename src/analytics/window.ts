/**
 * Benchmark observation windows: selected step intervals, steps per second, and the token rates
 * derived from them. Pure functions (parsing takes text, not paths).
 *
 * Source: seed `shared/seeds/inside-deepinfer-ch02-where-the-time-goes.txt` ("the chapter")
 * §2.5.3 (Listings 2.10–2.11: endpoints recorded only when the running count equals the requested
 * concurrency; adjacent pairs formed first, then a pair is dropped when its *ending* endpoint is
 * flagged; steps/s = selected intervals / their summed duration; no interval → empty result, not a
 * zero rate), §2.5.4 (worked example 0, 4, 10 flagged, 15 ms → 222.2/s, not 133.3/s) and §2.5.5
 * (Listing 2.12 full-acceptance rate steps/s × requests × (1 + nextn) / cp_size; useful rate with
 * τ "recalculated from decode_avg_sps").
 *
 * Times are µs internally (`*_us`).
 */
import Papa from 'papaparse';
import { InputError } from '../core/errors.ts';

/** One recorded step return. */
export interface Endpoint {
  /** Host timestamp of the step return, µs. */
  ts_us: number;
  /** True when this step was marked (e.g. an expert-load statistics flush). */
  flagged: boolean;
  /** Running-request count after the step, when recorded. */
  running?: number;
  /** 1-based data row in the source file, for messages. */
  row?: number;
}

/** One adjacent pair of endpoints and what the filter did with it. */
export interface WindowPair {
  from_us: number;
  to_us: number;
  interval_us: number;
  /** Kept, or excluded because the pair ends at a flagged endpoint. */
  selected: boolean;
}

/** Result of the window selection. `steps_per_s` is null when nothing was selected: never 0. */
export interface WindowResult {
  /** Rows read. */
  rows: number;
  /** Rows that qualified as endpoints (all rows, or those whose running count equals the concurrency). */
  endpoints: number;
  /** Rows dropped by the concurrency check (not endpoints). */
  not_at_concurrency: number;
  /** The concurrency filter applied, if any. */
  concurrency: number | null;
  pairs: WindowPair[];
  /** Number of selected intervals (the numerator). */
  selected: number;
  /** Sum of selected intervals, µs (the denominator). */
  selected_sum_us: number;
  /** Largest selected interval, µs; null when none. */
  max_interval_us: number | null;
  /** selected / (selected_sum_us · 1e-6); null when there is no selected interval or they sum to 0. */
  steps_per_s: number | null;
  /** Why steps_per_s is null. */
  no_result_reason: string | null;
}

/**
 * Select intervals and compute steps per second (chapter Listing 2.11).
 *
 * Order matters and follows the chapter: (1) rows whose running count differs from `concurrency`
 * are not endpoints; (2) adjacent endpoints are paired; (3) a pair whose *later* endpoint is flagged
 * is excluded, so the pair starting at a flagged endpoint is kept.
 *
 * @param concurrency when given, every endpoint must carry `running`
 * @throws Error when `concurrency` is given and an endpoint lacks `running`, or timestamps decrease
 * @example selectWindow([0,4,10,15] ms with 10 flagged).steps_per_s ≈ 222.2
 */
export function selectWindow(rows: readonly Endpoint[], concurrency?: number): WindowResult {
  for (let i = 1; i < rows.length; i++) {
    if (rows[i]!.ts_us < rows[i - 1]!.ts_us) {
      throw new Error(
        `timestamps must not decrease: row ${rows[i]!.row ?? i + 1} is earlier than row ${rows[i - 1]!.row ?? i}`,
      );
    }
  }
  let eps: readonly Endpoint[] = rows;
  if (concurrency !== undefined) {
    const missing = rows.find((r) => r.running === undefined);
    if (missing)
      throw new Error(
        `concurrency filter needs a running count on every row (row ${missing.row ?? rows.indexOf(missing) + 1} has none)`,
      );
    eps = rows.filter((r) => r.running === concurrency);
  }
  const pairs: WindowPair[] = [];
  for (let i = 1; i < eps.length; i++) {
    const prev = eps[i - 1]!;
    const cur = eps[i]!;
    pairs.push({ from_us: prev.ts_us, to_us: cur.ts_us, interval_us: cur.ts_us - prev.ts_us, selected: !cur.flagged });
  }
  const sel = pairs.filter((p) => p.selected).map((p) => p.interval_us);
  const sum = sel.reduce((a, b) => a + b, 0);
  let reason: string | null = null;
  if (eps.length < 2) reason = `fewer than two endpoints (${eps.length}), so no interval`;
  else if (sel.length === 0) reason = `every one of the ${pairs.length} interval(s) ends at a flagged endpoint`;
  else if (!(sum > 0)) reason = 'the selected intervals have zero total duration';
  return {
    rows: rows.length,
    endpoints: eps.length,
    not_at_concurrency: rows.length - eps.length,
    concurrency: concurrency ?? null,
    pairs,
    selected: sel.length,
    selected_sum_us: sum,
    max_interval_us: sel.length ? Math.max(...sel) : null,
    steps_per_s: reason === null ? (sel.length * 1e6) / sum : null,
    no_result_reason: reason,
  };
}

/**
 * Full-acceptance token rate per GPU (chapter Listing 2.12):
 * steps/s × requests × (1 + draft_length) / cp. Counts every submitted position as output,
 * whatever the acceptance; valid as "useful" only if every draft token is accepted.
 *
 * @example fullAcceptanceTokensPerS(200, 16, 5, 1) === 19_200
 */
export function fullAcceptanceTokensPerS(steps_per_s: number, requests: number, draft_length: number, cp = 1): number {
  return (steps_per_s * requests * (1 + draft_length)) / cp;
}

/**
 * Useful token rate per GPU from an observed useful output per request per step τ (chapter §2.5.5:
 * "to use a different τ, recalculate from decode_avg_sps"): steps/s × requests × τ / cp.
 * Valid only when the step rate does not depend on acceptance (fixed-length verification).
 *
 * @example usefulTokensPerS(200, 16, 3, 1) === 9_600
 */
export function usefulTokensPerS(steps_per_s: number, requests: number, tau: number, cp = 1): number {
  return (steps_per_s * requests * tau) / cp;
}

const TS_COLUMNS = { ts_ms: 1000, ts_s: 1e6, ts_us: 1 } as const;

/**
 * Parse a CSV of step-return timestamps: one of `ts_ms`, `ts_s`, `ts_us`; `flag` (0/1/true/false,
 * optional, default 0); `running` (optional integer).
 * @throws InputError naming file, row and column
 */
export function parseWindowCsv(text: string, file: string): Endpoint[] {
  const parsed = Papa.parse<Record<string, string>>(text.trim(), {
    header: true,
    skipEmptyLines: true,
    transformHeader: (h) => h.trim(),
  });
  const fields = parsed.meta.fields ?? [];
  const tsCols = (Object.keys(TS_COLUMNS) as Array<keyof typeof TS_COLUMNS>).filter((c) => fields.includes(c));
  if (tsCols.length !== 1) {
    throw new InputError(
      { file, row: 0 },
      `expected exactly one timestamp column (ts_ms, ts_s or ts_us), found ${tsCols.length ? tsCols.join(', ') : 'none'}`,
    );
  }
  const tsCol = tsCols[0]!;
  const scale = TS_COLUMNS[tsCol];
  const hasFlag = fields.includes('flag');
  const hasRunning = fields.includes('running');
  return parsed.data.map((rec, i) => {
    const row = i + 1;
    const tsText = (rec[tsCol] ?? '').trim();
    const ts = tsText === '' ? NaN : Number(tsText);
    if (!Number.isFinite(ts))
      throw new InputError({ file, row, column: tsCol }, `expected a finite timestamp, got "${tsText}"`);
    let flagged = false;
    if (hasFlag) {
      const f = (rec.flag ?? '').trim().toLowerCase();
      if (f === '1' || f === 'true') flagged = true;
      else if (f === '0' || f === 'false' || f === '') flagged = false;
      else throw new InputError({ file, row, column: 'flag' }, `expected 0/1 or true/false, got "${rec.flag}"`);
    }
    const ep: Endpoint = { ts_us: ts * scale, flagged, row };
    if (hasRunning) {
      const t = (rec.running ?? '').trim();
      const n = Number(t);
      if (t === '' || !Number.isInteger(n) || n < 0)
        throw new InputError({ file, row, column: 'running' }, `expected a non-negative integer, got "${t}"`);
      ep.running = n;
    }
    return ep;
  });
}
