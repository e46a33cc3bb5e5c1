/**
 * Helpers shared by stepcal's own family fitters (GEMM, HBM, attention): repeat reduction,
 * holdout selection, error summaries, bootstrap intervals, and the builder of a measured registry
 * entry with its `evidence`. The minimisers and the seeded resampling loop live in src/core/numeric
 * (minimize.ts, resample.ts). Pure: no I/O, no clock.
 *
 * Rounding (docs/fitting.md): stored values and ci95 bounds use 4 significant digits
 * (`VALUE_DIGITS`); error figures use 4 significant digits too. `roundSig` is monotone, so a
 * rounded ci95 still contains the rounded value.
 */
import type { CoefficientEntry, FitError, Units } from '../core/schemas/registry.ts';
import { geometricError, mapePct, median, percentileType7, roundSig } from '../core/numeric/stats.ts';
import { memoByObject } from '../core/text-memo.ts';
import type { AttentionDecodeRow, AttentionPrefillRow } from '../measurements/schema.ts';
import type { FitContext } from './types.ts';

/** Significant digits of stored values and ci95 bounds. */
export const VALUE_DIGITS = 4;

/** Train/holdout error of predictions against measurements (geo ≥ 1, MAPE in percent), rounded. */
export function fitError(pred: readonly number[], meas: readonly number[]): FitError {
  return { geo: roundSig(geometricError(pred, meas), 4), mape_pct: roundSig(mapePct(pred, meas), 4), n: pred.length };
}

/**
 * Reduce repeated measurements of the same configuration (rows equal in every one of `fields`) to
 * their median latency, so symmetric noise on repeats cannot bias a fit. Keeps the first row of each
 * group (with the median latency) in first-seen order; a row without repeats is returned as itself.
 * A number field compares with ===, as its shortest decimal does for the finite values the tables
 * hold, 0 and -0 alike (the groups a key string of the fields joined would give; test/fit/common.test.ts).
 * Each row's fields are hashed to one 32-bit number (a string field by the small id of its text), so
 * no key string is built and hashed per row (issue 17: on the 107k-row GEMM table the joined keys were
 * most of the reduction's time). The groups sit in an open-addressing table of typed arrays (linear
 * probing from the mixed hash's low bits; a slot is taken only by a group whose first row has the same hash
 * and equal fields), so no Map entry or number box is made per row.
 */
export function reduceRepeatsBy<T extends { latency_us: number }>(
  rows: readonly T[],
  fields: ReadonlyArray<keyof T>,
): T[] {
  const ids = new Map<string, number>();
  const { hash, equal } = compiledFields(fields as readonly string[]);
  const mask = (1 << Math.max(4, Math.ceil(Math.log2(2 * rows.length + 1)))) - 1;
  const table = new Int32Array(mask + 1).fill(-1); // slot → group (its index in `out`)
  const groupHash = new Int32Array(rows.length);
  const groupOf = new Int32Array(rows.length); // row → its group
  const size = new Int32Array(rows.length); // group → rows in it
  const out: T[] = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    const h = hash(r, ids);
    let p = spread(h) & mask;
    let g = table[p]!;
    while (g !== -1 && !(groupHash[g] === h && equal(out[g]!, r))) {
      p = (p + 1) & mask;
      g = table[p]!;
    }
    if (g === -1) {
      g = out.length;
      table[p] = g;
      groupHash[g] = h;
      out.push(r);
    }
    groupOf[i] = g;
    size[g]!++;
  }
  return repeatsToMedians(rows, out, groupOf, size);
}

/**
 * The hash's bits mixed (murmur3's 32-bit finaliser) before its low bits pick a slot: FNV-1a's
 * multiply carries only upward, and the low words of whole-number doubles are 0, so unmixed low bits
 * would crowd the GEMM table's rows into a few probe runs.
 */
function spread(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  return x ^ (x >>> 16);
}

