/**
 * A fit worker thread (parallel.ts starts it): fits the families it is sent, one message each, from
 * its own MeasurementStore, so it reads only the tables of the families it is given, each once, and
 * drops a table when the scheduler says no later family of this worker needs it. Replies with the
 * family's result (structured-cloned) or its error (name, message, stack, and an InputError's location).
 */
import { parentPort } from 'node:worker_threads';
import {
  type FitFamily,
  type FitFamilyResult,
  type FitJob,
  fitFamily,
  fitInOrderAt,
  MeasurementStore,
} from './families.ts';

/** One request: fit `family` (or its `part`) with `prior`; afterwards keep only the tables in `keep`. */
export interface FitRequest {
  job: FitJob;
  family: FitFamily;
  part?: string | undefined;
  prior: Array<[string, number]>;
  keep: string[];
}

/**
 * A whole plan beside the main thread (parallel.ts fitBeside): fit `plan` in order, each family with
 * the coefficients of its dependencies fitted earlier in the same plan as `prior` (the plan holds
 * them: FAMILY_DEPS), one reply per family; stop at the first error.
 */
export interface FitPlanRequest {
  job: FitJob;
  plan: FitFamily[];
}

let store: MeasurementStore | undefined;

/** The reply for an error: its name, message, stack, and an InputError's location and problem. */
function errorReply(family: FitFamily, t0: number, e: unknown) {
  const err = e as Error & { location?: unknown; problem?: unknown };
  return {
    family,
    ms: Math.round(performance.now() - t0),
    error: { name: err.name, message: err.message, stack: err.stack, location: err.location, problem: err.problem },
  };
}

/** Fit every family of a plan in order (families.ts fitInOrderAt), one reply each; at the first error, its reply and no more. */
function runPlan(req: FitPlanRequest): void {
  const results = new Map<FitFamily, FitFamilyResult>();
  for (const [i, family] of req.plan.entries()) {
    const t0 = performance.now();
    try {
      const { result, ms } = fitInOrderAt(store!, req.plan, i, results);
      parentPort!.postMessage({ family, ms, result });
    } catch (e) {
      parentPort!.postMessage(errorReply(family, t0, e));
      return;
    }
  }
}

parentPort?.on('message', (req: FitRequest | FitPlanRequest) => {
  store ??= new MeasurementStore(req.job);
  if ('plan' in req) return runPlan(req);
  const t0 = performance.now();
  try {
    const result = fitFamily(store, req.family, new Map(req.prior), req.part);
    store.retain(new Set(req.keep));
    parentPort!.postMessage({ family: req.family, ms: Math.round(performance.now() - t0), result });
  } catch (e) {
    parentPort!.postMessage(errorReply(req.family, t0, e));
  }
});
