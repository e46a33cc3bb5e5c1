/**
 * Extrapolation: values a chip's own measurements cannot give, always flagged (`method: assumed`,
 * `evidence.extrapolation`) and always checked by a holdout. Pure functions over parsed registries
 * and chip facts; refusals are results, not exceptions.
 *
 * 1. Collective width (reference §6.3, "Width extrapolation"): floor(n) = a + b·(n−1), least
 *    squares over the chip's own measured widths of one (op, dtype) and one lane; evaluated at the
 *    missing width; rates copied from the widest measured width (a lower bound on transfer time,
 *    since rates fall with width). Checked by holding out the widest measured width (4→8 when
 *    2/4/8 are measured) and reporting predicted/measured. Refused when the prediction is below
 *    the widest measured floor, when the measured widths come from more than one lane, or when
 *    fewer than three measured widths leave no same-lane holdout.
 * 2. Missing family (reference §6.3, extrapolate_by_generation): each missing coefficient from the
 *    same-generation median, or from a within-chip ratio (sibling value ÷ an anchor of the same
 *    chip, times the target's anchor), whichever has the lower leave-one-chip-out geometric error
 *    over the siblings. Refused when fewer than two same-generation siblings have the family (no
 *    sibling, or no holdout possible).
 */
import type { Chip } from '../catalog/chip.ts';
import { geometricError, mapePct, median } from '../fit/stats.ts';
import { chipFreeName, collectiveName, familyOf, nameForChip, parseCollectiveName, scopedToChip, scopeKey } from './names.ts';
import type { CoefficientEntry, CoefficientSet, FitError, NamedEntry, Source } from './types.ts';
import { SET_NAMES } from './types.ts';

// ---------------------------------------------------------------------------------------------
// Collective width

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
  holdout?: { held_out_ranks: number; train_widths: number[]; predicted_us: number; measured_us: number; ratio: number };
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
      if (!m) byKey.set(k, (m = new Map()));
      let p = m.get(cn.ranks);
      if (!p) m.set(cn.ranks, (p = { ranks: cn.ranks, lanes: new Set() }));
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
        ...(p.transition_rate_bytes_per_us !== undefined ? { transition_rate_bytes_per_us: p.transition_rate_bytes_per_us } : {}),
        lane: [...p.lanes].sort().join('+'),
      });
    }
    out.set(k, pts);
  }
  return out;
}

/**
 * Extrapolate one (op, dtype) of one chip to `target_ranks` from its measured width points.
 * Pure; see the module comment for the rules and refusals.
 */
