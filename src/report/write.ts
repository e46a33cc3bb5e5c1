/**
 * Writing the accuracy report (edge module): `<dir>/report.md`, `<dir>/report.html` and the
 * validation charts `<dir>/validation-*.svg`, all in one atomic batch. The fitters' figures already
 * in `<dir>` (`*.svg` not starting with `validation-`), overridden by any `pending` figures of the same
 * set not yet written, are inlined in the HTML and linked in the md. `reportFiles` returns the files so
 * a caller can commit them with other outputs as one set (calibrate).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { writeFilesAtomic } from '../core/io/fs.ts';
import type { ValidationResult } from '../validate/types.ts';
import { validationCharts, validationHtml, validationMarkdown, type ReportInputs } from './validation.ts';

type Figure = { name: string; svg: string };

/** Fitter figures in `dir`, with `pending` (new figures not yet written) replacing those of the same name; sorted by name. */
export function readFitFigures(dir: string, pending: readonly Figure[] = []): Figure[] {
  const byName = new Map<string, string>();
  if (existsSync(dir))
    for (const n of readdirSync(dir))
      if (n.endsWith('.svg') && !n.startsWith('validation-')) byName.set(n, readFileSync(path.join(dir, n), 'utf8'));
  for (const f of pending) if (!f.name.startsWith('validation-')) byName.set(f.name, f.svg);
  return [...byName.keys()].sort().map((name) => ({ name, svg: byName.get(name)! }));
}

/** The report's files (nothing written): report.md, report.html and the validation charts. */
export function reportFiles(
  dir: string,
  chip: string,
  v: ValidationResult | null,
  inp: Omit<ReportInputs, 'fitFigures'> = {},
  pending: readonly Figure[] = [],
): Array<{ file: string; data: string }> {
  const full: ReportInputs = { ...inp, fitFigures: readFitFigures(dir, pending) };
  return [
    { file: path.join(dir, 'report.md'), data: validationMarkdown(chip, v, full) },
    { file: path.join(dir, 'report.html'), data: validationHtml(chip, v, full) },
    ...(v ? validationCharts(v).map((c) => ({ file: path.join(dir, c.name), data: c.svg })) : []),
  ];
}

/** Write the report (one atomic set); returns the paths written. */
export function writeReport(
  dir: string,
  chip: string,
  v: ValidationResult | null,
  inp: Omit<ReportInputs, 'fitFigures'> = {},
): string[] {
  const files = reportFiles(dir, chip, v, inp);
  writeFilesAtomic(files);
  return files.map((f) => f.file);
}
