/**
 * CSV writing: the one CSV writer of stepcal. Quoting is papaparse's `unparse` (RFC 4180); reading
 * CSV lives in src/measurements/table.ts (papaparse too).
 *
 * Cells that need no quoting (numbers, booleans, empty cells, strings without a comma, quote, line
 * break, BOM or edge space) are joined here: papaparse's per-cell `safe()` was 40 % of a streaming
 * import's CPU (issue 17 "Import"; `npm run bench csv` prints both writers on 200k GEMM rows). A row
 * with any other cell is written by papaparse, so every byte equals `Papa.unparse`'s output (tested).
 */
import Papa from 'papaparse';

/** A string cell papaparse would quote (comma, quote, CR, LF or BOM anywhere; a space at either end). */
const NEEDS_QUOTES = /[",\r\n\ufeff]|^ | $/;

/** The row's cells joined by commas when none needs quoting; undefined when one does (or is not a primitive). */
function plainLine(r: Readonly<Record<string, unknown>>, columns: readonly string[]): string | undefined {
  let line = '';
  for (let c = 0; c < columns.length; c++) {
    const v = r[columns[c]!];
    let cell: string;
    if (v === undefined || v === null) cell = '';
    else if (typeof v === 'number' || typeof v === 'boolean') cell = String(v);
    else if (typeof v === 'string' && !NEEDS_QUOTES.test(v)) cell = v;
    else return undefined;
    line = c === 0 ? cell : `${line},${cell}`;
  }
  return line;
}

/**
 * CSV text of `rows` under the header `columns`: cells in column order (undefined and null → empty,
 * numbers in JavaScript's shortest round-trip form), a cell holding a comma, quote, line break or an
 * edge space quoted, `\n` line ends and a final newline (a header-only table: two). Byte-identical to
 * papaparse's `unparse` plus a newline, which this function has always returned.
 */
export function writeCsv(columns: readonly string[], rows: ReadonlyArray<Readonly<Record<string, unknown>>>): string {
  const header = Papa.unparse([[...columns]], { newline: '\n', header: false });
  if (rows.length === 0) return `${header}\n\n`; // papaparse ends a header-only table with a newline of its own
  const lines: string[] = new Array(rows.length + 1);
  lines[0] = header;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    lines[i + 1] = plainLine(r, columns) ?? Papa.unparse([columns.map((c) => r[c])], { newline: '\n', header: false });
  }
  return lines.join('\n') + '\n';
}
