/**
 * Concurrency sweeps over one or more deployments, and the Pareto frontier of tokens/s/GPU against
 * tokens/s/user (issue 18 §3). Pure given the setups.
 */
import { runServe } from './run.ts';
import type { ServeMetrics } from './metrics.ts';
import type { ServeSetup } from './run.ts';
import type { RequestSpec } from './types.ts';

export interface SweepPoint {
  deployment: string;
  concurrency: number;
  metrics: ServeMetrics;
  /** x of the frontier: 1e6 / mean TPOT. */
  tokens_per_s_per_user: number | null;
  /** y of the frontier: whole-trace output tokens/s over all GPUs of the deployment. */
  tokens_per_s_per_gpu: number | null;
  /** On the Pareto frontier over every point of every deployment. */
  pareto: boolean;
}

/**
 * Indices of the non-dominated points (maximising both x and y): a point is dominated when another
 * has x ≥ and y ≥ with one strictly greater. Points with a null coordinate are never on the frontier.
 * @example paretoFront([[1, 5], [2, 4], [1.5, 3]]) → [0, 1]
 */
export function paretoFront(points: ReadonlyArray<readonly [number | null, number | null]>): number[] {
  const out: number[] = [];
  points.forEach(([x, y], i) => {
    if (x === null || y === null) return;
    const dominated = points.some(
      ([u, v], j) => j !== i && u !== null && v !== null && u >= x && v >= y && (u > x || v > y),
    );
    if (!dominated) out.push(i);
  });
  return out;
}

/**
 * Closed-loop runs at each concurrency on each deployment; `requestsFor(c)` gives the requests of a
 * point (the same seeded lengths for every deployment, so points differ only by the deployment).
 */
export function sweepConcurrency(
  setups: ReadonlyArray<{ label: string; setup: ServeSetup }>,
  concurrencies: readonly number[],
  requestsFor: (concurrency: number) => RequestSpec[],
): SweepPoint[] {
  const pts: SweepPoint[] = [];
  for (const { label, setup } of setups) {
    for (const c of concurrencies) {
      const { metrics } = runServe(
        { kind: 'closed', concurrency: c, requests: requestsFor(c) },
        setup.pricer,
        setup.config,
      );
      const tokens_per_s_per_gpu = metrics.per_gpu.output_tokens_per_s;
      pts.push({
        deployment: label,
        concurrency: c,
        metrics,
        tokens_per_s_per_user: metrics.tokens_per_s_per_user,
        tokens_per_s_per_gpu,
        pareto: false,
      });
    }
  }
  for (const i of paretoFront(pts.map((p) => [p.tokens_per_s_per_user, p.tokens_per_s_per_gpu] as const)))
    pts[i]!.pareto = true;
  return pts;
}
