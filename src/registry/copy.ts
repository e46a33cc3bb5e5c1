/**
 * Registry copy (`stepcal registry copy --from <chip> --to <chip>`): a registry for a chip that has
 * no measurements, made of the source chip's entries, each flagged `method: copied` (BLIS method
 * enum, reference §1.1: `copied_from` names the source scope, `rationale` is required).
 *
 * The rule (DECISION, docs/registry.md "Copied registries"):
 * - every entry scoped to the source chip is copied, re-scoped to the target (`scope.hardware` →
 *   `[target]`, other dimensions kept); collective names, which embed the chip (reference §1.3
 *   `collective_*_<op>_<dtype>_<N>rank_<chip>`), are rewritten to the target chip; entries not
 *   scoped to the source are left out (and counted);
 * - `method: copied`, `fitted: false`, `copied_from: <source scope>` (flow YAML, `{hardware: [b200]}`),
 *   and a rationale that says why the parts are comparable, lists every datasheet fact that differs,
 *   states what scales with the target's datasheet and what is carried over as an absolute number,
 *   and names the source entry's own method;
 * - `value`, `units`, `sources` and `ci95` are kept verbatim; `evidence` is kept (it describes the
 *   source fit) with `evidence.copy` and a note saying so;
 * - refused when the source registry itself holds copies (copy from the measured original), when the
 *   target's current registry holds entries measured on the target (copies never replace measured
 *   data) or entries of other hardware (the write would drop them), and when the copied registry
 *   fails `validateRegistry` against the target's datasheet (e.g. a decode rate above the target's
 *   HBM peak, a collective rate above its link bound). Every refusal names the entries.
 *
 * Pure (no I/O): the CLI reads the files, writes the result atomically.
 */
import type { Chip } from '../core/catalog/chip.ts';
import {
  collectiveName,
  EXPERT_ALLTOALL_RE,
  familyOf,
  nameForChip,
  parseCollectiveName,
  scopedToChip,
} from '../core/schemas/names.ts';
import type { CoefficientEntry, CoefficientSet, Method, NamedEntry, Scope } from '../core/schemas/registry.ts';
import { errorsOf, formatProblem, validateRegistry, type Problem } from './validate.ts';

/**
 * Why two parts are comparable, for the pairs stepcal ships (used when `--reason` is not given, so
 * `stepcal registry copy --from b200 --to <chip>` regenerates the committed file byte for byte).
 * Keyed `<from>→<to>`.
 */
export const COPY_REASONS: Readonly<Record<string, string>> = {
  'b200→gb200':
    'GB200 carries the same B200-class Blackwell silicon (compute capability 10.0, 148 SMs, HBM3e, NVLink 5 at 900 GB/s per direction per GPU) as HGX B200; what differs is the package and the NVLink domain: a Grace-Blackwell superchip tray of 4 GPUs inside a 72-GPU NVL72 rack that is one NVLink domain, instead of an 8-GPU HGX node. Kernels (GEMM, attention) and per-GPU link rates are therefore expected to behave like B200; collectives measured on 2–8 B200 ranks stand in for the same widths inside the NVL72 domain (NVLink switch trays instead of the HGX baseboard switch; not measured). GB200 runs at a higher power limit, so its datasheet peaks are ~11% higher than B200; the copied ramps scale with them (assumption).',
  'b200→b300':
    "B300 (Blackwell Ultra, compute capability 10.3) is the same Blackwell generation as B200: same SM count (148), same NVLink 5 at 900 GB/s per direction, same dense BF16/FP8 peaks. Caveats: Blackwell Ultra raises the dense FP4 peak by 1.5× (13.5 vs 9 PFLOP/s) and carries more HBM3e (268 vs 180 GiB, 8.0 vs 7.7 TB/s). The copied GEMM ramps are fractions of each chip's own datasheet peak, so compute times scale with B300's datasheet; that B300 reaches the same fraction of its raised FP4 peak as B200 does of its own is an ASSUMPTION, not a measurement.",
};

/** The key of `COPY_REASONS`. */
export const copyReasonKey = (from: string, to: string): string => `${from}→${to}`;

/** Shortest reason accepted from `--reason` (the validator's bar for an assumed rationale). */
export const MIN_REASON_CHARS = 20;

