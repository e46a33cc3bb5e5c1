/**
 * `stepcal registry` — validate, diff, gated update, BLIS export/import, extrapolation.
 * Thin wiring over src/registry; rules, tolerance and exit codes in docs/registry.md.
 *
 * Exit codes: 0 ok (an extrapolation refusal is a correct answer and exits 0); 1 validation errors,
 * a gate refusal, or bad input; 2 usage.
 */
import { displayPath } from '../../core/io/paths.ts';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { oneOf } from '../../analytics/args.ts';
import { CHIPS_DIR, loadChip, REPO_ROOT, type Chip } from '../../core/catalog/chip.ts';
import { UserError } from '../../core/errors.ts';
import { parseFlagList, parseFlagNumber } from '../../core/flags.ts';
import { lockRootFor, withOutputLock } from '../../core/io/staging.ts';
import { readText, writeFilesAtomic } from '../../core/io/fs.ts';
import { listStepFiles } from '../../measurements/store.ts';
import { exportBlis, importBlis } from '../../registry/blis.ts';
import { copyRegistry } from '../../registry/copy.ts';
import { diffRegistries, formatDiff } from '../../registry/diff.ts';
import {
  extrapolateFamily,
  mergeEntries,
  type ChipRegistry,
  type FamilyExtrapolation,
} from '../../registry/extrapolate.ts';
import {
  extrapolateCollectiveWidths,
  widthHoldoutMedians,
  type WidthExtrapolation,
} from '../../fit/collective-width.ts';
import { FIT_FAMILIES } from '../../fit/family-names.ts';
import { loadRegistryFile } from '../../registry/load.ts';
import { validateEngineProfileFile } from '../../registry/engine.ts';
import { stringifyCoefficientSets } from '../../core/schemas/registry-yaml.ts';
import { DEFAULT_TOLERANCE_PCT, planUpdate, updateJson, type HoldoutValidator } from '../../registry/update.ts';
import { errorsOf, formatProblem, validateRegistryFile, type Problem } from '../../registry/validate.ts';
import { writeRegistryAtomic } from '../../registry/write.ts';
import { DEFAULT_CALIBRATE_FIT_HOST } from '../../validate/calibrate.ts';

/** Default registry directory (committed registries). */
export const REGISTRY_DIR = path.join(REPO_ROOT, 'registry');
/** Default measurement directory. */
export const MEASUREMENTS_DIR = path.join(REPO_ROOT, 'measurements');

/** BLIS's published width-holdout medians, pred/meas 4→8 on NVLink parts (reference §6.3). */
export const BLIS_WIDTH_HOLDOUT_MEDIANS: Record<string, number> = {
  all_reduce: 0.987,
  all_gather: 1.017,
  reduce_scatter: 1.018,
  alltoall: 1.128,
};

const out = (s: string): void => {
  process.stdout.write(s.endsWith('\n') ? s : `${s}\n`);
};

/** Chip facts from a catalog dir, with a clear error. */
function chipLookup(catalogDir: string): (name: string) => Chip | undefined {
  return (name) => {
    for (const n of [name, name.toLowerCase().replace(/_/g, '-'), name.toLowerCase().replace(/-sxm$/, '')]) {
      try {
        return loadChip(n, catalogDir);
      } catch {
        /* next */
      }
    }
    return undefined;
  };
}

/** The real held-out validator (src/validate), loaded lazily. */
/**
 * Both gate runs price with the engine terms calibrate uses: per-engine host terms on the same
 * training subset (`--fit-host`, default calibrate's) and the engine compute-efficiency term chosen
 * by held-out evidence (`--engine-sm auto`). Without them the baseline was 33–48 % too fast (issue 12).
 */
async function realValidator(fitHost: string | undefined): Promise<HoldoutValidator> {
  const { runValidation } = await import('../../validate/index.ts');
  return ({ chip, registry, stepFiles, composition }) => {
    const r = runValidation({
      chip,
      registry,
      stepFiles,
      ...(fitHost ? { fitHost, engineSm: 'auto' as const } : {}),
      ...(composition ? { composition: composition as 'no_overlap' | 'overlap' } : {}),
    });
    return { regimes: r.regimes, overall: r.overall, headline: r.headline };
  };
}

