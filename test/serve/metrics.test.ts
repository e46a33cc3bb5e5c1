/** Metrics of simulated runs worked by hand, the KV capacity arithmetic, and the workload draws. */
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { percentileNearestRank } from '../../src/core/numeric/stats.ts';
import { kvCapacity } from '../../src/serve/kv.ts';
import { dist } from '../../src/serve/metrics.ts';
import { defaultMaxNumBatchedTokens, runServe } from '../../src/serve/run.ts';
import { paretoFront } from '../../src/serve/sweep.ts';
import { dealReplicas, generateRequests, parseLengthDist } from '../../src/serve/workload.ts';
import { config, linearPricer } from './helpers.ts';

describe('serve metrics by hand', () => {
  it('closed loop of 2 clients, ISL 1, OSL 4: window, whole-trace and per-GPU rates', () => {
    // steps (100 + 10·2 = 120 µs each): prefill both, then 3 decodes; running after each: 2, 2, 2, 0
    const reqs = [0, 1].map((i) => ({ id: `r${i}`, isl: 1, osl: 4 }));
    const { metrics: m } = runServe(
      { kind: 'closed', concurrency: 2, requests: reqs },
      linearPricer(),
      config({}, { gpus_per_replica: 4 }),
    );
    expect(m.ttft).toEqual({ n: 2, mean_us: 120, p50_us: 120, p90_us: 120, p99_us: 120 });
    expect(m.itl).toEqual({ n: 6, mean_us: 120, p50_us: 120, p90_us: 120, p99_us: 120 });
    expect(m.e2e.mean_us).toBe(480);
    // whole trace: 8 tokens / 480 µs = 16,666.7/s; total adds the 2 prompt tokens: 10 / 480 µs
    expect(m.whole.output_tokens_per_s).toBeCloseTo(8e6 / 480, 9);
    expect(m.whole.total_tokens_per_s).toBeCloseTo(10e6 / 480, 9);
    // window: endpoints 120, 240, 360 (running = 2); intervals 120, 120; 4 tokens over 240 µs
    expect(m.window!.intervals).toBe(2);
    expect(m.window!.steps_per_s).toBeCloseTo(1e6 / 120, 9);
    expect(m.window!.output_tokens_per_s).toBeCloseTo(4e6 / 240, 9);
    expect(m.per_gpu.output_tokens_per_s).toBeCloseTo(8e6 / 480 / 4, 9);
    expect(m.tokens_per_s_per_user).toBeCloseTo(1e6 / 120, 9);
    expect(m.steps.regime.prefill.steps).toBe(1);
    expect(m.steps.regime.decode.steps).toBe(3);
  });

  it('the closed-loop window asks for min(clients, max_num_seqs, requests) running: 3 clients on 2 seats still get a window', () => {
    // max_num_seqs 2: two run, the third waits; with ISL 1, OSL 4 the pair runs in lockstep (running 2 after steps 1–3)
    const reqs = [0, 1, 2].map((i) => ({ id: `r${i}`, isl: 1, osl: 4 }));
    const { runs, metrics: m } = runServe(
      { kind: 'closed', concurrency: 3, requests: reqs },
      linearPricer(),
      config({ max_num_seqs: 2 }),
    );
    expect(runs[0]!.window_running).toBe(2);
    expect(m.window).not.toBeNull();
    expect(m.window!.rule).toMatch(/min\(clients, max_num_seqs, requests\)/);
  });

  it('dp 2 deals requests round-robin, runs the replicas independently and divides by dp × GPUs per replica', () => {
    const reqs = [0, 1, 2, 3].map((i) => ({ id: `r${i}`, isl: 1, osl: 4, arrival_us: 0 }));
    const one = runServe(
      { kind: 'open', requests: reqs.slice(0, 2) },
      linearPricer(),
      config({}, { gpus_per_replica: 2 }),
    );
    const two = runServe({ kind: 'open', requests: reqs }, linearPricer(), config({}, { dp: 2, gpus_per_replica: 2 }));
    expect(two.runs.map((r) => r.requests.map((q) => q.id))).toEqual([
      ['r0', 'r2'],
      ['r1', 'r3'],
    ]);
    expect(two.metrics.whole.output_tokens_per_s).toBeCloseTo(2 * one.metrics.whole.output_tokens_per_s!, 9);
    expect(two.metrics.per_gpu.output_tokens_per_s).toBeCloseTo(one.metrics.per_gpu.output_tokens_per_s!, 9);
    expect(two.metrics.gpus).toBe(4);
  });

  it('dist: mean and nearest-rank p50/p90/p99 agree with the shared percentile helper', () => {
    const xs = [5, 1, 9, 3, 7, 2, 8, 4, 6, 10, 11];
    const d = dist(xs);
    expect(d.mean_us).toBe(6);
    for (const [p, v] of [
      [0.5, d.p50_us],
      [0.9, d.p90_us],
      [0.99, d.p99_us],
    ] as const)
      expect(v).toBe(percentileNearestRank(xs, p));
    expect(dist([])).toEqual({ n: 0, mean_us: null, p50_us: null, p90_us: null, p99_us: null });
  });

  it('paretoFront keeps the non-dominated points and drops nulls', () => {
    expect(
      paretoFront([
        [1, 5],
        [2, 4],
        [1.5, 3],
        [null, 9],
        [2, 4],
      ]),
    ).toEqual([0, 1, 4]);
  });
});

