/** priceInto (the allocation-free entry) gives price's numbers, field for field, into the caller's object. */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import type { Batch, PriceOptions } from '../../src/pricer/types.ts';
import { makePricer } from './helpers.ts';

const mixed: Batch = { requests: [...decodeBatch(64, 4095).requests, ...prefillBatch(2, 2048, 1024).requests] };

describe('priceInto', () => {
  for (const [model, tp, spec] of [
    ['llama-3.1-70b', 8, 0],
    ['gpt-oss-120b', 4, 0],
    ['deepseek-v3', 8, 1],
  ] as const) {
    it(`${model} tp ${tp}: same result as price, written into one reused object`, () => {
      const pricer = makePricer(model, 'h200', { tp, speculative: spec ? { num_spec_tokens: spec } : undefined });
      const out = emptyStepPrice();
      for (const b of [decodeBatch(256, 4095), mixed, { requests: [] }, prefillBatch(1, 8192)]) {
        expect(pricer.priceInto(b, out)).toBe(out);
        expect(out).toStrictEqual(pricer.price(b));
      }
      pricer.priceInto(mixed, out, { per_kind: true });
      expect(out.per_kind).toStrictEqual(pricer.price(mixed, { per_kind: true }).per_kind);
      pricer.priceInto(mixed, out);
      expect('per_kind' in out).toBe(false); // a reused object does not keep an earlier breakdown
    });
  }
});

/**
 * A plain call (no drafter, no per_kind, no terms sink) takes step.ts `pricePlain`; a call with a terms
 * sink takes the general `priceWalked`. The two must give the same StepPrice to the bit, on every batch
 * shape: decode only, mixed, prefill first, a zero-token row, blocks of 8 and their remainders.
 */
describe('the plain path equals the general path', () => {
  const row = (s: number, c: number) => ({ scheduled_tokens: s, computed_tokens: c, prompt_tokens: c });
  const batches: Batch[] = [
    decodeBatch(256, 4095),
    decodeBatch(1, 4095),
    decodeBatch(13, 777),
    mixed,
    { requests: [...prefillBatch(1, 512).requests, ...decodeBatch(9, 1000).requests] },
    {
      requests: [
        row(1, 10),
        row(0, 5),
        row(1, 11),
        row(3, 12),
        row(1, 13),
        row(1, 14),
        row(1, 15),
        row(1, 16),
        row(1, 17),
      ],
    },
    prefillBatch(2, 4096),
  ];
  const noSink = { layer: () => {}, head: () => {}, host: () => {} };
  it('plainCall decides on every PriceOptions field (a new field fails tsc here until step.ts plainCall reads it)', () => {
    expectTypeOf<keyof PriceOptions>().toEqualTypeOf<'per_kind' | 'terms'>();
  });
  for (const [model, chip] of [
    ['llama-3.1-70b', 'h200'],
    ['gpt-oss-120b', 'b200'],
    ['deepseek-v3', 'h200'],
    ['deepseek-v4-flash', 'gb200'],
  ] as const) {
    it(`${model} ${chip}: priceInto plain and with a terms sink agree on every batch`, () => {
      const pricer = makePricer(model, chip, { tp: 8 });
      for (const b of batches) {
        const general = { ...pricer.priceInto(b, emptyStepPrice(), { terms: noSink }) };
        const plain = pricer.priceInto(b, emptyStepPrice());
        expect(plain).toStrictEqual(general);
        expect(pricer.priceInto(b, emptyStepPrice(), {})).toStrictEqual(general);
      }
    });
  }
});

/**
 * Pricers of one graph structure share one compiled script (terms.ts compileKinds), each with its own
 * constants and touched-experts memo: interleaving two such pricers (other chip, other sm_scale) must
 * not change either's prices, and each equals a pricer built and used alone.
 */
describe('compiled kinds shared between pricers', () => {
  for (const model of ['llama-3.1-70b', 'deepseek-v3']) {
    it(`${model}: h200 and b200 (s 1.3) interleaved give each one's own prices`, () => {
      const batches = [decodeBatch(256, 4095), mixed, decodeBatch(3, 100)];
      const alone = (chip: string, s: number) => {
        const p = makePricer(model, chip, { tp: 8 }, undefined, { sm_scale: s });
        return batches.map((b) => p.price(b, { per_kind: true }));
      };
      const a = alone('h200', 1);
      const b = alone('b200', 1.3);
      expect(b[0]!.no_overlap_us).not.toBe(a[0]!.no_overlap_us);
      const pa = makePricer(model, 'h200', { tp: 8 });
      const pb = makePricer(model, 'b200', { tp: 8 }, undefined, { sm_scale: 1.3 });
      batches.forEach((batch, i) => {
        expect(pb.price(batch, { per_kind: true })).toStrictEqual(b[i]);
        expect(pa.price(batch, { per_kind: true })).toStrictEqual(a[i]);
      });
    });
  }
});
