/**
 * Registry validation: schema checks (BLIS's strict CoefficientSet rules, reference §1.1) and
 * physics checks (the registry's property tests, reference §6.4). Pure over parsed sets; the
 * file-reading wrapper sits at the end.
 *
 * Every problem names the file, the set, the entry (name and hardware scope) and the field.
 */
import { parseAllDocuments } from 'yaml';
import type { Chip } from '../core/catalog/chip.ts';
import { loadChip } from '../core/catalog/chip.ts';
import { readText } from '../core/io/fs.ts';
import { parseCoefficientSets } from '../core/schemas/registry-yaml.ts';
import { textMemo } from '../core/text-memo.ts';
import { entryKey, entryLabel, parseCollectiveName, scopedToChip } from '../core/schemas/names.ts';
import type { CoefficientSet, NamedEntry } from '../core/schemas/registry.ts';
import { CoefficientEntrySchema, METHODS, UNITS } from '../core/schemas/registry.ts';
import { InputError, UserError } from '../core/errors.ts';
import { FLOOR_MAX_US, FLOOR_MIN_US } from '../measurements/units.ts';

/** One thing wrong with a registry file. */
export interface Problem {
  file: string;
  /** Set name, when the problem is inside a set. */
  set?: string;
  /** Entry label `name [hardware=…]`, when the problem is about an entry. */
  entry?: string;
  /** Field path inside the entry (`ci95`, `sources[0].role`) or the set (`kind`). */
  field?: string;
  check: 'schema' | 'physics';
  severity: 'error' | 'warning';
  message: string;
}

/** `file: set S: entry E: field F: message`. */
export function formatProblem(p: Problem): string {
  let s = p.file;
  if (p.set !== undefined) s += `: set ${p.set}`;
  if (p.entry !== undefined) s += `: entry ${p.entry}`;
  if (p.field !== undefined) s += `: field ${p.field}`;
  return `${s}: ${p.severity === 'warning' ? 'warning: ' : ''}${p.message}`;
}

/** Options for `validateRegistry`. */
export interface ValidateOptions {
  /**
   * Chip facts by name, for the physics checks. Default: `loadChip(name)` from the catalog; a chip
   * that cannot be found yields one warning and its physics checks are skipped.
   */
  chip?: (name: string) => Chip | undefined;
  /**
   * Strict public layout (files written by `registry export --format blis`): `evidence` is then an
   * unknown key like any other. Default false (stepcal's superset allows it).
   */
  strictBlis?: boolean;
  /**
   * The chip whose registry file this is (`registry/<chip>.yaml`): an entry scoped to other hardware
   * only is then an error (it would never resolve for this chip, or was pasted from another file).
   * Default: none (a multi-chip file such as BLIS's export is allowed).
   */
  fileChip?: string;
}

/** Entry keys BLIS's strict decoder accepts (reference §1.1). */
export const BLIS_ENTRY_KEYS = [
  'value',
  'units',
  'method',
  'fitted',
  'scope',
  'sources',
  'rationale',
  'ci95',
  'copied_from',
  'supersedes',
  'validated',
  'unsupported',
] as const;
const SCOPE_KEYS = new Set(['hardware', 'model', 'tp', 'ep', 'nodes_spanned']);
const SOURCE_KINDS = new Set(['discussion', 'publication', 'datasheet', 'model', 'vendor_doc']);
const SOURCE_ROLES = new Set(['primary', 'supporting', 'upper_bound']);
const SOURCE_KEYS = new Set(['kind', 'cite', 'role']);

/**
 * Physics bounds, stated once (reference §6.4 property tests).
 * - GEMM eps_max is a fraction of the dense datasheet peak: (0, EPS_MAX_UPPER] is the error bound; a value
 *   above EPS_MAX_WARN (1.0, the datasheet peak itself) is a warning — the asymptote sits above the peak,
 *   which the slack allows for boost clocks and datasheet rounding but a reader should see.
 * - A ci95 whose upper bound exceeds the datasheet rate the value is held to (eps_max 1.0, HBM rate, link
 *   bound) is a warning naming the entry: the value passes, its uncertainty reaches past the datasheet.
 * - Collective rates, converted to nccl-tests bus bandwidth (all_reduce ×2(n−1)/n, the others
 *   ×(n−1)/n), must not exceed LINK_SLACK × the chip's per-direction NVLink (or PCIe, for parts
 *   without NVLink) rate. The slack covers NVLS in-switch reduction (≈1.07× on Hopper) and
 *   measurement noise; it catches units slips (×2 byte/element, ×8 bit/byte, ×1000 ms/µs).
 *   Widths beyond one node are held to the same intra-domain bound: the pricer charges crossing
 *   traffic separately (reference §4.7 Span).
 * - Attention decode rates (bytes_per_us) ≤ the chip's datasheet HBM rate (no derate, no slack).
 * - Per-kind decode floors ≤ KIND_FLOOR_MULTIPLE × the part-wide floor.
 * - Collective floors in [0.5 µs, 10 ms] and attention floors ≤ 10 ms (src/measurements/units.ts floor band).
 */
