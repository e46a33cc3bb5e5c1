/**
 * Median time to price one step (issue 4 "Design and speed"): llama-3.1-70b, tp 8, decode batch 256 at
 * 4,096 context, and a mixed batch (the same decodes plus two 2,048-token prefill chunks). Goal ≤ 2 µs;
 * the public Go implementation (BLIS) reports a few hundred nanoseconds. Uses the BLIS H200 fixture
 * coefficients (test/fixtures/registry/blis-h200.yaml). Prints figures; never fails.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadChip } from '../src/core/catalog/chip.ts';
import { loadModel } from '../src/core/catalog/model.ts';
import { loadRegistryFile, resolveCoefficients } from '../src/registry/load.ts';
import { decodeBatch, prefillBatch } from '../src/pricer/batch.ts';
import { defaultDeployment } from '../src/pricer/deployment.ts';
import { createPricer } from '../src/pricer/pricer.ts';
import type { Batch } from '../src/pricer/types.ts';

const GOAL_NS = 2000;
const GO_NS = 300; // "a few hundred nanoseconds" (BLIS README); taken as 300 ns for the ratio

/** Median wall and CPU ns per call over `reps` runs of `inner` calls (CPU time is steadier on a busy machine). */
function medianNsPerCall(fn: () => unknown, reps = 21, inner = 20000): { wall: number; cpu: number } {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < 3; i++) for (let j = 0; j < inner; j++) fn(); // warm-up (JIT)
  for (let r = 0; r < reps; r++) {
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    for (let j = 0; j < inner; j++) fn();
    wall.push(Number(process.hrtime.bigint() - t0) / inner);
    const c = process.cpuUsage(c0);
    cpu.push(((c.user + c.system) * 1000) / inner);
  }
  const med = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { wall: med(wall), cpu: med(cpu) };
}

export default async function bench(): Promise<void> {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const d = defaultDeployment({ tp: 8 });
  const reg = resolveCoefficients(loadRegistryFile(path.join(root, 'test/fixtures/registry/blis-h200.yaml')), { hardware: 'h200', model: 'llama-3.1-70b', tp: 8, ep: 1 });
  const pricer = createPricer(loadChip('h200'), loadModel('llama-3.1-70b'), d, reg);
  const decode = decodeBatch(256, 4095);
  const mixed: Batch = { requests: [...decode.requests, ...prefillBatch(2, 2048, 1024).requests] };
  let sink = 0;
  for (const [label, batch] of [
    ['decode 256 @ 4096', decode],
    ['mixed (256 decode + 2 prefill chunks)', mixed],
  ] as const) {
    const { wall, cpu } = medianNsPerCall(() => (sink += pricer.price(batch).no_overlap_us));
    process.stdout.write(
      `llama-3.1-70b tp8 h200, ${label}: median ${wall.toFixed(0)} ns/step wall (${cpu.toFixed(0)} ns CPU); goal ${GOAL_NS} ns ` +
        `(ratio ${(wall / GOAL_NS).toFixed(2)}); vs Go ~${GO_NS} ns (×${(wall / GO_NS).toFixed(1)})\n`,
    );
  }
  const small = decodeBatch(1, 4095);
  const one = medianNsPerCall(() => (sink += pricer.price(small).no_overlap_us));
  process.stdout.write(`llama-3.1-70b tp8 h200, decode 1 @ 4096: median ${one.wall.toFixed(0)} ns/step wall (${one.cpu.toFixed(0)} ns CPU): the fixed cost of a call\n`);
  if (!Number.isFinite(sink)) process.stdout.write('unexpected non-finite price\n');
}
