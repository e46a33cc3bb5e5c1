/**
 * Recurrent-mixer laws and their fitter (issue 14 item 3): the work counts by hand, recovery of known
 * coefficients from generated rows (decode and prefill, each within its ci95), the layer join over kernel
 * slots, and the real h200 tables in plausible bands with their holdouts.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import {
  chunkedScanFlopsPerToken,
  recurrentDecodeBytesPerRow,
  recurrentPrefillFlopsPerToken,
  recurrentStateBytes,
} from '../../src/core/laws/recurrent.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { pointWeightedNormalSums, weightedNormalSums } from '../../src/core/numeric/unrolled.ts';
import { fitRecurrent } from '../../src/fit/recurrent.ts';
import type { FitContext } from '../../src/fit/types.ts';
import type { RecurrentRow } from '../../src/measurements/schema.ts';
import { readMeasurements } from '../../src/measurements/store.ts';

const H200 = loadChip('h200');
const ctx: FitContext = {
  chip: H200,
  inputs: [{ file: 'measurements/h200/recurrent.vllm-0.24.0.csv.gz', sha256: 'c'.repeat(64), lane: 'vllm-0.24.0' }],
  bootstrap: { resamples: 200, seed: 7 },
  prior: new Map(),
};

describe('recurrent work counts by hand', () => {
  it('Qwen3.5-397B GDN at tp 1: 64 state heads of 128 × 128 fp32', () => {
    expect(recurrentStateBytes(64, 128, 128)).toBe(64 * 128 * 128 * 4); // 4,194,304 B
    expect(recurrentDecodeBytesPerRow(64, 128, 128)).toBe(8_388_608);
    expect(recurrentPrefillFlopsPerToken(64, 128, 128)).toBe(4_194_304);
    // 2·64·(256·256 + 2·128·128) = 128 · 98,304 = 12,582,912 FLOPs per token
    expect(chunkedScanFlopsPerToken(64, 128, 128)).toBe(12_582_912);
  });
});

/** Generated GDN rows of one lane from known laws (conv + core kernels per shape), with ±noise. */
function generated(noise: number): RecurrentRow[] {
  const rnd = seededRandom(11);
  const jitter = () => 1 + noise * (2 * rnd() - 1);
  const rows: RecurrentRow[] = [];
  const base = { chip: 'h200', lane: 'vllm-0.24.0', mixer: 'gdn' as const, head_k_dim: 128, head_v_dim: 128 };
  for (const v of [8, 16, 32, 64]) {
    const geo = { ...base, k_heads: v / 4, v_heads: v, conv_channels: 2 * (v / 4) * 128 + v * 128 };
    for (const batch of [1, 2, 4, 8, 16, 32, 64, 128, 256]) {
      const state = batch * recurrentDecodeBytesPerRow(v, 128, 128);
      // decode: floor 5 µs + state bytes at 4e6 B/µs, split 1 : 4 between the conv and the recurrence kernels
      const dec = 5 + state / 4e6;
      const d = { ...geo, phase: 'generation' as const, batch, seq_len: 1, tokens: batch };
      rows.push({ ...d, kernel_source: 'causal_conv1d_update', latency_us: 0.2 * dec * jitter() });
      rows.push({
        ...d,
        kernel_source: 'fused_recurrent_gated_delta_rule_packed_decode',
        latency_us: 0.8 * dec * jitter(),
      });
      for (const seq of [16, 128, 1024, 8192]) {
        const tokens = batch * seq;
        // prefill: floor 15 µs + state at 2e6 B/µs per sequence + 4·v·128·128 FLOPs per token at 6e7 FLOP/µs
        const pre = 15 + state / 2e6 + (tokens * recurrentPrefillFlopsPerToken(v, 128, 128)) / 6e7;
        const p = { ...geo, phase: 'context' as const, batch, seq_len: seq, tokens };
        rows.push({ ...p, kernel_source: 'causal_conv1d_fn', latency_us: 0.3 * pre * jitter() });
        rows.push({ ...p, kernel_source: 'chunk_gated_delta_rule_flashinfer', latency_us: 0.7 * pre * jitter() });
      }
    }
  }
  return rows;
}