function printWidths(results: readonly WidthExtrapolation[]): void {
  out(
    'chip | op | dtype | widths | target | status | floor µs | peak bytes/µs | r_t bytes/µs | holdout (held-out width: pred/meas) | note',
  );
  for (const r of results) {
    const h = r.holdout
      ? `${r.holdout.held_out_ranks}: ${r.holdout.predicted_us.toFixed(3)}/${r.holdout.measured_us} = ${r.holdout.ratio.toFixed(3)}`
      : '–';
    out(
      `${r.chip} | ${r.op} | ${r.dtype} | ${r.measured_widths.join('/')} | ${r.target_ranks} | ${r.status.toUpperCase()} | ${r.floor_us ?? '–'} | ${r.peak_rate_bytes_per_us ?? '–'} | ${r.transition_rate_bytes_per_us ?? '–'} | ${h} | ${r.reason ?? (r.rates_from_ranks ? `rates copied from ${r.rates_from_ranks} ranks (lower bound on transfer time)` : '')}`,
    );
  }
  const med = widthHoldoutMedians(results);
  if (Object.keys(med).length) {
    out('width holdout, median pred/meas per op (stepcal vs BLIS reference §6.3):');
    for (const [op, m] of Object.entries(med))
      out(`  ${op}: ${m.median_ratio.toFixed(3)} (n=${m.n}) vs BLIS ${BLIS_WIDTH_HOLDOUT_MEDIANS[op] ?? '–'}`);
  }
}

function printFamily(r: FamilyExtrapolation): void {
  if (r.status !== 'extrapolated')
    out(`${r.status === 'refused' ? 'REFUSED' : 'SKIPPED'} (a correct answer): ${r.chip} ${r.family}: ${r.reason}`);
  else
    out(
      `${r.chip} ${r.family}: extrapolated from same-generation siblings ${r.siblings.join(', ')} (compute capability ${r.generation}.x)`,
    );
  for (const c of r.coefficients) {
    const scores = c.scores
      .map((s) => `${s.predictor} geo ${s.holdout_geo.toFixed(4)} MAPE ${s.holdout_mape_pct.toFixed(2)}%`)
      .join('; ');
    out(
      `  ${c.name}: ${c.status === 'extrapolated' ? `${c.value} by ${c.predictor} from ${c.from.join(', ')}` : `REFUSED: ${c.reason}`}${scores ? ` [LOCO: ${scores}]` : ''}`,
    );
  }
}

/** Registries of every chip in a directory (`<chip>.yaml`), for family extrapolation. */
function loadAllRegistries(dir: string, chips: (n: string) => Chip | undefined): ChipRegistry[] {
  if (!existsSync(dir)) return [];
  const outR: ChipRegistry[] = [];
  for (const f of readdirSync(dir)
    .filter((n) => n.endsWith('.yaml'))
    .sort()) {
    const chip = chips(f.slice(0, -5));
    if (chip) outR.push({ chip, sets: loadRegistryFile(path.join(dir, f)) });
  }
  return outR;
}

