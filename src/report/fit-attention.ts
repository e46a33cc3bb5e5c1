/**
 * The attention parts of the fit report (README "Decode attention" and "Prefill attention",
 * attention_decode[_swa].svg, attention_prefill.svg and their residual plots), drawn from
 * `fitAttentionDecode` / `fitAttentionPrefill` (src/fit/attention.ts). Pure.
 */
import { type Chip, DEFAULT_L2_MIB } from '../core/catalog/chip.ts';
import { type DecodeLaw, decodeAttentionUs } from '../core/laws/attention.ts';
import { chart } from '../core/render/svg.ts';
import type { DecodeFit, DecodeResult, PrefillFit, PrefillResult, WorkPoint } from '../fit/attention.ts';
import { fmt } from '../fit/common.ts';
import { type FitFigure, type FitSection, thin } from './fit-common.ts';

/** Markdown, summary lines and figures of the decode attention fit (full, then sliding window). */
export function decodeSection(fit: DecodeFit, chip: Chip): FitSection {
  const md = ['## Decode attention', ''];
  for (const r of fit.results) md.push(...decodeMarkdown(r, chip));
  const figures = fit.results.flatMap((r) =>
    floorRateFigures(
      `attention_decode${suffix(r)}`,
      `${chip.name} decode attention (${r.kind})`,
      'KV bytes',
      r.points,
      r,
    ),
  );
  return { md: `${md.join('\n')}\n`, summary: fit.results.map((r) => decodeSummary(r, chip)), figures };
}

const suffix = (r: DecodeResult) => (r.kind === 'full' ? '' : '_swa');

function decodeSummary(r: DecodeResult, chip: Chip): string {
  return `attention_decode${suffix(r)}: floor ${fmt(r.floor_us)} us [${fmt(r.ci_floor[0])}, ${fmt(r.ci_floor[1])}], rate ${fmt(r.rate)} B/us (${fmt(r.rate / chip.hbm_bytes_per_us, 3)} of datasheet); n ${r.n}; geo before ${fmt(r.before_geo)} → train ${r.train.geo} / holdout ${r.holdout?.geo ?? '—'}`;
}

function decodeMarkdown(r: DecodeResult, chip: Chip): string[] {
  const sfx = suffix(r);
  return [
    `### ${r.kind === 'full' ? 'Full attention' : 'Sliding window (context capped at the window)'}`,
    '',
    `floor ${fmt(r.floor_us)} µs [${fmt(r.ci_floor[0])}, ${fmt(r.ci_floor[1])}], rate ${fmt(r.rate)} B/µs [${fmt(r.ci_rate[0])}, ${fmt(r.ci_rate[1])}] = ${fmt(r.rate / chip.hbm_bytes_per_us, 3)} × datasheet${r.method === 'parallel' && r.ci_item && r.ci_p_half ? `, item ${fmt(r.item_us)} µs [${fmt(r.ci_item[0])}, ${fmt(r.ci_item[1])}] per work item, p_half ${fmt(r.p_half)} [${fmt(r.ci_p_half[0])}, ${fmt(r.ci_p_half[1])}] work items (p = batch × n_kv)` : ''}; n = ${r.n} rows. Stored fit: ${r.method}.`,
    '',
    ...candidateTable(r),
    '',
    `Geometric error before (pure KV read at datasheet bandwidth) ${fmt(r.before_geo)}, after ${r.train.geo} (MAPE ${r.train.mape_pct}%); holdout (${r.holdout?.split ?? 'none'}) ${r.holdout ? `${r.holdout.geo} (MAPE ${r.holdout.mape_pct}%)` : '—'}.`,
    '',
    `Cache-resident working sets (KV bytes < L2 = ${chip.l2_mib ?? DEFAULT_L2_MIB} MiB): a joint fit on every row, them included, gives floor ${fmt(r.with_cache_resident.floor_us)} µs and rate ${fmt(r.with_cache_resident.rate)} B/µs (geo ${fmt(r.with_cache_resident.geo)}): repeated timing keeps small KV in L2, which distorts the joint fit of a DRAM rate. ${r.excluded_cache_resident ? `Stored: rate from the rows with KV ≥ 2×L2, floor (rate fixed) from rows with KV < L2/16; errors above are on all ${r.n} rows.` : `The staged fit (rate from KV ≥ 2×L2, floor from KV < L2/16) is a candidate above; stored: ${r.method}, on all ${r.n} rows.`}`,
    '',
    ...kernelTable(r.per_kernel),
    '',
    `![decode ${r.kind}](attention_decode${sfx}.svg) ![residuals](attention_decode${sfx}_residuals.svg)`,
    '',
  ];
}

/** Holdout of every candidate decode fit (the stored one has the lowest holdout geo). */
function candidateTable(r: DecodeResult): string[] {
  return [
    '| fit | law | train geo | holdout geo | holdout MAPE % |',
    '|---|---|---|---|---|',
    ...r.candidates.map(
      (c) =>
        `| ${c.method}${c.method === r.method ? ' (stored)' : ''} | ${c.method === 'parallel' ? 'floor + p·item + bytes/rate(p)' : 'floor + bytes/rate'} | ${c.train.geo} | ${c.holdout?.geo ?? '—'} | ${c.holdout?.mape_pct ?? '—'} |`,
    ),
    '',
  ];
}

function kernelTable(perKernel: DecodeResult['per_kernel']): string[] {
  return [
    '| kernel_source | n | geo | MAPE % |',
    '|---|---|---|---|',
    ...perKernel.map((k) => `| ${k.kernel} | ${k.err.n} | ${k.err.geo} | ${k.err.mape_pct} |`),
  ];
}