export const EPS_MAX_UPPER = 1.05;
export const EPS_MAX_WARN = 1.0;
export const LINK_SLACK = 1.25;
export const KIND_FLOOR_MULTIPLE = 3;

/** nccl-tests bus-bandwidth factor for an op at `n` ranks. */
export function busBandwidthFactor(op: string, n: number): number {
  if (n <= 1) return 1;
  return op === 'all_reduce' ? (2 * (n - 1)) / n : (n - 1) / n;
}

/** The upper bound on a collective rate (bytes/µs, algorithm bandwidth) for `op` at `n` ranks. */
export function collectiveRateBound(chip: Chip, op: string, n: number): number {
  return (LINK_SLACK * chip.nvlink_bytes_per_us) / busBandwidthFactor(op, n);
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return x !== null && typeof x === 'object' && !Array.isArray(x);
}
const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);

function defaultChipLookup(): (name: string) => Chip | undefined {
  const cache = new Map<string, Chip | undefined>();
  return (name) => {
    const key = name.toLowerCase().replace(/_/g, '-');
    if (!cache.has(key)) {
      let chip: Chip | undefined;
      for (const candidate of [key, key.replace(/-/g, '_'), key.replace(/-sxm$/, '').replace(/-nvl72$/, '')]) {
        try {
          chip = loadChip(candidate);
          break;
        } catch {
          /* try the next spelling */
        }
      }
      cache.set(key, chip);
    }
    return cache.get(key);
  };
}