/** reduceRepeatsBy's last step: each group of more than one row becomes its first row with the median latency. */
function repeatsToMedians<T extends { latency_us: number }>(
  rows: readonly T[],
  out: T[],
  groupOf: Int32Array,
  size: Int32Array,
): T[] {
  const repeats: Array<number[] | undefined> = [];
  for (let i = 0; i < rows.length; i++) {
    const g = groupOf[i]!;
    if (size[g]! < 2) continue;
    const lat = repeats[g];
    if (lat) lat.push(rows[i]!.latency_us);
    else repeats[g] = [rows[i]!.latency_us];
  }
  for (let g = 0; g < out.length; g++) {
    const lat = repeats[g];
    if (lat) out[g] = { ...out[g]!, latency_us: median(lat) };
  }
  return out;
}

type FieldsHash = (r: unknown, ids: Map<string, number>) => number;
type FieldsEqual = (a: unknown, b: unknown) => boolean;
const FIELD_FNS = new Map<string, { hash: FieldsHash; equal: FieldsEqual }>();
const HASH_BITS = new Float64Array(1);
const HASH_WORDS = new Int32Array(HASH_BITS.buffer);

/**
 * reduceRepeatsBy's row hash and equality for one list of fields, compiled once per list with
 * `new Function` from the field names (each a named property read, where a loop over the names reads
 * rows through a keyed load per field). The hash is the loop's: FNV-1a's step on each number's two
 * 32-bit words (0 for ±0) and on each string's id (its first-seen index in `ids`), field by field.
 */
function compiledFields(fields: readonly string[]): { hash: FieldsHash; equal: FieldsEqual } {
  const key = JSON.stringify(fields);
  let fns = FIELD_FNS.get(key);
  if (!fns) {
    const at = fields.map((f) => `[${JSON.stringify(f)}]`);
    const step = (a: string) =>
      `v = r${a};\n` +
      "if (typeof v === 'number') { bits[0] = v === 0 ? 0 : v; h = Math.imul(h ^ words[0], 0x01000193); h = Math.imul(h ^ words[1], 0x01000193); }\n" +
      'else { t = String(v); id = ids.get(t); if (id === undefined) { id = ids.size; ids.set(t, id); } h = Math.imul(h ^ id, 0x01000193); }\n';
    const hash = new Function(
      'bits',
      'words',
      `return (r, ids) => { let h = 0x811c9dc5; let v, t, id;\n${at.map(step).join('')}return h; };`,
    )(HASH_BITS, HASH_WORDS) as FieldsHash;
    const equal = new Function(
      'a',
      'b',
      `return ${at.map((a) => `a${a} === b${a}`).join(' && ') || 'true'};`,
    ) as FieldsEqual;
    fns = { hash, equal };
    FIELD_FNS.set(key, fns);
  }
  return fns;
}

/**
 * Deterministic holdout of whole values along one dimension: of the sorted distinct values, every
 * fourth one starting at the second (indices 1, 5, 9, ...) is held out. With fewer than 4 distinct
 * values nothing is held out (the caller reports "no holdout").
 */
export function holdoutValues<T extends number | string>(values: Iterable<T>): Set<T> {
  const distinct = [...new Set(values)].sort((a, b) =>
    typeof a === 'number' && typeof b === 'number' ? a - b : String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0,
  );
  const out = new Set<T>();
  if (distinct.length < 4) return out;
  for (let i = 1; i < distinct.length; i += 4) out.add(distinct[i]!);
  return out;
}

/** A description of the rows an entry was fitted on. */
export interface RowsUsed {
  filter: string;
  rows_used: number;
}

/** Fields of a measured entry a fitter supplies. */
export interface MeasuredSpec {
  value: number;
  units: Units;
  family: string;
  ctx: FitContext;
  /** Which rows of the context's inputs were used (filter in words, count). */
  used: RowsUsed;
  ci95?: [number, number];
  ci_method: 'bootstrap' | 'lm_covariance' | 'quantiles' | 'none';
  train: FitError;
  holdout?: FitError & { split: string };
  notes?: string[];
  /** `fitted: false` for order statistics (medians of ratios). Default true. */
  fitted?: boolean;
}

/** Inputs of the context that belong to `family` (by file-name prefix), for provenance. */
export function familyInputs(ctx: FitContext, family: string): FitContext['inputs'] {
  if (!family) return ctx.inputs;
  return ctx.inputs.filter((i) => i.file.split('/').pop()!.startsWith(`${family}.`));
}

