/**
 * The MLA family's fit drawn (issue 13 item 2; src/fit/mla.ts): the module-versus-kernel comparison of every
 * law (train and holdout geo along context and batch), the registry's coefficients with ci95, and per law the
 * registry takes a predicted-vs-measured figure and two residual plots (along context and batch;
 * src/report/fit-mla-residuals.ts). Where a law misses the 1.15× holdout goal the section says why, from its
 * rows, above its residual plots. Pure: no I/O.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { chart, PALETTE } from '../core/render/svg.ts';
import { fmt } from '../fit/common.ts';
import type { MlaFit, MlaLawFit } from '../fit/mla.ts';
import { type FitSection, thin } from './fit-common.ts';
import { mlaMissReason, mlaResidualFigure, mlaResidualFigureName } from './fit-mla-residuals.ts';

/** Holdout geo the issue asks of MLA decode and prefill. */
const MLA_HOLDOUT_GOAL = 1.15;

const slug = (what: string) => what.replace(/[^a-z0-9]+/gi, '_').toLowerCase();
const g = (x: number) => (Number.isFinite(x) ? fmt(x) : 'n/a');

function figure(chip: Chip, law: MlaLawFit): string {
  const pts = thin(law.points, 1500);
  const series = (label: string, color: string, hold: boolean) => ({
    label,
    style: 'scatter' as const,
    color,
    radius: 1.5,
    points: pts.filter((p) => p.holdout === hold).map((p) => [p.measured_us, p.predicted_us] as [number, number]),
  });
  return chart([series('fit rows', PALETTE[0]!, false), series('held out', PALETTE[1]!, true)], {
    title: `${chip.name} MLA ${law.what}: predicted vs measured (holdout geo ${g(law.holdout_geo.all)})`,
    x_label: 'measured µs',
    y_label: 'predicted µs',
    x_log: true,
    y_log: true,
    diagonal: true,
  });
}

/** The section for fits/<chip>/README.md, the summary lines and three figures per priced law. */
export function mlaSection(f: MlaFit, chip: Chip): FitSection {
  if (!f.mla.length) return { md: '', summary: [], figures: [] };
  const L = [
    `## MLA: latent attention (${chip.name})`,
    '',
    'Laws (src/core/laws/mla.ts): module decode t = floor + keys·(latent bytes / rate + heads·head_token) + ' +
      'per_head·heads + per_request·B + per_request_head·B·heads (the projections); module prefill t = floor + work / ' +
      'work_scale on the bf16 ramp + per_head·heads + per_token·T + per_token_head·T·heads + per_token_sq·T². Kernel ' +
      'rows (timing spikes screened): decode in waves, t = max(floor, W·(wave_us + k·(key_us + hb·key_head_us))), ' +
      'W = ceil(B·ceil(heads / block_heads)·splits / SMs), k keys per request, hb = min(heads, block_heads), one-head ' +
      'rows their own law; prefill t = floor + head_token·T·heads + work / work_scale. The registry takes the vLLM ' +
      'module law (the kernel laws where a chip has no module table); the pricer charges the attention terms only, ' +
      'with the GQA tables\' kernel floor (docs/pricer.md "MLA"). Holdout: every 4th distinct context and batch.',
    '',
    '| law | registry | train geo | holdout geo | along context | along batch |',
    '|---|---|---|---|---|---|',
  ];
  for (const law of f.mla)
    L.push(
      `| ${law.what} | ${law.priced ? 'yes' : 'comparison'} | ${g(law.train_geo)} | ${g(law.holdout_geo.all)} | ${g(law.holdout_geo.context)} | ${g(law.holdout_geo.batch)} |`,
    );
  L.push('', '| coefficient | value | ci95 | n fit |', '|---|---|---|---|');
  for (const c of f.coefficients)
    L.push(
      `| ${c.name} | ${fmt(c.entry.value)} ${c.entry.units} | [${fmt(c.entry.ci95![0])}, ${fmt(c.entry.ci95![1])}] | ${c.entry.evidence!.train_error!.n} |`,
    );
  L.push('');
  const figures = [];
  const summary: string[] = [];
  for (const law of f.mla.filter((l) => l.priced)) {
    const name = `mla_${slug(law.what)}.svg`;
    const residuals = (['context', 'batch'] as const).map((axis) => ({
      axis,
      name: mlaResidualFigureName(slug(law.what), axis),
      svg: mlaResidualFigure(chip.name, law, axis, MLA_HOLDOUT_GOAL),
    }));
    figures.push({ name, svg: figure(chip, law) }, ...residuals.map(({ name, svg }) => ({ name, svg })));
    summary.push(`mla ${law.what}: train geo ${g(law.train_geo)}, holdout ${g(law.holdout_geo.all)}`);
    L.push(`### ${law.what}`, '');
    if (law.holdout_geo.all > MLA_HOLDOUT_GOAL)
      L.push(`- **above the ${MLA_HOLDOUT_GOAL}× goal.** ${mlaMissReason(law, MLA_HOLDOUT_GOAL)}`, '');
    L.push(`![${law.what}](${name})`, '');
    for (const r of residuals) L.push(`![${law.what}: residuals along ${r.axis}](${r.name})`, '');
  }
  for (const w of f.warnings) L.push(`- ${w}`);
  return { md: `${L.join('\n')}\n`, summary, figures };
}
