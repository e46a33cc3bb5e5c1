/**
 * MiniMax-M3 (issue 14 item 7): its MSA layers priced as one measured module (core/laws/sparse.ts; docs/pricer.md
 * "MSA"), a hand-worked decode step and prefill step on known coefficients, the module's projections not charged a
 * second time, the fallback without the law, and the graph pricing on h200, b200 and gb200 (shipped registries).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { loadModel } from '../../src/core/catalog/model.ts';
import { SET_NAMES, type CoefficientSet } from '../../src/core/schemas/registry.ts';
import { parseBatchSpecs } from '../../src/pricer/batch.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { makePricer } from './helpers.ts';

const h200 = loadRegistryFile(path.join(REPO_ROOT, 'registry', 'h200.yaml'));

/** Copy of sets with the msa_* entries set to `values` (value only), or removed where `values` is undefined. */
function withMsa(sets: CoefficientSet[], values: Record<string, number> | undefined): CoefficientSet[] {
  return sets.map((s) => {
    if (s.name !== SET_NAMES.attention) return s;
    const msa = s.coefficients.filter((c) => c.name.startsWith('msa_'));
    const rest = s.coefficients.filter((c) => !c.name.startsWith('msa_'));
    if (!values) return { ...s, coefficients: rest };
    const set = msa.map((c) => ({ name: c.name, entry: { ...c.entry, value: values[c.name]! } }));
    return { ...s, coefficients: [...rest, ...set] };
  });
}

const LAW = {
  msa_decode_floor: 20,
  msa_decode_per_request: 0.03,
  msa_decode_flop_rate: 1e9,
  msa_decode_rate: 4e6,
  msa_decode_index_rate: 1.2e7,
  msa_prefill_fixed: 25,
  msa_prefill_per_request: 0.4,
  msa_prefill_per_token: 0.01,
  msa_prefill_flop_rate: 7e8,
  msa_prefill_attn_rate: 2e8,
  msa_prefill_index_rate: 3e7,
};
/** The same law with every term driven to ~0 (no fixed costs, rates 1e30), to isolate the module's time. */
const FREE = Object.fromEntries(
  Object.entries(LAW).map(([k, v]) => [k, k.endsWith('rate') ? 1e30 : 0 * v]),
) as typeof LAW;

describe('MiniMax-M3 graph', () => {
  const g = loadModel('minimax-m3');
  it('3 full-attention dense layers (dense_intermediate_size 12,288), then 57 MSA MoE layers', () => {
    expect(g.stack).toEqual({ prologue: ['gqa_dense', 'gqa_dense', 'gqa_dense'], pattern: ['msa_moe'], repeat: 57 });
    const dense = g.layer_kinds.find((k) => k.id === 'gqa_dense')!.nodes;
    expect(dense.find((n) => n.role === 'mlp_gate_up')).toMatchObject({ n: 24576, k: 6144 });
  });
  it('an MSA layer: qkv + index projection (64 + 2·4)·128 + 2·4·128 = 10,240, the msa node, o_proj', () => {
    const nodes = g.layer_kinds.find((k) => k.id === 'msa_moe')!.nodes;
    expect(nodes.find((n) => n.role === 'qkv_index_proj')).toMatchObject({ n: 10240, k: 6144, msa: true });
    // (16 top-k + 1 local + 0 init) blocks × 128 tokens
    expect(nodes.find((n) => n.op === 'Attention')).toMatchObject({
      kind: 'msa',
      n_q: 64,
      n_kv: 4,
      d_h: 128,
      index_topk: 2176,
      index_heads: 4,
      index_head_dim: 128,
    });
    expect(nodes.find((n) => n.op === 'GroupedGEMM')).toMatchObject({
      experts: 128,
      top_k: 4,
      shared_experts: 1,
      shared_intermediate_size: 3072,
    });
  });
});