/** `registry validate`: schema and physics checks of registry files. */
function registerValidate(reg: Command): void {
  reg
    .command('validate')
    .description(
      'schema and physics checks of chip registries and engine profiles (registry/engines/*.yaml); every failure names file, set, entry and field; exit 1 on any error',
    )
    .argument('<files...>', 'registry YAML files')
    .addOption(
      new Option('--catalog-dir <dir>', 'chip catalog for the physics bounds').default(
        CHIPS_DIR,
        'catalog/chips in the repository',
      ),
    )
    .option('--strict-blis', 'check the strict public layout (evidence is an unknown key)')
    .option('--json', 'print problems as JSON')
    .action((files: string[], o: { catalogDir: string; strictBlis?: boolean; json?: boolean }) => {
      const all: Problem[] = [];
      const chips = chipLookup(o.catalogDir);
      for (const f of files) {
        // registry/engines/<name>.yaml: an engine profile, checked by the gates `loadEngineProfile` runs
        if (isEngineProfileFile(f)) {
          all.push(...validateEngineProfileFile(f));
          continue;
        }
        // registry/<chip>.yaml of a catalog chip holds that chip's entries only.
        const base = path.basename(f).replace(/\.ya?ml$/, '');
        const fileChip = chips(base) ? base : undefined;
        all.push(...validateRegistryFile(f, { chip: chips, strictBlis: !!o.strictBlis, fileChip }).problems);
      }
      const errors = errorsOf(all);
      if (o.json) out(JSON.stringify({ ok: errors.length === 0, problems: all }, null, 2));
      else {
        for (const p of all) out(formatProblem(p));
        out(`${files.length} file(s): ${errors.length} error(s), ${all.length - errors.length} warning(s)`);
      }
      if (errors.length) throw new UserError(`registry validate: ${errors.length} error(s)`);
    });
}

/** `registry diff`: entries added, removed or changed between two registries. */
function registerDiff(reg: Command): void {
  reg
    .command('diff')
    .description('entries added, removed or changed, with relative change and ci95 overlap')
    .argument('<old>')
    .argument('<new>')
    .option('--json', 'print the diff as JSON')
    .action((a: string, b: string, o: { json?: boolean }) => {
      const d = diffRegistries(loadRegistryFile(a), loadRegistryFile(b));
      out(o.json ? JSON.stringify(d, null, 2) : formatDiff(d));
    });
}

/**
 * Whether `file` reads as an engine profile (`kind: EngineProfile`). A file that cannot be read (missing, a folder)
 * is not one: validateRegistryFile then reports it as that file's problem, and the other files are still checked.
 */
function isEngineProfileFile(file: string): boolean {
  try {
    return /^kind:\s*EngineProfile\s*$/m.test(readText(file));
  } catch {
    return false;
  }
}

/**
 * The `--only` value: comma-separated fit families, the families a refit's entries carry (FIT_FAMILIES,
 * also the list its help shows).
 * @throws InvalidArgumentError (exit 2) `unknown family bogus (known: gemm, hbm, …)`
 */
function parseOnlyFamilies(text: string): string[] {
  const families = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const known: readonly string[] = FIT_FAMILIES;
  const unknown = families.find((f) => !known.includes(f));
  if (unknown !== undefined || !families.length)
    throw new InvalidArgumentError(
      `${unknown === undefined ? 'no family given' : `unknown family ${unknown}`} (known: ${FIT_FAMILIES.join(', ')})`,
    );
  return families;
}

