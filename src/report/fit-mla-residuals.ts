/**
 * The MLA laws' residuals (issue 13 item 2 asks holdout geo ≤ 1.15× for decode and prefill): residual plots,
 * ln(predicted ÷ measured) against the holdout axes (context, batch), and, for a law that misses the goal, the
 * reason computed from its rows (src/fit/mla.ts `MlaLawFit.points`): whether the fit rows miss too, what the
 * floor-bound rows measure against the fitted floor, how much of the error sits in rows off by more than 1.5×,
 * and the context, batch and heads values where the error is largest. Pure: no I/O.
 */
import { groupBy, mean, type7Sorted } from '../core/numeric/stats.ts';
import { chart, PALETTE, type Series } from '../core/render/svg.ts';
import { fmt } from '../fit/common.ts';
import type { MlaLawFit } from '../fit/mla.ts';
import { thin } from './fit-common.ts';

type Point = MlaLawFit['points'][number];
type Axis = 'context' | 'batch' | 'heads';

/** A row is floor-bound when the fitted floor is at least this share of its prediction. */
const FLOOR_BOUND_SHARE = 0.9;
/** A row is an outlier when predicted and measured differ by more than this factor. */
const OUTLIER_FACTOR = 1.5;
/** A bin (one distinct axis value) is named among the worst only with at least this many rows. */
const MIN_BIN_ROWS = 10;
/** Worst bins named per axis. */
const WORST_PER_AXIS = 2;
/** Points drawn per residual figure (deterministic thinning). */
const RESIDUAL_FIGURE_POINTS = 1500;

const ln = (p: Point) => Math.log(p.predicted_us / p.measured_us);
/** Geo error (exp of mean |ln ratio|) and bias (exp of mean ln ratio; < 1: the law is too fast). */
const stats = (ps: readonly Point[]) => ({
  n: ps.length,
  geo: Math.exp(mean(ps.map((p) => Math.abs(ln(p))))),
  bias: Math.exp(mean(ps.map(ln))),
});

/** Every distinct value of one axis with its rows' stats, in ascending value order. */
function bins(points: readonly Point[], axis: Axis) {
  return [...groupBy(points, (p) => p[axis]).entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([value, ps]) => ({ value, ...stats(ps) }));
}

/** What the floor-bound rows measure against the fitted floor (µs, `beta[0]`), or '' with fewer than 10. */
function floorClause(law: MlaLawFit): string {
  const floor_us = law.beta[0]!;
  const bound = law.points.filter((p) => floor_us >= FLOOR_BOUND_SHARE * p.predicted_us);
  if (bound.length < MIN_BIN_ROWS) return '';
  const m = bound.map((p) => p.measured_us).sort((a, b) => a - b);
  return (
    ` ${bound.length} rows are floor-bound (the fitted floor ${fmt(floor_us)} µs is ≥ ${FLOOR_BOUND_SHARE * 100} % of ` +
    `their prediction): they measure median ${fmt(type7Sorted(m, 0.5))} µs (p10 ${fmt(type7Sorted(m, 0.1))}, p90 ` +
    `${fmt(type7Sorted(m, 0.9))}, max ${fmt(m[m.length - 1]!)}), geo ${fmt(stats(bound).geo)}.`
  );
}

/** The share of Σ|ln error| carried by rows off by more than 1.5×, and the geo without them. */
function outlierClause(points: readonly Point[]): string {
  const off = points.filter((p) => Math.abs(ln(p)) > Math.log(OUTLIER_FACTOR));
  if (!off.length) return ` No row is off by more than ${OUTLIER_FACTOR}×.`;
  const total = points.reduce((s, p) => s + Math.abs(ln(p)), 0);
  const share = off.reduce((s, p) => s + Math.abs(ln(p)), 0) / total;
  const rest = points.filter((p) => Math.abs(ln(p)) <= Math.log(OUTLIER_FACTOR));
  return (
    ` ${off.length} rows (${fmt((100 * off.length) / points.length, 2)} %) are off by more than ${OUTLIER_FACTOR}× and ` +
    `carry ${fmt(100 * share, 2)} % of the summed |ln error|; without them geo ${rest.length ? fmt(stats(rest).geo) : 'n/a'}.`
  );
}

