/**
 * Serving metrics from simulated timelines, through the same path as `stepcal trace` and `stepcal
 * window` (src/analytics/trace.ts, window.ts; chapter 2 §2.4–2.5). Pure.
 *
 * Definitions (docs/serving.md "Metrics"): TTFT = t1 − a = Q + S + D; ITL = every later-token gap
 * Δi = ti − ti−1, pooled; TPOT = one mean gap per request with ≥ 2 tokens, (tn − t1)/(n − 1); E2E =
 * tn − a. Percentiles nearest-rank. Whole-trace rates = tokens / (last delivery − first arrival).
 */
import { mean } from '../core/numeric/stats.ts';
import { percentileRule, summariseTrace, type RequestRecord } from '../analytics/trace.ts';
import { selectWindow, type Endpoint } from '../analytics/window.ts';
import { RESOURCES, type Resource } from '../pricer/types.ts';
import { STEP_REGIMES, type ReplicaRun, type ServedRequest, type StepRegime } from './types.ts';

/** A distribution's summary, µs; null statistics for an empty sample (never 0). */
export interface Dist {
  n: number;
  mean_us: number | null;
  p50_us: number | null;
  p90_us: number | null;
  p99_us: number | null;
}

export interface WindowRates {
  /** How the window was chosen, in words. */
  rule: string;
  intervals: number;
  duration_us: number;
  steps_per_s: number;
  output_tokens_per_s: number;
}

export interface ServeMetrics {
  percentile_rule: string;
  requests: { completed: number; refused: number; preemptions: number };
  ttft: Dist;
  itl: Dist;
  tpot: Dist;
  e2e: Dist;
  whole: {
    span_us: number;
    output_tokens: number;
    input_tokens: number;
    output_tokens_per_s: number | null;
    total_tokens_per_s: number | null;
  };
  /** Summed over replicas; null when no replica has a selected interval (no window, not a zero rate). */
  window: WindowRates | null;
  /** Speculative decoding only: every verified position counted as output (chapter §2.5.5), whole trace. */
  full_acceptance_tokens_per_s: number | null;
  gpus: number;
  per_gpu: { denominator: string; output_tokens_per_s: number | null; window_output_tokens_per_s: number | null };
  /** 1e6 / mean TPOT: what one user sees. */
  tokens_per_s_per_user: number | null;
  steps: {
    n: number;
    busy_us: number;
    regime: Record<StepRegime, { steps: number; share: number; time_share: number }>;
    /** Σ per-resource µs over steps / Σ over all resources (what the steps spend where). */
    resource_share: Record<Resource, number>;
    /** Share of busy time in steps whose bottleneck is each resource. */
    bottleneck_time_share: Record<Resource, number>;
  };
}

/** The chapter's record of a served request: a, s, e and its deliveries (stepcal trace's input). */
export function toRecord(r: ServedRequest): RequestRecord {
  return {
    id: r.id,
    arrival_us: r.arrival_us,
    prompt_start_us: r.prompt_start_us,
    prompt_end_us: r.prompt_end_us,
    token_times_us: r.token_times_us,
  };
}

/**
 * Mean and nearest-rank p50/p90/p99 (sorted[ceil(p·n) − 1], chapter Listing 2.3; the same rule as
 * `percentileBy(…, 'nearest-rank')`), sorting once in a typed array: a run's pooled gaps number N·OSL.
 */
export function dist(values: ArrayLike<number>): Dist {
  const n = values.length;
  if (!n) return { n: 0, mean_us: null, p50_us: null, p90_us: null, p99_us: null };
  const s = Float64Array.from(values).sort();
  let sum = 0;
  for (let i = 0; i < n; i++) sum += s[i]!;
  const at = (p: number) => s[Math.max(0, Math.ceil(p * n) - 1)]!;
  return { n, mean_us: sum / n, p50_us: at(0.5), p90_us: at(0.9), p99_us: at(0.99) };
}

/**
 * Steady-state window of one replica through `selectWindow` (chapter Listing 2.11): endpoints are step
 * ends; a closed loop keeps those whose running count equals its concurrency (Listing 2.10), capped at
 * what the replica can run, min(clients, max_num_seqs, requests); an open
 * loop keeps the step ends from the arrival of the ⌈0.1·N⌉-th request to the last arrival (warm-up
 * and drain left out). Tokens: those delivered by the steps ending inside selected intervals.
 */
function replicaWindow(run: ReplicaRun): { intervals: number; sum_us: number; tokens: number } | null {
  const s = run.steps;
  const eps: Endpoint[] = [];
  const idx: number[] = [];
  let lo = -Infinity;
  let hi = Infinity;
  if (run.window_running === null) {
    const arr = run.requests.map((r) => r.arrival_us).sort((a, b) => a - b);
    if (arr.length < 2) return null;
    lo = arr[Math.max(0, Math.ceil(0.1 * arr.length) - 1)]!;
    hi = arr[arr.length - 1]!;
  }
  for (let i = 0; i < s.end_us.length; i++) {
    if (s.end_us[i]! < lo || s.end_us[i]! > hi) continue;
    eps.push({ ts_us: s.end_us[i]!, flagged: false, running: s.running_after[i]! });
    idx.push(i);
  }
  const w = selectWindow(eps, run.window_running ?? undefined);
  if (w.steps_per_s === null) return null;
  const kept = run.window_running === null ? idx : idx.filter((_, j) => eps[j]!.running === run.window_running);
  let tokens = 0;
  for (let j = 1; j < kept.length; j++) for (let i = kept[j - 1]! + 1; i <= kept[j]!; i++) tokens += s.tokens_out[i]!;
  return { intervals: w.selected, sum_us: w.selected_sum_us, tokens };
}

