/**
 * The `fit` orchestrator: reads a chip's curated measurements, runs the family fitters in
 * dependency order (gemm → hbm → attention_decode → attention_prefill → collective → moe →
 * moe_experts → recurrent → host), applies the plausibility gates, and builds the registry text. It returns typed data and writes
 * nothing: src/report/fit.ts draws the README, figures and summary from the result, and the command
 * layer (src/cli/fit-outputs.ts) writes them with the registry, nothing when any family refused or
 * any gate failed.
 *
 * Output is byte-identical across runs: no timestamps, fixed family and coefficient order, values
 * rounded to 4 significant digits (common.ts), seeded bootstraps.
 */
import path from 'node:path';
import type { Chip } from '../core/catalog/chip.ts';
import { repairRatesUnderPeak } from './rate-repair.ts';
import { loadChip, REPO_ROOT } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { sha256File } from '../core/io/fs.ts';
import { groupBy } from '../core/numeric/stats.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import type { CoefficientEntry, CoefficientSet } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { Family, FamilyRow } from '../measurements/schema.ts';
import { laneSlug, listMeasurementFiles, readMeasurements } from '../measurements/store.ts';
import { checkUnits } from '../measurements/units.ts';
import { type DecodeFit, fitAttentionDecode, fitAttentionPrefill, type PrefillFit } from './attention.ts';
import { type CollectiveFit, fitCollectives } from './collective.ts';
import { fitGemm, type GemmFit } from './gemm.ts';
import { fitHbm, type HbmFit } from './hbm.ts';
import { fitHost, type HostFit } from './host.ts';
import { fitMoe, type MoeFit } from './moe.ts';
import { fitMoeExperts, type MoeExpertsFit } from './moe-experts.ts';
import { fitRecurrent, type RecurrentFamilyFit } from './recurrent.ts';
import { evidenceGates } from './evidence-gates.ts';
import { fitSparse, type SparseFit } from './sparse.ts';
import { fitMla, type MlaFit } from './mla.ts';
import { type ExpertA2aFit, fitExpertA2a } from './expert-a2a.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

/** Fitting families in dependency order. */
export const FIT_FAMILIES = [
  'gemm',
  'hbm',
  'attention_decode',
  'attention_prefill',
  'sparse',
  'mla',
  'collective',
  'expert_alltoall',
  'moe',
  'moe_experts',
  'recurrent',
  'host',
] as const;
export type FitFamily = (typeof FIT_FAMILIES)[number];

/** Order of sets in the registry file. */
export const SET_ORDER = [SET_NAMES.primitives, SET_NAMES.attention, SET_NAMES.collectives, SET_NAMES.host] as const;

export interface FitOptions {
  /** Families to fit (default all). Dependencies are fitted too (prefill needs gemm; hbm needs gemm + decode). */
  families?: readonly FitFamily[];
  /** Lane for gemm/attention/moe (default: see `defaultLane`). */
  lane?: string;
  /** Measurement directory (default <repo>/measurements/<chip>). */
  measurementsDir?: string;
  /** Repo root used to make input paths relative (default the package root). */
  repoRoot?: string;
  bootstrap?: { resamples: number; seed: number };
  /** Called with family names as they start and finish (progress goes to stderr in the CLI). */
  onFamily?: (family: string, phase: 'start' | 'done', ms?: number) => void;
}

/** Everything a fit run produced, as data (src/report/fit.ts draws the README, figures and summary). */
export interface FitAllResult {
  chip: string;
  /** The chip's catalog facts the fit used (peaks, bandwidths, L2, links). */
  chip_facts: Chip;
  /** Lanes fitted for gemm and attention (undefined when the family has no measurements). */
  lanes: { gemm: string | undefined; attention: string | undefined };
  sets: CoefficientSet[];
  /** Registry text (multi-document YAML) exactly as it would be written. */
  registry_text: string;
  /** Every coefficient in fit order (the sets regroup them). */
  coefficients: FittedCoefficient[];
  /** Family refusals, then gate failures: any one means nothing is written. */
  refusals: string[];
  warnings: string[];
  families: FitFamilyResult[];
  /** Milliseconds per family (not part of any written output). */
  timings_ms: Record<string, number>;
}

/** Default bootstrap: 200 resamples, seed 20261129. */
export const DEFAULT_BOOTSTRAP = { resamples: 200, seed: 20261129 } as const;

/**
 * Lane used for a family when none is given: of the lanes stored for that family, a `vllm-*` lane if
 * any (reference §6.2 "fit the engine you predict"), else the last by name. Collectives and host use
 * every lane (their fitters pick per configuration).
 */
