/**
 * The MoE part of the fit report (README "MoE routing imbalance", moe_imbalance.svg,
 * moe_imbalance_residuals.svg), drawn from `fitMoe`'s typed result (src/fit/moe.ts). Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { groupBy, median, percentileNearestRank } from '../core/numeric/stats.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmt } from '../fit/collective-provenance.ts';
import {
  imbalanceResidual,
  imbalanceStats,
  type MoeFit,
  type MoePair,
  type MoeResult,
  PRIMARY_DISTRIBUTION,
  SECONDARY_DISTRIBUTION,
  TOKEN_BUCKETS,
} from '../fit/moe.ts';
import { type FitSection, thin } from './fit-common.ts';

/** Pairs drawn in the residual figure (deterministic thinning in (tokens, ratio) order). */
export const MOE_RESIDUAL_POINTS = 1000;

type Fitted = Extract<MoeResult, { status: 'fitted' }>;

/** Markdown, summary line and figures of the MoE fit (a refusal section when it refused). */
export function moeSection(fit: MoeFit, chip: Chip): FitSection {
  const r = fit.result;
  const L: string[] = [`## MoE routing imbalance (${chip.name})`, ''];
  if (r.status === 'refused') {
    L.push(`**Refused.** ${r.reason}. No entry is written (the kernel's default multiplier is 1.0).`, '');
    return { md: L.join('\n'), summary: [r.message], figures: [] };
  }
  L.push(...statsTable(r), ...tokenTable(r), ...dtypeTable(r), ...errorsText(r));
  const summary = `moe: ${r.primary.length} pairs (${PRIMARY_DISTRIBUTION}/balanced): median ${fmt(r.stats.median)} [${fmt(r.ci.median_ci95[0])}, ${fmt(r.ci.median_ci95[1])}], p90 ${fmt(r.stats.p90)}; holdout geo ${r.holdout ? `${fmt(r.holdout.geo)}x` : 'n/a'}`;
  const figures = [
    { name: 'moe_imbalance.svg', svg: ratioFigure(chip.name, r) },
    { name: 'moe_imbalance_residuals.svg', svg: residualFigure(chip.name, r) },
  ];
  return { md: L.join('\n'), summary: [summary], figures };
}

function statsTable(r: Fitted): string[] {
  const { stats: est, ci: bs } = r;
  const L = [
    `Pairs: rows of identical shape and kernel under \`${PRIMARY_DISTRIBUTION}\` and \`balanced\` routing; ratio = skewed/balanced latency. ` +
      `Median (type-7) and p90 (nearest rank); ci95 from a seeded bootstrap over pairs (${r.bootstrap.resamples} resamples, seed ${r.bootstrap.seed}). ` +
      `Lanes: ${r.lanes.join(', ')}. Written as \`fitted: false\`: a measured statistic, not a fitted law.`,
    '',
    '| distribution | pairs | median (ci95) | p10 | p90 (ci95) |',
    '|---|---|---|---|---|',
    `| ${PRIMARY_DISTRIBUTION} (registry) | ${r.primary.length} | ${fmt(est.median)} (${fmt(bs.median_ci95[0])}–${fmt(bs.median_ci95[1])}) | ${fmt(est.p10)} | ${fmt(est.p90)} (${fmt(bs.p90_ci95[0])}–${fmt(bs.p90_ci95[1])}) |`,
  ];
  if (r.secondary.length) {
    const s = imbalanceStats(r.secondary.map((p) => p.ratio));
    L.push(
      `| ${SECONDARY_DISTRIBUTION} (reported only) | ${r.secondary.length} | ${fmt(s.median)} | ${fmt(s.p10)} | ${fmt(s.p90)} |`,
    );
  }
  L.push('');
  return L;
}

function tokenTable(r: Fitted): string[] {
  const L = [
    '### By tokens per rank',
    '',
    `| tokens | pairs | median ${PRIMARY_DISTRIBUTION} | p90 ${PRIMARY_DISTRIBUTION} | median ${SECONDARY_DISTRIBUTION} | p90 ${SECONDARY_DISTRIBUTION} |`,
    '|---|---|---|---|---|---|',
  ];
  for (const [lo, hi] of TOKEN_BUCKETS) {
    const a = r.primary.filter((p) => p.tokens >= lo && p.tokens <= hi).map((p) => p.ratio);
    if (!a.length) continue;
    const b = r.secondary.filter((p) => p.tokens >= lo && p.tokens <= hi).map((p) => p.ratio);
    const sa = imbalanceStats(a);
    const sb = b.length ? imbalanceStats(b) : undefined;
    L.push(
      `| ${lo}–${Number.isFinite(hi) ? hi : '∞'} | ${a.length} | ${fmt(sa.median)} | ${fmt(sa.p90)} | ${sb ? fmt(sb.median) : '–'} | ${sb ? fmt(sb.p90) : '–'} |`,
    );
  }
  return L;
}

