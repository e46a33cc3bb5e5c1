/**
 * Types of the serving simulation (issue 18; docs/serving.md). Times µs, sizes bytes, lengths tokens.
 */
import type { Resource } from '../pricer/types.ts';

/** Which of the pricer's three estimates advances the clock (docs/pricer.md "Three estimates"). */
export const STEP_COMPOSITIONS = ['cm_overlap', 'no_overlap', 'overlap'] as const;
export type StepComposition = (typeof STEP_COMPOSITIONS)[number];

/** Order within a step: vLLM v1 (running first) or v0's default without chunking (prefills first, alone). */
export const PRIORITIES = ['decode-first', 'prefill-first'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** The scheduler's knobs (vLLM v1 names where vLLM has one). */
export interface SchedulerConfig {
  /** vLLM `max_num_seqs`: most requests in the running set. */
  max_num_seqs: number;
  /** vLLM `max_num_batched_tokens`: token budget of one step. */
  max_num_batched_tokens: number;
  /** vLLM `enable_chunked_prefill`. */
  chunked_prefill: boolean;
  priority: Priority;
  /** KV block size, tokens (vLLM `block_size`, default 16). */
  block_size: number;
  /** KV blocks one replica holds (from `kvCapacity`). */
  kv_blocks: number;
}

/**
 * Engine profile: what the engine adds to each priced step. "uncalibrated" adds nothing, so the
 * registry's host terms (already inside the step price) are the only host time.
 */
export interface EngineProfile {
  name: string;
  /** Printed with the results. */
  description: string;
  /** Extra host µs per step, as a function of the requests in the step. */
  step_host_us: (requests: number) => number;
}

/** One request of a workload. */
export interface RequestSpec {
  id: string;
  /** Prompt (input) tokens, ≥ 1. */
  isl: number;
  /** Output tokens to generate, ≥ 1. */
  osl: number;
  /** Arrival, µs; absent in a closed loop (a client issues it when its previous request ends). */
  arrival_us?: number;
  /** Mean accepted draft tokens per verification step (speculative decoding), 0..spec_tokens. */
  accepted_per_step?: number;
  /** The replay row it came from (error messages name file and row); absent for drawn requests. */
  where?: { file: string; row: number };
}

/** A workload ready to simulate on one replica. */
export type ReplicaWorkload =
  | { kind: 'closed'; concurrency: number; requests: RequestSpec[] }
  | { kind: 'open'; requests: RequestSpec[] };

/** What a whole run needs besides the pricer. */
export interface ServeConfig {
  scheduler: SchedulerConfig;
  composition: StepComposition;
  profile: EngineProfile;
  /** Speculative tokens per decode step (0 = none); must match the pricer's deployment. */
  spec_tokens: number;
  /** Data-parallel replicas; requests are dealt round-robin (closed loop: clients likewise). */
  dp: number;
  /** GPUs of one replica (the per-GPU denominator is dp × this). */
  gpus_per_replica: number;
  /**
   * The model's context limit (max_position_embeddings), checked on every request's prompt + output
   * before the run (run.ts `checkContext`); absent = not stated, not checked.
   */
  context_limit?: ContextLimit;
}

/** A model's context limit, and whether requests over it run anyway (with a note) or are refused. */
export interface ContextLimit {
  model: string;
  max_positions: number;
  allow_over_capacity: boolean;
}

/** One simulated request's recorded events (the chapter's a, s, e, t1…tn) and its counters. */
export interface ServedRequest {
  id: string;
  replica: number;
  isl: number;
  osl: number;
  arrival_us: number;
  /** Start of the first step that scheduled its prompt. */
  prompt_start_us: number;
  /** End of the step that completed its prompt (its first token is delivered then). */
  prompt_end_us: number;
  token_times_us: number[];
  preemptions: number;
  /** Decode (verification) steps it took part in. */
  decode_steps: number;
}

/** Step regimes: every scheduled request in prefill, in decode, or both. */
export const STEP_REGIMES = ['prefill', 'mixed', 'decode'] as const;
export type StepRegime = (typeof STEP_REGIMES)[number];

/** Per-step log of one replica (parallel arrays; one entry per step). */
export interface StepLog {
  start_us: number[];
  end_us: number[];
  /** Running-set size after the step (what a benchmark's window filter reads). */
  running_after: number[];
  /** Output tokens delivered at the end of the step. */
  tokens_out: number[];
  /** Positions scheduled for decode/verification (1 + spec per decode request): the full-acceptance count. */
  decode_positions: number[];
  regime: StepRegime[];
  bottleneck: Resource[];
  /** Σ over steps of the pricer's per-resource µs. */
  resources_us: Record<Resource, number>;
  /** Σ over steps of the engine profile's extra host µs. */
  profile_host_us: number;
  /** Distinct extrapolation notes of the priced steps. */
  notes: string[];
}

/** Outcome of one replica. */
export interface ReplicaRun {
  replica: number;
  requests: ServedRequest[];
  /** Requests that can never run (KV or budget too small), with why. */
  refused: Array<{ id: string; reason: string }>;
  preemptions: number;
  steps: StepLog;
  /** Closed-loop concurrency of this replica (null for an open loop). */
  concurrency: number | null;
  /** Closed loop: the running count the window filter asks for, min(clients, max_num_seqs, requests); null for an open loop. */
  window_running: number | null;
}
