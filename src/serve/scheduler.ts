/**
 * One replica's engine loop: a vLLM v1-style scheduler whose every step is priced by the step pricer
 * (issue 18; docs/serving.md "Scheduler model"). Pure and deterministic: no clock, no randomness
 * (workloads are drawn before, from a seed).
 *
 * Policy (vLLM v1 `Scheduler.schedule`, decode-first):
 * 1. running requests first, in order: each asks for num_tokens − num_computed_tokens (1 for a
 *    decode, 1 + spec for a verification), capped by the remaining token budget; when its KV blocks
 *    do not fit, the last running request is preempted (recompute: its KV freed, back to the front
 *    of the waiting queue) until they do, or it preempts itself;
 * 2. if nothing was preempted this step, waiting requests FCFS while the budget lasts and the running
 *    set is below max_num_seqs: without chunked prefill a prompt that does not fit the remaining
 *    budget stops admission; with it the prompt is cut to the budget; a prompt whose blocks do not fit
 *    the free KV stops admission.
 * `prefill-first` (vLLM v0's default without chunking; KNOWN DIVERGENCE 8, docs/serving.md): a step with any prefill work carries only
 * prefills; decodes run when no prefill can.
 * The step's batch is priced; the clock advances by the chosen estimate plus the profile's host term.
 * A request's first token is delivered at the end of the step that completes its prompt; later tokens
 * at the end of each decode step.
 */
import type { Batch, Pricer, Request, Resource } from '../pricer/types.ts';
import { byArrival } from './workload.ts';
import type {
  ReplicaRun,
  ReplicaWorkload,
  RequestSpec,
  SchedulerConfig,
  ServeConfig,
  ServedRequest,
  StepLog,
  StepRegime,
} from './types.ts';

/** Live state of one request. */
interface Live {
  out: ServedRequest;
  /** Tokens whose KV is computed. */
  computed: number;
  /** Delivered output tokens. */
  delivered: number;
  blocks: number;
  phase: 'prefill' | 'decode';
  /** The pricer's view of the request, reused every step. */
  req: Request;
  accepted_per_step: number;
  /** Tokens scheduled in the step being formed. */
  n: number;
}

interface State {
  cfg: SchedulerConfig;
  spec_tokens: number;
  waiting: Live[];
  running: Live[];
  free_blocks: number;
  preemptions: number;
}

/** Tokens a request still needs computed before its next token: prompt + delivered − computed. */
const pending = (l: Live) => l.out.isl + l.delivered - l.computed;
const blocksFor = (tokens: number, size: number) => Math.ceil(tokens / size);

/** Why a request can never complete on this replica, or null. */
export function refusalReason(spec: RequestSpec, cfg: SchedulerConfig): string | null {
  const need = blocksFor(spec.isl + spec.osl, cfg.block_size);
  if (need > cfg.kv_blocks) {
    return `needs ${need} KV blocks (${spec.isl} + ${spec.osl} tokens at ${cfg.block_size} per block) but the replica holds ${cfg.kv_blocks}`;
  }
  if (!cfg.chunked_prefill && spec.isl + spec.osl - 1 > cfg.max_num_batched_tokens) {
    return (
      `prompt + output − 1 = ${spec.isl + spec.osl - 1} tokens exceed max_num_batched_tokens ${cfg.max_num_batched_tokens} without chunked prefill ` +
      '(vLLM requires max_model_len ≤ max_num_batched_tokens)'
    );
  }
  return null;
}

/** Free a running request's KV and put it back at the front of the waiting queue (recompute preemption). */
function preempt(st: State, l: Live): void {
  st.free_blocks += l.blocks;
  l.blocks = 0;
  l.computed = 0;
  l.phase = 'prefill';
  l.out.preemptions += 1;
  st.preemptions += 1;
  st.waiting.unshift(l);
}

