/**
 * DeepSeek-V4 on the measured registry (issue 14): a hand-worked decode step, the capture-break host rule,
 * mHC in place of the graph's bytes and mixing GEMM, and the model's own prefill form.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { loadModel, type ModelGraph } from '../../src/core/catalog/model.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer } from '../../src/pricer/pricer.ts';
import type { Deployment } from '../../src/pricer/types.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { resolved } from './helpers.ts';

const h200 = loadRegistryFile(path.join(REPO_ROOT, 'registry', 'h200.yaml'));
const entry = (name: string) => h200.flatMap((s) => s.coefficients).find((c) => c.name === name)?.entry;
const value = (name: string) => entry(name)!.value;

function pricer(g: ModelGraph, d: Partial<Deployment> = {}) {
  const dep = defaultDeployment({ tp: 8, kv_dtype: 'fp8', ...d });
  return createPricer(loadChip('h200'), g, dep, resolved(h200, 'h200', g.name, dep));
}

/** The graph without its sparse attention, indexers and mHC halves (to isolate their terms). */
function without(g: ModelGraph, drop: (n: ModelGraph['layer_kinds'][number]['nodes'][number]) => boolean): ModelGraph {
  const c = structuredClone(g);
  for (const k of c.layer_kinds) k.nodes = k.nodes.filter((n) => !drop(n));
  return c;
}

describe('deepseek-v4-flash, h200, tp 8, fp8 KV: one decode request at context 4096 (hand-worked)', () => {
  const g = loadModel('deepseek-v4-flash');
  it('the registry holds the coefficients the hand arithmetic uses', () => {
    expect([value('sparse_decode_floor'), value('sparse_decode_rate')]).toEqual([12.06, 852100]);
    expect([value('indexer_decode_floor'), value('indexer_decode_rate')]).toEqual([4.354, 5900000]);
    expect([value('mhc_pre_floor'), value('mhc_pre_rate'), value('mhc_post_floor'), value('mhc_post_rate')]).toEqual([
      8.802, 2273000, 2.685, 4274000,
    ]);
  });
  it('HBM of the sparse attention, indexer and mHC terms', () => {
    const batch = decodeBatch(1, 4095); // one row: 4095 cached + 1 scheduled = context 4096
    const sparse = (n: { op: string; kind?: string }) => n.op === 'Attention' && n.kind === 'sparse';
    const mhc = (n: { mhc?: string; op: string }) => n.op === 'Elementwise' && n.mhc !== undefined;
    const full = pricer(g).price(batch).resources_us.hbm;
    const noSparse = pricer(without(g, sparse)).price(batch).resources_us.hbm;
    const noMhc = pricer(without(g, mhc)).price(batch).resources_us.hbm;
    // CSA layer (21): window 128 + min(4096/4 = 1024, top-k 512) = 640 latent entries of 512 fp8 bytes;
    //   indexer: 4096/4 = 1024 index keys of 128 + 4 bytes.
    const csa = 12.06 + (640 * 512) / 852100 + (4.354 + (1024 * 132) / 5900000);
    // HCA layer (20): window 128 + the whole 4096/128 = 32 compressed entries, no selection.
    const hca = 12.06 + (160 * 512) / 852100;
    expect(noSparse).toBeCloseTo(full - (21 * csa + 20 * hca), 6);
    // mHC, 43 layers × 2 sites, one token: pre 8.802 + (4·4096·2 + 4096·2) / 2273000, post 2.685 + (4096·2 + 2·4·4096·2) / 4274000.
    const site = 8.802 + 40960 / 2273000 + 2.685 + 73728 / 4274000;
    expect(noMhc).toBeCloseTo(full - 43 * 2 * site, 6);
    // 21·(12.06 + 0.38459 + 4.354 + 0.02291) + 20·(12.06 + 0.09614) + 86·(11.487 + 0.03527) ≈ 353.2 + 243.1 + 990.9
    expect(full - noSparse + (full - noMhc)).toBeCloseTo(1587.2, 0);
  });
  it('measured mHC replaces its mixing GEMM: removing the GEMMs changes nothing', () => {
    const batch = decodeBatch(4, 2047);
    const noMix = without(g, (n) => n.op === 'GEMM' && n.mhc !== undefined);
    expect(pricer(noMix).price(batch).resources_us).toEqual(pricer(g).price(batch).resources_us);
  });
});

describe('the seed’s capture-break host rule on deepseek-v4-flash (43 layers, 21 with an indexer)', () => {
  const g = loadModel('deepseek-v4-flash');
  const unbroken = structuredClone(g);
  for (const k of unbroken.layer_kinds) for (const n of k.nodes) if (n.op === 'Attention') delete n.capture_break;
  it('piecewise: one replay per captured region (44 pieces), not per attention and indexer (65)', () => {
    expect(pricer(g, { cudagraph_mode: 'PIECEWISE' }).info.piecewise_pieces).toBe(44);
    expect(pricer(unbroken, { cudagraph_mode: 'PIECEWISE' }).info.piecewise_pieces).toBe(65);
    const batch = decodeBatch(8, 4095);
    // One replay per piece: host_replay_graph_per_node, or the per-step replay where the registry has none.
    const piece = entry('host_replay_graph_per_node')?.value ?? value('host_replay_graph_per_step');
    const dHost =
      pricer(unbroken, { cudagraph_mode: 'PIECEWISE' }).price(batch).resources_us.host -
      pricer(g, { cudagraph_mode: 'PIECEWISE' }).price(batch).resources_us.host;
    expect(dHost).toBeCloseTo(21 * piece, 9);
  });
  it('full capture is unaffected: one replay either way', () => {
    const batch = decodeBatch(8, 4095);
    expect(pricer(g, { cudagraph_mode: 'FULL' }).price(batch).resources_us.host).toBe(
      pricer(unbroken, { cudagraph_mode: 'FULL' }).price(batch).resources_us.host,
    );
  });
});

describe('the model’s own prefill form (scoped to deepseek-v4-flash)', () => {
  it('V4-Flash prices prefill with its form; V4-Pro falls back with a note naming the missing terms', () => {
    const flash = pricer(loadModel('deepseek-v4-flash'));
    const pro = pricer(loadModel('deepseek-v4-pro'));
    const batch = prefillBatch(2, 2048);
    expect(flash.price(batch).extrapolation_notes.join('\n')).not.toMatch(/prefill form is incomplete/);
    expect(pro.price(batch).extrapolation_notes.join('\n')).toMatch(
      /sparse attention prefill: the model's own prefill form is incomplete for deepseek-v4-pro/,
    );
  });
});