/**
 * Build a measured CoefficientEntry in BLIS's layout, with stepcal's `evidence` key. Values and
 * ci95 bounds are rounded to `VALUE_DIGITS` significant digits.
 */
export function measuredEntry(s: MeasuredSpec, inputFamily = s.family): CoefficientEntry {
  const inputs = familyInputs(s.ctx, inputFamily);
  const value = roundSig(s.value, VALUE_DIGITS);
  const lane = inputs[0]?.lane;
  const entry: CoefficientEntry = {
    value,
    units: s.units,
    method: 'measured',
    fitted: s.fitted ?? true,
    scope: { hardware: [s.ctx.chip.name] },
    sources: inputs.map((i) => ({
      kind: 'model' as const,
      cite: `${i.file} (sha256 ${i.sha256.slice(0, 12)}; ${s.used.filter}; ${s.used.rows_used} rows)`,
      role: 'primary' as const,
    })),
  };
  if (s.ci95 && Number.isFinite(s.ci95[0]) && Number.isFinite(s.ci95[1])) {
    entry.ci95 = [roundSig(s.ci95[0], VALUE_DIGITS), roundSig(s.ci95[1], VALUE_DIGITS)];
  }
  entry.evidence = {
    family: s.family,
    ...(lane !== undefined ? { lane } : {}),
    inputs: inputs.map((i) => ({ file: i.file, sha256: i.sha256, filter: s.used.filter, rows_used: s.used.rows_used })),
    ci_method: s.ci_method,
    ...(s.ci_method === 'bootstrap'
      ? { bootstrap: { resamples: s.ctx.bootstrap.resamples, seed: s.ctx.bootstrap.seed } }
      : {}),
    train_error: s.train,
    ...(s.holdout ? { holdout_error: s.holdout } : {}),
    ...(s.notes?.length ? { notes: s.notes } : {}),
  };
  return entry;
}

/** Format a number for reports: 4 significant digits, no exponent for ordinary magnitudes. */
export function fmt(x: number, digits = 4): string {
  if (!Number.isFinite(x)) return String(x);
  const r = roundSig(x, digits);
  return Math.abs(r) >= 1e-3 && Math.abs(r) < 1e15 ? String(r) : r.toExponential(digits - 1);
}

/** Quantiles (type-7) of bootstrap estimates (non-finite ones dropped), or NaN bounds when none succeeded. */
export function ciFromEstimates(values: readonly number[]): [number, number] {
  const v = values.filter(Number.isFinite);
  if (v.length === 0) return [NaN, NaN];
  return [percentileType7(v, 0.025), percentileType7(v, 0.975)];
}

/** The fields that make one decode-attention configuration (a repeat shares all of them; docs/fitting.md "Repeats"). */
export const DECODE_CONFIG_FIELDS = [
  'kernel_source',
  'batch',
  'context_tokens',
  'n_q',
  'n_kv',
  'head_dim',
  'window',
  'kv_dtype',
] as const satisfies ReadonlyArray<keyof AttentionDecodeRow>;

/**
 * Decode-attention rows with repeats (rows equal in DECODE_CONFIG_FIELDS) reduced to their median
 * (`reduceRepeatsBy`), computed once per rows array: the HBM fitter reduces every decode row and
 * each decode kind its own (issue 17: the same 62k rows were reduced twice). `window` is one of the
 * fields, so a kind's rows taken from this list are the reduction of that kind's rows.
 */
export const reduceDecodeRepeats: (rows: readonly AttentionDecodeRow[]) => AttentionDecodeRow[] = memoByObject((rows) =>
  reduceRepeatsBy(rows, DECODE_CONFIG_FIELDS),
);

/** The fields that make one prefill-attention configuration (window 0 and bf16 compute are selected before the reduction). */
export const PREFILL_CONFIG_FIELDS = [
  'kernel_source',
  'batch',
  'new_tokens',
  'prefix_tokens',
  'n_q',
  'n_kv',
  'head_dim',
  'kv_dtype',
] as const satisfies ReadonlyArray<keyof AttentionPrefillRow>;
