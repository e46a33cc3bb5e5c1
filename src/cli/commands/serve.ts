/**
 * `stepcal serve`: replay a workload (closed loop, open loop or a trace) through the vLLM-style
 * scheduler on the step pricer and print TTFT, ITL/TPOT, E2E and throughput (src/serve; docs/serving.md).
 */
import path from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { UsageError } from '../../core/errors.ts';
import { readText, writeFileAtomic } from '../../core/io/fs.ts';
import {
  oneOf,
  parseFraction,
  parseList,
  parseNonNegative,
  parsePositive,
  parsePositiveInt,
} from '../../analytics/args.ts';
import { loadRegistryFile } from '../../registry/load.ts';
import {
  checkContext,
  DEFAULT_SCHEDULER,
  ENGINE_PROFILES,
  runServe,
  setupServe,
  type ServeSetup,
  type Workload,
} from '../../serve/run.ts';
import { sweepConcurrency } from '../../serve/sweep.ts';
import { toRecord } from '../../serve/metrics.ts';
import { kvCacheNote, kvLabel } from './price-run.ts';
import {
  PRIORITIES,
  STEP_COMPOSITIONS,
  type Priority,
  type RequestSpec,
  type StepComposition,
} from '../../serve/types.ts';
import { generateRequests, parseLengthDist, parseReplayCsv, type LengthDist } from '../../serve/workload.ts';
import { serveReport, sweepSvg, sweepTable } from '../../report/serve.ts';
import { displayPath } from '../../core/io/paths.ts';
import { addDeploymentOptions, deploymentFromFlags } from './price.ts';
import { loadEngineProfile } from '../../registry/engine.ts';

interface Opts extends Record<string, unknown> {
  model: string;
  chip: string;
  registry?: string;
  dp: number;
  maxNumSeqs: number;
  maxNumBatchedTokens?: number;
  chunkedPrefill: 'on' | 'off';
  priority: Priority;
  blockSize: number;
  kvBlocks?: number;
  gpuMemoryUtilization: number;
  engineProfile: string;
  engine?: string;
  composition: StepComposition;
  concurrency?: number;
  rate?: number;
  arrivals: 'poisson' | 'constant';
  trace?: string;
  requests: number;
  isl: LengthDist;
  osl: LengthDist;
  acceptance?: number;
  seed: number;
  sweepConcurrency?: number[];
  deployment: string[];
  out?: string;
  timelines?: string;
  json?: boolean;
  allowOverCapacity?: boolean;
}

const collect = (v: string, acc: string[]) => [...acc, v];

/** A length-distribution flag; a malformed one is a usage error (exit 2). */
function distArg(flag: string): (v: string) => LengthDist {
  return (v) => {
    try {
      return parseLengthDist(v, flag);
    } catch (e) {
      throw new InvalidArgumentError((e as Error).message);
    }
  };
}

/** How a distribution is written back (as the flag accepts it). */
function distText(d: LengthDist): string {
  return d.kind === 'fixed' ? String(d.value) : d.kind === 'uniform' ? `uniform:${d.lo}-${d.hi}` : `exp:${d.mean}`;
}

/** Keys a `--deployment` spec may set (the deployment flags, in flag spelling with - or _). */
const DEPLOYMENT_KEYS = [
  'tp',
  'ep',
  'dp',
  'weight-dtype',
  'kv-dtype',
  'cudagraph-mode',
  'max-capture-size',
  'decode-threshold',
  'spec-tokens',
];

/** `tp=4,dp=2,weight_dtype=fp8` → flag overrides. @throws UsageError on a malformed pair or an unknown key */
function parseDeploymentSpec(spec: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([a-z_-]+)=(.+)$/i.exec(part);
    if (!m)
      throw new UsageError(`--deployment "${spec}": expected key=value pairs separated by commas (e.g. tp=4,dp=2)`);
    const key = m[1]!.toLowerCase().replace(/_/g, '-');
    if (!DEPLOYMENT_KEYS.includes(key))
      throw new UsageError(`--deployment "${spec}": unknown key "${m[1]}" (known: ${DEPLOYMENT_KEYS.join(', ')})`);
    out[key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase())] = m[2]!;
  }
  return out;
}

/**
 * The `--engine-profile` value: a built-in profile name (ENGINE_PROFILES).
 * @throws InvalidArgumentError (a usage error, exit 2) for any other name, saying that a fitted profile
 *   from registry/engines/ is given with `--engine`.
 */
