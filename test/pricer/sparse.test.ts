/** Sparse attention in the pricer (issue 14): the indexer's heads are not split over tp. */
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { loadModel, type ModelGraph } from '../../src/core/catalog/model.ts';
import { prefillBatch } from '../../src/pricer/batch.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer } from '../../src/pricer/pricer.ts';
import { resolved, syntheticSets } from './helpers.ts';

/** deepseek-v3 with a DSA attention and, optionally, its indexer (64 heads × 128, compress 1). */
function dsa(withIndexer: boolean): ModelGraph {
  const g = structuredClone(loadModel('deepseek-v3')) as ModelGraph;
  for (const k of g.layer_kinds) {
    const i = k.nodes.findIndex((n) => n.op === 'Attention');
    k.nodes.splice(
      i,
      1,
      { op: 'Attention', kind: 'sparse', n_q: 128, n_kv: 1, d_h: 576, prefill_d_h: 160, index_topk: 2048 },
      ...(withIndexer
        ? [{ op: 'Attention' as const, kind: 'sparse' as const, role: 'indexer', n_q: 64, n_kv: 1, d_h: 128 }]
        : []),
    );
  }
  return g;
}

describe('the indexer prefill arithmetic is not divided by tp (its heads are not split)', () => {
  it('the indexer adds the same prefill SM time at tp 1 and tp 8: 2 · 64 · 128 FLOPs per pair on every rank', () => {
    const chip = loadChip('h200');
    const batch = prefillBatch(1, 4096, 8192);
    const indexerSm = (tp: number) => {
      const d = defaultDeployment({ tp });
      const r = resolved(syntheticSets('h200'), 'h200', 'deepseek-v3', d);
      const sm = (g: ModelGraph) => createPricer(chip, g, d, r).price(batch, { per_kind: true }).per_kind!;
      const a = sm(dsa(true));
      const b = sm(dsa(false));
      return a.reduce((s, k, i) => s + k.resources_us.sm - b[i]!.resources_us.sm, 0);
    };
    const one = indexerSm(1);
    expect(one).toBeGreaterThan(0);
    expect(indexerSm(8) / one).toBeCloseTo(1, 9);
  });
});
