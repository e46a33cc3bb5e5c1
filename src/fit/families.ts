/**
 * The fit families as tasks: what each one reads (its measurement tables), which families' coefficients
 * it takes from `ctx.prior` (its dependencies), and how it is fitted. The orchestrator (index.ts) runs
 * them in order in this thread, or spreads them over worker threads (parallel.ts, worker.ts); either way
 * a family sees the same rows, the same bootstrap settings and the same `prior` (the coefficients of its
 * dependencies only), so the results are the same, bit for bit.
 */
import path from 'node:path';
import type { Chip } from '../core/catalog/chip.ts';
import { sha256File } from '../core/io/fs.ts';
import type { Family, FamilyRow } from '../measurements/schema.ts';
import { laneSlug, listMeasurementFiles, readMeasurements } from '../measurements/store.ts';
import { checkUnits } from '../measurements/units.ts';
import { cachedCheck, cachedRows } from '../measurements/decoded-cache.ts';
import {
  DECODE_KINDS,
  type DecodeFit,
  type DecodeKind,
  fitAttentionDecode,
  fitAttentionDecodeKind,
  fitAttentionPrefill,
  mergeDecodeFits,
  type PrefillFit,
} from './attention.ts';
import { type CollectiveFit, fitCollectives } from './collective.ts';
import { type ExpertA2aFit, fitExpertA2a } from './expert-a2a.ts';
import { fitGemm, type GemmFit } from './gemm.ts';
import { fitHbm, type HbmFit } from './hbm.ts';
import { fitHost, type HostFit } from './host.ts';
import { fitMla, type MlaFit } from './mla.ts';
import { fitMoe, type MoeFit } from './moe.ts';
import { fitMoeExperts, type MoeExpertsFit } from './moe-experts.ts';
import { fitRecurrent, type RecurrentFamilyFit } from './recurrent.ts';
import { fitSparse, type SparseFit } from './sparse.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

import { FIT_FAMILIES, type FitFamily } from './family-names.ts';

export { FIT_FAMILIES, type FitFamily };

/**
 * The order of a run's results, and so of its coefficients and registry entries: FIT_FAMILIES with
 * expert_alltoall before collective, as the serial orchestrator has always run them.
 */
export const RESULT_ORDER: readonly FitFamily[] = [
  'gemm',
  'hbm',
  'attention_decode',
  'attention_prefill',
  'sparse',
  'mla',
  'expert_alltoall',
  'collective',
  'moe',
  'moe_experts',
  'recurrent',
  'host',
];

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
 * The families whose coefficients a family reads from `ctx.prior` (DECISION, issue 17: `prior` holds
 * exactly these, in the serial and the parallel run alike, so a family can run as soon as they are done).
 * attention_prefill and mla divide by the bf16 GEMM ramp; moe_experts reads the fitted hbm_derate.
 */
export const FAMILY_DEPS: Readonly<Record<FitFamily, readonly FitFamily[]>> = {
  gemm: [],
  hbm: [],
  attention_decode: [],
  attention_prefill: ['gemm'],
  sparse: [],
  mla: ['gemm'],
  collective: [],
  expert_alltoall: [],
  moe: [],
  moe_experts: ['hbm'],
  recurrent: [],
  host: [],
};

/**
 * Families fitted as independent parts (DECISION, issue 17): decode full and decode SWA share no rows,
 * no law and no bootstrap, so the worker orchestrator runs them as two tasks (on two cores when both
 * are free) and merges the parts in this order (mergeParts); the serial run fits the family whole. The
 * merged result is the whole fit, bit for bit.
 */
export const FAMILY_PARTS: Readonly<Partial<Record<FitFamily, readonly string[]>>> = {
  attention_decode: DECODE_KINDS,
};

/** The family fit from its parts' results, given in FAMILY_PARTS order. */
export function mergeParts(family: FitFamily, parts: readonly FitFamilyResult[]): FitFamilyResult {
  if (family === 'attention_decode') return mergeDecodeFits(parts);
  throw new Error(`${family} is not fitted in parts`);
}

/** What one fit run reads: the chip, its measurement directory, the repo root, `--lane`, the bootstrap. */
export interface FitJob {
  chip: Chip;
  dir: string;
  root: string;
  lane: string | undefined;
  bootstrap: { resamples: number; seed: number };
}

/** Families fitted from every stored lane of their own table (their fitters pick per configuration). */
const ALL_LANES: ReadonlySet<FitFamily> = new Set(['mla', 'expert_alltoall', 'collective', 'recurrent', 'host']);

/**
 * Reading a chip's measurement store: lanes, inputs with their sha256, and rows. Each table (family,
 * lane or every lane) is read and units-checked once and kept until `retain` drops it, so families
 * that share a table (gemm and hbm; attention_decode and hbm; moe and moe_experts) read it once.
 */
