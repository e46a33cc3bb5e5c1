/** Test helpers for src/serve: a hand-computable pricer and a config builder. */
import type { Batch, Pricer, StepPrice } from '../../src/pricer/types.ts';
import { UNCALIBRATED } from '../../src/serve/run.ts';
import type { SchedulerConfig, ServeConfig } from '../../src/serve/types.ts';

/**
 * A pricer whose step costs `base + per_token · Σ scheduled tokens` µs (every estimate equal, all of
 * it charged to SM), so schedules can be worked by hand. Monotone in the batch, as the real one is.
 */
export function linearPricer(base = 100, per_token = 10): Pricer & { calls: Batch[] } {
  const calls: Batch[] = [];
  return {
    calls,
    price(batch: Batch): StepPrice {
      calls.push({ requests: batch.requests.map((r) => ({ ...r })) });
      const tokens = batch.requests.reduce((a, r) => a + r.scheduled_tokens, 0);
      const us = base + per_token * tokens;
      return {
        overlap_us: us,
        compute_memory_overlap_us: us,
        no_overlap_us: us,
        bottleneck: 'sm',
        resources_us: { sm: us, hbm: 0, nvlink: 0, nic: 0, host: 0 },
        extrapolated: false,
        extrapolation_notes: [],
      };
    },
  };
}

/** A run configuration with a roomy scheduler unless overridden. */
export function config(s: Partial<SchedulerConfig> = {}, extra: Partial<ServeConfig> = {}): ServeConfig {
  return {
    scheduler: {
      max_num_seqs: 256,
      max_num_batched_tokens: 8192,
      chunked_prefill: true,
      priority: 'decode-first',
      block_size: 16,
      kv_blocks: 1_000_000,
      ...s,
    },
    composition: 'cm_overlap',
    profile: UNCALIBRATED,
    spec_tokens: 0,
    dp: 1,
    gpus_per_replica: 1,
    ...extra,
  };
}
