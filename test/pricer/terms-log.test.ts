/**
 * StepTermsLog (src/pricer/terms-log.ts): a step recorded once at s = 1 and re-composed at engine scale
 * s gives the StepPrice a pricer built with `sm_scale = s` gives, bit for bit (Object.is on every
 * number), across the shapes the pricer composes differently: a dense model, MoE experts with MLA
 * (deepseek-v3, the shipped h200 registry), a hybrid with recurrent mixers, a speculative drafter
 * (three extra passes) and a DSpark block drafter; decode, prefill, mixed and empty steps.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { columnsOf, decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import { StepTermsLog } from '../../src/pricer/terms-log.ts';
import type { Batch, Deployment, StepPrice } from '../../src/pricer/types.ts';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { loadModel } from '../../src/core/catalog/model.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer } from '../../src/pricer/pricer.ts';
import { makePricer, resolved } from './helpers.ts';

const h200 = loadRegistryFile(path.join(REPO_ROOT, 'registry', 'h200.yaml'));

const BATCHES: Array<[string, Batch]> = [
  ['decode 32 @ 4096', decodeBatch(32, 4096)],
  ['decode 1 @ 100', decodeBatch(1, 100)],
  ['prefill 2 × 1024', prefillBatch(2, 1024)],
  ['mixed', { requests: [...decodeBatch(16, 2048).requests, ...prefillBatch(1, 512, 1024).requests] }],
  ['empty', { requests: [] }],
];

const CASES: Array<[string, string, Partial<Deployment>]> = [
  ['llama-3.1-70b', 'h200', { tp: 8 }],
  ['deepseek-v3', 'h200', { tp: 8 }],
  ['qwen3.5-27b', 'h200', { tp: 2 }],
  ['deepseek-v3', 'h200', { tp: 8, speculative: { num_spec_tokens: 3 } }],
];

const SCALES = [0.25, 0.61, 1.37, 4];

/** The numbers of a StepPrice (notes aside: the log records none). */
function numbers(p: StepPrice) {
  const r = p.resources_us;
  return [
    p.overlap_us,
    p.compute_memory_overlap_us,
    p.no_overlap_us,
    r.sm,
    r.hbm,
    r.nvlink,
    r.nic,
    r.host,
    p.bottleneck,
  ];
}

function expectSame(a: StepPrice, b: StepPrice): void {
  const x = numbers(a);
  const y = numbers(b);
  for (let i = 0; i < x.length; i++) expect(Object.is(x[i], y[i]), `field ${i}: ${x[i]} vs ${y[i]}`).toBe(true);
}

describe('StepTermsLog re-composes a step at any s exactly as a pricer built at s prices it', () => {
  for (const [model, chip, d] of CASES) {
    it(`${model} ${JSON.stringify(d)}`, () => {
      const log = new StepTermsLog();
      const at1 = makePricer(model, chip, d, h200);
      for (const [, b] of BATCHES) at1.price(b, { terms: log });
      expect(log.steps).toBe(BATCHES.length);
      const out = emptyStepPrice();
      for (const s of SCALES) {
        const scaled = makePricer(model, chip, d, h200, { sm_scale: s });
        for (const [i, [, b]] of BATCHES.entries()) {
          const want = scaled.price(b);
          expectSame(log.composeAt(i, s, out), want);
          const cm = want.compute_memory_overlap_us - want.resources_us.host;
          expect(Object.is(log.cmOverlapNohostSum(i, i + 1, s), 0 + cm)).toBe(true);
        }
      }
    });
  }

  it('a DSpark block drafter (llama-3.1-8b with a synthetic two-layer drafter of five tokens)', () => {
    const g = structuredClone(loadModel('llama-3.1-8b'));
    g.speculator = { method: 'dspark', num_spec_tokens: 5, stack: { pattern: ['gqa_dense'], repeat: 2 }, head: true };
    const d = defaultDeployment({ max_capture_size: 64, speculative: { num_spec_tokens: 5 } });
    const make = (s: number) =>
      createPricer(loadChip('h200'), g, d, resolved(h200, 'h200', 'llama-3.1-8b', d), { sm_scale: s });
    const log = new StepTermsLog();
    const at1 = make(1);
    for (const [, b] of BATCHES) at1.price(b, { terms: log });
    for (const s of SCALES) {
      const scaled = make(s);
      for (const [i, [, b]] of BATCHES.entries()) expectSame(log.composeAt(i, s, emptyStepPrice()), scaled.price(b));
    }
  });

  it('at s = 1 it is the recorded price itself; price, priceInto and priceColumnsInto record the same', () => {
    const p = makePricer('deepseek-v3', 'h200', { tp: 8 }, h200);
    const a = new StepTermsLog();
    const b = new StepTermsLog();
    const c = new StepTermsLog();
    const out = emptyStepPrice();
    for (const [, batch] of BATCHES) {
      p.price(batch, { terms: a });
      p.priceInto(batch, out, { terms: b });
      p.priceColumnsInto(columnsOf(batch), out, { terms: c });
    }
    BATCHES.forEach(([, batch], i) => {
      for (const log of [a, b, c]) expectSame(log.composeAt(i, 1, emptyStepPrice()), p.price(batch));
    });
    // a second pricer call without the option records nothing more
    p.price(BATCHES[0]![1]);
    expect(a.steps).toBe(BATCHES.length);
  });

  it('the recorded SM time scales: composing at s = 2 doubles SM and leaves HBM, NVLink, NIC and host', () => {
    const log = new StepTermsLog();
    makePricer('llama-3.1-70b', 'h200', { tp: 8 }, h200).price(prefillBatch(2, 1024), { terms: log });
    const one = { ...log.composeAt(0, 1, emptyStepPrice()) };
    const two = log.composeAt(0, 2, emptyStepPrice());
    expect(two.resources_us.sm).toBeCloseTo(2 * one.resources_us.sm, 6);
    expect(two.resources_us.hbm).toBe(one.resources_us.hbm);
    expect(two.resources_us.host).toBe(one.resources_us.host);
  });

  it('a range sum adds the steps in order onto its start, as a loop over the steps does', () => {
    const log = new StepTermsLog();
    const p = makePricer('llama-3.1-70b', 'h200', { tp: 8 }, h200);
    for (let c = 100; c < 140; c++) p.price(decodeBatch(8, c), { terms: log });
    let want = 12.5;
    for (let i = 3; i < 31; i++) {
      const q = log.composeAt(i, 1.7, emptyStepPrice());
      want += q.compute_memory_overlap_us - q.resources_us.host;
    }
    expect(Object.is(log.cmOverlapNohostSum(3, 31, 1.7, 12.5), want)).toBe(true);
    expect(log.cmOverlapNohostSum(5, 5, 1.7, 2)).toBe(2);
    expect(() => log.cmOverlapNohostSum(0, 41, 1)).toThrow(RangeError);
  });

  it('asking for a step that was not recorded throws', () => {
    expect(() => new StepTermsLog().composeAt(0, 1, emptyStepPrice())).toThrow(RangeError);
  });
});
