import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import type { AttentionDecodeRow, AttentionPrefillRow } from '../../src/measurements/schema.ts';
import { decodeAttentionUs } from '../../src/core/laws/attention.ts';
import { solveLinear } from '../../src/core/numeric/lsq.ts';
import { decodeKvBytes, fitAttentionDecode, fitAttentionPrefill, prefillCausalFlops } from '../../src/fit/attention.ts';
import { seededRandom } from '../../src/core/numeric/resample.ts';
import {
  dampedStep,
  floorLogL1,
  gatherRows,
  irlsFit,
  packedLogL1,
  packRows,
  pairedResampler,
  pairRows,
  readTimes,
  scratchRows,
  searchLogL1,
} from '../../src/fit/attention-decode-law.ts';

const chip = loadChip('h200');
const ctx = (prior: Array<[string, number]> = []) => ({
  chip,
  inputs: [],
  bootstrap: { resamples: 200, seed: 11 },
  prior: new Map(prior),
});

function decodeRows(floor: number, rate: number, window = 0): AttentionDecodeRow[] {
  const rows: AttentionDecodeRow[] = [];
  for (const [n_q, n_kv, head_dim] of [
    [32, 8, 128],
    [64, 8, 128],
    [16, 2, 64],
    [8, 1, 128],
    [40, 4, 64],
  ] as const)
    for (const batch of [1, 4, 16, 64, 256])
      for (const context_tokens of [16, 128, 1024, 8192, 32768]) {
        const r = {
          chip: 'h200',
          lane: 't',
          kernel_source: 'fa3',
          batch,
          context_tokens,
          n_q,
          n_kv,
          head_dim,
          window,
          kv_dtype: 'bf16',
          latency_us: 0,
        };
        const t = floor + decodeKvBytes(r) / rate;
        for (const f of [1.2, 0.8, 1]) rows.push({ ...r, latency_us: t * f });
      }
  return rows;
}

/** Rows generated with the work-item law (core decodeAttentionUs), p = batch × n_kv, ±10% repeats. */
function parallelRows(law: { floor_us: number; rate: number; item_us: number; p_half: number }): AttentionDecodeRow[] {
  const rows: AttentionDecodeRow[] = [];
  for (const [n_q, n_kv, head_dim] of [
    [32, 8, 128],
    [8, 1, 128],
    [16, 2, 64],
    [40, 4, 64],
    [64, 8, 64],
    [12, 1, 256],
    [24, 2, 128],
    [48, 4, 128],
  ] as const)
    for (const batch of [1, 2, 4, 16, 64, 256, 1024])
      for (const context_tokens of [16, 256, 4096, 32768]) {
        const r = { chip: 'h200', lane: 't', kernel_source: 'fa3', batch, context_tokens, n_q, n_kv, head_dim };
        const row = { ...r, window: 0, kv_dtype: 'bf16', latency_us: 0 };
        const t = decodeAttentionUs(law, batch * n_kv, decodeKvBytes(row));
        for (const f of [1.1, 0.9, 1]) rows.push({ ...row, latency_us: t * f });
      }
  return rows;
}