/** Reserve blocks so `l` holds KV for `tokens`; false when they do not fit. */
function reserve(st: State, l: Live, tokens: number): boolean {
  const need = Math.max(0, blocksFor(tokens, st.cfg.block_size) - l.blocks);
  if (need > st.free_blocks) return false;
  st.free_blocks -= need;
  l.blocks += need;
  return true;
}

/** Tokens a running request asks for this step: its pending prompt, or 1 + spec tokens in decode. */
function ask(st: State, l: Live): number {
  return l.phase === 'decode' ? 1 + st.spec_tokens : pending(l);
}

/** Step 1 of the policy: running requests, preempting from the tail when KV runs out. */
function scheduleRunning(
  st: State,
  sched: Live[],
  budget: number,
  onlyPrefill: boolean,
): { budget: number; preempted: boolean } {
  let preempted = false;
  for (let i = 0; i < st.running.length && budget > 0; i++) {
    const l = st.running[i]!;
    if (onlyPrefill && l.phase !== 'prefill') continue;
    const n = Math.min(ask(st, l), budget);
    let fits = reserve(st, l, l.computed + n);
    while (!fits && !onlyPrefill) {
      const victim = st.running.pop()!;
      preempt(st, victim);
      preempted = true;
      if (victim === l) break;
      fits = reserve(st, l, l.computed + n);
    }
    if (!fits) break;
    l.n = n;
    sched.push(l);
    budget -= n;
  }
  return { budget, preempted };
}

/** Step 2 of the policy: admit waiting requests FCFS. */
function admitWaiting(st: State, sched: Live[], budget: number, now_us: number): number {
  while (st.waiting.length && budget > 0 && st.running.length < st.cfg.max_num_seqs) {
    const l = st.waiting[0]!;
    const want = pending(l);
    if (!st.cfg.chunked_prefill && want > budget) break;
    const n = Math.min(want, budget);
    if (!reserve(st, l, n)) break;
    st.waiting.shift();
    st.running.push(l);
    if (Number.isNaN(l.out.prompt_start_us)) l.out.prompt_start_us = now_us;
    l.n = n;
    sched.push(l);
    budget -= n;
  }
  return budget;
}

/** The requests and token counts of the next step (may be empty when nothing can run). */
export function formStep(st: State, now_us: number, sched: Live[]): Live[] {
  sched.length = 0;
  let budget = st.cfg.max_num_batched_tokens;
  if (st.cfg.priority === 'prefill-first') {
    budget = scheduleRunning(st, sched, budget, true).budget;
    admitWaiting(st, sched, budget, now_us);
    if (sched.length) return sched;
    scheduleRunning(st, sched, st.cfg.max_num_batched_tokens, false);
    return sched;
  }
  const r = scheduleRunning(st, sched, budget, false);
  if (!r.preempted) admitWaiting(st, sched, r.budget, now_us);
  return sched;
}

/** Draft tokens accepted in a request's j-th verification step (1-based): the integer steps of j·α, capped (KNOWN DIVERGENCE 7, docs/serving.md). */
function acceptedAt(l: Live, j: number, k: number): number {
  const a = Math.min(k, Math.max(0, l.accepted_per_step));
  return Math.min(k, Math.floor(j * a + 1e-9) - Math.floor((j - 1) * a + 1e-9));
}

/**
 * Apply a finished step to one request; returns tokens delivered. KNOWN DIVERGENCE 3 (docs/serving.md):
 * a token is delivered when its step returns (publish gap D = 0).
 */
function advance(st: State, l: Live, n: number, end_us: number): number {
  if (l.phase === 'prefill') {
    l.computed += n;
    if (pending(l) > 0) return 0;
    l.phase = 'decode';
    l.delivered += 1;
    if (l.delivered === 1) l.out.prompt_end_us = end_us;
    l.out.token_times_us.push(end_us);
    return 1;
  }
  l.out.decode_steps += 1;
  const k = Math.min(st.spec_tokens, n - 1);
  const emit = Math.min(1 + acceptedAt(l, l.out.decode_steps, k), l.out.osl - l.delivered);
  l.computed += emit;
  l.delivered += emit;
  for (let i = 0; i < emit; i++) l.out.token_times_us.push(end_us);
  return emit;
}

