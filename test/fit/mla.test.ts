/** The MLA family (issue 13 item 2): the laws by hand, recovery of known coefficients, the import conventions, the shipped fit. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { InputError } from '../../src/core/errors.ts';
import {
  MLA_LATENT_ELEMENTS,
  mlaDecodeUs,
  mlaDecodeUsPerKey,
  mlaWaveDecodeUs,
  mlaWaveProgramsPerRow,
  mlaWaveUsPerKey,
} from '../../src/core/laws/mla.ts';
import { fitMla, mlaEntryBytes, moduleGemm } from '../../src/fit/mla.ts';
import { SPIKE_RATIO, screenSpikes, waveRowUs } from '../../src/fit/mla-kernel.ts';
import { mapMlaTable, collapseMlaRepeats } from '../../src/measurements/mla-import.ts';
import type { MlaRow } from '../../src/measurements/schema.ts';
import type { Cell, RawTable } from '../../src/measurements/table.ts';
import { checkUnits } from '../../src/measurements/units.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';

const ctx = (prior: Array<[string, number]> = []) => ({
  chip: loadChip('h200'),
  inputs: [],
  bootstrap: { resamples: 200, seed: 11 },
  prior: new Map<string, number>(prior),
});

const row = (o: Partial<MlaRow>): MlaRow => ({
  chip: 'h200',
  lane: 'vllm-0.24.0',
  kernel_source: 'FLASHMLA',
  op: 'decode_module',
  gemm_dtype: 'fp8_block',
  kv_dtype: 'fp8',
  heads: 16,
  batch: 1,
  query_tokens: 1,
  past_tokens: 0,
  latency_us: 1,
  ...o,
});

describe('MLA laws (core/laws/mla.ts), hand-worked', () => {
  it('one MLA decode step: floor 13 µs, fp8 cache at 3.2e6 B/µs, 8e-7 µs per head·key, 16 heads, 1 request at 4096 keys', () => {
    // entry = 576 latent elements × 1 B (fp8) = 576 B; per key: 576 / 3.2e6 = 1.8e-4 µs of cache read
    // plus 16 heads × 8e-7 = 1.28e-5 µs of score/value work → 1.928e-4 µs per key.
    // 4096 keys: 4096 × 1.928e-4 = 0.789708… µs; + floor 13 → 13.7897 µs.
    const c = { floor_us: 13, bytes_per_us: 3.2e6, head_token_us: 8e-7 };
    expect(mlaEntryBytes('fp8')).toBe(576);
    expect(mlaEntryBytes('bf16')).toBe(1152);
    expect(mlaDecodeUsPerKey(c, 16, 576)).toBeCloseTo(1.928e-4, 12);
    expect(mlaDecodeUs(c, 4096, 16, 576)).toBeCloseTo(13 + 4096 * 1.928e-4, 9);
    expect(mlaDecodeUs(c, 4096, 16, 576)).toBeCloseTo(13.7897, 4);
  });
});

/** Rows from known module-decode coefficients over a grid, with a seeded ±2 % multiplicative noise. */
function synthetic(beta: number[], noise: number): MlaRow[] {
  let s = 12345;
  const rnd = () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
  const rows: MlaRow[] = [];
  for (const heads of [1, 8, 16, 32, 64, 128])
    for (const batch of [1, 2, 4, 8, 16, 32, 64, 128, 256])
      for (const attended of [2, 16, 128, 1024, 4096, 16384, 65536]) {
        const keys = batch * attended;
        const x = [1, heads, batch, batch * heads, keys * MLA_LATENT_ELEMENTS, keys * heads];
        const t = x.reduce((a, v, j) => a + v * beta[j]!, 0);
        rows.push(row({ heads, batch, past_tokens: attended - 1, latency_us: t * (1 + noise * (2 * rnd() - 1)) }));
      }
  return rows;
}