describe('decode attention: work-item law (issue 16)', () => {
  const law = { floor_us: 12, rate: 4e6, item_us: 0.025, p_half: 2.5 };
  it('recovers a known p_half and item cost from generated rows (the parallel candidate)', () => {
    const fit = fitAttentionDecode(parallelRows(law), ctx());
    const r = fit.results[0]!;
    const [staged, joint, parallel] = r.candidates;
    expect(parallel!.method).toBe('parallel');
    expect(parallel!.law.p_half / 2.5).toBeCloseTo(1, 2);
    expect(parallel!.law.item_us / 0.025).toBeCloseTo(1, 2);
    expect(parallel!.law.rate / 4e6).toBeCloseTo(1, 2);
    expect(parallel!.law.floor_us).toBeCloseTo(12, 1);
    // The plain floor + rate candidates cannot follow the item cost: their holdout is worse, so the
    // parallel law is stored (lowest holdout, DECISION in docs/fitting.md) with its work-item entries.
    expect(parallel!.holdout!.geo).toBeLessThan(Math.min(staged!.holdout!.geo, joint!.holdout!.geo));
    expect(r.method).toBe('parallel');
    const entry = (name: string) => fit.coefficients.find((c) => c.name === name)!.entry;
    expect(entry('attention_decode_p_half').value / 2.5).toBeCloseTo(1, 2);
    expect(entry('attention_decode_item_us').value / 0.025).toBeCloseTo(1, 2);
    expect(entry('attention_decode_item_us').units).toBe('us_per_request');
    for (const name of [
      'attention_decode_floor',
      'attention_decode_rate',
      'attention_decode_item_us',
      'attention_decode_p_half',
    ]) {
      const e = entry(name);
      expect(e.ci95![0]).toBeLessThanOrEqual(e.value);
      expect(e.ci95![1]).toBeGreaterThanOrEqual(e.value);
    }
  });

  it('an item cost without a ramp (p_half 0): p_half refitted as exactly 0 and left out of the registry', () => {
    const fit = fitAttentionDecode(parallelRows({ ...law, p_half: 0 }), ctx());
    const r = fit.results[0]!;
    expect(r.method).toBe('parallel');
    expect(r.p_half).toBe(0);
    expect(r.item_us / 0.025).toBeCloseTo(1, 2);
    expect(fit.coefficients.some((c) => c.name === 'attention_decode_p_half')).toBe(false);
    expect(fit.coefficients.find((c) => c.name === 'attention_decode_item_us')!.entry.value / 0.025).toBeCloseTo(1, 2);
  });

  it('the packed objective is the core law row by row; IRLS keeps a left-out term at exactly 0', () => {
    const pts = [1, 3, 9].flatMap((p) => [1e5, 1e7].map((w) => ({ work: w, items: p, latency_us: 10 + w / 3e6 + p })));
    const rows = packRows(pts);
    const byRow = pts.reduce(
      (s, p) => s + Math.abs(Math.log(decodeAttentionUs(law, p.items, p.work) / p.latency_us)),
      0,
    );
    expect(packedLogL1(rows, law)).toBeCloseTo(byRow / pts.length, 12);
    const plain = irlsFit(rows, { floor_us: 10, rate: 1e6, item_us: 0, p_half: 0 });
    expect(plain.item_us).toBe(0);
    expect(plain.p_half).toBe(0);
    expect(plain.objective).toBeCloseTo(packedLogL1(rows, plain), 12);
  });

  it('IRLS with one log and one set of normal-equation sums per (work, items) pair reaches the per-row IRLS optimum', () => {
    // 40 distinct pairs, each measured at 30 latencies (h200 decode: 62k rows over 785 pairs).
    const pts = pairedPoints();
    const rows = packRows(pts);
    for (const from of [
      { floor_us: 10, rate: 1e6, item_us: 0.01, p_half: 1 },
      { floor_us: 10, rate: 1e6, item_us: 0, p_half: 0 },
    ]) {
      // One step: the normal equations are the per-row ones reassociated (per pair, then over the
      // pairs), so the first iterate agrees to rounding.
      const one = irlsFit(rows, from, 1, 2.5e6);
      const oneRef = perRowIrls(pts, from, 1, 2.5e6);
      for (const k of ['floor_us', 'rate', 'item_us', 'p_half'] as const)
        expect(Math.abs(one[k] - oneRef[k])).toBeLessThanOrEqual(1e-12 * Math.abs(oneRef[k]));
      // 40 steps: L1 has a flat valley (30 latencies per pair), so last-bit differences take the two
      // iterations to different points of it; the same objective to 2e-6 and the same law to 0.2 %
      // (docs/fitting.md "Decode attention").
      const got = irlsFit(rows, from, 40, 2.5e6);
      const want = perRowIrls(pts, from, 40, 2.5e6);
      expect(Math.abs(got.objective / want.objective - 1)).toBeLessThan(2e-6);
      for (const k of ['floor_us', 'rate', 'item_us', 'p_half'] as const)
        expect(Math.abs(got[k] - want[k])).toBeLessThanOrEqual(2e-3 * Math.abs(want[k]));
      expect(got.objective).toBeCloseTo(packedLogL1(rows, got), 12);
    }
  });

  it('a paired resample is the gathered rows grouped by pair, bit for bit', () => {
    const pts = pairedPoints();
    const packed = packRows(pts);
    const resample = pairedResampler(packed, 500);
    const rand = seededRandom(5);
    const from = { floor_us: 10, rate: 1e6, item_us: 0.01, p_half: 1 };
    for (let b = 0; b < 5; b++) {
      const idx = Uint32Array.from({ length: 500 }, () => Math.floor(rand() * pts.length));
      const gathered = gatherRows(packed, idx, scratchRows(500));
      const got = resample(idx);
      const want = pairRows(gathered);
      expect([...got.start]).toEqual([...want.start]);
      expect([...got.work]).toEqual([...want.work]);
      expect([...got.items]).toEqual([...want.items]);
      expect([...got.lnLat]).toEqual([...want.lnLat]);
      // Grouped by pair, every drawn row once: the same multiset of ln latencies.
      expect([...got.lnLat].sort()).toEqual([...gathered.lnLat].sort());
      expect(irlsFit(got, from, 25)).toEqual(irlsFit(gathered, from, 25));
    }
  });

  it('the damped IRLS step is solveLinear of the damped normal equations, bit for bit', () => {
    const rand = seededRandom(11);
    const M = new Float64Array(20);
    const d = new Float64Array(4);
    const at = [0, 1, 3, 6, 1, 2, 4, 7, 3, 4, 5, 8, 6, 7, 8, 9];
    for (let t = 0; t < 200; t++) {
      // Entries over 12 orders of magnitude; a NaN pivot now and then (no solution either way).
      const ne = Float64Array.from({ length: 14 }, () => (rand() - 0.3) * 10 ** Math.floor(rand() * 12 - 6));
      if (t % 17 === 0) ne[t % 10] = NaN;
      const lambda = 10 ** Math.floor(rand() * 16 - 9);
      const A = [0, 1, 2, 3].map((u) =>
        [0, 1, 2, 3].map((k) => {
          const v = ne[at[u * 4 + k]!]!;
          return u === k ? v + lambda * (v + 1e-12) : v;
        }),
      );
      const want = solveLinear(
        A,
        [10, 11, 12, 13].map((k) => -ne[k]!),
      );
      const ok = dampedStep(ne, lambda, M, d);
      expect(ok).toBe(want !== undefined);
      if (want) expect([...d].map((v, k) => Object.is(v, want[k]))).toEqual([true, true, true, true]);
    }
  });

  it("the searches' product-of-ratios objective is the per-row log sum, through its flushes and its fallback", () => {
    // 300 rows, ratios pred/meas from e^-40 to e^+40: the running products pass 1e150 every ~9 rows
    // (e^40 ≈ 2.4e17), so the flush path runs many times. Floor 5 µs, rate 2e6 B/µs.
    const pts = Array.from({ length: 300 }, (_, i) => {
      const work = 1e4 * (1 + (i % 17));
      return { work, latency_us: (5 + work / 2e6) * Math.exp(40 * Math.sin(i)) };
    });
    const rows = packRows(pts);
    const byRow = pts.reduce((s, p) => s + Math.abs(Math.log((5 + p.work / 2e6) / p.latency_us)), 0) / pts.length;
    expect(byRow).toBeGreaterThan(20); // mean |40 sin i| ≈ 25.5
    expect(searchLogL1(rows, 5, 2e6) / byRow).toBeCloseTo(1, 13);
    const read = readTimes(rows, 2e6, new Float64Array(2 * pts.length));
    expect(floorLogL1(read, 5) / byRow).toBeCloseTo(1, 13);
    // One ratio of e^400 (beyond the products' range) takes the per-row logs: (400 + 0) / 2.
    const wide = packRows([
      { work: 0, latency_us: 1 },
      { work: 0, latency_us: Math.exp(-400) },
    ]);
    expect(searchLogL1(wide, 1, 1)).toBeCloseTo(200, 10);
  });
});

