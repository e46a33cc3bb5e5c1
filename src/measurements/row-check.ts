/**
 * A fast path for the per-row zod check of the measurement store (issue 17, reading the stored
 * tables): each family's row schema (src/core/schemas/measurements.ts) is compiled once into plain
 * comparisons (a type test, `Number.isSafeInteger`, bounds, a string length, an enum set, a regular
 * expression, and the object's own refinements), which accept exactly the rows the schema accepts
 * and return the row in the schema's key order, as `safeParse` does. A row the fast path does not
 * accept goes through `safeParse` (store.ts), so every error message (file, row, column, zod's
 * wording) is the schema's own. A schema using anything else compiles to `undefined` and every row
 * of that family goes through zod. Pure.
 */
import type { z } from 'zod';

/** A compiled row check: the row in the schema's output form when it is valid, else undefined. */
export type RowCheck = (row: Record<string, string | number>) => Record<string, string | number> | undefined;

type Pred = (v: unknown) => boolean;

/** The zod v4 definition fields the compiler reads (core internals: `_zod.def`). */
interface Def {
  type: string;
  checks?: Array<{ _zod: { def: CheckDef; check?: (payload: { value: unknown; issues: unknown[] }) => unknown } }>;
  entries?: Record<string, unknown>;
  shape?: Record<string, { _zod: { def: Def } }>;
  catchall?: { _zod: { def: Def } };
}
interface CheckDef {
  check: string;
  value?: number;
  inclusive?: boolean;
  format?: string;
  minimum?: number;
  pattern?: RegExp;
}

/** A number field's checks folded into bounds: integer or not, lower and upper bound (each inclusive or not). */
interface NumberField {
  int: boolean;
  lo: number;
  loInc: boolean;
  hi: number;
  hiInc: boolean;
}

/** Fold a z.number's checks into one NumberField, or undefined for a check this compiler does not know. */
function numberField(checks: readonly CheckDef[]): NumberField | undefined {
  const f: NumberField = { int: false, lo: -Infinity, loInc: true, hi: Infinity, hiInc: true };
  for (const c of checks) {
    const x = c.value;
    if (c.check === 'number_format' && c.format === 'safeint') f.int = true;
    else if (c.check === 'greater_than' && typeof x === 'number') {
      // The tighter of two lower bounds (an exclusive bound at the same value is the tighter).
      if (x > f.lo || (x === f.lo && !c.inclusive)) [f.lo, f.loInc] = [x, !!c.inclusive];
    } else if (c.check === 'less_than' && typeof x === 'number') {
      if (x < f.hi || (x === f.hi && !c.inclusive)) [f.hi, f.hiInc] = [x, !!c.inclusive];
    } else return undefined;
  }
  return f;
}

/** Fold a z.string's checks into a minimum length and regular expressions, or undefined when unknown. */
function stringField(checks: readonly CheckDef[]): { min: number; res: RegExp[] } | undefined {
  const f = { min: 0, res: [] as RegExp[] };
  for (const c of checks) {
    const re = c.pattern;
    if (c.check === 'min_length' && typeof c.minimum === 'number') f.min = Math.max(f.min, c.minimum);
    // A global or sticky expression keeps state between tests; zod's own test would then differ run to run.
    else if (c.check === 'string_format' && c.format === 'regex' && re instanceof RegExp && !re.global && !re.sticky)
      f.res.push(re);
    else return undefined;
  }
  return f;
}

/** A field schema as one predicate: z.number / z.string with known checks, or z.enum. */
function fieldPred(def: Def): Pred | undefined {
  const checks = (def.checks ?? []).map((c) => c._zod.def);
  if (def.type === 'number') {
    const f = numberField(checks);
    if (!f) return undefined;
    const { int, lo, loInc, hi, hiInc } = f;
    return (v) =>
      typeof v === 'number' &&
      Number.isFinite(v) &&
      (!int || Number.isSafeInteger(v)) &&
      (loInc ? v >= lo : v > lo) &&
      (hiInc ? v <= hi : v < hi);
  }
  if (def.type === 'string') {
    const f = stringField(checks);
    if (!f) return undefined;
    const { min, res } = f;
    if (!res.length) return (v) => typeof v === 'string' && v.length >= min;
    return (v) => typeof v === 'string' && v.length >= min && res.every((re) => re.test(v));
  }
  if (def.type === 'enum' && def.entries && !checks.length) {
    const values = new Set(Object.values(def.entries));
    return (v) => typeof v === 'string' && values.has(v);
  }
  return undefined;
}

/** A compiled row reader: the cells of one row in `cols` order in, the row in the schema's output form out when valid. */
export type RowReader = (cells: ReadonlyArray<string | number>) => Record<string, string | number> | undefined;

/**
 * Compile `schema` (a strict z.object of number, string and enum fields, with optional `.refine`s)
 * for rows whose cells come in `cols` order. The fields are checked on the cells themselves, and only
 * a valid row becomes an object, built by one object literal with the schema's keys in order (compiled
 * once per schema with `new Function` from the schema's own key names: every row then has one compact
 * shape with its fields in the object, not a dictionary grown key by key; issue 17, reading the tables).
 * @returns the reader, or undefined when the schema uses anything the compiler does not know (then
 *   the caller validates every row with zod).
 */
export function compileRowReader(schema: z.core.$ZodType, cols: readonly string[]): RowReader | undefined {
  const def = (schema as unknown as { _zod: { def: Def } })._zod.def;
  if (def.type !== 'object' || !def.shape || def.catchall?._zod.def.type !== 'never') return undefined;
  const keys = Object.keys(def.shape);
  if (keys.length !== cols.length || !keys.every((k) => cols.includes(k))) return undefined;
  const preds: Pred[] = [];
  for (const k of keys) {
    const p = fieldPred(def.shape[k]!._zod.def);
    if (!p) return undefined;
    preds.push(p);
  }
  const refines = (def.checks ?? []).map((c) => (c._zod.def.check === 'custom' ? c._zod.check : undefined));
  if (refines.some((f) => !f)) return undefined;
  const at = keys.map((k) => cols.indexOf(k));
  const make = new Function(
    'v',
    `return { ${keys.map((k, i) => `${JSON.stringify(k)}: v[${at[i]}]`).join(', ')} };`,
  ) as (v: ReadonlyArray<string | number>) => Record<string, string | number>;
  return (cells) => {
    for (let i = 0; i < preds.length; i++) if (!preds[i]!(cells[at[i]!])) return undefined;
    const row = make(cells);
    for (const f of refines) {
      const payload = { value: row, issues: [] as unknown[] };
      if (f!(payload) instanceof Promise || payload.issues.length) return undefined;
    }
    return row;
  };
}

/**
 * `compileRowReader` for a row given as an object with the keys `cols`: the row in the schema's
 * output form (key order included) when valid, else undefined.
 */
export function compileRowCheck(schema: z.core.$ZodType, cols: readonly string[]): RowCheck | undefined {
  const read = compileRowReader(schema, cols);
  return read && ((row) => read(cols.map((c) => row[c]!)));
}