const aboveL2 = [8, 16, 32, 64].flatMap((v) =>
  [1, 2, 4, 8, 16, 32, 64, 128, 256].filter((b) => b * recurrentStateBytes(v, 128, 128) > 50 * 2 ** 20),
);

describe('fitter recovers known coefficients', () => {
  it('exact rows: decode floor 5 µs, rate 4e6 B/µs; prefill floor 15 µs, state 2e6 B/µs, rate 6e7 FLOP/µs', () => {
    const f = fitRecurrent(generated(0), ctx);
    const dec = f.data.fits.find((x) => x.mixer === 'gdn' && x.phase === 'decode')!;
    const pre = f.data.fits.find((x) => x.mixer === 'gdn' && x.phase === 'prefill')!;
    // Decode is fitted on states larger than L2 (h200 50 MiB): of 4 head counts × 9 batches, those with
    // batch · v · 128·128·4 B > 52,428,800 B.
    expect(dec.points).toHaveLength(aboveL2.length);
    expect(aboveL2.length).toBe(14);
    expect(dec.coef[0]).toBeCloseTo(5, 6);
    expect(1 / dec.coef[1]!).toBeCloseTo(4e6, -1);
    expect(pre.points).toHaveLength(144);
    expect(pre.coef[0]).toBeCloseTo(15, 6);
    expect(1 / pre.coef[1]!).toBeCloseTo(2e6, -1);
    expect(1 / pre.coef[2]!).toBeCloseTo(6e7, -2);
    expect(pre.train.geo).toBeCloseTo(1, 6);
    const byName = new Map(f.coefficients.map((c) => [c.name, c.entry]));
    expect(byName.get('recurrent_decode_rate_gdn')?.value).toBe(4e6);
    expect(byName.get('recurrent_prefill_state_rate_gdn')?.units).toBe('bytes_per_us');
    expect(byName.get('recurrent_prefill_rate_gdn')?.units).toBe('flops_per_us');
    expect(byName.get('recurrent_prefill_rate_gdn')?.value).toBe(6e7);
  });

  it('±10 % noise: every coefficient within 10 % and inside its bootstrap ci95; holdouts near 1', () => {
    const f = fitRecurrent(generated(0.1), ctx);
    const pre = f.data.fits.find((x) => x.mixer === 'gdn' && x.phase === 'prefill')!;
    const truth = [15, 1 / 2e6, 1 / 6e7];
    pre.coef.forEach((c, j) => {
      expect(Math.abs(c / truth[j]! - 1)).toBeLessThan(0.1);
      expect(pre.ci95[j]![0]).toBeLessThanOrEqual(c);
      expect(pre.ci95[j]![1]).toBeGreaterThanOrEqual(c);
      expect(pre.ci95[j]![0]).toBeLessThan(truth[j]! * 1.1);
      expect(pre.ci95[j]![1]).toBeGreaterThan(truth[j]! * 0.9);
    });
    expect(pre.holdout_batch!.geo).toBeLessThan(1.1);
    expect(pre.holdout_context!.geo).toBeLessThan(1.1);
    const dec = f.data.fits.find((x) => x.phase === 'decode')!;
    expect(dec.holdout_context).toBeUndefined(); // decode work does not depend on context
  });

  it('a shape missing one kernel of the layer is not used (the layer is the sum of its kernels)', () => {
    const rows = generated(0).filter(
      (r) => !(r.phase === 'generation' && r.batch === 256 && r.kernel_source === 'causal_conv1d_update'),
    );
    const dec = fitRecurrent(rows, ctx).data.fits.find((x) => x.phase === 'decode')!;
    expect(dec.points).toHaveLength(aboveL2.length - 4); // batch 256 at each of the 4 head counts
  });

  it('without the scan rows Mamba2 prefill is not fitted (the pricer prices the chunked scan)', () => {
    const rows = generated(0).map((r) => ({ ...r, mixer: 'mamba2' as const }));
    const f = fitRecurrent(rows, ctx);
    expect(f.data.not_fitted).toContainEqual({
      mixer: 'mamba2',
      phase: 'prefill',
      why: 'no shape with every kernel of the layer measured',
    });
  });
});