/** The worst values along one axis (geo above the goal, at least 10 rows), as `value (geo g, bias b)`. */
function worstClause(points: readonly Point[], axis: Axis, name: string, goal: number): string | undefined {
  const worst = bins(points, axis)
    .filter((b) => b.n >= MIN_BIN_ROWS && b.geo > goal)
    .sort((a, b) => b.geo - a.geo)
    .slice(0, WORST_PER_AXIS);
  if (!worst.length) return undefined;
  return `${name} ${worst.map((b) => `${b.value} (geo ${fmt(b.geo)}, bias ${fmt(b.bias)}, ${b.n} rows)`).join(', ')}`;
}

/**
 * Why a law misses the holdout goal, computed from its rows (module comment). Every figure comes from
 * `law` (nothing per chip); bias is the geometric mean of predicted ÷ measured, below 1 the law is too fast.
 */
export function mlaMissReason(law: MlaLawFit, goal: number): string {
  const h = law.holdout_geo;
  const head =
    `Holdout geo ${fmt(h.all)} (along ${law.context_name} ${fmt(h.context)}, along batch ${fmt(h.batch)}) is above ` +
    `the ${goal}× goal; ` +
    (law.train_geo > goal
      ? `the fit rows miss it too (train geo ${fmt(law.train_geo)}), so the law's form, not the extrapolation, falls short.`
      : `the fit rows meet it (train geo ${fmt(law.train_geo)}), so the extrapolation falls short.`);
  const axes = [
    worstClause(law.points, 'context', law.context_name, goal),
    worstClause(law.points, 'batch', 'batch', goal),
    worstClause(law.points, 'heads', 'heads', goal),
  ].filter((x): x is string => x !== undefined);
  const worst = axes.length
    ? ` Largest error over all ${law.points.length} rows (bias < 1: the law is too fast) at ${axes.join('; ')}.`
    : '';
  return head + floorClause(law) + outlierClause(law.points) + worst;
}

/** Figure file name of a law's residual plot along one axis. */
export function mlaResidualFigureName(slug: string, axis: 'context' | 'batch'): string {
  return `mla_${slug}_residuals_${axis}.svg`;
}

/**
 * Residual plot of one law along one holdout axis: ln(predicted ÷ measured) per row (fit rows and held-out
 * rows), the per-value bias as a line, and the goal's band ±ln 1.15. Decode's context axis is drawn at
 * past_tokens + 1 (the attended tokens; past 0 cannot sit on a log axis).
 */
export function mlaResidualFigure(chip: string, law: MlaLawFit, axis: 'context' | 'batch', goal: number): string {
  const shift = axis === 'context' && law.context_name === 'past_tokens' ? 1 : 0;
  const x = (v: number) => v + shift;
  const pts = thin(law.points, RESIDUAL_FIGURE_POINTS);
  const scatter = (label: string, color: string, hold: boolean): Series => ({
    label,
    style: 'scatter',
    color,
    radius: 1.5,
    points: pts.filter((p) => p.holdout === hold).map((p) => [x(p[axis]), ln(p)] as [number, number]),
  });
  const line: Series = {
    label: 'mean per value',
    style: 'line',
    color: PALETTE[2]!,
    points: bins(law.points, axis).map((b) => [x(b.value), Math.log(b.bias)] as [number, number]),
  };
  const name = axis === 'batch' ? 'batch (requests)' : `${law.context_name}${shift ? ' + 1' : ''} (tokens)`;
  return chart([scatter('fit rows', PALETTE[0]!, false), scatter('held out', PALETTE[1]!, true), line], {
    title: `${chip} MLA ${law.what}: residuals along ${axis} (holdout geo ${fmt(law.holdout_geo.all)})`,
    x_label: name,
    y_label: 'ln(predicted ÷ measured)',
    x_log: true,
    h_lines: [
      { y: Math.log(goal), label: `ln ${goal}` },
      { y: 0, label: 'exact' },
      { y: -Math.log(goal), label: `−ln ${goal}` },
    ],
  });
}
