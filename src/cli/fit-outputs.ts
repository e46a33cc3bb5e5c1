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

/** `set/name` → the family that fitted it (`evidence.family`), for every entry of `sets`. */
function familyOf(sets: CoefficientSet[]): Map<string, string> {
  return new Map(
    sets.flatMap((s) => s.coefficients.map((c) => [`${s.name}/${c.name}`, c.entry.evidence?.family ?? ''] as const)),
  );
}

/**
 * `set/name: added | changed` for each entry of `after` not equal in `before`, and `removed` for each
 * entry of `before` missing from `after` that `dropped` counts (every one for a whole fit; the fitted
 * families' own for a family-only check).
 */
function entryDrift(
  before: Map<string, string>,
  after: Map<string, string>,
  dropped: (key: string) => boolean,
): string[] {
  const out: string[] = [];
  for (const [k, v] of after) {
    if (!before.has(k)) out.push(`${k}: added`);
    else if (before.get(k) !== v) out.push(`${k}: changed`);
  }
  for (const k of before.keys()) if (!after.has(k) && dropped(k)) out.push(`${k}: removed`);
  return out;
}

/** The registry file a fit writes (`registry/<chip>.yaml` or `--registry-out`). */
export function registryOutputFile(result: FitAllResult, opts: FitOutputOptions = {}): string {
  return fitOutputFiles(result, { ...opts, fitsDir: null }, { readme: '', figures: [] })[0]!.file;
}

/** A registry text's sets (`undefined`: the file is absent), or the one-line drift message saying why it cannot be compared. */
function parsedOrDrift(text: string | undefined, file: string): CoefficientSet[] | string {
  if (text === undefined) return `${file}: missing`;
  try {
    return parseCoefficientSets(text, file);
  } catch (e) {
    return `${file}: unreadable (${(e as Error).message.split('\n')[0]})`;
  }
}

/** A registry file's sets, or the drift message of parsedOrDrift. */
const setsOnDisk = (file: string): CoefficientSet[] | string =>
  parsedOrDrift(existsSync(file) ? readText(file) : undefined, file);

/**
 * `fit <family> --check`: the entries the run fits (the family's and those of the families it is fitted
 * from, e.g. hbm's gemm and decode entries) against the same entries of the registry file
 * (`registry/<chip>.yaml`, or `--registry-out`). An entry of a fitted family that the file holds and
 * the run no longer produces is `removed`; the other families' entries are not compared, and neither
 * is the report (`fit all --check` checks both). Empty when the family reproduces its entries.
 */
export function checkFamilyEntries(result: FitAllResult, opts: FitOutputOptions = {}): string[] {
  const disk = setsOnDisk(registryOutputFile(result, opts));
  if (typeof disk === 'string') return [disk];
  const fitted = new Set(familyOf(result.sets).values());
  const before = familyOf(disk);
  return entryDrift(flat(disk), flat(result.sets), (k) => fitted.has(before.get(k)!));
}

/**
 * The entries of an existing `--registry-out` file that a family-only fit would drop by writing its
 * partial registry over it (the other families' entries), as `set/name`; empty when the file is absent
 * or holds only what the run fits. `fit <family>` refuses to write over such a file.
 * @throws UserError when the file exists but cannot be read as a registry
 */
export function partialFitDrops(result: FitAllResult, opts: FitOutputOptions = {}): string[] {
  const file = registryOutputFile(result, opts);
  if (!existsSync(file)) return [];
  const disk = setsOnDisk(file);
  if (typeof disk === 'string') throw new UserError(`fit ${result.chip}: --registry-out ${disk}; nothing written`);
  const after = flat(result.sets);
  return [...flat(disk).keys()].filter((k) => !after.has(k));
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
      const disk = parsedOrDrift(old, file);
      if (typeof disk === 'string') {
        out.push(disk);
        continue;
      }
      const n0 = out.length;
      out.push(...entryDrift(flat(disk), flat(sets), () => true));
      if (out.length === n0) out.push(`${file}: text differs (formatting or order)`);
    } else {
      out.push(`${file}: ${old === undefined ? 'missing' : 'differs'}`);
    }
  }
  return out;
}
