/**
 * New-chip onboarding (issues 5 and 15): one complete upstream chip folder → catalog entry, measurement
 * store, fitted and extrapolated registry, coverage report, in one command and with no code change.
 *
 *   scan the folder (src/measurements/upstream-folder.ts: one lane per table, every other file read
 *     or skipped with a counted reason; fails early without a required family, nothing written)
 *   → chip facts (onboard-chip.ts: the catalog entry when one exists, else the descriptor plus stated
 *     defaults; a differing descriptor is shown as a diff)
 *   → import into a private work folder (the importer's validation and units-slip gate)
 *   → fit all (src/fit `fitAll` against the work folder)
 *   → refusals: a required family's refusal stops the run; any other refuses that entry (or family) only
 *   → extrapolation where needed (collective widths; families the data lacks, from same-generation siblings)
 *   → gates (`validateRegistry`) → the guarded write (below) → report and coverage.json.
 *
 * DECISIONS (docs/onboarding.md): the output root defaults to the repository. Nothing already there is
 * replaced silently: a catalog entry is replaced only with `updateCatalog`, an existing registry (or
 * measurement set) that would change only with `replaceRegistry`; otherwise the run fails with the
 * diff and writes nothing. Everything is written in one atomic set at the end.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CHIPS_DIR, loadChip, REPO_ROOT, type Chip } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { writeFilesAtomic } from '../core/io/fs.ts';
import { markdownTable } from '../core/render/table.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import { familyOf, familyOfName } from '../core/schemas/names.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { AIC_TABLES, type AicTable } from '../measurements/aiconfigurator.ts';
import { AIC_REPOSITORY, stageAicImport, type ImportSummary } from '../measurements/import.ts';
import { writeMeasurementSet } from '../measurements/store.ts';
import { type FolderScan, scanUpstreamFolder, type SkippedFile } from '../measurements/upstream-folder.ts';
import { extrapolateCollectiveWidths, type WidthExtrapolation } from '../fit/collective-width.ts';
import type { FitAllResult } from '../fit/index.ts';
import { diffRegistries } from './diff.ts';
import { extrapolateFamily, mergeEntries, type ChipRegistry, type FamilyExtrapolation } from './extrapolate.ts';
import { loadRegistryFile } from './load.ts';
import { defaultSystemFile, formatChipDiff, resolveChip, type ResolvedChip } from './onboard-chip.ts';
import {
  FAMILY_NEEDS,
  familyCoverage,
  type FamilyCoverage,
  pricingLimits,
  type PricingLimits,
  skipSummary,
} from './onboard-coverage.ts';
import { errorsOf, formatProblem, validateRegistry } from './validate.ts';

export { FAMILY_NEEDS };

/** Families without which onboarding stops before fitting (no step can be priced without them). */
export const REQUIRED_FAMILIES = ['gemm', 'attention_decode'] as const;
/** Fitted families whose refusal stops the run (hbm_derate prices every memory-bound kernel). */
const REQUIRED_FIT = new Set(['gemm', 'hbm', 'attention_decode']);
/** A GEMM ramp coefficient: `gemm_<param>_<ramp>` (ramp = dtype, or dtype plus a shape class). */
const GEMM_RAMP = /^gemm_(eps_max|[mnk]_half)_(.+)$/;

/**
 * Whether a refusal stops the run: any in hbm or attention_decode, a family-level GEMM refusal, or a
 * bf16 GEMM ramp entry (every model's linear layers price on it). A refused ramp of another dtype
 * (fp8, fp8_block, nvfp4) leaves that dtype unpriced and the rest of the registry standing.
 */
function isRequired(r: OnboardRefusal): boolean {
  if (!REQUIRED_FIT.has(r.family)) return false;
  if (r.family !== 'gemm' || !r.name) return true;
  const ramp = GEMM_RAMP.exec(r.name)?.[2];
  return ramp === undefined || ramp.startsWith('bf16');
}

export interface Coverage {
  /** Data files chosen, by upstream table (one lane each). */
  tables: Partial<Record<AicTable, string[]>>;
  /** Files under --data that are not upstream tables (ignored). */
  ignored: string[];
  supported: string[];
  unsupported: Array<{ family: string; missing: string[] }>;
}

