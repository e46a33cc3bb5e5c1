/** The sparse family (issue 14): its laws, the exact NNLS, recovery of known coefficients, the shipped fit. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import {
  indexKeyBytes,
  mhcBytesPerToken,
  msaDecodeWork,
  msaKvHeads,
  msaPrefillWork,
  msaWeightParams,
  prefillFormUs,
} from '../../src/core/laws/sparse.ts';
import { nnlsRelative, nnlsRelativeRows, relativeSystem } from '../../src/core/numeric/lsq.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { fitSparse, predictRow, SPARSE_LAWS } from '../../src/fit/sparse.ts';
import type { SparseRow } from '../../src/measurements/schema.ts';
import { readMeasurements } from '../../src/measurements/store.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';

const ctx = (chip = 'h200') => ({
  chip: loadChip(chip),
  inputs: [],
  bootstrap: { resamples: 20, seed: 7 },
  prior: new Map<string, number>(),
});

const base: SparseRow = {
  chip: 'h200',
  lane: 'vllm-0.24.0',
  kernel_source: 'k',
  op: 'sparse_attn',
  model: 'm',
  batch: 1,
  query_tokens: 1,
  past_tokens: 0,
  heads: 64,
  head_dim: 512,
  window: 128,
  compress_ratio: 128,
  index_topk: 0,
  hidden: 0,
  hc_mult: 0,
  sites: 1,
  latency_us: 1,
};

describe('sparse laws (core/laws/sparse.ts), hand-worked', () => {
  it('mHC bytes per token: pre = hc·H·2 + H·2, post = H·2 + 2·hc·H·2', () => {
    // V4-Flash, H 4096, hc 4: pre 4·4096·2 + 4096·2 = 32768 + 8192; post 8192 + 2·4·4096·2 = 8192 + 65536.
    expect(mhcBytesPerToken('pre', 4, 4096)).toBe(40960);
    expect(mhcBytesPerToken('post', 4, 4096)).toBe(73728);
  });
  it('an index key is index_head_dim fp8 values plus one fp32 scale (the dataset’s 132 B for 128)', () => {
    expect(indexKeyBytes(128)).toBe(132);
  });
  it('prefill form: fixed + per_request·R + per_token·T + bytes/rate, nothing without a prefill request', () => {
    const f = { fixed_us: 10, per_request_us: 2, per_token_us: 0.5, bytes_per_us: 1000 };
    // 10 + 2·3 + 0.5·100 + 50000/1000 = 10 + 6 + 50 + 50
    expect(prefillFormUs(f, 3, 100, 50000)).toBe(116);
    expect(prefillFormUs(f, 0, 0, 0)).toBe(0);
  });
});

describe('MSA module work (core/laws/sparse.ts), hand-worked on MiniMax-M3 at tp 4', () => {
  // 16 local q heads of 128, 4 kv / 4 index heads → 1 each at tp 4 (max(1, 16 / 16)), hidden 6144, cap 2176.
  const s = {
    heads: 16,
    kv_heads: msaKvHeads(16),
    head_dim: 128,
    hidden: 6144,
    index_heads: 1,
    index_dim: 128,
    cap_tokens: 2176,
  };
  it('kv heads: the collector’s max(1, ⌊heads / 16⌋)', () => {
    expect([msaKvHeads(64), msaKvHeads(16), msaKvHeads(8), msaKvHeads(1)]).toEqual([4, 1, 1, 1]);
  });
  it('weights: 6144·(16·128 + 2·128 + 2·128) + 16·128·6144 = 6144·2560 + 2048·6144 = 28,311,552', () => {
    expect(msaWeightParams(s)).toBe(28_311_552);
  });
  it('decode: 2 requests of 10,000 context read 2176 selected KV tokens and all 10,000 index keys each', () => {
    const w = msaDecodeWork(s, 2, 10_000, 2, 2);
    expect(w.flops).toBe(2 * 28_311_552 * 2);
    // weights 28,311,552·2 B + 2 requests · 2176 tokens · (2·1·128·2 = 512 B)
    expect(w.bytes).toBe(56_623_104 + 2 * 2176 * 512);
    // 2 · 10,000 tokens · 1·128·2 B
    expect(w.index_bytes).toBe(2 * 10_000 * 256);
  });
  it('prefill: projections 2·params per token, attention 4·16·128 per pair, indexer 2·1·128 per pair', () => {
    const w = msaPrefillWork(s, 1, 100, 5050, 5050);
    expect(w.proj_flops).toBe(2 * 28_311_552 * 100);
    expect(w.attn_flops).toBe(8192 * 5050);
    expect(w.index_flops).toBe(256 * 5050);
  });
});

describe('nnlsRelative (core/numeric/lsq.ts)', () => {
  it('recovers exact coefficients of y = 3 + 2x', () => {
    const xs = [1, 2, 5, 10, 40];
    const b = nnlsRelative(
      xs.map((x) => [1, x]),
      xs.map((x) => 3 + 2 * x),
    );
    expect(b[0]).toBeCloseTo(3, 10);
    expect(b[1]).toBeCloseTo(2, 10);
  });
  it('pins a coefficient at 0 rather than going negative (y = 5x with an intercept column)', () => {
    const xs = [1, 2, 4, 8];
    // y = 5x − tiny offset would want a negative intercept; NNLS keeps it at 0 and fits the slope.
    const b = nnlsRelative(
      xs.map((x) => [1, x]),
      xs.map((x) => 5 * x - 0.01),
    );
    expect(b[0]).toBe(0);
    expect(b[1]).toBeGreaterThan(4.9);
  });
});

/** Rows on a grid of batch × past, with the law's own times at known coefficients and ±0.5 % alternating noise. */
function synthetic(op: SparseRow['op'], beta: number[], prefill: boolean): SparseRow[] {
  const spec = SPARSE_LAWS.find((s) =>
    s.rows({ ...base, op, query_tokens: prefill ? 64 : 1, hidden: 4096, hc_mult: 4 }),
  )!;
  const rows: SparseRow[] = [];
  let i = 0;
  for (const batch of [1, 2, 4, 8, 16, 32, 64, 128])
    for (const past of [0, 128, 1024, 4096, 16384, 65536, 262144, 1048576])
      for (const q of prefill ? [16, 64, 256, 1024] : [1]) {
        const r: SparseRow = {
          ...base,
          op,
          batch,
          past_tokens: past,
          query_tokens: op.startsWith('mhc') ? batch * q * 64 : q,
          head_dim: op === 'indexer' ? 128 : 512,
          window: op === 'indexer' ? 0 : 128,
          compress_ratio: op === 'indexer' ? 4 : 128,
          hidden: op.startsWith('mhc') ? 4096 : 0,
          hc_mult: op.startsWith('mhc') ? 4 : 0,
          sites: op.startsWith('mhc') ? 2 : 1,
        };
        const t = predictRow(spec, beta, r) * (i++ % 2 ? 1.005 : 0.995);
        rows.push({ ...r, latency_us: t * r.sites });
      }
  return rows;
}

