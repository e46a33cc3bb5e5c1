/**
 * FLOP accounting (seed ch02 §2.5.1–2.5.2, §2.2.2). Shapes are hand-made from public configs;
 * expected values are hand arithmetic.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { parse as parseYaml } from 'yaml';
import { describe, expect, it } from 'vitest';
import { blockScaledBytesPerValue, SCALED_FORMAT_BYTES_PER_VALUE } from '../../src/core/catalog/dtypes.ts';
import {
  FP8_EQUIVALENT_FLOPS_PER_MAC,
  attendedPairs,
  batchFlops,
  denseFlopsPerTokenPerLayer,
  dominantGemmFormat,
  logitRows,
  mfu,
  referencePeak,
  requestFlops,
  type ComputeFormat,
  type FlopsModel,
} from '../../src/analytics/flops.ts';
import { flopsModelFromGraph, scheduledFromRequest } from '../../src/analytics/flops-graph.ts';
import { parseBatchSpec } from '../../src/pricer/batch.ts';
import { loadModel } from '../../src/core/catalog/model.ts';
import { runCli } from '../helpers/cli.ts';

const FIXTURE = path.join(import.meta.dirname, '..', 'fixtures', 'analytics', 'llama-3.1-8b.flops.yaml');

/** Llama 3.1 8B: 32 layers, hidden 4096, 32 q / 8 kv heads, d_h 128, intermediate 14336, vocab 128,256. */
function llama8b(fmt: ComputeFormat = 'bf16', attFmt: ComputeFormat = 'bf16'): FlopsModel {
  return {
    name: 'llama-3.1-8b',
    hidden_size: 4096,
    vocab_size: 128256,
    layers: [
      {
        id: 'dense',
        count: 32,
        gemms: [
          { role: 'qkv', n: 4096 + 2 * 1024, k: 4096, format: fmt },
          { role: 'o', n: 4096, k: 4096, format: fmt },
          { role: 'gate_up', n: 2 * 14336, k: 4096, format: fmt },
          { role: 'down', n: 4096, k: 14336, format: fmt },
        ],
        attention: [{ n_q: 32, d_h: 128, format: attFmt }],
      },
    ],
    logits: { role: 'lm_head', n: 128256, k: 4096, format: fmt },
    omitted: [],
  };
}

const DENSE_PER_LAYER = 436_207_616; // 2 · (4096·6144 + 4096·4096 + 4096·28672 + 14336·4096)
const HEAD = 1_050_673_152; // 2 · 4096 · 128256

describe('counting main-model work from scheduled (q, k) (chapter Listing 2.6)', () => {
  it('llama-3.1-8b: dense FLOPs per token per layer 436,207,616; head 1,050,673,152', () => {
    const m = llama8b();
    expect(denseFlopsPerTokenPerLayer(m.layers[0]!)).toBe(DENSE_PER_LAYER);
    const c = requestFlops(m, { q: 1, k: 1, is_prompt: false }, 'plain');
    expect(c.logits).toBe(HEAD);
    expect(c.non_attention).toBe(32 * DENSE_PER_LAYER);
    // one query row, one key: 32 layers · 32 heads · (QKᵀ + PV) 2·128 MACs · 2 FLOPs
    expect(c.attention).toBe(32 * 32 * 2 * 128 * 2);
  });

  it('returns (attention, total) with total already including attention: never add them', () => {
    const c = requestFlops(llama8b(), { q: 3, k: 133, is_prompt: false }, 'plain');
    expect(c.total).toBe(c.attention + c.non_attention + c.logits);
    expect(c.total).not.toBe(c.attention + c.non_attention + c.logits + c.attention);
    // chapter Listing 2.4 example: 128 cached + 2 in flight + 3 new → q = 3, k = 133; rows see 131, 132, 133 keys
    expect(attendedPairs(3, 133)).toBe(131 + 132 + 133);
    expect(c.attention).toBe(32 * 32 * 256 * 396 * 2);
    expect(c.logits).toBe(3 * HEAD);
  });

  it('a batch sums per-request pairs, as the scheduler accumulates attn_flops and total_flops', () => {
    const m = llama8b();
    const reqs = parseBatchSpec('decode:4@1024').map(scheduledFromRequest);
    const b = batchFlops(m, reqs, 'plain');
    const one = requestFlops(m, { q: 1, k: 1025, is_prompt: false }, 'plain');
    expect(b.total).toBe(4 * one.total);
    expect(b.attention).toBe(4 * one.attention);
  });

  it('attended pairs: closed form equals brute force, with causal, window and top-k caps', () => {
    fc.assert(
      fc.property(fc.nat(300), fc.nat(300), fc.option(fc.integer({ min: 1, max: 400 })), (a, b, cap) => {
        const q = Math.min(a, b);
        const k = Math.max(a, b);
        const c = cap ?? Infinity;
        let brute = 0;
        for (let i = 0; i < q; i++) brute += Math.min(k - q + i + 1, c);
        return attendedPairs(q, k, c) === brute;
      }),
    );
    expect(attendedPairs(4, 4)).toBe(10); // prompt of 4: 1+2+3+4
    expect(attendedPairs(4, 4, 2)).toBe(1 + 2 + 2 + 2);
    expect(() => attendedPairs(5, 4)).toThrow(/q ≤ k/);
  });

  it('logits: every scheduled row of a decode/verification request, one row of a prompt chunk', () => {
    expect(logitRows({ q: 6, k: 100, is_prompt: false })).toBe(6);
    expect(logitRows({ q: 2048, k: 2048, is_prompt: true })).toBe(1);
  });
});

