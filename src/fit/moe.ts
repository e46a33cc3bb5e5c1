/**
 * MoE routing-imbalance fitter (issue 3 "MoE routing imbalance"; reference §1.3 names, §6.2 lane,
 * §6.3 procedure).
 *
 * Rows with identical shape — (lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp,
 * ep) — are paired across routing distributions; repeats are reduced with the median. The ratio is
 * latency(power_law_1.01) / latency(balanced). The registry gets its median (type-7) and p90
 * (nearest rank) as `moe_routing_imbalance_median` / `moe_routing_imbalance_p90` (dimensionless, set
 * cost-model-primitives); ci95 from a seeded bootstrap over pairs. alpha 1.2 is reported beside it,
 * never written. Without balanced rows (a100's vLLM table) the fit is refused: a refusal is the
 * correct answer, and BLIS's kernel then defaults the multiplier to 1.0 (reference §4.6).
 *
 * The multiplier is used as latency(skewed) ≈ median · latency(balanced); its train error is that
 * prediction's error on every pair, its holdout error the same with the median computed without the
 * pair's model geometry (hidden, inter, topk, experts): leave-one-geometry-out.
 */
import type { MoeRow } from '../measurements/schema.ts';
import type { CoefficientEntry, Evidence } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmt, provenance } from './collective-provenance.ts';
import { thin } from './common.ts';
import { geometricError, mapePct, median, percentileNearestRank, percentileType7, roundSig, seededRandom } from '../core/numeric/stats.ts';
import type { FamilyFit, FitContext, FittedCoefficient } from './types.ts';

/** Primary skewed distribution (BLIS's choice). */
export const PRIMARY_DISTRIBUTION = 'power_law_1.01';
/** Reported beside it. */
export const SECONDARY_DISTRIBUTION = 'power_law_1.2';
/** Tokens buckets for the report: [lo, hi] inclusive. */
export const TOKEN_BUCKETS: ReadonlyArray<[number, number]> = [
  [1, 16],
  [17, 128],
  [129, 1024],
  [1025, 8192],
  [8193, Number.POSITIVE_INFINITY],
];

/** One matched pair of shapes. */
export interface MoePair {
  lane: string;
  kernel_source: string;
  dtype: string;
  tokens: number;
  hidden: number;
  inter: number;
  topk: number;
  experts: number;
  tp: number;
  ep: number;
  balanced_us: number;
  skewed_us: number;
  /** skewed / balanced. */
  ratio: number;
}

/** Geometry key used by the holdout. */
export const geometryKey = (p: Pick<MoePair, 'hidden' | 'inter' | 'topk' | 'experts'>): string =>
  `h${p.hidden}/i${p.inter}/top${p.topk}/e${p.experts}`;

/**
 * Pair rows of `distribution` with balanced rows of the identical shape and kernel.
 * Repeats on either side are reduced with the median. Pairs come sorted by their shape key.
 */
export function pairMoe(
  rows: ReadonlyArray<MoeRow>,
  distribution: string,
): { pairs: MoePair[]; unpaired_skewed: number; unpaired_balanced: number; balanced_rows: number; skewed_rows: number } {
  const shapes = new Map<string, { row: MoeRow; bal: number[]; skw: number[] }>();
  let balanced_rows = 0;
  let skewed_rows = 0;
  for (const r of rows) {
    const isBal = r.distribution === 'balanced';
    const isSkw = r.distribution === distribution;
    if (!isBal && !isSkw) continue;
    if (isBal) balanced_rows++;
    else skewed_rows++;
    const k = [r.lane, r.kernel_source, r.dtype, r.tokens, r.hidden, r.inter, r.topk, r.experts, r.tp, r.ep].join('|');
    let s = shapes.get(k);
    if (!s) shapes.set(k, (s = { row: r, bal: [], skw: [] }));
    (isBal ? s.bal : s.skw).push(r.latency_us);
  }
  const pairs: MoePair[] = [];
  let unpaired_skewed = 0;
  let unpaired_balanced = 0;
  for (const k of [...shapes.keys()].sort()) {
    const s = shapes.get(k)!;
    if (!s.bal.length) {
      unpaired_skewed++;
      continue;
    }
    if (!s.skw.length) {
      unpaired_balanced++;
      continue;
    }
    const b = median(s.bal);
    const w = median(s.skw);
    const r = s.row;
    pairs.push({
      lane: r.lane,
      kernel_source: r.kernel_source,
      dtype: r.dtype,
      tokens: r.tokens,
      hidden: r.hidden,
      inter: r.inter,
      topk: r.topk,
      experts: r.experts,
      tp: r.tp,
      ep: r.ep,
      balanced_us: b,
      skewed_us: w,
      ratio: w / b,
    });
  }
  return { pairs, unpaired_skewed, unpaired_balanced, balanced_rows, skewed_rows };
}

