/**
 * Plain-text table and number formatting shared by the analytics commands (`roofline`, `trace`,
 * `window`, `flops`). Pure: strings in, strings out.
 */

/** A column: header text (with its unit) and right/left alignment. */
export interface Column {
  header: string;
  align?: 'left' | 'right';
}

/**
 * Render rows as an aligned text table. Every cell is already a string; columns are padded to the
 * widest cell, separated by two spaces, with the header on the first line.
 */
export function renderTable(columns: readonly Column[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = columns.map((c, i) => Math.max(c.header.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    columns
      .map((c, i) => {
        const s = cells[i] ?? '';
        const w = widths[i]!;
        return c.align === 'left' ? s.padEnd(w) : s.padStart(w);
      })
      .join('  ')
      .replace(/\s+$/, '');
  return [line(columns.map((c) => c.header)), ...rows.map(line)].join('\n') + '\n';
}

/**
 * Shortest readable decimal for a measured or derived quantity: at most `maxDecimals` decimals,
 * trailing zeros dropped (19.2 → "19.2", 15 → "15", 5.500000001 → "5.5"). Used where the chapter
 * prints bare values (trace aggregates).
 */
export function fmtNum(x: number, maxDecimals = 3): string {
  if (!Number.isFinite(x)) return String(x);
  const s = x.toFixed(maxDecimals);
  const t = s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  return t === '-0' ? '0' : t;
}

/** Fixed decimals (`fmtFixed(61, 1)` → "61.0"). */
export function fmtFixed(x: number, decimals: number): string {
  if (!Number.isFinite(x)) return String(x);
  const s = x.toFixed(decimals);
  return /^-0(\.0*)?$/.test(s) ? s.slice(1) : s;
}

/** Integer with thousands separators ("285,714"). Rounds half away from zero. */
export function fmtInt(x: number, separators = false): string {
  if (!Number.isFinite(x)) return String(x);
  const r = Math.sign(x) * Math.round(Math.abs(x));
  return separators ? r.toLocaleString('en-US') : String(r);
}
