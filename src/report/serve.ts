/**
 * Text tables and SVG of `stepcal serve` (issue 18; docs/serving.md). Pure: data in, strings out.
 * Times shown in ms; JSON (built by the CLI) keeps the µs fields.
 */
import { chart, esc, PALETTE, type Series } from '../core/render/svg.ts';
import { fmtFixed } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';
import { RESOURCES } from '../pricer/types.ts';
import type { Dist, ServeMetrics } from '../serve/metrics.ts';
import type { SweepPoint } from '../serve/sweep.ts';
import { STEP_REGIMES } from '../serve/types.ts';

const ms = (us: number | null) => (us === null ? '-' : fmtFixed(us / 1000, 2));
const rate = (x: number | null) => (x === null ? 'no rate' : fmtFixed(x, 1));
const pct = (x: number) => fmtFixed(x * 100, 1);

/** Lines that say what was simulated (model, deployment, scheduler, workload, KV, profile). */
export type ServeHeader = string[];

function distRow(name: string, d: Dist): string[] {
  return [name, String(d.n), ms(d.mean_us), ms(d.p50_us), ms(d.p90_us), ms(d.p99_us)];
}

/** The latency table: TTFT, ITL (pooled gaps), TPOT (per request), E2E. */
export function latencyTable(m: ServeMetrics): string {
  return renderTable(
    [
      { header: 'metric', align: 'left' },
      { header: 'n' },
      { header: 'mean (ms)' },
      { header: 'p50 (ms)' },
      { header: 'p90 (ms)' },
      { header: 'p99 (ms)' },
    ],
    [
      distRow('TTFT (t1 − arrival)', m.ttft),
      distRow('ITL (every later-token gap, pooled)', m.itl),
      distRow('TPOT (one mean gap per request, ≥ 2 tokens)', m.tpot),
      distRow('E2E (last token − arrival)', m.e2e),
    ],
  );
}

/** Throughput lines, each with its numerator and denominator stated. */
export function throughputLines(m: ServeMetrics): string[] {
  const w = m.whole;
  const out = [
    `whole trace: ${w.output_tokens} output tokens / ${fmtFixed(w.span_us / 1e6, 3)} s (first arrival to last delivery) = ` +
      `${rate(w.output_tokens_per_s)} output tokens/s; ` +
      `with ${w.input_tokens} prompt tokens ${rate(w.total_tokens_per_s)} total tokens/s`,
  ];
  out.push(
    m.window
      ? `steady-state window: ${m.window.intervals} step intervals, ${fmtFixed(m.window.steps_per_s, 2)} steps/s, ` +
          `${rate(m.window.output_tokens_per_s)} output tokens/s; window = ${m.window.rule}`
      : 'steady-state window: no interval qualified (no result, not a zero rate)',
  );
  out.push(
    `per GPU: ${rate(m.per_gpu.output_tokens_per_s)} output tokens/s/GPU whole trace, ${rate(m.per_gpu.window_output_tokens_per_s)} in the window; ` +
      `denominator ${m.per_gpu.denominator}`,
  );
  out.push(`per user: ${rate(m.tokens_per_s_per_user)} tokens/s (1 / mean TPOT)`);
  if (m.full_acceptance_tokens_per_s !== null) {
    out.push(
      `full-acceptance accounting (every verified position counted as output, chapter §2.5.5): ${rate(m.full_acceptance_tokens_per_s)} tokens/s ` +
        `vs useful ${rate(w.output_tokens_per_s)}`,
    );
  }
  return out;
}

/** Step mix and per-resource shares. */
export function stepLines(m: ServeMetrics): string {
  const s = m.steps;
  const reg = renderTable(
    [
      { header: 'step regime', align: 'left' },
      { header: 'steps' },
      { header: 'share of steps (%)' },
      { header: 'share of busy time (%)' },
    ],
    STEP_REGIMES.map((r) => [r, String(s.regime[r].steps), pct(s.regime[r].share), pct(s.regime[r].time_share)]),
  );
  const res = renderTable(
    [
      { header: 'resource', align: 'left' },
      { header: 'share of priced resource time (%)' },
      { header: 'share of busy time as bottleneck (%)' },
    ],
    RESOURCES.map((r) => [r, pct(s.resource_share[r]), pct(s.bottleneck_time_share[r])]),
  );
  return `${s.n} steps, busy ${fmtFixed(s.busy_us / 1e6, 3)} s\n${reg}\n${res}`;
}

/** The whole text report of one run. */
export function serveReport(header: ServeHeader, m: ServeMetrics, notes: readonly string[]): string {
  const r = m.requests;
  const parts = [
    header.join('\n'),
    '',
    `requests: ${r.completed} completed, ${r.refused} refused, ${r.preemptions} preemptions`,
    latencyTable(m).trimEnd(),
    `percentiles: ${m.percentile_rule}`,
    '',
    ...throughputLines(m),
    '',
    stepLines(m).trimEnd(),
  ];
  if (notes.length) parts.push('', 'EXTRAPOLATED steps:', ...notes.map((n) => `  - ${n}`));
  return `${parts.join('\n')}\n`;
}