export function extrapolateWidth(chip: string, op: string, dtype: string, points: readonly WidthPoint[], target_ranks: number): WidthExtrapolation {
  const widths = points.map((p) => p.ranks);
  const lanes = [...new Set(points.map((p) => p.lane))];
  const base = { chip, op, dtype, target_ranks, lane: lanes.join(','), measured_widths: widths, entries: [] as NamedEntry[] };
  if (widths.includes(target_ranks)) return { ...base, status: 'skipped', reason: `${target_ranks} ranks is measured` };
  const widest = points[points.length - 1];
  if (!widest) return { ...base, status: 'refused', reason: 'no measured widths' };
  if (lanes.length > 1 || lanes.some((l) => l.includes('+')))
    return { ...base, status: 'refused', reason: `measured widths come from more than one lane (${points.map((p) => `${p.ranks}: ${p.lane}`).join('; ')}): a fit across lanes is refused` };
  if (target_ranks < widest.ranks)
    return { ...base, status: 'refused', reason: `target ${target_ranks} ranks lies inside the measured range ${widths.join('/')}: only widening beyond the widest measured width is supported` };
  if (points.length < 3)
    return { ...base, status: 'refused', reason: `only ${points.length} measured width(s) (${widths.join('/')}): no same-lane holdout is possible (need 3)` };
  if (widest.peak_rate_bytes_per_us === undefined)
    return { ...base, status: 'refused', reason: `the widest measured width (${widest.ranks}) has no peak rate to copy` };

  const train = points.slice(0, -1);
  const holdLine = fitFloorLine(train);
  const predicted = floorAt(holdLine, widest.ranks);
  const holdout = { held_out_ranks: widest.ranks, train_widths: train.map((p) => p.ranks), predicted_us: predicted, measured_us: widest.floor_us, ratio: predicted / widest.floor_us };
  const line = fitFloorLine(points);
  const floor = round2(floorAt(line, target_ranks));
  if (floor < widest.floor_us)
    return { ...base, status: 'refused', line, holdout, floor_us: floor, reason: `predicted floor ${floor} µs at ${target_ranks} ranks is below the widest measured floor ${widest.floor_us} µs (${widest.ranks} ranks)` };

  const holdout_error: FitError = { geo: geometricError([predicted], [widest.floor_us]), mape_pct: mapePct([predicted], [widest.floor_us]), n: 1 };
  const from = points.map((p) => `${chip}:${p.ranks}rank`);
  const scope = { hardware: [chip] };
  const lane = lanes[0]!;
  const note = `holdout: ${widest.ranks}-rank floor predicted from ${train.map((p) => p.ranks).join('/')} ranks = ${predicted.toFixed(3)} µs vs measured ${widest.floor_us} µs (pred/meas ${holdout.ratio.toFixed(3)})`;
  const src: Source[] = [{ kind: 'model', cite: `stepcal registry extrapolate widths: ${chip} ${op} ${dtype} measured widths ${widths.join('/')} (lane ${lane})`, role: 'primary' }];
  const entries: NamedEntry[] = [];
  entries.push({
    name: collectiveName({ param: 'floor', op, dtype, ranks: target_ranks, chip }),
    entry: {
      value: floor,
      units: 'us_per_transfer',
      method: 'assumed',
      fitted: false,
      scope,
      sources: src,
      rationale: `Width extrapolation: floor(n) = ${line.a_us.toFixed(4)} + ${line.b_us_per_rank.toFixed(4)}·(n−1) µs, least squares on ${chip}'s own measured ${widths.join('/')}-rank floors (one lane, ${lane}), evaluated at ${target_ranks} ranks. Not measured. ${note}.`,
      evidence: { family: 'collective', lane, notes: [note], extrapolation: { predictor: 'floor_linear_in_ranks', from, holdout_error } },
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
        evidence: { family: 'collective', lane, extrapolation: { predictor: `copied_from_${widest.ranks}rank`, from: [`${chip}:${widest.ranks}rank`] } },
      },
    });
  }
  return {
    ...base,
    status: 'extrapolated',
    line,
    floor_us: floor,
    peak_rate_bytes_per_us: widest.peak_rate_bytes_per_us,
    ...(widest.transition_rate_bytes_per_us !== undefined ? { transition_rate_bytes_per_us: widest.transition_rate_bytes_per_us } : {}),
    rates_from_ranks: widest.ranks,
    holdout,
    entries,
  };
}

/** Every (op, dtype) of `chip` extrapolated to each target width. */
export function extrapolateCollectiveWidths(sets: readonly CoefficientSet[], chip: string, targets: readonly number[] = [16]): WidthExtrapolation[] {
  const out: WidthExtrapolation[] = [];
  const groups = measuredWidths(sets, chip);
  for (const k of [...groups.keys()].sort()) {
    const [op, dtype] = k.split('|') as [string, string];
    for (const t of targets) out.push(extrapolateWidth(chip, op, dtype, groups.get(k)!, t));
  }
  return out;
}

/** Median pred/meas of the width holdouts per op (BLIS reports 0.987/1.017/1.018/1.128, reference §6.3). */
export function widthHoldoutMedians(results: readonly WidthExtrapolation[]): Record<string, { median_ratio: number; n: number }> {
  const byOp = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const r of results) {
    if (!r.holdout) continue;
    const k = `${r.chip}|${r.op}|${r.dtype}`;
    if (seen.has(k)) continue;
    seen.add(k);
    let l = byOp.get(r.op);
    if (!l) byOp.set(r.op, (l = []));
    l.push(r.holdout.ratio);
  }
  const out: Record<string, { median_ratio: number; n: number }> = {};
  for (const [op, l] of [...byOp].sort()) out[op] = { median_ratio: median(l), n: l.length };
  return out;
}

// ---------------------------------------------------------------------------------------------
// Missing family by generation

/** Chip generation: the CUDA compute-capability major version (sm_90 → 9; A100 sm_80 and L40S sm_89 → 8). */
export function generationOf(chip: Chip): number | undefined {
  return chip.sm_version === undefined ? undefined : Math.floor(chip.sm_version / 10);
}