describe('the MSA module law in the pricer, hand-worked (h200 registry with known msa_* values, tp 8)', () => {
  // Per rank at tp 8: 8 q heads, 1 KV head, 1 index head (4 / 8 rounded up to one) of 128; hidden 6144.
  // params = 6144·(8·128 + 2·128 + 2·128) + 8·128·6144 = 6144·2560 = 15,728,640; KV 2·128·2 = 512 B per token,
  // index key 128·2 = 256 B per token.
  const d = { tp: 8 };
  const law = makePricer('minimax-m3', 'h200', d, withMsa(h200, LAW));
  const free = makePricer('minimax-m3', 'h200', d, withMsa(h200, FREE));
  /** One MSA layer's resources: the kind's per_kind totals over its 57 layers / 57. */
  const kind = (p: typeof law, spec: string[]) => {
    const r = p.price(parseBatchSpecs(spec), { per_kind: true }).per_kind!.find((k) => k.kind === 'msa_moe')!;
    return { sm: r.resources_us.sm / 57, hbm: r.resources_us.hbm / 57 };
  };

  it('decode 8 rows at 4,000 cached: 31.2670 µs of HBM per MSA layer', () => {
    //   floor 20 + weights 15,728,640·2 / 4e6                 = 20 + 7.86432
    // + 8 decode tokens · (0.03 + 2·15,728,640 / 1e9)        = 8 · 0.06145728 = 0.49165824
    // + 8 · min(4,001, 2,176) · 512 / 4e6                    = 8,912,896 / 4e6 = 2.228224
    // + 8 · 4,001 · 256 / 1.2e7 (the whole index stream)     = 8,194,048 / 1.2e7 = 0.682837333
    const spec = ['decode:8@4000'];
    expect(kind(law, spec).hbm - kind(free, spec).hbm).toBeCloseTo(31.267039573, 5);
    expect(kind(law, spec).sm).toBeCloseTo(kind(free, spec).sm, 9);
  });

  it('prefill 1 × 1,024 (no cache): 96.8688 µs of SM per MSA layer', () => {
    //   fixed 25 + 0.4 · 1 + 1,024 · (0.01 + 2·15,728,640 / 7e8)   = 25.4 + 1,024 · 0.054938971 = 81.657507
    // + selected pairs 1,024² / 2 = 524,288 (continuous form, all under the 2,176 cap) · 4·8·128 / 2e8
    //                                                              = 2,147,483,648 / 2e8 = 10.737418
    // + index pairs 524,288 · 2·1·128 / 3e7                        = 134,217,728 / 3e7 = 4.473924
    const spec = ['prefill:1x1024'];
    expect(kind(law, spec).sm - kind(free, spec).sm).toBeCloseTo(96.868849, 5);
  });

  it('the module’s projections are not priced again: without the law they add SM and weight reads, noted', () => {
    const none = makePricer('minimax-m3', 'h200', d, withMsa(h200, undefined));
    const spec = ['decode:8@4000'];
    expect(none.price(parseBatchSpecs(spec)).extrapolation_notes.join('\n')).toContain(
      'MSA: the module law is incomplete for minimax-m3',
    );
    // with the law (driven to 0) the layer's SM is the router GEMM alone; without it qkv + o_proj run on the ramp
    expect(kind(none, spec).sm).toBeGreaterThan(kind(free, spec).sm);
    // and the 15,728,640 projection weights (2 B each) are read by the weights term, not the module law
    expect(kind(none, spec).hbm).toBeGreaterThan(kind(free, spec).hbm + 31_457_280 / (4.8e6 * 1.01));
  });
});

describe('minimax-m3 prices on h200, b200 and gb200 with the measured MSA law (shipped registries)', () => {
  const batch = parseBatchSpecs(['prefill:1x1024', 'decode:16@2048']);
  for (const chip of ['h200', 'b200', 'gb200'])
    it(`minimax-m3 on ${chip} (tp 8)`, () => {
      const sets = loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
      const p = makePricer('minimax-m3', chip, { tp: 8 }, sets);
      const r = p.price(batch);
      expect(Number.isFinite(r.no_overlap_us)).toBe(true);
      expect(r.no_overlap_us).toBeGreaterThan(r.overlap_us);
      expect(r.extrapolation_notes.filter((a) => a.startsWith('MSA'))).toEqual([]);
    });
});
