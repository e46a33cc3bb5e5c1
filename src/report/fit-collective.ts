/**
 * The collective part of the fit report (README "Collectives", collective_<op>.svg,
 * collective_residuals.svg), drawn from `fitCollectives`'s typed result (src/fit/collective.ts):
 * errors before/after, every fitted curve, the width holdout, floor monotonicity, the backend
 * comparison, BLIS's published values and the 16-rank extrapolation. Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { collectiveTime } from '../core/laws/collective.ts';
import { groupBy, median } from '../core/numeric/stats.ts';
import { chart, type Series } from '../core/render/svg.ts';
import {
  type CollectiveCurve,
  type CollectiveFit,
  type CollectiveWidthOutcome,
  EXTRAPOLATED_RANKS,
  floorMonotonicity,
} from '../fit/collective.ts';
import { isPcieOnly } from '../core/catalog/chip.ts';
import type { FloorRepair } from '../fit/collective-isotonic.ts';
import { BLIS_COLLECTIVES, BLIS_NCCL_ALLREDUCE_FP16_OLD } from '../fit/collective-blis.ts';
import { SMALL_MESSAGE_BYTES } from '../fit/collective-curve.ts';
import { fmt } from '../fit/collective-provenance.ts';
import type { FitFigure, FitSection } from './fit-common.ts';

/** What every section of the collective report reads. */
interface CollectiveReportInput {
  chip: string;
  curves: CollectiveCurve[];
  selected: CollectiveCurve[];
  unselectedViolations: string[];
  floorRepairs: readonly FloorRepair[];
  widthOutcomes: readonly CollectiveWidthOutcome[];
  ctx: { chip: Chip; bootstrap: { resamples: number; seed: number } };
}

/** Markdown, summary lines and figures of the collective fit. */
export function collectiveSection(fit: CollectiveFit, chipFacts: Chip): FitSection {
  const r = fit.result;
  const x: CollectiveReportInput = {
    chip: chipFacts.name,
    curves: r.curves,
    selected: r.selected,
    unselectedViolations: r.unselected_violations,
    floorRepairs: r.floor_repairs,
    widthOutcomes: r.width_outcomes,
    ctx: { chip: chipFacts, bootstrap: r.bootstrap },
  };
  const L: string[] = [];
  const summary: string[] = [];
  introSection(x, L, summary);
  const figures = buildFigures(x.chip, r.selected);
  if (r.curves.length === 0) {
    L.push('No collective rows could be fitted.', '');
    return { md: L.join('\n'), summary: ['collective: nothing fitted'], figures };
  }
  for (const section of [
    errorSection,
    curveTable,
    holdoutSection,
    floorSection,
    backendSection,
    blisSection,
    widthSection,
  ])
    section(x, L, summary);
  return { md: L.join('\n'), summary, figures };
}

/** Median ratio latency(a)/latency(b) over message sizes both measured. */
function matchedRatio(a: CollectiveCurve, b: CollectiveCurve): { ratio: number; n: number } {
  const mb = new Map(b.points.map((p) => [p.message_bytes, p.latency_us]));
  const rs: number[] = [];
  for (const p of a.points) {
    const q = mb.get(p.message_bytes);
    if (q !== undefined) rs.push(p.latency_us / q);
  }
  return { ratio: rs.length ? median(rs) : NaN, n: rs.length };
}

/** The law, the methods and the bootstrap settings. */
function introSection(x: CollectiveReportInput, L: string[], _summary: string[]): void {
  const { chip, ctx } = x;
  L.push(`## Collectives (${chip})`, '');
  L.push(
    'Law `t(b) = max(t0 + b/r_t, b/r_peak)`, b in bytes (per-rank buffer for all_reduce, whole buffer for the other ops). ' +
      `t0 = minimum latency over messages <= ${SMALL_MESSAGE_BYTES} B (measured); r_peak = largest achieved bytes/µs (measured); ` +
      'r_t fitted with both fixed on mean |ln(pred/meas)|. With r_t <= r_peak (a gate) the peak branch never binds, so the 3-parameter ' +
      "law acts as t0 + b/r_t; the 2-parameter comparator is BLIS's fallback `max(t0, b/r_peak)`. Repeats reduced by the median. " +
      `r_t ci95: seeded bootstrap over message sizes (${ctx.bootstrap.resamples} resamples, seed ${ctx.bootstrap.seed}); ` +
      'floor ci95 = [smallest, second-smallest] small-message latency; peak ci95 = [second-largest, largest] achieved rate.',
    '',
  );
}

