/**
 * Export to and import from BLIS's strict public CoefficientSet layout (reference §1.1).
 *
 * Export: one file per (CoefficientSet, hardware scope), `<hardware>/<set name>.yaml`, with the
 * `evidence` key stripped and nothing else changed (value, units, method, fitted, scope, sources,
 * rationale, ci95, copied_from and BLIS's optional keys are kept verbatim). Entries scoped to no
 * hardware go under `any/`, entries scoped to several parts under `<a>+<b>/`.
 * DECISION: nothing from `evidence` is folded into `rationale` or `sources`, so the round trip
 * export → import reproduces every public field exactly; the evidence stays in stepcal's registry.
 *
 * Import: reads such files back, keeps the entries scoped to one chip, merges sets by name in
 * first-seen order, and checks them under the strict layout (an `evidence` key is an error there).
 */
import { groupBy } from '../core/numeric/stats.ts';
import { stringify as stringifyYaml } from 'yaml';
import { UserError } from '../core/errors.ts';
import { parseCoefficientSets } from '../core/schemas/registry-yaml.ts';
import { scopedToChip } from '../core/schemas/names.ts';
import type { CoefficientEntry, CoefficientSet, NamedEntry } from '../core/schemas/registry.ts';
import { BLIS_ENTRY_KEYS, errorsOf, formatProblem, validateRegistry, type ValidateOptions } from './validate.ts';

/** Entry with `evidence` removed and keys in BLIS's documented order. */
export function toBlisEntry(e: CoefficientEntry): CoefficientEntry {
  const src = e as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of BLIS_ENTRY_KEYS) if (src[k] !== undefined) out[k] = src[k];
  return out as unknown as CoefficientEntry;
}

/** Directory key of a scope's hardware list. */
export function hardwareKey(e: CoefficientEntry): string {
  const hw = e.scope?.hardware;
  if (!hw || hw.length === 0) return 'any';
  return [...hw]
    .map((h) => h.toLowerCase())
    .sort()
    .join('+');
}

/** One exported file. */
export interface ExportedFile {
  /** Path relative to the export directory: `<hardware>/<set>.yaml`. */
  path: string;
  hardware: string;
  set: CoefficientSet;
  text: string;
}

/** Serialize one set in the strict layout (single document). */
export function stringifyBlisSet(s: CoefficientSet): string {
  return stringifyYaml(
    {
      kind: 'CoefficientSet',
      name: s.name,
      coefficients: s.coefficients.map((c) => ({ [c.name]: toBlisEntry(c.entry) })),
    },
    { lineWidth: 0, aliasDuplicateObjects: false },
  );
}

/** Split sets by hardware scope into strict-layout files (pure; deterministic order). */
export function exportBlis(sets: readonly CoefficientSet[]): ExportedFile[] {
  const entries = sets.flatMap((s) => s.coefficients.map((c) => ({ set: s.name, c })));
  const groups = groupBy(entries, (x) => hardwareKey(x.c.entry));
  const out: ExportedFile[] = [];
  for (const hw of [...groups.keys()].sort()) {
    for (const [setName, list] of groupBy(groups.get(hw)!, (x) => x.set)) {
      const coefficients: NamedEntry[] = list.map(({ c }) => ({ name: c.name, entry: toBlisEntry(c.entry) }));
      const set: CoefficientSet = { kind: 'CoefficientSet', name: setName, coefficients };
      out.push({ path: `${hw}/${setName}.yaml`, hardware: hw, set, text: stringifyBlisSet(set) });
    }
  }
  return out;
}

/** Result of importing strict-layout files for one chip. */
export interface BlisImport {
  sets: CoefficientSet[];
  /** Entries skipped because they are scoped to other hardware. */
  skipped_other_hardware: number;
}

/**
 * Read strict-layout files back, keeping entries scoped to `chip`.
 * @param files name and text of each file
 * @throws UserError listing every schema/physics error (file, entry, field) when any file is invalid
 */
export function importBlis(
  files: ReadonlyArray<{ file: string; text: string }>,
  chip: string,
  opts: ValidateOptions = {},
): BlisImport {
  const merged = new Map<string, NamedEntry[]>();
  let skipped = 0;
  const errors: string[] = [];
  for (const { file, text } of files) {
    const sets = parseCoefficientSets(text, file);
    errors.push(...errorsOf(validateRegistry(sets, file, { ...opts, strictBlis: true })).map(formatProblem));
    for (const s of sets) {
      let list = merged.get(s.name);
      if (!list) {
        list = [];
        merged.set(s.name, list);
      }
      for (const c of s.coefficients) {
        if (scopedToChip(c.entry.scope, chip)) list.push(c);
        else skipped++;
      }
    }
  }
  if (errors.length) throw new UserError(`strict-layout import refused:\n${errors.join('\n')}`);
  const sets = [...merged]
    .filter(([, l]) => l.length > 0)
    .map(([name, coefficients]) => ({ kind: 'CoefficientSet' as const, name, coefficients }));
  const all = validateRegistry(sets, `<imported for ${chip}>`, opts);
  const dup = errorsOf(all).filter((p) => p.check === 'schema');
  if (dup.length) throw new UserError(`strict-layout import refused:\n${dup.map(formatProblem).join('\n')}`);
  return { sets, skipped_other_hardware: skipped };
}
