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
import { UsageError, UserError } from '../core/errors.ts';
import { displayPath } from '../core/io/paths.ts';
import { laneSlug } from '../measurements/store.ts';
import { groupBy } from '../core/numeric/stats.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import type { CoefficientEntry, CoefficientSet } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import { evidenceGates } from './evidence-gates.ts';
import {
  FIT_FAMILIES,
  type FitFamily,
  type FitFamilyResult,
  type FitJob,
  fitInOrderAt,
  MeasurementStore,
  RESULT_ORDER,
} from './families.ts';
import {
  besideAsked,
  besidePlan,
  fitBeside,
  fitInWorkers,
  type WorkerFit,
  WorkerUnavailable,
  workerCount,
} from './parallel.ts';
import type { FittedCoefficient } from './types.ts';

export { defaultLane, FIT_FAMILIES, type FitFamily, type FitFamilyResult } from './families.ts';

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
  /**
   * Worker threads: a count (0 or 1 = in this thread; 2–4 a pool, parallel.ts fitInWorkers) or `beside`
   * (one worker beside this thread, fitBeside). Default STEPCAL_FIT_WORKERS (a count or `beside`), else
   * this thread under 4 cores and min(cores, 4) workers from 4 (docs/performance.md). The results are the
   * same either way (src/fit/parallel.ts).
   */
  workers?: number | 'beside';
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
  /** Worker threads the families ran on; 0 when they ran in this thread (not part of any written output). */
  workers: number;
}

/** Default bootstrap: 200 resamples, seed 20261129. */
export const DEFAULT_BOOTSTRAP = { resamples: 200, seed: 20261129 } as const;

function expandFamilies(req: readonly FitFamily[] | undefined): Set<FitFamily> {
  const want = new Set<FitFamily>(req?.length ? req : FIT_FAMILIES);
  if (want.has('attention_prefill') || want.has('mla')) want.add('gemm');
  if (want.has('hbm')) want.add('gemm').add('attention_decode');
  if (want.has('moe_experts')) want.add('hbm').add('gemm').add('attention_decode'); // the weight reads use the fitted hbm_derate
  return want;
}

/** fitInOrderAt (families.ts) with the progress callbacks; records the result and ms in `done`. */
function fitNext(
  store: MeasurementStore,
  families: readonly FitFamily[],
  i: number,
  results: Map<FitFamily, FitFamilyResult>,
  done: Map<FitFamily, WorkerFit>,
  opts: FitOptions,
): void {
  const family = families[i]!;
  opts.onFamily?.(family, 'start');
  const fit = fitInOrderAt(store, families, i, results);
  opts.onFamily?.(family, 'done', fit.ms);
  done.set(family, fit);
}

/** The results of fits so far, by family (fitNext's `results`). */
const resultsOf = (done: ReadonlyMap<FitFamily, WorkerFit>) =>
  new Map<FitFamily, FitFamilyResult>([...done].map(([f, w]) => [f, w.result]));

/**
 * Fit `families` one after another in this thread (in the order given), each with its dependencies'
 * coefficients as `prior`, taken from `earlier` (families already fitted) or from this run.
 */
function fitInThread(
  store: MeasurementStore,
  families: readonly FitFamily[],
  opts: FitOptions,
  earlier: ReadonlyMap<FitFamily, WorkerFit> = new Map(),
) {
  const done = new Map<FitFamily, WorkerFit>();
  const results = resultsOf(earlier);
  for (let i = 0; i < families.length; i++) fitNext(store, families, i, results, done, opts);
  return done;
}

/**
 * One worker beside this thread (parallel.ts fitBeside; on request): the worker's plan there, the rest
 * here, then its replies. Between two families this thread yields once, so the worker's replies are
 * taken as they come (its progress shows in time) and a fitting error there stops this thread's
 * fits at once. A worker that cannot start or dies leaves its families to this thread, fitted after
 * the rest (their priors are on the worker's side of the split: besidePlan).
 */
