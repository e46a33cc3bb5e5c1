/**
 * Focused pricer micro-bench (issue 17 "Pricer"): the three llama-3.1-70b tp 8 h200 cases of
 * pricer.bench.ts (BLIS H200 fixture), each priced in its own fresh pricer after a long fixed warm-up
 * (200,000 calls, well past V8's last tier-up), then 9 timed rounds of 20,000 calls: median CPU ns per
 * call with the rounds' min and max, and heap bytes per call. Both batch forms where the build has
 * them: the object `Batch` (`priceInto`) and the columnar `ColumnBatch` (`priceColumnsInto`), the per-row
 * paths; and the live batch (`priceLiveInto`, bench/live-step.ts), each call advancing every decode row
 * a token and each prefill row a chunk before it prices (the step a scheduler takes), its price checked
 * against `priceInto`'s bit for bit on the fixed case.
 * Then the slowest issue-14 graphs of pricer.bench.ts (tp 8 on their chip's registry, 64 decodes at 8,192
 * plus one 2,048-token prefill chunk; for DeepSeek-V4-Flash also with 64 distinct contexts), goal < 2 µs,
 * both forms.
 * `STEPCAL_PRICER_CASE=<label>` runs only the cases whose label contains it (for `--cpu-prof`).
 * Prints figures beside the goals; never fails.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadChip } from '../src/core/catalog/chip.ts';
import { loadModel } from '../src/core/catalog/model.ts';
import * as batches from '../src/pricer/batch.ts';
import { emptyStepPrice } from '../src/pricer/compose.ts';
import { defaultDeployment } from '../src/pricer/deployment.ts';
import { createPricer } from '../src/pricer/pricer.ts';
import type { Batch, StepPrice } from '../src/pricer/types.ts';
import { loadRegistryFile, resolveCoefficients } from '../src/registry/load.ts';
import { liveStep } from './live-step.ts';

type Call = () => StepPrice;

/** Median, min and max CPU ns per call over 9 rounds of `inner` calls, after `warm` untimed calls. */
function cpuNsPerCall(fn: Call, warm = 200_000, inner = 20_000): { med: number; min: number; max: number } {
  let sink = 0;
  for (let j = 0; j < warm; j++) sink += fn().no_overlap_us;
  const xs: number[] = [];
  for (let r = 0; r < 9; r++) {
    const c0 = process.cpuUsage();
    for (let j = 0; j < inner; j++) sink += fn().no_overlap_us;
    const c = process.cpuUsage(c0);
    xs.push(((c.user + c.system) * 1000) / inner);
  }
  if (!Number.isFinite(sink)) process.stdout.write('unexpected non-finite price\n');
  xs.sort((a, b) => a - b);
  return { med: xs[4]!, min: xs[0]!, max: xs[8]! };
}

/**
 * Heap growth per call after a full GC: the minimum over 15 rounds of 2,000 calls (young generation
 * only). The minimum: a call's own allocation repeats every round, the JIT's (code installed late on a
 * loaded machine) does not (pricer.bench.ts heapBytesPerCall).
 */
function heapPerCall(fn: Call, gc: () => void): number {
  let min = Number.POSITIVE_INFINITY;
  for (let r = 0; r < 15; r++) {
    gc();
    const h0 = process.memoryUsage().heapUsed;
    for (let j = 0; j < 2000; j++) fn();
    min = Math.min(min, (process.memoryUsage().heapUsed - h0) / 2000);
  }
  return min;
}