describe('fitMla recovers known coefficients', () => {
  // floor 40 µs, 0.4 µs per head (weights), 0.1 µs per request, 0.004 µs per request·head,
  // rate 3e6 B/µs (β = 1/3e6), 1e-6 µs per head·key.
  const beta = [40, 0.4, 0.1, 0.004, 1 / 3e6, 1e-6];
  it('module rows of bf16 linear layers only (no fp8_block, the onboarded rtx-pro-6000): fitted on them, with a warning', () => {
    const bf16 = synthetic(beta, 0).map((r) => ({ ...r, gemm_dtype: 'bfloat16' }));
    expect(moduleGemm(bf16, 'decode_module')).toBe('bfloat16');
    // fp8_block present among an op's rows (every curated chip): only fp8_block rows are fitted; bf16 rows beside
    // them are ignored. Each op chooses apart: an fp8_block prefill row does not take the bf16 decode rows away.
    expect(moduleGemm([...bf16, row({})], 'decode_module')).toBe('fp8_block');
    expect(moduleGemm([...bf16, row({ op: 'prefill_module', query_tokens: 16 })], 'decode_module')).toBe('bfloat16');
    expect(moduleGemm([...bf16, row({ op: 'prefill_module', query_tokens: 16 })], 'prefill_module')).toBe('fp8_block');
    const f = fitMla(bf16, ctx());
    expect(f.coefficients.find((c) => c.name === 'mla_decode_rate_fp8kv')!.entry.value / 3e6).toBeCloseTo(1, 4);
    expect(f.warnings.some((w) => w.startsWith('mla: no fp8_block decode_module rows'))).toBe(true);
    expect(fitMla(synthetic(beta, 0), ctx()).warnings.some((w) => w.includes('no fp8_block'))).toBe(false);
  });
  it('exact rows: every coefficient back to 1e-6 relative', () => {
    const f = fitMla(synthetic(beta, 0), ctx());
    const v = new Map(f.coefficients.map((c) => [c.name, c.entry.value]));
    expect(v.get('mla_decode_floor_fp8kv')).toBeCloseTo(40, 3);
    expect(v.get('mla_decode_per_head_fp8kv')).toBeCloseTo(0.4, 5);
    expect(v.get('mla_decode_rate_fp8kv')! / 3e6).toBeCloseTo(1, 4);
    expect(v.get('mla_decode_head_token_fp8kv')! / 1e-6).toBeCloseTo(1, 3);
  });
  it('noisy rows: each known value lies inside its bootstrap ci95, holdout geo near the noise', () => {
    const f = fitMla(synthetic(beta, 0.02), ctx());
    const truth: Record<string, number> = {
      mla_decode_floor_fp8kv: 40,
      mla_decode_per_head_fp8kv: 0.4,
      mla_decode_per_request_fp8kv: 0.1,
      mla_decode_per_request_head_fp8kv: 0.004,
      mla_decode_rate_fp8kv: 3e6,
      mla_decode_head_token_fp8kv: 1e-6,
    };
    for (const [name, want] of Object.entries(truth)) {
      const e = f.coefficients.find((c) => c.name === name)!.entry;
      expect(e.ci95![0], name).toBeLessThanOrEqual(want);
      expect(e.ci95![1], name).toBeGreaterThanOrEqual(want);
    }
    const law = f.mla.find((l) => l.what === 'module decode, fp8 KV')!;
    expect(law.priced).toBe(true);
    expect(law.holdout_geo.all).toBeLessThan(1.02);
    expect(law.holdout_geo.context).toBeLessThan(1.02);
    expect(law.holdout_geo.batch).toBeLessThan(1.02);
  });
});

