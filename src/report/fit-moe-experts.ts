/**
 * The MoE expert-time fit drawn: a Markdown section (coefficients with ci95, errors, the rows used,
 * and the seed footnote's sum-vs-max panel) and one predicted-vs-measured SVG per dtype, from the
 * plain data `fitMoeExperts` returns (src/fit/moe-experts.ts). Pure: no I/O.
 */
import { chart, PALETTE, type Series } from '../core/render/svg.ts';
import type { MoeExpertsData } from '../fit/moe-experts.ts';

/** Points drawn per figure (deterministic thinning, evenly strided). */
export const EXPERT_FIGURE_POINTS = 1500;

/** A family's part of the fit report: Markdown section, summary lines, figures. */
export interface MoeExpertsSection {
  md: string;
  summary: string[];
  figures: Array<{ name: string; svg: string }>;
}

const f4 = (x: number): string => (Number.isFinite(x) ? String(Number(x.toPrecision(4))) : String(x));
const ci = (c: [number, number]): string => `[${f4(c[0])}, ${f4(c[1])}]`;

/** The sum-vs-max verdict of one chip: geo of each composition over all its dtypes (mean of the dtypes' geo). */
export function sumVsMaxVerdict(
  data: MoeExpertsData,
): { sum_geo: number; max_geo: number; sum_better: boolean } | undefined {
  if (!data.fits.length) return undefined;
  const mean = (f: (x: MoeExpertsData['fits'][number]) => number) =>
    data.fits.reduce((s, x) => s + f(x), 0) / data.fits.length;
  const sum_geo = mean((x) => x.sum_vs_max.sum_geo);
  const max_geo = mean((x) => x.sum_vs_max.max_geo);
  return { sum_geo, max_geo, sum_better: sum_geo < max_geo };
}

function table(data: MoeExpertsData): string[] {
  const L = [
    '| dtype | distribution | floor (µs/layer) | eps_max | m_half (tokens/expert) | route rate (B/µs) | per touched expert (µs) | pair rate (B/µs) | n | train geo | holdout tokens geo | holdout shape geo | series (screened) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const f of data.fits) {
    const c = f.coefficients;
    L.push(
      `| ${f.dtype} | ${f.distribution} | ${f4(c.floor_us)} ${ci(f.ci95.floor_us)} | ${f4(c.eps_max)} ${ci(f.ci95.eps_max)} | ${f4(c.m_half)} ${ci(f.ci95.m_half)} | ` +
        `${Number.isFinite(c.route_bytes_per_us) ? `${f4(c.route_bytes_per_us)} ${ci(f.ci95.route_bytes_per_us)}` : 'pinned (free)'} | ` +
        `${c.expert_us > 0 ? `${f4(c.expert_us)} ${ci(f.ci95.expert_us)}` : 'pinned (0)'} | ` +
        `${Number.isFinite(c.pair_bytes_per_us) ? `${f4(c.pair_bytes_per_us)} ${ci(f.ci95.pair_bytes_per_us)}` : 'pinned (free)'} | ${f.train.n} | ${f4(f.train.geo)} | ` +
        `${f.holdout_tokens ? `${f4(f.holdout_tokens.geo)} (tokens ≥ ${f.holdout_tokens.min_tokens})` : 'n/a'} | ${f.holdout_shape ? `${f4(f.holdout_shape.geo)} (${f.holdout_shape.geometries} shapes)` : 'n/a'} | ${f.series} (${f.screened.length}) |`,
    );
  }
  return L;
}

function panel(data: MoeExpertsData): string[] {
  const L = ['#### Sum or max? (seed footnote 1)', '', '| dtype | sum geo | max geo | better |', '|---|---|---|---|'];
  for (const f of data.fits)
    L.push(
      `| ${f.dtype} | ${f4(f.sum_vs_max.sum_geo)} | ${f4(f.sum_vs_max.max_geo)} | ${f.sum_vs_max.sum_better ? 'sum' : 'max'} |`,
    );
  const v = sumVsMaxVerdict(data);
  if (v)
    L.push(
      '',
      `Over the chip's dtypes (mean geo): sum ${f4(v.sum_geo)}, max ${f4(v.max_geo)}: **${v.sum_better ? 'the sum fits better' : 'the max fits better'}**.`,
    );
  return L;
}

/** Lower edges of the tokens-per-expert bands of the residual panel (tokens). */
const RESIDUAL_BANDS = [0, 1, 4, 16, 64, 256] as const;

/**
 * Residuals by tokens per touched expert (the ramp's variable) and by ep: per band, the geo error and
 * the bias (geometric mean of predicted/measured; < 1 = the law is too fast there), over the fitted points.
 */