/** `registry update`: merge a refit into the registry, refused when held-out accuracy gets worse. */
function registerUpdate(reg: Command): void {
  reg
    .command('update')
    .description('merge a refit into registry/<chip>.yaml, refused when held-out accuracy gets worse')
    .requiredOption(
      '--chip <chip>',
      'chip whose registry is updated (registry/<chip>.yaml) and whose held-out steps gate the merge',
    )
    .requiredOption('--from <fitted>', 'fitted registry YAML (e.g. the output of stepcal fit)')
    .option('--only <families>', `comma-separated families to merge (${FIT_FAMILIES.join(', ')})`, parseOnlyFamilies)
    .option(
      '--tolerance-pct <pp>',
      'allowed worsening of held-out MAPE and |bias| per regime, percentage points',
      String(DEFAULT_TOLERANCE_PCT),
    )
    .option(
      '--accept-worse <reason>',
      'merge although held-out accuracy is worse; the reason is recorded in each changed entry',
    )
    .option(
      '--no-holdout <reason>',
      'merge for a chip without held-out steps; the reason is recorded in each changed entry',
    )
    .option('--steps <files...>', 'held-out *.steps.csv files (default: measurements/<chip>/*.steps.csv)')
    .option('--registry <file>', 'registry file to update (default: registry/<chip>.yaml)')
    .addOption(
      new Option('--measurements-dir <dir>', 'where default step files are found').default(
        MEASUREMENTS_DIR,
        'measurements in the repository',
      ),
    )
    .addOption(
      new Option('--catalog-dir <dir>', 'chip catalog for the physics checks').default(
        CHIPS_DIR,
        'catalog/chips in the repository',
      ),
    )
    .option(
      '--accept-shift <reason>',
      'merge coefficients that moved outside both ci95 intervals; the reason is recorded in evidence.accepted_shift',
    )
    .option(
      '--fit-host <rule>',
      `host-fit rule of both validation runs, as calibrate (none = the registry's host terms)`,
      DEFAULT_CALIBRATE_FIT_HOST,
    )
    .option('--dry-run', 'print the gate and diff, write nothing')
    .option(
      '--json',
      'print the outcome as JSON (status, gate verdict, both accuracy tables, diff); exit codes unchanged',
    )
    .action(
      async (o: {
        chip: string;
        from: string;
        only?: string[];
        tolerancePct: string;
        acceptWorse?: string;
        acceptShift?: string;
        holdout?: string | boolean;
        steps?: string[];
        registry?: string;
        measurementsDir: string;
        catalogDir: string;
        fitHost?: string;
        dryRun?: boolean;
        json?: boolean;
      }) => {
        const file = o.registry ?? path.join(REGISTRY_DIR, `${o.chip}.yaml`);
        const tol = parseFlagNumber('--tolerance-pct', o.tolerancePct, { min: 0 });
        await withOutputLock(
          lockRootFor([file], REPO_ROOT),
          `registry update --chip ${o.chip}`,
          [path.dirname(file)],
          () => update(file, tol, o),
        );
      },
    );
}

/** The strict public layouts `registry export` writes and `registry import` reads. */
const STRICT_FORMATS = ['blis'] as const;

/** `registry export`: the strict public CoefficientSet layout, evidence stripped. */
function registerExport(reg: Command): void {
  reg
    .command('export')
    .description(
      'write the strict public CoefficientSet layout: one file per set and hardware scope, evidence stripped',
    )
    .requiredOption('--format <format>', `strict layout: ${STRICT_FORMATS.join(' | ')}`, oneOf(STRICT_FORMATS))
    .option('--out <dir>', 'output directory (default: print every file to stdout)')
    .argument('<file>', 'registry file')
    .action((file: string, o: { format: string; out?: string }) => {
      const files = exportBlis(loadRegistryFile(file));
      if (!o.out) {
        for (const f of files) out(`# file: ${f.path}\n${f.text}---`);
        return;
      }
      writeFilesAtomic(files.map((f) => ({ file: path.join(o.out!, f.path), data: f.text })));
      for (const f of files) out(`wrote ${path.join(o.out, f.path)} (${f.set.coefficients.length} entries)`);
    });
}

/** `registry import`: strict-layout files back into one registry for a chip. */
function registerImport(reg: Command): void {
  reg
    .command('import')
    .description('read strict-layout files back into one registry for a chip')
    .requiredOption('--format <format>', `strict layout: ${STRICT_FORMATS.join(' | ')}`, oneOf(STRICT_FORMATS))
    .requiredOption(
      '--chip <chip>',
      'chip the imported entries belong to (the hardware scope kept, and the datasheet for the physics checks)',
    )
    .option('--out <file>', 'registry file to write (default: stdout)')
    .addOption(
      new Option('--catalog-dir <dir>', 'chip catalog for the physics checks').default(
        CHIPS_DIR,
        'catalog/chips in the repository',
      ),
    )
    .argument('<files...>')
    .action((files: string[], o: { format: string; chip: string; out?: string; catalogDir: string }) => {
      const r = importBlis(
        files.map((f) => ({ file: f, text: readText(f) })),
        o.chip,
        { chip: chipLookup(o.catalogDir) },
      );
      if (r.skipped_other_hardware)
        process.stderr.write(`note: ${r.skipped_other_hardware} entries scoped to other hardware skipped\n`);
      if (!o.out) {
        out(stringifyCoefficientSets(r.sets));
        return;
      }
      writeRegistryAtomic(o.out, r.sets);
      out(`wrote ${o.out} (${r.sets.reduce((n, s) => n + s.coefficients.length, 0)} entries in ${r.sets.length} sets)`);
    });
}

