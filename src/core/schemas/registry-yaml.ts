/**
 * The registry's file format: multi-document YAML of CoefficientSets (BLIS layout). Parsing and
 * serialising only; loading from disk and resolving by scope live in src/registry/load.ts.
 */
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { UserError } from '../errors.ts';
import type { CoefficientEntry, CoefficientSet, NamedEntry } from './registry.ts';

/** Parse one or more YAML documents of CoefficientSets. @throws UserError naming `source`. */
export function parseCoefficientSets(text: string, source: string): CoefficientSet[] {
  const sets: CoefficientSet[] = [];
  for (const doc of parseAllDocuments(text)) {
    if ('errors' in doc && doc.errors.length) throw new UserError(`${source}: YAML error: ${doc.errors[0]!.message}`);
    let obj: Record<string, unknown> | null;
    try {
      obj = doc.toJS() as Record<string, unknown> | null;
    } catch (err) {
      // yaml throws ReferenceError for an alias to another document's anchor and for alias bombs.
      throw new UserError(`${source}: YAML error: ${(err as Error).message}`);
    }
    if (obj === null || obj === undefined) continue;
    if (obj.kind !== 'CoefficientSet') throw new UserError(`${source}: expected kind: CoefficientSet, got ${String(obj.kind)}`);
    if (typeof obj.name !== 'string') throw new UserError(`${source}: set has no name`);
    if (!Array.isArray(obj.coefficients)) throw new UserError(`${source}: set ${obj.name}: coefficients must be a list`);
    const coefficients: NamedEntry[] = obj.coefficients.map((item: unknown, i: number) => {
      if (item === null || typeof item !== 'object' || Object.keys(item).length !== 1) {
        throw new UserError(`${source}: set ${obj.name} coefficient #${i}: expected a single-key map {name: entry}`);
      }
      const [name, entry] = Object.entries(item as Record<string, CoefficientEntry>)[0]!;
      return { name, entry };
    });
    sets.push({ kind: 'CoefficientSet', name: obj.name, coefficients });
  }
  return sets;
}

/** Serialize sets as multi-document YAML, in the order given (deterministic output). */
export function stringifyCoefficientSets(sets: readonly CoefficientSet[]): string {
  return sets
    .map((s) =>
      stringifyYaml(
        { kind: s.kind, name: s.name, coefficients: s.coefficients.map((c) => ({ [c.name]: c.entry })) },
        { lineWidth: 0, aliasDuplicateObjects: false },
      ),
    )
    .join('---\n');
}