describe('format-weighted FP8-equivalent accounting (chapter Listing 2.7)', () => {
  it('weights per multiply-add: FP4 1, FP8 2, BF16 4, TF32/FP32 8', () => {
    expect(FP8_EQUIVALENT_FLOPS_PER_MAC).toEqual({ fp4: 1, fp8: 2, bf16: 4, tf32: 8, fp32: 8 });
  });

  it('FP8 work counts the same in both conventions; BF16 twice; FP4 half; FP32 four times', () => {
    const r = { q: 1, k: 1, is_prompt: false };
    const plain = requestFlops(llama8b('fp8', 'fp8'), r, 'plain').total;
    expect(requestFlops(llama8b('fp8', 'fp8'), r, 'fp8-equivalent').total).toBe(plain);
    expect(requestFlops(llama8b('bf16', 'bf16'), r, 'fp8-equivalent').total).toBe(2 * plain);
    expect(requestFlops(llama8b('fp4', 'fp4'), r, 'fp8-equivalent').total).toBe(plain / 2);
    expect(requestFlops(llama8b('fp32', 'fp32'), r, 'fp8-equivalent').total).toBe(4 * plain);
    // mixed: FP8 GEMMs with BF16 attention — only the attention part doubles
    const mixed = requestFlops(llama8b('fp8', 'bf16'), r, 'fp8-equivalent');
    const mixedPlain = requestFlops(llama8b('fp8', 'bf16'), r, 'plain');
    expect(mixed.attention).toBe(2 * mixedPlain.attention);
    expect(mixed.non_attention).toBe(mixedPlain.non_attention);
  });
});

describe('MFU and its reference (chapter §2.5.2)', () => {
  it('MFU = counted FLOP/s / reference FLOP/s, same convention', () => {
    const m = mfu(1e12, 1000, 2e15); // 1 TFLOP in 1 ms = 1 PFLOP/s against 2 PFLOP/s
    expect(m.flops_per_s).toBe(1e15);
    expect(m.mfu).toBe(0.5);
    expect(() => mfu(1, 0, 1)).toThrow(/step time/);
  });

  it('references: FP8-equivalent uses the dense FP8 peak (or 2 × BF16, flagged); plain uses the GEMM format peak', () => {
    const h200 = { bf16: 989.5, fp8: 1979, tf32: 494.7 };
    expect(referencePeak(h200, 'fp8-equivalent', 'bf16').flops_per_s).toBe(1979e12);
    expect(referencePeak(h200, 'plain', 'bf16').flops_per_s).toBe(989.5e12);
    expect(referencePeak(h200, 'plain', 'fp8').flops_per_s).toBe(1979e12);
    const a100 = { bf16: 312 };
    const d = referencePeak(a100, 'fp8-equivalent', 'bf16');
    expect(d.flops_per_s).toBe(624e12);
    expect(d.basis).toMatch(/derived/);
    expect(() => referencePeak(h200, 'plain', 'fp4')).toThrow(/no dense FP4 peak/);
  });

  it('at peak, BF16 work scores the same MFU in both conventions on a chip with FP8 = 2 × BF16', () => {
    const m = llama8b('bf16', 'bf16');
    const r = { q: 1, k: 1, is_prompt: false };
    const plain = requestFlops(m, r, 'plain').total;
    const weighted = requestFlops(m, r, 'fp8-equivalent').total;
    const h = { bf16: 1000, fp8: 2000 };
    const t = (plain / 1000e12) * 1e6; // µs at exactly the BF16 peak
    expect(mfu(plain, t, referencePeak(h, 'plain', 'bf16').flops_per_s).mfu).toBeCloseTo(1, 12);
    expect(mfu(weighted, t, referencePeak(h, 'fp8-equivalent', 'bf16').flops_per_s).mfu).toBeCloseTo(1, 12);
  });
});