/** Options of `copyRegistry`. */
export interface CopyOptions {
  /** Source chip (its datasheet, for the comparison in the rationale). */
  from: Chip;
  /** Target chip (its datasheet bounds the copy). */
  to: Chip;
  /** The source chip's registry. */
  source: readonly CoefficientSet[];
  /** The target's current registry, when its file exists. */
  existing?: readonly CoefficientSet[];
  /** Why the parts are comparable (default `COPY_REASONS[from→to]`; required when there is none). */
  reason?: string;
  /** Source file as shown in notes (`registry/b200.yaml`). */
  sourceFile?: string;
  /** Output file as shown in problems (`registry/b300.yaml`). */
  file?: string;
  /** Chip lookup for the validator (default: the target and source chips given here). */
  chipLookup?: (name: string) => Chip | undefined;
}

/** Outcome of `copyRegistry`. */
export interface CopyResult {
  status: 'write' | 'refused';
  from: string;
  to: string;
  /** Why refused (lists the entries). */
  reason?: string;
  /** The copied registry (empty when refused before copying). */
  sets: CoefficientSet[];
  /** Entries copied. */
  copied: number;
  /** Copied entries per source method (`measured: 97, assumed: 31`). */
  by_source_method: Partial<Record<Method, number>>;
  /** Collective names rewritten to the target chip. */
  renamed: number;
  /** Source entries left out, with why. */
  skipped: string[];
  /** Existing target entries the write replaces (name, method), when a registry was there. */
  replaces: Array<{ name: string; method: string }>;
  /** Validator problems of the copy against the target's datasheet (errors refuse; warnings pass). */
  problems: Problem[];
  /** The rationale text written to every entry (before the per-entry source method clause). */
  rationale: string;
}

/** `{hardware: [b200]}`-style text of a scope (keys in BLIS order), used as `copied_from`. */
export function scopeText(scope: Scope): string {
  const parts: string[] = [];
  for (const k of ['hardware', 'model', 'tp', 'ep', 'nodes_spanned'] as const) {
    const v = scope[k];
    if (v?.length) parts.push(`${k}: [${v.join(', ')}]`);
  }
  return `{${parts.join(', ')}}`;
}

/** Datasheet facts that differ between two chips, as `name a vs b unit` phrases (from → to order: target first). */
export function datasheetDifferences(from: Chip, to: Chip): string[] {
  const d: string[] = [];
  const cmp = (label: string, a: number | undefined, b: number | undefined, unit: string) => {
    if (a !== b) d.push(`${label} ${b ?? 'none'} vs ${a ?? 'none'}${unit}`);
  };
  for (const dt of ['bf16', 'fp8', 'nvfp4', 'tf32', 'int8'] as const)
    cmp(`${dt} peak`, from.peak_tflops[dt], to.peak_tflops[dt], ' TFLOP/s');
  cmp('HBM', from.hbm_tb_per_s, to.hbm_tb_per_s, ' TB/s');
  cmp('HBM capacity', from.hbm_gib, to.hbm_gib, ' GiB');
  cmp('NVLink', from.nvlink_gb_per_s_per_dir, to.nvlink_gb_per_s_per_dir, ' GB/s per direction');
  cmp('SMs', from.sm_count, to.sm_count, '');
  cmp('GPUs per node', from.gpus_per_node, to.gpus_per_node, '');
  cmp('rack NVLink domain', from.rack_gpus, to.rack_gpus, ' GPUs');
  cmp('NIC', from.nic_gb_per_s_per_dir, to.nic_gb_per_s_per_dir, ' GB/s per direction');
  cmp('sm_version', from.sm_version, to.sm_version, '');
  return d;
}

/** The rationale shared by every copied entry (the per-entry clause is appended by `copyEntry`). */
export function copyRationale(from: Chip, to: Chip, reason: string): string {
  const diffs = datasheetDifferences(from, to);
  return (
    `Copied from ${from.name}, not measured on ${to.name}: ${reason.trim()} ` +
    `Datasheet differences (${to.name} vs ${from.name}): ${diffs.length ? diffs.join('; ') : 'none'}. ` +
    `What the copy carries: GEMM ramps (eps_max is a fraction of each chip's own dense peak, half-saturation sizes are in tokens), hbm_derate (a fraction of the datasheet HBM rate) and MoE imbalances are relative, so compute and weight-read times scale with ${to.name}'s datasheet; ` +
    `attention decode rates and collective rates (bytes/µs), and every floor and host term (µs), are ${from.name}'s absolute numbers carried over unchanged. ` +
    `Replace with \`stepcal fit all --chip ${to.name}\` once ${to.name} is measured.`
  );
}