async function fitWithOneBeside(store: MeasurementStore, families: readonly FitFamily[], opts: FitOptions) {
  const split = besidePlan(families);
  if (!split.worker.length || !split.main.length) return undefined;
  const beside = fitBeside(store.job, split.worker, opts.onFamily);
  const here = new Map<FitFamily, WorkerFit>();
  const results = new Map<FitFamily, FitFamilyResult>();
  try {
    for (let i = 0; i < split.main.length; i++) {
      fitNext(store, split.main, i, results, here, opts);
      await new Promise<void>((resolve) => setImmediate(resolve));
      const failed = beside.failure();
      if (failed && !(failed instanceof WorkerUnavailable)) throw failed;
    }
  } catch (e) {
    beside.stop();
    throw e;
  }
  try {
    const away = await beside.results;
    return { done: new Map([...here, ...away]), workers: 1 };
  } catch (e) {
    if (!(e instanceof WorkerUnavailable)) throw e;
    return { done: new Map([...here, ...fitInThread(store, split.worker, opts, here)]), workers: 0 };
  }
}

/**
 * Run the requested families (worker threads when more than one is allowed, else in this thread; a
 * worker that cannot start falls back to this thread). Returns the fits in RESULT_ORDER and
 * milliseconds per family.
 */
async function runFamilies(store: MeasurementStore, want: ReadonlySet<FitFamily>, opts: FitOptions) {
  const families = RESULT_ORDER.filter((f) => want.has(f));
  const count = opts.workers === 'beside' ? 1 : workerCount(opts.workers);
  let done: Map<FitFamily, WorkerFit> | undefined;
  let workers = 0;
  if (count > 1) {
    try {
      ({ done, workers } = await fitInWorkers(store, store.job, families, count, opts.onFamily));
    } catch (e) {
      if (!(e instanceof WorkerUnavailable)) throw e;
    }
  } else if (besideAsked(opts.workers)) {
    const beside = await fitWithOneBeside(store, families, opts);
    if (beside) ({ done, workers } = beside);
  }
  done ??= fitInThread(store, families, opts);
  const timings: Record<string, number> = {};
  for (const f of families) timings[f] = done.get(f)!.ms;
  const lanes = { gemm: store.laneFor('gemm'), attention: store.laneFor('attention_decode') };
  return { fits: families.map((f) => done.get(f)!.result), timings, lanes, workers };
}

/**
 * Fit every requested family for `chipName` from its stored measurements, apply the gates and build
 * the registry text. Pure apart from reading the measurement files; draws nothing (src/report/fit.ts
 * renders the README, figures and summary from the result).
 * @throws UserError when the chip is unknown or it has no measurements; UsageError when `opts.lane` is
 *   stored for none of the requested families
 */
export async function fitAll(chipName: string, opts: FitOptions = {}): Promise<FitAllResult> {
  const chip = loadChip(chipName);
  const root = opts.repoRoot ?? REPO_ROOT;
  const dir = opts.measurementsDir ?? path.join(root, 'measurements', chip.name);
  const job: FitJob = { chip, dir, root, lane: opts.lane, bootstrap: opts.bootstrap ?? DEFAULT_BOOTSTRAP };
  const store = new MeasurementStore(job);
  if (!store.files.length) throw new UserError(`no measurements for ${chip.name} in ${dir}`);
  if (opts.lane !== undefined) refuseUnknownLane(store, opts.families?.length ? opts.families : FIT_FAMILIES);
  const { fits, timings, lanes, workers } = await runFamilies(store, expandFamilies(opts.families), opts);
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
    workers,
  };
}

/**
 * Refuse a `--lane` stored for none of `families`' tables: each would fit nothing from it (an empty fit
 * that `fit --check` once reported as matching).
 * @throws UsageError (exit 2) naming the lanes stored for those families
 */
function refuseUnknownLane(store: MeasurementStore, families: readonly FitFamily[]): void {
  const lane = laneSlug(store.job.lane!);
  const stored = [...new Set(families.flatMap((f) => store.lanesOf(f)))].sort();
  if (stored.includes(lane)) return;
  const one = families.length === 1 ? families[0] : undefined;
  throw new UsageError(
    `--lane ${store.job.lane}: ${store.job.chip.name} has no ${one ? `${one} ` : ''}measurements of that lane in ${displayPath(store.job.dir)} (lanes stored${one ? ` for ${one}` : ''}: ${stored.join(', ') || 'none'})`,
  );
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
    if (/^moe_expert_(floor|m_half|route_rate|per_expert|reread)_/.test(name) && !(e.value >= 0))
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