describe('bytes per element count block scales (chapter §2.2.2)', () => {
  it('32 one-byte values + one 2-byte scale = 34 B = 1.0625 B/value', () => {
    expect(blockScaledBytesPerValue(8, 32, 2)).toBe(1.0625);
    expect(32 * blockScaledBytesPerValue(8, 32, 2)).toBe(34);
  });
  it("MXFP8 (one 1-byte scale per 32 values): 512 values take 528 B, the chapter's KV layout unit", () => {
    expect(512 * SCALED_FORMAT_BYTES_PER_VALUE.mxfp8!).toBe(528);
    expect(SCALED_FORMAT_BYTES_PER_VALUE.nvfp4).toBe(0.5625);
    expect(SCALED_FORMAT_BYTES_PER_VALUE.mxfp4).toBe(0.53125);
  });
});

describe('shape from a model graph', () => {
  it('the hand-made llama graph gives 436,207,616 FLOPs per token per layer and the 1,050,673,152 head', () => {
    const shape = flopsModelFromGraph(parseYaml(readFileSync(FIXTURE, 'utf8')), FIXTURE);
    expect(shape.layers).toHaveLength(1);
    expect(shape.layers[0]!.count).toBe(32);
    expect(denseFlopsPerTokenPerLayer(shape.layers[0]!)).toBe(DENSE_PER_LAYER);
    const r = { q: 7, k: 900, is_prompt: false };
    expect(requestFlops(shape, r, 'plain')).toEqual(requestFlops(llama8b(), r, 'plain'));
    expect(dominantGemmFormat(shape)).toBe('bf16');
  });

  it('the catalog llama-3.1-8b graph (fused projections, via loadModel) counts the same as the hand-made one', () => {
    const shape = flopsModelFromGraph(loadModel('llama-3.1-8b'), 'llama-3.1-8b');
    const r = { q: 512, k: 1536, is_prompt: true };
    expect(requestFlops(shape, r, 'fp8-equivalent')).toEqual(requestFlops(llama8b(), r, 'fp8-equivalent'));
  });

  it('MoE experts count top_k × 3 matrices plus shared experts; prefill-only nodes skip decode rows; the drafter is left out', () => {
    const g = {
      kind: 'ModelGraph',
      name: 'toy-moe',
      global: { hidden_size: 8, vocab_size: 10, weight_dtype: 'fp8' },
      layer_kinds: [
        {
          id: 'moe',
          nodes: [
            { op: 'Attention', kind: 'swa', n_q: 2, n_kv: 1, d_h: 4, window: 3 },
            { op: 'GEMM', role: 'indexer', n: 5, k: 8, phase: 'prefill' },
            {
              op: 'GroupedGEMM',
              role: 'experts',
              n: 6,
              k: 8,
              experts: 16,
              top_k: 2,
              shared_experts: 1,
              shared_intermediate_size: 4,
              weight_dtype: 'nvfp4',
            },
          ],
        },
      ],
      stack: { prologue: ['moe'], pattern: ['moe'], repeat: 2 },
      head: [{ op: 'GEMM', role: 'lm_head', n: 10, k: 8, weight_dtype: 'bf16' }],
      speculator: { method: 'mtp', num_spec_tokens: 1, stack: { pattern: ['moe'], repeat: 1 } },
    };
    const m = flopsModelFromGraph(g, 'toy');
    expect(m.layers[0]!.count).toBe(3);
    expect(m.omitted).toContain('drafter (mtp)');
    const dec = requestFlops(m, { q: 1, k: 10, is_prompt: false }, 'plain');
    // experts: 2 · 3 · 6 · 8 = 288 MACs + shared 1 · 3 · 4 · 8 = 96 → 384 MACs · 2 · 3 layers
    expect(dec.non_attention).toBe(384 * 2 * 3);
    // window 3: one row sees 3 keys; 2 heads · 2 · 4 MACs each
    expect(dec.attention).toBe(3 * 2 * 2 * 4 * 3 * 2);
    expect(dec.logits).toBe(10 * 8 * 2);
    const pre = requestFlops(m, { q: 1, k: 1, is_prompt: true }, 'plain');
    expect(pre.non_attention).toBe((384 + 40) * 2 * 3);
    // FP8-equivalent: experts in FP4 weigh 1 per MAC, lm_head BF16 4
    const w = requestFlops(m, { q: 1, k: 10, is_prompt: false }, 'fp8-equivalent');
    expect(w.non_attention).toBe(384 * 1 * 3);
    expect(w.logits).toBe(10 * 8 * 4);
  });

  it('graph errors name the source and field', () => {
    expect(() => flopsModelFromGraph({ kind: 'ModelGraph', name: 'x' }, 'g.yaml')).toThrow(/g\.yaml: field "global"/);
    const bad = parseYaml(readFileSync(FIXTURE, 'utf8'));
    bad.global.weight_dtype = 'fp12';
    expect(() => flopsModelFromGraph(bad, 'g.yaml')).toThrow(/g\.yaml: unknown weight dtype "fp12"/);
  });

  it('pricer requests map to (q, k): decode q = 1, k = ctx + 1; a prefill chunk is a prompt row', () => {
    expect(parseBatchSpec('decode:2@1024').map(scheduledFromRequest)).toEqual([
      { q: 1, k: 1025, is_prompt: false },
      { q: 1, k: 1025, is_prompt: false },
    ]);
    expect(parseBatchSpec('prefill:1x2048@512').map(scheduledFromRequest)).toEqual([
      { q: 2048, k: 2560, is_prompt: true },
    ]);
    expect(parseBatchSpec('decode:1x6@100').map(scheduledFromRequest)).toEqual([{ q: 6, k: 106, is_prompt: false }]);
    expect(() => parseBatchSpec('decode:4')).toThrow(/needs its context/);
    expect(() => parseBatchSpec('verify:4')).toThrow(/bad batch spec/);
  });
});