/** `registry copy`: a registry for a chip without measurements, re-scoped, method: copied. */
function registerCopy(reg: Command): void {
  reg
    .command('copy')
    .description(
      "a registry for a chip without measurements: every entry of the source chip, re-scoped, method: copied (refused when it breaks the target's physics or would replace measured data)",
    )
    .requiredOption('--from <chip>', 'source chip (its registry is <registry-dir>/<chip>.yaml)')
    .requiredOption('--to <chip>', 'target chip (catalog entry required: its datasheet bounds the copy)')
    .option(
      '--reason <text>',
      "why the parts are comparable (default: stepcal's stated reason for the pair, where it has one)",
    )
    .option('--out <file>', 'registry to write (default <registry-dir>/<to>.yaml)')
    .option('--from-registry <file>', 'source registry (default <registry-dir>/<from>.yaml)')
    .addOption(
      new Option('--registry-dir <dir>', 'registry directory').default(REGISTRY_DIR, 'registry in the repository'),
    )
    .addOption(new Option('--catalog-dir <dir>', 'chip catalog').default(CHIPS_DIR, 'catalog/chips in the repository'))
    .option('--dry-run', 'check and report, write nothing')
    .option('--json', 'JSON output')
    .action(
      (o: {
        from: string;
        to: string;
        reason?: string;
        out?: string;
        fromRegistry?: string;
        registryDir: string;
        catalogDir: string;
        dryRun?: boolean;
        json?: boolean;
      }) => {
        const lookup = chipLookup(o.catalogDir);
        const from = lookup(o.from);
        const to = lookup(o.to);
        for (const [flag, name, chip] of [
          ['--from', o.from, from],
          ['--to', o.to, to],
        ] as const)
          if (!chip) throw new UserError(`${flag}: unknown chip "${name}" in ${o.catalogDir}`);
        const srcFile = o.fromRegistry ?? path.join(o.registryDir, `${o.from}.yaml`);
        if (!existsSync(srcFile)) throw new UserError(`no registry ${srcFile} for --from ${o.from}`);
        const file = o.out ?? path.join(o.registryDir, `${o.to}.yaml`);
        const rel = displayPath;
        const r = copyRegistry({
          from: from!,
          to: to!,
          source: loadRegistryFile(srcFile),
          ...(existsSync(file) ? { existing: loadRegistryFile(file) } : {}),
          ...(o.reason !== undefined ? { reason: o.reason } : {}),
          sourceFile: rel(srcFile),
          file: rel(file),
          chipLookup: lookup,
        });
        const written = r.status === 'write' && !o.dryRun;
        if (written) writeRegistryAtomic(file, r.sets);
        const warnings = r.problems.filter((p) => p.severity === 'warning');
        if (o.json)
          out(
            JSON.stringify(
              {
                status: r.status === 'refused' ? 'refused' : written ? 'written' : 'dry_run',
                from: r.from,
                to: r.to,
                source: rel(srcFile),
                out: rel(file),
                ...(r.reason ? { reason: r.reason } : {}),
                copied: r.copied,
                by_source_method: r.by_source_method,
                renamed: r.renamed,
                skipped: r.skipped,
                replaces: r.replaces,
                problems: r.problems,
                rationale: r.rationale,
              },
              null,
              2,
            ),
          );
        else {
          for (const s of r.skipped) out(`note: skipped ${s}`);
          for (const p of warnings) out(formatProblem(p));
          if (r.status === 'write')
            out(
              `${written ? 'wrote' : 'dry run: would write'} ${rel(file)}: ${r.copied} entries copied from ${r.from} to ${r.to} (source methods: ${Object.entries(
                r.by_source_method,
              )
                .map(([m, n]) => `${m} ${n}`)
                .join(
                  ', ',
                )}), ${r.renamed} collective names rewritten, method: copied, validator clean against ${r.to}'s datasheet (${warnings.length} warning(s))${r.replaces.length ? `; replaces ${r.replaces.length} earlier entries (none measured)` : ''}`,
            );
        }
        if (r.status === 'refused') throw new UserError(`registry copy ${r.from} → ${r.to} refused: ${r.reason}`);
      },
    );
}

