/**
 * The registry's file format: multi-document YAML of CoefficientSets (BLIS layout). Parsing and
 * serialising only; loading from disk and resolving by scope live in src/registry/load.ts.
 * Every document is parsed with `CoefficientSetDocSchema` (zod), so a loaded registry is typed data:
 * a NaN, a string where a number belongs or an unknown key is an error naming file, set, entry and field.
 */
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import type { z } from 'zod';
import { UserError } from '../errors.ts';
import { textMemo } from '../text-memo.ts';
import { parseBlockYaml } from './block-yaml.ts';
import { writeBlockYaml } from './block-yaml-writer.ts';
import { CoefficientSetDocSchema, type CoefficientEntry, type CoefficientSet, type NamedEntry } from './registry.ts';

/** `file: set S: entry E: field F: message` for the first zod issue of one document. */
export function describeSetIssue(source: string, doc: unknown, issue: z.core.$ZodIssue): string {
  const obj = (doc ?? {}) as { name?: unknown; coefficients?: unknown };
  const setName = typeof obj.name === 'string' ? obj.name : '(unnamed)';
  const p = issue.path;
  let where = `${source}: set ${setName}`;
  let rest = p;
  if (p[0] === 'coefficients' && typeof p[1] === 'number') {
    const item = Array.isArray(obj.coefficients)
      ? (obj.coefficients[p[1]] as Record<string, { scope?: { hardware?: unknown } }> | undefined)
      : undefined;
    const name =
      p[2] !== undefined ? String(p[2]) : item && typeof item === 'object' ? Object.keys(item).join(',') : `#${p[1]}`;
    const hw = item && typeof item === 'object' ? item[name]?.scope?.hardware : undefined;
    where += `: entry ${name}${Array.isArray(hw) && hw.length ? ` [hardware=${hw.join(',')}]` : ''}`;
    rest = p.slice(3);
  }
  if (rest.length) where += `: field ${rest.map(String).join('.')}`;
  return `${where}: ${issue.message}`;
}

/**
 * Parse one or more YAML documents of CoefficientSets, memoised per process on source and text
 * (core/text-memo.ts; at most 16 registries): the result is the caller's own copy.
 * @throws UserError naming `source`, set, entry and field.
 */
export const parseCoefficientSets: (text: string, source: string) => CoefficientSet[] = textMemo(
  16,
  (text: string, source: string) => parseSetsUncached(text, source),
);

function parseSetsUncached(text: string, source: string): CoefficientSet[] {
  const sets: CoefficientSet[] = [];
  // Every document is read as YAML first, so a YAML error anywhere is reported before a schema error.
  // The subset the writer emits is read directly (block-yaml.ts: same values); anything else, and
  // every error, goes through the full parser.
  const objs = (parseBlockYaml(text) as Array<Record<string, unknown> | null> | undefined) ?? parseFully(text, source);
  for (const obj of objs) {
    if (obj === null || obj === undefined) continue;
    if (obj.kind !== 'CoefficientSet')
      throw new UserError(`${source}: expected kind: CoefficientSet, got ${String(obj.kind)}`);
    const doc = CoefficientSetDocSchema.safeParse(obj);
    if (!doc.success) throw new UserError(describeSetIssue(source, obj, doc.error.issues[0]!));
    // The schema has no defaults or transforms, so the input is the parsed value; it is kept as read
    // (zod's output orders keys by the schema, and registry files must round-trip byte for byte).
    const coefficients: NamedEntry[] = (obj.coefficients as Array<Record<string, CoefficientEntry>>).map((item) => {
      const [name, entry] = Object.entries(item)[0]!;
      return { name, entry };
    });
    sets.push({ kind: 'CoefficientSet', name: doc.data.name, coefficients });
  }
  return sets;
}

/** Every document of `text` through the full YAML parser. @throws UserError naming `source` on a YAML error */
function parseFully(text: string, source: string): Array<Record<string, unknown> | null> {
  return parseAllDocuments(text).map((doc) => {
    if ('errors' in doc && doc.errors.length) throw new UserError(`${source}: YAML error: ${doc.errors[0]!.message}`);
    try {
      return doc.toJS() as Record<string, unknown> | null;
    } catch (err) {
      // yaml throws ReferenceError for an alias to another document's anchor and for alias bombs.
      throw new UserError(`${source}: YAML error: ${(err as Error).message}`);
    }
  });
}

/**
 * Serialize sets as multi-document YAML, in the order given (deterministic output): the `yaml`
 * package's `stringify` with `lineWidth: 0`, written by block-yaml-writer.ts when a set lies inside
 * its subset (the same bytes; every set the fitters write does) and by the package otherwise.
 */
export function stringifyCoefficientSets(sets: readonly CoefficientSet[]): string {
  return sets
    .map((s) => {
      const doc = { kind: s.kind, name: s.name, coefficients: s.coefficients.map((c) => ({ [c.name]: c.entry })) };
      return writeBlockYaml(doc) ?? stringifyYaml(doc, { lineWidth: 0, aliasDuplicateObjects: false });
    })
    .join('---\n');
}