/** The chosen table files of a scan, by table (the importer's input). */
export function chosenTables(scan: FolderScan): Partial<Record<AicTable, string[]>> {
  return Object.fromEntries(scan.tables.map((t) => [t.table, [t.chosen.file]]));
}

/** Which fitting families the tables can support (pure). */
export function coverageOf(tables: Partial<Record<AicTable, string[]>>, ignored: string[] = []): Coverage {
  const have = new Set<string>();
  for (const t of Object.keys(tables) as AicTable[]) if (tables[t]!.length) have.add(AIC_TABLES[t]);
  const supported: string[] = [];
  const unsupported: Coverage['unsupported'] = [];
  for (const [family, needs] of Object.entries(FAMILY_NEEDS)) {
    const missing = needs.filter((n) => !have.has(n));
    if (missing.length) unsupported.push({ family, missing });
    else supported.push(family);
  }
  return { tables, ignored, supported, unsupported };
}

export function formatCoverage(c: Coverage): string {
  const lines = [`families the data can support: ${c.supported.join(', ') || 'none'}`];
  for (const u of c.unsupported) lines.push(`cannot support ${u.family}: no ${u.missing.join(' or ')} table`);
  if (c.supported.includes('host'))
    lines.push('note: host has no per-operator table upstream; its entries are the assumed values (method: assumed)');
  for (const f of c.ignored) lines.push(`ignored (not an upstream table): ${f}`);
  return lines.join('\n');
}

export interface OnboardOptions {
  chip: string;
  dataDir: string;
  /** AIConfigurator system descriptor (default `<data>/../systems/<folder>.yaml` when present). */
  systemFile?: string;
  /** Where catalog/, measurements/, registry/ and fits/ are written (default the repository). */
  outRoot?: string;
  /** Replace an existing catalog entry with the descriptor's facts (default: read it, show the diff). */
  updateCatalog?: boolean;
  /** Replace an existing registry / measurement set that would change (default: refuse with the diff). */
  replaceRegistry?: boolean;
  /** Lane overrides: `lane` or `table=lane` (upstream-folder.ts). */
  lanes?: string[];
  /** Facts the descriptor lacks (override the catalog's when given). */
  sm_count?: number;
  l2_mib?: number;
  /** Collective widths to fill by extrapolation when the fit left them empty (default [16]). */
  widths?: number[];
  /** Catalog read for the chip's entry (default <repo>/catalog/chips). */
  catalogDir?: string;
  /** Registries of the chips that may serve as same-generation siblings (default <repo>/registry). */
  siblingRegistryDir?: string;
  /** Catalog of those chips (default <repo>/catalog/chips). */
  siblingCatalogDir?: string;
  /** Fit options passed through (bootstrap). */
  bootstrap?: { resamples: number; seed: number };
  /**
   * Draws the fit report of the onboarded chip: its files under `repoRoot` (registry first, then
   * fits/<chip>/README.md and SVGs) and the summary lines. The command layer passes
   * src/report/fit.ts `fitReportOutputs` (this stage sits below the report layer and cannot import it).
   */
  fitOutputs: (
    fit: FitAllResult,
    opts: { repoRoot: string },
  ) => { files: Array<{ file: string; data: string }>; summary: string[] };
  log?: (line: string) => void;
}

/** An entry or family refused at onboarding (left out of the registry). */
export interface OnboardRefusal {
  family: string;
  /** The coefficient named by the refusal, when it names one. */
  name?: string;
  message: string;
}

export interface OnboardResult {
  chip: Chip;
  resolved: ResolvedChip;
  scan: FolderScan;
  coverage: Coverage;
  imported: ImportSummary[];
  files: {
    chip?: string;
    registry: string;
    report: string;
    coverage: string;
    measurements: string[];
    /** Fit report files (fits/<chip>/README.md, SVGs). */
    fit_report: string[];
  };
  /** Registry as fitted (before refusals and extrapolation). */
  fitted: CoefficientSet[];
  /** Registry as written. */
  sets: CoefficientSet[];
  refused: OnboardRefusal[];
  repairs: string[];
  widths: WidthExtrapolation[];
  families: FamilyExtrapolation[];
  family_coverage: FamilyCoverage[];
  pricing: PricingLimits;
  /** Fit warnings (the report lists them). */
  warnings: string[];
  report: string;
}

