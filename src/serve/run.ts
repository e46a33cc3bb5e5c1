/**
 * A whole serving run: deal the workload over dp replicas, simulate each on the step pricer, and
 * compute the metrics (issue 18). Pure given the pricer. `setupServe` is the loading edge (chip,
 * model, registry by name), built the way validation builds its pricer (src/validate/pricing.ts).
 */
import { loadChip, type Chip } from '../core/catalog/chip.ts';
import { loadModel, maxPositionEmbeddings, type ModelGraph } from '../core/catalog/model.ts';
import { InputError, UserError } from '../core/errors.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { defaultDeployment } from '../pricer/deployment.ts';
import { contextProblem, OVER_CAPACITY_NOTE } from '../pricer/limits.ts';
import { createPricer, type StepPricer } from '../pricer/pricer.ts';
import { engineProfiledPricer, largeStepLine } from '../pricer/engine.ts';
import { UNCALIBRATED_ENGINE_NOTE } from '../registry/engine.ts';
import { engineForChip, type EngineProfile as EngineProfileDoc } from '../core/schemas/engine.ts';
import type { Deployment, Pricer } from '../pricer/types.ts';
import { resolveCoefficients } from '../registry/load.ts';
import { kvCapacity, type KvCapacity } from './kv.ts';
import { serveMetrics, type ServeMetrics } from './metrics.ts';
import { simulateReplica } from './scheduler.ts';
import type {
  ContextLimit,
  EngineProfile,
  ReplicaRun,
  RequestSpec,
  SchedulerConfig,
  ServeConfig,
  StepComposition,
  Priority,
} from './types.ts';
import { dealReplicas } from './workload.ts';

/** The uncalibrated profile: no engine terms beyond the registry's host terms inside each step price. */
export const UNCALIBRATED: EngineProfile = {
  name: 'uncalibrated',
  description: UNCALIBRATED_ENGINE_NOTE,
  step_host_us: () => 0,
};

/** The serve-side view of a fitted profile: its host terms are inside each step price, so no extra. */
function fittedProfile(e: EngineProfileDoc): EngineProfile {
  return {
    name: e.name,
    description: `engine profile ${e.name}: fitted host terms and s = ${e.sm_scale.value}; ${largeStepLine(e)} (fitted for ${e.composition})`,
    step_host_us: () => 0,
  };
}

/** Known engine profiles by name. */
export const ENGINE_PROFILES: Readonly<Record<string, EngineProfile>> = { uncalibrated: UNCALIBRATED };

/** A workload before it is dealt to replicas. */
export type Workload =
  | { kind: 'closed'; concurrency: number; requests: RequestSpec[] }
  | { kind: 'open'; requests: RequestSpec[]; description?: string };

export interface ServeResult {
  runs: ReplicaRun[];
  metrics: ServeMetrics;
  /** Requests served over the model's context limit under `allow_over_capacity` (`checkContext`). */
  notes: string[];
}

/**
 * The model's context limit on each request's prompt + output, as vLLM checks prompt + max_tokens
 * against max_model_len (its default: max_position_embeddings) and price checks a batch
 * (pricer/limits.ts `contextProblem`, the same wording).
 * @param limit absent = no stated limit: nothing checked
 * @returns with `allow_over_capacity`, one note for all requests over the limit (empty when none is)
 * @throws UserError for the first request over the limit (an InputError naming file and row for a
 *   replayed one), with how many are over and `--allow-over-capacity`
 */
export function checkContext(requests: readonly RequestSpec[], limit: ContextLimit | undefined): string[] {
  if (!limit) return [];
  const over = requests.filter((r) => r.isl + r.osl > limit.max_positions);
  if (!over.length) return [];
  const of = `${over.length} of ${requests.length} requests`;
  const lengths = (r: RequestSpec) => `ISL ${r.isl} + OSL ${r.osl}`;
  if (limit.allow_over_capacity) {
    const longest = over.reduce((a, r) => (r.isl + r.osl > a.isl + a.osl ? r : a));
    const problem = contextProblem(limit.model, longest.isl + longest.osl, limit.max_positions)!;
    return [`${OVER_CAPACITY_NOTE}${problem} (${of}; the longest, "${longest.id}": ${lengths(longest)})`];
  }
  const first = over.reduce((a, r) => ((r.where?.row ?? 0) < (a.where?.row ?? 0) ? r : a));
  const problem = contextProblem(limit.model, first.isl + first.osl, limit.max_positions)!;
  const msg = `request "${first.id}" (${lengths(first)}; ${of} over): ${problem}; it cannot be served as given (pass --allow-over-capacity to serve it anyway, with a note)`;
  if (first.where) throw new InputError({ file: first.where.file, row: first.where.row }, msg);
  throw new UserError(msg);
}

/**
 * Simulate every replica and compute the metrics.
 * @throws UserError for an open-loop request without an arrival, a non-positive length, a request over
 *   the model's context limit (`checkContext`), or when no request completes (all refused), naming the
 *   first refusal
 */
