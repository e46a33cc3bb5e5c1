/**
 * Text and JSON presentation of a trace summary (chapter §2.4, the `labs/06_trace.py` output
 * layout). Times are shown in the input unit; JSON keeps µs fields and adds the display unit.
 */
import { fmtFixed, fmtNum } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';
import { TIME_UNITS, type TimeUnit, type TraceSummary } from '../analytics/trace.ts';

/** Render the per-request table and the aggregates, values in `unit`. */
export function traceReport(s: TraceSummary, unit: TimeUnit): string {
  const k = TIME_UNITS[unit];
  const v = (x: number) => fmtNum(x / k, 3);
  const out: string[] = [];
  out.push(`All times in ${unit}, one clock; gaps exclude the wait for the first token`);
  out.push(
    renderTable(
      [
        { header: 'id', align: 'left' },
        { header: `queue (${unit})` },
        { header: `prompt (${unit})` },
        { header: `publish (${unit})` },
        { header: `TTFT (${unit})` },
        { header: 'tokens' },
        { header: `gaps (${unit})`, align: 'left' },
      ],
      s.requests.map((r) => [
        r.id,
        v(r.queue_us),
        v(r.prompt_us),
        v(r.publish_us),
        v(r.ttft_us),
        String(r.tokens),
        r.gaps_us.length ? r.gaps_us.map(v).join(',') : '-',
      ]),
    ).trimEnd(),
  );
  out.push(
    `TTFT (${unit}): n=${s.ttft.n}, mean=${v(s.ttft.mean_us)}, p50=${v(s.ttft.p50_us)}, p95=${v(s.ttft.p95_us)}`,
  );
  const gapLabel = s.gap_mode === 'pooled' ? 'Token gaps, pooled' : 'Token gaps, one mean per request with ≥ 2 tokens';
  if (s.gaps.n === 0) {
    out.push(`${gapLabel} (${unit}): n=0, no result (every request delivered one token; no gap is recorded as 0)`);
  } else {
    out.push(`${gapLabel} (${unit}): n=${s.gaps.n}, mean=${v(s.gaps.mean_us!)}, p95=${v(s.gaps.p95_us!)}`);
  }
  out.push(
    s.tokens_per_s === null
      ? `Whole trace: ${s.tokens} tokens / 0 ${unit}: no rate (first arrival equals last delivery)`
      : `Whole trace: ${s.tokens} tokens / ${v(s.span_us)} ${unit} = ${fmtFixed(s.tokens_per_s, 1)} tokens/s (first arrival to last delivery; not a steady-state decode rate)`,
  );
  out.push(`Percentiles: ${s.percentile_rule}`);
  return `${out.join('\n')}\n`;
}

/** JSON-ready object: the summary (µs fields) plus the input unit. */
export function traceJson(s: TraceSummary, unit: TimeUnit): object {
  return { input_unit: unit, ...s };
}