/** A chip with its registry, for family extrapolation. */
export interface ChipRegistry {
  chip: Chip;
  sets: readonly CoefficientSet[];
}

/** Candidate anchors for a within-chip ratio, by coefficient (datasheet facts or the chip's own coefficients). */
type Anchor = { label: string; of: (c: ChipRegistry) => number | undefined };

const datasheet = {
  hbm: { label: 'ratio_to_datasheet_hbm_bytes_per_us', of: (c: ChipRegistry) => c.chip.hbm_bytes_per_us },
  link: { label: 'ratio_to_datasheet_link_bytes_per_us', of: (c: ChipRegistry) => c.chip.nvlink_bytes_per_us },
  ridge: { label: 'ratio_to_datasheet_ridge_flops_per_byte', of: (c: ChipRegistry) => (c.chip.peak_tflops.bf16 * 1e6) / c.chip.hbm_bytes_per_us },
} satisfies Record<string, Anchor>;

function coefficientAnchor(name: string): Anchor {
  return { label: `ratio_to_${name}`, of: (c) => valueOn(c, name) };
}

/** Anchors offered for a chip-free coefficient name (module comment; documented in docs/registry.md). */
export function anchorsFor(name: string): Anchor[] {
  if (name.startsWith('attention_decode_rate')) return [datasheet.hbm];
  if (name.startsWith('collective_peak_rate') || name.startsWith('collective_transition_rate')) return [datasheet.link];
  if (/^gemm_[mnk]_half_/.test(name)) return [datasheet.ridge];
  if (name.startsWith('attention_decode_floor')) return [coefficientAnchor('attention_prefill_floor')];
  if (name === 'attention_prefill_floor') return [coefficientAnchor('attention_decode_floor')];
  return [];
}

/** Value of a (chip-free) coefficient on a chip, scoped to that chip; undefined when absent. */
export function valueOn(c: ChipRegistry, chipFree: string): number | undefined {
  const name = nameForChip(chipFree, c.chip.name);
  let v: number | undefined;
  for (const s of c.sets) for (const e of s.coefficients) if (e.name === name && scopedToChip(e.entry.scope, c.chip.name)) v = e.entry.value;
  return v;
}

/** The chip-free names of `family` a registry holds for its chip, with units, set and method. */
function familyNames(c: ChipRegistry, family: string): Map<string, { units: CoefficientEntry['units']; set: string; method: string }> {
  const out = new Map<string, { units: CoefficientEntry['units']; set: string; method: string }>();
  for (const s of c.sets)
    for (const e of s.coefficients)
      if (scopedToChip(e.entry.scope, c.chip.name) && familyOf(e.name, e.entry) === family) out.set(chipFreeName(e.name), { units: e.entry.units, set: s.name, method: e.entry.method });
  return out;
}

/** One predictor's leave-one-chip-out score. */
export interface PredictorScore {
  predictor: string;
  /** exp(mean |ln(pred/meas)|) over the folds. */
  holdout_geo: number;
  holdout_mape_pct: number;
  folds: Array<{ held_out: string; predicted: number; measured: number }>;
}

/** Outcome for one missing coefficient. */
export interface FamilyCoefficientExtrapolation {
  name: string;
  status: 'extrapolated' | 'refused';
  reason?: string;
  value?: number;
  predictor?: string;
  scores: PredictorScore[];
  from: string[];
  entry?: NamedEntry & { set: string };
}

export interface FamilyExtrapolation {
  chip: string;
  family: string;
  status: 'extrapolated' | 'refused' | 'skipped';
  reason?: string;
  siblings: string[];
  generation?: number;
  coefficients: FamilyCoefficientExtrapolation[];
}

function predict(predictor: string, anchor: Anchor | undefined, train: readonly ChipRegistry[], target: ChipRegistry, name: string): number | undefined {
  const vals = train.map((c) => valueOn(c, name));
  if (vals.some((v) => v === undefined)) return undefined;
  if (predictor === 'generation_median' || !anchor) return median(vals as number[]);
  const ratios: number[] = [];
  for (const c of train) {
    const a = anchor.of(c);
    const v = valueOn(c, name);
    if (a === undefined || v === undefined || !(a > 0)) return undefined;
    ratios.push(v / a);
  }
  const at = anchor.of(target);
  return at === undefined || !(at > 0) ? undefined : median(ratios) * at;
}