/** Median (type-7) and p90 (nearest rank) of the ratios. @throws Error on no pairs. */
export function imbalanceStats(ratios: readonly number[]): { median: number; p90: number; p10: number } {
  return { median: median(ratios), p90: percentileNearestRank(ratios, 0.9), p10: percentileNearestRank(ratios, 0.1) };
}

/** Seeded bootstrap over pairs of the median and the p90; intervals widened to contain the estimates if needed. */
export function bootstrapImbalance(
  ratios: readonly number[],
  opts: { resamples: number; seed: number },
): { median_ci95: [number, number]; p90_ci95: [number, number]; widened: string[] } {
  const rand = seededRandom(opts.seed);
  const n = ratios.length;
  const meds: number[] = [];
  const p90s: number[] = [];
  const sample = new Float64Array(n);
  const h = (n - 1) * 0.5;
  for (let r = 0; r < opts.resamples; r++) {
    for (let i = 0; i < n; i++) sample[i] = ratios[Math.floor(rand() * n)]!;
    sample.sort(); // numeric for typed arrays; one sort serves both statistics
    const lo = Math.floor(h);
    meds.push(sample[lo]! + (h - lo) * (sample[Math.ceil(h)]! - sample[lo]!)); // type-7 median
    p90s.push(sample[Math.max(0, Math.ceil(0.9 * n) - 1)]!); // nearest rank
  }
  const est = imbalanceStats(ratios);
  const widened: string[] = [];
  const ci = (vals: number[], v: number, name: string): [number, number] => {
    let lo = percentileType7(vals, 0.025);
    let hi = percentileType7(vals, 0.975);
    if (lo > v || hi < v) widened.push(name);
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
    return [lo, hi];
  };
  return { median_ci95: ci(meds, est.median, 'median'), p90_ci95: ci(p90s, est.p90, 'p90'), widened };
}

/** Errors of latency(skewed) ≈ m · latency(balanced). */
function predError(pairs: readonly MoePair[], m: number): { geo: number; mape_pct: number; n: number } {
  const pred = pairs.map((p) => m * p.balanced_us);
  const meas = pairs.map((p) => p.skewed_us);
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: pairs.length };
}

/** Leave-one-geometry-out: each geometry's pairs predicted with the median of the other geometries' ratios. */
export function leaveOneGeometryOut(pairs: readonly MoePair[]): { geo: number; mape_pct: number; n: number; geometries: number } | undefined {
  const geos = [...new Set(pairs.map(geometryKey))].sort();
  if (geos.length < 2) return undefined;
  const pred: number[] = [];
  const meas: number[] = [];
  for (const g of geos) {
    const held = pairs.filter((p) => geometryKey(p) === g);
    const m = median(pairs.filter((p) => geometryKey(p) !== g).map((p) => p.ratio));
    for (const p of held) pred.push(m * p.balanced_us), meas.push(p.skewed_us);
  }
  return { geo: geometricError(pred, meas), mape_pct: mapePct(pred, meas), n: pred.length, geometries: geos.length };
}

