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

/** A cell's text when it needs no quoting (undefined/null → empty); undefined when it does (or is not a primitive). */
export function plainCell(v: unknown): string | undefined {
  if (v === undefined || v === null) return '';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string' && !NEEDS_QUOTES.test(v)) return v;
  return undefined;
}

/** The row's cells joined by commas when none needs quoting; undefined when one does (or is not a primitive). */
function plainLine(r: Readonly<Record<string, unknown>>, columns: readonly string[]): string | undefined {
  let line = '';
  for (let c = 0; c < columns.length; c++) {
    const cell = plainCell(r[columns[c]!]);
    if (cell === undefined) return undefined;
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
  return `${lines.join('\n')}\n`;
}

/**
 * The data lines of rows `start`…`end − 1` read through one reader per column (`cells[c](i)` is row i's
 * value of column c), each line ending in `\n`: exactly the lines `writeCsv` writes for those rows,
 * without building a row object (the streaming import's writer). No header.
 A row with a cell that needs quoting goes through papaparse.
 */
export function csvRowLines(cells: ReadonlyArray<(i: number) => unknown>, start: number, end: number): string {
  const texts = cells.map((read) => (i: number) => plainCell(read(i)));
  const lines: string[] = new Array(end - start + 1);
  for (let i = start; i < end; i++) {
    let line = '';
    for (let c = 0; c < texts.length; c++) {
      const cell = texts[c]!(i);
      if (cell === undefined) {
        line = Papa.unparse([cells.map((read) => read(i))], { newline: '\n', header: false });
        break;
      }
      line = c === 0 ? cell : `${line},${cell}`;
    }
    lines[i - start] = line;
  }
  lines[end - start] = '';
  return lines.join('\n');
}

/** The header line `writeCsv` writes for `columns`, with its `\n`. */
export function csvHeader(columns: readonly string[]): string {
  return `${Papa.unparse([[...columns]], { newline: '\n', header: false })}\n`;
}
