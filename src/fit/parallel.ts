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
import {
  FAMILY_DEPS,
  FAMILY_PARTS,
  type FitFamily,
  type FitFamilyResult,
  type FitJob,
  type MeasurementStore,
  mergeParts,
} from './families.ts';
import type { FitPlanRequest, FitRequest } from './worker.ts';

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
 * Fewest cores on which a run uses a pool of workers by default (DECISION, session 12): on 2 cores, with
 * the decoded-table cache, `fit all --chip h200 --check` in this thread took 3.43–3.54 s wall, 4.9–5.1 s
 * CPU, 182–198 MiB against 3.72–3.85 s, 6.7–7.1 s CPU, 265–283 MiB on two workers (alternating, load
 * ≈ 1.9; docs/performance.md "fit all, session 12"): each worker loads the modules and its tables
 * again, and the main thread idles. Below it, one thread (one worker beside it on request: besideAsked).
 * Not measured on 3 cores, so the pool starts at 4.
 */
const MIN_CORES_FOR_WORKERS = 4;

/**
 * Workers for a run: `requested` (FitOptions.workers), else STEPCAL_FIT_WORKERS, else the machine's
 * parallelism when it has at least MIN_CORES_FOR_WORKERS cores (else 1); at most MAX_WORKERS. 0 or 1
 * means in this thread. `cores` is the machine's parallelism (a parameter for tests).
 */
export function workerCount(requested: number | undefined, cores = availableParallelism()): number {
  const env = process.env.STEPCAL_FIT_WORKERS;
  const byDefault = cores >= MIN_CORES_FOR_WORKERS ? cores : 1;
  const n = requested ?? (env !== undefined && env !== '' ? Number(env) : byDefault);
  return Number.isInteger(n) && n > 1 ? Math.min(n, MAX_WORKERS) : 1;
}

/**
 * Families one worker fits beside the main thread when a run asks for it (besideAsked; session 14, fitBeside): the GEMM
 * fit and the two families fitted on its coefficients (prefill attention, MLA), and the collectives: on
 * h200 (quiet, one thread) gemm 730 + attention_prefill 465 + mla 83 + collective 345 ms against the main
 * thread's attention_decode 575 + moe 328 + moe_experts 273 + hbm 228 + recurrent 150 + sparse 140 +
 * expert_alltoall 23 ms, the worker also paying its start and its own JIT warm-up. A family whose
 * dependency (FAMILY_DEPS) is in the worker's plan goes there too, so neither side waits on the other.
 */
const BESIDE_FAMILIES: ReadonlySet<FitFamily> = new Set(['gemm', 'attention_prefill', 'mla', 'collective']);

/**
 * Whether a run fits one worker beside the main thread (fitBeside): when the caller asks for `beside`, or
 * gives no count and STEPCAL_FIT_WORKERS is `beside`. Not a default (DECISION, session 14, docs/performance.md):
 * on this 2-core machine it ties one thread on wall time (median 3.60 vs 3.66 s, five alternating pairs)
 * for 1.1 s more CPU and ≈ 45 MiB more memory, once the GEMM fit's faster joint step shortened the worker's side.
 */
export function besideAsked(requested: number | 'beside' | undefined): boolean {
  if (requested !== undefined) return requested === 'beside';
  return process.env.STEPCAL_FIT_WORKERS === 'beside';
}

/**
 * Split `families` (RESULT_ORDER) into the worker's plan and the main thread's: BESIDE_FAMILIES, every
 * family depending on one of the worker's (its prior is there) and every dependency of one (so the
 * worker never needs a prior from the main thread) go to the worker; the rest stay, each side in the
 * order given. Dependencies come before their dependents in RESULT_ORDER, so each side's order fits them first.
 */
export function besidePlan(families: readonly FitFamily[]): { worker: FitFamily[]; main: FitFamily[] } {
  const away = new Set(families.filter((f) => BESIDE_FAMILIES.has(f)));
  const pulled = (f: FitFamily) =>
    FAMILY_DEPS[f].some((d) => away.has(d)) || families.some((g) => away.has(g) && FAMILY_DEPS[g].includes(f));
  for (let grew = true; grew; ) {
    grew = false;
    for (const f of families)
      if (!away.has(f) && pulled(f)) {
        away.add(f);
        grew = true;
      }
  }
  return { worker: families.filter((f) => away.has(f)), main: families.filter((f) => !away.has(f)) };
}

/**
 * Fit `plan` on one worker while the caller fits the rest in its own thread (on request: besideAsked;
 * the split: BESIDE_FAMILIES): the plan goes in one message and the worker fits it in order from its own tables, so
 * it never waits for the main thread, whose synchronous fits hold its event loop. Replies collect as
 * the main thread yields.
 * @returns `results` (each family's result and ms; rejects with the first fitting error, same class and
 *   location, or WorkerUnavailable when the worker could not start or died), `failure` (that error once
 *   it has arrived, else undefined) and `stop` to end the worker.
 */