/** Geometric error before (2-parameter) and after (3-parameter), all curves and registry curves. */
function errorSection(x: CollectiveReportInput, L: string[], summary: string[]): void {
  const { curves, selected } = x;
  const g2 = curves.map((c) => c.fit.geo2);
  const g3 = curves.map((c) => c.fit.geo3);
  const s2 = selected.map((c) => c.fit.geo2);
  const s3 = selected.map((c) => c.fit.geo3);
  const mx = (xs: number[]) => Math.max(...xs);
  L.push('### Geometric error before (2-parameter) and after (3-parameter)', '');
  L.push(
    '| configurations | n | median 2-param | median 3-param | worst 2-param | worst 3-param |',
    '|---|---|---|---|---|---|',
  );
  L.push(
    `| all fitted curves | ${curves.length} | ${fmt(median(g2))}x | ${fmt(median(g3))}x | ${fmt(mx(g2))}x | ${fmt(mx(g3))}x |`,
  );
  if (selected.length) {
    L.push(
      `| registry curves | ${selected.length} | ${fmt(median(s2))}x | ${fmt(median(s3))}x | ${fmt(mx(s2))}x | ${fmt(mx(s3))}x |`,
    );
  }
  L.push('', 'BLIS (136 configurations): median 1.34x -> 1.17x, worst 1.83x -> 1.51x (reference §6.3).', '');
  summary.push(
    `collective: ${curves.length} curves, ${selected.length} in the registry; geo error median ${fmt(median(g2))}x -> ${fmt(median(g3))}x, worst ${fmt(mx(g2))}x -> ${fmt(mx(g3))}x (2-param -> 3-param)`,
  );
}