/** Markdown, summary line and figures of the prefill attention fit (nothing when it refused). */
export function prefillSection(fit: PrefillFit, chip: Chip): FitSection {
  const r = fit.result;
  if (!r) return { md: '', summary: [], figures: [] };
  const title = `${chip.name} prefill attention`;
  const xLabel =
    r.method === 'sequence_ramp'
      ? 'causal FLOPs / (bf16 peak · eps_max_bf16)  (µs at work_scale 1)'
      : 'causal FLOPs / (bf16 peak · eps_bf16(tokens))  (µs at work_scale 1)';
  return {
    md: prefillMarkdown(r),
    summary: [prefillSummary(r)],
    figures: floorRateFigures('attention_prefill', title, xLabel, r.points, {
      floor_us: r.floor_us,
      rate: r.work_scale,
      item_us: 0,
      p_half: r.s_half,
    }),
  };
}

function prefillSummary(r: PrefillResult): string {
  return `attention_prefill: floor ${fmt(r.floor_us)} us [${fmt(r.ci_floor[0])}, ${fmt(r.ci_floor[1])}], work_scale ${fmt(r.work_scale)} [${fmt(r.ci_scale[0])}, ${fmt(r.ci_scale[1])}]; n ${r.n}; geo train ${r.train.geo} / holdout ${r.holdout?.geo ?? '—'}`;
}

function prefillMarkdown(r: PrefillResult): string {
  return [
    '## Prefill attention',
    '',
    r.method === 'sequence_ramp' && r.ci_s_half
      ? `floor ${fmt(r.floor_us)} µs [${fmt(r.ci_floor[0])}, ${fmt(r.ci_floor[1])}], work_scale ${fmt(r.work_scale)} [${fmt(r.ci_scale[0])}, ${fmt(r.ci_scale[1])}] of the bf16 eps_max ${r.ramp.eps_max}, ramped per sequence: S/(S + s_half), s_half ${fmt(r.s_half)} [${fmt(r.ci_s_half[0])}, ${fmt(r.ci_s_half[1])}] tokens (S = new tokens of the sequence); n = ${r.n}. Excluded: ${r.excluded.join('; ') || 'none'}.`
      : `floor ${fmt(r.floor_us)} µs [${fmt(r.ci_floor[0])}, ${fmt(r.ci_floor[1])}], work_scale ${fmt(r.work_scale)} [${fmt(r.ci_scale[0])}, ${fmt(r.ci_scale[1])}] of the bf16 ramp (eps_max ${r.ramp.eps_max}, m_half ${r.ramp.m_half}); n = ${r.n}. Excluded: ${r.excluded.join('; ') || 'none'}.`,
    '',
    '| fit | law | train geo | holdout geo | holdout MAPE % |',
    '|---|---|---|---|---|',
    ...r.candidates.map(
      (c) =>
        `| ${c.method}${c.method === r.method ? ' (stored)' : ''} | ${c.method === 'sequence_ramp' ? 'floor + FLOPs/(peak·eps_max·ws·S/(S + s_half))' : 'floor + FLOPs/(peak·ε_bf16(batch·S)·ws)'} | ${c.train.geo} | ${c.holdout?.geo ?? '—'} | ${c.holdout?.mape_pct ?? '—'} |`,
    ),
    '',
    `Train geo ${r.train.geo} (MAPE ${r.train.mape_pct}%); holdout (${r.holdout?.split ?? 'none'}) ${r.holdout ? `${r.holdout.geo} (MAPE ${r.holdout.mape_pct}%)` : '—'}.`,
    '',
    ...kernelTable(r.per_kernel),
    '',
    '![prefill](attention_prefill.svg) ![residuals](attention_prefill_residuals.svg)',
    '',
  ].join('\n');
}

/** Measured points, the fitted law floor + work/rate, and log residuals. */
function floorRateFigures(
  name: string,
  title: string,
  xLabel: string,
  points: readonly WorkPoint[],
  law: DecodeLaw,
): FitFigure[] {
  const plain = law.item_us === 0 && law.p_half === 0;
  const pred = (p: WorkPoint) => decodeAttentionUs(law, p.items ?? 0, p.work);
  const sorted = [...points].sort((a, b) => a.work - b.work);
  const shown = thin(sorted, 1500);
  const xs = [...new Set(thin(sorted, 200).map((p) => p.work))];
  const main = chart(
    [
      {
        label: 'measured',
        points: shown.map((p) => [p.work, p.latency_us]),
        style: 'scatter',
        color: '#1f77b4',
        radius: 1.5,
      },
      plain
        ? {
            label: 'fit: floor + work/rate',
            points: xs.map((x) => [x, decodeAttentionUs(law, 0, x)]),
            style: 'line',
            color: '#d62728',
          }
        : {
            label: 'fit at each row: floor + p·item + work/rate(p)',
            points: shown.map((p) => [p.work, pred(p)]),
            style: 'scatter',
            color: '#d62728',
            radius: 1,
          },
    ],
    { title, x_label: xLabel, y_label: 'latency (µs)', x_log: true, y_log: true },
  );
  const resid = chart(
    [
      {
        label: 'ln(pred/meas)',
        points: shown.map((p) => [p.work, Math.log(pred(p) / p.latency_us)]),
        style: 'scatter',
        color: '#d62728',
        radius: 1.5,
      },
    ],
    {
      title: `${title}: residuals`,
      x_label: xLabel,
      y_label: 'ln(predicted / measured)',
      x_log: true,
      h_lines: [{ y: 0, label: 'zero' }],
    },
  );
  return [
    { name: `${name}.svg`, svg: main },
    { name: `${name}_residuals.svg`, svg: resid },
  ];
}