/** Schema checks of one entry. */
function checkEntrySchema(
  c: NamedEntry,
  at: Omit<Problem, 'check' | 'severity' | 'message' | 'field'>,
  strictBlis: boolean,
): Problem[] {
  const out: Problem[] = [];
  const err = (field: string | undefined, message: string) =>
    out.push({ ...at, field, check: 'schema', severity: 'error', message });
  const e = c.entry as unknown;
  if (!isRecord(e)) {
    err(undefined, 'entry must be a map of fields');
    return out;
  }
  if (!/^[a-z][a-z0-9_]*$/.test(c.name)) err('name', `name "${c.name}" must be lower_snake_case`);
  const allowed = new Set<string>(BLIS_ENTRY_KEYS);
  if (!strictBlis) allowed.add('evidence');
  for (const k of Object.keys(e)) {
    if (!allowed.has(k)) err(k, `unknown key "${k}" (allowed: ${[...allowed].join(', ')})`);
  }
  for (const k of ['value', 'units', 'method', 'fitted', 'scope']) if (!(k in e)) err(k, 'required field is missing');

  const method = e.method;
  if ('method' in e && !(METHODS as readonly unknown[]).includes(method))
    err('method', `"${String(method)}" is not one of ${METHODS.join(', ')}`);
  if ('units' in e && !(UNITS as readonly unknown[]).includes(e.units))
    err('units', `"${String(e.units)}" is not one of ${UNITS.join(', ')}`);
  if ('value' in e) {
    if (!finite(e.value))
      err(
        'value',
        `must be a finite number, got ${typeof e.value === 'number' ? String(e.value) : JSON.stringify(e.value)}`,
      );
    else if (e.value === 0 && method !== 'not_charged') err('value', '0 is allowed only with method: not_charged');
  }
  if ('fitted' in e) {
    if (typeof e.fitted !== 'boolean') err('fitted', `must be true or false, got ${JSON.stringify(e.fitted)}`);
    else if (e.fitted && method !== 'measured')
      err('fitted', `fitted: true is allowed only with method: measured (method is ${String(method)})`);
  }
  if ('scope' in e) {
    const s = e.scope;
    if (!isRecord(s) || Object.keys(s).length === 0) err('scope', 'must be a map with at least one dimension');
    else {
      for (const [k, v] of Object.entries(s)) {
        if (!SCOPE_KEYS.has(k)) err(`scope.${k}`, `unknown scope dimension (allowed: ${[...SCOPE_KEYS].join(', ')})`);
        else if (!Array.isArray(v) || v.length === 0) err(`scope.${k}`, 'must be a non-empty list');
        else if (k === 'hardware' || k === 'model') {
          if (!v.every((x) => typeof x === 'string' && x.length > 0)) err(`scope.${k}`, 'must list non-empty names');
        } else if (!v.every((x) => Number.isInteger(x) && (x as number) >= 0))
          err(`scope.${k}`, 'must list non-negative integers');
      }
    }
  }
  if ('sources' in e && e.sources !== undefined) {
    if (!Array.isArray(e.sources)) err('sources', 'must be a list of {kind, cite, role}');
    else
      e.sources.forEach((src: unknown, i: number) => {
        const f = `sources[${i}]`;
        if (!isRecord(src)) {
          err(f, 'must be a map {kind, cite, role}');
          return;
        }
        for (const k of Object.keys(src))
          if (!SOURCE_KEYS.has(k)) err(`${f}.${k}`, 'unknown key (allowed: kind, cite, role)');
        if (!SOURCE_KINDS.has(src.kind as string))
          err(`${f}.kind`, `"${String(src.kind)}" is not one of ${[...SOURCE_KINDS].join(', ')}`);
        if (!SOURCE_ROLES.has(src.role as string))
          err(`${f}.role`, `"${String(src.role)}" is not one of ${[...SOURCE_ROLES].join(', ')}`);
        if (typeof src.cite !== 'string' || src.cite.trim() === '') err(`${f}.cite`, 'must be a non-empty string');
      });
  }
  const hasSources = Array.isArray(e.sources) && e.sources.length > 0;
  if ((method === 'literature' || method === 'vendor_spec' || method === 'measured') && !hasSources)
    err('sources', `required for method: ${String(method)}`);
  if ('rationale' in e && e.rationale !== undefined && typeof e.rationale !== 'string')
    err('rationale', 'must be a string');
  if (method !== 'measured' && (typeof e.rationale !== 'string' || e.rationale.trim() === ''))
    err('rationale', `required for method: ${String(method)} (every method except measured)`);
  if (
    method === 'assumed' &&
    typeof e.rationale === 'string' &&
    e.rationale.trim().length > 0 &&
    e.rationale.trim().length < 20
  )
    err('rationale', 'an assumed value needs a substantial rationale (at least 20 characters)');
  if (method === 'copied' && (typeof e.copied_from !== 'string' || e.copied_from.trim() === ''))
    err('copied_from', 'required for method: copied');
  if ('ci95' in e && e.ci95 !== undefined) {
    const ci = e.ci95;
    if (!Array.isArray(ci) || ci.length !== 2 || !finite(ci[0]) || !finite(ci[1]))
      err('ci95', `must be [lo, hi] of finite numbers, got ${JSON.stringify(ci)}`);
    else if (!(ci[0] <= ci[1])) err('ci95', `lo ${ci[0]} > hi ${ci[1]}`);
    else if (finite(e.value) && !(ci[0] <= e.value && e.value <= ci[1]))
      err('ci95', `[${ci[0]}, ${ci[1]}] does not contain the value ${e.value}`);
  }
  if ('evidence' in e && !strictBlis) {
    const ev = e.evidence;
    if (!isRecord(ev)) err('evidence', 'must be a map');
    else if (typeof ev.family !== 'string' || ev.family === '') err('evidence.family', 'must name the fitting family');
  }
  // The loader's zod schema (src/core/schemas/registry.ts) is the floor: whatever it refuses, this
  // reports too, so a file that validates also loads.
  if (out.length === 0) {
    const z = CoefficientEntrySchema.safeParse(strictBlis ? { ...e, evidence: undefined } : e);
    if (!z.success)
      for (const i of z.error.issues) err(i.path.length ? i.path.map(String).join('.') : undefined, i.message);
  }
  return out;
}

interface Located {
  set: string;
  c: NamedEntry;
}

/**
 * Validate parsed coefficient sets.
 *
 * @param sets the sets of one file (as `parseCoefficientSets` returns them; entries are checked as
 *   raw maps, so malformed entries are reported, not trusted)
 * @param file the file name every problem carries
 * @returns problems, errors and warnings (empty = valid)
 */
