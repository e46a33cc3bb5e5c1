/**
 * Reading, writing and resolving coefficient sets.
 */
import { parseAllDocuments, stringify as stringifyYaml } from 'yaml';
import { UserError } from '../common/errors.ts';
import { readText, writeFileAtomic } from '../common/fs.ts';
import type { CoefficientEntry, CoefficientSet, NamedEntry, Scope } from './types.ts';

/** Parse one or more YAML documents of CoefficientSets. @throws UserError naming `source`. */
export function parseCoefficientSets(text: string, source: string): CoefficientSet[] {
  const sets: CoefficientSet[] = [];
  for (const doc of parseAllDocuments(text)) {
    if ('errors' in doc && doc.errors.length) throw new UserError(`${source}: YAML error: ${doc.errors[0]!.message}`);
    const obj = doc.toJS() as Record<string, unknown> | null;
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

/** Load a registry file (multi-document YAML). */
export function loadRegistryFile(file: string): CoefficientSet[] {
  let text: string;
  try {
    text = readText(file);
  } catch {
    throw new UserError(`cannot read registry file ${file}`);
  }
  return parseCoefficientSets(text, file);
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

/** Write sets atomically. */
export function writeRegistryFile(file: string, sets: readonly CoefficientSet[]): void {
  writeFileAtomic(file, stringifyCoefficientSets(sets));
}

/** A deployment's scope values, matched against entry scopes. */
export interface DeploymentScope {
  hardware: string;
  model?: string;
  tp?: number;
  ep?: number;
  nodes_spanned?: number;
}

/** True when every dimension the entry states contains the deployment's value (reference §1.2). */
export function scopeMatches(scope: Scope, d: DeploymentScope): boolean {
  if (scope.hardware && !scope.hardware.some((h) => h.toLowerCase() === d.hardware.toLowerCase())) return false;
  if (scope.model && (d.model === undefined || !scope.model.some((m) => m.toLowerCase() === d.model!.toLowerCase())))
    return false;
  if (scope.tp && (d.tp === undefined || !scope.tp.includes(d.tp))) return false;
  if (scope.ep && (d.ep === undefined || !scope.ep.includes(d.ep))) return false;
  if (scope.nodes_spanned && (d.nodes_spanned === undefined || !scope.nodes_spanned.includes(d.nodes_spanned)))
    return false;
  return true;
}

/** Coefficients resolved for one deployment: name → entry, last admitted entry wins. */
export class ResolvedCoefficients {
  constructor(readonly entries: ReadonlyMap<string, NamedEntry & { set: string }>) {}

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** @throws UserError listing known names when missing. */
  value(name: string): number {
    const e = this.entries.get(name);
    if (!e) {
      throw new UserError(
        `coefficient "${name}" is not in the registry for this deployment (known: ${[...this.entries.keys()].sort().join(', ')})`,
      );
    }
    return e.entry.value;
  }

  valueOr(name: string, fallback: number): number {
    return this.entries.get(name)?.entry.value ?? fallback;
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }
}

/** Resolve sets (in order) for a deployment scope. */
export function resolveCoefficients(sets: readonly CoefficientSet[], d: DeploymentScope): ResolvedCoefficients {
  const m = new Map<string, NamedEntry & { set: string }>();
  for (const s of sets) for (const c of s.coefficients) if (scopeMatches(c.entry.scope, d)) m.set(c.name, { ...c, set: s.name });
  return new ResolvedCoefficients(m);
}