function residualPanel(data: MoeExpertsData): string[] {
  const band = (m: number) => RESIDUAL_BANDS.findLastIndex((b) => m >= b);
  const label = (i: number) =>
    i + 1 < RESIDUAL_BANDS.length ? `${RESIDUAL_BANDS[i]}–${RESIDUAL_BANDS[i + 1]}` : `≥ ${RESIDUAL_BANDS[i]}`;
  const cols = [...RESIDUAL_BANDS.map((_, i) => `m ${label(i)}`), 'ep = 1', 'ep > 1'];
  const L = [
    '#### Residuals by tokens per expert and by ep',
    '',
    'Each cell: geo error / bias (geometric mean of predicted ÷ measured; below 1 the law is too fast) over the points in it, with their count.',
    '',
    `| dtype | ${cols.join(' | ')} |`,
    `|---|${cols.map(() => '---|').join('')}`,
  ];
  for (const f of data.fits) {
    const cells = cols.map(() => ({ abs: 0, sum: 0, n: 0 }));
    for (const p of f.points) {
      const e = Math.log(p.predicted_us / p.measured_us);
      for (const j of [band(p.tokens_per_expert), RESIDUAL_BANDS.length + (p.ep > 1 ? 1 : 0)]) {
        const c = cells[j]!;
        c.abs += Math.abs(e);
        c.sum += e;
        c.n++;
      }
    }
    const cell = (c: (typeof cells)[number]) =>
      c.n ? `${f4(Math.exp(c.abs / c.n))} / ${f4(Math.exp(c.sum / c.n))} (${c.n})` : '—';
    L.push(`| ${f.dtype} | ${cells.map(cell).join(' | ')} |`);
  }
  return L;
}

function figure(data: MoeExpertsData, f: MoeExpertsData['fits'][number]): string {
  const pts = [...f.points].sort((a, b) => a.tokens - b.tokens || a.measured_us - b.measured_us);
  const stride = Math.max(1, pts.length / EXPERT_FIGURE_POINTS);
  const shown = pts.filter((_, i) => Math.floor(i / stride) !== Math.floor((i - 1) / stride) || i === 0);
  const modes = ['tp', 'ep'] as const;
  const series: Series[] = modes.map((m, i) => ({
    label: m === 'tp' ? 'ep = 1 (tp-sharded)' : 'ep > 1',
    style: 'scatter',
    color: PALETTE[i]!,
    radius: 1.5,
    points: shown
      .filter((p) => (m === 'tp' ? p.ep === 1 : p.ep > 1))
      .map((p) => [p.measured_us, p.predicted_us] as [number, number]),
  }));
  return chart(series, {
    title: `${data.chip} MoE experts ${f.dtype}: predicted vs measured per layer (train geo ${f4(f.train.geo)})`,
    x_label: 'measured µs',
    y_label: 'predicted µs (sum law)',
    x_log: true,
    y_log: true,
    diagonal: true,
  });
}

/** The section for fits/<chip>/README.md, the summary lines and the figures. */
export function moeExpertsSection(data: MoeExpertsData): MoeExpertsSection {
  const L = [
    `## MoE expert time (${data.chip})`,
    '',
    'Law (core/laws/moe-experts.ts): t = floor + D·per_expert + D·mats·H·I′·bytes/(HBM·hbm_derate) + W·(P + D·m_half)/(peak·eps_max) + T·k·H·2/route_rate + P·H·2/pair_rate, ' +
      'charged as a sum; D distinct local experts touched (routing law), P routed pairs on the rank, W FLOPs per pair. ' +
      `HBM derate ${f4(data.hbm_derate)} (${data.hbm_derate_source}). Relative least squares, coefficients bounded (eps_max ≤ 1, the rest ≥ 0); ci95 from a seeded bootstrap over series.`,
    '',
    ...table(data),
    '',
    ...panel(data),
    '',
    ...residualPanel(data),
    '',
    ...data.fits.map((f) => `![${f.dtype}](moe_experts_${f.dtype}.svg)`),
    '',
    ...data.not_fitted.map((n) => `- ${n.dtype}: not fitted: ${n.why}`),
  ];
  const summary = data.fits.map(
    (f) =>
      `moe_experts ${f.dtype}: train geo ${f4(f.train.geo)}, holdout tokens ${f.holdout_tokens ? f4(f.holdout_tokens.geo) : 'n/a'}, shape ${f.holdout_shape ? f4(f.holdout_shape.geo) : 'n/a'}`,
  );
  return {
    md: L.join('\n') + '\n',
    summary,
    figures: data.fits.map((f) => ({ name: `moe_experts_${f.dtype}.svg`, svg: figure(data, f) })),
  };
}
