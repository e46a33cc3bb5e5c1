/**
 * Collective width extrapolation (reference §6.3, "Width extrapolation"): floor(n) = a + b·(n−1),
 * least squares over the chip's own measured widths of one (op, dtype) and one lane; evaluated at the
 * missing width; rates copied from the widest measured width (a lower bound on transfer time, since
 * rates fall with width). Checked by holding out the widest measured width (4→8 when 2/4/8 are
 * measured) and reporting predicted/measured. Refused when the prediction is below the widest
 * measured floor, when the measured widths come from more than one lane, or when fewer than three
 * measured widths leave no same-lane holdout. Pure; refusals are results, not exceptions.
 */
import { geometricError, groupBy, mapePct, median } from '../core/numeric/stats.ts';
import { collectiveName, parseCollectiveName, scopedToChip } from '../core/schemas/names.ts';
import type { CoefficientSet, FitError, NamedEntry, Source } from '../core/schemas/registry.ts';

/** One measured width of one (op, dtype) on one chip. */
export interface WidthPoint {
  ranks: number;
  floor_us: number;
  peak_rate_bytes_per_us?: number;
  transition_rate_bytes_per_us?: number;
  lane: string;
}

/** floor(n) = a_us + b_us_per_rank·(n − 1). */
export interface FloorLine {
  a_us: number;
  b_us_per_rank: number;
}

/**
 * Least-squares line through (n − 1, floor) points. @throws Error with fewer than two distinct widths.
 */
export function fitFloorLine(points: ReadonlyArray<{ ranks: number; floor_us: number }>): FloorLine {
  const xs = points.map((p) => p.ranks - 1);
  const ys = points.map((p) => p.floor_us);
  if (new Set(xs).size < 2) throw new Error('fitFloorLine needs at least two distinct widths');
  const xm = xs.reduce((s, x) => s + x, 0) / xs.length;
  const ym = ys.reduce((s, y) => s + y, 0) / ys.length;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < xs.length; i++) {
    sxy += (xs[i]! - xm) * (ys[i]! - ym);
    sxx += (xs[i]! - xm) ** 2;
  }
  const b = sxy / sxx;
  return { a_us: ym - b * xm, b_us_per_rank: b };
}

/** Evaluate a floor line at `ranks`. */
export function floorAt(line: FloorLine, ranks: number): number {
  return line.a_us + line.b_us_per_rank * (ranks - 1);
}

/** Outcome for one (chip, op, dtype, target width). */
export interface WidthExtrapolation {
  chip: string;
  op: string;
  dtype: string;
  target_ranks: number;
  status: 'extrapolated' | 'refused' | 'skipped';
  /** Why refused or skipped. */
  reason?: string;
  lane: string;
  measured_widths: number[];
  line?: FloorLine;
  floor_us?: number;
  peak_rate_bytes_per_us?: number;
  transition_rate_bytes_per_us?: number;
  rates_from_ranks?: number;
  /** Widest measured width held out, predicted from the narrower ones. */
  holdout?: {
    held_out_ranks: number;
    train_widths: number[];
    predicted_us: number;
    measured_us: number;
    ratio: number;
  };
  /** Entries to store (only when extrapolated). */
  entries: NamedEntry[];
}

/** Floors are stored to 0.01 µs (reference §1.5 precision). */
const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Measured width points per (op, dtype) for `chip`, from its collective entries. Only
 * `method: measured` entries count; previously extrapolated (assumed) ones never feed a fit.
 */