function engineProfileArg(name: string): string {
  if (Object.hasOwn(ENGINE_PROFILES, name)) return name;
  throw new InvalidArgumentError(
    `expected a built-in profile (${Object.keys(ENGINE_PROFILES).join(', ')}), got "${name}"; a fitted profile registry/engines/${name}.yaml is given with --engine ${name}`,
  );
}

/** A length-distribution flag whose help shows its default as typed (`1024`), not as the parsed object. */
function distOption(flags: string, what: string, tokens: number): Option {
  const flag = flags.split(' ')[0]!;
  return new Option(flags, `${what}: N | fixed:N | uniform:LO-HI | exp:MEAN`)
    .argParser(distArg(flag))
    .default({ kind: 'fixed', value: tokens } satisfies LengthDist, String(tokens));
}

/** One deployment's setup from the flags (plus a --deployment override). */
function setupFrom(o: Opts, override: Record<string, string> = {}): ServeSetup {
  const flags = { ...(o as unknown as Record<string, string | undefined>), ...override };
  const dp = Number(override.dp ?? o.dp);
  if (!Number.isInteger(dp) || dp < 1) throw new UsageError(`dp must be a positive integer, got "${override.dp}"`);
  const profile = ENGINE_PROFILES[engineProfileArg(o.engineProfile)]!;
  const file = o.registry ?? path.join(REPO_ROOT, 'registry', `${o.chip}.yaml`);
  const engine = o.engine !== undefined ? loadEngineProfile(o.engine) : undefined;
  return setupServe({
    ...(engine ? { engine } : {}),
    model: o.model,
    chip: o.chip,
    // A bad value the override gave is named by its key there, not as a flag the user did not pass.
    deployment: deploymentFromFlags(flags, (flag, key) =>
      Object.hasOwn(override, key) ? `--deployment ${flag.slice(2)}` : flag,
    ),
    dp,
    registry: loadRegistryFile(file),
    scheduler: {
      max_num_seqs: o.maxNumSeqs,
      max_num_batched_tokens: o.maxNumBatchedTokens,
      chunked_prefill: o.chunkedPrefill === 'on',
      priority: o.priority,
      block_size: o.blockSize,
      ...(o.kvBlocks !== undefined ? { kv_blocks: o.kvBlocks } : {}),
    },
    gpu_memory_utilization: o.gpuMemoryUtilization,
    composition: o.composition,
    profile,
    allow_over_capacity: Boolean(o.allowOverCapacity),
  });
}

/** The workload the flags describe (exactly one of --concurrency, --rate, --trace). */
function workloadFrom(o: Opts): { workload: Workload; text: string } {
  const given = [o.concurrency !== undefined, o.rate !== undefined, o.trace !== undefined].filter(Boolean).length;
  if (given !== 1)
    throw new UsageError(
      'give exactly one workload: --concurrency N (closed loop), --rate R (open loop) or --trace file.csv (replay)',
    );
  const withAcceptance = (rs: RequestSpec[]) =>
    o.acceptance === undefined ? rs : rs.map((r) => ({ accepted_per_step: o.acceptance, ...r }));
  if (o.trace !== undefined) {
    const rs = withAcceptance(parseReplayCsv(readText(o.trace), o.trace));
    return {
      workload: { kind: 'open', requests: rs },
      text: `trace replay ${displayPath(o.trace)} (${rs.length} requests)`,
    };
  }
  const { isl, osl } = o;
  const lengths = `ISL ${distText(isl)}, OSL ${distText(osl)}, seed ${o.seed}`;
  if (o.concurrency !== undefined) {
    const rs = withAcceptance(generateRequests(o.requests, isl, osl, o.seed));
    const text = `closed loop: concurrency ${o.concurrency}, ${o.requests} requests, ${lengths}`;
    return { workload: { kind: 'closed', concurrency: o.concurrency, requests: rs }, text };
  }
  const rs = withAcceptance(generateRequests(o.requests, isl, osl, o.seed, { kind: o.arrivals, rate_per_s: o.rate! }));
  return {
    workload: { kind: 'open', requests: rs },
    text: `open loop: ${o.arrivals} arrivals at ${o.rate} requests/s, ${o.requests} requests, ${lengths}`,
  };
}