export function fitBeside(
  job: FitJob,
  plan: readonly FitFamily[],
  onFamily?: OnFamily,
): { results: Promise<Map<FitFamily, WorkerFit>>; failure: () => Error | undefined; stop: () => void } {
  const worker = startWorker();
  const done = new Map<FitFamily, WorkerFit>();
  let failed: Error | undefined;
  const stop = () => void worker.terminate();
  const results = new Promise<Map<FitFamily, WorkerFit>>((resolve, reject) => {
    let settled = false;
    const finish = (err?: Error) => {
      if (settled) return;
      settled = true;
      stop();
      failed = err;
      if (err) reject(err);
      else resolve(done);
    };
    worker.on('message', (m: { family: FitFamily; ms: number; result?: FitFamilyResult; error?: never }) => {
      if (m.error) return finish(rebuildError(m.error));
      onFamily?.(m.family, 'done', m.ms);
      done.set(m.family, { result: m.result!, ms: m.ms });
      if (done.size === plan.length) return finish();
      // The worker fits its plan in order: the next family started when this one ended.
      onFamily?.(plan[done.size]!, 'start');
    });
    worker.on('error', (e) => finish(new WorkerUnavailable(`fit worker failed: ${e.message}`)));
    worker.on('exit', (code) => finish(new WorkerUnavailable(`fit worker exited (code ${code})`)));
  });
  // Handled by the caller's await; this keeps a rejection that lands before it from reading as unhandled.
  results.catch(() => undefined);
  onFamily?.(plan[0]!, 'start');
  worker.postMessage({ job, plan: [...plan] } satisfies FitPlanRequest);
  return { results, failure: () => failed, stop };
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

/** One unit of work for a worker: a family, or one part of it (FAMILY_PARTS). */
interface Task {
  family: FitFamily;
  part?: string;
}

/**
 * The tasks of `families` in SCHEDULE order: a family with parts (FAMILY_PARTS) and a table to read
 * becomes one task per part, any other family one task.
 */
function tasksOf(store: MeasurementStore, families: readonly FitFamily[]): Task[] {
  return SCHEDULE.filter((f) => families.includes(f)).flatMap((family): Task[] => {
    const parts = FAMILY_PARTS[family];
    return parts && store.tablesOf(family).length ? parts.map((part) => ({ family, part })) : [{ family }];
  });
}

/**
 * Group id per task: tasks sharing a table (MeasurementStore.tablesOf) share a group, except a
 * family's parts after its first (DECISION, issue 17): each is a group of its own, so an idle worker
 * takes it and reads the table a second time (decode: ≈0.3 s CPU) rather than wait for the worker
 * that holds it.
 */
function groupsOf(store: MeasurementStore, tasks: readonly Task[]): Map<Task, number> {
  const byTable = new Map<string, number>();
  const group = new Map<Task, number>();
  tasks.forEach((t, i) => {
    group.set(t, i);
  });
  for (const t of tasks) {
    if (t.part !== undefined && t.part !== FAMILY_PARTS[t.family]![0]) continue;
    for (const table of store.tablesOf(t.family)) {
      const g = byTable.get(table);
      if (g === undefined) byTable.set(table, group.get(t)!);
      else {
        const from = group.get(t)!;
        for (const [h, id] of group) if (id === from) group.set(h, g);
      }
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
  const pending = tasksOf(store, families);
  const group = groupsOf(store, pending);
  const done = new Map<FitFamily, WorkerFit>();
  const parts = new Map<FitFamily, Map<string, WorkerFit>>();
  const owner = new Map<number, number>();
  const workers = Array.from({ length: Math.min(count, new Set(group.values()).size) }, startWorker);
  const running: Array<Task | undefined> = workers.map(() => undefined);
  const ready = (t: Task) => FAMILY_DEPS[t.family].every((d) => done.has(d) || !families.includes(d));
  const pick = (w: number) =>
    pending.find((t) => ready(t) && owner.get(group.get(t)!) === w) ??
    pending.find((t) => ready(t) && !owner.has(group.get(t)!));
  const label = (t: Task) => (t.part === undefined ? t.family : `${t.family} (${t.part})`);
  /** Record a finished task; a family with parts is done (merged, ms summed) when its last part is. */
  const complete = (t: Task, fit: WorkerFit) => {
    onFamily?.(label(t), 'done', fit.ms);
    if (t.part === undefined) return void done.set(t.family, fit);
    const got = parts.get(t.family) ?? new Map<string, WorkerFit>();
    parts.set(t.family, got.set(t.part, fit));
    const names = FAMILY_PARTS[t.family]!;
    if (got.size < names.length) return;
    const fits = names.map((n) => got.get(n)!);
    const ms = fits.reduce((a, f) => a + f.ms, 0);
    done.set(t.family, {
      result: mergeParts(
        t.family,
        fits.map((f) => f.result),
      ),
      ms,
    });
  };
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
        if (running[w]) return;
        const t = pick(w);
        if (!t) return;
        pending.splice(pending.indexOf(t), 1);
        owner.set(group.get(t)!, w);
        const keep = pending.filter((g) => owner.get(group.get(g)!) === w).flatMap((g) => store.tablesOf(g.family));
        const prior = FAMILY_DEPS[t.family].flatMap((d) =>
          (done.get(d)?.result.coefficients ?? []).map((c): [string, number] => [c.name, c.entry.value]),
        );
        running[w] = t;
        onFamily?.(label(t), 'start');
        worker.postMessage({ job, family: t.family, part: t.part, prior, keep } satisfies FitRequest);
      });
      if (!pending.length && !running.some(Boolean)) finish();
    };
    workers.forEach((worker, w) => {
      worker.on('message', (m: { ms: number; result?: FitFamilyResult; error?: never }) => {
        const t = running[w]!;
        running[w] = undefined;
        if (m.error) return finish(rebuildError(m.error));
        complete(t, { result: m.result!, ms: m.ms });
        dispatch();
      });
      worker.on('error', (e) => finish(new WorkerUnavailable(`fit worker failed: ${e.message}`)));
      worker.on('exit', (code) => finish(new WorkerUnavailable(`fit worker exited (code ${code})`)));
    });
    dispatch();
  });
}