describe('decode attention', () => {
  it('KV bytes = batch · context · 2 · n_kv · head_dim · bytes(kv_dtype); a window caps the context', () => {
    const r = { batch: 4, context_tokens: 1000, n_kv: 8, head_dim: 128, window: 0, kv_dtype: 'fp8' };
    expect(decodeKvBytes(r)).toBe(4 * 1000 * 2 * 8 * 128 * 1);
    expect(decodeKvBytes({ ...r, window: 256, kv_dtype: 'bf16' })).toBe(4 * 256 * 2 * 8 * 128 * 2);
  });

  it('recovers floor and rate (full and swa) from generated rows with ±20% repeats', () => {
    const fit = fitAttentionDecode([...decodeRows(13, 3.9e6), ...decodeRows(15, 0.9e6, 1024)], ctx());
    expect(fit.refusals).toEqual([]);
    const get = (n: string) => fit.coefficients.find((c) => c.name === n)!.entry;
    expect(get('attention_decode_floor').value).toBeCloseTo(13, 1);
    expect(get('attention_decode_rate').value / 3.9e6).toBeCloseTo(1, 2);
    expect(get('attention_decode_floor_swa').value).toBeCloseTo(15, 1);
    expect(get('attention_decode_rate_swa').value / 0.9e6).toBeCloseTo(1, 2);
    for (const n of ['attention_decode_floor', 'attention_decode_rate']) {
      const e = get(n);
      expect(e.units).toBe(n.includes('floor') ? 'us_per_transfer' : 'bytes_per_us');
      expect(e.ci95![0]).toBeLessThanOrEqual(e.value);
      expect(e.ci95![1]).toBeGreaterThanOrEqual(e.value);
      expect(e.evidence!.holdout_error!.split).toMatch(/head geometry/);
    }
    expect(get('attention_decode_rate_swa').evidence!.holdout_error).toBeUndefined(); // one window width only
    expect(fit.results[0]!.train.geo).toBeLessThan(1.001);
  });

  it('keeps cache-resident working sets out of the rate: rows below L2 that run faster do not move it', () => {
    const rows = decodeRows(13, 3.9e6);
    const l2 = 50 * 1024 * 1024;
    for (const r of rows) {
      const b = decodeKvBytes(r);
      if (b >= l2 / 16 && b < l2) r.latency_us = 13 + b / 1.2e7; // L2-speed reads
    }
    const fit = fitAttentionDecode(rows, ctx());
    const rate = fit.coefficients.find((c) => c.name === 'attention_decode_rate')!.entry.value;
    expect(rate / 3.9e6).toBeCloseTo(1, 2);
    expect(fit.coefficients.find((c) => c.name === 'attention_decode_floor')!.entry.value).toBeCloseTo(13, 1);
    expect(fit.results[0]!.excluded_cache_resident).toBeGreaterThan(0);
  });
});