describe('scheduler defaults', () => {
  it('max_num_batched_tokens follows the chip as the reference records vLLM (§4.9): 16,384 ≥ 160 GiB, 8,192 ≥ 70 GiB but A100, else 2,048', () => {
    const budget = (chip: string) => defaultMaxNumBatchedTokens(loadChip(chip));
    expect(['b200', 'b300', 'gb200', 'h200', 'h100', 'a100', 'l40s'].map(budget)).toEqual([
      16_384, 16_384, 16_384, 8_192, 8_192, 2_048, 2_048,
    ]);
  });
});

describe('KV capacity', () => {
  // 80 layers · K and V · 1 KV head per rank · 128 · 2 B = 40,960 B per token per rank
  it('llama-3.1-70b tp 8 on h200: 40,960 B per token; blocks = ⌊(HBM · 0.9 − weights) / (16 · 40,960)⌋', () => {
    const chip = loadChip('h200');
    const weights = 17_638_096_896;
    const cap = kvCapacity(chip, { weight_bytes_per_rank: weights, kv_bytes_per_token_per_rank: 80 * 2 * 1 * 128 * 2 });
    expect(cap.kv_bytes_per_token).toBe(40_960);
    expect(cap.blocks).toBe(Math.floor((chip.hbm_gib * 2 ** 30 * 0.9 - weights) / (16 * 40_960)));
    expect(cap.tokens).toBe(cap.blocks * 16);
  });

  it('refuses weights that leave no room, naming the figures', () => {
    const info = { weight_bytes_per_rank: 20 * 2 ** 30, kv_bytes_per_token_per_rank: 1000 };
    expect(() => kvCapacity({ name: 'x', hbm_gib: 10 }, info)).toThrow(
      /no room for the KV cache: weights 20.0 GiB per rank vs 9.0 GiB usable on x/,
    );
  });
});

describe('workloads', () => {
  it('length distributions parse and draw within their support; the same seed gives the same requests', () => {
    expect(parseLengthDist('512', 'x')).toEqual({ kind: 'fixed', value: 512 });
    expect(parseLengthDist('uniform:10-20', 'x')).toEqual({ kind: 'uniform', lo: 10, hi: 20 });
    expect(() => parseLengthDist('normal:3', '--isl')).toThrow(/--isl: expected N, fixed:N, uniform:LO-HI or exp:MEAN/);
    const a = generateRequests(500, { kind: 'uniform', lo: 10, hi: 20 }, { kind: 'exponential', mean: 50 }, 3, {
      kind: 'poisson',
      rate_per_s: 10,
    });
    expect(a).toEqual(
      generateRequests(500, { kind: 'uniform', lo: 10, hi: 20 }, { kind: 'exponential', mean: 50 }, 3, {
        kind: 'poisson',
        rate_per_s: 10,
      }),
    );
    expect(a.every((r) => r.isl >= 10 && r.isl <= 20 && r.osl >= 1)).toBe(true);
    // Poisson at 10/s: 499 gaps averaging about 100 ms (a 4-σ band: σ of the mean = 100/√499 ≈ 4.5 ms)
    const meanGap = a[499]!.arrival_us! / 499;
    expect(Math.abs(meanGap - 100_000)).toBeLessThan(4 * 4_500);
    const meanOsl = a.reduce((s, r) => s + r.osl, 0) / a.length;
    expect(Math.abs(meanOsl - 50)).toBeLessThan(4 * (50 / Math.sqrt(500)) + 1);
    const c = generateRequests(3, { kind: 'fixed', value: 8 }, { kind: 'fixed', value: 2 }, 1, {
      kind: 'constant',
      rate_per_s: 4,
    });
    expect(c.map((r) => r.arrival_us)).toEqual([0, 250_000, 500_000]);
  });

  it('dealReplicas splits clients larger shares first; with fewer clients than replicas the rest idle', () => {
    const reqs = generateRequests(5, { kind: 'fixed', value: 8 }, { kind: 'fixed', value: 2 }, 1);
    const shares = (w: ReturnType<typeof dealReplicas>) =>
      w.map((x) => (x.kind === 'closed' ? [x.concurrency, x.requests.length] : []));
    expect(shares(dealReplicas('closed', reqs, 2, 5))).toEqual([
      [3, 3],
      [2, 2],
    ]);
    expect(shares(dealReplicas('closed', reqs, 4, 3))).toEqual([
      [1, 2],
      [1, 2],
      [1, 1],
      [0, 0],
    ]);
  });
});
