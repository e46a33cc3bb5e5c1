/**
 * Reading, writing and resolving coefficient sets.
 */
import { UserError } from '../core/errors.ts';
import { readText } from '../core/io/fs.ts';
import type { CoefficientSet, NamedEntry, Scope } from '../core/schemas/registry.ts';
import { parseCoefficientSets } from '../core/schemas/registry-yaml.ts';

/**
 * Load a registry file (multi-document YAML).
 * @throws InputError naming the file and why it cannot be read (readText: not found, a folder, unreadable), or
 *   where it does not parse (parseCoefficientSets)
 */
export function loadRegistryFile(file: string): CoefficientSet[] {
  return parseCoefficientSets(readText(file), file);
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

/**
 * Coefficients resolved for one deployment: name → entry, last admitted entry wins. Records the names
 * whose values were read (`value`, `valueOr`), so a price can list the copied or assumed ones it used.
 */
export class ResolvedCoefficients {
  private readonly used = new Set<string>();
  constructor(readonly entries: ReadonlyMap<string, NamedEntry & { set: string }>) {}

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** Names whose values were read so far, sorted. */
  usedNames(): string[] {
    return [...this.used].sort();
  }

  /** @throws UserError listing known names when missing. */
  value(name: string): number {
    const e = this.entries.get(name);
    if (!e) {
      throw new UserError(
        `coefficient "${name}" is not in the registry for this deployment (known: ${[...this.entries.keys()].sort().join(', ')})`,
      );
    }
    this.used.add(name);
    return e.entry.value;
  }

  valueOr(name: string, fallback: number): number {
    const e = this.entries.get(name);
    if (!e) return fallback;
    this.used.add(name);
    return e.entry.value;
  }

  names(): string[] {
    return [...this.entries.keys()].sort();
  }
}

/** Resolve sets (in order) for a deployment scope. */
export function resolveCoefficients(sets: readonly CoefficientSet[], d: DeploymentScope): ResolvedCoefficients {
  const m = new Map<string, NamedEntry & { set: string }>();
  for (const s of sets)
    for (const c of s.coefficients) if (scopeMatches(c.entry.scope, d)) m.set(c.name, { ...c, set: s.name });
  return new ResolvedCoefficients(m);
}