describe('prefill attention', () => {
  it('causal FLOPs = batch · 4 · (S·C + S²/2) · n_q · head_dim', () => {
    expect(prefillCausalFlops({ batch: 2, new_tokens: 100, prefix_tokens: 50, n_q: 8, head_dim: 64 })).toBe(
      2 * 4 * (100 * 50 + 5000) * 8 * 64,
    );
  });

  it('recovers floor and work_scale given the bf16 ramp', () => {
    const eps = 0.9;
    const mh = 100;
    const peak = 989.5e6;
    const rows: AttentionPrefillRow[] = [];
    for (const [n_q, n_kv, head_dim] of [
      [32, 8, 128],
      [64, 8, 128],
      [16, 2, 64],
      [8, 1, 128],
      [40, 4, 64],
    ] as const)
      for (const batch of [1, 2, 8])
        for (const new_tokens of [16, 256, 2048, 8192]) {
          const r = {
            chip: 'h200',
            lane: 't',
            kernel_source: 'fa3',
            batch,
            new_tokens,
            prefix_tokens: 0,
            n_q,
            n_kv,
            head_dim,
            window: 0,
            dtype: 'bf16',
            kv_dtype: 'bf16',
            latency_us: 0,
          };
          const tokens = batch * new_tokens;
          r.latency_us = 20 + prefillCausalFlops(r) / (peak * ((eps * tokens) / (tokens + mh)) * 0.45);
          rows.push(r);
        }
    const fit = fitAttentionPrefill(
      rows,
      ctx([
        ['gemm_eps_max_bf16', eps],
        ['gemm_m_half_bf16', mh],
      ]),
    );
    expect(fit.refusals).toEqual([]);
    expect(fit.result!.floor_us).toBeCloseTo(20, 1);
    expect(fit.result!.work_scale).toBeCloseTo(0.45, 3);
    const noRamp = fitAttentionPrefill(rows, ctx());
    expect(noRamp.refusals.join()).toMatch(/bf16 GEMM ramp/);
  });

  it('recovers a per-sequence ramp (s_half) and stores it when it wins the holdout (issue 16)', () => {
    const eps = 0.9;
    const peak = 989.5e6;
    const rows: AttentionPrefillRow[] = [];
    for (const [n_q, n_kv, head_dim] of [
      [32, 8, 128],
      [64, 8, 128],
      [16, 2, 64],
      [8, 1, 128],
      [40, 4, 64],
      [24, 4, 128],
    ] as const)
      for (const batch of [1, 8, 64])
        for (const new_tokens of [64, 256, 1024, 4096, 16384]) {
          const r = {
            ...{ chip: 'h200', lane: 't', kernel_source: 'fa3', batch, new_tokens, prefix_tokens: 0 },
            ...{ n_q, n_kv, head_dim, window: 0, dtype: 'bf16', kv_dtype: 'bf16', latency_us: 0 },
          };
          // t = 14 + FLOPs / (peak · eps_max · 0.6 · S/(S + 1000)): the ramp follows S, not batch · S.
          r.latency_us = 14 + prefillCausalFlops(r) / (peak * eps * 0.6 * (new_tokens / (new_tokens + 1000)));
          rows.push(r);
        }
    const fit = fitAttentionPrefill(
      rows,
      ctx([
        ['gemm_eps_max_bf16', eps],
        ['gemm_m_half_bf16', 100],
      ]),
    );
    const r = fit.result!;
    // The per-sequence candidate recovers the truth, wins the holdout and is stored (DECISION, docs/fitting.md).
    const seq = r.candidates[1]!;
    expect(seq.method).toBe('sequence_ramp');
    expect(seq.law.p_half / 1000).toBeCloseTo(1, 2);
    expect(seq.law.rate / 0.6).toBeCloseTo(1, 2);
    expect(seq.law.floor_us).toBeCloseTo(14, 1);
    expect(seq.holdout!.geo).toBeLessThan(r.candidates[0]!.holdout!.geo);
    expect(r.method).toBe('sequence_ramp');
    expect([r.floor_us, r.work_scale, r.s_half]).toEqual([seq.law.floor_us, seq.law.rate, seq.law.p_half]);
    const sHalf = fit.coefficients.find((c) => c.name === 'attention_prefill_s_half')!.entry;
    expect(sHalf.value / 1000).toBeCloseTo(1, 2);
    expect(sHalf.ci95![0]).toBeLessThanOrEqual(sHalf.value);
    expect(sHalf.ci95![1]).toBeGreaterThanOrEqual(sHalf.value);
  });
});