function emptyLog(): StepLog {
  return {
    start_us: [],
    end_us: [],
    running_after: [],
    tokens_out: [],
    decode_positions: [],
    regime: [],
    bottleneck: [],
    resources_us: { sm: 0, hbm: 0, nvlink: 0, nic: 0, host: 0 },
    profile_host_us: 0,
    notes: [],
  };
}

function live(spec: RequestSpec, replica: number, arrival_us: number): Live {
  return {
    out: {
      id: spec.id,
      replica,
      isl: spec.isl,
      osl: spec.osl,
      arrival_us,
      prompt_start_us: NaN,
      prompt_end_us: NaN,
      token_times_us: [],
      preemptions: 0,
      decode_steps: 0,
    },
    computed: 0,
    delivered: 0,
    blocks: 0,
    phase: 'prefill',
    req: { scheduled_tokens: 0, computed_tokens: 0, prompt_tokens: spec.isl },
    accepted_per_step: spec.accepted_per_step ?? 0,
    n: 0,
  };
}

/** Arrival source of one replica: open loop (fixed times) or closed loop (clients reissue on completion). */
interface Source {
  /** Arrival time of the next request not yet arrived, or undefined. */
  next(): number | undefined;
  /** Pop every request arrived by `now_us`. */
  take(now_us: number): Array<{ spec: RequestSpec; arrival_us: number }>;
  /** A request finished at `t_us` (closed loop: its client issues the next). */
  finished(t_us: number): void;
}

function makeSource(w: ReplicaWorkload): Source {
  const queue: Array<{ spec: RequestSpec; arrival_us: number }> = [];
  // an open loop's requests in arrival order (stable: ties keep the given FCFS order)
  const reqs = w.kind === 'closed' ? w.requests : byArrival(w.requests);
  let issued = 0;
  const issue = (t: number) => {
    if (issued < reqs.length)
      queue.push({ spec: reqs[issued]!, arrival_us: w.kind === 'closed' ? t : reqs[issued]!.arrival_us! });
    issued++;
  };
  if (w.kind === 'closed') for (let i = 0; i < Math.min(w.concurrency, w.requests.length); i++) issue(0);
  else for (let i = 0; i < reqs.length; i++) issue(0);
  let head = 0;
  return {
    next: () => (head < queue.length ? queue[head]!.arrival_us : undefined),
    take: (now) => {
      const out: Array<{ spec: RequestSpec; arrival_us: number }> = [];
      while (head < queue.length && queue[head]!.arrival_us <= now) out.push(queue[head++]!);
      return out;
    },
    finished: (t) => {
      if (w.kind === 'closed') issue(t);
    },
  };
}

/** Step price on the chosen estimate. */
function stepUs(p: ReturnType<Pricer['price']>, c: ServeConfig['composition']): number {
  return c === 'cm_overlap' ? p.compute_memory_overlap_us : c === 'no_overlap' ? p.no_overlap_us : p.overlap_us;
}

