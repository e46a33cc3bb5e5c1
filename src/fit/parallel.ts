/**
 * `fit all` across worker threads (issue 17): the families of one run spread over a few workers
 * (worker.ts), each with its own measurement store. Families that read a common table (gemm, hbm and
 * attention_decode; moe and moe_experts) form one group, and a group runs on one worker, so every table
 * is read once per run. A family starts when the families it depends on (FAMILY_DEPS) are done and
 * gets exactly their coefficients as `prior`, as in the serial run: the results do not depend on the
 * schedule (index.ts orders them by RESULT_ORDER).
 *
 * Sources or build: from dist/ the worker is worker.js; from the TypeScript sources (tsx, vitest) it
 * is worker.ts loaded through tsx's loader, registered inside the worker.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { InputError, UsageError, UserError } from '../core/errors.ts';
import { FAMILY_DEPS, type FitFamily, type FitFamilyResult, type FitJob, type MeasurementStore } from './families.ts';
import type { FitRequest } from './worker.ts';

/**
 * Order in which idle workers take families (DECISION, issue 17): the longest chains first. gemm
 * unblocks attention_prefill and mla, hbm unblocks moe_experts; the attention fits are the longest.
 */
const SCHEDULE: readonly FitFamily[] = [
  'gemm',
  'hbm',
  'attention_decode',
  'attention_prefill',
  'moe',
  'moe_experts',
  'collective',
  'recurrent',
  'sparse',
  'mla',
  'expert_alltoall',
  'host',
];

/** Most workers a run starts (each is a V8 isolate with its own heap: ~10 MiB before its tables). */
const MAX_WORKERS = 4;

/**
 * Workers for a run: `requested` (FitOptions.workers), else STEPCAL_FIT_WORKERS, else the machine's
 * parallelism, at most MAX_WORKERS. 0 or 1 means in this thread.
 */
export function workerCount(requested: number | undefined): number {
  const env = process.env.STEPCAL_FIT_WORKERS;
  const n = requested ?? (env !== undefined && env !== '' ? Number(env) : availableParallelism());
  return Number.isInteger(n) && n > 1 ? Math.min(n, MAX_WORKERS) : 1;
}

/** A worker failed to start or died (not a fitting error): the caller fits in this thread instead. */
export class WorkerUnavailable extends Error {
  override name = 'WorkerUnavailable';
}

/**
 * A worker's young generation, MiB (DECISION, issue 17 peak memory): V8's default lets each isolate's
 * nursery grow to tens of MiB, and the run's peak is the sum over the main thread and its workers. At
 * 8 MiB `fit all --chip h200` on 2 workers peaked at 332–335 MiB (default: 441–445 MiB; 2 MiB: 380–395)
 * for the same CPU time (docs/performance.md).
 */
const WORKER_LIMITS = { resourceLimits: { maxYoungGenerationSizeMb: 8 } };

/** The part of tsx's package.json that names its loader API's ESM file. */
interface TsxPackage {
  exports: { './esm/api': { import: { default: string } } };
}

