/**
 * Text table of request-level validation (issue 18 §5): per metric, the same error metrics and goal
 * verdict as the step regimes (./validation.ts). Pure.
 */
import { fmtFixed } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';
import { REQUEST_METRICS, type RequestValidation } from '../validate/requests.ts';
import { goalVerdict } from './validation.ts';

/** One row per request-level metric that some scored row carries, then the excluded count. */
export function requestValidationTable(v: RequestValidation): string {
  const f = (x: number | undefined) => (x === undefined ? '–' : fmtFixed(x, 1));
  const rows = REQUEST_METRICS.flatMap((k) => {
    const m = v.metrics[k];
    if (!m) return [];
    const errors = [
      f(m.mape_pct),
      f(m.median_ape_pct),
      f(m.p90_ape_pct),
      f(m.bias_pct),
      fmtFixed(m.geo_mean_ratio, 3),
      f(m.shape_mape_pct),
    ];
    return [[k, String(m.n), ...errors, goalVerdict(m)]];
  });
  const table = renderTable(
    [
      { header: 'metric', align: 'left' },
      { header: 'n (rows)' },
      { header: 'MAPE (%)' },
      { header: 'median APE (%)' },
      { header: 'p90 APE (%)' },
      { header: 'bias (%)' },
      { header: 'geo mean pred/meas (×)' },
      { header: 'shape MAPE (%)' },
      { header: 'goal: median ≤ 10 %, p90 ≤ 25 %', align: 'left' },
    ],
    rows,
  );
  const excluded = v.rows.filter((r) => r.excluded).length;
  const pre = v.rows.filter((r) => r.preemptions > 0 || r.refused > 0).length;
  return (
    `request-level validation on ${v.chip}: ${v.rows.length} rows served (${excluded} excluded by flags), each replayed through \`stepcal serve\` ` +
    `(CMOverlap step clock, uncalibrated engine profile: registry host terms)${pre ? `; ${pre} row(s) preempted or refused requests` : ''}\n` +
    table +
    v.warnings.map((w) => `warning: ${w}\n`).join('')
  );
}
