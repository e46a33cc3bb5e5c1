/**
 * Differences between two registries, keyed by entry identity (set, name, scope). Pure.
 */
import { fmtInterval, fmtSigExp } from '../core/render/format.ts';
import { entryKey, entryLabel, familyOf } from '../core/schemas/names.ts';
import type { CoefficientEntry, CoefficientSet } from '../core/schemas/registry.ts';

/** One entry present in both registries whose public fields or evidence differ. */
export interface ChangedEntry {
  set: string;
  name: string;
  label: string;
  family: string;
  old_value: number;
  new_value: number;
  /** (new − old)/|old|; null when old is 0. */
  relative_change: number | null;
  /** Fields that differ (`value`, `ci95`, `method`, `sources`, `evidence`, …). */
  fields: string[];
  old_ci95?: [number, number];
  new_ci95?: [number, number];
  /** True when both ci95 exist and intersect; null when either is missing. */
  ci_overlap: boolean | null;
}

export interface AddedOrRemoved {
  set: string;
  name: string;
  label: string;
  family: string;
  value: number;
  method: string;
}

export interface RegistryDiff {
  added: AddedOrRemoved[];
  removed: AddedOrRemoved[];
  changed: ChangedEntry[];
  unchanged: number;
}

interface Flat {
  set: string;
  name: string;
  entry: CoefficientEntry;
}

function flatten(sets: readonly CoefficientSet[]): Map<string, Flat> {
  const m = new Map<string, Flat>();
  for (const s of sets)
    for (const c of s.coefficients)
      m.set(`${s.name}\u0000${entryKey(c.name, c.entry.scope)}`, { set: s.name, name: c.name, entry: c.entry });
  return m;
}

/** Deterministic JSON (sorted keys) for comparing field values. */
export function canonicalJson(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(canonicalJson).join(',')}]`;
  if (x !== null && typeof x === 'object') {
    const o = x as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(x);
}

/** Fields of two entries that differ (scope compared as sets). */
export function changedFields(a: CoefficientEntry, b: CoefficientEntry): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const out: string[] = [];
  for (const k of [...keys].sort()) {
    const av = (a as unknown as Record<string, unknown>)[k];
    const bv = (b as unknown as Record<string, unknown>)[k];
    if (k === 'scope') {
      if (entryKey('', a.scope) !== entryKey('', b.scope)) out.push(k);
    } else if (canonicalJson(av) !== canonicalJson(bv)) out.push(k);
  }
  return out;
}

/** True when [a0, a1] and [b0, b1] intersect. */
export function intervalsOverlap(a: readonly [number, number], b: readonly [number, number]): boolean {
  return a[0] <= b[1] && b[0] <= a[1];
}

/** Diff `oldSets` → `newSets`. Order: by set, then name, as they appear. */
export function diffRegistries(oldSets: readonly CoefficientSet[], newSets: readonly CoefficientSet[]): RegistryDiff {
  const a = flatten(oldSets);
  const b = flatten(newSets);
  const d: RegistryDiff = { added: [], removed: [], changed: [], unchanged: 0 };
  const ar = (f: Flat): AddedOrRemoved => ({
    set: f.set,
    name: f.name,
    label: entryLabel(f.name, f.entry.scope),
    family: familyOf(f.name, f.entry),
    value: f.entry.value,
    method: f.entry.method,
  });
  for (const [k, f] of a) if (!b.has(k)) d.removed.push(ar(f));
  for (const [k, f] of b) {
    const o = a.get(k);
    if (!o) {
      d.added.push(ar(f));
      continue;
    }
    const fields = changedFields(o.entry, f.entry);
    if (fields.length === 0) {
      d.unchanged++;
      continue;
    }
    const oc = o.entry.ci95;
    const nc = f.entry.ci95;
    d.changed.push({
      set: f.set,
      name: f.name,
      label: entryLabel(f.name, f.entry.scope),
      family: familyOf(f.name, f.entry),
      old_value: o.entry.value,
      new_value: f.entry.value,
      relative_change: o.entry.value === 0 ? null : (f.entry.value - o.entry.value) / Math.abs(o.entry.value),
      fields,
      ...(oc ? { old_ci95: oc } : {}),
      ...(nc ? { new_ci95: nc } : {}),
      ci_overlap: oc && nc ? intervalsOverlap(oc, nc) : null,
    });
  }
  return d;
}

/** 6 significant digits, exponent form (4 decimals) for |x| ≥ 1e5 or < 1e-3. */
const fmtNum = (x: number) => fmtSigExp(x, 6, { expAbove: 1e5, expBelow: 1e-3, expDigits: 4 });
const fmtCi = (c?: [number, number]) => fmtInterval(c, fmtNum);

/** Human-readable diff: one line per added/removed entry, a table of changed ones. */
export function formatDiff(d: RegistryDiff): string {
  const lines: string[] = [];
  lines.push(
    `added ${d.added.length}, removed ${d.removed.length}, changed ${d.changed.length}, unchanged ${d.unchanged}`,
  );
  for (const x of d.added) lines.push(`+ ${x.set}: ${x.label} = ${fmtNum(x.value)} (${x.method})`);
  for (const x of d.removed) lines.push(`- ${x.set}: ${x.label} = ${fmtNum(x.value)} (${x.method})`);
  if (d.changed.length) {
    lines.push('~ changed:');
    lines.push('  set | entry | old | new | rel. change | old ci95 | new ci95 | ci overlap | fields');
    for (const c of d.changed) {
      const rel = c.relative_change === null ? 'n/a' : `${(100 * c.relative_change).toFixed(2)}%`;
      const ov = c.ci_overlap === null ? 'n/a' : c.ci_overlap ? 'yes' : 'NO';
      lines.push(
        `  ${c.set} | ${c.label} | ${fmtNum(c.old_value)} | ${fmtNum(c.new_value)} | ${rel} | ${fmtCi(c.old_ci95)} | ${fmtCi(c.new_ci95)} | ${ov} | ${c.fields.join(',')}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}
