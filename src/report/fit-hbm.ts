/**
 * The HBM part of the fit report (README "HBM derate", hbm.svg, hbm_residuals.svg), drawn from
 * `fitHbm`'s typed result (src/fit/hbm.ts). Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { hbmReadUs } from '../core/laws/floor-rate.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmt } from '../fit/common.ts';
import { HBM_MAX_M, type HbmFit, type HbmResult, type Read } from '../fit/hbm.ts';
import { type FitSection, thin } from './fit-common.ts';

/** Points per series in the residual figure (deterministic thinning in bytes order keeps it small). */
export const HBM_RESIDUAL_POINTS = 500;

/** Markdown, summary line and figures of the HBM derate fit (nothing when too few reads). */
export function hbmSection(fit: HbmFit, chip: Chip): FitSection {
  const r = fit.result;
  if (!r) return { md: '', summary: [], figures: [] };
  const gs = r.by_source.gemm;
  const as = r.by_source.attention_decode;
  const summary = `hbm_derate: ${fmt(r.derate)} [${fmt(r.ci95[0])}, ${fmt(r.ci95[1])}] (prior ${r.prior}); n ${gs.n + as.n} (gemm ${gs.n}, decode ${as.n}); geo train ${r.train.geo} / holdout ${r.holdout?.geo ?? '—'}`;
  const figures = [
    { name: 'hbm.svg', svg: ratioFigure(chip.name, r) },
    { name: 'hbm_residuals.svg', svg: residualFigure(chip.name, r) },
  ];
  return { md: hbmMarkdown(r), summary: [summary], figures };
}

function hbmMarkdown(r: HbmResult): string {
  const fromGemm = r.primary === 'gemm';
  const gs = r.by_source.gemm;
  const as = r.by_source.attention_decode;
  const bw = r.hbm_bytes_per_us;
  return [
    '## HBM derate',
    '',
    `hbm_derate ${fmt(r.derate)} [${fmt(r.ci95[0])}, ${fmt(r.ci95[1])}] of the datasheet ${fmt(bw / 1e6)} TB/s, against the 0.8-style prior ${r.prior} in the system descriptor (measured/prior ${fmt(r.derate / r.prior, 3)}).`,
    '',
    '| source | n | derate (slope of t0 + bytes/(bw·derate)) | raw median bytes/latency/datasheet |',
    '|---|---|---|---|',
    `| GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, weights ≥ 2×L2) | ${gs.n} | ${fmt(gs.derate_alone)} | ${fmt(gs.raw_median)} |`,
    `| decode-attention KV reads (full, KV ≥ 2×L2) | ${as.n} | ${fmt(as.derate_alone)} | ${fmt(as.raw_median)} |`,
    `| stored (${fromGemm ? 'GEMM weight reads' : 'decode KV reads'}) | ${fromGemm ? gs.n : as.n} | ${fmt(r.derate)} | — |`,
    '',
    `Train geo ${r.train.geo} (MAPE ${r.train.mape_pct}%) for t = bytes/(datasheet·derate); holdout (${r.holdout?.split ?? 'none'}) ${r.holdout ? `${r.holdout.geo} (MAPE ${r.holdout.mape_pct}%)` : '—'}. The per-call cost t0 is fitted per source so the derate is the streaming slope; the raw ratios (figure) include t0 and sit below it.`,
    '',
    '![hbm](hbm.svg) ![residuals](hbm_residuals.svg)',
    '',
    `Residuals (hbm_residuals.svg): ln(predicted/measured) against bytes read, for the fit rows (${fromGemm ? 'GEMM weight reads' : 'decode KV reads'}, t0 ${fmt(r.t0_us)} us)${fromGemm && as.n ? ` and the holdout decode KV reads (derate fixed, t0 refitted ${fmt(r.holdout_t0_us)} us)` : ''}.`,
    '',
  ].join('\n');
}

/** Achieved / datasheet bandwidth of every read, with the derate and the prior as lines. */
function ratioFigure(chip: string, r: HbmResult): string {
  const ratio = (x: Read) => x.bytes / x.latency_us / r.hbm_bytes_per_us;
  const a = r.decode_reads;
  return chart(
    [
      {
        label: 'GEMM weight reads',
        points: r.gemm_reads.map((x) => [x.bytes, ratio(x)]),
        style: 'scatter',
        color: '#1f77b4',
        radius: 2,
      },
      {
        label: 'decode KV reads',
        points: a.filter((_, i) => i % Math.max(1, Math.ceil(a.length / 1500)) === 0).map((x) => [x.bytes, ratio(x)]),
        style: 'scatter',
        color: '#ff7f0e',
        radius: 1.5,
      },
    ],
    {
      title: `${chip}: achieved / datasheet HBM bandwidth`,
      x_label: 'bytes read',
      y_label: 'achieved / datasheet',
      x_log: true,
      h_lines: [
        { y: r.derate, label: `derate ${fmt(r.derate)}` },
        { y: r.prior, label: `prior ${r.prior}` },
      ],
    },
  );
}

/**
 * ln(predicted/measured) against bytes for the fit rows (their t0) and, when present, the holdout
 * decode KV reads (same derate, their refitted t0). Positive = the law predicts slower than measured.
 */
function residualFigure(chip: string, r: HbmResult): string {
  const fromGemm = r.primary === 'gemm';
  const res = (rs: readonly Read[], t0: number): Array<[number, number]> =>
    thin(
      [...rs].sort((x, y) => x.bytes - y.bytes || x.latency_us - y.latency_us),
      HBM_RESIDUAL_POINTS,
    ).map((x) => [x.bytes, Math.log((t0 + hbmReadUs(x.bytes, r.hbm_bytes_per_us, r.derate)) / x.latency_us)]);
  const series: Series[] = [
    {
      label: fromGemm ? 'fit: GEMM weight reads' : 'fit: decode KV reads',
      points: res(fromGemm ? r.gemm_reads : r.decode_reads, r.t0_us),
      style: 'scatter',
      color: '#1f77b4',
      radius: 1.5,
    },
  ];
  const holdRows = fromGemm ? r.decode_reads : [];
  if (holdRows.length)
    series.push({
      label: 'holdout: decode KV reads',
      points: res(holdRows, r.holdout_t0_us),
      style: 'scatter',
      color: '#ff7f0e',
      radius: 1.5,
    });
  return chart(series, {
    title: `${chip}: HBM derate ${fmt(r.derate)} residuals`,
    x_label: 'bytes read',
    y_label: 'ln(predicted / measured)',
    x_log: true,
    h_lines: [{ y: 0, label: 'zero' }],
  });
}
