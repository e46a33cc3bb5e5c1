/**
 * The one numeric-flag parser (issue 12 item 7): every command checks a numeric flag with the same
 * rule and reports it the same way, a usage error (exit 2) naming the flag, what it expects and what
 * it got. `--tp 0` and `--tp two` exit alike; so do `--resamples 100` and `--fit-host fraction=2`.
 * Accepts `4e6`, `4_000_000`, `0.5`.
 */
import { UsageError } from './errors.ts';

/** What a numeric flag accepts. Bounds are inclusive unless `minExclusive` / `maxExclusive`. */
export interface NumberSpec {
  integer?: boolean;
  min?: number;
  minExclusive?: boolean;
  max?: number;
  maxExclusive?: boolean;
}

/** The expectation in words: `an integer ≥ 1`, `a number > 0 and < 1`. */
export function describeSpec(spec: NumberSpec): string {
  const parts: string[] = [];
  if (spec.min !== undefined) parts.push(`${spec.minExclusive ? '>' : '≥'} ${spec.min}`);
  if (spec.max !== undefined) parts.push(`${spec.maxExclusive ? '<' : '≤'} ${spec.max}`);
  return `${spec.integer ? 'an integer' : 'a number'}${parts.length ? ` ${parts.join(' and ')}` : ''}`;
}

/** The number `text` holds under `spec`, or the problem (`expected an integer ≥ 1, got "0"`). Pure. */
export function checkNumber(text: string | number, spec: NumberSpec): { value: number } | { problem: string } {
  const s = typeof text === 'number' ? String(text) : text.trim().replace(/_/g, '');
  const v = s === '' ? NaN : Number(s);
  const bad =
    !Number.isFinite(v) ||
    (spec.integer === true && !Number.isInteger(v)) ||
    (spec.min !== undefined && (spec.minExclusive ? !(v > spec.min) : !(v >= spec.min))) ||
    (spec.max !== undefined && (spec.maxExclusive ? !(v < spec.max) : !(v <= spec.max)));
  return bad ? { problem: `expected ${describeSpec(spec)}, got "${String(text)}"` } : { value: v };
}

/**
 * Parse the value of `flag`. @throws UsageError (exit 2) `--tp: expected an integer ≥ 1, got "0"`.
 */
export function parseFlagNumber(flag: string, text: string | number, spec: NumberSpec): number {
  const r = checkNumber(text, spec);
  if ('problem' in r) throw new UsageError(`${flag}: ${r.problem}`);
  return r.value;
}

/** A commander `argParser` for `flag` (same rule and message as parseFlagNumber). */
export function flagParser(flag: string, spec: NumberSpec): (text: string) => number {
  return (text: string) => parseFlagNumber(flag, text, spec);
}

/** A comma-separated list for `flag`, each item under `spec`. @throws UsageError naming the item. */
export function parseFlagList(flag: string, text: string, spec: NumberSpec): number[] {
  const parts = text.split(',').map((p) => p.trim());
  return parts.map((p) => {
    const r = checkNumber(p, spec);
    if ('problem' in r) throw new UsageError(`${flag}: ${r.problem}${parts.length > 1 ? ` in "${text}"` : ''}`);
    return r.value;
  });
}

/**
 * The value of a choice flag: `text`, compared after `fold` (e.g. upper-casing), when it is one of `choices`.
 * Flags checked after parsing use it (a `--deployment` override reaches the same check as the flag itself).
 * @throws UsageError (exit 2) `--format: expected one of blis, got "csv"`.
 */
export function parseFlagChoice<T extends string>(
  flag: string,
  text: string,
  choices: readonly T[],
  fold: (s: string) => string = (s) => s,
): T {
  const v = fold(text);
  if (!(choices as readonly string[]).includes(v)) throw badChoice(flag, text, choices);
  return v as T;
}

/** The usage error of a choice flag given `text`: `--format: expected one of blis, got "csv"` (exit 2). */
export function badChoice(flag: string, text: string, choices: readonly string[]): UsageError {
  return new UsageError(`${flag}: expected one of ${choices.join(', ')}, got "${text}"`);
}
