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
import type { Chip } from '../core/catalog/chip.ts';
import { geometricError, mapePct, median, roundSig } from '../core/numeric/stats.ts';
import { chipFreeName, familyOf, nameForChip, scopedToChip, scopeKey } from '../core/schemas/names.ts';
import type { CoefficientEntry, CoefficientSet, FitError, NamedEntry } from '../core/schemas/registry.ts';

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
  ridge: {
    label: 'ratio_to_datasheet_ridge_flops_per_byte',
    of: (c: ChipRegistry) => (c.chip.peak_tflops.bf16 * 1e6) / c.chip.hbm_bytes_per_us,
  },
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
  for (const s of c.sets)
    for (const e of s.coefficients) if (e.name === name && scopedToChip(e.entry.scope, c.chip.name)) v = e.entry.value;
  return v;
}

/** The chip-free names of `family` a registry holds for its chip, with units, set and method. */
function familyNames(
  c: ChipRegistry,
  family: string,
): Map<string, { units: CoefficientEntry['units']; set: string; method: string }> {
  const out = new Map<string, { units: CoefficientEntry['units']; set: string; method: string }>();
  for (const s of c.sets)
    for (const e of s.coefficients)
      if (scopedToChip(e.entry.scope, c.chip.name) && familyOf(e.name, e.entry) === family)
        out.set(chipFreeName(e.name), { units: e.entry.units, set: s.name, method: e.entry.method });
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

function predict(
  predictor: string,
  anchor: Anchor | undefined,
  train: readonly ChipRegistry[],
  target: ChipRegistry,
  name: string,
): number | undefined {
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
export function scorePredictor(
  predictor: string,
  anchor: Anchor | undefined,
  siblings: readonly ChipRegistry[],
  name: string,
): PredictorScore | undefined {
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
const sig4 = (x: number) => roundSig(x, 4);

/**
 * Fill `family` on `target` from same-generation siblings (module comment, rule 2).
 * @param others registries of other chips (the target's own name is ignored among them; their `method: copied` entries
 *   are ignored: a copy is its source's value again, not independent evidence)
 */
export function extrapolateFamily(
  target: ChipRegistry,
  others: readonly ChipRegistry[],
  family: string,
): FamilyExtrapolation {
  const chip = target.chip.name;
  const gen = generationOf(target.chip);
  const base = { chip, family, siblings: [] as string[], coefficients: [] as FamilyCoefficientExtrapolation[] };
  if (gen === undefined)
    return { ...base, status: 'refused', reason: `${chip} has no sm_version: its generation is unknown` };
  // A copied entry (`stepcal registry copy`) is its source chip's value again, not independent
  // evidence: siblings contribute only their own entries, or a copy would "predict" its source.
  const own = others.map((c) => ({
    ...c,
    sets: c.sets.map((s) => ({ ...s, coefficients: s.coefficients.filter((e) => e.entry.method !== 'copied') })),
  }));
  const siblings = own.filter(
    (c) => c.chip.name !== chip && generationOf(c.chip) === gen && familyNames(c, family).size > 0,
  );
  const res: FamilyExtrapolation = {
    ...base,
    generation: gen,
    siblings: siblings.map((c) => c.chip.name),
    status: 'refused',
  };
  if (siblings.length === 0)
    return {
      ...res,
      reason: `no same-generation sibling (compute capability ${gen}.x) has family ${family}: refusing to invent it`,
    };
  if (siblings.length === 1)
    return {
      ...res,
      reason: `only one same-generation sibling (${siblings[0]!.chip.name}) has family ${family}: no leave-one-chip-out holdout is possible, refusing`,
    };

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
  if (missing.length === 0)
    return { ...res, status: 'skipped', reason: `${chip} already has every ${family} coefficient its siblings have` };

  for (const name of missing) {
    const info = names.get(name)!;
    const dt = /^gemm_\w+_(bf16|fp8|fp8_block|nvfp4)$/.exec(name)?.[1];
    const peak =
      dt === undefined
        ? 1
        : dt === 'bf16'
          ? target.chip.peak_tflops.bf16
          : dt === 'nvfp4'
            ? target.chip.peak_tflops.nvfp4
            : target.chip.peak_tflops.fp8;
    if (!peak) {
      res.coefficients.push({
        name,
        status: 'refused',
        reason: `${chip} has no native ${dt} peak: the coefficient does not apply`,
        scores: [],
        from: [],
      });
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
    const scores = candidates
      .map(([p, a]) => scorePredictor(p, a, withName, name))
      .filter((s): s is PredictorScore => s !== undefined);
    if (scores.length === 0) {
      res.coefficients.push({
        name,
        status: 'refused',
        reason: `fewer than two siblings carry ${name}: no holdout is possible`,
        scores: [],
        from: withName.map((c) => c.chip.name),
      });
      continue;
    }
    // Lowest holdout error wins; ties go to the simpler generation median (listed first).
    const best = scores.reduce((b, s) => (s.holdout_geo < b.holdout_geo - 1e-12 ? s : b));
    const anchor = candidates.find(([p]) => p === best.predictor)?.[1];
    const raw = predict(best.predictor, anchor, withName, target, name);
    if (raw === undefined || !(raw > 0)) {
      res.coefficients.push({
        name,
        status: 'refused',
        reason: `${best.predictor} cannot be evaluated on ${chip} (anchor missing)`,
        scores,
        from: withName.map((c) => c.chip.name),
      });
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
          sources: [
            {
              kind: 'model',
              cite: `stepcal registry extrapolate family: ${family} from ${from.join(', ')} (${best.predictor})`,
              role: 'primary',
            },
          ],
          rationale: `Not measured on ${chip}: extrapolated from same-generation chips ${from.join(', ')} by ${best.predictor}, chosen by leave-one-chip-out holdout (geometric error ${best.holdout_geo.toFixed(3)}, MAPE ${best.holdout_mape_pct.toFixed(1)}% over ${best.folds.length} folds; other predictors: ${
            scores
              .filter((s) => s !== best)
              .map((s) => `${s.predictor} ${s.holdout_geo.toFixed(3)}`)
              .join(', ') || 'none'
          }).`,
          evidence: { family, extrapolation: { predictor: best.predictor, from, holdout_error } },
        },
      },
    });
  }
  const ok = res.coefficients.some((c) => c.status === 'extrapolated');
  return {
    ...res,
    status: ok ? 'extrapolated' : 'refused',
    ...(ok ? {} : { reason: 'no coefficient of the family could be extrapolated with a holdout' }),
  };
}

/**
 * Add or replace entries in sets (by set name and (name, scope) identity), returning new sets.
 * A `measured` entry is never replaced by an extrapolated one.
 */
export function mergeEntries(
  sets: readonly CoefficientSet[],
  add: ReadonlyArray<NamedEntry & { set: string }>,
): { sets: CoefficientSet[]; added: string[]; replaced: string[]; kept_measured: string[] } {
  const out = sets.map((s) => ({ ...s, coefficients: [...s.coefficients] }));
  const added: string[] = [];
  const replaced: string[] = [];
  const kept: string[] = [];
  for (const a of add) {
    let set = out.find((s) => s.name === a.set);
    if (!set) {
      set = { kind: 'CoefficientSet', name: a.set, coefficients: [] };
      out.push(set);
    }
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