export function validateRegistry(sets: readonly CoefficientSet[], file: string, opts: ValidateOptions = {}): Problem[] {
  const problems: Problem[] = [];
  const chipOf = opts.chip ?? defaultChipLookup();
  const all: Located[] = [];
  const seen = new Map<string, string>();
  const setNames = new Set<string>();
  for (const s of sets) {
    // In one chip's file a repeated set name is an error; a file joining several chips' registries repeats them by design.
    if (setNames.has(s.name))
      problems.push({
        file,
        set: s.name,
        field: 'name',
        check: 'schema',
        severity: opts.fileChip !== undefined ? 'error' : 'warning',
        message: `duplicate set name: a set named ${s.name} appears earlier in the file`,
      });
    setNames.add(s.name);
    if (s.kind !== 'CoefficientSet')
      problems.push({
        file,
        set: s.name,
        field: 'kind',
        check: 'schema',
        severity: 'error',
        message: `expected CoefficientSet, got ${String(s.kind)}`,
      });
    if (typeof s.name !== 'string' || s.name === '')
      problems.push({ file, field: 'name', check: 'schema', severity: 'error', message: 'set has no name' });
    for (const c of s.coefficients) {
      const scope = isRecord(c.entry) ? (c.entry.scope as NamedEntry['entry']['scope']) : undefined;
      const at = { file, set: s.name, entry: entryLabel(c.name, isRecord(scope) ? scope : undefined) };
      problems.push(...checkEntrySchema(c, at, opts.strictBlis ?? false));
      if (
        opts.fileChip !== undefined &&
        isRecord(scope) &&
        Array.isArray(scope.hardware) &&
        !scopedToChip(scope, opts.fileChip)
      )
        problems.push({
          ...at,
          field: 'scope.hardware',
          check: 'schema',
          severity: 'error',
          message: `scoped to ${scope.hardware.join(', ')} inside ${opts.fileChip}'s registry (an entry of this file must include hardware ${opts.fileChip})`,
        });
      const key = entryKey(c.name, isRecord(scope) ? scope : undefined);
      const prev = seen.get(key);
      if (prev !== undefined)
        problems.push({
          ...at,
          field: 'scope',
          check: 'schema',
          severity: 'error',
          message: `duplicate (name, scope): already defined in set ${prev}`,
        });
      else seen.set(key, s.name);
      all.push({ set: s.name, c });
    }
  }
  problems.push(...physicsChecks(all, file, chipOf));
  return problems;
}

/** Hardware names an entry applies to (lower-case). */
function hardwareOf(c: NamedEntry): string[] {
  const hw = isRecord(c.entry) && isRecord(c.entry.scope) ? c.entry.scope.hardware : undefined;
  return Array.isArray(hw) ? hw.filter((h): h is string => typeof h === 'string').map((h) => h.toLowerCase()) : [];
}