describe('real h200 tables (vLLM 0.24.0 GDN, vLLM Kimi-K3 preview KDA, TRT-LLM rc20 Mamba2)', () => {
  const dir = path.join(REPO_ROOT, 'measurements', 'h200');
  const rows = ['vllm-0.24.0', 'vllm-0.1.dev19262', 'trtllm-1.3.0rc20'].flatMap((lane) =>
    readMeasurements(dir, 'recurrent', { lane }),
  );
  const f = fitRecurrent(rows, { ...ctx, inputs: [] });
  const get = (m: string, p: string) => f.data.fits.find((x) => x.mixer === m && x.phase === p)!;

  it('GDN decode streams its state at 0.5–1.0 of datasheet HBM; holdout along batch ≤ 1.15', () => {
    const d = get('gdn', 'decode');
    expect(1 / d.coef[1]! / H200.hbm_bytes_per_us).toBeGreaterThan(0.5);
    expect(1 / d.coef[1]! / H200.hbm_bytes_per_us).toBeLessThan(1.0);
    expect(d.holdout_batch!.geo).toBeLessThan(1.15);
  });

  it('KDA prefill (flashkda_fwd) holds out along batch and context within 1.2; GDN prefill within 1.5', () => {
    expect(get('kda', 'prefill').holdout_batch!.geo).toBeLessThan(1.2);
    expect(get('kda', 'prefill').holdout_context!.geo).toBeLessThan(1.2);
    expect(get('gdn', 'prefill').holdout_context!.geo).toBeLessThan(1.5);
  });

  it('Mamba2 on h200: the conv update is fitted, the prefill scan is not measured', () => {
    expect(get('mamba2', 'decode').kernels).toEqual(['causal_conv1d_update']);
    expect(f.data.not_fitted.map((n) => `${n.mixer}/${n.phase}`)).toEqual(['mamba2/prefill']);
  });
});

describe('per-point weights (issue 17: the bootstrap weighs each drawn point once)', () => {
  it('pointWeightedNormalSums equals weightedNormalSums with the weights spread over the draws, bit for bit', () => {
    const rand = seededRandom(23);
    for (let trial = 0; trial < 50; trial++) {
      const k = 1 + (trial % 3);
      const n = 5 + Math.floor(rand() * 60);
      const x = Float64Array.from({ length: n * k }, () => rand() * 10 ** Math.floor(rand() * 6));
      const t = Float64Array.from({ length: n }, () => 1 + rand() * 100);
      const w = Float64Array.from({ length: n }, () => 1 / (rand() + 1e-3));
      const use = Uint32Array.from({ length: n }, () => Math.floor(rand() * n));
      const cols = Int32Array.from([...Array(k).keys()].filter((j) => j === 0 || rand() > 0.3));
      const q = cols.length;
      const [A1, r1, A2, r2] = [q * q, q, q * q, q].map((m) => new Float64Array(m));
      weightedNormalSums(q)(
        x,
        t,
        k,
        use,
        Float64Array.from(use, (u) => w[u]!),
        cols,
        A1!,
        r1!,
      );
      pointWeightedNormalSums(q)(x, t, k, use, w, cols, A2!, r2!);
      expect(Array.from(A2!)).toEqual(Array.from(A1!));
      expect(Array.from(r2!)).toEqual(Array.from(r1!));
    }
  });
});