export class MeasurementStore {
  readonly files: ReturnType<typeof listMeasurementFiles>;
  private readonly tables = new Map<string, unknown[]>();
  private readonly hashes = new Map<string, string>();
  constructor(readonly job: FitJob) {
    this.files = listMeasurementFiles(job.dir);
  }

  /** Lanes stored for the tables `family` reads (hbm: gemm's and decode's; moe_experts: moe's), sorted. */
  lanesOf(family: FitFamily): string[] {
    const tables: readonly Family[] =
      family === 'hbm' ? ['gemm', 'attention_decode'] : [family === 'moe_experts' ? 'moe' : family];
    return [...new Set(this.files.filter((f) => tables.includes(f.family)).map((f) => f.lane))].sort();
  }

  /** The lane fitted for `family`: `--lane` when stored for it, else `defaultLane`; undefined when none. */
  laneFor(family: Family): string | undefined {
    const lanes = this.files.filter((f) => f.family === family).map((f) => f.lane);
    if (!lanes.length) return undefined;
    if (this.job.lane) return lanes.includes(laneSlug(this.job.lane)) ? laneSlug(this.job.lane) : undefined;
    return defaultLane(lanes);
  }

  /** Input files of `family` (one lane, or every lane), repo-relative, with sha256 and lane. */
  inputsFor(family: Family, lane?: string): FitContext['inputs'] {
    return this.files
      .filter((f) => f.family === family && (lane === undefined || f.lane === lane))
      .map((f) => ({
        file: path.relative(this.job.root, f.file).split(path.sep).join('/'),
        sha256: this.sha256Of(f.file),
        lane: f.lane,
      }));
  }

  /** sha256 of a stored file's bytes, read once per store. */
  private sha256Of(file: string): string {
    let sha256 = this.hashes.get(file);
    if (sha256 === undefined) {
      sha256 = sha256File(file);
      this.hashes.set(file, sha256);
    }
    return sha256;
  }

  private chipText: string | undefined;
  /** The chip datasheet as JSON, the units-check cache's key. */
  private chipJson(): string {
    this.chipText ??= JSON.stringify(this.job.chip);
    return this.chipText;
  }

  /**
   * Rows of `family` (one lane, or every lane). Each stored file passes the importer's units check again
   * (src/measurements/units.ts), so a table stored without a chip datasheet, or edited since, cannot fit a units slip.
   */
  read<F extends Family>(family: F, lane?: string): FamilyRow[F][] {
    const key = tableKey(family, lane);
    let rows = this.tables.get(key) as FamilyRow[F][] | undefined;
    if (!rows) {
      rows = this.files
        .filter((f) => f.family === family && (lane === undefined || f.lane === laneSlug(lane)))
        .flatMap((f) => {
          // The files readMeasurements reads for this lane, by content: the decoded-table cache's key.
          const key = this.files
            .filter((g) => g.family === family && g.lane === f.lane)
            .map((g) => this.sha256Of(g.file))
            .join(',');
          const fileRows = cachedRows(key, () => readMeasurements(this.job.dir, family, { lane: f.lane }));
          cachedCheck(key, this.chipJson(), () => checkUnits(family, fileRows, this.job.chip, f.file));
          return fileRows;
        });
      this.tables.set(key, rows);
    }
    return rows;
  }

  /** The tables `family` reads, as keys of `read` (an absent lane reads nothing). */
  tablesOf(family: FitFamily): string[] {
    if (family === 'hbm') return [...this.tablesOf('gemm'), ...this.tablesOf('attention_decode')];
    const table: Family = family === 'moe_experts' ? 'moe' : family;
    if (ALL_LANES.has(family)) return [tableKey(table, undefined)];
    const lane = this.laneFor(table);
    return lane ? [tableKey(table, lane)] : [];
  }

  /** Drop every table not named in `keep` (a worker keeps only what its next families read). */
  retain(keep: ReadonlySet<string>): void {
    for (const key of [...this.tables.keys()]) if (!keep.has(key)) this.tables.delete(key);
  }
}

const tableKey = (family: Family, lane: string | undefined) => `${family}|${lane ?? '*'}`;

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

/** The `prior` a family is fitted with: every coefficient of its dependencies (FAMILY_DEPS), by name. */
export function priorFor(family: FitFamily, done: ReadonlyMap<string, FitFamilyResult>): Map<string, number> {
  const prior = new Map<string, number>();
  for (const dep of FAMILY_DEPS[family]) {
    const coefficients: FittedCoefficient[] = done.get(dep)?.coefficients ?? [];
    for (const c of coefficients) prior.set(c.name, c.entry.value);
  }
  return prior;
}

