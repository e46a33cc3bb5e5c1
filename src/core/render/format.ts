/**
 * Number formatting: the one place every stage outside src/fit and src/pricer turns a number into
 * text (tables, summaries, messages, chart ticks). Pure: numbers in, strings out; no locale other
 * than `en-US` for thousands separators.
 *
 * Which one to use:
 * - `fmtDec`: fixed decimals as JavaScript prints them (`-0.0` kept), a dash for a missing value;
 *   the tables of validation, gates and prices.
 * - `fmtFixed`: fixed decimals with the sign of a rounded zero dropped (`61.0`, never `-0.0`).
 * - `fmtNum`: at most N decimals, trailing zeros dropped (`19.2`, `15`).
 * - `fmtSig` / `fmtSigExp`: N significant digits, optionally in exponent form outside a range
 *   (registry values and ci95 in summaries and diffs).
 * - `fmtInt`, `fmtGrouped`: integers and rates with thousands separators.
 * - `fmtPercent`: a fraction as a percentage (`0.049` → `4.9 %`).
 * - `fmtTick`: compact chart ticks (`1k`, `2.5M`).
 */

/** The text printed where a value is missing or not finite. */
export const MISSING = '–';

/**
 * Fixed decimals exactly as `Number.prototype.toFixed` prints them (`-0.04` → `-0.0` at 1 decimal),
 * or `missing` when `x` is undefined or not finite.
 */
export function fmtDec(x: number | undefined, decimals: number, missing = MISSING): string {
  return x === undefined || !Number.isFinite(x) ? missing : x.toFixed(decimals);
}

/** Fixed decimals with a rounded zero unsigned (`fmtFixed(61, 1)` → "61.0", `fmtFixed(-0.01, 1)` → "0.0"). Non-finite → `String(x)`. */
export function fmtFixed(x: number, decimals: number): string {
  if (!Number.isFinite(x)) return String(x);
  const s = x.toFixed(decimals);
  return /^-0(\.0*)?$/.test(s) ? s.slice(1) : s;
}

/**
 * Shortest readable decimal for a measured or derived quantity: at most `maxDecimals` decimals,
 * trailing zeros dropped (19.2 → "19.2", 15 → "15", 5.500000001 → "5.5"). Used where the chapter
 * prints bare values (trace aggregates). Non-finite → `String(x)`.
 */
export function fmtNum(x: number, maxDecimals = 3): string {
  if (!Number.isFinite(x)) return String(x);
  const s = x.toFixed(maxDecimals);
  const t = s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  return t === '-0' ? '0' : t;
}

/** `digits` significant digits, trailing zeros dropped (`fmtSig(0.95841, 3)` → "0.958", `fmtSig(40000, 3)` → "40000"). */
export function fmtSig(x: number, digits: number): string {
  return Number.isFinite(x) ? String(Number(x.toPrecision(digits))) : String(x);
}

/** When `fmtSigExp` switches to exponent form, and how many mantissa decimals it then prints. */
export interface SigExpOptions {
  /** exponent form when |x| ≥ this */
  expAbove: number;
  /** exponent form when 0 < |x| < this */
  expBelow: number;
  /** decimals of the mantissa in exponent form */
  expDigits: number;
  /** write `1.60e6` instead of `1.60e+6` */
  compact?: boolean;
}

/**
 * `fmtSig` inside [expBelow, expAbove), exponent form outside it; zero is "0", non-finite `String(x)`.
 * For example digits 3, expAbove 1e5, expBelow 1e-3, expDigits 2, compact: 1_601_000 → "1.60e6".
 */
export function fmtSigExp(x: number, digits: number, o: SigExpOptions): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a === 0 || (a < o.expAbove && a >= o.expBelow)) return String(Number(x.toPrecision(digits)));
  const e = x.toExponential(o.expDigits);
  return o.compact ? e.replace('e+', 'e') : e;
}

/** A closed interval as `[lo, hi]` with `fmt` for each end, or `missing` when there is none. */
export function fmtInterval(
  c: readonly [number, number] | undefined,
  fmt: (x: number) => string,
  missing = MISSING,
): string {
  return c ? `[${fmt(c[0])}, ${fmt(c[1])}]` : missing;
}

/** Integer, optionally with thousands separators ("285,714"). Rounds half away from zero. Non-finite → `String(x)`. */
export function fmtInt(x: number, separators = false): string {
  if (!Number.isFinite(x)) return String(x);
  const r = Math.sign(x) * Math.round(Math.abs(x));
  return separators ? r.toLocaleString('en-US') : String(r);
}

/** Thousands separators and at most `maxDecimals` decimals, none forced ("19,200", "222.2"). */
export function fmtGrouped(x: number, maxDecimals: number): string {
  return x.toLocaleString('en-US', { maximumFractionDigits: maxDecimals, minimumFractionDigits: 0 });
}

/** A fraction as a percentage with `digits` significant digits and a spaced sign (`0.00086` → "0.086 %", `0.049` → "4.9 %"). */
export function fmtPercent(fraction: number, digits = 2): string {
  return `${fmtSig(fraction * 100, digits)} %`;
}

/** A chart tick, compact (0, 0.01, 250, 1k, 2.5M, 1G): 3 significant digits from 1 up, 2 below 1. */
export function fmtTick(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e9) return `${fmtSig(v / 1e9, 3)}G`;
  if (a >= 1e6) return `${fmtSig(v / 1e6, 3)}M`;
  if (a >= 1e4) return `${fmtSig(v / 1e3, 3)}k`;
  return fmtSig(v, a >= 1 ? 3 : 2);
}