/** The sweep table: one row per deployment and concurrency. */
export function sweepTable(points: readonly SweepPoint[]): string {
  return renderTable(
    [
      { header: 'deployment', align: 'left' },
      { header: 'concurrency' },
      { header: 'TTFT mean (ms)' },
      { header: 'TTFT p90 (ms)' },
      { header: 'TPOT mean (ms)' },
      { header: 'TPOT p90 (ms)' },
      { header: 'out tok/s/GPU' },
      { header: 'tok/s/user' },
      { header: 'preemptions' },
      { header: 'Pareto', align: 'left' },
    ],
    points.map((p) => [
      p.deployment,
      String(p.concurrency),
      ms(p.metrics.ttft.mean_us),
      ms(p.metrics.ttft.p90_us),
      ms(p.metrics.tpot.mean_us),
      ms(p.metrics.tpot.p90_us),
      rate(p.tokens_per_s_per_gpu),
      rate(p.tokens_per_s_per_user),
      String(p.metrics.requests.preemptions),
      p.pareto ? 'yes' : '',
    ]),
  );
}

/** Size of one sweep panel. */
const PANEL = { width: 560, height: 380, x_label: 'concurrency', x_log: true } as const;

/** Series per deployment of y(point) against concurrency. */
function byDeployment(points: readonly SweepPoint[], y: (p: SweepPoint) => number | null): Series[] {
  const labels = [...new Set(points.map((p) => p.deployment))];
  return labels.map((label, i) => ({
    label,
    style: 'line' as const,
    color: PALETTE[i % PALETTE.length]!,
    points: points.filter((p) => p.deployment === label).map((p): [number, number] => [p.concurrency, y(p) ?? NaN]),
  }));
}

/**
 * The sweep figure: TTFT and TPOT (mean, ms) against concurrency, one line per deployment, and, when
 * several deployments are given, tokens/s/GPU against tokens/s/user with the Pareto frontier.
 * Panels side by side in one self-contained SVG.
 */
export function sweepSvg(points: readonly SweepPoint[], title: string): string {
  const panels = [
    chart(
      byDeployment(points, (p) => (p.metrics.ttft.mean_us ?? NaN) / 1000),
      { ...PANEL, title: 'TTFT (mean) vs concurrency', y_label: 'TTFT (ms)' },
    ),
    chart(
      byDeployment(points, (p) => (p.metrics.tpot.mean_us ?? NaN) / 1000),
      { ...PANEL, title: 'TPOT (mean) vs concurrency', y_label: 'TPOT (ms)' },
    ),
  ];
  if (new Set(points.map((p) => p.deployment)).size > 1) {
    const scatter: Series[] = byDeployment(points, () => 0).map((s) => ({
      ...s,
      style: 'scatter' as const,
      radius: 4,
      points: points
        .filter((p) => p.deployment === s.label)
        .map((p): [number, number] => [p.tokens_per_s_per_user ?? NaN, p.tokens_per_s_per_gpu ?? NaN]),
    }));
    const front = points.filter((p) => p.pareto).sort((a, b) => a.tokens_per_s_per_user! - b.tokens_per_s_per_user!);
    const frontier = front.map((p): [number, number] => [p.tokens_per_s_per_user!, p.tokens_per_s_per_gpu!]);
    scatter.push({ label: 'Pareto frontier', style: 'line', color: '#333', dash: '4 3', points: frontier });
    const labels = {
      title: 'throughput per GPU vs per user',
      x_label: 'tokens/s/user (1 / mean TPOT)',
      y_label: 'output tokens/s/GPU',
    } as const;
    const pts = scatter.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
    const pad = (v: number[]): [number, number] => {
      const lo = Math.min(...v);
      const hi = Math.max(...v);
      const d = (hi - lo || Math.abs(hi) || 1) * 0.05;
      return [Math.max(0, lo - d), hi + d];
    };
    const ranges = pts.length ? { x_range: pad(pts.map((p) => p[0])), y_range: pad(pts.map((p) => p[1])) } : {};
    panels.push(chart(scatter, { ...PANEL, x_log: false, ...labels, ...ranges }));
  }
  const W = 560 * panels.length;
  // each panel nested at its offset, with its own clip-path id
  const body = panels.map((svg, i) =>
    svg
      .replace('<svg ', `<svg x="${i * 560}" y="24" `)
      .replaceAll('id="plot"', `id="plot${i}"`)
      .replaceAll('url(#plot)', `url(#plot${i})`),
  );
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="404" viewBox="0 0 ${W} 404" font-family="sans-serif" font-size="11">\n` +
    `<rect width="${W}" height="404" fill="white"/>\n<text x="10" y="16" font-size="13" font-weight="bold">${esc(title)}</text>\n` +
    body.join('') +
    '</svg>\n'
  );
}