/** Scan, check required families, resolve the chip: everything before any work is done. */
async function prepare(o: OnboardOptions, log: (l: string) => void) {
  if (!/^[a-z0-9_-]+$/.test(o.chip))
    throw new UserError(`--chip "${o.chip}": use lower-case letters, digits, '-' or '_'`);
  const scan = await scanUpstreamFolder(o.dataDir, o.lanes ?? []);
  const coverage = coverageOf(
    chosenTables(scan),
    scan.skipped.filter((s) => s.kind === 'not_a_table').map((s) => s.file),
  );
  const coverageText = formatCoverage(coverage);
  log(coverageText);
  for (const t of scan.tables)
    log(`lane ${t.table}: ${t.chosen.lane} (${t.why}; found ${t.lanes.map((l) => l.lane).join(', ')})`);
  for (const k of skipSummary(scan.skipped)) log(`read or skipped: ${k.kind} ${k.files} file(s), ${k.rows} rows`);
  const missingRequired = REQUIRED_FAMILIES.filter((f) => !coverage.supported.includes(f));
  if (missingRequired.length)
    throw new UserError(
      // The coverage was logged above (once, before this line, which is then the last on stderr); a
      // caller without a log gets it in the message.
      `onboard ${o.chip}: the data cannot support required famil${missingRequired.length > 1 ? 'ies' : 'y'} ${missingRequired.join(', ')}; nothing written.${o.log ? '' : `\n${coverageText}`}`,
    );
  const resolved = resolveChip({
    chip: o.chip,
    catalogDir: o.catalogDir ?? CHIPS_DIR,
    ...((o.systemFile ?? defaultSystemFile(o.dataDir))
      ? { systemFile: (o.systemFile ?? defaultSystemFile(o.dataDir))! }
      : {}),
    ...(o.sm_count !== undefined ? { sm_count: o.sm_count } : {}),
    ...(o.l2_mib !== undefined ? { l2_mib: o.l2_mib } : {}),
  });
  for (const l of formatChipDiff(resolved)) log(l);
  return { scan, coverage, resolved };
}

/** Import the chosen tables and fit them, in a private work folder (nothing of the output root touched). */
async function importAndFit(
  o: OnboardOptions,
  work: string,
  scan: FolderScan,
  resolved: ResolvedChip,
  log: (l: string) => void,
) {
  const chipFile = path.join(work, 'catalog', 'chips', `${o.chip}.yaml`);
  writeFilesAtomic([
    { file: chipFile, data: o.updateCatalog && resolved.updated ? resolved.updated.yaml : resolved.yaml },
  ]);
  const measDir = path.join(work, 'measurements', o.chip);
  const refusedTables: SkippedFile[] = [];
  const { staged, summaries } = await stageAicImport(
    scan.tables.map((t) => t.chosen.file),
    {
      chip: o.chip,
      chipInfo: resolved.chip,
      outDir: measDir,
      sourceRepository: AIC_REPOSITORY,
      sourceCommit: 'unknown (onboarded from a local copy)',
      onRefusedFile: (file, e) => {
        const t = scan.tables.find((x) => x.chosen.file === file);
        if (!t || isRequiredTable(t.table)) return false;
        refusedTables.push({ file, kind: 'refused_table', reason: e.message, rows: t.chosen.rows });
        log(`refused table (left out, family ${AIC_TABLES[t.table]} fits without it): ${e.message}`);
        return true;
      },
    },
  );
  writeMeasurementSet(staged);
  for (const s of summaries)
    log(
      `imported ${s.family} (${s.lane}): ${s.rows_out} rows from ${s.rows_in} (${s.duplicate_configs} repeated configurations collapsed)`,
    );
  const { fitAll } = await import('../fit/index.ts');
  const fit = await fitAll(chipFile, {
    repoRoot: work,
    measurementsDir: measDir,
    ...(o.bootstrap ? { bootstrap: o.bootstrap } : {}),
  });
  for (const w of fit.warnings) log(`fit warning: ${w}`);
  return { fit, staged, summaries, chipFile, scan: withoutRefused(scan, refusedTables) };
}

/**
 * Whether a table feeds a family onboarding cannot do without (REQUIRED_FAMILIES and what they need):
 * a refused required table stops the run; any other is left out with its reason.
 */
function isRequiredTable(table: AicTable): boolean {
  return REQUIRED_FAMILIES.some((f) => FAMILY_NEEDS[f]!.includes(AIC_TABLES[table]));
}

