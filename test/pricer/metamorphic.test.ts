/** Metamorphic relations of the step price (issue 4 "Tests"). */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { loadModel, type ModelGraph } from '../../src/core/catalog/model.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer } from '../../src/pricer/pricer.ts';
import { RESOURCES, type Batch, type Request } from '../../src/pricer/types.ts';
import { inflate, makePricer, resolved, syntheticSets } from './helpers.ts';

const reqArb = fc.record({
  scheduled_tokens: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 3000 })),
  computed_tokens: fc.integer({ min: 0, max: 20000 }),
  prompt_tokens: fc.constant(0),
});
const batchArb = fc.array(reqArb, { minLength: 0, maxLength: 40 });

describe('inflating one coefficient moves only its resource', () => {
  const sets = syntheticSets('h200');
  const cases: Array<[string, string, Partial<Parameters<typeof makePricer>[2]>, Batch]> = [
    ['gemm_eps_max_bf16', 'sm', { tp: 8 }, decodeBatch(16, 2000)],
    ['hbm_derate', 'hbm', { tp: 8 }, decodeBatch(16, 2000)],
    ['attention_decode_rate', 'hbm', { tp: 8 }, decodeBatch(16, 2000)],
    ['attention_prefill_work_scale', 'sm', { tp: 8 }, prefillBatch(2, 1024)],
    ['collective_floor_all_reduce_fp16_8rank_h200', 'nvlink', { tp: 8 }, decodeBatch(16, 2000)],
    ['host_launch_per_kernel', 'host', { tp: 8 }, decodeBatch(16, 2000)],
    ['host_replay_graph_per_step', 'host', { tp: 8 }, decodeBatch(16, 2000)],
  ];
  for (const [name, resource, dep, batch] of cases) {
    it(`${name} → ${resource}`, () => {
      const base = makePricer('llama-3.1-70b', 'h200', dep, sets).price(batch);
      const more = makePricer('llama-3.1-70b', 'h200', dep, inflate(sets, name, 1.5)).price(batch);
      for (const r of RESOURCES) {
        if (r === resource) expect(more.resources_us[r]).not.toBe(base.resources_us[r]);
        else expect(more.resources_us[r]).toBe(base.resources_us[r]);
      }
    });
  }
  it('collective over 16 ranks on H200 (two nodes) moves only NIC', () => {
    const name = 'collective_peak_rate_all_reduce_fp16_16rank_h200';
    const b = decodeBatch(64, 1000);
    const base = makePricer('llama-3.1-70b', 'h200', { tp: 16 }, sets).price(b);
    const more = makePricer('llama-3.1-70b', 'h200', { tp: 16 }, inflate(sets, name, 0.5)).price(b);
    expect(base.resources_us.nvlink).toBe(0);
    expect(base.resources_us.nic).toBeGreaterThan(0);
    expect(more.resources_us.nic).toBeGreaterThan(base.resources_us.nic);
    expect(more.resources_us.sm).toBe(base.resources_us.sm);
  });
});