/** `registry extrapolate widths`: collective entries at unmeasured widths, holdout-checked. */
function registerExtrapolateWidths(ext: Command): void {
  ext
    .command('widths')
    .description("floor(n) = a + b·(n−1) on the chip's own measured widths; rates copied from the widest; 4→8 holdout")
    .requiredOption('--chip <chips>', 'chip name, comma list, or "all" (every registry in --registry-dir)')
    .option('--widths <list>', 'target widths', '16')
    .addOption(
      new Option('--registry-dir <dir>', 'registry directory').default(REGISTRY_DIR, 'registry in the repository'),
    )
    .option('--registry <file>', 'registry file (single chip; default <registry-dir>/<chip>.yaml)')
    .option('--write', 'merge the extrapolated entries into the registry (never over measured ones)')
    .option('--json', 'JSON output')
    .action(
      (o: {
        chip: string;
        widths: string;
        registryDir: string;
        registry?: string;
        write?: boolean;
        json?: boolean;
      }) => {
        const targets = parseFlagList('--widths', o.widths, { integer: true, min: 2 });
        const chips =
          o.chip === 'all'
            ? readdirSync(o.registryDir)
                .filter((f) => f.endsWith('.yaml'))
                .map((f) => f.slice(0, -5))
                .sort()
            : o.chip.split(',');
        if (o.registry && chips.length !== 1) throw new UserError('--registry needs a single --chip');
        const all: WidthExtrapolation[] = [];
        for (const chip of chips) {
          const file = o.registry ?? path.join(o.registryDir, `${chip}.yaml`);
          const sets = loadRegistryFile(file);
          const res = extrapolateCollectiveWidths(sets, chip, targets);
          all.push(...res);
          if (o.write) {
            const add = res.flatMap((r) => r.entries.map((e) => ({ ...e, set: 'cost-model-collectives' })));
            if (add.length) {
              const m = mergeEntries(sets, add);
              writeRegistryAtomic(file, m.sets);
              if (!o.json)
                out(
                  `wrote ${file}: ${m.added.length} added, ${m.replaced.length} replaced, ${m.kept_measured.length} measured kept`,
                );
            }
          }
        }
        if (o.json)
          out(
            JSON.stringify(
              {
                results: all.map(({ entries, ...r }) => ({ ...r, entries: entries.map((e) => e.name) })),
                holdout_medians: widthHoldoutMedians(all),
                blis_holdout_medians: BLIS_WIDTH_HOLDOUT_MEDIANS,
              },
              null,
              2,
            ),
          );
        else printWidths(all);
      },
    );
}

/** `registry extrapolate family`: a missing family from same-generation chips. */
function registerExtrapolateFamily(ext: Command): void {
  ext
    .command('family')
    .description(
      'fill a family missing on a chip from same-generation siblings (median or within-chip ratio, chosen by leave-one-chip-out holdout)',
    )
    .requiredOption('--chip <chip>', 'chip missing the family (its catalog entry names its generation)')
    .requiredOption('--family <family>', 'family to fill (e.g. moe, collective)')
    .addOption(
      new Option('--registry-dir <dir>', 'registries of the candidate siblings').default(
        REGISTRY_DIR,
        'registry in the repository',
      ),
    )
    .option('--registry <file>', "the target chip's registry (default <registry-dir>/<chip>.yaml; may not exist yet)")
    .addOption(new Option('--catalog-dir <dir>', 'chip catalog').default(CHIPS_DIR, 'catalog/chips in the repository'))
    .option('--write', 'merge the extrapolated entries into the target registry (never over measured ones)')
    .option('--json', 'JSON output')
    .action(
      (o: {
        chip: string;
        family: string;
        registryDir: string;
        registry?: string;
        catalogDir: string;
        write?: boolean;
        json?: boolean;
      }) => {
        const chips = chipLookup(o.catalogDir);
        const chip = chips(o.chip);
        if (!chip) throw new UserError(`unknown chip "${o.chip}" in ${o.catalogDir}`);
        const file = o.registry ?? path.join(o.registryDir, `${o.chip}.yaml`);
        const sets = existsSync(file) ? loadRegistryFile(file) : [];
        const r = extrapolateFamily({ chip, sets }, loadAllRegistries(o.registryDir, chips), o.family);
        if (o.json) out(JSON.stringify(r, null, 2));
        else printFamily(r);
        if (o.write && r.status === 'extrapolated') {
          const m = mergeEntries(
            sets,
            r.coefficients.filter((c) => c.entry).map((c) => c.entry!),
          );
          writeRegistryAtomic(file, m.sets);
          if (!o.json)
            out(
              `wrote ${file}: ${m.added.length} added, ${m.replaced.length} replaced, ${m.kept_measured.length} measured kept`,
            );
        }
      },
    );
}

