/**
 * A fit worker thread (parallel.ts starts it): fits the families it is sent, one message each, from
 * its own MeasurementStore, so it reads only the tables of the families it is given, each once, and
 * drops a table when the scheduler says no later family of this worker needs it. Replies with the
 * family's result (structured-cloned) or its error (name, message, stack, and an InputError's location).
 */
import { parentPort } from 'node:worker_threads';
import { type FitFamily, type FitJob, fitFamily, MeasurementStore } from './families.ts';

/** One request: fit `family` (or its `part`) with `prior`; afterwards keep only the tables in `keep`. */
export interface FitRequest {
  job: FitJob;
  family: FitFamily;
  part?: string | undefined;
  prior: Array<[string, number]>;
  keep: string[];
}

let store: MeasurementStore | undefined;

parentPort?.on('message', (req: FitRequest) => {
  store ??= new MeasurementStore(req.job);
  const t0 = performance.now();
  try {
    const result = fitFamily(store, req.family, new Map(req.prior), req.part);
    store.retain(new Set(req.keep));
    parentPort!.postMessage({ family: req.family, ms: Math.round(performance.now() - t0), result });
  } catch (e) {
    const err = e as Error & { location?: unknown; problem?: unknown };
    parentPort!.postMessage({
      family: req.family,
      ms: Math.round(performance.now() - t0),
      error: { name: err.name, message: err.message, stack: err.stack, location: err.location, problem: err.problem },
    });
  }
});
