/**
 * New-chip onboarding (issue 5): raw upstream per-operator tables + a system descriptor → chip file,
 * measurement store, fitted and extrapolated registry, report — with no code change.
 *
 *   coverage (from table names, before anything is written; fails early without a required family)
 *   → chip file from the descriptor (<out-root>/catalog/chips/<chip>.yaml)
 *   → import (<out-root>/measurements/<chip>/, the importer's own validation and units-slip gate)
 *   → fit all (src/fit `fitAll`, with the chip file and <out-root> as repo root)
 *   → extrapolation where needed (collective widths the fit left empty; families the data lacks,
 *     from same-generation siblings in the committed registries)
 *   → gates (`validateRegistry`, schema + physics) → registry write (<out-root>/registry/<chip>.yaml,
 *     with fits/<chip>/ figures and README) → report (<out-root>/fits/<chip>/onboard.md).
 *
 * DECISIONS (docs/registry.md): required families are gemm and attention_decode (without them no
 * step can be priced); the output root defaults to the repository, and tests pass a temporary one,
 * so the committed catalog and registries are never touched by a test. Measurements are written
 * before fitting (they are valid imported data either way); the registry is written only when every
 * fit, gate and check passes.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { chipFromObject, CHIPS_DIR, loadChip, REPO_ROOT, type Chip } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { markdownTable } from '../core/render/table.ts';
import { readText, writeFilesAtomic } from '../core/io/fs.ts';
import { AIC_TABLES, type AicTable } from '../measurements/aiconfigurator.ts';
import { AIC_COMMIT, AIC_REPOSITORY, stageAicImport } from '../measurements/import.ts';
import { writeMeasurementSet } from '../measurements/store.ts';
import { systemToChip } from '../measurements/system.ts';
import { extrapolateFamily, mergeEntries, type ChipRegistry, type FamilyExtrapolation } from './extrapolate.ts';
import { extrapolateCollectiveWidths, type WidthExtrapolation } from '../fit/collective-width.ts';
import type { FitAllResult } from '../fit/index.ts';
import { loadRegistryFile } from './load.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import { familyOf } from '../core/schemas/names.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { errorsOf, formatProblem, validateRegistry } from './validate.ts';

/** Families without which onboarding stops before fitting. */
export const REQUIRED_FAMILIES = ['gemm', 'attention_decode'] as const;

/** Fitting families and the measurement families each needs (host falls back to assumed values). */
export const FAMILY_NEEDS: Record<string, string[]> = {
  gemm: ['gemm'],
  hbm: ['gemm', 'attention_decode'],
  attention_decode: ['attention_decode'],
  attention_prefill: ['attention_prefill', 'gemm'],
  collective: ['collective'],
  moe: ['moe'],
  host: [],
};

export interface Coverage {
  /** Data files found, by upstream table. */
  tables: Partial<Record<AicTable, string[]>>;
  /** Files under --data that are not upstream tables (ignored). */
  ignored: string[];
  supported: string[];
  unsupported: Array<{ family: string; missing: string[] }>;
}

/** Upstream table files under `dir` (recursive): `<table>.csv`, `.csv.gz` or `.parquet`. Sorted. */
export function findTables(dir: string): { tables: Partial<Record<AicTable, string[]>>; ignored: string[] } {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new UserError(`--data ${dir}: not a directory`);
  const tables: Partial<Record<AicTable, string[]>> = {};
  const ignored: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = path.join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else {
        const m = /^(.+?)\.(csv|csv\.gz|parquet)$/.exec(name);
        if (m && m[1]! in AIC_TABLES) (tables[m[1] as AicTable] ??= []).push(p);
        else ignored.push(p);
      }
    }
  };
  walk(dir);
  return { tables, ignored };
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
  const lines = ['families the data can support: ' + (c.supported.join(', ') || 'none')];
  for (const u of c.unsupported) lines.push(`cannot support ${u.family}: no ${u.missing.join(' or ')} table`);
  if (c.supported.includes('host'))
    lines.push('note: host has no per-operator table upstream; its entries are the assumed values (method: assumed)');
  for (const f of c.ignored) lines.push(`ignored (not an upstream table): ${f}`);
  return lines.join('\n');
}