describe('fitSparse recovers known coefficients', () => {
  const cases: Array<[SparseRow['op'], boolean, number[], string[]]> = [
    ['sparse_attn', false, [12, 1 / 900_000], ['sparse_decode_floor', 'sparse_decode_rate']],
    ['indexer', false, [4, 1 / 5_000_000], ['indexer_decode_floor', 'indexer_decode_rate']],
    [
      'sparse_attn',
      true,
      [15, 1.4, 0.05, 1 / 2_500_000],
      ['sparse_prefill_fixed', 'sparse_prefill_per_request', 'sparse_prefill_per_token', 'sparse_prefill_rate'],
    ],
    ['mhc_pre', false, [9, 1 / 2_300_000], ['mhc_pre_floor', 'mhc_pre_rate']],
  ];
  for (const [op, prefill, beta, names] of cases) {
    it(`${names[0]!.replace(/_[a-z]+$/, '')}: within 3 % of the generating values, ci95 contains them`, () => {
      const f = fitSparse(synthetic(op, beta, prefill), ctx());
      expect(f.refusals).toEqual([]);
      names.forEach((n, j) => {
        const e = f.coefficients.find((c) => c.name === n)!.entry;
        const truth = n.endsWith('_rate') ? 1 / beta[j]! : beta[j]!;
        expect(Math.abs(e.value / truth - 1)).toBeLessThan(0.03);
        expect(e.evidence?.holdout_error?.geo).toBeLessThan(1.03);
      });
    });
  }
});

