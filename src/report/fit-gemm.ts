/**
 * The GEMM part of the fit report (fits/<chip>/README.md "GEMM efficiency ramp", gemm_<d>.svg,
 * gemm_<d>_residuals.svg), drawn from `fitGemm`'s typed result (src/fit/gemm.ts). Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { gemmEfficiency } from '../core/laws/gemm.ts';
import { chart } from '../core/render/svg.ts';
import { fmt } from '../fit/common.ts';
import { type GemmFit, type RampResult, SHAPE_STORE_RULE } from '../fit/gemm.ts';
import { type FitFigure, type FitSection, thin } from './fit-common.ts';

/** Markdown, summary lines and figures of the GEMM fit. */
export function gemmSection(fit: GemmFit, chip: Chip): FitSection {
  const md: string[] = ['## GEMM efficiency ramp', ''];
  for (const r of fit.ramps) md.push(...rampMarkdown(r, chip));
  return {
    md: `${md.join('\n')}\n`,
    summary: fit.ramps.map(rampSummary),
    figures: fit.ramps.flatMap((r) => rampFigures(r, chip)),
  };
}

function rampSummary(r: RampResult): string {
  const s = r.shape;
  const j = s.stored && s.method === 'joint' ? s.joint : undefined;
  return `gemm ${r.dtype}: eps_max ${fmt(j ? j.eps_max : r.envelope_fit.eps_max)} [${fmt((j?.ci_eps ?? r.envelope_fit.ci_eps)[0])}, ${fmt((j?.ci_eps ?? r.envelope_fit.ci_eps)[1])}], m_half ${fmt(j ? j.m_half : r.envelope_fit.m_half)} tokens${j ? ' (joint shape fit)' : ''}; n ${r.rows_total - r.rows_memory_bound} rows; envelope geo train ${r.envelope_train.geo} / holdout ${r.envelope_holdout.geo}; shape ramp holdout geo staged ${fmt(s.holdout_geo_shape)} / joint ${fmt(s.joint.holdout_geo)} vs 1-factor ${fmt(Math.min(s.holdout_geo_envelope, s.holdout_geo_all_rows))}${s.stored ? ` (stored: ${s.method})` : ''}`;
}

function rampMarkdown(r: RampResult, chip: Chip): string[] {
  const s = r.shape;
  return [
    `### ${r.dtype} (${chip.name}, peak ${fmt(r.peak_flops_per_us / 1e6)} TFLOP/s dense)`,
    '',
    `${r.rows_total} rows after median-of-repeats; ${r.rows_memory_bound} memory-bound (m < ${fmt(r.m_threshold)} tokens: weight bytes / datasheet HBM > FLOPs / peak) kept out of the compute ramp.`,
    '',
    '| fit | eps_max | m_half (tokens) | train geo | train MAPE % | holdout geo | holdout MAPE % |',
    '|---|---|---|---|---|---|---|',
    ...(r.shape.stored && r.shape.method === 'joint'
      ? [
          `| joint shape-aware (stored, with n_half ${fmt(r.shape.joint.n_half)}, k_half ${fmt(r.shape.joint.k_half)}) | ${fmt(r.shape.joint.eps_max)} | ${fmt(r.shape.joint.m_half)} | ${r.shape.joint.train.geo} | ${r.shape.joint.train.mape_pct} | ${r.shape.joint.holdout.geo} | ${r.shape.joint.holdout.mape_pct} |`,
        ]
      : []),
    `| envelope${r.shape.stored && r.shape.method === 'joint' ? '' : ' (stored)'} | ${fmt(r.envelope_fit.eps_max)} [${fmt(r.envelope_fit.ci_eps[0])}, ${fmt(r.envelope_fit.ci_eps[1])}] | ${fmt(r.envelope_fit.m_half)} [${fmt(r.envelope_fit.ci_m_half[0])}, ${fmt(r.envelope_fit.ci_m_half[1])}] | ${r.envelope_train.geo} | ${r.envelope_train.mape_pct} | ${r.envelope_holdout.geo} | ${r.envelope_holdout.mape_pct} |`,
    `| all rows | ${fmt(r.all_rows_fit.eps_max)} | ${fmt(r.all_rows_fit.m_half)} | ${r.all_rows_train.geo} | ${r.all_rows_train.mape_pct} | ${r.all_rows_holdout.geo} | ${r.all_rows_holdout.mape_pct} |`,
    '',
    `Holdout: whole k ∈ {${r.held_k.join(', ')}} and the largest m (${r.m_max}). Envelope errors are on envelope points; all-rows errors on every compute-bound row (efficiency error = latency error).`,
    '',
    'Large-m bias of the stored 1-factor ramp (envelope efficiency, measured vs predicted):',
    '',
    '| m | measured | predicted | predicted/measured |',
    '|---|---|---|---|',
    ...r.large_m.map(
      (p) => `| ${p.m} | ${fmt(p.measured, 3)} | ${fmt(p.predicted, 3)} | ${fmt(p.predicted / p.measured, 3)} |`,
    ),
    '',
    `Shape-aware ramp (n_half ${fmt(s.n_half)} [${fmt(s.ci_n[0])}, ${fmt(s.ci_n[1])}], k_half ${fmt(s.k_half)} [${fmt(s.ci_k[0])}, ${fmt(s.ci_k[1])}] elements (features; stored as dimensionless), on top of the stored envelope ramp): held-out-k geometric error ${fmt(s.holdout_geo_shape)} against ${fmt(s.holdout_geo_envelope)} (envelope 1-factor) and ${fmt(s.holdout_geo_all_rows)} (all-rows 1-factor). Joint 4-coefficient fit (eps_max ≤ 1, on ln efficiency of every compute-bound row): eps_max ${fmt(s.joint.eps_max)}, m_half ${fmt(s.joint.m_half)}, n_half ${fmt(s.joint.n_half)}, k_half ${fmt(s.joint.k_half)}, train geo ${s.joint.train.geo}, held-out-k geo ${fmt(s.joint.holdout_geo)}. ${s.stored ? `Stored: the ${s.method} fit (lower held-out-k geo; removes ≥ ${Math.round((1 - SHAPE_STORE_RULE) * 100)}% of the 1-factor excess error)${s.method === 'joint' ? ', its eps_max and m_half replacing the envelope ramp' : ''}.` : 'Not stored (does not clearly win).'}`,
    '',
    `![gemm ${r.dtype}](gemm_${r.dtype}.svg) ![residuals](gemm_${r.dtype}_residuals.svg)`,
    '',
  ];
}