export function defaultLane(lanes: readonly string[]): string | undefined {
  const sorted = [...lanes].sort();
  const vllm = sorted.filter((l) => l.startsWith('vllm-'));
  return (vllm.length ? vllm : sorted).at(-1);
}

function expandFamilies(req: readonly FitFamily[] | undefined): Set<FitFamily> {
  const want = new Set<FitFamily>(req?.length ? req : FIT_FAMILIES);
  if (want.has('attention_prefill') || want.has('mla')) want.add('gemm');
  if (want.has('hbm')) want.add('gemm').add('attention_decode');
  if (want.has('moe_experts')) want.add('hbm').add('gemm').add('attention_decode'); // the weight reads use the fitted hbm_derate
  return want;
}

/** Reading a chip's measurement store for one `fitAll` run: lanes, inputs with their sha256, rows. */
class MeasurementStore {
  readonly files: ReturnType<typeof listMeasurementFiles>;
  constructor(
    readonly dir: string,
    readonly root: string,
    readonly lane: string | undefined,
    readonly chip: Chip,
  ) {
    this.files = listMeasurementFiles(dir);
  }

  /** The lane fitted for `family`: `--lane` when stored for it, else `defaultLane`; undefined when none. */
  laneFor(family: Family): string | undefined {
    const lanes = this.files.filter((f) => f.family === family).map((f) => f.lane);
    if (!lanes.length) return undefined;
    if (this.lane) return lanes.includes(laneSlug(this.lane)) ? laneSlug(this.lane) : undefined;
    return defaultLane(lanes);
  }

  /** Input files of `family` (one lane, or every lane), repo-relative, with sha256 and lane. */
  inputsFor(family: Family, lane?: string): FitContext['inputs'] {
    return this.files
      .filter((f) => f.family === family && (lane === undefined || f.lane === lane))
      .map((f) => ({
        file: path.relative(this.root, f.file).split(path.sep).join('/'),
        sha256: sha256File(f.file),
        lane: f.lane,
      }));
  }

  /**
   * Rows of `family` (one lane, or every lane). Each stored file passes the importer's units check again
   * (src/measurements/units.ts), so a table stored without a chip datasheet, or edited since, cannot fit a units slip.
   */
  read<F extends Family>(family: F, lane?: string): FamilyRow[F][] {
    return this.files
      .filter((f) => f.family === family && (lane === undefined || f.lane === laneSlug(lane)))
      .flatMap((f) => {
        const rows = readMeasurements(this.dir, family, { lane: f.lane });
        checkUnits(family, rows, this.chip, f.file);
        return rows;
      });
  }
}

/** Any family's result: its typed fit, or an empty one when it had no measurements. */
export type FitFamilyResult =
  | GemmFit
  | HbmFit
  | DecodeFit
  | PrefillFit
  | CollectiveFit
  | MoeFit
  | MoeExpertsFit
  | RecurrentFamilyFit
  | HostFit
  | SparseFit
  | MlaFit
  | ExpertA2aFit
  | FamilyFit;

/**
 * Run the requested families in dependency order, each with its own context (inputs, bootstrap, and
 * the coefficients of the families before it as `prior`). Returns the fits and milliseconds per family.
 */
