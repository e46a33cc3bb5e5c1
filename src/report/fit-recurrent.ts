/**
 * The recurrent-mixer part of the fit report (README "Recurrent mixers", recurrent_residuals.svg), drawn from
 * `fitRecurrent`'s typed result (src/fit/recurrent.ts). Where a holdout misses the issue-14 target (geo
 * ≤ 1.15) the section says so and why, next to the residual plot. Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmt } from '../fit/common.ts';
import type { RecurrentFamilyFit, RecurrentFit } from '../fit/recurrent.ts';
import { type FitSection, thin } from './fit-common.ts';

/** The issue-14 holdout target for the recurrent laws (geo error). */
export const RECURRENT_HOLDOUT_TARGET = 1.15;

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];

/** Why a fit misses the target, from what its residuals show (stated per mixer and phase). */
const WHY: Record<string, string> = {
  'gdn/prefill':
    'the chunked delta-rule kernel runs one CTA group per (sequence, head): at batch · heads below the SM count it is occupancy-bound (h200, 64 heads: 0.048 µs/token at batch 1 vs 0.026 at batch 8), which a per-token rate plus a per-sequence state term cannot follow; the residuals fan out at small batch · heads',
  'kda/prefill': 'flashkda_fwd shows the same occupancy bend at small batch · heads as GDN',
  'mamba2/prefill':
    'the SSD scan is compute/latency-bound at ≤ 7 % of HBM (README); its cost per chunk varies with batch',
  'mamba2/decode': 'only the conv update is measured; its small shapes sit on the launch floor',
  'kda/decode': 'the fused decode kernel has 44 shapes only; the smallest sit in L2',
  'gdn/decode': 'small states sit in L2 (README: h100 108 % of HBM at ≤ 67 MB)',
};

const worst = (f: RecurrentFit) => Math.max(f.holdout_batch?.geo ?? 1, f.holdout_context?.geo ?? 1);

function row(f: RecurrentFit): string {
  const terms =
    f.phase === 'decode'
      ? `floor ${fmt(f.coef[0]!)} µs, rate ${fmt(1 / f.coef[1]!)} B/µs`
      : `floor ${fmt(f.coef[0]!)} µs, state ${f.coef[1]! > 0 ? fmt(1 / f.coef[1]!) : '—'} B/µs, rate ${f.coef[2]! > 0 ? fmt(1 / f.coef[2]!) : '—'} FLOP/µs`;
  const ho = (e: RecurrentFit['holdout_batch']) => (e ? fmt(e.geo) : 'n/a');
  return `| ${f.mixer} | ${f.phase} | ${f.lane} | ${f.kernels.join(' + ')} | ${f.points.length} | ${terms} | ${fmt(f.train.geo)} | ${ho(f.holdout_batch)} | ${ho(f.holdout_context)} |`;
}

function markdown(fit: RecurrentFamilyFit): string {
  const d = fit.data;
  const misses = d.fits.filter((f) => worst(f) > RECURRENT_HOLDOUT_TARGET);
  return [
    '## Recurrent mixers',
    '',
    'Per layer: Σ of the kernels one layer runs for a shape (src/fit/recurrent.ts RECIPES). Decode t = floor + rows·2·S/rate (S the fp32 state); prefill t = floor + sequences·2·S/state_rate + tokens·4·v·d_v·d_k/rate (core/laws/recurrent.ts).',
    '',
    '| mixer | phase | lane | kernels | shapes | coefficients | train geo | holdout batch | holdout context |',
    '|---|---|---|---|---|---|---|---|---|',
    ...d.fits.map(row),
    '',
    ...d.not_fitted.map((n) => `- not fitted: ${n.mixer} ${n.phase}: ${n.why}.`),
    ...d.fits.filter((f) => f.leaves_out).map((f) => `- ${f.mixer} ${f.phase} leaves out ${f.leaves_out}.`),
    ...misses.map(
      (f) =>
        `- ${f.mixer} ${f.phase}: holdout geo ${fmt(worst(f))} misses the ${RECURRENT_HOLDOUT_TARGET} target: ${WHY[`${f.mixer}/${f.phase}`] ?? 'see the residuals'}.`,
    ),
    '',
    '![recurrent residuals](recurrent_residuals.svg)',
    '',
  ].join('\n');
}

/** ln(predicted/measured) against the measured latency, one series per (mixer, phase). */
function residualFigure(chip: string, fits: readonly RecurrentFit[]): string {
  const series: Series[] = fits.map((f, i) => ({
    label: `${f.mixer} ${f.phase}`,
    points: thin(
      [...f.points].sort((a, b) => a.latency_us - b.latency_us),
      400,
    ).map((p) => [p.latency_us, Math.log(p.predicted_us / p.latency_us)]),
    style: 'scatter',
    color: COLORS[i % COLORS.length]!,
    radius: 1.5,
  }));
  return chart(series, {
    title: `${chip}: recurrent-mixer residuals`,
    x_label: 'measured µs per layer',
    y_label: 'ln(predicted / measured)',
    x_log: true,
    h_lines: [{ y: 0, label: 'zero' }],
  });
}

/** Markdown, summary lines and the residual figure of the recurrent fit (nothing without fits). */
export function recurrentSection(fit: RecurrentFamilyFit, chip: Chip): FitSection {
  const d = fit.data;
  if (!d.fits.length) return { md: '', summary: [], figures: [] };
  const summary = d.fits.map(
    (f) =>
      `recurrent ${f.mixer} ${f.phase}: ${f.points.length} shapes (${f.lane}); train geo ${fmt(f.train.geo)}, holdout batch ${f.holdout_batch ? fmt(f.holdout_batch.geo) : 'n/a'}, context ${f.holdout_context ? fmt(f.holdout_context.geo) : 'n/a'}`,
  );
  return {
    md: markdown(fit),
    summary,
    figures: [{ name: 'recurrent_residuals.svg', svg: residualFigure(chip.name, d.fits) }],
  };
}