/** Efficiency vs m (rows, envelope, both ramps) and the stored ramp's log residuals on the envelope. */
function rampFigures(r: RampResult, chip: Chip): FitFigure[] {
  const pts = r.points;
  const env = r.envelope;
  const ms = [...new Set(pts.map((p) => p.m))].sort((a, b) => a - b);
  const e = r.envelope_fit;
  const a = r.all_rows_fit;
  const main = chart(
    [
      {
        label: 'compute-bound rows',
        points: thin(
          pts.filter((p) => !p.memory_bound),
          1500,
        ).map((p) => [p.m, p.eff]),
        style: 'scatter',
        color: '#9ecae1',
        radius: 1.5,
      },
      {
        label: 'memory-bound rows',
        points: thin(
          pts.filter((p) => p.memory_bound),
          500,
        ).map((p) => [p.m, p.eff]),
        style: 'scatter',
        color: '#bbbbbb',
        radius: 1.5,
      },
      { label: 'envelope', points: env.map((p) => [p.m, p.eff]), style: 'scatter', color: '#d62728', radius: 2.5 },
      {
        label: 'envelope fit (stored)',
        points: ms.map((m) => [m, gemmEfficiency(m, e.eps_max, e.m_half)]),
        style: 'line',
        color: '#d62728',
      },
      {
        label: 'all-rows fit',
        points: ms.map((m) => [m, gemmEfficiency(m, a.eps_max, a.m_half)]),
        style: 'line',
        color: '#2ca02c',
        dash: '4 3',
      },
    ],
    {
      title: `${chip.name} GEMM ${r.dtype}: efficiency vs m`,
      x_label: 'm (tokens)',
      y_label: 'efficiency (fraction of dense peak)',
      x_log: true,
      y_range: [0, 1.1],
    },
  );
  const resid = chart(
    [
      {
        label: 'ln(pred/meas), envelope',
        points: env.map((p) => [p.m, Math.log(gemmEfficiency(p.m, e.eps_max, e.m_half) / p.eff)]),
        style: 'scatter',
        color: '#d62728',
        radius: 2.5,
      },
    ],
    {
      title: `${chip.name} GEMM ${r.dtype}: residuals of the stored ramp`,
      x_label: 'm (tokens)',
      y_label: 'ln(predicted / measured)',
      x_log: true,
      h_lines: [{ y: 0, label: 'zero' }],
    },
  );
  return [
    { name: `gemm_${r.dtype}.svg`, svg: main },
    { name: `gemm_${r.dtype}_residuals.svg`, svg: resid },
  ];
}