/** Start one fit worker: dist's worker.js, or worker.ts through tsx when this module runs from the sources. */
function startWorker(): Worker {
  const self = import.meta.url;
  if (!self.endsWith('.ts')) return new Worker(new URL('./worker.js', self), WORKER_LIMITS);
  const target = new URL('./worker.ts', self).href;
  // tsx's ESM entry of `tsx/esm/api` (its package exports' import condition), by absolute URL: an
  // eval'd worker resolves bare names from the working directory, not from this package.
  const pkg = createRequire(self).resolve('tsx/package.json');
  const entry = (JSON.parse(readFileSync(pkg, 'utf8')) as TsxPackage).exports['./esm/api'].import.default;
  const tsx = pathToFileURL(path.join(path.dirname(pkg), entry)).href;
  const code = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(target)}); })`;
  return new Worker(code, { eval: true, ...WORKER_LIMITS });
}

/** The error a worker replied with, rebuilt as the same class (so the CLI's exit code and message hold). */
function rebuildError(e: { name: string; message: string; stack?: string; location?: unknown; problem?: unknown }) {
  const err =
    e.name === 'InputError' && e.location && typeof e.problem === 'string'
      ? new InputError(e.location as InputError['location'], e.problem)
      : e.name === 'UsageError'
        ? new UsageError(e.message)
        : e.name === 'UserError'
          ? new UserError(e.message)
          : new Error(e.message);
  if (e.stack) err.stack = e.stack;
  return err;
}

/** Group id per family: families sharing a table (MeasurementStore.tablesOf) share a group. */
function groupsOf(store: MeasurementStore, families: readonly FitFamily[]): Map<FitFamily, number> {
  const byTable = new Map<string, number>();
  const group = new Map<FitFamily, number>();
  families.forEach((f, i) => {
    group.set(f, i);
  });
  for (const f of families)
    for (const t of store.tablesOf(f)) {
      const g = byTable.get(t);
      if (g === undefined) byTable.set(t, group.get(f)!);
      else {
        const from = group.get(f)!;
        for (const [h, id] of group) if (id === from) group.set(h, g);
      }
    }
  return group;
}

/** What `fitInWorkers` reports per family. */
export interface WorkerFit {
  result: FitFamilyResult;
  ms: number;
}

type OnFamily = (family: string, phase: 'start' | 'done', ms?: number) => void;

/**
 * Fit `families` (with their dependencies among them) on `count` workers.
 * @returns each family's result and milliseconds, and how many workers ran them.
 * @throws the first fitting error a worker replied with (same class, message and location);
 *   WorkerUnavailable when a worker could not start or died.
 */
export function fitInWorkers(
  store: MeasurementStore,
  job: FitJob,
  families: readonly FitFamily[],
  count: number,
  onFamily?: OnFamily,
): Promise<{ done: Map<FitFamily, WorkerFit>; workers: number }> {
  const group = groupsOf(store, families);
  const pending = SCHEDULE.filter((f) => families.includes(f));
  const done = new Map<FitFamily, WorkerFit>();
  const owner = new Map<number, number>();
  const workers = Array.from({ length: Math.min(count, new Set(group.values()).size) }, startWorker);
  const busy = workers.map(() => false);
  const ready = (f: FitFamily) => FAMILY_DEPS[f].every((d) => done.has(d) || !families.includes(d));
  const pick = (w: number) =>
    pending.find((f) => ready(f) && owner.get(group.get(f)!) === w) ??
    pending.find((f) => ready(f) && !owner.has(group.get(f)!));
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      for (const w of workers) void w.terminate();
      if (err) reject(err);
      else resolve({ done, workers: workers.length });
    };
    const dispatch = () => {
      workers.forEach((worker, w) => {
        if (busy[w]) return;
        const f = pick(w);
        if (!f) return;
        pending.splice(pending.indexOf(f), 1);
        owner.set(group.get(f)!, w);
        const keep = pending.filter((g) => owner.get(group.get(g)!) === w).flatMap((g) => store.tablesOf(g));
        const prior = FAMILY_DEPS[f].flatMap((d) =>
          (done.get(d)?.result.coefficients ?? []).map((c): [string, number] => [c.name, c.entry.value]),
        );
        busy[w] = true;
        onFamily?.(f, 'start');
        worker.postMessage({ job, family: f, prior, keep } satisfies FitRequest);
      });
      if (!pending.length && !busy.includes(true)) finish();
    };
    workers.forEach((worker, w) => {
      worker.on('message', (m: { family: FitFamily; ms: number; result?: FitFamilyResult; error?: never }) => {
        busy[w] = false;
        if (m.error) return finish(rebuildError(m.error));
        done.set(m.family, { result: m.result!, ms: m.ms });
        onFamily?.(m.family, 'done', m.ms);
        dispatch();
      });
      worker.on('error', (e) => finish(new WorkerUnavailable(`fit worker failed: ${e.message}`)));
      worker.on('exit', (code) => finish(new WorkerUnavailable(`fit worker exited (code ${code})`)));
    });
    dispatch();
  });
}
