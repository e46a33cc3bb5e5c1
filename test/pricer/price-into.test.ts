/** priceInto (the allocation-free entry) gives price's numbers, field for field, into the caller's object. */
import { describe, expect, it } from 'vitest';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import type { Batch } from '../../src/pricer/types.ts';
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