export function register(program: Command): void {
  const reg = program
    .command('registry')
    .description('validate, diff, update (gated), export/import and extrapolate coefficient registries');
  registerValidate(reg);
  registerDiff(reg);
  registerUpdate(reg);
  registerExport(reg);
  registerImport(reg);
  registerCopy(reg);
  const ext = reg
    .command('extrapolate')
    .description('flagged, holdout-checked extrapolation (collective widths; missing families by generation)');
  registerExtrapolateWidths(ext);
  registerExtrapolateFamily(ext);
}

/** `registry update` under the lock (see the command's description). */
async function update(
  file: string,
  tol: number,
  o: {
    chip: string;
    from: string;
    only?: string[];
    acceptWorse?: string;
    acceptShift?: string;
    holdout?: string | boolean;
    steps?: string[];
    measurementsDir: string;
    catalogDir: string;
    fitHost?: string;
    dryRun?: boolean;
    json?: boolean;
  },
): Promise<void> {
  const noHoldout = typeof o.holdout === 'string' ? o.holdout : undefined;
  const current = existsSync(file) ? loadRegistryFile(file) : [];
  const fitted = loadRegistryFile(o.from);
  const stepFiles = o.steps ?? listStepFiles(path.join(o.measurementsDir, o.chip));
  const fitHost = o.fitHost === 'none' ? undefined : o.fitHost;
  const validator: HoldoutValidator = stepFiles.length ? await realValidator(fitHost) : () => ({ regimes: {} });
  const plan = planUpdate({
    chip: o.chip,
    current,
    fitted,
    ...(o.only ? { only: o.only } : {}),
    tolerance_pct: tol,
    ...(o.acceptWorse ? { accept_worse: o.acceptWorse } : {}),
    ...(o.acceptShift ? { accept_shift: o.acceptShift } : {}),
    ...(noHoldout ? { no_holdout: noHoldout } : {}),
    stepFiles,
    validator,
    validate: { chip: chipLookup(o.catalogDir) },
    file,
  });
  if (o.json) {
    const write = plan.status === 'write' && !o.dryRun;
    if (write) writeRegistryAtomic(file, plan.sets);
    out(JSON.stringify(updateJson(plan, { chip: o.chip, registry: file, written: write }), null, 2));
    if (plan.status === 'refused') throw new UserError(plan.message);
    return;
  }
  if (plan.report) out(plan.report);
  out(formatDiff(plan.diff));
  for (const n of plan.merge.ignored) out(`note: ${n}`);
  if (plan.merge.stale.length)
    out(
      `note: kept ${plan.merge.stale.length} entr(ies) of ${o.chip} the refit does not produce: ${plan.merge.stale.join(', ')}`,
    );
  if (plan.status === 'refused') throw new UserError(plan.message);
  if (plan.status === 'unchanged') {
    out(plan.message);
    return;
  }
  if (o.dryRun) {
    out(`dry run: would write ${file} (${plan.message})`);
    return;
  }
  writeRegistryAtomic(file, plan.sets);
  out(`wrote ${file}: ${plan.message}`);
}