function physicsChecks(all: readonly Located[], file: string, chipOf: (name: string) => Chip | undefined): Problem[] {
  const out: Problem[] = [];
  const missingChip = new Set<string>();
  const phys = (l: Located, field: string, message: string) =>
    out.push({
      file,
      set: l.set,
      entry: entryLabel(l.c.name, l.c.entry?.scope),
      field,
      check: 'physics',
      severity: 'error',
      message,
    });
  const warn = (l: Located, field: string, message: string) =>
    out.push({
      file,
      set: l.set,
      entry: entryLabel(l.c.name, l.c.entry?.scope),
      field,
      check: 'physics',
      severity: 'warning',
      message,
    });
  /** Warn when the entry's ci95 upper bound exceeds `limit` (only called when the value itself is within it). */
  const ciAbove = (l: Located, limit: number, what: string) => {
    const ci = l.c.entry.ci95 as unknown;
    if (Array.isArray(ci) && ci.length === 2 && finite(ci[1]) && ci[1] > limit)
      warn(
        l,
        'ci95',
        `upper bound ${ci[1]} exceeds ${what} ${limit}; the value ${l.c.entry.value} is within it, its ci95 is not`,
      );
  };
  // name → hardware → located entry (for cross-entry checks)
  const byHw = new Map<string, Map<string, Located>>();
  for (const l of all) {
    if (!isRecord(l.c.entry) || !finite(l.c.entry.value)) continue;
    for (const hw of hardwareOf(l.c)) {
      let m = byHw.get(hw);
      if (!m) {
        m = new Map();
        byHw.set(hw, m);
      }
      m.set(l.c.name, l);
    }
  }
  for (const [hw, entries] of byHw) {
    const chip = chipOf(hw);
    if (!chip && !missingChip.has(hw)) {
      missingChip.add(hw);
      out.push({
        file,
        check: 'physics',
        severity: 'warning',
        message: `chip "${hw}" is not in the catalog: its datasheet-bound checks are skipped`,
      });
    }
    const v = (name: string) => entries.get(name)?.c.entry.value;
    const collectiveFloors = new Map<string, Array<{ ranks: number; l: Located }>>();
    for (const [name, l] of entries) {
      const value = l.c.entry.value;
      if (/^gemm_eps_max_/.test(name)) {
        if (!(value > 0 && value <= EPS_MAX_UPPER))
          phys(
            l,
            'value',
            `eps_max ${value} is outside (0, ${EPS_MAX_UPPER}] (a fraction of the dense datasheet peak)`,
          );
        else if (value > EPS_MAX_WARN)
          warn(
            l,
            'value',
            `eps_max ${value} is above ${EPS_MAX_WARN}: asymptote above datasheet peak (allowed up to ${EPS_MAX_UPPER})`,
          );
        else ciAbove(l, EPS_MAX_WARN, 'the datasheet peak (eps_max)');
      }
      if (/^gemm_[mnk]_half_/.test(name) && !(value >= 0))
        phys(l, 'value', `half-saturation ${value} must be ≥ 0 tokens`);
      if (name === 'hbm_derate' && !(value > 0 && value <= 1))
        phys(l, 'value', `hbm_derate ${value} is outside (0, 1]`);
      if (name === 'attention_prefill_work_scale' && !(value > 0)) phys(l, 'value', `work scale ${value} must be > 0`);
      if (/^attention_decode_rate/.test(name)) {
        if (!(value > 0)) phys(l, 'value', `rate ${value} bytes/µs must be > 0`);
        else if (chip && value > chip.hbm_bytes_per_us)
          phys(
            l,
            'value',
            `rate ${value} bytes/µs exceeds ${chip.name}'s datasheet HBM rate ${Math.round(chip.hbm_bytes_per_us)} bytes/µs`,
          );
        else if (chip) ciAbove(l, Math.round(chip.hbm_bytes_per_us), `${chip.name}'s datasheet HBM rate (bytes/µs)`);
      }
      if (/^attention_decode_floor_/.test(name)) {
        const base = v('attention_decode_floor');
        if (base !== undefined && value > KIND_FLOOR_MULTIPLE * base)
          phys(
            l,
            'value',
            `kind floor ${value} µs exceeds ${KIND_FLOOR_MULTIPLE}× the part-wide attention_decode_floor ${base} µs`,
          );
      }
      if (/floor/.test(name) && !name.startsWith('collective_') && !(value >= 0))
        phys(l, 'value', `floor ${value} µs must be ≥ 0`);
      else if (/^attention_.*floor/.test(name) && value > FLOOR_MAX_US)
        phys(
          l,
          'value',
          `floor ${value} µs is above ${FLOOR_MAX_US / 1000} ms (the units check's floor band): a units slip?`,
        );
      if (name === 'moe_routing_imbalance_p90') {
        const med = v('moe_routing_imbalance_median');
        if (med !== undefined && value < med) phys(l, 'value', `p90 ${value} is below the median ${med}`);
      }
      if (name === 'moe_routing_imbalance_median' && !(value > 0)) phys(l, 'value', `imbalance ${value} must be > 0`);
      const cn = parseCollectiveName(name);
      if (cn) {
        if (cn.param === 'floor') {
          if (!(value > 0)) phys(l, 'value', `collective floor ${value} µs must be > 0`);
          else if (value < FLOOR_MIN_US || value > FLOOR_MAX_US)
            phys(
              l,
              'value',
              `collective floor ${value} µs is outside [${FLOOR_MIN_US} µs, ${FLOOR_MAX_US / 1000} ms] (the units check's floor band): a units slip?`,
            );
          const k = `${cn.op}_${cn.dtype}_${cn.chip}`;
          let arr = collectiveFloors.get(k);
          if (!arr) {
            arr = [];
            collectiveFloors.set(k, arr);
          }
          arr.push({ ranks: cn.ranks, l });
        } else {
          if (!(value > 0)) phys(l, 'value', `collective rate ${value} bytes/µs must be > 0`);
          else if (chip) {
            const bound = collectiveRateBound(chip, cn.op, cn.ranks);
            if (value > bound)
              phys(
                l,
                'value',
                `rate ${value} bytes/µs exceeds the link bound ${Math.round(bound)} bytes/µs (${LINK_SLACK} × ${chip.name} link ${chip.nvlink_bytes_per_us} bytes/µs ÷ bus factor ${busBandwidthFactor(cn.op, cn.ranks).toFixed(3)})`,
              );
            else ciAbove(l, Math.round(bound), `the ${chip.name} link bound (bytes/µs)`);
          }
          if (cn.param === 'transition_rate') {
            const peak = v(name.replace('collective_transition_rate_', 'collective_peak_rate_'));
            if (peak !== undefined && value > peak)
              phys(l, 'value', `r_t ${value} bytes/µs exceeds r_peak ${peak} bytes/µs`);
          }
        }
      }
    }
    for (const [, arr] of collectiveFloors) {
      arr.sort((a, b) => a.ranks - b.ranks);
      // Governance (reference §6.3): a width extrapolation must not fit floors measured on several lanes.
      const measuredLanes = new Set(
        arr.filter((x) => x.l.c.entry.method === 'measured').map((x) => x.l.c.entry.evidence?.lane ?? 'unknown'),
      );
      for (const x of arr)
        if (x.l.c.entry.method === 'assumed' && x.l.c.entry.evidence?.extrapolation && measuredLanes.size > 1)
          out.push({
            file,
            set: x.l.set,
            entry: entryLabel(x.l.c.name, x.l.c.entry.scope),
            field: 'evidence.extrapolation',
            check: 'physics',
            severity: 'warning',
            message: `width extrapolation over floors measured on several lanes (${[...measuredLanes].sort().join(', ')}); \`stepcal registry extrapolate widths\` refuses such a fit`,
          });
      for (let i = 1; i < arr.length; i++) {
        const prev = arr[i - 1]!;
        const cur = arr[i]!;
        if (cur.l.c.entry.value < prev.l.c.entry.value)
          phys(
            cur.l,
            'value',
            `floor ${cur.l.c.entry.value} µs at ${cur.ranks} ranks is below ${prev.l.c.entry.value} µs at ${prev.ranks} ranks (floors must not decrease with ranks)`,
          );
      }
    }
  }
  return out;
}