/** Fit the routing-imbalance multiplier (see module doc). Never throws on data problems. */
export function fitMoe(rows: MoeRow[], ctx: FitContext): FamilyFit {
  const chip = ctx.chip.name;
  const warnings: string[] = [];
  const L: string[] = [`## MoE routing imbalance (${chip})`, ''];
  const prim = pairMoe(rows, PRIMARY_DISTRIBUTION);
  const sec = pairMoe(rows, SECONDARY_DISTRIBUTION);
  const lanes = [...new Set(rows.map((r) => r.lane))].sort();

  if (prim.pairs.length === 0) {
    const why =
      prim.balanced_rows === 0
        ? `no balanced-routing rows in ${rows.length} MoE rows (lanes ${lanes.join(', ') || 'none'}), so latency(${PRIMARY_DISTRIBUTION})/latency(balanced) cannot be formed`
        : `no ${PRIMARY_DISTRIBUTION} row shares its shape and kernel with a balanced row`;
    const msg = `moe: refused on ${chip}: ${why}. No moe_routing_imbalance_* entry is written; BLIS's kernel then uses 1.0. Fit it from a lane that measured both (reference §6.2 uses sglang for a100).`;
    warnings.push(msg);
    L.push(`**Refused.** ${why}. No entry is written (the kernel's default multiplier is 1.0).`, '');
    return { family: 'moe', coefficients: [], summary: [msg], report_md: L.join('\n'), figures: [], refusals: [], warnings };
  }

  const ratios = prim.pairs.map((p) => p.ratio);
  const est = imbalanceStats(ratios);
  const bs = bootstrapImbalance(ratios, ctx.bootstrap);
  const train = predError(prim.pairs, est.median);
  const hold = leaveOneGeometryOut(prim.pairs);
  const filter = `distribution ∈ {balanced, ${PRIMARY_DISTRIBUTION}}, paired on identical (lane, kernel_source, dtype, tokens, hidden, inter, topk, experts, tp, ep); repeats reduced by median`;
  const pairLanes = [...new Set(prim.pairs.map((p) => p.lane))].sort();
  const prov = provenance(ctx, pairLanes, filter, prim.balanced_rows + prim.skewed_rows);
  const notes = [
    `ratio = latency(${PRIMARY_DISTRIBUTION}) / latency(balanced) over ${prim.pairs.length} pairs (${prim.unpaired_skewed} skewed and ${prim.unpaired_balanced} balanced shapes unpaired)`,
    `median type-7, p90 nearest rank; ${SECONDARY_DISTRIBUTION} (reported, not written): median ${fmt(sec.pairs.length ? median(sec.pairs.map((p) => p.ratio)) : NaN)}, p90 ${fmt(sec.pairs.length ? percentileNearestRank(sec.pairs.map((p) => p.ratio), 0.9) : NaN)}`,
    ...bs.widened.map((w) => `bootstrap percentile interval of the ${w} missed the estimate and was widened to contain it`),
  ];
  const ev = (): Evidence => ({
    family: 'moe',
    lane: pairLanes.join('+'),
    inputs: prov.inputs,
    ci_method: 'bootstrap',
    bootstrap: { resamples: ctx.bootstrap.resamples, seed: ctx.bootstrap.seed },
    train_error: { geo: roundSig(train.geo, 4), mape_pct: roundSig(train.mape_pct, 4), n: train.n },
    ...(hold
      ? {
          holdout_error: {
            geo: roundSig(hold.geo, 4),
            mape_pct: roundSig(hold.mape_pct, 4),
            n: hold.n,
            split: `leave-one-geometry-out over ${hold.geometries} (hidden, inter, topk, experts) geometries`,
          },
        }
      : {}),
    notes,
  });
  const entry = (value: number, ci: [number, number]): CoefficientEntry => ({
    value: roundSig(value, 4),
    units: 'dimensionless',
    method: 'measured',
    fitted: false,
    scope: { hardware: [chip] },
    sources: prov.sources,
    ci95: [roundSig(ci[0], 4), roundSig(ci[1], 4)],
    evidence: ev(),
  });
  const coefficients: FittedCoefficient[] = [
    { set: SET_NAMES.primitives, name: 'moe_routing_imbalance_median', entry: entry(est.median, bs.median_ci95) },
    { set: SET_NAMES.primitives, name: 'moe_routing_imbalance_p90', entry: entry(est.p90, bs.p90_ci95) },
  ];

  // Report.
  L.push(
    `Pairs: rows of identical shape and kernel under \`${PRIMARY_DISTRIBUTION}\` and \`balanced\` routing; ratio = skewed/balanced latency. ` +
      `Median (type-7) and p90 (nearest rank); ci95 from a seeded bootstrap over pairs (${ctx.bootstrap.resamples} resamples, seed ${ctx.bootstrap.seed}). ` +
      `Lanes: ${pairLanes.join(', ')}. Written as \`fitted: false\`: a measured statistic, not a fitted law.`,
    '',
  );
  L.push('| distribution | pairs | median (ci95) | p10 | p90 (ci95) |', '|---|---|---|---|---|');
  L.push(
    `| ${PRIMARY_DISTRIBUTION} (registry) | ${prim.pairs.length} | ${fmt(est.median)} (${fmt(bs.median_ci95[0])}–${fmt(bs.median_ci95[1])}) | ${fmt(est.p10)} | ${fmt(est.p90)} (${fmt(bs.p90_ci95[0])}–${fmt(bs.p90_ci95[1])}) |`,
  );
  if (sec.pairs.length) {
    const s = imbalanceStats(sec.pairs.map((p) => p.ratio));
    L.push(`| ${SECONDARY_DISTRIBUTION} (reported only) | ${sec.pairs.length} | ${fmt(s.median)} | ${fmt(s.p10)} | ${fmt(s.p90)} |`);
  }
  L.push('');
  L.push('### By tokens per rank', '');
  L.push(`| tokens | pairs | median ${PRIMARY_DISTRIBUTION} | p90 ${PRIMARY_DISTRIBUTION} | median ${SECONDARY_DISTRIBUTION} | p90 ${SECONDARY_DISTRIBUTION} |`, '|---|---|---|---|---|---|');
  for (const [lo, hi] of TOKEN_BUCKETS) {
    const a = prim.pairs.filter((p) => p.tokens >= lo && p.tokens <= hi).map((p) => p.ratio);
    if (!a.length) continue;
    const b = sec.pairs.filter((p) => p.tokens >= lo && p.tokens <= hi).map((p) => p.ratio);
    const sa = imbalanceStats(a);
    const sb = b.length ? imbalanceStats(b) : undefined;
    L.push(
      `| ${lo}–${Number.isFinite(hi) ? hi : '∞'} | ${a.length} | ${fmt(sa.median)} | ${fmt(sa.p90)} | ${sb ? fmt(sb.median) : '–'} | ${sb ? fmt(sb.p90) : '–'} |`,
    );
  }
  L.push('', '### By dtype', '', '| dtype | pairs | median | p90 |', '|---|---|---|---|');
  for (const d of [...new Set(prim.pairs.map((p) => p.dtype))].sort()) {
    const a = prim.pairs.filter((p) => p.dtype === d).map((p) => p.ratio);
    const s = imbalanceStats(a);
    L.push(`| ${d} | ${a.length} | ${fmt(s.median)} | ${fmt(s.p90)} |`);
  }
  L.push(
    '',
    `Errors of latency(skewed) ≈ median · latency(balanced): train geo ${fmt(train.geo)}x (MAPE ${fmt(train.mape_pct, 3)}%)` +
      (hold ? `; leave-one-geometry-out geo ${fmt(hold.geo)}x (MAPE ${fmt(hold.mape_pct, 3)}%) over ${hold.geometries} geometries.` : '; single geometry, no holdout.'),
    '',
    `![ratios](moe_imbalance.svg) ![residuals](moe_imbalance_residuals.svg)`,
    '',
    `Residuals (moe_imbalance_residuals.svg): per pair, ln(median · latency(balanced) / latency(skewed)) = ln(median / ratio), the error of the stored multiplier's use; the p90 line sits at ln(median/p90) = ${fmt(Math.log(est.median / est.p90))}, with 10% of pairs below it by construction.`,
    '',
    'BLIS (vLLM 0.25.0 lane, 18,144 pairs): H100 median 0.998, p90 1.387; H200 median 0.999, p90 1.394. Older TRT-LLM lane: H100 1.044 (p10–p90 0.839–1.714), H200 1.056 (0.85–1.7).',
    '',
  );
  const summary = [
    `moe: ${prim.pairs.length} pairs (${PRIMARY_DISTRIBUTION}/balanced): median ${fmt(est.median)} [${fmt(bs.median_ci95[0])}, ${fmt(bs.median_ci95[1])}], p90 ${fmt(est.p90)}; holdout geo ${hold ? fmt(hold.geo) + 'x' : 'n/a'}`,
  ];
  return {
    family: 'moe',
    coefficients,
    summary,
    report_md: L.join('\n'),
    figures: [
      { name: 'moe_imbalance.svg', svg: figure(chip, prim.pairs, sec.pairs, est) },
      { name: 'moe_imbalance_residuals.svg', svg: residualFigure(chip, prim.pairs, est) },
    ],
    refusals: [],
    warnings,
  };
}