/** Rename a collective name's chip from `from` to `to`; other names unchanged. */
export function renameForChip(
  name: string,
  from: string,
  to: string,
): { name: string; renamed: boolean; foreign?: string } {
  const norm = (s: string) => s.toLowerCase().replace(/-/g, '_');
  const ep = EXPERT_ALLTOALL_RE.exec(name);
  if (ep)
    return norm(ep[2]!) === norm(from)
      ? { name: nameForChip(ep[1]!, to), renamed: true }
      : { name, renamed: false, foreign: ep[2]! };
  const c = parseCollectiveName(name);
  if (!c) return { name, renamed: false };
  if (norm(c.chip) !== norm(from)) return { name, renamed: false, foreign: c.chip };
  return { name: collectiveName({ ...c, chip: to }), renamed: true };
}

/** One copied entry (pure). */
export function copyEntry(c: NamedEntry, from: string, to: string, rationale: string, sourceFile: string): NamedEntry {
  const e = c.entry;
  const { name } = renameForChip(c.name, from, to);
  const srcMethod = e.method;
  const scope: Scope = { ...e.scope, hardware: [to] };
  const clause =
    srcMethod === 'measured'
      ? ` Source entry: ${c.name} on ${from}, method measured${e.ci95 ? ' (its ci95 is kept: the uncertainty of the source fit, not of the transfer)' : ''}.`
      : ` Source entry: ${c.name} on ${from}, method ${srcMethod}${e.rationale ? `; its rationale there: ${e.rationale.trim()}` : ''}`;
  const family = e.evidence?.family ?? familyOf(c.name, e);
  const note = `copied from ${sourceFile} (${c.name}, method ${srcMethod} on ${from}) by \`stepcal registry copy\`: the evidence below describes the ${from} entry, not a measurement on ${to}`;
  const entry: CoefficientEntry = {
    value: e.value,
    units: e.units,
    // A term the source does not charge (value 0, e.g. a prefill-form term its fit pins at 0) stays not
    // charged: a copied 0 would be refused, and dropping it would leave the form incomplete.
    method: srcMethod === 'not_charged' ? 'not_charged' : 'copied',
    fitted: false,
    scope,
    ...(e.sources ? { sources: e.sources } : {}),
    rationale: rationale + clause,
    ...(e.ci95 ? { ci95: e.ci95 } : {}),
    copied_from: scopeText(e.scope),
    evidence: {
      ...(e.evidence ?? {}),
      family,
      copy: { from, source_name: c.name, source_method: srcMethod, source_file: sourceFile },
      notes: [note, ...(e.evidence?.notes ?? [])],
    },
  };
  return { name, entry };
}

/**
 * Copy the source chip's registry to the target chip (module comment).
 * @returns `status: 'refused'` with the reason naming the entries, or the sets to write
 * @throws nothing for bad data (a refusal is a result); the caller turns a refusal into exit 1
 */