function headerOf(s: ServeSetup, o: Opts, workload: string): string[] {
  const d = s.deployment;
  const c = s.config.scheduler;
  const kvNote = kvCacheNote(s.model, d.kv_dtype, s.pricer.info);
  return [
    `${s.model.name} on ${s.chip.name}: tp ${d.tp}, ep ${d.ep}, dp ${s.config.dp}, weights ${s.pricer.info.served_dtype}, ${kvLabel(d.kv_dtype, s.pricer.info)}, ${d.cudagraph_mode}` +
      (s.config.spec_tokens ? `, ${s.config.spec_tokens} speculative tokens` : ''),
    ...(kvNote ? [kvNote] : []),
    `scheduler: max_num_seqs ${c.max_num_seqs}, max_num_batched_tokens ${c.max_num_batched_tokens}, ` +
      `chunked prefill ${c.chunked_prefill ? 'on' : 'off'}, ${c.priority}`,
    `KV cache: ${c.kv_blocks} blocks of ${c.block_size} tokens per replica (${s.capacity.tokens} tokens; ` +
      `${o.kvBlocks !== undefined ? 'given by --kv-blocks' : `HBM × ${o.gpuMemoryUtilization} − weights`})`,
    `engine profile: ${s.config.profile.description}; step clock: ${s.config.composition}`,
    `workload: ${workload}`,
  ];
}

function runOnce(o: Opts): void {
  const s = setupFrom(o);
  const { workload, text } = workloadFrom(o);
  const r = runServe(workload, s.pricer, s.config);
  if (o.timelines)
    writeFileAtomic(
      o.timelines,
      `${JSON.stringify({ unit: 'us', requests: r.runs.flatMap((x) => x.requests).map(traceJsonRecord) })}\n`,
    );
  const notes = [...new Set(r.runs.flatMap((x) => x.steps.notes))];
  const header = [...headerOf(s, o, text), ...r.notes];
  if (o.json) {
    const refused = r.runs.flatMap((x) => x.refused);
    const json = {
      model: s.model.name,
      chip: s.chip.name,
      deployment: s.deployment,
      dp: s.config.dp,
      scheduler: s.config.scheduler,
      kv: s.capacity,
      engine_profile: s.config.profile.name,
      composition: s.config.composition,
      workload: text,
      metrics: r.metrics,
      refused,
      over_capacity_notes: r.notes,
      extrapolation_notes: notes,
      timelines: o.timelines ?? null,
    };
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
    return;
  }
  process.stdout.write(serveReport(header, r.metrics, notes));
  if (o.timelines)
    process.stdout.write(
      `\nwrote ${displayPath(o.timelines)} (times in µs, declared in the file; read it with \`stepcal trace ${displayPath(o.timelines)}\`)\n`,
    );
}

/** A served request in `stepcal trace`'s JSON format, times in µs (the file's `unit`, written beside the requests). */
function traceJsonRecord(r: Parameters<typeof toRecord>[0]): object {
  const x = toRecord(r);
  return {
    id: x.id,
    arrival: x.arrival_us,
    prompt_start: x.prompt_start_us,
    prompt_end: x.prompt_end_us,
    tokens: x.token_times_us,
  };
}

function runSweep(o: Opts): void {
  if (o.concurrency !== undefined || o.rate !== undefined || o.trace !== undefined) {
    throw new UsageError('--sweep-concurrency replaces --concurrency/--rate/--trace');
  }
  const specs = o.deployment.length ? o.deployment : [''];
  const setups = specs.map((spec) => {
    const setup = setupFrom(o, parseDeploymentSpec(spec));
    const d = setup.deployment;
    return {
      label: spec || `tp${d.tp}${d.ep > 1 ? ` ep${d.ep}` : ''}${setup.config.dp > 1 ? ` dp${setup.config.dp}` : ''}`,
      setup,
    };
  });
  const { isl, osl } = o;
  const concs = o.sweepConcurrency!.map((c) => {
    if (!Number.isInteger(c) || c < 1)
      throw new UsageError(`--sweep-concurrency: expected positive integers, got ${c}`);
    return c;
  });
  const requestsFor = (c: number) => generateRequests(Math.max(o.requests, c), isl, osl, o.seed);
  const s0 = setups[0]!.setup;
  // Every point's requests are the first of the largest point's (one seed): check those once, up front.
  const limitNotes = checkContext(requestsFor(Math.max(...concs)), s0.config.context_limit);
  const pts = sweepConcurrency(setups, concs, requestsFor);
  const title =
    `${s0.model.name} on ${s0.chip.name}: closed loop, max(${o.requests}, concurrency) requests per point, ` +
    `ISL ${distText(isl)}, OSL ${distText(osl)}`;
  const out = o.out ?? path.join(REPO_ROOT, 'fits', s0.chip.name, `serve-sweep-${s0.model.name}.svg`);
  writeFileAtomic(out, sweepSvg(pts, title));
  if (o.json) {
    process.stdout.write(
      `${JSON.stringify({ title, svg: out, over_capacity_notes: limitNotes, points: pts }, null, 2)}\n`,
    );
    return;
  }
  const head = [...headerOf(s0, o, 'sweep').slice(1, 4), ...limitNotes].join('\n');
  process.stdout.write(`${title}\n${head}\n\n${sweepTable(pts)}\nwrote ${displayPath(out)}\n`);
}