describe('the decode kernel in waves (mla-kernel.ts; core/laws/mla.ts mlaWaveDecodeUs)', () => {
  const law = { floor_us: 17.3, wave_us: 10, key_us: 0.025, key_head_us: 3e-4, block_heads: 16, splits: 4 };
  it('hand-worked: 16 heads on 108 SMs, one wave to 27 requests, two from 28', () => {
    // One program per (request, 16-head block, split): ceil(16 / 16) · 4 = 4 programs per request.
    // µs per key per wave: 0.025 + min(16, 16) · 3e-4 = 0.0298. At 4096 keys: 10 + 4096 · 0.0298 = 132.0608 µs a wave.
    expect(mlaWaveProgramsPerRow(law, 16)).toBe(4);
    expect(mlaWaveUsPerKey(law, 16)).toBeCloseTo(0.0298, 15);
    // 27 requests = 108 programs = one wave; 28 = 112 programs = two waves (2 · 132.0608 = 264.1216).
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 27, 27 * 4096, 4096)).toBeCloseTo(132.0608, 9);
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 28, 28 * 4096, 4096)).toBeCloseTo(264.1216, 9);
    // Two requests of 4096 and 8192 keys, one wave: as long as its longest program, 10 + 8192 · 0.0298 = 254.1216
    // (the mean 6144 would give 193.0912), so adding the 4096-key request to the 8192 one costs nothing here.
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 2, 12288, 8192)).toBeCloseTo(254.1216, 9);
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 1, 8192, 8192)).toBeCloseTo(254.1216, 9);
    // 56 requests (two waves), 55 at 100 keys and one at 8192: the longest row's wave, 254.1216, beats the two
    // waves at the mean (55 · 100 + 8192) / 56 = 244.5 keys: 2 · (10 + 244.5 · 0.0298) = 34.5722.
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 56, 55 * 100 + 8192, 8192)).toBeCloseTo(254.1216, 9);
    // One request at 2 keys: 10 + 2 · 0.0298 = 10.06 < floor 17.3; 32 heads: two blocks of 16, 8 programs.
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 1, 2, 2)).toBe(17.3);
    expect(mlaWaveProgramsPerRow(law, 32)).toBe(8);
    expect(mlaWaveUsPerKey(law, 2)).toBeCloseTo(0.025 + 2 * 3e-4, 15);
    expect(mlaWaveDecodeUs(17.3, 10, 0.0298, 4, 108, 0, 0, 0)).toBe(0);
  });

  /** a100 kernel rows from known wave laws (heads ≥ 2: block 16, splits 4; one head: splits 2), ±2 % noise. */
  function waveRows(): MlaRow[] {
    let s = 777;
    const rnd = () => {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      return s / 2 ** 31;
    };
    const grouped = { floor_us: 330, wave_us: 10, key_us: 0.025, key_head_us: 3e-4, block_heads: 16, splits: 4 };
    const one = { floor_us: 330, wave_us: 20, key_us: 0.13, key_head_us: 0, block_heads: 1, splits: 2 };
    const rows: MlaRow[] = [];
    for (const heads of [1, 2, 4, 8, 16, 32, 64, 128])
      for (const batch of [1, 2, 4, 8, 16, 32, 64, 128, 256])
        for (const past of [0, 62, 510, 2046, 4094, 16382, 32766, 65534]) {
          const c = heads === 1 ? one : grouped;
          const r = row({
            chip: 'a100',
            op: 'decode_kernel',
            gemm_dtype: '',
            kv_dtype: 'bf16',
            heads,
            batch,
            past_tokens: past,
          });
          rows.push({ ...r, latency_us: waveRowUs(c, r, 108) * (1 + 0.02 * (2 * rnd() - 1)) });
        }
    return rows;
  }
  const a100 = () => ({ ...ctx(), chip: loadChip('a100') });

  it('kernel rows of the linear law (a FlashMLA-like kernel, no waves) keep the linear form: rate and head_token', () => {
    // t = 10 + keys · (1152 / 2e6 + H · 2e-6) over the wave grid's rows: no block/splits quantises it, so the
    // linear form trains better than every wave design and is the one written.
    const rows = waveRows().map((r) => ({
      ...r,
      latency_us: 10 + r.batch * (r.past_tokens + 1) * (1152 / 2e6 + r.heads * 2e-6),
    }));
    const f = fitMla(rows, a100());
    const names = f.coefficients.map((c) => c.name);
    expect(names).toContain('mla_decode_rate');
    expect(names.some((n) => n.startsWith('mla_decode_wave_us'))).toBe(false);
    expect(f.coefficients.find((c) => c.name === 'mla_decode_rate')!.entry.value / 2e6).toBeCloseTo(1, 4);
    const note = f.coefficients.find((c) => c.name === 'mla_decode_rate')!.entry.evidence!.notes!.join(' ');
    expect(note).toMatch(
      /kernel decode form chosen by training geo over the screened rows: waves [0-9.]+, floor \+ keys/,
    );
  });
  it('recovers block 16 and splits 4 (one head: splits 2) and each known value inside its ci95', () => {
    const f = fitMla(waveRows(), a100());
    const e = (name: string) => f.coefficients.find((c) => c.name === name)!.entry;
    expect(e('mla_decode_block_heads').value).toBe(16);
    expect(e('mla_decode_splits').value).toBe(4);
    expect(e('mla_decode_splits_h1').value).toBe(2);
    const truth: Record<string, number> = {
      mla_decode_floor: 330,
      mla_decode_wave_us: 10,
      mla_decode_key_us: 0.025,
      mla_decode_key_head_us: 3e-4,
      mla_decode_floor_h1: 330,
      mla_decode_wave_us_h1: 20,
      mla_decode_key_us_h1: 0.13,
    };
    for (const [name, want] of Object.entries(truth)) {
      expect(e(name).ci95![0], name).toBeLessThanOrEqual(want);
      expect(e(name).ci95![1], name).toBeGreaterThanOrEqual(want);
      expect(Math.abs(e(name).value / want - 1), name).toBeLessThan(0.1);
    }
    const grouped = f.mla.find((l) => l.what.includes('grouped kernel'))!;
    expect(grouped.priced).toBe(true);
    expect(grouped.holdout_geo.all).toBeLessThan(1.02);
    expect(f.refusals.join(' ')).toContain('prefill needs the bf16 GEMM ramp');
  });

  it('a planted timing spike is screened from the fit and counted, and the rows around it are kept', () => {
    const rows = waveRows();
    const i = rows.findIndex((r) => r.heads === 16 && r.batch === 4 && r.past_tokens === 510);
    const spiked = rows.map((r, j) => (j === i ? { ...r, latency_us: r.latency_us * 5 } : r));
    const { kept, screened } = screenSpikes(spiked);
    expect(screened).toEqual([spiked[i]]);
    expect(kept).not.toContain(spiked[i]);
    expect(kept).toHaveLength(rows.length - 1);
    expect(screenSpikes(rows).screened).toEqual([]);
    // Without the screen the spike would sit 5× above the law; the fit's note counts it and the values stay put.
    const f = fitMla(spiked, a100());
    const floor = f.coefficients.find((c) => c.name === 'mla_decode_floor')!.entry;
    expect(floor.evidence!.notes!.join(' ')).toMatch(/timing spikes screened .*: 1 of 576 rows/);
    const key = f.coefficients.find((c) => c.name === 'mla_decode_key_us')!.entry.value;
    expect(Math.abs(key / 0.025 - 1)).toBeLessThan(0.05);
    expect(SPIKE_RATIO).toBe(0.7);
  });
});

