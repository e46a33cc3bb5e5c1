/**
 * Presentation of the step-law sweep (chapter §2.1–2.3): YAML parameter files, the printed table,
 * the CSV and the two-panel SVG (costs; throughput). Pure: text in, text out.
 */
import { writeCsv } from '../core/render/csv.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmtFixed, fmtInt, fmtNum } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';
import type { Crossover, RooflineParams, StepPoint } from '../analytics/roofline.ts';

/**
 * The sweep table in the chapter's layout (Listing 2.1 output): times in µs with one decimal,
 * useful throughput as an integer number of tokens/s, plus the bound and intensity.
 */
export function rooflineTable(points: readonly StepPoint[]): string {
  return renderTable(
    [
      { header: 'R (requests)' },
      { header: 'N (positions)' },
      { header: 'U (tokens)' },
      { header: 'transfer (µs)' },
      { header: 'compute (µs)' },
      { header: 'step (µs)' },
      { header: 'useful (tokens/s)' },
      { header: 'intensity (ops/B)' },
      { header: 'bound', align: 'left' },
    ],
    points.map((p) => [
      fmtNum(p.requests),
      fmtNum(p.positions),
      fmtNum(p.useful_tokens),
      fmtFixed(p.transfer_us, 1),
      fmtFixed(p.compute_us, 1),
      fmtFixed(p.step_us, 1),
      fmtInt(p.useful_tokens_per_s),
      fmtNum(p.intensity_ops_per_byte, 2),
      p.bound,
    ]),
  );
}

/** One line per parameter, with its unit in the name. */
export function paramsLine(p: RooflineParams): string {
  return (
    `shared_bytes=${p.shared_bytes} bytes_per_request=${p.bytes_per_request} ops_per_position=${p.ops_per_position} ` +
    `mem_bytes_per_s=${p.mem_bytes_per_s} compute_ops_per_s=${p.compute_ops_per_s} overhead_us=${p.overhead_us} ` +
    `context_scale=${p.context_scale}`
  );
}

/** The crossover sentence, or why there is none. */
export function crossoverLine(c: Crossover | undefined, ridge: number, k: number): string {
  const along = k === 1 ? 'N = R' : `N = ${fmtNum(k)}·R`;
  if (!c) return `crossover (${along}): none, transfer stays above compute; ridge P/W = ${fmtNum(ridge, 4)} ops/B\n`;
  return (
    `crossover (${along}): R = ${fmtNum(c.requests, 3)}, N = ${fmtNum(c.positions, 3)}, ` +
    `intensity = ${fmtNum(c.intensity_ops_per_byte, 4)} ops/B = P/W, step = ${fmtFixed(c.step_us, 1)} µs\n`
  );
}

const CSV_COLUMNS = [
  'requests',
  'positions',
  'useful_tokens',
  'traffic_bytes',
  'ops',
  'transfer_us',
  'compute_us',
  'step_us',
  'bound',
  'intensity_ops_per_byte',
  'useful_tokens_per_s',
] as const;

/** CSV of the sweep, full precision, one row per point. */
export function rooflineCsv(points: readonly StepPoint[]): string {
  return writeCsv(CSV_COLUMNS, points as unknown as ReadonlyArray<Record<string, unknown>>);
}

/**
 * Two charts side by side in one SVG (chapter Figure 2.1): left, transfer / compute / step µs;
 * right, useful tokens/s. The x axis is R, or N when R is constant across the sweep.
 */
export function rooflineSvg(points: readonly StepPoint[], title: string): string {
  const rConst = points.every((p) => p.requests === points[0]?.requests);
  const xOf = (p: StepPoint) => (rConst && points.length > 1 ? p.positions : p.requests);
  const xLabel = rConst && points.length > 1 ? `N (positions), R = ${points[0]!.requests}` : 'R (requests)';
  const costs: Series[] = [
    { label: 'transfer M/W (µs)', points: points.map((p) => [xOf(p), p.transfer_us]), style: 'line' },
    { label: 'compute F/P (µs)', points: points.map((p) => [xOf(p), p.compute_us]), style: 'line' },
    { label: 'step T (µs)', points: points.map((p) => [xOf(p), p.step_us]), style: 'line', dash: '5 3' },
  ];
  const rate: Series[] = [
    { label: 'useful U/T (tokens/s)', points: points.map((p) => [xOf(p), p.useful_tokens_per_s]), style: 'line' },
  ];
  const left = chart(costs, { title: `${title}: costs`, x_label: xLabel, y_label: 'time (µs)' });
  const right = chart(rate, { title: `${title}: useful throughput`, x_label: xLabel, y_label: 'tokens/s' });
  return sideBySide([left, right]);
}

/**
 * Place complete SVG documents next to each other in one SVG. Each keeps its own coordinate system
 * (nested <svg>); the `plot` clip-path id is made unique per panel.
 */
export function sideBySide(svgs: readonly string[]): string {
  let x = 0;
  let H = 0;
  const parts: string[] = [];
  svgs.forEach((s, i) => {
    const w = Number(/width="([\d.]+)"/.exec(s)?.[1] ?? 720);
    const h = Number(/height="([\d.]+)"/.exec(s)?.[1] ?? 420);
    const body = s
      .trim()
      .replace(/id="plot"/g, `id="plot${i}"`)
      .replace(/url\(#plot\)/g, `url(#plot${i})`)
      .replace(/^<svg /, `<svg x="${x}" y="0" `);
    parts.push(body);
    x += w;
    H = Math.max(H, h);
  });
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${x}" height="${H}" viewBox="0 0 ${x} ${H}">\n` +
    parts.join('\n') +
    '\n</svg>\n'
  );
}
