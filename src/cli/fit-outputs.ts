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

/** Every entry of `sets` as `set/name` → its entry's JSON (the form the drift messages compare). */
function flat(sets: CoefficientSet[]): Map<string, string> {
  return new Map<string, string>(
    sets.flatMap((s) => s.coefficients.map((c) => [`${s.name}/${c.name}`, JSON.stringify(c.entry)] as const)),
  );
}

/** `set/name: added | changed` for each entry of `after` not equal in `before`; `removed` too when asked. */
function entryDrift(before: Map<string, string>, after: Map<string, string>, removed: boolean): string[] {
  const out: string[] = [];
  for (const [k, v] of after) {
    if (!before.has(k)) out.push(`${k}: added`);
    else if (before.get(k) !== v) out.push(`${k}: changed`);
  }
  if (removed) for (const k of before.keys()) if (!after.has(k)) out.push(`${k}: removed`);
  return out;
}

/**
 * `fit <family> --check` with the registry not redirected: the family's own entries (and those of
 * the families it is fitted from, e.g. hbm's gemm and decode entries) against the same entries of the
 * committed registry. A family-only fit writes nothing there and drops nothing (planFitOutputs), so
 * the entries it does not fit are not compared, and neither is the report (`fit all --check` checks
 * both). Returns drift messages (`set/name: added | changed`, or the file missing / unreadable),
 * empty when the family reproduces its committed entries.
 */
export function checkFamilyEntries(result: FitAllResult, opts: FitOutputOptions = {}): string[] {
  const file = fitOutputFiles(result, { ...opts, fitsDir: null }, { readme: '', figures: [] })[0]!.file;
  if (!existsSync(file)) return [`${file}: missing`];
  let before: Map<string, string>;
  try {
    before = flat(parseCoefficientSets(readText(file), file));
  } catch {
    return [`${file}: unreadable`];
  }
  return entryDrift(before, flat(result.sets), false);
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
      let before: Map<string, string>;
      try {
        before = flat(parseCoefficientSets(old, file));
      } catch {
        out.push(`${file}: unreadable`);
        continue;
      }
      const n0 = out.length;
      out.push(...entryDrift(before, flat(sets), true));
      if (out.length === n0) out.push(`${file}: text differs (formatting or order)`);
    } else {
      out.push(`${file}: ${old === undefined ? 'missing' : 'differs'}`);
    }
  }
  return out;
}