export default async function bench(): Promise<void> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const sets = loadRegistryFile(path.join(root, 'test/fixtures/registry/blis-h200.yaml'));
  const reg = resolveCoefficients(sets, { hardware: 'h200', model: 'llama-3.1-70b', tp: 8, ep: 1 });
  const make = () => createPricer(loadChip('h200'), loadModel('llama-3.1-70b'), defaultDeployment({ tp: 8 }), reg);
  const decode = batches.decodeBatch(256, 4095);
  const cases: Array<[string, Batch, number, () => ReturnType<typeof make>]> = [
    ['decode 256 @ 4096', decode, 300, make],
    [
      'mixed 256 + 2 x 2048',
      { requests: [...decode.requests, ...batches.prefillBatch(2, 2048, 1024).requests] },
      400,
      make,
    ],
    ['decode 1 @ 4096', batches.decodeBatch(1, 4095), 0, make],
  ];
  const ragged: Batch = {
    requests: [
      ...Array.from({ length: 64 }, (_, i) => ({
        scheduled_tokens: 1,
        computed_tokens: 8191 + i,
        prompt_tokens: 8191 + i,
      })),
      ...batches.prefillBatch(1, 2048, 4096).requests,
    ],
  };
  const graphBatch = {
    requests: [...batches.decodeBatch(64, 8191).requests, ...batches.prefillBatch(1, 2048, 4096).requests],
  };
  for (const [model, chip] of [
    ['glm-5', 'b200'],
    ['deepseek-v4-flash', 'gb200'],
    ['deepseek-v4-flash-nvfp4', 'b200'],
    ['minimax-m3', 'h200'],
  ] as const) {
    const graphSets = loadRegistryFile(path.join(root, `registry/${chip}.yaml`));
    const r = resolveCoefficients(graphSets, { hardware: chip, model, tp: 8, ep: 1 });
    const build = () => createPricer(loadChip(chip), loadModel(model), defaultDeployment({ tp: 8 }), r);
    cases.push([`${model} ${chip} 64 + 1 x 2048`, graphBatch, 2000, build]);
    // The same step with 64 different contexts (8,191 … 8,254): no run of equal contexts to share.
    if (model === 'deepseek-v4-flash') cases.push([`${model} ${chip} 64 distinct + 1 x 2048`, ragged, 2000, build]);
  }
  const only = process.env.STEPCAL_PRICER_CASE ?? '';
  // The columnar form where this build has it (an older build is benched with the same file).
  const cols = (batches as Record<string, unknown>).columnsOf as ((b: Batch) => unknown) | undefined;
  for (const [label, batch, goal, build] of cases) {
    if (!label.includes(only)) continue;
    const forms: Array<[string, (p: ReturnType<typeof build>, out: StepPrice) => Call]> = [
      ['Batch (per-row walk)', (p, out) => () => p.priceInto(batch, out)],
    ];
    if (cols) {
      const cb = cols(batch);
      forms.push([
        'ColumnBatch (per-row walk)',
        (p, out) => () =>
          (p as unknown as { priceColumnsInto: (b: unknown, o: StepPrice) => StepPrice }).priceColumnsInto(cb, out),
      ]);
    }
    // The live batch (issue 17): every decode row advanced a token and each prefill row moved a chunk, then
    // priced, in one timed call (bench/live-step.ts); where this build has it.
    forms.push([
      'LiveBatch (advance every row + price)',
      (p, out) => {
        const step = liveStep(p, batch, out);
        if (step && !step.sameAsBatch()) process.stdout.write(`focus ${label}: LIVE PRICE DIFFERS FROM priceInto\n`);
        return step ? step.call : () => out;
      },
    ]);
    for (const [form, bind] of forms) {
      const p0 = build();
      if (form.startsWith('LiveBatch') && typeof (p0 as { liveBatch?: unknown }).liveBatch !== 'function') continue;
      const fn = bind(p0, emptyStepPrice());
      const t = cpuNsPerCall(fn);
      const h = heapPerCall(fn, gc);
      const g = goal > 0 ? `; goal ${goal === 2000 ? '<' : '≤'} ${goal} ns (${t.med <= goal ? 'met' : 'not met'})` : '';
      process.stdout.write(
        `focus ${label}, ${form}: ${t.med.toFixed(0)} ns CPU (min ${t.min.toFixed(0)}, max ${t.max.toFixed(0)})${g}; ` +
          `heap ${h.toFixed(1)} B/call; goal 0 B (${h <= 0 ? 'met' : 'not met'})\n`,
      );
    }
  }
}
