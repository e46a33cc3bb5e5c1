/**
 * Writing the accuracy report (edge module): `<dir>/report.md`, `<dir>/report.html` and the
 * validation charts `<dir>/validation-*.svg`, all in one atomic batch. The fitters' figures already
 * in `<dir>` (`*.svg` not starting with `validation-`) are inlined in the HTML and linked in the md.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { writeFilesAtomic } from '../core/io/fs.ts';
import type { ValidationResult } from '../validate/types.ts';
import { validationCharts, validationHtml, validationMarkdown, type ReportInputs } from './validation.ts';

/** Fitter figures in `dir` (sorted by name). */
export function readFitFigures(dir: string): Array<{ name: string; svg: string }> {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith('.svg') && !n.startsWith('validation-'))
    .sort()
    .map((name) => ({ name, svg: readFileSync(path.join(dir, name), 'utf8') }));
}

/** Write the report; returns the paths written. */
export function writeReport(dir: string, chip: string, v: ValidationResult | null, inp: Omit<ReportInputs, 'fitFigures'> = {}): string[] {
  const full: ReportInputs = { ...inp, fitFigures: readFitFigures(dir) };
  const files = [
    { file: path.join(dir, 'report.md'), data: validationMarkdown(chip, v, full) },
    { file: path.join(dir, 'report.html'), data: validationHtml(chip, v, full) },
    ...(v ? validationCharts(v).map((c) => ({ file: path.join(dir, c.name), data: c.svg })) : []),
  ];
  writeFilesAtomic(files);
  return files.map((f) => f.file);
}
