/**
 * Writing a fit (edge module of the command layer): registry/<chip>.yaml, fits/<chip>/README.md and
 * fits/<chip>/*.svg in one atomic batch, or, for `--check`, comparing them with what is on disk.
 * The text comes from src/report/fit.ts (`fitOutputFiles`, `renderFitReport`); this is the only
 * place a fit touches the disk.
 */
import { existsSync } from 'node:fs';
import { UserError } from '../core/errors.ts';
import { readText, writeFilesAtomic } from '../core/io/fs.ts';
import { parseCoefficientSets } from '../core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import type { FitAllResult } from '../fit/index.ts';
import { type FitOutputOptions, type FitReport, fitOutputFiles, renderFitReport } from '../report/fit.ts';

/**
 * Write registry/<chip>.yaml, fits/<chip>/*.svg and fits/<chip>/README.md atomically (all or none;
 * paths per `FitOutputOptions`), drawn by `renderFitReport` unless `report` is given.
 * @throws UserError (writing nothing) when any family refused or any gate failed.
 */
export function writeFitOutputs(
  result: FitAllResult,
  opts: FitOutputOptions = {},
  report: FitReport = renderFitReport(result),
): string[] {
  if (result.refusals.length) {
    throw new UserError(`fit ${result.chip}: refused, nothing written:\n  ${result.refusals.join('\n  ')}`);
  }
  const files = fitOutputFiles(result, opts, report);
  writeFilesAtomic(files);
  return files.map((f) => f.file);
}

/**
 * Compare a fit with what is on disk. Returns drift messages naming registry entries (added,
 * removed, changed) and other files that would change; empty when clean.
 */
export function checkFitOutputs(
  result: FitAllResult,
  opts: FitOutputOptions = {},
  report: FitReport = renderFitReport(result),
): string[] {
  return driftOfFiles(fitOutputFiles(result, opts, report), result.sets);
}

/**
 * Compare the files a fit would write (`files`, absolute or cwd-relative paths, with the fit's
 * coefficient `sets`) with what is on disk; the messages of `checkFitOutputs`, empty when clean.
 */
export function driftOfFiles(files: ReadonlyArray<{ file: string; data: string }>, sets: CoefficientSet[]): string[] {
  const out: string[] = [];
  for (const { file, data } of files) {
    const old = existsSync(file) ? readText(file) : undefined;
    if (old === data) continue;
    if (file.endsWith('.yaml')) {
      if (old === undefined) {
        out.push(`${file}: missing`);
        continue;
      }
      const flat = (sets: CoefficientSet[]): Map<string, string> =>
        new Map<string, string>(
          sets.flatMap((s) => s.coefficients.map((c) => [`${s.name}/${c.name}`, JSON.stringify(c.entry)] as const)),
        );
      let before: Map<string, string>;
      try {
        before = flat(parseCoefficientSets(old, file));
      } catch {
        out.push(`${file}: unreadable`);
        continue;
      }
      const after = flat(sets);
      const n0 = out.length;
      for (const [k, v] of after) {
        if (!before.has(k)) out.push(`${k}: added`);
        else if (before.get(k) !== v) out.push(`${k}: changed`);
      }
      for (const k of before.keys()) if (!after.has(k)) out.push(`${k}: removed`);
      if (out.length === n0) out.push(`${file}: text differs (formatting or order)`);
    } else {
      out.push(`${file}: ${old === undefined ? 'missing' : 'differs'}`);
    }
  }
  return out;
}