/** Pairs drawn in the residual figure (deterministic thinning in (tokens, ratio) order). */
export const MOE_RESIDUAL_POINTS = 1000;

/**
 * Residual of one pair under the stored multiplier: ln(median · balanced / skewed) = ln(median / ratio)
 * (the same prediction the train error scores). Positive = the median over-predicts the skewed latency.
 */
export function imbalanceResidual(p: Pick<MoePair, 'ratio'>, medianRatio: number): number {
  return Math.log(medianRatio / p.ratio);
}

function residualFigure(chip: string, prim: readonly MoePair[], est: { median: number; p90: number }): string {
  const shown = thin([...prim].sort((a, b) => a.tokens - b.tokens || a.ratio - b.ratio), MOE_RESIDUAL_POINTS);
  return chart(
    [{ label: `${PRIMARY_DISTRIBUTION} pairs`, points: shown.map((p) => [p.tokens, imbalanceResidual(p, est.median)]), style: 'scatter', color: '#1f77b4', radius: 1.5 }],
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

function figure(chip: string, prim: MoePair[], sec: MoePair[], est: { median: number; p90: number }): string {
  const series: Series[] = [];
  const add = (pairs: MoePair[], name: string, colors: [string, string]) => {
    const byTok = new Map<number, number[]>();
    for (const p of pairs) {
      let l = byTok.get(p.tokens);
      if (!l) byTok.set(p.tokens, (l = []));
      l.push(p.ratio);
    }
    const toks = [...byTok.keys()].sort((a, b) => a - b);
    series.push({ label: `${name} median`, style: 'line', color: colors[0], points: toks.map((t) => [t, median(byTok.get(t)!)]) });
    series.push({ label: `${name} p90`, style: 'line', color: colors[1], dash: '4 3', points: toks.map((t) => [t, percentileNearestRank(byTok.get(t)!, 0.9)]) });
  };
  add(prim, PRIMARY_DISTRIBUTION, ['#1f77b4', '#1f77b4']);
  if (sec.length) add(sec, SECONDARY_DISTRIBUTION, ['#d62728', '#d62728']);
  return chart(series, {
    title: `${chip} MoE: latency(skewed)/latency(balanced) per token count`,
    x_label: 'tokens per rank',
    y_label: 'ratio',
    x_log: true,
    h_lines: [
      { y: est.median, label: `median ${fmt(est.median)}` },
      { y: est.p90, label: `p90 ${fmt(est.p90)}` },
    ],
  });
}