/** Leave-one-chip-out score of one predictor over `siblings`. */
export function scorePredictor(predictor: string, anchor: Anchor | undefined, siblings: readonly ChipRegistry[], name: string): PredictorScore | undefined {
  const folds: PredictorScore['folds'] = [];
  for (const held of siblings) {
    const train = siblings.filter((c) => c !== held);
    const measured = valueOn(held, name);
    const predicted = predict(predictor, anchor, train, held, name);
    if (measured === undefined || predicted === undefined || !(measured > 0) || !(predicted > 0)) return undefined;
    folds.push({ held_out: held.chip.name, predicted, measured });
  }
  if (folds.length < 2) return undefined;
  const p = folds.map((f) => f.predicted);
  const m = folds.map((f) => f.measured);
  return { predictor, holdout_geo: geometricError(p, m), holdout_mape_pct: mapePct(p, m), folds };
}

/** Significant digits kept for extrapolated values. */
const sig4 = (x: number) => Number(x.toPrecision(4));

/**
 * Fill `family` on `target` from same-generation siblings (module comment, rule 2).
 * @param others registries of other chips (the target's own name is ignored among them; their `method: copied` entries
 *   are ignored: a copy is its source's value again, not independent evidence)
 */
export function extrapolateFamily(target: ChipRegistry, others: readonly ChipRegistry[], family: string): FamilyExtrapolation {
  const chip = target.chip.name;
  const gen = generationOf(target.chip);
  const base = { chip, family, siblings: [] as string[], coefficients: [] as FamilyCoefficientExtrapolation[] };
  if (gen === undefined) return { ...base, status: 'refused', reason: `${chip} has no sm_version: its generation is unknown` };
  // A copied entry (`stepcal registry copy`) is its source chip's value again, not independent
  // evidence: siblings contribute only their own entries, or a copy would "predict" its source.
  const own = others.map((c) => ({ ...c, sets: c.sets.map((s) => ({ ...s, coefficients: s.coefficients.filter((e) => e.entry.method !== 'copied') })) }));
  const siblings = own.filter((c) => c.chip.name !== chip && generationOf(c.chip) === gen && familyNames(c, family).size > 0);
  const res: FamilyExtrapolation = { ...base, generation: gen, siblings: siblings.map((c) => c.chip.name), status: 'refused' };
  if (siblings.length === 0) return { ...res, reason: `no same-generation sibling (compute capability ${gen}.x) has family ${family}: refusing to invent it` };
  if (siblings.length === 1)
    return { ...res, reason: `only one same-generation sibling (${siblings[0]!.chip.name}) has family ${family}: no leave-one-chip-out holdout is possible, refusing` };

  const have = familyNames(target, family);
  const names = new Map<string, { units: CoefficientEntry['units']; set: string; count: number; measured: number }>();
  for (const s of siblings)
    for (const [n, info] of familyNames(s, family)) {
      const cur = names.get(n) ?? { units: info.units, set: info.set, count: 0, measured: 0 };
      cur.count++;
      if (info.method === 'measured') cur.measured++;
      names.set(n, cur);
    }
  const missing = [...names.keys()].filter((n) => !have.has(n)).sort();
  if (missing.length === 0) return { ...res, status: 'skipped', reason: `${chip} already has every ${family} coefficient its siblings have` };

  for (const name of missing) {
    const info = names.get(name)!;
    const dt = /^gemm_\w+_(bf16|fp8|fp8_block|nvfp4)$/.exec(name)?.[1];
    const peak = dt === undefined ? 1 : dt === 'bf16' ? target.chip.peak_tflops.bf16 : dt === 'nvfp4' ? target.chip.peak_tflops.nvfp4 : target.chip.peak_tflops.fp8;
    if (!peak) {
      res.coefficients.push({ name, status: 'refused', reason: `${chip} has no native ${dt} peak: the coefficient does not apply`, scores: [], from: [] });
      continue;
    }
    const withName = siblings.filter((c) => valueOn(c, name) !== undefined);
    // Only predictors that can be evaluated on the target compete (its anchor must exist there).
    const candidates: Array<[string, Anchor | undefined]> = [
      ['generation_median', undefined],
      ...anchorsFor(name)
        .filter((a) => (a.of(target) ?? 0) > 0)
        .map((a) => [a.label, a] as [string, Anchor]),
    ];
    const scores = candidates.map(([p, a]) => scorePredictor(p, a, withName, name)).filter((s): s is PredictorScore => s !== undefined);
    if (scores.length === 0) {
      res.coefficients.push({ name, status: 'refused', reason: `fewer than two siblings carry ${name}: no holdout is possible`, scores: [], from: withName.map((c) => c.chip.name) });
      continue;
    }
    // Lowest holdout error wins; ties go to the simpler generation median (listed first).
    const best = scores.reduce((b, s) => (s.holdout_geo < b.holdout_geo - 1e-12 ? s : b));
    const anchor = candidates.find(([p]) => p === best.predictor)?.[1];
    const raw = predict(best.predictor, anchor, withName, target, name);
    if (raw === undefined || !(raw > 0)) {
      res.coefficients.push({ name, status: 'refused', reason: `${best.predictor} cannot be evaluated on ${chip} (anchor missing)`, scores, from: withName.map((c) => c.chip.name) });
      continue;
    }
    const value = sig4(raw);
    const from = withName.map((c) => c.chip.name);
    const holdout_error: FitError = { geo: best.holdout_geo, mape_pct: best.holdout_mape_pct, n: best.folds.length };
    const full = nameForChip(name, chip);
    res.coefficients.push({
      name: full,
      status: 'extrapolated',
      value,
      predictor: best.predictor,
      scores,
      from,
      entry: {
        set: info.set,
        name: full,
        entry: {
          value,
          units: info.units,
          method: 'assumed',
          fitted: false,
          scope: { hardware: [chip] },
          sources: [{ kind: 'model', cite: `stepcal registry extrapolate family: ${family} from ${from.join(', ')} (${best.predictor})`, role: 'primary' }],
          rationale: `Not measured on ${chip}: extrapolated from same-generation chips ${from.join(', ')} by ${best.predictor}, chosen by leave-one-chip-out holdout (geometric error ${best.holdout_geo.toFixed(3)}, MAPE ${best.holdout_mape_pct.toFixed(1)}% over ${best.folds.length} folds; other predictors: ${scores
            .filter((s) => s !== best)
            .map((s) => `${s.predictor} ${s.holdout_geo.toFixed(3)}`)
            .join(', ') || 'none'}).`,
          evidence: { family, extrapolation: { predictor: best.predictor, from, holdout_error } },
        },
      },
    });
  }
  const ok = res.coefficients.some((c) => c.status === 'extrapolated');
  return { ...res, status: ok ? 'extrapolated' : 'refused', ...(ok ? {} : { reason: 'no coefficient of the family could be extrapolated with a holdout' }) };
}

