/**
 * `stepcal serve` speed and memory (issue 18 "Numbers"): 1,000 requests at concurrency 64 on
 * llama-3.1-70b tp 8 (h200, the shipped registry), ISL 1,024, OSL 256, chunked prefill, vLLM
 * defaults. Goal ≤ 1 s (setup + simulation + metrics) on 2 cores. Memory: heap growth over the run at
 * 250, 500 and 1,000 requests, which should grow in proportion (linear in requests). Prints figures; never fails.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { loadRegistryFile } from '../src/registry/load.ts';
import { DEFAULT_SCHEDULER, runServe, setupServe } from '../src/serve/run.ts';
import { generateRequests } from '../src/serve/workload.ts';

const GOAL_MS = 1000;

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** One run: wall and CPU ms, steps, and the heap the result holds after a full collection. */
function once(
  requests: number,
  registry: ReturnType<typeof loadRegistryFile>,
): { ms: number; cpu_ms: number; steps: number; heap_mb: number } {
  gc();
  const h0 = process.memoryUsage().heapUsed;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const s = setupServe({
    model: 'llama-3.1-70b',
    chip: 'h200',
    deployment: { tp: 8 },
    dp: 1,
    registry,
    scheduler: DEFAULT_SCHEDULER,
  });
  const reqs = generateRequests(requests, { kind: 'fixed', value: 1024 }, { kind: 'fixed', value: 256 }, 1);
  const r = runServe({ kind: 'closed', concurrency: 64, requests: reqs }, s.pricer, s.config);
  const ms = performance.now() - t0;
  const c = process.cpuUsage(c0);
  gc();
  const heap_mb = (process.memoryUsage().heapUsed - h0) / 2 ** 20;
  return { ms, cpu_ms: (c.user + c.system) / 1000, steps: r.metrics.steps.n + (r.runs.length ? 0 : 0), heap_mb };
}

export default async function bench(): Promise<void> {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const registry = loadRegistryFile(path.join(root, 'registry', 'h200.yaml'));
  const cold = once(1000, registry);
  const warm = [once(1000, registry), once(1000, registry), once(1000, registry)].sort((a, b) => a.ms - b.ms)[1]!;
  process.stdout.write(
    `serve llama-3.1-70b tp8 h200, 1,000 requests at concurrency 64 (ISL 1024, OSL 256; ${cold.steps} steps): ` +
      `first run ${cold.ms.toFixed(0)} ms wall (${cold.cpu_ms.toFixed(0)} ms CPU), ` +
      `median of 3 warm ${warm.ms.toFixed(0)} ms wall (${warm.cpu_ms.toFixed(0)} ms CPU); ` +
      `goal ${GOAL_MS} ms (ratio ${(cold.ms / GOAL_MS).toFixed(2)}, first run wall)\n`,
  );
  const mem = [250, 500, 1000].map((n) => ({ n, ...once(n, registry) }));
  process.stdout.write(
    `serve memory (heap the result holds after a full GC): ` +
      `${mem.map((m) => `${m.n} requests ${m.heap_mb.toFixed(1)} MB (${((m.heap_mb * 1024) / m.n).toFixed(1)} KB/request)`).join('; ')}; ` +
      `linear in requests when KB/request stays flat\n`,
  );
}