function windowRates(runs: readonly ReplicaRun[]): WindowRates | null {
  let intervals = 0;
  let dur = 0;
  let sps = 0;
  let tps = 0;
  for (const run of runs) {
    const w = replicaWindow(run);
    if (!w) continue;
    intervals += w.intervals;
    dur = Math.max(dur, w.sum_us);
    sps += (w.intervals * 1e6) / w.sum_us;
    tps += (w.tokens * 1e6) / w.sum_us;
  }
  if (!intervals) return null;
  const closed = runs[0]!.concurrency !== null;
  const rule = closed
    ? 'step ends where the running count equals the concurrency, min(clients, max_num_seqs, requests) per replica (chapter Listing 2.10); ' +
      'rates summed over replicas'
    : 'step ends from the arrival of the ⌈0.1·N⌉-th request to the last arrival (warm-up and drain excluded); rates summed over replicas';
  return { rule, intervals, duration_us: dur, steps_per_s: sps, output_tokens_per_s: tps };
}

function stepStats(runs: readonly ReplicaRun[]): ServeMetrics['steps'] {
  const zero = () => ({ sm: 0, hbm: 0, nvlink: 0, nic: 0, host: 0 }) as Record<Resource, number>;
  const res = zero();
  const bott = zero();
  const reg = Object.fromEntries(
    STEP_REGIMES.map((r) => [r, { steps: 0, share: 0, time_share: 0 }]),
  ) as ServeMetrics['steps']['regime'];
  let n = 0;
  let busy = 0;
  for (const run of runs) {
    const s = run.steps;
    for (const r of RESOURCES) res[r] += s.resources_us[r];
    for (let i = 0; i < s.end_us.length; i++) {
      const d = s.end_us[i]! - s.start_us[i]!;
      busy += d;
      bott[s.bottleneck[i]!] += d;
      reg[s.regime[i]!].steps += 1;
      reg[s.regime[i]!].time_share += d;
    }
    n += s.end_us.length;
  }
  const resSum = RESOURCES.reduce((a, r) => a + res[r], 0);
  for (const r of RESOURCES) {
    res[r] = resSum > 0 ? res[r] / resSum : 0;
    bott[r] = busy > 0 ? bott[r] / busy : 0;
  }
  for (const k of STEP_REGIMES) {
    reg[k].share = n ? reg[k].steps / n : 0;
    reg[k].time_share = busy > 0 ? reg[k].time_share / busy : 0;
  }
  return { n, busy_us: busy, regime: reg, resource_share: res, bottleneck_time_share: bott };
}

/**
 * Every metric of a run (all replicas pooled).
 * @param gpus the per-GPU denominator (dp × GPUs per replica), stated with the figures
 * @param spec_tokens speculative tokens per step (0 = none: no full-acceptance rate)
 * @throws UserError (from summariseTrace) when no request completed
 */
export function serveMetrics(
  runs: readonly ReplicaRun[],
  gpus: number,
  gpus_note: string,
  spec_tokens = 0,
): ServeMetrics {
  const served = runs.flatMap((r) => r.requests);
  // per-request-mean: the trace path's gap sample is then one mean gap per request (TPOT), N values, not N·OSL.
  const trace = summariseTrace(served.map(toRecord), { percentile: 'nearest-rank', gap_mode: 'per-request-mean' });
  const tl = trace.requests;
  const tpots = tl.filter((r) => r.gaps_us.length > 0).map((r) => mean(r.gaps_us));
  let gaps = 0;
  for (const r of tl) gaps += r.gaps_us.length;
  const itl = new Float64Array(gaps);
  let k = 0;
  for (const r of tl) for (const g of r.gaps_us) itl[k++] = g;
  const e2e = served.map((r) => r.token_times_us[r.token_times_us.length - 1]! - r.arrival_us);
  const input = served.reduce((a, r) => a + r.isl, 0);
  const span = trace.span_us;
  const rate = (tokens: number) => (span > 0 ? (tokens * 1e6) / span : null);
  const window = windowRates(runs);
  const outRate = rate(trace.tokens);
  const tpot = dist(tpots);
  let full: number | null = null;
  if (spec_tokens > 0) {
    const positions = runs.reduce((a, r) => a + r.steps.decode_positions.reduce((x, y) => x + y, 0), 0);
    full = rate(positions + served.length);
  }
  return {
    percentile_rule: percentileRule('nearest-rank'),
    requests: {
      completed: served.length,
      refused: runs.reduce((a, r) => a + r.refused.length, 0),
      preemptions: runs.reduce((a, r) => a + r.preemptions, 0),
    },
    ttft: dist(tl.map((r) => r.ttft_us)),
    itl: dist(itl),
    tpot,
    e2e: dist(e2e),
    whole: {
      span_us: span,
      output_tokens: trace.tokens,
      input_tokens: input,
      output_tokens_per_s: outRate,
      total_tokens_per_s: rate(trace.tokens + input),
    },
    window,
    full_acceptance_tokens_per_s: full,
    gpus,
    per_gpu: {
      denominator: gpus_note,
      output_tokens_per_s: outRate === null ? null : outRate / gpus,
      window_output_tokens_per_s: window ? window.output_tokens_per_s / gpus : null,
    },
    tokens_per_s_per_user: tpot.mean_us ? 1e6 / tpot.mean_us : null,
    steps: stepStats(runs),
  };
}