/** Price one formed step and log it; returns its duration, µs. */
function priceStep(
  sched: Live[],
  pricer: Pricer,
  cfg: ServeConfig,
  log: StepLog,
  batch: Batch,
): { us: number; regime: StepRegime } {
  batch.requests.length = 0;
  let pre = 0;
  let positions = 0;
  for (const l of sched) {
    const n = l.n;
    l.req.scheduled_tokens = n;
    l.req.computed_tokens = l.computed;
    l.req.prompt_tokens = l.phase === 'prefill' ? l.out.isl + l.delivered : l.out.isl;
    batch.requests.push(l.req);
    if (l.phase === 'prefill') pre++;
    else positions += n;
  }
  const p = pricer.price(batch);
  const extra = cfg.profile.step_host_us(sched.length);
  for (const r of Object.keys(log.resources_us) as Resource[]) log.resources_us[r] += p.resources_us[r];
  log.profile_host_us += extra;
  if (p.extrapolated) for (const note of p.extrapolation_notes) if (!log.notes.includes(note)) log.notes.push(note);
  log.bottleneck.push(p.bottleneck);
  log.decode_positions.push(positions);
  const regime: StepRegime = pre === sched.length ? 'prefill' : pre === 0 ? 'decode' : 'mixed';
  log.regime.push(regime);
  return { us: stepUs(p, cfg.composition) + extra, regime };
}

/**
 * Run one replica to completion.
 * @param pricer prices each step's batch (its deployment must carry `cfg.spec_tokens`)
 * @returns every completed request's events, refusals, preemptions and the step log
 * @throws Error if the scheduler can make no progress (a bug: refusals rule out unrunnable requests)
 */
export function simulateReplica(w: ReplicaWorkload, pricer: Pricer, cfg: ServeConfig, replica = 0): ReplicaRun {
  const st: State = {
    cfg: cfg.scheduler,
    spec_tokens: cfg.spec_tokens,
    waiting: [],
    running: [],
    free_blocks: cfg.scheduler.kv_blocks,
    preemptions: 0,
  };
  const src = makeSource(w);
  const log = emptyLog();
  const done: ServedRequest[] = [];
  const refused: ReplicaRun['refused'] = [];
  const batch: Batch = { requests: [] };
  const sched: Live[] = [];
  let now = 0;
  for (;;) {
    for (const a of src.take(now)) {
      const why = refusalReason(a.spec, cfg.scheduler);
      if (why) {
        refused.push({ id: a.spec.id, reason: why });
        src.finished(now);
      } else st.waiting.push(live(a.spec, replica, a.arrival_us));
    }
    if (!st.running.length && !st.waiting.length) {
      const t = src.next();
      if (t === undefined) break;
      now = Math.max(now, t);
      continue;
    }
    formStep(st, now, sched);
    if (!sched.length) {
      const t = src.next();
      if (t === undefined)
        throw new Error(
          `serve: scheduler stalled at ${now} µs with ${st.waiting.length} waiting and ${st.running.length} running`,
        );
      now = Math.max(now, t);
      continue;
    }
    const { us } = priceStep(sched, pricer, cfg, log, batch);
    const end = now + us;
    now = finishStep(
      st,
      sched,
      end,
      log,
      (l) => {
        done.push(l.out);
        src.finished(end);
      },
      now,
    );
  }
  const closed = w.kind === 'closed';
  const window_running = closed ? Math.min(w.concurrency, cfg.scheduler.max_num_seqs, w.requests.length) : null;
  return {
    replica,
    requests: done,
    refused,
    preemptions: st.preemptions,
    steps: log,
    concurrency: closed ? w.concurrency : null,
    window_running,
  };
}

/** Apply a priced step: deliver tokens, retire finished requests, log; returns the new clock. */
function finishStep(
  st: State,
  sched: Live[],
  end: number,
  log: StepLog,
  onDone: (l: Live) => void,
  start: number,
): number {
  let tokens = 0;
  let anyDone = false;
  for (const l of sched) {
    tokens += advance(st, l, l.n, end);
    if (l.delivered >= l.out.osl) anyDone = true;
  }
  if (anyDone) {
    for (const l of sched) {
      if (l.delivered < l.out.osl) continue;
      st.running.splice(st.running.indexOf(l), 1);
      st.free_blocks += l.blocks;
      l.blocks = 0;
      onDone(l);
    }
  }
  log.start_us.push(start);
  log.end_us.push(end);
  log.tokens_out.push(tokens);
  log.running_after.push(st.running.length);
  return end;
}