export function measuredWidths(sets: readonly CoefficientSet[], chip: string): Map<string, WidthPoint[]> {
  const byKey = new Map<string, Map<number, Partial<WidthPoint> & { ranks: number; lanes: Set<string> }>>();
  for (const s of sets) {
    for (const c of s.coefficients) {
      const cn = parseCollectiveName(c.name);
      if (!cn || !scopedToChip(c.entry.scope, chip) || c.entry.method !== 'measured') continue;
      const k = `${cn.op}|${cn.dtype}`;
      let m = byKey.get(k);
      if (!m) {
        m = new Map();
        byKey.set(k, m);
      }
      let p = m.get(cn.ranks);
      if (!p) {
        p = { ranks: cn.ranks, lanes: new Set() };
        m.set(cn.ranks, p);
      }
      p.lanes.add(c.entry.evidence?.lane ?? 'unknown');
      if (cn.param === 'floor') p.floor_us = c.entry.value;
      if (cn.param === 'peak_rate') p.peak_rate_bytes_per_us = c.entry.value;
      if (cn.param === 'transition_rate') p.transition_rate_bytes_per_us = c.entry.value;
    }
  }
  const out = new Map<string, WidthPoint[]>();
  for (const [k, m] of byKey) {
    const pts: WidthPoint[] = [];
    for (const p of [...m.values()].sort((a, b) => a.ranks - b.ranks)) {
      if (p.floor_us === undefined) continue;
      pts.push({
        ranks: p.ranks,
        floor_us: p.floor_us,
        ...(p.peak_rate_bytes_per_us !== undefined ? { peak_rate_bytes_per_us: p.peak_rate_bytes_per_us } : {}),
        ...(p.transition_rate_bytes_per_us !== undefined
          ? { transition_rate_bytes_per_us: p.transition_rate_bytes_per_us }
          : {}),
        lane: [...p.lanes].sort().join('+'),
      });
    }
    out.set(k, pts);
  }
  return out;
}

/** Why `points` cannot be extrapolated to `target_ranks` (module comment, "refusals"), or undefined. */
function widthRefusal(
  points: readonly WidthPoint[],
  lanes: readonly string[],
  target_ranks: number,
): string | undefined {
  const widths = points.map((p) => p.ranks);
  const widest = points[points.length - 1];
  if (!widest) return 'no measured widths';
  if (lanes.length > 1 || lanes.some((l) => l.includes('+')))
    return `measured widths come from more than one lane (${points.map((p) => `${p.ranks}: ${p.lane}`).join('; ')}): a fit across lanes is refused`;
  if (target_ranks < widest.ranks)
    return `target ${target_ranks} ranks lies inside the measured range ${widths.join('/')}: only widening beyond the widest measured width is supported`;
  if (points.length < 3)
    return `only ${points.length} measured width(s) (${widths.join('/')}): no same-lane holdout is possible (need 3)`;
  if (widest.peak_rate_bytes_per_us === undefined)
    return `the widest measured width (${widest.ranks}) has no peak rate to copy`;
  return undefined;
}

/** The assumed floor entry (floor line at `target_ranks`) and the rate entries copied from the widest width. */
function widthEntries(
  chip: string,
  op: string,
  dtype: string,
  points: readonly WidthPoint[],
  target_ranks: number,
  fit: { line: FloorLine; floor: number; predicted: number; ratio: number },
): NamedEntry[] {
  const widths = points.map((p) => p.ranks);
  const widest = points[points.length - 1]!;
  const train = points.slice(0, -1);
  const lane = points[0]!.lane;
  const scope = { hardware: [chip] };
  const holdout_error: FitError = {
    geo: geometricError([fit.predicted], [widest.floor_us]),
    mape_pct: mapePct([fit.predicted], [widest.floor_us]),
    n: 1,
  };
  const from = points.map((p) => `${chip}:${p.ranks}rank`);
  const note = `holdout: ${widest.ranks}-rank floor predicted from ${train.map((p) => p.ranks).join('/')} ranks = ${fit.predicted.toFixed(3)} µs vs measured ${widest.floor_us} µs (pred/meas ${fit.ratio.toFixed(3)})`;
  const src: Source[] = [
    {
      kind: 'model',
      cite: `stepcal registry extrapolate widths: ${chip} ${op} ${dtype} measured widths ${widths.join('/')} (lane ${lane})`,
      role: 'primary',
    },
  ];
  const entries: NamedEntry[] = [];
  entries.push({
    name: collectiveName({ param: 'floor', op, dtype, ranks: target_ranks, chip }),
    entry: {
      value: fit.floor,
      units: 'us_per_transfer',
      method: 'assumed',
      fitted: false,
      scope,
      sources: src,
      rationale: `Width extrapolation: floor(n) = ${fit.line.a_us.toFixed(4)} + ${fit.line.b_us_per_rank.toFixed(4)}·(n−1) µs, least squares on ${chip}'s own measured ${widths.join('/')}-rank floors (one lane, ${lane}), evaluated at ${target_ranks} ranks. Not measured. ${note}.`,
      evidence: {
        family: 'collective',
        lane,
        notes: [note],
        extrapolation: { predictor: 'floor_linear_in_ranks', from, holdout_error },
      },
    },
  });
  const rates: Array<['peak_rate' | 'transition_rate', number | undefined]> = [
    ['peak_rate', widest.peak_rate_bytes_per_us],
    ['transition_rate', widest.transition_rate_bytes_per_us],
  ];
  for (const [param, value] of rates) {
    if (value === undefined) continue;
    entries.push({
      name: collectiveName({ param, op, dtype, ranks: target_ranks, chip }),
      entry: {
        value,
        units: 'bytes_per_us',
        method: 'assumed',
        fitted: false,
        scope,
        sources: src,
        rationale: `Width extrapolation: ${param.replace('_', ' ')} copied from ${chip}'s widest measured width (${widest.ranks} ranks, lane ${lane}). Rates fall with width, so this is a stated lower bound on transfer time at ${target_ranks} ranks. Not measured.`,
        evidence: {
          family: 'collective',
          lane,
          extrapolation: { predictor: `copied_from_${widest.ranks}rank`, from: [`${chip}:${widest.ranks}rank`] },
        },
      },
    });
  }
  return entries;
}

