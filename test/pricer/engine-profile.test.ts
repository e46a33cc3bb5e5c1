/** Pricing under an engine profile (issue 16): host terms replaced by the profile's, s on SM time. */
import { describe, expect, it } from 'vitest';
import { loadEngineProfile } from '../../src/registry/engine.ts';
import { largeStepNote, withEngineProfile } from '../../src/pricer/engine.ts';
import type { StepPrice } from '../../src/pricer/types.ts';
import { runCli as cli } from '../helpers/cli.ts';

/** 64 MiB: the all-reduce message of 4096 tokens of a hidden-8192 fp16 model (8192 · 2 B per token). */
const MIB64 = 64 * 1024 * 1024;
const term = (value: number) => ({ value, ci95: [value, value] as [number, number], identified: true });

describe('engine profile pricing', () => {
  it('replaces the registry host with the profile law (hand arithmetic)', () => {
    const shipped = loadEngineProfile('splitwise');
    const profile = {
      ...shipped,
      terms: {
        per_step_us: term(1000),
        per_request_step_us: term(100),
        per_step_tp_gt1_us: term(50),
        per_kernel_us: term(2),
        per_step_per_rank_us: term(500),
        large_step_nvlink_factor: term(2),
      },
      large_step_message_bytes: MIB64,
    };
    const price: StepPrice = {
      overlap_us: 9000,
      compute_memory_overlap_us: 10000,
      no_overlap_us: 11000,
      bottleneck: 'hbm',
      resources_us: { sm: 1000, hbm: 8000, nvlink: 1500, nic: 0, host: 500 },
      extrapolated: false,
      extrapolation_notes: [],
    };
    const decode = { requests: [1, 2, 3].map(() => ({ scheduled_tokens: 1, computed_tokens: 99, prompt_tokens: 99 })) };
    const info = { kernels_with_prefill: 900, kernels_decode_only: 700, collective_message_bytes_per_token: 16384 };
    // 1000 + 100·3 + 50·1 + 2·700 + 500·4 = 4750 µs, replacing the registry's 500 µs
    const r = withEngineProfile(price, decode, info, 4, profile);
    expect(r.engine.host_us).toBe(4750);
    expect(r.price.resources_us.host).toBe(4750);
    expect(r.price.no_overlap_us).toBe(11000 - 500 + 4750);
    expect(r.price.compute_memory_overlap_us).toBe(10000 - 500 + 4750);
    expect(r.price.overlap_us).toBe(9000 - 500 + 4750);
    // a prefill row (tokens > 1) switches to the prefill kernel count: + 2 · 200 µs
    const pre = { requests: [{ scheduled_tokens: 512, computed_tokens: 0, prompt_tokens: 512 }] };
    expect(withEngineProfile(price, pre, info, 4, profile).engine.host_us).toBe(1000 + 100 + 50 + 1800 + 2000);
    // the same rows as columns (types.ts ColumnBatch): the same host, row count and prefill switch
    const cols = (s: number[], c: number[]) => ({
      n: s.length,
      scheduled: Float64Array.from(s),
      computed: Float64Array.from(c),
    });
    expect(withEngineProfile(price, cols([1, 1, 1], [99, 99, 99]), info, 4, profile).engine.host_us).toBe(4750);
    expect(withEngineProfile(price, cols([512], [0]), info, 4, profile).engine.host_us).toBe(
      1000 + 100 + 50 + 1800 + 2000,
    );
  });

  it('charges the large-step collective factor as NVLink on steps whose collective message is at least large_step_message_bytes', () => {
    const profile = {
      ...loadEngineProfile('splitwise'),
      terms: {
        per_step_us: term(1000),
        per_request_step_us: term(0),
        per_step_tp_gt1_us: term(0),
        per_kernel_us: term(0),
        per_step_per_rank_us: term(0),
        large_step_nvlink_factor: term(2),
      },
      large_step_message_bytes: MIB64,
    };
    const price: StepPrice = {
      overlap_us: 9000,
      compute_memory_overlap_us: 10000,
      no_overlap_us: 11000,
      bottleneck: 'sm',
      resources_us: { sm: 8000, hbm: 1000, nvlink: 1500, nic: 0, host: 500 },
      extrapolated: false,
      extrapolation_notes: [],
    };
    const info = { kernels_with_prefill: 900, kernels_decode_only: 700, collective_message_bytes_per_token: 16384 };
    const prompts = (n: number, len: number) => ({
      requests: Array.from({ length: n }, () => ({ scheduled_tokens: len, computed_tokens: 0, prompt_tokens: len })),
    });
    // 8 × 512 = 4096 tokens × 16384 B = 64 MiB ≥ 64 MiB: NVLink 1500 + 2 · 1500 = 4500 µs; host 1000 replaces 500:
    // total + (1000 − 500) + 3000
    const big = withEngineProfile(price, prompts(8, 512), info, 8, profile);
    expect(big.price.resources_us.nvlink).toBe(4500);
    expect(big.price.resources_us.host).toBe(1000);
    expect(big.price.compute_memory_overlap_us).toBe(10000 + 500 + 3000);
    expect(big.price.no_overlap_us).toBe(11000 + 500 + 3000);
    // the outcome says so: message, threshold, crossed, the extra (2 · 1500 µs)
    expect(big.engine).toMatchObject({
      message_bytes: MIB64,
      large_step_message_bytes: MIB64,
      large_step_crossed: true,
      large_step_nvlink_extra_us: 3000,
    });
    expect(largeStepNote(big.engine, 2)).toBe(
      "engine splitwise: this step's collective message 64 MiB ≥ 64 MiB: + 3.0 ms NVLink (large_step_nvlink_factor 2 × 1.5 ms priced NVLink), in the nvlink line and every estimate, not in --per-kind",
    );
    // 4095 tokens × 16384 B: one token's message below the threshold, NVLink unchanged
    const small = withEngineProfile(
      price,
      { requests: [...prompts(7, 512).requests, ...prompts(1, 511).requests] },
      info,
      8,
      profile,
    );
    expect(small.price.resources_us.nvlink).toBe(1500);
    expect(small.engine).toMatchObject({
      message_bytes: 4095 * 16384,
      large_step_crossed: false,
      large_step_nvlink_extra_us: 0,
    });
    expect(small.price.compute_memory_overlap_us).toBe(10000 + 500);
    // a model of another hidden size (14336 · 2 B per token, bloom-176b): 2048 tokens = 56 MiB pays
    // nothing, 4096 tokens = 112 MiB pays; the threshold follows bytes, not tokens
    const wide = { ...info, collective_message_bytes_per_token: 28672 };
    expect(withEngineProfile(price, prompts(4, 512), wide, 8, profile).price.resources_us.nvlink).toBe(1500);
    expect(withEngineProfile(price, prompts(8, 512), wide, 8, profile).price.resources_us.nvlink).toBe(4500);
    // and a narrower one (4096 · 2 B): 4096 tokens = 32 MiB pays nothing, 8192 tokens = 64 MiB pays
    const narrow = { ...info, collective_message_bytes_per_token: 8192 };
    expect(withEngineProfile(price, prompts(8, 512), narrow, 8, profile).price.resources_us.nvlink).toBe(1500);
    expect(withEngineProfile(price, prompts(16, 512), narrow, 8, profile).price.resources_us.nvlink).toBe(4500);
    // no threshold stored: the factor applies to no step
    const none = withEngineProfile(price, prompts(8, 512), info, 8, {
      ...profile,
      large_step_message_bytes: undefined,
    });
    expect(none.price.resources_us.nvlink).toBe(1500);
  });

  it('a step beyond the profile training steps carries an extrapolation note (rows of a decode step, tokens of any step)', () => {
    const shipped = loadEngineProfile('splitwise');
    // Splitwise's decode steps are batches of at most 64 requests; its largest step a 16 × 2048 static-batch prefill
    expect(shipped.training_range).toEqual({ max_step_tokens: 32768, max_decode_rows: 64 });
    const price: StepPrice = {
      overlap_us: 9000,
      compute_memory_overlap_us: 10000,
      no_overlap_us: 11000,
      bottleneck: 'hbm',
      resources_us: { sm: 1000, hbm: 8000, nvlink: 1500, nic: 0, host: 500 },
      extrapolated: false,
      extrapolation_notes: [],
    };
    const info = { kernels_with_prefill: 900, kernels_decode_only: 700, collective_message_bytes_per_token: 16384 };
    const decode = (n: number) => ({
      requests: Array.from({ length: n }, () => ({ scheduled_tokens: 1, computed_tokens: 128, prompt_tokens: 128 })),
    });
    const inside = withEngineProfile(price, decode(64), info, 8, shipped).price;
    expect(inside.extrapolated).toBe(false);
    expect(inside.extrapolation_notes).toEqual([]);
    const beyond = withEngineProfile(price, decode(65), info, 8, shipped).price;
    expect(beyond.extrapolated).toBe(true);
    expect(beyond.extrapolation_notes).toEqual([
      'engine profile splitwise: a decode step of 65 rows, beyond its training decode steps (at most 64 rows): host terms and large-step factor extrapolated',
    ]);
    // a prefill row of 32769 tokens: beyond the largest training step, whatever its rows
    const big = { requests: [{ scheduled_tokens: 32769, computed_tokens: 0, prompt_tokens: 32769 }] };
    expect(withEngineProfile(price, big, info, 8, shipped).price.extrapolation_notes).toEqual([
      'engine profile splitwise: the step schedules 32769 tokens, beyond its training steps (at most 32768): host terms and large-step factor extrapolated',
    ]);
    // a profile without a recorded range: no note
    const { training_range: _, ...bare } = shipped;
    expect(withEngineProfile(price, decode(4096), info, 8, bare).price.extrapolated).toBe(false);
  });

  it('price says which engine priced it: the shipped Splitwise profile, or "uncalibrated engine"', async () => {
    const args = ['price', '--model', 'llama-2-70b', '--chip', 'h100', '--tp', '4', '--batch', 'decode:8@1024'];
    const plain = await cli(args);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^uncalibrated engine: registry host terms$/m);
    const withE = await cli([...args, '--engine', 'splitwise', '--json']);
    expect(withE.code).toBe(0);
    const j = JSON.parse(withE.stdout);
    const p = loadEngineProfile('splitwise');
    expect(j.engine).toMatchObject({ name: 'splitwise', composition: p.composition, sm_scale: p.sm_scale.value });
    // decode: 8 tokens × 8192 · 2 B = 128 KiB, far below the 64 MiB threshold: no large-step extra, no note
    expect(j.engine).toMatchObject({
      message_bytes: 8 * 16384,
      large_step_message_bytes: p.large_step_message_bytes,
      large_step_crossed: false,
      large_step_nvlink_extra_us: 0,
    });
    expect(j.notes.join('\n')).not.toMatch(/large_step_nvlink_factor/);
    // decode at tp 4 with 8 requests: per_request · 8 + per_kernel · kernels + per_rank · 4 (+ per_step)
    const t = p.terms;
    const host =
      t.per_step_us.value +
      8 * t.per_request_step_us.value +
      t.per_step_tp_gt1_us.value +
      j.info.kernels_decode_only * t.per_kernel_us.value +
      4 * t.per_step_per_rank_us.value;
    expect(j.price.resources_us.host).toBeCloseTo(host, 6);
    // tp 8 prefill of 4096 tokens: 4096 × 16384 B = 64 MiB reaches the threshold; the extra is the
    // factor × the step's priced NVLink, which is the nvlink line less the extra
    const bigArgs = ['price', '--model', 'llama-2-70b', '--chip', 'h100', '--tp', '8', '--batch', 'prefill:1x4096'];
    const bigE = await cli([...bigArgs, '--engine', 'splitwise', '--json']);
    const jb = JSON.parse(bigE.stdout);
    const factor = p.terms.large_step_nvlink_factor.value;
    expect(jb.engine.message_bytes).toBe(4096 * 16384);
    expect(jb.engine.large_step_crossed).toBe(true);
    const priced_nvlink = jb.price.resources_us.nvlink - jb.engine.large_step_nvlink_extra_us;
    expect(jb.engine.large_step_nvlink_extra_us).toBeCloseTo(factor * priced_nvlink, 6);
    expect(jb.notes.some((n: string) => /collective message 64 MiB ≥ 64 MiB: \+ [0-9.]+ ms NVLink/.test(n))).toBe(true);
    const text = await cli([...bigArgs, '--engine', 'splitwise', '--per-kind']);
    expect(text.stdout).toMatch(
      /large-step collective: \+ [0-9.]+ × priced NVLink on steps whose collective message is ≥ 64 MiB/,
    );
    expect(text.stdout).toMatch(/in the nvlink line and every estimate, not in --per-kind/);
    const missing = await cli([...args, '--engine', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no engine profile registry\/engines\/nope\.yaml; fit one with `stepcal fit engine/);
  });
});