/** 1200 rows over 40 distinct (work, items) pairs, each pair at 30 latencies (±30 % around the law). */
function pairedPoints() {
  return Array.from({ length: 1200 }, (_, i) => {
    const work = 1e5 * (1 + (i % 8)) ** 3;
    const items = 1 + ((i >> 3) % 5) * 7;
    return {
      work,
      items,
      latency_us: (12 + items * 0.02 + (work / 3e6) * (1 + 2 / items)) * Math.exp(0.3 * Math.sin(i * 1.7)),
    };
  });
}

/**
 * The IRLS of src/fit/attention-decode-law.ts evaluated row by row (one log per row, its form before
 * the per-pair terms and sums): the reference whose optimum the packed irlsFit must reach.
 */
function perRowIrls(
  pts: ReadonlyArray<{ work: number; items: number; latency_us: number }>,
  from: { floor_us: number; rate: number; item_us: number; p_half: number },
  iters: number,
  maxRate: number,
) {
  const keep = (v: number, k: number) => (k >= 2 && [from.item_us, from.p_half][k - 2] === 0 ? 0 : Math.exp(v));
  const lawOf = (x: number[]) => ({
    floor_us: keep(x[0]!, 0),
    rate: keep(x[1]!, 1),
    item_us: keep(x[2]!, 2),
    p_half: keep(x[3]!, 3),
  });
  const point = (l: ReturnType<typeof lawOf>) => {
    const A = [0, 1, 2, 3].map(() => [0, 0, 0, 0]);
    const b = [0, 0, 0, 0];
    let obj = 0;
    for (const q of pts) {
      const read = q.work * (1 / l.rate);
      const extra = l.p_half > 0 && q.items > 0 ? (read * l.p_half) / q.items : 0;
      const pred = l.floor_us + q.items * l.item_us + read + extra;
      const r = Math.log(pred) - Math.log(q.latency_us);
      obj += Math.abs(r);
      const w = 1 / (pred * pred * Math.max(Math.abs(r), 1e-4));
      const j = [l.floor_us, -(read + extra), q.items * l.item_us, extra];
      for (let u = 0; u < 4; u++) {
        b[u] = b[u]! + w * r * pred * j[u]!;
        for (let v = 0; v <= u; v++) A[u]![v] = A[u]![v]! + w * j[u]! * j[v]!;
      }
    }
    for (let u = 0; u < 4; u++) for (let v = u + 1; v < 4; v++) A[u]![v] = A[v]![u]!;
    return { objective: obj / pts.length, A, b };
  };
  const cap = (x: number[]) => [x[0]!, Math.min(x[1]!, Math.log(maxRate)), x[2]!, x[3]!];
  let x = cap([from.floor_us, from.rate, Math.max(from.item_us, 1e-9), Math.max(from.p_half, 1e-9)].map(Math.log));
  let law = lawOf(x);
  let at = point(law);
  let lambda = 1e-3;
  for (let it = 0; it < iters && lambda < 1e8; it++) {
    const d = solveLinear(
      at.A.map((row, u) => row.map((v, k) => (u === k ? v + lambda * (v + 1e-12) : v))),
      at.b.map((v) => -v),
    );
    const trial = d ? cap(x.map((v, k) => v + Math.max(-2, Math.min(2, d[k]!)))) : undefined;
    const tAt = trial ? point(lawOf(trial)) : undefined;
    if (tAt && tAt.objective < at.objective) {
      const gain = at.objective - tAt.objective;
      [x, law, at] = [trial!, lawOf(trial!), tAt];
      lambda = Math.max(lambda / 10, 1e-9);
      if (gain < 1e-8) break;
    } else lambda *= 10;
  }
  return { ...law, objective: at.objective };
}