function runFamilies(store: MeasurementStore, chip: Chip, want: ReadonlySet<FitFamily>, opts: FitOptions) {
  const bootstrap = opts.bootstrap ?? DEFAULT_BOOTSTRAP;
  const fits: FitFamilyResult[] = [];
  const timings: Record<string, number> = {};
  const prior = new Map<string, number>();
  const ctxFor = (inputs: FitContext['inputs']): FitContext => ({ chip, inputs, bootstrap, prior });
  const run = (family: FitFamily, f: () => FitFamilyResult) => {
    if (!want.has(family)) return;
    opts.onFamily?.(family, 'start');
    const t0 = performance.now();
    const r = f();
    timings[family] = Math.round(performance.now() - t0);
    opts.onFamily?.(family, 'done', timings[family]);
    fits.push(r);
    for (const c of r.coefficients) prior.set(c.name, c.entry.value);
  };
  const missing = (family: string, why: string): FamilyFit => ({
    ...emptyFamilyFit(family),
    warnings: [`${family}: not fitted: ${why}`],
  });
  const lanes = { gemm: store.laneFor('gemm'), attention: store.laneFor('attention_decode') };
  const gemmRows = want.has('gemm') && lanes.gemm ? store.read('gemm', lanes.gemm) : [];
  const decodeRows =
    want.has('attention_decode') && lanes.attention ? store.read('attention_decode', lanes.attention) : [];
  const laneRows = <F extends Family>(family: F) => {
    const lane = store.laneFor(family);
    return { rows: lane ? store.read(family, lane) : [], ctx: ctxFor(store.inputsFor(family, lane)) };
  };
  run('gemm', () =>
    gemmRows.length
      ? fitGemm(gemmRows, ctxFor(store.inputsFor('gemm', lanes.gemm)))
      : missing('gemm', 'no gemm measurements'),
  );
  const hbmInputs = () => [
    ...store.inputsFor('gemm', lanes.gemm),
    ...(lanes.attention ? store.inputsFor('attention_decode', lanes.attention) : []),
  ];
  run('hbm', () => fitHbm(gemmRows, decodeRows, ctxFor(hbmInputs())));
  run('attention_decode', () =>
    decodeRows.length
      ? fitAttentionDecode(decodeRows, ctxFor(store.inputsFor('attention_decode', lanes.attention)))
      : missing('attention_decode', 'no measurements'),
  );
  run('attention_prefill', () => {
    const p = laneRows('attention_prefill');
    return p.rows.length ? fitAttentionPrefill(p.rows, p.ctx) : missing('attention_prefill', 'no measurements');
  });
  run('sparse', () => {
    const p = laneRows('sparse');
    return p.rows.length ? fitSparse(p.rows, p.ctx) : missing('sparse', 'no measurements');
  });
  // Families fitted from every stored lane of their own table.
  const allLanes = <F extends Family & FitFamily>(
    family: F,
    fit: (rows: FamilyRow[F][], ctx: FitContext) => FitFamilyResult,
  ) =>
    run(family, () => {
      const rows = store.read(family);
      return rows.length ? fit(rows, ctxFor(store.inputsFor(family))) : missing(family, 'no measurements');
    });
  allLanes('mla', fitMla);
  allLanes('expert_alltoall', fitExpertA2a);
  allLanes('collective', fitCollectives);
  // The moe rows are read once for both families that use them.
  const moe = want.has('moe') || want.has('moe_experts') ? laneRows('moe') : undefined;
  run('moe', () => (moe?.rows.length ? fitMoe(moe.rows, moe.ctx) : missing('moe', 'no measurements')));
  run('moe_experts', () =>
    moe?.rows.length ? fitMoeExperts(moe.rows, moe.ctx) : missing('moe_experts', 'no moe measurements'),
  );
  // Every recurrent lane is read: GDN, KDA and Mamba2 come from different engines (vLLM, TRT-LLM).
  allLanes('recurrent', fitRecurrent);
  // Without host rows the host fitter emits its `assumed` entries (with rationale); it never fits
  // host overheads from per-operator tables.
  run('host', () => fitHost(store.read('host'), ctxFor(store.inputsFor('host'))));
  return { fits, timings, lanes };
}

/**
 * Fit every requested family for `chipName` from its stored measurements, apply the gates and build
 * the registry text. Pure apart from reading the measurement files; draws nothing (src/report/fit.ts
 * renders the README, figures and summary from the result).
 * @throws UserError when the chip is unknown or it has no measurements.
 */
export async function fitAll(chipName: string, opts: FitOptions = {}): Promise<FitAllResult> {
  const chip = loadChip(chipName);
  const root = opts.repoRoot ?? REPO_ROOT;
  const dir = opts.measurementsDir ?? path.join(root, 'measurements', chip.name);
  const store = new MeasurementStore(dir, root, opts.lane, chip);
  if (!store.files.length) throw new UserError(`no measurements for ${chip.name} in ${dir}`);
  const { fits, timings, lanes } = runFamilies(store, chip, expandFamilies(opts.families), opts);
  const coefficients = fits.flatMap((f) => f.coefficients);
  const repaired = repairRatesUnderPeak(chip, coefficients);
  const refusals = [...fits.flatMap((f) => f.refusals), ...applyGates(chip, coefficients)];
  const sets = buildSets(coefficients);
  return {
    chip: chip.name,
    chip_facts: chip,
    lanes,
    sets,
    registry_text: stringifyCoefficientSets(sets),
    coefficients,
    refusals,
    warnings: [...fits.flatMap((f) => f.warnings), ...repaired],
    families: fits,
    timings_ms: timings,
  };
}

/** Group coefficients into sets in SET_ORDER (coefficient order within a set = fit order). */
export function buildSets(coefficients: readonly FittedCoefficient[]): CoefficientSet[] {
  const sets: CoefficientSet[] = [];
  const names = [
    ...SET_ORDER,
    ...new Set(coefficients.map((c) => c.set).filter((s) => !(SET_ORDER as readonly string[]).includes(s))),
  ];
  for (const name of names) {
    const cs = coefficients.filter((c) => c.set === name);
    if (cs.length)
      sets.push({ kind: 'CoefficientSet', name, coefficients: cs.map((c) => ({ name: c.name, entry: c.entry })) });
  }
  return sets;
}

