/**
 * Hybrid graphs (issue 14 items 3 and 7): recurrent mixers priced on the measured laws (core/laws/recurrent.ts),
 * a hand-worked Qwen3.5 mixed step, the fallbacks (chunked scan, state bytes at HBM, Mamba2's assumed state
 * update), and every new hybrid graph pricing on h200, b200 and gb200 with the shipped registries.
 */
import { describe, expect, it } from 'vitest';
import { loadModel } from '../../src/core/catalog/model.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { parseBatchSpecs } from '../../src/pricer/batch.ts';
import { BLIS_H200, makePricer } from './helpers.ts';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import path from 'node:path';

const h200 = loadRegistryFile(BLIS_H200);

/** Copy of sets with extra primitives entries (value only). */
function withPrimitives(sets: CoefficientSet[], extra: Record<string, number>): CoefficientSet[] {
  return sets.map((s) => {
    if (s.name !== 'cost-model-primitives') return s;
    const base = s.coefficients[0]!.entry;
    const add = Object.entries(extra).map(([name, value]) => ({
      name,
      entry: { ...base, value, ci95: undefined, evidence: undefined },
    }));
    return { ...s, coefficients: [...s.coefficients.filter((c) => !(c.name in extra)), ...add] };
  });
}

const MEASURED = {
  recurrent_decode_floor_gdn: 8,
  recurrent_decode_rate_gdn: 4e6,
  recurrent_prefill_floor_gdn: 15,
  recurrent_prefill_state_rate_gdn: 2e6,
  recurrent_prefill_rate_gdn: 6e7,
};
/** The same entries with the recurrent cost driven to ~0 (no floors, rates 1e30), to isolate the term. */
const FREE = {
  recurrent_decode_rate_gdn: 1e30,
  recurrent_prefill_state_rate_gdn: 1e30,
  recurrent_prefill_rate_gdn: 1e30,
};

describe('Qwen3.5-27B mixed step, hand-worked (h200 fixture registry, tp 2)', () => {
  // Batch: one prefill of 512 new tokens + 8 decode rows at context 4096.
  // Per rank: V = 48 / 2 = 24 GDN heads of 128 × 128 fp32 state; 2·S = 2·24·128·128·4 = 3,145,728 B.
  //   decode  = 8 + 8 · 3,145,728 / 4e6                       = 8 + 6.291456          = 14.291456 µs
  //   prefill = 15 + 1 · 3,145,728 / 2e6 + 512 · 4·24·128·128 / 6e7
  //           = 15 + 1.572864 + 805,306,368 / 6e7              = 15 + 1.572864 + 13.4217728 = 29.9946368 µs
  //   one GDN layer 44.2861 µs; 48 of the 64 layers are GDN (3 of every 4) → 2125.734 µs of SM.
  const batch = parseBatchSpecs(['prefill:1x512', 'decode:8@4096']);
  const d = { tp: 2 };
  const measured = makePricer('qwen3.5-27b', 'h200', d, withPrimitives(h200, MEASURED));
  const free = makePricer('qwen3.5-27b', 'h200', d, withPrimitives(h200, FREE));

  it('the graph: 48 GDN + 16 gated full-attention dense layers', () => {
    const g = loadModel('qwen3.5-27b');
    expect(g.stack).toEqual({ pattern: ['gdn_dense', 'gdn_dense', 'gdn_dense', 'gqa_dense'], repeat: 16 });
    const rec = g.layer_kinds.find((k) => k.id === 'gdn_dense')!.nodes.find((n) => n.op === 'RecurrentUpdate');
    expect(rec).toMatchObject({ recurrent_kind: 'gdn', num_heads: 48, head_dim: 128, state_size: 128 });
    // in_proj_qkvz n = 2·16·128 + 2·48·128 = 16,384; the full-attention q carries its gate: (2·24 + 2·4)·256
    const gdn = g.layer_kinds.find((k) => k.id === 'gdn_dense')!.nodes;
    expect(gdn.find((n) => n.role === 'in_proj_qkvz')).toMatchObject({ n: 16384, k: 5120 });
    const gqa = g.layer_kinds.find((k) => k.id === 'gqa_dense')!.nodes;
    expect(gqa.find((n) => n.role === 'qkv_proj')).toMatchObject({ n: 14336 });
  });

  it('recurrent SM = 48 × (14.291456 + 29.9946368) µs = 2125.734 µs', () => {
    const a = measured.price(batch, { per_kind: true });
    const b = free.price(batch, { per_kind: true });
    const sm = (r: typeof a) => r.per_kind!.find((k) => k.kind === 'gdn_dense')!.resources_us.sm;
    expect(sm(a) - sm(b)).toBeCloseTo(48 * (14.291456 + 29.9946368), 3);
    // the full-attention layers carry no recurrent term
    const gqa = (r: typeof a) => r.per_kind!.find((k) => k.kind === 'gqa_dense')!.resources_us.sm;
    expect(gqa(a)).toBeCloseTo(gqa(b), 9);
    expect(measured.info.assumptions.filter((x) => x.includes('recurrent'))).toEqual([]);
  });

  it('decode only: 8 rows → 48 × 14.291456 µs; prefill only: 48 × 29.9946368 µs', () => {
    const dec = parseBatchSpecs(['decode:8@4096']);
    const pre = parseBatchSpecs(['prefill:1x512']);
    const sm = (p: typeof measured, b: typeof dec) =>
      p.price(b, { per_kind: true }).per_kind!.find((k) => k.kind === 'gdn_dense')!.resources_us.sm;
    expect(sm(measured, dec) - sm(free, dec)).toBeCloseTo(48 * 14.291456, 3);
    expect(sm(measured, pre) - sm(free, pre)).toBeCloseTo(48 * 29.9946368, 3);
  });

  it('without the entries: state bytes at the derated HBM rate and the chunked scan, each noted', () => {
    const p = makePricer('qwen3.5-27b', 'h200', d, h200);
    expect(p.info.assumptions).toContain(
      'no recurrent_decode_rate_gdn: gdn decode priced as its state bytes at the derated HBM rate',
    );
    expect(p.info.assumptions).toContain(
      "no recurrent_prefill_rate_gdn: gdn prefill priced as the chunked scan's arithmetic on the bf16 ramp",
    );
    const r = p.price(parseBatchSpecs(['decode:8@4096']), { per_kind: true });
    const r0 = free.price(parseBatchSpecs(['decode:8@4096']), { per_kind: true });
    const sm = (x: typeof r) => x.per_kind!.find((k) => k.kind === 'gdn_dense')!.resources_us.sm;
    // 8 rows · 3,145,728 B / (4.8e6 · 0.8 B/µs) = 6.5536 µs per layer, no floor
    expect(sm(r) - sm(r0)).toBeCloseTo(48 * 6.5536, 3);
  });

  it('piecewise capture splits at each mixer: 64 mixers + 1 pieces', () => {
    expect(measured.info.piecewise_pieces).toBe(65);
  });
});

