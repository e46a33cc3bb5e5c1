/**
 * Flag-value parsers shared by the analytics commands. They throw commander's
 * `InvalidArgumentError`, so a bad flag value is a usage error (exit code 2, see src/cli/main.ts).
 */
import { InvalidArgumentError } from 'commander';

/** Parse one number; accepts `4e6`, `4_000_000`, `0.5`. */
export function parseNumber(text: string): number {
  const s = text.trim().replace(/_/g, '');
  const v = s === '' ? NaN : Number(s);
  if (!Number.isFinite(v)) throw new InvalidArgumentError(`expected a finite number, got "${text}"`);
  return v;
}

/** Parse a number that must be > 0. */
export function parsePositive(text: string): number {
  const v = parseNumber(text);
  if (!(v > 0)) throw new InvalidArgumentError(`expected a number > 0, got "${text}"`);
  return v;
}

/** Parse a number that must be ≥ 0. */
export function parseNonNegative(text: string): number {
  const v = parseNumber(text);
  if (!(v >= 0)) throw new InvalidArgumentError(`expected a number ≥ 0, got "${text}"`);
  return v;
}

/** Parse a positive integer. */
export function parsePositiveInt(text: string): number {
  const v = parseNumber(text);
  if (!(Number.isInteger(v) && v > 0)) throw new InvalidArgumentError(`expected a positive integer, got "${text}"`);
  return v;
}

/** Parse a comma-separated list of numbers ≥ 0 (`1,4,8,16`). */
export function parseList(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.some((p) => p === '')) throw new InvalidArgumentError(`expected a comma-separated list of numbers, got "${text}"`);
  return parts.map((p) => {
    const v = parseNumber(p);
    if (v < 0) throw new InvalidArgumentError(`expected numbers ≥ 0, got "${p}" in "${text}"`);
    return v;
  });
}

/** Build a parser accepting one of `choices`. */
export function oneOf<T extends string>(choices: readonly T[]): (text: string) => T {
  return (text: string) => {
    if (!(choices as readonly string[]).includes(text)) {
      throw new InvalidArgumentError(`expected one of ${choices.join(', ')}, got "${text}"`);
    }
    return text as T;
  };
}