describe('monotonicity and invariants (fast-check)', () => {
  const pricers = [
    makePricer('llama-3.1-8b', 'h200', {}),
    makePricer('gpt-oss-120b', 'h200', { tp: 4 }),
    makePricer('deepseek-v3', 'h200', { tp: 8, weight_dtype: 'fp8' }),
    makePricer('mixtral-8x7b', 'h100', { tp: 2, ep: 2 }),
    makePricer('llama-3.1-70b', 'h200', { tp: 8, cudagraph_mode: 'NONE' }),
  ];
  it('adding a request never lowers the price; Overlap ≤ NoOverlap; same batch twice is bit-identical', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: pricers.length - 1 }), batchArb, reqArb, (i, reqs, extra) => {
        const p = pricers[i]!;
        const a = p.price({ requests: reqs });
        const b = p.price({ requests: [...reqs, extra as Request] });
        expect(b.no_overlap_us).toBeGreaterThanOrEqual(a.no_overlap_us);
        expect(b.overlap_us).toBeGreaterThanOrEqual(a.overlap_us * (1 - 1e-12));
        expect(a.overlap_us).toBeLessThanOrEqual(a.no_overlap_us);
        expect(p.price({ requests: reqs })).toEqual(a);
        expect(Object.is(p.price({ requests: reqs }).no_overlap_us, a.no_overlap_us)).toBe(true);
      }),
      { numRuns: 150 },
    );
  });

  it('step time never decreases with more prefill tokens, strictly increases from 1 to 2,048', () => {
    for (const p of pricers) {
      let prev = -1;
      for (let t = 1; t <= 2048; t++) {
        const r = p.price(prefillBatch(1, t, 0));
        if (t >= 2) expect(r.no_overlap_us).toBeGreaterThan(prev);
        prev = r.no_overlap_us;
      }
    }
  });

  it('tp = 1 has no collective cost', () => {
    for (const m of ['llama-3.1-8b', 'mixtral-8x7b', 'gpt-oss-120b', 'bloom-176b']) {
      const r = makePricer(m, 'h200', { tp: 1 }).price({
        requests: [...decodeBatch(8, 900).requests, ...prefillBatch(1, 512).requests],
      });
      expect(r.resources_us.nvlink).toBe(0);
      expect(r.resources_us.nic).toBe(0);
    }
  });

  it('a batch past the largest capture runs eager and is never cheaper than captured', () => {
    const small = makePricer('llama-3.1-8b', 'h200', { max_capture_size: 512 });
    const big = makePricer('llama-3.1-8b', 'h200', { max_capture_size: 8192 });
    const b = decodeBatch(600, 1000);
    expect(small.price(b).resources_us.host).toBeGreaterThanOrEqual(big.price(b).resources_us.host);
    // eager here = 7 µs × 32 layers > one replay, so the step costs exactly that more
    expect(small.price(b).resources_us.host - big.price(b).resources_us.host).toBeCloseTo(7 * 32 - 7, 9);
  });

  it('empty batch: host only', () => {
    const r = pricers[0]!.price({ requests: [] });
    expect(r.bottleneck).toBe('host');
    expect(r.no_overlap_us).toBe(r.resources_us.host);
    expect(r.overlap_us).toBe(r.no_overlap_us);
  });
});

