/**
 * The DSpark parallel-block drafter (issue 14 item 5; seed "Host time") and `sweep --spec-tokens k`, with the
 * seed's worked example: a 64-token capture with five draft tokens → the drafter replays up to 12 requests,
 * the target up to 10. Host values are the BLIS H200 fixture's (replay 7 µs, eager 7 µs per layer, dispatch
 * 3.2 µs per kernel), so each difference below is hand arithmetic.
 */
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { loadModel, type ModelGraph } from '../../src/core/catalog/model.ts';
import { captureCeilingRequests } from '../../src/core/laws/host.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer } from '../../src/pricer/pricer.ts';
import { sweepDecode } from '../../src/pricer/sweep.ts';
import type { CudagraphMode } from '../../src/pricer/types.ts';
import { BLIS_H200, makePricer, resolved } from './helpers.ts';

const h200 = loadRegistryFile(BLIS_H200);

/** llama-3.1-8b with a two-layer DSpark drafter of five draft tokens (a synthetic speculator). */
function withDspark(): ModelGraph {
  const g = structuredClone(loadModel('llama-3.1-8b'));
  g.speculator = { method: 'dspark', num_spec_tokens: 5, stack: { pattern: ['gqa_dense'], repeat: 2 }, head: true };
  return g;
}

function pricer(mode: CudagraphMode = 'FULL_AND_PIECEWISE') {
  const d = defaultDeployment({ max_capture_size: 64, cudagraph_mode: mode, speculative: { num_spec_tokens: 5 } });
  return createPricer(loadChip('h200'), withDspark(), d, resolved(h200, 'h200', 'llama-3.1-8b', d));
}
/** Host µs of n requests each verifying 1 + 5 tokens at 2,048 context. */
const host = (p: ReturnType<typeof pricer>, n: number) => p.price(decodeBatch(n, 2047, 6)).resources_us.host;

describe('DSpark capture ceiling (seed worked example)', () => {
  it('64-token capture, five draft tokens: drafter rows 5 wide → 12 requests; target rows 1 + 5 → 10', () => {
    expect(captureCeilingRequests(64, 5)).toBe(12);
    expect(captureCeilingRequests(64, 1 + 5)).toBe(10);
  });

  it('the target goes eager past 10 requests: +7 µs/layer × 32 − 7 µs replay = +217 µs; the drafter still replays', () => {
    const p = pricer();
    expect(host(p, 11) - host(p, 10)).toBeCloseTo(7 * 32 - 7, 9);
  });

  it('the drafter goes eager past 12 requests: +7 µs/layer × 2 layers − 7 µs replay = +7 µs', () => {
    const p = pricer();
    expect(host(p, 13) - host(p, 12)).toBeCloseTo(2 * 7 - 7, 9);
  });

  it('one drafter pass (not five): the drafter adds the same host at 12 requests as one replay + its dispatch', () => {
    const p = pricer();
    const noSpec = makePricer('llama-3.1-8b', 'h200', { max_capture_size: 64 }, h200);
    // target at 10 requests × 6 tokens = 60 ≤ 64: one replay, 258 kernels; without speculation the same.
    const target = noSpec.price(decodeBatch(60, 2047)).resources_us.host;
    expect(target).toBeCloseTo(7 + 3.2 * 258, 9);
    // drafter: 2 layers × 8 kernels + head 2 kernels = 18 kernels, one replay
    expect(host(p, 10) - target).toBeCloseTo(7 + 3.2 * 18, 9);
  });

  it('captured only when the target decode mode is full: under PIECEWISE the drafter launches eagerly', () => {
    const full = pricer('FULL_AND_PIECEWISE');
    const pw = pricer('PIECEWISE');
    // target: 33 pieces instead of one replay (+32 × 7 µs); drafter: eager 2 × 7 µs instead of one 7 µs replay.
    expect(host(pw, 8) - host(full, 8)).toBeCloseTo(32 * 7 + (14 - 7), 9);
  });
});

describe('sweep --spec-tokens k prices 1 + k tokens per decode row', () => {
  it('each row is the price of n requests verifying 1 + k tokens', () => {
    const p = pricer();
    const rows = sweepDecode(p, [4, 16], 4096, 1 + 5);
    expect(rows.map((r) => r.batch)).toEqual([4, 16]);
    expect(rows[1]!.price).toEqual(p.price(decodeBatch(16, 4095, 6)));
    // 16 rows × 6 tokens = 96 tokens on the GEMM ramp, against 16 with one-token rows
    const oneToken = sweepDecode(p, [16], 4096)[0]!.price;
    expect(rows[1]!.price.resources_us.sm).toBeGreaterThan(oneToken.resources_us.sm);
  });
});