/** MSA module rows on a heads × batch × past (× isl) grid at the law's own times, ±0.5 % alternating noise. */
function syntheticMsa(beta: number[], prefill: boolean): SparseRow[] {
  const spec = SPARSE_LAWS.find((l) => l.what === (prefill ? 'msa prefill form' : 'msa decode'))!;
  const rows: SparseRow[] = [];
  let i = 0;
  for (const heads of [1, 4, 16, 64, 128])
    for (const batch of prefill ? [1, 2, 4, 8, 32, 64] : [1, 2, 4, 8, 32, 128, 512, 1024])
      for (const past of prefill ? [0, 128] : [1, 127, 1023, 4095, 16383, 65535, 131071])
        for (const q of prefill ? [16, 128, 1024, 4096, 16384] : [1]) {
          const r: SparseRow = {
            ...base,
            op: 'msa',
            heads,
            batch,
            past_tokens: past,
            query_tokens: q,
            head_dim: 128,
            window: 0,
            compress_ratio: 1,
            index_topk: 2176,
            hidden: 6144,
          };
          rows.push({ ...r, latency_us: predictRow(spec, beta, r) * (i++ % 2 ? 1.005 : 0.995) });
        }
  return rows;
}

describe('fitSparse recovers the MSA module laws', () => {
  const cases: Array<[boolean, number[], string[]]> = [
    [
      false,
      [20, 0.03, 1 / 8e8, 1 / 4e6, 1 / 1.2e7],
      [
        'msa_decode_floor',
        'msa_decode_per_request',
        'msa_decode_flop_rate',
        'msa_decode_rate',
        'msa_decode_index_rate',
      ],
    ],
    [
      true,
      [25, 0.4, 0.01, 1 / 7e8, 1 / 2e8, 1 / 3e7],
      [
        'msa_prefill_fixed',
        'msa_prefill_per_request',
        'msa_prefill_per_token',
        'msa_prefill_flop_rate',
        'msa_prefill_attn_rate',
        'msa_prefill_index_rate',
      ],
    ],
  ];
  for (const [prefill, beta, names] of cases) {
    it(`${prefill ? 'prefill' : 'decode'}: within 5 % of the generating values, scoped to minimax-m3`, () => {
      const f = fitSparse(syntheticMsa(beta, prefill), ctx());
      expect(f.refusals).toEqual([]);
      names.forEach((n, j) => {
        const e = f.coefficients.find((c) => c.name === n)!.entry;
        const truth = n.endsWith('_rate') ? 1 / beta[j]! : beta[j]!;
        expect(Math.abs(e.value / truth - 1), n).toBeLessThan(0.05);
        expect(e.evidence?.holdout_error?.geo).toBeLessThan(1.03);
        expect(e.scope.model).toEqual(['minimax-m3']);
      });
    });
  }
});

describe('the shipped fit', () => {
  for (const chip of ['h200', 'b200']) {
    it(`${chip}: refitting measurements/${chip}/sparse.* gives the registry's values; every law has a holdout`, () => {
      const rows = readMeasurements(path.join(REPO_ROOT, 'measurements', chip), 'sparse', { lane: 'vllm-0.24.0' });
      const f = fitSparse(rows, ctx(chip));
      const reg = new Map(
        loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`)).flatMap((s) =>
          s.coefficients.map((c) => [c.name, c.entry] as const),
        ),
      );
      expect(f.coefficients.length).toBe(27);
      for (const c of f.coefficients) {
        expect(reg.get(c.name)?.value, c.name).toBe(c.entry.value);
        expect(c.entry.evidence?.holdout_error?.n).toBeGreaterThan(10);
      }
      // The prefill forms are DeepSeek-V4-Flash's own (the tables' shapes): scoped to that model.
      expect(reg.get('sparse_prefill_rate')?.scope.model).toEqual(['deepseek-v4-flash', 'deepseek-v4-flash-nvfp4']);
      expect(reg.get('sparse_decode_rate')?.scope.model).toBeUndefined();
    });
  }
});

describe('nnlsRelativeRows (issue 17: the bootstrap resamples sum the row terms eight at a time)', () => {
  it('gives nnlsRelative(sys, y, idx) bit for bit, p = 1 … 6, resamples with repeats', () => {
    const rand = seededRandom(31);
    for (let trial = 0; trial < 60; trial++) {
      const p = 1 + (trial % 6);
      const n = 2 * p + Math.floor(rand() * 200);
      const X = Array.from({ length: n }, () =>
        Array.from({ length: p }, (_, j) => (j === 0 ? 1 : rand() * 10 ** (3 * j))),
      );
      const y = X.map((x) => x.reduce((s, v, j) => s + v * 10 ** -(2 * j), 0) * (0.8 + 0.4 * rand()));
      const sys = relativeSystem(X, y);
      const idx = Uint32Array.from({ length: n }, () => Math.floor(rand() * n));
      const want = nnlsRelative(sys, y, idx);
      const got = nnlsRelativeRows(sys, idx);
      expect(got.length).toBe(want.length);
      expect(got.map((v, j) => Object.is(v, want[j]))).toEqual(got.map(() => true));
    }
  });
});
