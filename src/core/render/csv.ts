/**
 * CSV writing: the one CSV writer of stepcal, papaparse's `unparse` (RFC 4180 quoting). Pure: rows
 * in, text out; reading CSV lives in src/measurements/table.ts (papaparse too).
 */
import Papa from 'papaparse';

/**
 * CSV text of `rows` under the header `columns`: cells in column order (undefined and null → empty,
 * numbers in JavaScript's shortest round-trip form), a cell holding a comma, quote, line break or an
 * edge space quoted, `\n` line ends and a final newline.
 */
export function writeCsv(columns: readonly string[], rows: ReadonlyArray<Readonly<Record<string, unknown>>>): string {
  const data = rows.map((r) => columns.map((c) => r[c]));
  return Papa.unparse({ fields: [...columns], data }, { newline: '\n' }) + '\n';
}