export function runServe(w: Workload, pricer: Pricer, cfg: ServeConfig): ServeResult {
  if (w.kind === 'open') {
    const bad = w.requests.find(
      (r) => !(r.arrival_us !== undefined && Number.isFinite(r.arrival_us) && r.arrival_us >= 0),
    );
    if (bad) throw new UserError(`open-loop request "${bad.id}" has no arrival time ≥ 0 (got ${bad.arrival_us})`);
  }
  const badLen = w.requests.find(
    (r) => !(Number.isInteger(r.isl) && r.isl >= 1 && Number.isInteger(r.osl) && r.osl >= 1),
  );
  if (badLen)
    throw new UserError(
      `request "${badLen.id}": ISL and OSL must be positive integers (got ${badLen.isl}, ${badLen.osl})`,
    );
  const notes = checkContext(w.requests, cfg.context_limit);
  const parts = dealReplicas(w.kind, w.requests, cfg.dp, w.kind === 'closed' ? w.concurrency : 0);
  const runs = parts.map((p, k) => simulateReplica(p, pricer, cfg, k));
  const refused = runs.flatMap((r) => r.refused);
  if (refused.length === w.requests.length)
    throw new UserError(`every request was refused; first: ${refused[0]!.id} ${refused[0]!.reason}`);
  const gpus = cfg.dp * cfg.gpus_per_replica;
  const note = `${gpus} GPUs = dp ${cfg.dp} × ${cfg.gpus_per_replica} per replica (max(tp, ep)); all replicas' tokens over all GPUs`;
  return { runs, metrics: serveMetrics(runs, gpus, note, cfg.spec_tokens), notes };
}

/** What `setupServe` needs: names, the deployment and the scheduler knobs. */
export interface ServeSetupInput {
  model: string;
  chip: string;
  deployment: Partial<Deployment>;
  dp: number;
  registry: CoefficientSet[];
  /** Absent `max_num_batched_tokens`: the chip's default (`defaultMaxNumBatchedTokens`). */
  scheduler: Omit<SchedulerConfig, 'kv_blocks' | 'max_num_batched_tokens'> & {
    kv_blocks?: number;
    max_num_batched_tokens?: number | undefined;
  };
  gpu_memory_utilization?: number;
  composition?: StepComposition;
  profile?: EngineProfile;
  /**
   * A fitted engine profile (registry/engines/<name>.yaml): every step is priced with its host terms
   * instead of the registry's and its s on SM time (src/pricer/engine.ts); `profile` is then ignored.
   */
  engine?: EngineProfileDoc;
  /** Serve requests over the model's context limit, with a note, instead of refusing them (default false). */
  allow_over_capacity?: boolean;
}

export interface ServeSetup {
  chip: Chip;
  model: ModelGraph;
  deployment: Deployment;
  pricer: StepPricer;
  capacity: KvCapacity;
  config: ServeConfig;
}

/**
 * Build the pricer, the KV capacity and the run configuration for one deployment.
 * @throws UserError for an unknown chip/model, a missing coefficient, or weights that leave no KV room
 */
/**
 * vLLM's device-dependent default `max_num_batched_tokens`, as the reference records it
 * (shared/reference/blis-kernel-and-registry.md §4.9): 16,384 tokens on ≥ 160 GiB of HBM, 8,192 on
 * ≥ 70 GiB except A100, else 2,048.
 */
export function defaultMaxNumBatchedTokens(chip: Pick<Chip, 'name' | 'hbm_gib'>): number {
  if (chip.hbm_gib >= 160) return 16_384;
  if (chip.hbm_gib >= 70 && !/a100/i.test(chip.name)) return 8_192;
  return 2_048;
}

export function setupServe(i: ServeSetupInput): ServeSetup {
  const chip = loadChip(i.chip);
  const model = loadModel(i.model);
  const deployment = defaultDeployment(i.deployment);
  if (!Number.isInteger(i.dp) || i.dp < 1) throw new UserError(`dp must be a positive integer, got ${i.dp}`);
  const nodes_spanned = Math.ceil(deployment.tp / chip.gpus_per_node);
  const reg = resolveCoefficients(i.registry, {
    hardware: chip.name,
    model: model.name,
    tp: deployment.tp,
    ep: deployment.ep,
    nodes_spanned,
  });
  const e = i.engine && engineForChip(i.engine, chip.name);
  const inner = createPricer(chip, model, deployment, reg, e ? { sm_scale: e.sm_scale.value } : {});
  const specTokens = deployment.speculative?.num_spec_tokens ?? 0;
  const pricer = e ? engineProfiledPricer(inner, e, deployment.tp, 1 + specTokens) : inner;
  const capacity = kvCapacity(chip, pricer.info, {
    block_size: i.scheduler.block_size,
    ...(i.gpu_memory_utilization !== undefined ? { gpu_memory_utilization: i.gpu_memory_utilization } : {}),
    ...(i.scheduler.kv_blocks !== undefined ? { override_blocks: i.scheduler.kv_blocks } : {}),
  });
  const budget = i.scheduler.max_num_batched_tokens ?? defaultMaxNumBatchedTokens(chip);
  const config: ServeConfig = {
    scheduler: { ...i.scheduler, max_num_batched_tokens: budget, kv_blocks: capacity.blocks },
    composition: i.composition ?? 'cm_overlap',
    profile: e ? fittedProfile(e) : (i.profile ?? UNCALIBRATED),
    spec_tokens: deployment.speculative?.num_spec_tokens ?? 0,
    dp: i.dp,
    gpus_per_replica: Math.max(deployment.tp, deployment.ep),
  };
  const max_positions = maxPositionEmbeddings(i.model);
  if (max_positions !== undefined)
    config.context_limit = {
      model: model.name,
      max_positions,
      allow_over_capacity: i.allow_over_capacity ?? false,
    };
  return { chip, model, deployment, pricer, capacity, config };
}

/** Scheduler defaults (docs/serving.md); the token budget follows the chip (`defaultMaxNumBatchedTokens`). */
export const DEFAULT_SCHEDULER: Omit<SchedulerConfig, 'kv_blocks' | 'max_num_batched_tokens'> = {
  max_num_seqs: 256,
  chunked_prefill: true,
  priority: 'decode-first' as Priority,
  block_size: 16,
};
