/** Strict decimal parsing of text cells (bottom layer: every stage's readers use it). Pure. */

/**
 * The value of a cell that must hold a decimal number (`12`, `-3.5`, `.5`, `1e-7`, surrounding blanks
 * trimmed), the value `Number()` gives it; NaN for anything else. `Number()` alone also reads a blank as
 * 0, `0x10` as 16, `0o7` and `0b1` as 7 and 1 (JS literal syntax a measured table never means) and
 * `Infinity`; those, and an overflow such as `1e999`, are NaN here. The one reader of numeric cells of
 * measurement tables (measurements/cell-table.ts imports, measurements/store.ts canonical and step files), of
 * `serve --trace` workloads (serve/workload.ts) and of trace-file times (core/schemas/trace.ts).
 * @example decimalNumber(' 83.8 ') → 83.8; decimalNumber('0x10') → NaN; decimalNumber('') → NaN
 */
export function decimalNumber(text: string): number {
  const t = text.trim();
  const v = t === '' ? NaN : Number(t);
  if (!Number.isFinite(v)) return NaN;
  // Number() reads a signed radix literal as NaN, so only an unsigned `0x…`, `0o…`, `0b…` gets here.
  if (t.length > 1 && t.charCodeAt(0) === 48) {
    const c = t.charCodeAt(1) | 0x20;
    if (c === 120 || c === 111 || c === 98) return NaN;
  }
  return v;
}