/** Default set for a family's coefficients (BLIS set inventory, reference §1.4). */
export function setForFamily(family: string): string {
  if (family === 'attention_decode' || family === 'attention_prefill') return SET_NAMES.attention;
  if (family === 'collective') return SET_NAMES.collectives;
  if (family === 'host') return SET_NAMES.host;
  return SET_NAMES.primitives;
}

/**
 * Add or replace entries in sets (by set name and (name, scope) identity), returning new sets.
 * A `measured` entry is never replaced by an extrapolated one.
 */
export function mergeEntries(sets: readonly CoefficientSet[], add: ReadonlyArray<NamedEntry & { set: string }>): { sets: CoefficientSet[]; added: string[]; replaced: string[]; kept_measured: string[] } {
  const out = sets.map((s) => ({ ...s, coefficients: [...s.coefficients] }));
  const added: string[] = [];
  const replaced: string[] = [];
  const kept: string[] = [];
  for (const a of add) {
    let set = out.find((s) => s.name === a.set);
    if (!set) out.push((set = { kind: 'CoefficientSet', name: a.set, coefficients: [] }));
    const i = set.coefficients.findIndex((c) => c.name === a.name && scopeEq(c.entry.scope, a.entry.scope));
    if (i < 0) {
      set.coefficients.push({ name: a.name, entry: a.entry });
      added.push(a.name);
    } else if (set.coefficients[i]!.entry.method === 'measured' && a.entry.method !== 'measured') kept.push(a.name);
    else {
      set.coefficients[i] = { name: a.name, entry: a.entry };
      replaced.push(a.name);
    }
  }
  return { sets: out, added, replaced, kept_measured: kept };
}

function scopeEq(a: CoefficientEntry['scope'], b: CoefficientEntry['scope']): boolean {
  return scopeKey(a) === scopeKey(b);
}