/**
 * One step of fitting `families` in order in one thread (index.ts in the main thread, worker.ts's plan): fit
 * `families[i]` with its dependencies' coefficients from `results` as `prior`, keep only the tables
 * `families[i + 1…]` read, and add the result to `results`.
 * @returns the family's result and its milliseconds (rounded)
 * @throws InputError / UserError from fitFamily
 */
export function fitInOrderAt(
  store: MeasurementStore,
  families: readonly FitFamily[],
  i: number,
  results: Map<FitFamily, FitFamilyResult>,
): { result: FitFamilyResult; ms: number } {
  const family = families[i]!;
  const t0 = performance.now();
  const result = fitFamily(store, family, priorFor(family, results));
  store.retain(new Set(families.slice(i + 1).flatMap((f) => store.tablesOf(f))));
  results.set(family, result);
  return { result, ms: Math.round(performance.now() - t0) };
}

const missing = (family: string, why: string): FamilyFit => ({
  ...emptyFamilyFit(family),
  warnings: [`${family}: not fitted: ${why}`],
});

/**
 * Fit one family from `store` with the coefficients of its dependencies as `prior`; with `part` (one
 * of FAMILY_PARTS[family]) only that part, for mergeParts.
 * @returns the family's fit (or part), or an empty one with a warning when it has no measurements.
 * @throws InputError / UserError from reading a table (file, row, column), as the fitters do.
 */
export function fitFamily(
  store: MeasurementStore,
  family: FitFamily,
  prior: ReadonlyMap<string, number>,
  part?: string,
): FitFamilyResult {
  const ctx = (inputs: FitContext['inputs']): FitContext => ({
    chip: store.job.chip,
    inputs,
    bootstrap: store.job.bootstrap,
    prior,
  });
  const gemmLane = store.laneFor('gemm');
  const decodeLane = store.laneFor('attention_decode');
  const laneRows = <F extends Family>(table: F) => {
    const lane = store.laneFor(table);
    return { rows: lane ? store.read(table, lane) : [], ctx: ctx(store.inputsFor(table, lane)) };
  };
  const allLanes = <F extends Family>(table: F) => ({ rows: store.read(table), ctx: ctx(store.inputsFor(table)) });
  const fitted = <R>(p: { rows: R[]; ctx: FitContext }, fitter: (rows: R[], c: FitContext) => FitFamilyResult) =>
    p.rows.length ? fitter(p.rows, p.ctx) : missing(family, 'no measurements');
  switch (family) {
    case 'gemm': {
      const p = { rows: gemmLane ? store.read('gemm', gemmLane) : [], ctx: ctx(store.inputsFor('gemm', gemmLane)) };
      return p.rows.length ? fitGemm(p.rows, p.ctx) : missing('gemm', 'no gemm measurements');
    }
    case 'hbm':
      return fitHbm(
        gemmLane ? store.read('gemm', gemmLane) : [],
        decodeLane ? store.read('attention_decode', decodeLane) : [],
        ctx([
          ...store.inputsFor('gemm', gemmLane),
          ...(decodeLane ? store.inputsFor('attention_decode', decodeLane) : []),
        ]),
      );
    case 'attention_decode': {
      const p = decodeLane
        ? {
            rows: store.read('attention_decode', decodeLane),
            ctx: ctx(store.inputsFor('attention_decode', decodeLane)),
          }
        : { rows: [], ctx: ctx([]) };
      if (part === undefined) return fitted(p, fitAttentionDecode);
      // Without rows the first part carries the family's warning and the others add nothing.
      if (!p.rows.length) return part === DECODE_KINDS[0] ? missing(family, 'no measurements') : emptyFamilyFit(family);
      return fitAttentionDecodeKind(p.rows, part as DecodeKind, p.ctx);
    }
    case 'attention_prefill':
      return fitted(laneRows('attention_prefill'), fitAttentionPrefill);
    case 'sparse':
      return fitted(laneRows('sparse'), fitSparse);
    case 'moe':
      return fitted(laneRows('moe'), fitMoe);
    case 'moe_experts': {
      const p = laneRows('moe');
      return p.rows.length ? fitMoeExperts(p.rows, p.ctx) : missing('moe_experts', 'no moe measurements');
    }
    case 'mla':
      return fitted(allLanes('mla'), fitMla);
    case 'expert_alltoall':
      return fitted(allLanes('expert_alltoall'), fitExpertA2a);
    case 'collective':
      return fitted(allLanes('collective'), fitCollectives);
    case 'recurrent':
      // Every recurrent lane is read: GDN, KDA and Mamba2 come from different engines (vLLM, TRT-LLM).
      return fitted(allLanes('recurrent'), fitRecurrent);
    case 'host': {
      // Without host rows the host fitter emits its `assumed` entries (with rationale); it never fits
      // host overheads from per-operator tables.
      const p = allLanes('host');
      return fitHost(p.rows, p.ctx);
    }
  }
}