describe('every new hybrid graph prices on h200, b200 and gb200 (shipped registries)', () => {
  const models = [
    'qwen3.5-397b-a17b',
    'qwen3.5-397b-a17b-nvfp4',
    'qwen3.5-35b-a3b',
    'qwen3.5-27b',
    'nemotron-h-56b',
    'nemotron-3-nano-30b-a3b',
    'nemotron-3-nano-30b-a3b-nvfp4',
    // latent MoE (moe_latent_size), ModelOpt FP8 / NVFP4
    'nemotron-3-super-120b-a12b-fp8',
    'nemotron-3-super-120b-a12b-nvfp4',
    // sliding-window hybrid (25 of 30 layers), no recurrent mixer
    'gemma-4-26b-a4b',
    'gemma-4-26b-a4b-nvfp4',
  ];
  const batch = parseBatchSpecs(['prefill:1x1024', 'decode:16@2048']);
  for (const chip of ['h200', 'b200', 'gb200'])
    for (const model of models)
      it(`${model} on ${chip} (tp 8)`, () => {
        const sets = loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
        const p = makePricer(model, chip, { tp: 8 }, sets);
        const r = p.price(batch);
        expect(r.no_overlap_us).toBeGreaterThan(r.overlap_us);
        expect(Number.isFinite(r.no_overlap_us)).toBe(true);
        // measured recurrent coefficients on every one of these chips (each fitted from its own tables); Mamba2's
        // state update is the one assumed term, and its prefill scan is measured only on b200 (TRT-LLM rc15)
        const rec = p.info.assumptions.filter((a) => a.includes('recurrent') || a.includes('mamba2'));
        if (!model.startsWith('nemotron')) expect(rec).toEqual([]);
        else {
          expect(rec.some((a) => a.includes('selective_state_update') && a.endsWith('assumed'))).toBe(true);
          expect(rec.some((a) => a.startsWith('no recurrent_prefill_rate_mamba2'))).toBe(chip !== 'b200');
        }
      });
});

describe('Nemotron-3 Ultra (layers_block_type, latent MoE; bf16 / FP8 / NVFP4) prices on h200, b200 and gb200', () => {
  // 550 B parameters: 1.1 TB in bf16, so two nodes (tp 16) hold every format with room for the cache.
  const batch = parseBatchSpecs(['prefill:1x1024', 'decode:16@2048']);
  for (const chip of ['h200', 'b200', 'gb200'])
    for (const model of [
      'nemotron-3-ultra-550b-a55b',
      'nemotron-3-ultra-550b-a55b-fp8',
      'nemotron-3-ultra-550b-a55b-nvfp4',
    ])
      it(`${model} on ${chip} (tp 16)`, () => {
        const sets = loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
        const p = makePricer(model, chip, { tp: 16 }, sets);
        const r = p.price(batch);
        expect(Number.isFinite(r.no_overlap_us)).toBe(true);
        expect(r.no_overlap_us).toBeGreaterThan(r.overlap_us);
        const rec = p.info.assumptions.filter((a) => a.includes('recurrent') || a.includes('mamba2'));
        expect(rec.some((a) => a.includes('selective_state_update') && a.endsWith('assumed'))).toBe(true);
      });
});

describe('Kimi-K3 (KDA + MLA, latent MoE, mxfp4 experts) prices on h200, b200 and gb200 (shipped registries)', () => {
  // 2.7 T routed parameters: 185 GiB per rank at tp 8, so two nodes (tp 16) hold it with room for the cache.
  const batch = parseBatchSpecs(['prefill:1x1024', 'decode:16@2048']);
  for (const chip of ['h200', 'b200', 'gb200'])
    it(`kimi-k3 on ${chip} (tp 16): KDA on its measured law, the experts on the mxfp4 format`, () => {
      const sets = loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
      const p = makePricer('kimi-k3', chip, { tp: 16 }, sets);
      const r = p.price(batch);
      expect(Number.isFinite(r.no_overlap_us)).toBe(true);
      expect(r.no_overlap_us).toBeGreaterThan(r.overlap_us);
      expect(p.info.assumptions.filter((a) => a.includes('recurrent') && a.includes('kda'))).toEqual([]);
      expect(JSON.stringify(p.info.formats)).toContain('mxfp4');
    });
});