/** The scan with the refused tables moved from `tables` to `skipped` (kind `refused_table`), counts updated. */
function withoutRefused(scan: FolderScan, refused: readonly SkippedFile[]): FolderScan {
  if (!refused.length) return scan;
  const gone = new Set(refused.map((r) => r.file));
  const counts = { ...scan.counts, refused_table: scan.counts.refused_table + refused.length };
  return {
    ...scan,
    tables: scan.tables.filter((t) => !gone.has(t.chosen.file)),
    skipped: [...scan.skipped, ...refused],
    counts,
  };
}

/**
 * Split the fit's refusals: a required family's stops the run; any other leaves out the entry it names
 * (`<coefficient name>: …`) or, for a family-level refusal (`<family>: …`), that family.
 * @throws UserError listing the required refusals.
 */
export function scopeRefusals(
  chip: string,
  refusals: readonly string[],
  sets: readonly CoefficientSet[],
): { sets: CoefficientSet[]; refused: OnboardRefusal[] } {
  const names = new Set(sets.flatMap((s) => s.coefficients.map((c) => c.name)));
  const refused: OnboardRefusal[] = refusals.map((m) => {
    const head = m.split(':')[0]!.trim();
    const named = names.has(head) || /^(gemm|hbm|attention|collective|moe|host)_/.test(head);
    return named ? { family: familyOfName(head), name: head, message: m } : { family: head, message: m };
  });
  const fatal = refused.filter((r) => isRequired(r));
  if (fatal.length)
    throw new UserError(
      `onboard ${chip}: the fit refused a required family, registry not written:\n  ${fatal.map((r) => r.message).join('\n  ')}`,
    );
  // A refused GEMM ramp entry takes its whole ramp (eps_max with its half-saturations) with it.
  const ramps = new Set(refused.flatMap((r) => (r.name ? [GEMM_RAMP.exec(r.name)?.[2] ?? ''] : [])).filter(Boolean));
  const dropName = new Set([
    ...refused.flatMap((r) => (r.name ? [r.name] : [])),
    ...[...names].filter((n) => ramps.has(GEMM_RAMP.exec(n)?.[2] ?? '')),
  ]);
  const dropFamily = new Set(refused.filter((r) => !r.name).map((r) => r.family));
  const kept = sets
    .map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => !dropName.has(c.name) && !dropFamily.has(familyOf(c.name, c.entry))),
    }))
    .filter((s) => s.coefficients.length);
  return { sets: kept, refused };
}