export interface OnboardOptions {
  chip: string;
  dataDir: string;
  systemFile: string;
  /** Where catalog/, measurements/, registry/ and fits/ are written (default the repository). */
  outRoot?: string;
  /** Facts the descriptor lacks. */
  sm_count?: number;
  l2_mib?: number;
  /** Collective widths to fill by extrapolation when the fit left them empty (default [16]). */
  widths?: number[];
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

export interface OnboardResult {
  chip: Chip;
  coverage: Coverage;
  files: {
    chip: string;
    registry: string;
    report: string;
    measurements: string[] /** Fit report files (fits/<chip>/README.md, SVGs). */;
    fit_report: string[];
  };
  /** Registry as fitted (before extrapolation). */
  fitted: CoefficientSet[];
  /** Registry as written. */
  sets: CoefficientSet[];
  widths: WidthExtrapolation[];
  families: FamilyExtrapolation[];
  report: string;
}

/**
 * Onboard a chip (module comment).
 * @throws UserError with the coverage list when a required family is missing (nothing written),
 *   on bad inputs (file, row, column named by the importers), or when a fit, gate or check fails
 *   (the registry is then not written).
 */
export async function onboardChip(o: OnboardOptions): Promise<OnboardResult> {
  const log = o.log ?? (() => {});
  const root = path.resolve(o.outRoot ?? REPO_ROOT);
  const chipName = o.chip;
  if (!/^[a-z0-9_-]+$/.test(chipName))
    throw new UserError(`--chip "${chipName}": use lower-case letters, digits, '-' or '_'`);

  // 1. Coverage, before anything is written.
  const found = findTables(o.dataDir);
  const coverage = coverageOf(found.tables, found.ignored);
  log(formatCoverage(coverage));
  const missingRequired = REQUIRED_FAMILIES.filter((f) => !coverage.supported.includes(f));
  if (missingRequired.length)
    throw new UserError(
      `onboard ${chipName}: the data cannot support required famil${missingRequired.length > 1 ? 'ies' : 'y'} ${missingRequired.join(', ')}; nothing written.\n${formatCoverage(coverage)}`,
    );
  if (existsSync(path.join(CHIPS_DIR, `${chipName}.yaml`)) && root !== REPO_ROOT)
    log(
      `note: ${chipName} is in the repository catalog; onboarding it as new into ${root} (the catalog entry is not read)`,
    );

  // 2. Chip file from the descriptor (validated by the chip schema).
  if (!existsSync(o.systemFile)) throw new UserError(`--system ${o.systemFile}: no such file`);
  const upstreamRef = `${AIC_REPOSITORY}@${AIC_COMMIT.slice(0, 8)} systems/${path.basename(o.systemFile)} (onboarded)`;
  const sys = systemToChip(readText(o.systemFile), o.systemFile, chipName, upstreamRef, {
    ...(o.sm_count !== undefined ? { sm_count: o.sm_count } : {}),
    ...(o.l2_mib !== undefined ? { l2_mib: o.l2_mib } : {}),
  });
  const chip = chipFromObject(sys.chip, o.systemFile);
  const chipFile = path.join(root, 'catalog', 'chips', `${chipName}.yaml`);
  writeFilesAtomic([{ file: chipFile, data: sys.yaml }]);
  log(`wrote ${chipFile}`);

  // 3. Import every table (all files validated before any is written).
  const measDir = path.join(root, 'measurements', chipName);
  const files = Object.values(found.tables).flat() as string[];
  const { staged, summaries } = await stageAicImport(files, {
    chip: chipName,
    chipInfo: chip,
    outDir: measDir,
    sourceRepository: AIC_REPOSITORY,
    sourceCommit: 'unknown (onboarded from a local copy)',
  });
  writeMeasurementSet(staged);
  for (const s of summaries) log(`imported ${s.family} (${s.lane}): ${s.rows_out} rows from ${s.rows_in} → ${s.file}`);

  // 4. Fit all, against the onboarded chip file and root.
  const { fitAll } = await import('../fit/index.ts');
  const fit = await fitAll(chipFile, {
    repoRoot: root,
    measurementsDir: measDir,
    ...(o.bootstrap ? { bootstrap: o.bootstrap } : {}),
  });
  for (const w of fit.warnings) log(`fit warning: ${w}`);
  if (fit.refusals.length)
    throw new UserError(`onboard ${chipName}: the fit refused, registry not written:\n  ${fit.refusals.join('\n  ')}`);
  let sets = fit.sets;

  // 5. Extrapolation where needed: widths with no entry at all, then families the data lacks.
  const present = new Set(sets.flatMap((s) => s.coefficients.map((c) => c.name)));
  const widths = extrapolateCollectiveWidths(sets, chipName, o.widths ?? [16]).map((r) =>
    r.status === 'extrapolated' && r.entries.some((e) => present.has(e.name))
      ? { ...r, status: 'skipped' as const, reason: 'the fit already provides this width', entries: [] }
      : r,
  );
  const widthAdds = widths.flatMap((r) => r.entries.map((e) => ({ ...e, set: 'cost-model-collectives' })));
  if (widthAdds.length) sets = mergeEntries(sets, widthAdds).sets;
  const siblingDir = o.siblingRegistryDir ?? path.join(REPO_ROOT, 'registry');
  const siblingCatalog = o.siblingCatalogDir ?? CHIPS_DIR;
  const siblings: ChipRegistry[] = [];
  if (existsSync(siblingDir))
    for (const f of readdirSync(siblingDir)
      .filter((n) => n.endsWith('.yaml'))
      .sort()) {
      const name = f.slice(0, -5);
      if (name === chipName) continue;
      try {
        siblings.push({ chip: loadChip(name, siblingCatalog), sets: loadRegistryFile(path.join(siblingDir, f)) });
      } catch {
        log(`note: ${f} skipped as a sibling (no catalog entry)`);
      }
    }
  const families: FamilyExtrapolation[] = [];
  // Families the data cannot support, and families the fit left empty (e.g. a refused MoE fit).
  const fittedFamilies = new Set(sets.flatMap((s) => s.coefficients.map((c) => familyOf(c.name, c.entry))));
  const toFill = Object.keys(FAMILY_NEEDS).filter((f) => f !== 'hbm' && !fittedFamilies.has(f));
  for (const family of toFill) {
    const r = extrapolateFamily({ chip, sets }, siblings, family);
    families.push(r);
    if (r.status === 'extrapolated')
      sets = mergeEntries(
        sets,
        r.coefficients.filter((c) => c.entry).map((c) => c.entry!),
      ).sets;
  }

  // 6. Gates.
  const lookup = (n: string) =>
    n.toLowerCase() === chipName
      ? chip
      : (() => {
          try {
            return loadChip(n, siblingCatalog);
          } catch {
            return undefined;
          }
        })();
  const problems = errorsOf(validateRegistry(sets, `registry/${chipName}.yaml`, { chip: lookup }));
  if (problems.length)
    throw new UserError(
      `onboard ${chipName}: the registry fails validation, not written:\n${problems.map(formatProblem).join('\n')}`,
    );

  // 7. Write registry, fits and the onboarding report together.
  const drawn = o.fitOutputs({ ...fit, sets, registry_text: stringifyCoefficientSets(sets) }, { repoRoot: root });
  const report = renderOnboardReport(
    chip,
    coverage,
    summaries.map((s) => ({ family: s.family, lane: s.lane, rows: s.rows_out })),
    drawn.summary,
    widths,
    families,
    sets,
  );
  const outFiles = drawn.files;
  const registryFile = path.join(root, 'registry', `${chipName}.yaml`);
  const reportFile = path.join(root, 'fits', chipName, 'onboard.md');
  writeFilesAtomic([...outFiles, { file: reportFile, data: report }]);
  log(`wrote ${registryFile}, ${reportFile} and ${outFiles.length - 1} fit report file(s)`);
  return {
    chip,
    coverage,
    files: {
      chip: chipFile,
      registry: registryFile,
      report: reportFile,
      measurements: summaries.map((s) => s.file),
      fit_report: outFiles.map((f) => f.file).filter((f) => f !== registryFile),
    },
    fitted: fit.sets,
    sets,
    widths,
    families,
    report,
  };
}

/** Coverage as JSON: families supported and unsupported (with the missing measurement families), tables found. */
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

/** `stepcal onboard --json` (docs/registry.md "JSON output"); pure over the result. */
export function onboardJson(r: OnboardResult): {
  status: 'onboarded';
  chip: string;
  coverage: ReturnType<typeof coverageJson>;
  files_written: string[];
  registry: string;
  summary: {
    entries: number;
    sets: number;
    by_method: Record<string, number>;
    fitted_entries: number;
    extrapolated: number;
    widths: Array<{ op: string; dtype: string; target_ranks: number; status: string; reason?: string }>;
    families: Array<{ family: string; status: string; reason?: string; extrapolated: string[] }>;
  };
} {
  const all = r.sets.flatMap((s) => s.coefficients);
  const by: Record<string, number> = {};
  for (const c of all) by[c.entry.method] = (by[c.entry.method] ?? 0) + 1;
  return {
    status: 'onboarded',
    chip: r.chip.name,
    coverage: coverageJson(r.coverage),
    files_written: [r.files.chip, ...r.files.measurements, r.files.registry, ...r.files.fit_report, r.files.report],
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

/** Markdown report of an onboarding. */
export function renderOnboardReport(
  chip: Chip,
  coverage: Coverage,
  imported: Array<{ family: string; lane: string; rows: number }>,
  fitSummary: readonly string[],
  widths: readonly WidthExtrapolation[],
  families: readonly FamilyExtrapolation[],
  sets: readonly CoefficientSet[],
): string {
  const n = sets.reduce((a, s) => a + s.coefficients.length, 0);
  const assumed = sets.flatMap((s) => s.coefficients).filter((c) => c.entry.evidence?.extrapolation);
  const L: string[] = [`# Onboarding ${chip.name}`, ''];
  L.push(
    `Chip: sm_version ${chip.sm_version ?? '?'}, bf16 ${chip.peak_tflops.bf16} TFLOP/s, HBM ${chip.hbm_tb_per_s} TB/s, link ${chip.nvlink_gb_per_s_per_dir} GB/s per direction.`,
    '',
  );
  L.push(
    '## Coverage',
    '',
    ...formatCoverage(coverage)
      .split('\n')
      .map((l) => `- ${l}`),
    '',
  );
  L.push(
    '## Imported',
    '',
    markdownTable({
      header: ['family', 'lane', 'rows'],
      rows: imported.map((i) => [i.family, i.lane, String(i.rows)]),
    }).trimEnd(),
    '',
  );
  L.push('## Fit', '', ...fitSummary.map((s) => `- ${s}`), '');
  L.push('## Extrapolation (method: assumed, flagged in evidence.extrapolation)', '');
  const w = widths.filter((r) => r.status !== 'skipped');
  if (!w.length) L.push('- collective widths: none needed (the fit provides every target width)');
  for (const r of w)
    L.push(
      `- ${r.op} ${r.dtype} → ${r.target_ranks} ranks: ${r.status}${r.floor_us !== undefined ? `, floor ${r.floor_us} µs` : ''}${r.holdout ? `, holdout ${r.holdout.held_out_ranks}-rank pred/meas ${r.holdout.ratio.toFixed(3)}` : ''}${r.reason ? ` (${r.reason})` : ''}`,
    );
  for (const f of families) {
    L.push(`- family ${f.family}: ${f.status.toUpperCase()}${f.reason ? ` — ${f.reason}` : ''}`);
    for (const c of f.coefficients)
      L.push(
        `  - ${c.name}: ${c.status === 'extrapolated' ? `${c.value} by ${c.predictor} from ${c.from.join(', ')}` : `refused: ${c.reason}`}`,
      );
  }
  L.push('', `Registry: ${n} entries in ${sets.length} sets; ${assumed.length} extrapolated.`, '');
  return L.join('\n');
}