describe('stepcal flops (CLI)', () => {
  it('counts a decode batch from a graph YAML path and states the convention and scope', async () => {
    const r = await runCli(['flops', '--model', FIXTURE, '--batch', 'decode:1@1', '--json']);
    // catalog name resolves through loadModel and gives the same counts
    const byName = JSON.parse(
      (await runCli(['flops', '--model', 'llama-3.1-8b', '--batch', 'decode:1@1', '--json'])).stdout,
    );
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.convention).toBe('plain');
    expect(j.flops.logits).toBe(HEAD);
    expect(j.flops.non_attention).toBe(32 * DENSE_PER_LAYER);
    expect(j.flops.total).toBe(j.flops.attention + j.flops.non_attention + j.flops.logits);
    expect(j.total_includes_attention).toBe(true);
    expect(byName.flops).toEqual(j.flops);
    expect(j.scope).toMatch(/drafter.*padding.*replicas.*excluded/);
    const t = await runCli([
      'flops',
      '--model',
      FIXTURE,
      '--batch',
      'decode:1@1',
      '--format-weighted',
      '--chip',
      'h200',
      '--step-us',
      '1000',
    ]);
    expect(t.stdout).toMatch(/FP8-equivalent FLOPs/);
    expect(t.stdout).toMatch(/never add the two/);
    expect(t.stdout).toMatch(/MFU = .*h200 dense FP8 peak.*fp8-equivalent FLOPs/);
  });

  it('MFU needs both a step time and a reference (a usage error); bad specs are user errors', async () => {
    expect((await runCli(['flops', '--model', FIXTURE, '--batch', 'decode:1@1', '--chip', 'h200'])).code).toBe(2);
    expect((await runCli(['flops', '--model', FIXTURE, '--batch', 'decode:1@1', '--step-us', '100'])).code).toBe(2);
    const bad = await runCli(['flops', '--model', FIXTURE, '--batch', 'decode:x']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/bad batch spec/);
    expect((await runCli(['flops', '--model', 'no-such-model', '--batch', 'decode:1@1'])).code).toBe(1);
  });
});