describe('fitMla recovers known module-prefill coefficients, the T² projection term included', () => {
  // The bf16 ramp the prefill work is divided by: eps_max 0.9, m_half 20 tokens; h200 bf16 peak 989.5 TFLOP/s
  // = 9.895e8 FLOP/µs. A prompt of s tokens (no cache) has s²/2 query-key pairs (causal), each 640 FLOPs per
  // head, slowed by (s + 20)/s on the ramp: work_µs = B · s²/2 · 640 · H · (s + 20)/s / (9.895e8 · 0.9).
  // For B = 2, s = 1024, H = 16: 2 · 524288 · 640 · 16 = 10 737 418 240 FLOPs, × 1044/1024 = 10 947 133 440,
  // / (9.895e8 · 0.9 = 8.9055e8) = 12.2926 µs at work_scale 1.
  const peak = 9.895e8;
  const work = (B: number, s: number, H: number) => (B * ((s * s) / 2) * 640 * H * ((s + 20) / s)) / (peak * 0.9);
  // floor 90 µs, 0.4 µs per head, 0.07 µs per token, 0.004 µs per token·head, 1.2e-6 µs per token², work_scale 1.1.
  const truth = { floor: 90, head: 0.4, token: 0.07, tokenHead: 0.004, tokenSq: 1.2e-6, scale: 1.1 };
  const rows: MlaRow[] = [];
  for (const heads of [1, 8, 16, 32, 64, 128])
    for (const batch of [1, 2, 4, 8, 16, 32, 64, 128])
      for (const s of [16, 64, 256, 1024, 2048, 4096, 8192, 16384]) {
        const T = batch * s;
        const t =
          truth.floor +
          truth.head * heads +
          truth.token * T +
          truth.tokenHead * T * heads +
          truth.tokenSq * T * T +
          work(batch, s, heads) / truth.scale;
        rows.push(row({ op: 'prefill_module', kv_dtype: 'bf16', heads, batch, query_tokens: s, latency_us: t }));
      }
  it('the hand-worked work term, then every coefficient back from exact rows', () => {
    expect(work(2, 1024, 16)).toBeCloseTo(12.2926, 4);
    const f = fitMla(
      rows,
      ctx([
        ['gemm_eps_max_bf16', 0.9],
        ['gemm_m_half_bf16', 20],
      ]),
    );
    const v = new Map(f.coefficients.map((c) => [c.name, c.entry.value]));
    expect(v.get('mla_prefill_floor')! / truth.floor).toBeCloseTo(1, 4);
    expect(v.get('mla_prefill_per_token')! / truth.token).toBeCloseTo(1, 4);
    expect(v.get('mla_prefill_per_token_head')! / truth.tokenHead).toBeCloseTo(1, 4);
    expect(v.get('mla_prefill_per_token_sq')! / truth.tokenSq).toBeCloseTo(1, 4);
    expect(v.get('mla_prefill_work_scale')! / truth.scale).toBeCloseTo(1, 4);
    const law = f.mla.find((l) => l.what === 'module prefill')!;
    expect(law.priced).toBe(true);
    expect(law.holdout_geo.all).toBeLessThan(1.0001);
  });
  it('rows with no T² cost leave the term at 0, written as not charged', () => {
    const flat = rows.map((r) => {
      const T = r.batch * r.query_tokens;
      return { ...r, latency_us: r.latency_us - truth.tokenSq * T * T };
    });
    const f = fitMla(
      flat,
      ctx([
        ['gemm_eps_max_bf16', 0.9],
        ['gemm_m_half_bf16', 20],
      ]),
    );
    const sq = f.coefficients.find((c) => c.name === 'mla_prefill_per_token_sq')!.entry;
    expect(sq.value).toBeLessThan(1e-12);
    expect(sq.method).toBe('not_charged');
    expect(f.coefficients.find((c) => c.name === 'mla_prefill_work_scale')!.entry.value / truth.scale).toBeCloseTo(
      1,
      4,
    );
  });
});