/**
 * Parse and validate a registry text. YAML and layout errors become problems (not throws), so a
 * caller can report every file.
 */
export function validateRegistryText(
  text: string,
  file: string,
  opts: ValidateOptions = {},
): { sets: CoefficientSet[]; problems: Problem[] } {
  const problems: Problem[] = [];
  const sets: CoefficientSet[] = [];
  const schema = (message: string, extra: Partial<Problem> = {}) =>
    problems.push({ file, check: 'schema', severity: 'error', message, ...extra });
  let docs: ReturnType<typeof parseAllDocuments>;
  try {
    docs = parseAllDocuments(text);
  } catch (err) {
    schema(`YAML error: ${(err as Error).message}`);
    return { sets, problems };
  }
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, di) => {
    if (doc.errors.length) {
      schema(`YAML error in document ${di + 1}: ${doc.errors[0]!.message}`);
      return;
    }
    let obj: unknown;
    try {
      obj = doc.toJS() as unknown;
    } catch (err) {
      // yaml throws ReferenceError for an alias to another document's anchor and for alias bombs.
      schema(`YAML error in document ${di + 1}: ${(err as Error).message}`);
      return;
    }
    if (obj === null || obj === undefined) return;
    if (!isRecord(obj)) {
      schema(`document ${di + 1}: expected a CoefficientSet map`);
      return;
    }
    const setName = typeof obj.name === 'string' ? obj.name : `#${di + 1}`;
    for (const k of Object.keys(obj))
      if (!['kind', 'name', 'coefficients'].includes(k)) schema(`unknown set key "${k}"`, { set: setName, field: k });
    if (obj.kind !== 'CoefficientSet')
      schema(`expected kind: CoefficientSet, got ${String(obj.kind)}`, { set: setName, field: 'kind' });
    if (typeof obj.name !== 'string' || obj.name === '') schema('set has no name', { set: setName, field: 'name' });
    if (!Array.isArray(obj.coefficients)) {
      schema('coefficients must be a list', { set: setName, field: 'coefficients' });
      return;
    }
    const coefficients: NamedEntry[] = [];
    obj.coefficients.forEach((item: unknown, i: number) => {
      if (!isRecord(item) || Object.keys(item).length !== 1) {
        schema(`coefficient #${i}: expected a single-key map {name: entry}`, {
          set: setName,
          field: `coefficients[${i}]`,
        });
        return;
      }
      const [name, entry] = Object.entries(item)[0]!;
      coefficients.push({ name, entry: entry as NamedEntry['entry'] });
    });
    sets.push({ kind: 'CoefficientSet', name: setName, coefficients });
  });
  const empty = problems.length === 0 ? emptyRegistry(sets) : undefined;
  if (empty) schema(empty);
  problems.push(...validateRegistry(sets, file, opts));
  return { sets, problems };
}