const COLLECTIVE_RE = /^collective_(floor|peak_rate|transition_rate)_(.+)_(fp16|int8)_(\d+)rank_(.+)$/;

/**
 * Plausibility gates (issue 3, reference §6.4). Returns one message per failure:
 * - every ci95 contains its value; every value finite;
 * - gemm_eps_max_* in (0, 1.05]; gemm halves > 0; hbm_derate in (0, 1];
 * - attention rates ≤ datasheet HBM bandwidth; floors > 0; prefill work_scale > 0;
 * - collective rates ≤ ranks · max(NVLink, NIC) per-direction bandwidth (no algorithm bandwidth in
 *   the nccl-tests size convention can exceed the group's aggregate injection bandwidth);
 * - collective transition_rate ≤ peak_rate; collective floors non-decreasing with ranks
 *   (per op, dtype, chip; measured entries only);
 * - evidence (src/fit/evidence-gates.ts): holdout geo within the family's bound, value within its
 *   prior plausibility band (measured entries).
 */
export function applyGates(chip: Chip, coefficients: readonly FittedCoefficient[]): string[] {
  const out: string[] = [];
  const byName = new Map<string, CoefficientEntry>();
  for (const c of coefficients) byName.set(c.name, c.entry);
  for (const { name, entry: e } of coefficients) {
    if (!Number.isFinite(e.value)) out.push(`${name}: value ${e.value} is not finite`);
    if (e.ci95 && !(e.ci95[0] <= e.value && e.value <= e.ci95[1]))
      out.push(`${name}: ci95 [${e.ci95[0]}, ${e.ci95[1]}] does not contain ${e.value}`);
    if (name.startsWith('gemm_eps_max_') && !(e.value > 0 && e.value <= 1.05))
      out.push(`${name}: eps_max ${e.value} outside (0, 1.05]`);
    if (name.startsWith('moe_expert_eps_max_') && !(e.value > 0 && e.value <= 1))
      out.push(`${name}: eps_max ${e.value} outside (0, 1]`);
    if (/^moe_expert_(floor|m_half|route_rate|per_expert)_/.test(name) && !(e.value >= 0))
      out.push(`${name}: ${e.value} must be ≥ 0`);
    if (/^gemm_(m|n|k)_half_/.test(name) && !(e.value > 0)) out.push(`${name}: ${e.value} must be > 0`);
    if (name === 'hbm_derate' && !(e.value > 0 && e.value <= 1)) out.push(`hbm_derate: ${e.value} outside (0, 1]`);
    if (name.startsWith('attention_') && name.includes('_rate') && e.value > chip.hbm_bytes_per_us)
      out.push(`${name}: rate ${e.value} B/us above the datasheet HBM bandwidth ${chip.hbm_bytes_per_us} B/us`);
    if (name.startsWith('attention_') && name.includes('_floor') && !(e.value > 0))
      out.push(`${name}: floor ${e.value} must be > 0`);
    if (name === 'attention_prefill_work_scale' && !(e.value > 0)) out.push(`${name}: ${e.value} must be > 0`);
    const m = COLLECTIVE_RE.exec(name);
    if (m && m[1] !== 'floor') {
      const ranks = Number(m[4]);
      const bound = ranks * Math.max(chip.nvlink_bytes_per_us, chip.nic_bytes_per_us);
      if (e.value > bound) out.push(`${name}: rate ${e.value} B/us above ${ranks} × max(NVLink, NIC) = ${bound} B/us`);
      if (m[1] === 'transition_rate') {
        const peak = byName.get(name.replace('_transition_rate_', '_peak_rate_'));
        if (peak && e.value > peak.value) out.push(`${name}: r_t ${e.value} above r_peak ${peak.value}`);
      }
    }
  }
  // Floors non-decreasing with ranks (measured entries; extrapolated widths are gated by their fitter).
  const floors = groupBy(
    coefficients.flatMap(({ name, entry: e }) => {
      const m = COLLECTIVE_RE.exec(name);
      return m && m[1] === 'floor' && e.method === 'measured'
        ? [{ key: `${m[2]}|${m[3]}|${m[5]}`, ranks: Number(m[4]), value: e.value, name }]
        : [];
    }),
    (f) => f.key,
  );
  for (const list of floors.values()) {
    list.sort((a, b) => a.ranks - b.ranks);
    for (let i = 1; i < list.length; i++) {
      if (list[i]!.value < list[i - 1]!.value)
        out.push(
          `${list[i]!.name}: floor ${list[i]!.value} us falls below ${list[i - 1]!.name} ${list[i - 1]!.value} us as ranks grow`,
        );
    }
  }
  // Evidence: per-family holdout bounds and prior plausibility bands (src/fit/evidence-gates.ts).
  out.push(...evidenceGates(chip, coefficients));
  return out;
}
