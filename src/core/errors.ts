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

/** A malformed flag value or argument found after parsing: printed like a UserError, exit code 2. */
export class UsageError extends UserError {
  override name = 'UsageError';
}

/**
 * Where in an input file a problem sits. Row numbers are 1-based data rows (the header is row 0; a
 * problem with a named column on row 0 prints as `row 0 (header)`). Text formats that are not tables
 * (nccl-tests stdout) use `line`, the 1-based line number of the file, and print `line N`.
 */
export interface InputLocation {
  file: string;
  row?: number;
  /** 1-based line of a free-text input (instead of `row`). */
  line?: number;
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
    super(`${formatLocation(location)}: ${problem}`);
  }
}

/** `file`, `file row 12`, `file row 12 column "latency"`, `file row 0 (header) column "m"`, `file line 17`. */
export function formatLocation(loc: InputLocation): string {
  let s = loc.file;
  if (loc.line !== undefined) s += ` line ${loc.line}`;
  if (loc.row !== undefined) s += loc.row === 0 && loc.column !== undefined ? ' row 0 (header)' : ` row ${loc.row}`;
  if (loc.column !== undefined) s += ` column "${loc.column}"`;
  return s;
}