/**
 * Extrapolate one (op, dtype) of one chip to `target_ranks` from its measured width points.
 * Pure; see the module comment for the rules and refusals.
 */
export function extrapolateWidth(
  chip: string,
  op: string,
  dtype: string,
  points: readonly WidthPoint[],
  target_ranks: number,
): WidthExtrapolation {
  const widths = points.map((p) => p.ranks);
  const lanes = [...new Set(points.map((p) => p.lane))];
  const base = {
    chip,
    op,
    dtype,
    target_ranks,
    lane: lanes.join(','),
    measured_widths: widths,
    entries: [] as NamedEntry[],
  };
  if (widths.includes(target_ranks)) return { ...base, status: 'skipped', reason: `${target_ranks} ranks is measured` };
  const refused = widthRefusal(points, lanes, target_ranks);
  if (refused) return { ...base, status: 'refused', reason: refused };
  const widest = points[points.length - 1]!;
  const train = points.slice(0, -1);
  const predicted = floorAt(fitFloorLine(train), widest.ranks);
  const holdout = {
    held_out_ranks: widest.ranks,
    train_widths: train.map((p) => p.ranks),
    predicted_us: predicted,
    measured_us: widest.floor_us,
    ratio: predicted / widest.floor_us,
  };
  const line = fitFloorLine(points);
  const floor = round2(floorAt(line, target_ranks));
  if (floor < widest.floor_us)
    return {
      ...base,
      status: 'refused',
      line,
      holdout,
      floor_us: floor,
      reason: `predicted floor ${floor} µs at ${target_ranks} ranks is below the widest measured floor ${widest.floor_us} µs (${widest.ranks} ranks)`,
    };
  return {
    ...base,
    status: 'extrapolated',
    line,
    floor_us: floor,
    peak_rate_bytes_per_us: widest.peak_rate_bytes_per_us,
    ...(widest.transition_rate_bytes_per_us !== undefined
      ? { transition_rate_bytes_per_us: widest.transition_rate_bytes_per_us }
      : {}),
    rates_from_ranks: widest.ranks,
    holdout,
    entries: widthEntries(chip, op, dtype, points, target_ranks, { line, floor, predicted, ratio: holdout.ratio }),
  };
}

/** Every (op, dtype) of `chip` extrapolated to each target width. */
export function extrapolateCollectiveWidths(
  sets: readonly CoefficientSet[],
  chip: string,
  targets: readonly number[] = [16],
): WidthExtrapolation[] {
  const out: WidthExtrapolation[] = [];
  const groups = measuredWidths(sets, chip);
  for (const k of [...groups.keys()].sort()) {
    const [op, dtype] = k.split('|') as [string, string];
    for (const t of targets) out.push(extrapolateWidth(chip, op, dtype, groups.get(k)!, t));
  }
  return out;
}

/** Median pred/meas of the width holdouts per op (BLIS reports 0.987/1.017/1.018/1.128, reference §6.3). */
export function widthHoldoutMedians(
  results: readonly WidthExtrapolation[],
): Record<string, { median_ratio: number; n: number }> {
  const seen = new Set<string>();
  const first = results.filter((r) => {
    const k = `${r.chip}|${r.op}|${r.dtype}`;
    if (!r.holdout || seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const byOp = groupBy(first, (r) => r.op);
  const out: Record<string, { median_ratio: number; n: number }> = {};
  for (const [op, l] of [...byOp].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)))
    out[op] = { median_ratio: median(l.map((r) => r.holdout!.ratio)), n: l.length };
  return out;
}