export function copyRegistry(o: CopyOptions): CopyResult {
  const from = o.from.name;
  const to = o.to.name;
  const sourceFile = o.sourceFile ?? `registry/${from}.yaml`;
  const file = o.file ?? `registry/${to}.yaml`;
  const base: CopyResult = {
    status: 'refused',
    from,
    to,
    sets: [],
    copied: 0,
    by_source_method: {},
    renamed: 0,
    skipped: [],
    replaces: [],
    problems: [],
    rationale: '',
  };
  const list = (xs: string[]) =>
    xs.length > 8 ? `${xs.slice(0, 8).join(', ')} and ${xs.length - 8} more` : xs.join(', ');

  if (from.toLowerCase() === to.toLowerCase())
    return { ...base, reason: `--from and --to are the same chip (${from})` };
  const reason = o.reason ?? COPY_REASONS[copyReasonKey(from, to)];
  if (reason === undefined)
    return {
      ...base,
      reason: `no --reason given and stepcal has no stated reason for copying ${from} → ${to}: say why the parts are comparable (--reason "…", at least ${MIN_REASON_CHARS} characters)`,
    };
  if (reason.trim().length < MIN_REASON_CHARS)
    return {
      ...base,
      reason: `--reason must say why the parts are comparable (at least ${MIN_REASON_CHARS} characters), got "${reason}"`,
    };

  // The source must be original data, not copies of copies.
  const sourceEntries = o.source.flatMap((s) => s.coefficients.map((c) => ({ set: s.name, c })));
  const ofSource = sourceEntries.filter((x) => scopedToChip(x.c.entry.scope, from));
  if (ofSource.length === 0) return { ...base, reason: `${sourceFile} holds no entry scoped to ${from}` };
  const copies = ofSource.filter((x) => x.c.entry.method === 'copied').map((x) => x.c.name);
  if (copies.length)
    return {
      ...base,
      reason: `${sourceFile} holds ${copies.length} entr${copies.length === 1 ? 'y' : 'ies'} that are themselves copies (${list(copies)}): copy from the measured original instead`,
    };

  // Never replace measured data (or another chip's entries) with copies.
  const replaces: CopyResult['replaces'] = [];
  if (o.existing) {
    const ex = o.existing.flatMap((s) => s.coefficients);
    const measured = ex
      .filter((c) => scopedToChip(c.entry.scope, to) && c.entry.method === 'measured')
      .map((c) => c.name);
    if (measured.length)
      return {
        ...base,
        reason: `${file} holds ${measured.length} entr${measured.length === 1 ? 'y' : 'ies'} measured on ${to} (${list(measured)}): copies never replace measured data`,
      };
    const other = ex
      .filter((c) => !scopedToChip(c.entry.scope, to))
      .map((c) => `${c.name} [hardware=${c.entry.scope?.hardware?.join(',') ?? 'any'}]`);
    if (other.length)
      return {
        ...base,
        reason: `${file} holds ${other.length} entr${other.length === 1 ? 'y' : 'ies'} not scoped to ${to} (${list(other)}): the copy would drop them; write elsewhere with --out`,
      };
    for (const c of ex) replaces.push({ name: c.name, method: c.entry.method });
  }

  const rationale = copyRationale(o.from, o.to, reason);
  const skipped: string[] = [];
  const by: CopyResult['by_source_method'] = {};
  let renamed = 0;
  const sets: CoefficientSet[] = [];
  for (const s of o.source) {
    const coefficients: NamedEntry[] = [];
    for (const c of s.coefficients) {
      if (!scopedToChip(c.entry.scope, from)) {
        skipped.push(
          `${s.name}: ${c.name} [hardware=${c.entry.scope?.hardware?.join(',') ?? 'any'}]: not scoped to ${from}`,
        );
        continue;
      }
      const r = renameForChip(c.name, from, to);
      if (r.foreign !== undefined) {
        skipped.push(`${s.name}: ${c.name}: its name encodes chip ${r.foreign}, not ${from}`);
        continue;
      }
      if (r.renamed) renamed++;
      coefficients.push(copyEntry(c, from, to, rationale, sourceFile));
      by[c.entry.method] = (by[c.entry.method] ?? 0) + 1;
    }
    if (coefficients.length) sets.push({ kind: 'CoefficientSet', name: s.name, coefficients });
  }
  const copied = sets.reduce((n, s) => n + s.coefficients.length, 0);
  const lookup =
    o.chipLookup ??
    ((n: string) =>
      n.toLowerCase() === to.toLowerCase() ? o.to : n.toLowerCase() === from.toLowerCase() ? o.from : undefined);
  const problems = validateRegistry(sets, file, { chip: lookup });
  const errors = errorsOf(problems);
  const res: CopyResult = {
    ...base,
    sets,
    copied,
    by_source_method: by,
    renamed,
    skipped,
    replaces,
    problems,
    rationale,
  };
  if (errors.length)
    return {
      ...res,
      status: 'refused',
      reason: `the copy breaks ${to}'s physics in ${errors.length} place(s), refusing:\n${errors.map(formatProblem).join('\n')}`,
    };
  return { ...res, status: 'write' };
}
