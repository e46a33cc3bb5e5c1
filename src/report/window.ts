/**
 * Text presentation of a benchmark observation window (chapter §2.5.4 table layout) and of the
 * token rates derived from steps per second (§2.5.5). Pure.
 */
import { fmtGrouped, fmtNum } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';
import { fullAcceptanceTokensPerS, usefulTokensPerS, type WindowResult } from '../analytics/window.ts';

/** Rate with thousands separators and at most one decimal ("19,200", "222.2"). */
const fmtRate = (x: number): string => fmtGrouped(x, 1);

/** Conversion inputs for token rates. */
export interface RateInputs {
  requests?: number;
  draft_length: number;
  cp: number;
  tau?: number;
}

/** Token rates named by their accounting; absent when the request count is unknown. */
export interface TokenRates {
  full_acceptance_tokens_per_s_per_gpu?: number;
  useful_tokens_per_s_per_gpu?: number;
}

export function tokenRates(steps_per_s: number, r: RateInputs): TokenRates {
  const out: TokenRates = {};
  if (r.requests === undefined) return out;
  out.full_acceptance_tokens_per_s_per_gpu = fullAcceptanceTokensPerS(steps_per_s, r.requests, r.draft_length, r.cp);
  if (r.tau !== undefined) out.useful_tokens_per_s_per_gpu = usefulTokensPerS(steps_per_s, r.requests, r.tau, r.cp);
  return out;
}

/** Lines naming each token rate and its formula. */
export function ratesReport(steps_per_s: number, r: RateInputs): string {
  const t = tokenRates(steps_per_s, r);
  if (t.full_acceptance_tokens_per_s_per_gpu === undefined)
    return 'token rates: pass --requests (or --concurrency) to convert steps/s into tokens/s\n';
  const lines = [
    `full-acceptance tokens/s per GPU = ${fmtRate(steps_per_s)} steps/s × ${r.requests} requests × (1 + ${r.draft_length} draft) / cp ${r.cp} = ${fmtRate(t.full_acceptance_tokens_per_s_per_gpu)}` +
      (r.draft_length > 0 ? ' (counts every draft token as accepted)' : ''),
  ];
  if (t.useful_tokens_per_s_per_gpu !== undefined) {
    lines.push(
      `useful tokens/s per GPU = ${fmtRate(steps_per_s)} steps/s × ${r.requests} requests × τ ${r.tau} / cp ${r.cp} = ${fmtRate(t.useful_tokens_per_s_per_gpu)} (valid while step rate does not depend on acceptance)`,
    );
  } else if (r.draft_length > 0) {
    lines.push('useful tokens/s: pass --tau (observed useful tokens per request per step) to report it');
  }
  return `${lines.join('\n')}\n`;
}

/** The pair table, the counts and steps/s — or "no result". */
export function windowReport(w: WindowResult): string {
  const ms = (us: number) => fmtNum(us / 1000, 3);
  const out: string[] = [];
  out.push(
    `endpoints: ${w.endpoints} of ${w.rows} rows` +
      (w.concurrency !== null
        ? ` (running = ${w.concurrency}; ${w.not_at_concurrency} rows at another count are not endpoints)`
        : '') +
      `; ${w.pairs.length} adjacent pairs, formed before filtering`,
  );
  if (w.pairs.length) {
    out.push(
      renderTable(
        [
          { header: 'from (ms)' },
          { header: 'to (ms)' },
          { header: 'interval (ms)' },
          { header: 'treatment', align: 'left' },
        ],
        w.pairs.map((p) => [
          ms(p.from_us),
          ms(p.to_us),
          ms(p.interval_us),
          p.selected ? 'keep' : 'exclude (ends at a flagged endpoint)',
        ]),
      ).trimEnd(),
    );
  }
  if (w.steps_per_s === null) {
    out.push(`steps/s: no result: no selected interval (${w.no_result_reason}); this is not a measured zero rate`);
  } else {
    out.push(
      `steps/s = ${w.selected} selected intervals / ${fmtNum(w.selected_sum_us / 1e6, 9)} s = ${fmtRate(w.steps_per_s)} intervals/s; max selected interval ${ms(w.max_interval_us!)} ms`,
    );
  }
  return `${out.join('\n')}\n`;
}
