/**
 * What a coefficient name says: its fitting family, and for collectives the (op, dtype, ranks,
 * chip) it encodes. Names are an interface (reference §1.3), so these parsers follow that table.
 */
import type { CoefficientEntry, Scope } from './registry.ts';

/**
 * Family of a coefficient, from `evidence.family` when present, else from its name
 * (reference §1.3 name patterns). Returns 'other' for names no pattern covers.
 */
export function familyOf(name: string, entry?: Pick<CoefficientEntry, 'evidence'>): string {
  const ev = entry?.evidence?.family;
  if (typeof ev === 'string' && ev.length > 0) return ev;
  return familyOfName(name);
}

/** Family from the name alone (reference §1.3). */
export function familyOfName(name: string): string {
  if (name.startsWith('gemm_')) return 'gemm';
  if (name === 'hbm_derate' || name.startsWith('hbm_')) return 'hbm';
  if (name.startsWith('attention_decode_')) return 'attention_decode';
  if (name.startsWith('attention_prefill_')) return 'attention_prefill';
  if (name.startsWith('collective_')) return 'collective';
  if (name.startsWith('moe_')) return 'moe';
  if (name.startsWith('host_')) return 'host';
  if (name.startsWith('recurrent_')) return 'recurrent';
  if (name.startsWith('mla_')) return 'mla';
  if (name.startsWith('expert_alltoall_')) return 'expert_alltoall';
  if (name.startsWith('sparse_') || name.startsWith('indexer_') || name.startsWith('mhc_')) return 'sparse';
  if (
    name.startsWith('nccl_communicator_bytes_') ||
    name.startsWith('activation_') ||
    name.startsWith('cudagraph_capture_bytes_') ||
    name === 'engine_workspace_bytes'
  )
    return 'memory';
  if (name === 'p2p_latency') return 'collective';
  return 'other';
}

/** Parts of a collective coefficient name `collective_<param>_<op>_<dtype>_<N>rank_<chip>`. */
export interface CollectiveName {
  param: 'floor' | 'peak_rate' | 'transition_rate';
  op: string;
  dtype: string;
  ranks: number;
  /** Chip as written in the name (catalog name with '-' → '_'). */
  chip: string;
}

const COLLECTIVE_RE =
  /^collective_(floor|peak_rate|transition_rate)_(all_reduce|all_gather|reduce_scatter|alltoall)_([a-z0-9]+)_(\d+)rank_([a-z0-9_]+)$/;

/** Parse a collective name; undefined when it is not one. */
export function parseCollectiveName(name: string): CollectiveName | undefined {
  const m = COLLECTIVE_RE.exec(name);
  if (!m) return undefined;
  return {
    param: m[1] as CollectiveName['param'],
    op: m[2]!,
    dtype: m[3]!,
    ranks: Number(m[4]),
    chip: m[5]!,
  };
}

/** Build a collective name (reference §1.3); `chip` '-' becomes '_'. */
export function collectiveName(c: CollectiveName): string {
  return `collective_${c.param}_${c.op}_${c.dtype}_${c.ranks}rank_${c.chip.replace(/-/g, '_')}`;
}

/**
 * A name with any chip suffix removed, so the same coefficient can be compared across chips
 * (`collective_floor_all_reduce_fp16_8rank_h200` → `collective_floor_all_reduce_fp16_8rank`).
 */
export function chipFreeName(name: string): string {
  const ep = EXPERT_ALLTOALL_RE.exec(name);
  if (ep) return ep[1]!;
  const c = parseCollectiveName(name);
  if (!c) return name;
  return `collective_${c.param}_${c.op}_${c.dtype}_${c.ranks}rank`;
}

/** Re-attach a chip to a chip-free name (inverse of `chipFreeName` for collectives and expert all-to-alls). */
export function nameForChip(chipFree: string, chip: string): string {
  return chipFree.startsWith('collective_') || chipFree.startsWith('expert_alltoall_')
    ? `${chipFree}_${chip.replace(/-/g, '_')}`
    : chipFree;
}

/** `expert_alltoall_<param>_<mode>_<phase>_<N>rank_<chip>` (src/fit/expert-a2a.ts): [1] chip-free part, [2] chip. */
export const EXPERT_ALLTOALL_RE = /^(expert_alltoall_[a-z_]+_\d+rank)_(.+)$/;

/** Canonical text of a scope: keys sorted, list values sorted (lists compare as sets, reference §1.1). */
export function scopeKey(scope: Scope | undefined): string {
  if (!scope || typeof scope !== 'object') return '{}';
  const parts: string[] = [];
  for (const k of Object.keys(scope).sort()) {
    const v = (scope as Record<string, unknown>)[k];
    const list = Array.isArray(v)
      ? [...v].map((x) => (typeof x === 'string' ? x.toLowerCase() : String(x))).sort()
      : [String(v)];
    parts.push(`${k}=${list.join(',')}`);
  }
  return `{${parts.join(';')}}`;
}

/** Identity of an entry: (name, scope) with scope lists compared as sets. */
export function entryKey(name: string, scope: Scope | undefined): string {
  return `${name} ${scopeKey(scope)}`;
}

/** True when the entry is scoped to `chip` (case-insensitive, '-' and '_' equivalent). */
export function scopedToChip(scope: Scope | undefined, chip: string): boolean {
  const norm = (s: string) => s.toLowerCase().replace(/-/g, '_');
  return !!scope?.hardware?.some((h) => norm(String(h)) === norm(chip));
}

/** A short label for messages: `name [hardware=h200]`. */
export function entryLabel(name: string, scope: Scope | undefined): string {
  const hw = scope?.hardware;
  return hw?.length ? `${name} [hardware=${hw.join(',')}]` : name;
}