export function register(program: Command): void {
  const cmd = program
    .command('serve')
    .description('serving-level prediction: a vLLM-style scheduler on the step pricer → TTFT, ITL/TPOT, E2E, tokens/s');
  addDeploymentOptions(cmd)
    .option('--dp <n>', 'data-parallel replicas (requests dealt round-robin)', parsePositiveInt, 1)
    .option(
      '--max-num-seqs <n>',
      'most running requests (vLLM max_num_seqs)',
      parsePositiveInt,
      DEFAULT_SCHEDULER.max_num_seqs,
    )
    .option(
      '--max-num-batched-tokens <n>',
      'token budget per step (default by HBM: 16384 ≥ 160 GiB, 8192 ≥ 70 GiB but A100, else 2048)',
      parsePositiveInt,
    )
    .option('--chunked-prefill <on|off>', 'chunked prefill', oneOf(['on', 'off'] as const), 'on')
    .option('--priority <p>', `step order: ${PRIORITIES.join(' | ')}`, oneOf(PRIORITIES), 'decode-first')
    .option('--block-size <n>', 'KV block size, tokens', parsePositiveInt, DEFAULT_SCHEDULER.block_size)
    .option('--kv-blocks <n>', 'KV blocks per replica (default: from HBM − weights)', parsePositiveInt)
    .option('--gpu-memory-utilization <f>', 'share of HBM the engine uses, in (0, 1]', parseFraction, 0.9)
    .option(
      '--engine-profile <name>',
      `built-in scheduler-side profile (${Object.keys(ENGINE_PROFILES).join(', ')}), used when no --engine is given; a fitted profile (registry/engines/<name>.yaml) is --engine`,
      engineProfileArg,
      'uncalibrated',
    )
    .option(
      '--composition <c>',
      `estimate that advances the clock (${STEP_COMPOSITIONS.join(', ')})`,
      oneOf(STEP_COMPOSITIONS),
      'cm_overlap',
    )
    .option('--concurrency <n>', 'closed loop with n clients', parsePositiveInt)
    .option('--rate <r>', 'open loop, requests per second', parsePositive)
    .option(
      '--arrivals <kind>',
      'open-loop arrivals: poisson | constant',
      oneOf(['poisson', 'constant'] as const),
      'poisson',
    )
    .option('--trace <file>', 'replay CSV: arrival_ms|arrival_s|arrival_us, isl, osl[, id, accepted_per_step]')
    .option('--requests <n>', 'requests to issue (closed and open loop)', parsePositiveInt, 200)
    .addOption(distOption('--isl <dist>', 'prompt tokens', 1024))
    .addOption(distOption('--osl <dist>', 'output tokens', 256))
    .option(
      '--acceptance <a>',
      'mean accepted draft tokens per verification step (with --spec-tokens)',
      parseNonNegative,
    )
    .option('--seed <n>', 'seed of the length and arrival draws', parsePositiveInt, 1)
    .option('--sweep-concurrency <list>', 'closed-loop sweep over these concurrencies (table + SVG)', parseList)
    .option(
      '--deployment <spec>',
      'with --sweep-concurrency: another deployment, e.g. tp=4,dp=2 (repeatable)',
      collect,
      [] as string[],
    )
    .option('--out <file>', 'sweep SVG path (default fits/<chip>/serve-sweep-<model>.svg, a build output)')
    .option('--timelines <file>', 'write per-request timelines as `stepcal trace` JSON (µs)')
    .option('--json', 'print JSON (times in µs)')
    .option(
      '--allow-over-capacity',
      "serve requests whose prompt + output exceed the model's context limit (max_position_embeddings), with a note, instead of refusing them",
    )
    .action((o: Opts) => (o.sweepConcurrency ? runSweep(o) : runOnce(o)));
}
