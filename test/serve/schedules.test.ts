/**
 * Hand-worked schedules (issue 18 §4): 2–3 requests, small budgets and KV, on a pricer costing
 * 100 + 10 · (tokens in the step) µs. Each case writes out the steps it expects.
 */
import { describe, expect, it } from 'vitest';
import { simulateReplica } from '../../src/serve/scheduler.ts';
import type { ReplicaRun, RequestSpec } from '../../src/serve/types.ts';
import { config, linearPricer } from './helpers.ts';

const byId = (run: ReplicaRun, id: string) => run.requests.find((r) => r.id === id)!;
const events = (run: ReplicaRun, id: string) => {
  const r = byId(run, id);
  return { a: r.arrival_us, s: r.prompt_start_us, e: r.prompt_end_us, t: r.token_times_us };
};

describe('hand-worked schedules', () => {
  it('chunked prefill under an 8-token budget, running requests first, a late arrival admitted behind them', () => {
    const reqs: RequestSpec[] = [
      { id: 'r0', isl: 6, osl: 3, arrival_us: 0 },
      { id: 'r1', isl: 5, osl: 2, arrival_us: 0 },
      { id: 'r2', isl: 2, osl: 2, arrival_us: 150 },
    ];
    const run = simulateReplica(
      { kind: 'open', requests: reqs },
      linearPricer(),
      config({ max_num_batched_tokens: 8 }),
    );
    // step 1 @0:   r0 prefill 6, r1 chunk 2 (budget 8)        → 100 + 80 = 180, ends 180; r0's first token
    // step 2 @180: r0 decode 1, r1 last chunk 3, r2 prompt 2  → 100 + 60 = 160, ends 340; r1, r2 first tokens
    // step 3 @340: r0, r1, r2 decode 1 each                   → 100 + 30 = 130, ends 470; all done
    expect(run.steps.start_us).toEqual([0, 180, 340]);
    expect(run.steps.end_us).toEqual([180, 340, 470]);
    expect(run.steps.regime).toEqual(['prefill', 'mixed', 'decode']);
    expect(events(run, 'r0')).toEqual({ a: 0, s: 0, e: 180, t: [180, 340, 470] });
    expect(events(run, 'r1')).toEqual({ a: 0, s: 0, e: 340, t: [340, 470] });
    expect(events(run, 'r2')).toEqual({ a: 150, s: 180, e: 340, t: [340, 470] });
    expect(run.steps.tokens_out).toEqual([1, 3, 3]);
    expect(run.preemptions).toBe(0);
  });

  it('KV full: the last running request is preempted (recompute), waits, and recomputes prompt + delivered tokens', () => {
    // 4 blocks of 4 tokens. r0 needs ceil(11/4) = 3 blocks at most, r1 ceil(8/4) = 2: neither is refused.
    const reqs: RequestSpec[] = [
      { id: 'r0', isl: 7, osl: 4, arrival_us: 0 },
      { id: 'r1', isl: 5, osl: 3, arrival_us: 0 },
    ];
    const run = simulateReplica(
      { kind: 'open', requests: reqs },
      linearPricer(),
      config({ max_num_batched_tokens: 16, block_size: 4, kv_blocks: 4 }),
    );
    // step 1 @0:   r0 prompt 7 (2 blocks), r1 prompt 5 (2 blocks)       → 220, ends 220; free 0
    // step 2 @220: r0 decode (8 tokens: 2 blocks), r1 decode (6: 2)     → 120, ends 340
    // step 3 @340: r0 needs a 3rd block: preempt r1 (frees 2); no admission this step → 110, ends 450
    // step 4 @450: r0 decode; r1 (5 + 2 = 7 tokens, 2 blocks) does not fit the 1 free block → 110, ends 560; r0 done
    // step 5 @560: r1 recomputes 7 tokens and delivers its 3rd token     → 170, ends 730
    expect(run.steps.end_us).toEqual([220, 340, 450, 560, 730]);
    expect(events(run, 'r0')).toEqual({ a: 0, s: 0, e: 220, t: [220, 340, 450, 560] });
    expect(events(run, 'r1')).toEqual({ a: 0, s: 0, e: 220, t: [220, 340, 730] });
    expect(byId(run, 'r1').preemptions).toBe(1);
    expect(run.preemptions).toBe(1);
    expect(run.steps.regime).toEqual(['prefill', 'decode', 'decode', 'decode', 'prefill']);
  });

  it('no chunking: a prompt that does not fit the remaining budget waits (decode-first), or runs alone (prefill-first)', () => {
    const reqs: RequestSpec[] = [
      { id: 'r0', isl: 4, osl: 3, arrival_us: 0 },
      { id: 'r1', isl: 6, osl: 2, arrival_us: 0 },
    ];
    const s = { max_num_batched_tokens: 8, chunked_prefill: false };
    const df = simulateReplica({ kind: 'open', requests: reqs }, linearPricer(), config(s));
    // @0: r0 4 (r1's 6 > 4 left: stop) → 140; @140: r0 1 + r1 6 → 170 → 310; @310: 1 + 1 → 120 → 430
    expect(df.steps.end_us).toEqual([140, 310, 430]);
    expect(events(df, 'r0').t).toEqual([140, 310, 430]);
    expect(events(df, 'r1')).toEqual({ a: 0, s: 140, e: 310, t: [310, 430] });
    const pf = simulateReplica(
      { kind: 'open', requests: reqs },
      linearPricer(),
      config({ ...s, priority: 'prefill-first' }),
    );
    // @0: r0 4 → 140; @140: r1 6 alone (a prefill step carries no decode) → 160 → 300; @300: both decode → 120 → 420; @420: r0 → 110 → 530
    expect(pf.steps.end_us).toEqual([140, 300, 420, 530]);
    expect(events(pf, 'r0').t).toEqual([140, 420, 530]);
    expect(events(pf, 'r1')).toEqual({ a: 0, s: 140, e: 300, t: [300, 420] });
    expect(pf.steps.regime).toEqual(['prefill', 'prefill', 'decode', 'decode']);
  });

  it('closed loop: a client issues its next request when the previous one ends; max_num_seqs caps the running set', () => {
    const reqs: RequestSpec[] = [0, 1, 2].map((i) => ({ id: `r${i}`, isl: 2, osl: 2 }));
    const run = simulateReplica(
      { kind: 'closed', concurrency: 2, requests: reqs },
      linearPricer(),
      config({ max_num_seqs: 1 }),
    );
    // one running at a time: r0 @0 prompt 2 → 120, decode → 110 (ends 230); r1 (arrived 0) → 350, 460;
    // r2 issued when r0 ended (230) → 580, 690
    expect(events(run, 'r0')).toEqual({ a: 0, s: 0, e: 120, t: [120, 230] });
    expect(events(run, 'r1')).toEqual({ a: 0, s: 230, e: 350, t: [350, 460] });
    expect(events(run, 'r2')).toEqual({ a: 230, s: 460, e: 580, t: [580, 690] });
  });

  it('speculative decoding: 1 + k positions priced per verification step, 1 + accepted tokens delivered', () => {
    const reqs: RequestSpec[] = [{ id: 'r0', isl: 3, osl: 6, arrival_us: 0, accepted_per_step: 1.5 }];
    const p = linearPricer();
    const run = simulateReplica({ kind: 'open', requests: reqs }, p, config({}, { spec_tokens: 2 }));
    // prefill 3 → 130; verification steps price 3 positions (130 each) and accept floor(j·1.5) − floor((j−1)·1.5) = 1, 2, 1… drafts
    // tokens: 1 (prefill) + 2 + 3 = 6 → two verification steps
    expect(p.calls.map((b) => b.requests[0]!.scheduled_tokens)).toEqual([3, 3, 3]);
    expect(events(run, 'r0').t).toEqual([130, 260, 260, 390, 390, 390]);
    expect(run.steps.decode_positions).toEqual([0, 3, 3]);
  });

  it('refuses a request that could never fit the KV cache, counts it, and serves the rest', () => {
    const reqs: RequestSpec[] = [
      { id: 'big', isl: 60, osl: 10, arrival_us: 0 },
      { id: 'ok', isl: 4, osl: 2, arrival_us: 0 },
    ];
    const run = simulateReplica(
      { kind: 'open', requests: reqs },
      linearPricer(),
      config({ block_size: 4, kv_blocks: 8 }),
    );
    expect(run.refused).toEqual([{ id: 'big', reason: expect.stringMatching(/needs 18 KV blocks .* holds 8/) }]);
    expect(run.requests.map((r) => r.id)).toEqual(['ok']);
  });
});
