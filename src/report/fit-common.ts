/**
 * What every fit-report module (src/report/fit-*.ts) returns for one family, and the plot helpers
 * they share. The fitters (src/fit) return typed data; these modules draw it. Pure: no I/O.
 */

/** One SVG figure, written as fits/<chip>/<name>. */
export interface FitFigure {
  name: string;
  svg: string;
}

/** A family's part of the fit report. */
export interface FitSection {
  /** Markdown section for fits/<chip>/README.md (empty: the family adds no section). */
  md: string;
  /** One-screen summary lines (units included), printed by `stepcal fit` and `calibrate`. */
  summary: string[];
  figures: FitFigure[];
}

/** Deterministic thinning for plots: at most `max` items, evenly strided (item ⌊i·n/max⌋ for i < max). */
export function thin<T>(items: readonly T[], max: number): T[] {
  if (items.length <= max) return [...items];
  const out: T[] = [];
  const stride = items.length / max;
  for (let i = 0; i < max; i++) out.push(items[Math.floor(i * stride)]!);
  return out;
}