/** Same-generation sibling registries (each with its catalog entry). */
function loadSiblings(o: OnboardOptions, log: (l: string) => void): ChipRegistry[] {
  const siblingDir = o.siblingRegistryDir ?? path.join(REPO_ROOT, 'registry');
  const siblingCatalog = o.siblingCatalogDir ?? CHIPS_DIR;
  const siblings: ChipRegistry[] = [];
  if (!existsSync(siblingDir)) return siblings;
  for (const f of readdirSync(siblingDir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    const name = f.slice(0, -5);
    if (name === o.chip) continue;
    try {
      siblings.push({ chip: loadChip(name, siblingCatalog), sets: loadRegistryFile(path.join(siblingDir, f)) });
    } catch {
      log(`note: ${f} skipped as a sibling (no catalog entry)`);
    }
  }
  return siblings;
}

/**
 * Families never filled from siblings: hbm (fitted with gemm), and mla, whose decode law is chosen per
 * chip by its kernel (wave law or linear law, src/fit/mla.ts) so a cross-chip median could mix the forms
 * and leave a partial law the pricer refuses; without it MLA prices at the full-attention rate, as before.
 */
const NOT_EXTRAPOLATED = new Set(['hbm', 'mla']);

/** Collective widths with no entry, then families the data lacks or the fit left empty. */
function extrapolate(o: OnboardOptions, chip: Chip, start: CoefficientSet[], log: (l: string) => void) {
  let sets = start;
  const present = new Set(sets.flatMap((s) => s.coefficients.map((c) => c.name)));
  const widths = extrapolateCollectiveWidths(sets, o.chip, o.widths ?? [16]).map((r) =>
    r.status === 'extrapolated' && r.entries.some((e) => present.has(e.name))
      ? { ...r, status: 'skipped' as const, reason: 'the fit already provides this width', entries: [] }
      : r,
  );
  const widthAdds = widths.flatMap((r) => r.entries.map((e) => ({ ...e, set: 'cost-model-collectives' })));
  if (widthAdds.length) sets = mergeEntries(sets, widthAdds).sets;
  const siblings = loadSiblings(o, log);
  const families: FamilyExtrapolation[] = [];
  const fittedFamilies = new Set(sets.flatMap((s) => s.coefficients.map((c) => familyOf(c.name, c.entry))));
  for (const family of Object.keys(FAMILY_NEEDS).filter((f) => !NOT_EXTRAPOLATED.has(f) && !fittedFamilies.has(f))) {
    const r = extrapolateFamily({ chip, sets }, siblings, family);
    families.push(r);
    if (r.status === 'extrapolated')
      sets = mergeEntries(
        sets,
        r.coefficients.filter((c) => c.entry).map((c) => c.entry!),
      ).sets;
  }
  return { sets, widths, families };
}

/** Schema and physics gates over the registry to write. @throws UserError listing the errors. */
function gate(o: OnboardOptions, chip: Chip, sets: readonly CoefficientSet[]): void {
  const siblingCatalog = o.siblingCatalogDir ?? CHIPS_DIR;
  const lookup = (n: string): Chip | undefined => {
    if (n.toLowerCase() === o.chip) return chip;
    try {
      return loadChip(n, siblingCatalog);
    } catch {
      return undefined;
    }
  };
  const problems = errorsOf(validateRegistry(sets, `registry/${o.chip}.yaml`, { chip: lookup }));
  if (problems.length)
    throw new UserError(
      `onboard ${o.chip}: the registry fails validation, not written:\n${problems.map(formatProblem).join('\n')}`,
    );
}

/**
 * Existing files the write would replace with different content, without the flag that allows it
 * (module comment). @throws UserError with the registry diff and the files; nothing is written.
 */
function guardWrites(
  o: OnboardOptions,
  root: string,
  files: ReadonlyArray<{ file: string; data: string | Uint8Array }>,
  sets: readonly CoefficientSet[],
): void {
  if (o.replaceRegistry) return;
  const changed = files.filter((f) => {
    if (!existsSync(f.file) || f.file.includes(`${path.sep}catalog${path.sep}`)) return false;
    if (!f.file.endsWith('.yaml') && !f.file.includes(`${path.sep}measurements${path.sep}`)) return false;
    return !Buffer.from(readFileSync(f.file)).equals(
      Buffer.from(typeof f.data === 'string' ? Buffer.from(f.data) : f.data),
    );
  });
  if (!changed.length) return;
  const reg = path.join(root, 'registry', `${o.chip}.yaml`);
  const lines: string[] = [];
  if (changed.some((f) => f.file === reg)) {
    const d = diffRegistries(loadRegistryFile(reg), sets);
    lines.push(
      `registry diff: ${d.added.length} added, ${d.removed.length} removed, ${d.changed.length} changed, ${d.unchanged} unchanged`,
    );
    for (const x of [
      ...d.removed.map((r) => `- ${r.name} (${r.method})`),
      ...d.changed.map((c) => `~ ${c.name}`),
      ...d.added.map((a) => `+ ${a.name}`),
    ].slice(0, 12))
      lines.push(`  ${x}`);
  }
  throw new UserError(
    `onboard ${o.chip}: would replace ${changed.length} existing file(s) under ${root}; nothing written. Pass --replace-registry, or --out-root <dir> to write elsewhere.\n  ${changed
      .map((f) => path.relative(root, f.file))
      .slice(0, 8)
      .join('\n  ')}\n${lines.join('\n')}`,
  );
}

/**
 * Onboard a chip (module comment).
 * @throws UserError when a required family is missing (nothing written; the coverage list is logged
 *   before it, or is in the message when there is no `log`), on bad
 *   inputs (file, row, column named by the importers), when a required family's fit or a gate fails,
 *   or when the write would replace existing files without the flag (the registry is then not written).
 */
export async function onboardChip(o: OnboardOptions): Promise<OnboardResult> {
  const log = o.log ?? (() => {});
  const root = path.resolve(o.outRoot ?? REPO_ROOT);
  const prepared = await prepare(o, log);
  const { resolved } = prepared;
  const work = mkdtempSync(path.join(os.tmpdir(), `stepcal-onboard-${o.chip}-`));
  try {
    const { fit, staged, summaries, chipFile, scan } = await importAndFit(o, work, prepared.scan, resolved, log);
    const coverage =
      scan === prepared.scan ? prepared.coverage : coverageOf(chosenTables(scan), prepared.coverage.ignored);
    const chip = loadChip(chipFile);
    const scoped = scopeRefusals(o.chip, fit.refusals, fit.sets);
    for (const r of scoped.refused) log(`refused (left out of the registry): ${r.message}`);
    const { sets, widths, families } = extrapolate(o, chip, scoped.sets, log);
    gate(o, chip, sets);
    const fam = familyCoverage(sets, scan, scoped.refused);
    const pricing = pricingLimits(chip, sets, fam);
    const drawn = o.fitOutputs({ ...fit, sets, registry_text: stringifyCoefficientSets(sets) }, { repoRoot: root });
    const repairs = fit.warnings.filter((w) => w.includes('repaired within noise'));
    const partial = {
      chip,
      resolved,
      scan,
      coverage,
      // Where each imported table is written (the output root), not the private work folder it was staged in.
      imported: summaries.map((x) => ({ ...x, file: inRoot(root, work, x.file) })),
      fitted: fit.sets,
      sets,
      refused: scoped.refused,
      repairs,
      widths,
      families,
      family_coverage: fam,
      pricing,
      warnings: fit.warnings,
    };
    const report = renderOnboardReport(partial, drawn.summary);
    const files = outputFiles(
      o,
      root,
      work,
      staged.flatMap((s) => s.files),
      drawn.files,
      report,
      partial,
    );
    guardWrites(o, root, files.all, sets);
    writeFilesAtomic(files.all);
    log(`wrote ${files.all.length} file(s) under ${root}${files.chip ? `, catalog ${files.chip}` : ''}`);
    return { ...partial, report, files: files.result };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

type Partial_ = Omit<OnboardResult, 'report' | 'files'>;

/** Where a file staged in the private work folder is written under the output root (the same relative path). */
const inRoot = (root: string, work: string, file: string) => path.join(root, path.relative(work, file));

/** The output set: catalog (new entry, or on request), measurements, registry, fit report, onboarding report, coverage. */
function outputFiles(
  o: OnboardOptions,
  root: string,
  work: string,
  measured: ReadonlyArray<{ file: string; data: string | Uint8Array }>,
  drawn: ReadonlyArray<{ file: string; data: string }>,
  report: string,
  r: Partial_,
) {
  const all: Array<{ file: string; data: string | Uint8Array }> = [];
  const catalogDir = o.catalogDir ?? CHIPS_DIR;
  const rootCatalog = path.join(root, 'catalog', 'chips', `${o.chip}.yaml`);
  let chipOut: string | undefined;
  if (o.updateCatalog && r.resolved.updated) {
    chipOut = path.join(catalogDir, `${o.chip}.yaml`);
    all.push({ file: chipOut, data: r.resolved.updated.yaml });
  } else if (r.resolved.source === 'descriptor' || rootCatalog !== path.join(catalogDir, `${o.chip}.yaml`)) {
    chipOut = rootCatalog;
    all.push({ file: chipOut, data: r.resolved.source === 'descriptor' ? r.resolved.updated!.yaml : r.resolved.yaml });
  }
  const meas = measured.map((f) => ({ file: inRoot(root, work, f.file), data: f.data }));
  all.push(...meas, ...drawn);
  const reportFile = path.join(root, 'fits', o.chip, 'onboard.md');
  const coverageFile = path.join(root, 'fits', o.chip, 'coverage.json');
  all.push(
    { file: reportFile, data: report },
    { file: coverageFile, data: `${JSON.stringify(coverageReportJson(r, root), null, 2)}\n` },
  );
  const registry = path.join(root, 'registry', `${o.chip}.yaml`);
  return {
    all,
    chip: chipOut,
    result: {
      ...(chipOut ? { chip: chipOut } : {}),
      registry,
      report: reportFile,
      coverage: coverageFile,
      measurements: r.imported.map((s) => s.file),
      fit_report: drawn.map((f) => f.file).filter((f) => f !== registry),
    },
  };
}

/** Coverage as JSON: families supported and unsupported (with the missing measurement families), tables chosen. */
export function coverageJson(c: Coverage): {
  supported: string[];
  unsupported: Coverage['unsupported'];
  tables: Record<string, number>;
  ignored: string[];
} {
  return {
    supported: c.supported,
    unsupported: c.unsupported,
    tables: Object.fromEntries(Object.entries(c.tables).map(([t, f]) => [t, f!.length])),
    ignored: c.ignored,
  };
}

/** Paths relative to `root` when inside it (the committed coverage.json must not name a temp folder). */
const rel = (root: string, f: string) => (path.resolve(f).startsWith(root + path.sep) ? path.relative(root, f) : f);

/**
 * The coverage report (fits/<chip>/coverage.json and `--json`'s `coverage`): per family status,
 * entries by method, lanes found and chosen, refusals; what pricing refuses and extrapolates; the
 * topology; every upstream file read or skipped, counted by reason. Pure.
 */
export function coverageReportJson(r: Omit<OnboardResult, 'report' | 'files'>, root: string) {
  const dataRoot = path.resolve(r.scan.dir);
  const inData = (f: string) => path.relative(dataRoot, f);
  return {
    ...coverageJson(r.coverage),
    chip: {
      name: r.chip.name,
      source: r.resolved.source,
      defaulted: r.resolved.defaulted,
      catalog_vs_descriptor: r.resolved.diff,
      ...(r.resolved.systemFile ? { system: path.basename(r.resolved.systemFile) } : {}),
    },
    families: r.family_coverage,
    pricing: r.pricing,
    imported: r.imported.map((s) => ({
      family: s.family,
      lane: s.lane,
      file: rel(root, s.file),
      inputs: s.inputs.map(inData),
      rows_in: s.rows_in,
      rows_out: s.rows_out,
      repeated_configurations_collapsed: s.duplicate_configs,
    })),
    read_or_skipped: skipSummary(r.scan.skipped),
    skipped: r.scan.skipped
      .filter((k) => k.kind !== 'metadata')
      .map((k) => ({
        file: inData(k.file),
        kind: k.kind,
        reason: k.reason,
        ...(k.rows !== undefined ? { rows: k.rows } : {}),
      })),
    refused: r.refused,
    repaired_within_noise: r.repairs,
  };
}

/** `stepcal onboard --json` (docs/onboarding.md "JSON output"); pure over the result. */
export function onboardJson(r: OnboardResult) {
  const all = r.sets.flatMap((s) => s.coefficients);
  const by: Record<string, number> = {};
  for (const c of all) by[c.entry.method] = (by[c.entry.method] ?? 0) + 1;
  return {
    status: 'onboarded' as const,
    chip: r.chip.name,
    coverage: coverageReportJson(r, path.dirname(path.dirname(r.files.registry))),
    files_written: [
      ...(r.files.chip ? [r.files.chip] : []),
      ...r.files.measurements,
      r.files.registry,
      ...r.files.fit_report,
      r.files.report,
      r.files.coverage,
    ],
    registry: r.files.registry,
    summary: {
      entries: all.length,
      sets: r.sets.length,
      by_method: by,
      fitted_entries: r.fitted.reduce((n, s) => n + s.coefficients.length, 0),
      extrapolated: all.filter((c) => c.entry.evidence?.extrapolation).length,
      widths: r.widths
        .filter((w) => w.status !== 'skipped')
        .map((w) => ({
          op: w.op,
          dtype: w.dtype,
          target_ranks: w.target_ranks,
          status: w.status,
          ...(w.reason ? { reason: w.reason } : {}),
        })),
      families: r.families.map((f) => ({
        family: f.family,
        status: f.status,
        ...(f.reason ? { reason: f.reason } : {}),
        extrapolated: f.coefficients.filter((c) => c.status === 'extrapolated').map((c) => c.name),
      })),
    },
  };
}

/** Markdown report of an onboarding (fits/<chip>/onboard.md). */
export function renderOnboardReport(r: Omit<OnboardResult, 'report' | 'files'>, fitSummary: readonly string[]): string {
  const { chip, sets } = r;
  const n = sets.reduce((a, s) => a + s.coefficients.length, 0);
  const L: string[] = [`# Onboarding ${chip.name}`, ''];
  L.push(
    `Chip (${r.resolved.source === 'catalog' ? 'catalog entry' : 'built from the descriptor'}): sm_version ${chip.sm_version ?? '?'}, bf16 ${chip.peak_tflops.bf16} TFLOP/s, HBM ${chip.hbm_tb_per_s} TB/s, L2 ${chip.l2_mib ?? '?'} MiB, peer link ${chip.peer_link ?? 'nvlink'} ${chip.nvlink_gb_per_s_per_dir} GB/s per direction, NIC ${chip.nic_gb_per_s_per_dir} GB/s.`,
    '',
    ...formatChipDiff(r.resolved).map((l) => `- ${l.trim()}`),
    '',
    `Topology: ${r.pricing.topology}.`,
    '',
  );
  L.push('## Coverage', '', ...familyTable(r.family_coverage), '');
  L.push('## What pricing refuses or extrapolates', '');
  for (const x of r.pricing.refuses) L.push(`- refuses: ${x}`);
  for (const x of r.pricing.extrapolates) L.push(`- extrapolates: ${x}`);
  if (!r.pricing.refuses.length) L.push('- refuses: nothing for lack of data');
  L.push('', '## Upstream files read or skipped', '');
  L.push(
    markdownTable({
      header: ['kind', 'files', 'rows'],
      rows: [
        [
          'imported (chosen lanes)',
          String(r.imported.reduce((a, s) => a + s.inputs.length, 0)),
          String(r.imported.reduce((a, s) => a + s.rows_in, 0)),
        ],
        ...skipSummary(r.scan.skipped).map((k) => [k.kind, String(k.files), String(k.rows)]),
      ],
    }).trimEnd(),
    '',
    `Repeated configurations collapsed (median): ${r.imported.map((s) => `${s.family} ${s.duplicate_configs}`).join(', ')}.`,
    '',
  );
  L.push('## Refused or repaired', '');
  const tables = r.scan.skipped.filter((k) => k.kind === 'refused_table');
  for (const k of tables) L.push(`- refused table (left out): ${k.reason}`);
  for (const x of r.refused) L.push(`- refused: ${x.message}`);
  for (const x of r.repairs) L.push(`- ${x}`);
  if (!tables.length && !r.refused.length && !r.repairs.length) L.push('- none');
  L.push('', '## Fit', '', ...fitSummary.map((s) => `- ${s}`), '');
  L.push(...extrapolationLines(r.widths, r.families));
  L.push(
    '',
    `Registry: ${n} entries in ${sets.length} sets; ${sets.flatMap((s) => s.coefficients).filter((c) => c.entry.evidence?.extrapolation).length} extrapolated.`,
    '',
  );
  return L.join('\n');
}

function familyTable(fams: readonly FamilyCoverage[]): string[] {
  return markdownTable({
    header: ['family', 'status', 'entries', 'lanes chosen (found)'],
    rows: fams.map((f) => [
      f.family,
      f.status,
      Object.entries(f.entries)
        .map(([k, v]) => `${v} ${k}`)
        .join(', ') || '–',
      f.tables
        .map((t) => `${t.table}: ${t.lane_chosen} (${t.lanes_found.length} lane${t.lanes_found.length > 1 ? 's' : ''})`)
        .join('; ') || '–',
    ]),
  })
    .trimEnd()
    .split('\n');
}

function extrapolationLines(widths: readonly WidthExtrapolation[], families: readonly FamilyExtrapolation[]): string[] {
  const L = ['## Extrapolation (method: assumed, flagged in evidence.extrapolation)', ''];
  const w = widths.filter((x) => x.status !== 'skipped');
  if (!w.length) L.push('- collective widths: none needed (the fit provides every target width)');
  for (const x of w)
    L.push(
      `- ${x.op} ${x.dtype} → ${x.target_ranks} ranks: ${x.status}${x.floor_us !== undefined ? `, floor ${x.floor_us} µs` : ''}${x.holdout ? `, holdout ${x.holdout.held_out_ranks}-rank pred/meas ${x.holdout.ratio.toFixed(3)}` : ''}${x.reason ? ` (${x.reason})` : ''}`,
    );
  for (const f of families) {
    L.push(`- family ${f.family}: ${f.status.toUpperCase()}${f.reason ? ` — ${f.reason}` : ''}`);
    for (const c of f.coefficients)
      L.push(
        `  - ${c.name}: ${c.status === 'extrapolated' ? `${c.value} by ${c.predictor} from ${c.from.join(', ')}` : `refused: ${c.reason}`}`,
      );
  }
  return L;
}