function dtypeTable(r: Fitted): string[] {
  const L = ['', '### By dtype', '', '| dtype | pairs | median | p90 |', '|---|---|---|---|'];
  for (const d of [...new Set(r.primary.map((p) => p.dtype))].sort()) {
    const a = r.primary.filter((p) => p.dtype === d).map((p) => p.ratio);
    const s = imbalanceStats(a);
    L.push(`| ${d} | ${a.length} | ${fmt(s.median)} | ${fmt(s.p90)} |`);
  }
  return L;
}

function errorsText(r: Fitted): string[] {
  const { train, holdout: hold, stats: est } = r;
  return [
    '',
    `Errors of latency(skewed) ≈ median · latency(balanced): train geo ${fmt(train.geo)}x (MAPE ${fmt(train.mape_pct, 3)}%)` +
      (hold
        ? `; leave-one-geometry-out geo ${fmt(hold.geo)}x (MAPE ${fmt(hold.mape_pct, 3)}%) over ${hold.geometries} geometries.`
        : '; single geometry, no holdout.'),
    '',
    `![ratios](moe_imbalance.svg) ![residuals](moe_imbalance_residuals.svg)`,
    '',
    `Residuals (moe_imbalance_residuals.svg): per pair, ln(median · latency(balanced) / latency(skewed)) = ln(median / ratio), the error of the stored multiplier's use; the p90 line sits at ln(median/p90) = ${fmt(Math.log(est.median / est.p90))}, with 10% of pairs below it by construction.`,
    '',
    'BLIS (vLLM 0.25.0 lane, 18,144 pairs): H100 median 0.998, p90 1.387; H200 median 0.999, p90 1.394. Older TRT-LLM lane: H100 1.044 (p10–p90 0.839–1.714), H200 1.056 (0.85–1.7).',
    '',
  ];
}

function residualFigure(chip: string, r: Fitted): string {
  const est = r.stats;
  const shown = thin(
    [...r.primary].sort((a, b) => a.tokens - b.tokens || a.ratio - b.ratio),
    MOE_RESIDUAL_POINTS,
  );
  return chart(
    [
      {
        label: `${PRIMARY_DISTRIBUTION} pairs`,
        points: shown.map((p) => [p.tokens, imbalanceResidual(p, est.median)]),
        style: 'scatter',
        color: '#1f77b4',
        radius: 1.5,
      },
    ],
    {
      title: `${chip} MoE: residuals of latency(skewed) ≈ median · latency(balanced)`,
      x_label: 'tokens per rank',
      y_label: 'ln(median / ratio)',
      x_log: true,
      h_lines: [
        { y: 0, label: 'zero (median)' },
        { y: Math.log(est.median / est.p90), label: `p90: ln(median/p90) ${fmt(Math.log(est.median / est.p90))}` },
      ],
    },
  );
}

/** Median and p90 ratio per token count, for the primary and (when measured) the secondary distribution. */
function ratioFigure(chip: string, r: Fitted): string {
  const series: Series[] = [];
  const add = (pairs: readonly MoePair[], name: string, colors: [string, string]) => {
    const byTok = groupBy(pairs, (p) => p.tokens);
    const toks = [...byTok.keys()].sort((a, b) => a - b);
    const ratios = (t: number) => byTok.get(t)!.map((p) => p.ratio);
    series.push({
      label: `${name} median`,
      style: 'line',
      color: colors[0],
      points: toks.map((t) => [t, median(ratios(t))]),
    });
    series.push({
      label: `${name} p90`,
      style: 'line',
      color: colors[1],
      dash: '4 3',
      points: toks.map((t) => [t, percentileNearestRank(ratios(t), 0.9)]),
    });
  };
  add(r.primary, PRIMARY_DISTRIBUTION, ['#1f77b4', '#1f77b4']);
  if (r.secondary.length) add(r.secondary, SECONDARY_DISTRIBUTION, ['#d62728', '#d62728']);
  return chart(series, {
    title: `${chip} MoE: latency(skewed)/latency(balanced) per token count`,
    x_label: 'tokens per rank',
    y_label: 'ratio',
    x_log: true,
    h_lines: [
      { y: r.stats.median, label: `median ${fmt(r.stats.median)}` },
      { y: r.stats.p90, label: `p90 ${fmt(r.stats.p90)}` },
    ],
  });
}
