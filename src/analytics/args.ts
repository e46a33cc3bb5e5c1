/**
 * Flag-value parsers for commander's `argParser`, on the one numeric rule (src/core/flags.ts). They
 * throw commander's `InvalidArgumentError`, so commander names the option and a bad value is a usage
 * error (exit code 2, see src/cli/main.ts).
 */
import { InvalidArgumentError } from 'commander';
import { checkNumber, type NumberSpec } from '../core/flags.ts';

function parseWith(text: string, spec: NumberSpec): number {
  const r = checkNumber(text, spec);
  if ('problem' in r) throw new InvalidArgumentError(r.problem);
  return r.value;
}

/** Parse one number; accepts `4e6`, `4_000_000`, `0.5`. */
export function parseNumber(text: string): number {
  return parseWith(text, {});
}

/** Parse a number that must be > 0. */
export function parsePositive(text: string): number {
  return parseWith(text, { min: 0, minExclusive: true });
}

/** Parse a number that must be ≥ 0. */
export function parseNonNegative(text: string): number {
  return parseWith(text, { min: 0 });
}

/** Parse a share: a number > 0 and ≤ 1 (`--gpu-memory-utilization 0.9`). */
export function parseFraction(text: string): number {
  return parseWith(text, { min: 0, minExclusive: true, max: 1 });
}

/** Parse a positive integer. */
export function parsePositiveInt(text: string): number {
  return parseWith(text, { integer: true, min: 1 });
}

/** Parse a comma-separated list of numbers ≥ 0 (`1,4,8,16`). */
export function parseList(text: string): number[] {
  const parts = text.split(',').map((p) => p.trim());
  if (parts.some((p) => p === ''))
    throw new InvalidArgumentError(`expected a comma-separated list of numbers, got "${text}"`);
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