describe('graph features', () => {
  it('a window bounds the decode read: mistral-7b (window 4096) costs the same at 8k and 16k context', () => {
    const p = makePricer('mistral-7b', 'h200');
    expect(p.price(decodeBatch(8, 8000)).no_overlap_us).toBe(p.price(decodeBatch(8, 16000)).no_overlap_us);
    const llama = makePricer('llama-3.1-8b', 'h200');
    expect(llama.price(decodeBatch(8, 16000)).no_overlap_us).toBeGreaterThan(
      llama.price(decodeBatch(8, 8000)).no_overlap_us,
    );
  });

  it('a step with no prefill row skips prefill-only nodes (kernels, bytes)', () => {
    const g = structuredClone(loadModel('llama-3.1-8b')) as ModelGraph;
    g.layer_kinds[0]!.nodes.push({ op: 'GEMM', role: 'prefill_extra', n: 4096, k: 4096, phase: 'prefill' });
    const d = defaultDeployment({});
    const sets = syntheticSets('h200');
    const edited = createPricer(loadChip('h200'), g, d, resolved(sets, 'h200', 'llama-3.1-8b', d));
    const plain = makePricer('llama-3.1-8b', 'h200', {}, sets);
    expect(edited.info.kernels_with_prefill - edited.info.kernels_decode_only).toBe(32);
    const dec = decodeBatch(4, 1000);
    expect(edited.price(dec)).toEqual(plain.price(dec));
    const pre = prefillBatch(1, 256);
    expect(edited.price(pre).resources_us.host).toBeCloseTo(plain.price(pre).resources_us.host + 32 * 3.2, 9);
    expect(edited.price(pre).resources_us.hbm).toBeGreaterThan(plain.price(pre).resources_us.hbm);
  });

  it('speculative decoding pays the drafter (deepseek-v3 MTP) and keeps its weights resident', () => {
    const base = makePricer('deepseek-v3', 'h200', { tp: 8, decode_threshold: 2 });
    const spec = makePricer('deepseek-v3', 'h200', { tp: 8, speculative: { num_spec_tokens: 1 } });
    const b = decodeBatch(16, 4000, 2);
    const r0 = base.price(decodeBatch(16, 4000, 2));
    const r1 = spec.price(b, { per_kind: true });
    expect(r1.no_overlap_us).toBeGreaterThan(r0.no_overlap_us);
    expect(r1.per_kind!.some((k) => k.kind === 'drafter:mtp')).toBe(true);
    expect(spec.info.weight_bytes_per_rank).toBeGreaterThan(base.info.weight_bytes_per_rank);
    expect(() => makePricer('llama-3.1-8b', 'h200', { speculative: { num_spec_tokens: 2 } })).toThrow(/no speculator/);
  });

  it('rack-scale NVLink: tp 8 on GB200 (4 GPUs per tray) stays on NVLink; on H100 tp 16 crosses to NIC', () => {
    const gb = makePricer('llama-3.1-70b', 'gb200', { tp: 8 }).price(decodeBatch(8, 1000));
    expect(gb.resources_us.nic).toBe(0);
    expect(gb.resources_us.nvlink).toBeGreaterThan(0);
    const h = makePricer('llama-3.1-70b', 'h100', { tp: 16 }).price(decodeBatch(8, 1000));
    expect(h.resources_us.nvlink).toBe(0);
    expect(h.resources_us.nic).toBeGreaterThan(0);
  });

  it('a collective width with no coefficients is priced with the next measured one and flagged', () => {
    const r = makePricer('llama-3.1-70b', 'h200', { tp: 32 }).price(decodeBatch(8, 1000));
    expect(r.extrapolated).toBe(true);
    expect(r.extrapolation_notes.join(' ')).toMatch(/32 ranks priced with the 16-rank/);
    expect(r.resources_us.nic).toBeGreaterThan(0);
  });

  it('unknown coefficient is a UserError listing the family', () => {
    const sets = syntheticSets('h200').map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => c.name !== 'gemm_eps_max_fp8'),
    }));
    expect(() => makePricer('llama-3.1-8b', 'h200', { weight_dtype: 'fp8' }, sets)).toThrow(
      /gemm_eps_max_fp8.*known gemm_eps_\*: gemm_eps_max_bf16/,
    );
  });
});

describe('sparse attention with an indexer (synthetic graph)', () => {
  it('decode reads window + top-k: cost stops growing past them; the indexer scan keeps growing; both phases price', () => {
    const g = structuredClone(loadModel('deepseek-v3')) as ModelGraph;
    for (const k of g.layer_kinds) {
      const i = k.nodes.findIndex((n) => n.op === 'Attention');
      k.nodes.splice(
        i,
        1,
        { op: 'Attention', kind: 'sparse', n_q: 128, n_kv: 1, d_h: 576, window: 128, index_topk: 2048 },
        { op: 'Attention', kind: 'sparse', role: 'indexer', n_q: 64, n_kv: 1, d_h: 128, compress_ratio: 4 },
      );
    }
    const d = defaultDeployment({ tp: 8 });
    const p = createPricer(loadChip('h200'), g, d, resolved(syntheticSets('h200'), 'h200', 'deepseek-v3', d));
    const a = p.price(decodeBatch(8, 60000)).resources_us.hbm;
    const b = p.price(decodeBatch(8, 120000)).resources_us.hbm;
    expect(b).toBeGreaterThan(a); // the indexer scans the whole compressed stream
    const noIdx = structuredClone(g) as ModelGraph;
    for (const k of noIdx.layer_kinds) k.nodes = k.nodes.filter((n) => n.role !== 'indexer');
    const q = createPricer(loadChip('h200'), noIdx, d, resolved(syntheticSets('h200'), 'h200', 'deepseek-v3', d));
    expect(q.price(decodeBatch(8, 60000)).resources_us.hbm).toBe(q.price(decodeBatch(8, 120000)).resources_us.hbm);
    const pre = p.price(prefillBatch(1, 4096, 8192));
    expect(pre.resources_us.sm).toBeGreaterThan(q.price(prefillBatch(1, 4096, 8192)).resources_us.sm);
  });
});