/** One row per fitted curve. */
function curveTable(x: CollectiveReportInput, L: string[], _summary: string[]): void {
  const { curves, selected } = x;
  L.push('### Fitted curves', '');
  L.push(
    '| op | dtype | ranks | backend | lane | sizes | t0 µs | r_t B/µs (ci95) | r_peak B/µs | geo 2p | geo 3p | MAPE 3p % | holdout geo | registry |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  );
  for (const c of curves) {
    const h = c.holdout
      ? `${fmt(c.holdout.geo)}x (floor pred ${fmt(c.holdout.t0_pred_us)} vs ${fmt(c.holdout.t0_meas_us)})`
      : '–';
    L.push(
      `| ${c.op} | ${c.dtype} | ${c.ranks} | ${c.backend} | ${c.lane} | ${c.fit.n} | ${fmt(c.fit.t0_us)} | ${fmt(c.fit.r_t_bytes_per_us, 5)} (${fmt(c.r_t_ci95[0], 4)}–${fmt(c.r_t_ci95[1], 4)}) | ${fmt(c.fit.r_peak_bytes_per_us, 6)} | ${fmt(c.fit.geo2)} | ${fmt(c.fit.geo3)} | ${fmt(c.fit.mape3_pct, 3)} | ${h} | ${selected.includes(c) ? 'yes' : ''} |`,
    );
  }
  L.push('');
}

/** Leave-one-width-out holdout of the registry curves. */
function holdoutSection(x: CollectiveReportInput, L: string[], summary: string[]): void {
  const { selected } = x;
  const hs = selected.filter((c) => c.holdout);
  if (hs.length) {
    const widest = Math.max(...hs.map((c) => c.ranks));
    const atWidest = hs.filter((c) => c.ranks === widest);
    L.push('### Holdout along rank width (registry curves)', '');
    L.push(
      'Each width predicted from the others: floor line a + b·(n−1) fitted on the other widths, rates from the nearest other width (ties → wider).',
      '',
    );
    L.push(
      '| op | dtype | held-out ranks | floor pred/meas | holdout geo | train geo (own fit) |',
      '|---|---|---|---|---|---|',
    );
    for (const c of hs) {
      L.push(
        `| ${c.op} | ${c.dtype} | ${c.ranks} | ${fmt(c.holdout!.t0_pred_us / c.holdout!.t0_meas_us)} | ${fmt(c.holdout!.geo)}x | ${fmt(c.fit.geo3)}x |`,
      );
    }
    const ratios = atWidest.map((c) => c.holdout!.t0_pred_us / c.holdout!.t0_meas_us);
    L.push(
      '',
      `Widest width (${widest}) predicted from the narrower ones: median floor pred/meas ${fmt(median(ratios))}, median holdout geo ${fmt(median(atWidest.map((c) => c.holdout!.geo)))}x over ${atWidest.length} curves (BLIS 4->8: pred/meas median 0.987 all_reduce, 1.017 all_gather, 1.018 reduce_scatter, 1.128 alltoall).`,
      '',
    );
    summary.push(
      `collective: holdout (leave one width out) median geo ${fmt(median(hs.map((c) => c.holdout!.geo)))}x, train median ${fmt(median(hs.map((c) => c.fit.geo3)))}x`,
    );
  }
}

/** Floors must not fall as ranks grow. */
function floorSection(x: CollectiveReportInput, L: string[], _summary: string[]): void {
  const { selected, unselectedViolations, floorRepairs } = x;
  L.push('### Floors must not fall as ranks grow', '');
  const selViol = floorMonotonicity(selected);
  L.push(
    selViol.length
      ? `Registry curves VIOLATE it: ${selViol.join('; ')}.`
      : 'Registry curves: floors non-decreasing with ranks for every (op, dtype).',
  );
  for (const r of floorRepairs)
    L.push(`- ${r.status === 'repaired' ? 'repaired within noise' : '**refused** beyond noise'}: ${r.note}.`);
  L.push(
    unselectedViolations.length
      ? `Curves not used by the registry that violate it (reported, not hidden): ${unselectedViolations.join('; ')}.`
      : 'No violation among the other backends either.',
    '',
  );
}

/** fp16 all_reduce: custom (CUDA graph), custom (eager) and NCCL side by side. */
function backendSection(x: CollectiveReportInput, L: string[], _summary: string[]): void {
  const { chip, curves, selected, ctx } = x;
  const ar = curves.filter((c) => c.op === 'all_reduce' && c.dtype === 'fp16');
  if (ar.some((c) => c.backend !== 'nccl')) {
    L.push('### fp16 all_reduce: custom (CUDA graph), custom (eager), NCCL', '');
    L.push(
      '| ranks | floor graph µs | floor eager µs | floor NCCL µs | median graph/NCCL | median eager/NCCL | registry uses |',
      '|---|---|---|---|---|---|---|',
    );
    for (const n of [...new Set(ar.map((c) => c.ranks))].sort((a, b) => a - b)) {
      const g = ar.find((c) => c.ranks === n && c.backend === 'custom_graph');
      const e = ar.find((c) => c.ranks === n && c.backend === 'custom_eager');
      const nc = ar.find((c) => c.ranks === n && c.backend === 'nccl');
      const rg = g && nc ? matchedRatio(g, nc) : undefined;
      const re = e && nc ? matchedRatio(e, nc) : undefined;
      const used = selected.find((c) => c.op === 'all_reduce' && c.dtype === 'fp16' && c.ranks === n)?.backend ?? '–';
      L.push(
        `| ${n} | ${g ? fmt(g.fit.t0_us) : '–'} | ${e ? fmt(e.fit.t0_us) : '–'} | ${nc ? fmt(nc.fit.t0_us) : '–'} | ${rg ? `${fmt(rg.ratio)} (${rg.n} sizes)` : '–'} | ${re ? `${fmt(re.ratio)} (${re.n} sizes)` : '–'} | ${used} |`,
      );
    }
    L.push(
      '',
      'Rule: custom all-reduce under CUDA graph where measured, NCCL otherwise; eager custom all-reduce is never used (it is slower than NCCL at small sizes, a mispricing if accepted). ' +
        (isPcieOnly(ctx.chip)
          ? `${chip} has no NVLink (GPU link PCIe, ${ctx.chip.nvlink_gb_per_s_per_dir} GB/s/dir): vLLM disables custom all-reduce above 2 PCIe-only GPUs, so NCCL is used at > 2 ranks.`
          : ''),
      '',
    );
  }
}

/** Against BLIS's published values for this chip. */
function blisSection(x: CollectiveReportInput, L: string[], _summary: string[]): void {
  const { chip, curves, selected } = x;
  const blis = BLIS_COLLECTIVES[chip];
  if (blis) {
    L.push(`### Against BLIS's published ${chip} values (registry b4d8e2b8)`, '');
    L.push(
      'BLIS fp16 rates are shown ×2: its fitter most likely read element counts as bytes (reference §1.5 [CHECK]); int8 rates are 1 B/element and shown as published.',
      '',
    );
    L.push(
      '| op | dtype | ranks | t0 ours / BLIS µs | r_peak ours / BLIS(×2) | r_t ours / BLIS(×2) |',
      '|---|---|---|---|---|---|',
    );
    for (const c of selected) {
      const t = blis[c.op]?.[c.dtype]?.[c.ranks];
      if (!t) continue;
      const k = c.dtype === 'fp16' ? 2 : 1;
      L.push(
        `| ${c.op} | ${c.dtype} | ${c.ranks} | ${fmt(c.fit.t0_us)} / ${fmt(t[0])} | ${fmt(c.fit.r_peak_bytes_per_us, 6)} / ${fmt(t[1] * k, 6)} (${fmt(c.fit.r_peak_bytes_per_us / (t[1] * k))}) | ${fmt(c.fit.r_t_bytes_per_us, 5)} / ${fmt(t[2] * k, 5)} (${fmt(c.fit.r_t_bytes_per_us / (t[2] * k))}) |`,
      );
    }
    const old = BLIS_NCCL_ALLREDUCE_FP16_OLD[chip];
    if (old) {
      for (const [n, t] of Object.entries(old)) {
        const nc = curves.find(
          (c) => c.op === 'all_reduce' && c.dtype === 'fp16' && c.backend === 'nccl' && c.ranks === Number(n),
        );
        if (nc) {
          L.push(
            `| all_reduce (NCCL, BLIS @1dd3dc75) | fp16 | ${n} | ${fmt(nc.fit.t0_us)} / ${fmt(t[0])} | ${fmt(nc.fit.r_peak_bytes_per_us, 6)} / ${fmt(t[1] * 2, 6)} (${fmt(nc.fit.r_peak_bytes_per_us / (t[1] * 2))}) | ${fmt(nc.fit.r_t_bytes_per_us, 5)} / ${fmt(t[2] * 2, 5)} (${fmt(nc.fit.r_t_bytes_per_us / (t[2] * 2))}) |`,
          );
        }
      }
    }
    L.push('');
  }
}

/** The 16-rank width extrapolation (method: assumed). */
function widthSection(x: CollectiveReportInput, L: string[], summary: string[]): void {
  const { widthOutcomes } = x;
  if (widthOutcomes.length) {
    L.push(`### ${EXTRAPOLATED_RANKS}-rank entries: width extrapolation (method: assumed)`, '');
    L.push(
      `Through \`src/registry/extrapolate.ts\` (the same code as \`stepcal registry extrapolate widths\`): floor(n) = a + b·(n−1) least squares over the registry's measured widths of one lane, evaluated at ${EXTRAPOLATED_RANKS}; peak and transition rates copied from the widest measured width (a stated lower bound on transfer time). Check: the widest width predicted from the narrower ones. Refused (no entry written; a refusal is a correct answer) across lanes, with fewer than three widths, or below the widest measured floor.`,
      '',
    );
    L.push(
      `| op | dtype | measured widths (lane) | ${EXTRAPOLATED_RANKS}-rank floor µs | holdout: widest floor pred/meas | outcome |`,
      '|---|---|---|---|---|---|',
    );
    for (const o of widthOutcomes) {
      const r = o.result;
      const h = r.holdout
        ? `${r.holdout.held_out_ranks} from ${r.holdout.train_widths.join('/')}: ${fmt(r.holdout.predicted_us)} / ${fmt(r.holdout.measured_us)} = ${fmt(r.holdout.ratio, 3)}`
        : '–';
      L.push(
        `| ${o.op} | ${o.dtype} | ${r.measured_widths.join('/')} (${r.lane}) | ${r.status === 'extrapolated' ? fmt(r.floor_us!) : '–'} | ${h} | ${r.status === 'extrapolated' ? 'extrapolated' : `**refused**: ${r.reason}`} |`,
      );
    }
    const ratios = widthOutcomes.filter((o) => o.result.holdout).map((o) => o.result.holdout!.ratio);
    const refused = widthOutcomes.filter((o) => o.result.status === 'refused').length;
    L.push(
      '',
      `${widthOutcomes.length - refused} extrapolated, ${refused} refused; median holdout pred/meas ${ratios.length ? fmt(median(ratios), 3) : '–'} (BLIS 4→8: 0.987 all_reduce, 1.017 all_gather, 1.018 reduce_scatter, 1.128 alltoall).`,
      '',
    );
    summary.push(
      `collective: ${EXTRAPOLATED_RANKS}-rank width extrapolation: ${widthOutcomes.length - refused} extrapolated, ${refused} refused`,
    );
  }
}

/** Latency vs message size per op (registry curves), and predicted/measured of every registry curve. */
function buildFigures(chip: string, selected: CollectiveCurve[]): FitFigure[] {
  const figs: Array<{ name: string; svg: string }> = [];
  const ops = [...new Set(selected.map((c) => c.op))].sort();
  for (const op of ops) {
    const series: Series[] = [];
    const here = selected
      .filter((c) => c.op === op)
      .sort((a, b) => a.dtype.localeCompare(b.dtype) || a.ranks - b.ranks);
    here.forEach((c, i) => {
      const color = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'][i % 8]!;
      const lab = `${c.dtype} ${c.ranks}r ${c.backend === 'nccl' ? 'NCCL' : 'custom'}`;
      series.push({
        label: `${lab} measured`,
        style: 'scatter',
        color,
        points: c.points.map((p) => [p.message_bytes, p.latency_us]),
      });
      const lo = c.points[0]!.message_bytes;
      const hi = c.points[c.points.length - 1]!.message_bytes;
      const pts: Array<[number, number]> = [];
      for (let j = 0; j <= 40; j++) {
        const b = lo * (hi / lo) ** (j / 40);
        pts.push([
          b,
          collectiveTime(b, {
            t0_us: c.fit.t0_us,
            r_t_bytes_per_us: c.fit.r_t_bytes_per_us,
            r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us,
          }),
        ]);
      }
      series.push({ label: `${lab} fit`, style: 'line', color, points: pts });
    });
    figs.push({
      name: `collective_${op}.svg`,
      svg: chart(series, {
        title: `${chip} ${op}: latency vs message size (points measured, lines 3-parameter fit)`,
        x_label: 'message bytes',
        y_label: 'latency µs',
        x_log: true,
        y_log: true,
        width: 760,
        height: Math.max(420, 60 + series.length * 16),
      }),
    });
  }
  const resid = residualFigure(chip, selected);
  if (resid) figs.push(resid);
  return figs;
}

/** predicted/measured of every registry curve under both laws: 3-parameter dots and per-size medians. */
function residualFigure(chip: string, selected: readonly CollectiveCurve[]): FitFigure | undefined {
  const r3: Array<[number, number]> = [];
  const r2: Array<[number, number]> = [];
  for (const c of selected) {
    for (const p of c.points) {
      const t3 = collectiveTime(p.message_bytes, {
        t0_us: c.fit.t0_us,
        r_t_bytes_per_us: c.fit.r_t_bytes_per_us,
        r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us,
      });
      const t2 = collectiveTime(p.message_bytes, {
        t0_us: c.fit.t0_us,
        r_peak_bytes_per_us: c.fit.r_peak_bytes_per_us,
      });
      r3.push([p.message_bytes, t3 / p.latency_us]);
      r2.push([p.message_bytes, t2 / p.latency_us]);
    }
  }
  if (!r3.length) return undefined;
  // Per-size medians of both laws as lines, every 3-parameter residual as a dot.
  const medLine = (pts: Array<[number, number]>): Array<[number, number]> => {
    const by = groupBy(pts, ([b]) => b);
    return [...by.keys()].sort((x, y) => x - y).map((b) => [b, median(by.get(b)!.map(([, r]) => r))]);
  };
  return {
    name: 'collective_residuals.svg',
    svg: chart(
      [
        { label: '3-param, each curve', style: 'scatter', points: r3, color: '#d62728', radius: 1.5 },
        { label: '3-param, median', style: 'line', points: medLine(r3), color: '#d62728' },
        {
          label: '2-param max(t0, b/r_peak), median',
          style: 'line',
          points: medLine(r2),
          color: '#7f7f7f',
          dash: '4 3',
        },
      ],
      {
        title: `${chip} collectives: predicted / measured, every registry curve`,
        x_label: 'message bytes',
        y_label: 'predicted / measured',
        x_log: true,
        y_log: true,
        h_lines: [{ y: 1, label: 'exact' }],
      },
    ),
  };
}
