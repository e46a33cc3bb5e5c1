/**
 * Tables: the one text table (terminal output of every command) and the one markdown table (reports,
 * `--md`), plus the HTML table of the self-contained report page. Pure: strings in, strings out.
 * Number formatting lives in ./format.ts.
 */
import { esc } from './svg.ts';

/** A simple table: header cells (units included) and rows of cells. */
export interface Table {
  header: string[];
  rows: string[][];
}

/** A text column: header text (with its unit), alignment, and a minimum width in characters. */
export interface Column {
  header: string;
  align?: 'left' | 'right';
  /** pad to at least this many characters even when every cell is shorter */
  width?: number;
}

/** Layout of a text table. */
export interface TextTableOptions {
  /** between columns (default two spaces) */
  gap?: string;
  /** drop trailing whitespace from each line (default true) */
  trimEnd?: boolean;
  /** print the header line (default true) */
  header?: boolean;
}

/**
 * The lines of an aligned text table: every column padded to max(its `width`, its widest cell,
 * its header), left or right aligned (right by default), joined by `gap`.
 */
export function tableLines(
  columns: readonly Column[],
  rows: ReadonlyArray<readonly string[]>,
  opts: TextTableOptions = {},
): string[] {
  const gap = opts.gap ?? '  ';
  const trim = opts.trimEnd ?? true;
  const widths = columns.map((c, i) =>
    Math.max(c.width ?? 0, c.header.length, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const line = (cells: readonly string[]) => {
    const s = columns
      .map((c, i) => (c.align === 'left' ? (cells[i] ?? '').padEnd(widths[i]!) : (cells[i] ?? '').padStart(widths[i]!)))
      .join(gap);
    return trim ? s.replace(/\s+$/, '') : s;
  };
  return [...(opts.header === false ? [] : [line(columns.map((c) => c.header))]), ...rows.map(line)];
}

/** `tableLines` joined into one string with a final newline. */
export function renderTable(
  columns: readonly Column[],
  rows: ReadonlyArray<readonly string[]>,
  opts: TextTableOptions = {},
): string {
  return `${tableLines(columns, rows, opts).join('\n')}\n`;
}

/** A `Table` as text lines: first column left-aligned, the others right-aligned, two spaces apart. */
export function textTable(t: Table): string[] {
  return tableLines(
    t.header.map((h, i) => ({ header: h, align: i === 0 ? 'left' : 'right' })),
    t.rows,
  );
}

/** A GitHub-flavoured markdown table (`|` in cells escaped), with a final newline. */
export function markdownTable(t: Table): string {
  const line = (c: readonly string[]) => `| ${c.map((x) => x.replace(/\|/g, '\\|')).join(' | ')} |`;
  return `${[line(t.header), `|${t.header.map(() => '---').join('|')}|`, ...t.rows.map(line)].join('\n')}\n`;
}

/** An HTML table (cells escaped), optionally with a class, with a final newline. */
export function htmlTable(t: Table, cls = ''): string {
  const th = t.header.map((h) => `<th>${esc(h)}</th>`).join('');
  const tr = t.rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('\n');
  return `<table${cls ? ` class="${cls}"` : ''}><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table>\n`;
}