describe('MLA import conventions (mla-import.ts)', () => {
  const table = (steps: number[], extra: Record<string, Cell[]> = {}): RawTable => ({
    file: 'generation_mla_perf.parquet',
    header: [
      'framework',
      'version',
      'kernel_source',
      'kv_cache_dtype',
      'num_heads',
      'batch_size',
      'isl',
      'step',
      'latency',
      ...Object.keys(extra),
    ],
    rows: steps.map((s, i) => [
      'SGLang',
      '0.5.14',
      'trtllm_mla',
      'fp8',
      16,
      2,
      1,
      s,
      0.05,
      ...Object.values(extra).map((v) => v[i]),
    ]),
  });
  it('SGLang/TRT-LLM decode step = cached tokens (past = step); vLLM step = attended (past = step − 1); ms → µs', () => {
    const cached = mapMlaTable('generation_mla_perf', table([1, 3]), 'b200', 'cached');
    expect(cached.map((r) => r.past_tokens)).toEqual([1, 3]);
    expect(cached[0]!.latency_us).toBe(50);
    expect(cached[0]!.lane).toBe('sglang-0.5.14');
    const attended = mapMlaTable('generation_mla_perf', table([2, 4]), 'h200', 'attended');
    expect(attended.map((r) => r.past_tokens)).toEqual([1, 3]);
  });
  it('a bad cache dtype is refused naming file, row and column', () => {
    const t = table([2]);
    t.rows[0]![3] = 'int4';
    expect(() => mapMlaTable('generation_mla_perf', t, 'h200', 'attended')).toThrow(InputError);
    expect(() => mapMlaTable('generation_mla_perf', t, 'h200', 'attended')).toThrow(
      /row 1.*kv_cache_dtype|kv_cache_dtype.*row 1/s,
    );
  });
  it('repeated keys collapse to their mean (the gb200 SGLang tables keep every key twice)', () => {
    const rows = [row({ latency_us: 10 }), row({ latency_us: 12 }), row({ batch: 2, latency_us: 5 })];
    const c = collapseMlaRepeats(rows);
    expect(c.collapsed).toBe(1);
    expect(c.rows.map((r) => r.latency_us)).toEqual([11, 5]);
  });
  it('a decode table in µs labelled ms is refused by the units check, naming the row and column', () => {
    // 64 requests × 65536 keys × 576 B = 2.4 GB at 800 µs would be 3.0e6 B/µs (63 % of h200 HBM) if ms;
    // read as 0.8 "ms" that was really µs, the implied rate is 1000× the datasheet.
    const rows = [row({ batch: 64, past_tokens: 65535, latency_us: 0.8 })];
    expect(() => checkUnits('mla', rows, loadChip('h200'), 'mla.csv')).toThrow(/row 1.*latency_us.*×1000|check units/s);
  });
});

describe('the shipped MLA fits', () => {
  it('every chip has its decode and prefill law within the 1.15× goal (issue 13; a100 on its kernel tables)', () => {
    for (const chip of ['h200', 'h100', 'b200', 'gb200', 'l40s', 'a100']) {
      const reg = new Map(
        loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`)).flatMap((s) =>
          s.coefficients.map((c) => [c.name, c.entry] as const),
        ),
      );
      // l40s's module tables have no fp8 cache rows (TRITON_MLA, bf16 only).
      // a100 has kernel tables only (bf16 cache): the wave law, one-head law and kernel prefill law.
      const names =
        chip === 'a100'
          ? ['mla_decode_wave_us', 'mla_decode_wave_us_h1', 'mla_prefill_work_scale']
          : ['mla_decode_rate', 'mla_prefill_work_scale', ...(chip === 'l40s' ? [] : ['mla_decode_rate_fp8kv'])];
      for (const name of names) {
        const e = reg.get(name);
        expect(e, `${chip} ${name}`).toBeDefined();
        expect(e!.evidence!.holdout_error!.geo, `${chip} ${name}`).toBeLessThan(1.15);
      }
    }
  });
});