/** Why `sets` are an empty registry (no documents, or sets without coefficients); undefined when not. */
function emptyRegistry(sets: readonly CoefficientSet[]): string | undefined {
  if (sets.some((x) => x.coefficients.length > 0)) return undefined;
  return sets.length === 0
    ? 'empty registry: no CoefficientSet documents'
    : `empty registry: ${sets.length} set(s) but no coefficients`;
}

/** Read and validate one registry file. A file that cannot be read (missing, a folder) is one problem, saying why. */
export function validateRegistryFile(
  file: string,
  opts: ValidateOptions = {},
): { sets: CoefficientSet[]; problems: Problem[] } {
  let text: string;
  try {
    text = readText(file);
  } catch (e) {
    const message = e instanceof InputError ? e.problem : 'cannot read file';
    return { sets: [], problems: [{ file, check: 'schema', severity: 'error', message }] };
  }
  return validateRegistryText(text, file, opts);
}

/** Errors only. */
export function errorsOf(problems: readonly Problem[]): Problem[] {
  return problems.filter((p) => p.severity === 'error');
}

/** `assertRegistryUsable` once per (file, chip, text) in a process; a hit skips the ≈ 30–100 ms check. */
const usableText = textMemo(16, (text: string, key: string): true => {
  const file = key.slice(key.indexOf('\n') + 1);
  assertRegistryUsable(parseCoefficientSets(text, file), file, key.slice(0, key.indexOf('\n')));
  return true;
});

/**
 * Read `file`'s coefficient sets and check that they are usable for `chip` (`assertRegistryUsable`),
 * the check memoised per process on the file's text (core/text-memo.ts): a process that sets up many
 * pricers on one registry (serving, the test suite) checks it once; an edited file is checked afresh.
 * @returns the caller's own copy of the sets
 * @throws UserError when the file cannot be read, does not parse, or is not usable (as assertRegistryUsable)
 */
export function loadUsableRegistry(file: string, chip: string): CoefficientSet[] {
  // readText throws an InputError naming the file and why (not found, a folder, unreadable).
  const text = readText(file);
  usableText(text, `${chip}\n${file}`);
  return parseCoefficientSets(text, file);
}

/**
 * The check every registry load for pricing runs (src/pricer/setup.ts, validate, calibrate): schema
 * and physics errors of `validateRegistry` with `fileChip` set, so a NaN, a string, eps_max 1.5, a
 * duplicate set or an entry scoped to another chip never reaches a price. Warnings pass.
 * @throws UserError listing the first errors (`file: set S: entry E: field F: message`) and how many;
 *   `file: empty registry: …` (as `registry validate` says it) when no set has a coefficient.
 */
export function assertRegistryUsable(sets: readonly CoefficientSet[], file: string, chip: string): void {
  // Said as `registry validate` says it, instead of the first coefficient a price finds missing.
  const empty = emptyRegistry(sets);
  if (empty) throw new UserError(`${file}: ${empty}`);
  const errors = errorsOf(validateRegistry(sets, file, { fileChip: chip }));
  if (errors.length === 0) return;
  const shown = errors.slice(0, 5).map(formatProblem);
  const more =
    errors.length > shown.length
      ? `\n(and ${errors.length - shown.length} more; run \`stepcal registry validate ${file}\`)`
      : '';
  throw new UserError(
    `registry ${file} is not usable for ${chip}: ${errors.length} error(s)\n${shown.join('\n')}${more}`,
  );
}
