/**
 * Errors that carry enough context for a user to fix their input.
 *
 * `UserError` is a mistake in what the user gave us (a file, a flag, a coefficient). The CLI prints
 * its message on stderr and exits with code 1, without a stack trace unless `--debug` is set.
 * Anything else that escapes is a bug and is printed with its stack.
 */
export class UserError extends Error {
  override name = 'UserError';
}

/** Where in an input file a problem sits. Row numbers are 1-based data rows (the header is row 0). */
export interface InputLocation {
  file: string;
  row?: number;
  column?: string;
}

/**
 * An input-data error naming the file, row and column, and what was expected.
 *
 * @example new InputError({file: 'gemm.csv', row: 12, column: 'latency'}, 'expected a positive finite number, got "-3"')
 */
export class InputError extends UserError {
  override name = 'InputError';
  constructor(
    readonly location: InputLocation,
    readonly problem: string,
  ) {
    super(formatLocation(location) + ': ' + problem);
  }
}

/** `file`, `file row 12`, `file row 12 column "latency"`. */
export function formatLocation(loc: InputLocation): string {
  let s = loc.file;
  if (loc.row !== undefined) s += ` row ${loc.row}`;
  if (loc.column !== undefined) s += ` column "${loc.column}"`;
  return s;
}
