/**
 * The columnar batch (types.ts ColumnBatch, issue 17): the same rows as columns price exactly as the Batch,
 * on every kind of row the walk distinguishes (uniform decode, wider verify rows, prefill chunks, empty
 * rows, bounded readers), through the plain and the engine-profiled pricer; the columns may be longer
 * than n; n beyond them is refused.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { columnsOf, decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import { engineProfiledPricer } from '../../src/pricer/engine.ts';
import type { Batch, ColumnBatch } from '../../src/pricer/types.ts';
import { loadEngineProfile } from '../../src/registry/engine.ts';
import { makePricer } from './helpers.ts';

const row = (s: number, c: number) => ({ scheduled_tokens: s, computed_tokens: c, prompt_tokens: c + s });
const ragged: Batch = { requests: [row(1, 5), row(1, 130_000), row(0, 77), row(3, 900), row(512, 4096), row(1, 1)] };
const BATCHES: Batch[] = [
  decodeBatch(256, 4095),
  decodeBatch(7, 100_000),
  ragged,
  { requests: [...decodeBatch(64, 8191).requests, ...prefillBatch(1, 2048, 4096).requests] },
  prefillBatch(3, 8192),
  { requests: [] },
];

describe('ColumnBatch', () => {
  for (const [model, chip, tp] of [
    ['llama-3.1-70b', 'h200', 8], // one unbounded reader: the uniform-decode fast path
    ['mistral-7b', 'h200', 1], // a window: a bounded reader per row
    ['deepseek-v4-flash', 'b200', 8], // compressed streams and windows
  ] as const) {
    it(`${model}: every batch prices as its Batch, per_kind included`, () => {
      const pricer = makePricer(model, chip, { tp });
      const out = emptyStepPrice();
      for (const b of BATCHES) {
        const want = pricer.price(b, { per_kind: true });
        expect(pricer.priceColumnsInto(columnsOf(b), out, { per_kind: true })).toStrictEqual(want);
        const { per_kind: _, ...plain } = want;
        expect(pricer.priceColumnsInto(columnsOf(b), out)).toStrictEqual(plain);
      }
    });
  }

  it('a pricer reused across batches prices each as a fresh pricer does (no state left in its scratch)', () => {
    for (const model of ['llama-3.1-70b', 'deepseek-v4-flash'] as const) {
      const reused = makePricer(model, 'b200', { tp: 8 });
      const out = emptyStepPrice();
      // each batch after a larger one (a stale sum or count would show in the later price: the empty batch
      // after 512 rows at 200k context once kept their KV in its memory note)
      const big = decodeBatch(512, 200_000);
      for (const b of [big, ...BATCHES.flatMap((x) => [x, big]), { requests: [] }]) {
        const fresh = makePricer(model, 'b200', { tp: 8 }).price(b);
        expect(reused.priceInto(b, out)).toStrictEqual(fresh);
        expect(reused.priceColumnsInto(columnsOf(b), out)).toStrictEqual(fresh);
      }
    }
  });

  it('reads only the first n rows, and refuses n beyond the columns', () => {
    const pricer = makePricer('llama-3.1-8b', 'h200');
    const big: ColumnBatch = { n: 3, scheduled: new Float64Array(16).fill(1), computed: new Float64Array(16).fill(50) };
    expect(pricer.priceColumnsInto(big, emptyStepPrice())).toStrictEqual(pricer.price(decodeBatch(3, 50)));
    expect(() => pricer.priceColumnsInto({ ...big, n: 17 }, emptyStepPrice())).toThrow(
      /n = 17 rows, but the scheduled column has 16 and the computed column 16/,
    );
  });

  it('an engine-profiled pricer prices columns as it prices the Batch', () => {
    const inner = makePricer('llama-3.1-70b', 'h200', { tp: 4 });
    const pricer = engineProfiledPricer(inner, loadEngineProfile('splitwise'), 4);
    for (const b of BATCHES)
      expect(pricer.priceColumnsInto(columnsOf(b), emptyStepPrice())).toStrictEqual(pricer.price(b));
  });
});

/**
 * The walk's equal-context prefix (walk.ts equalRequests / equalColumns: rows 0..k-1 uniform with row 0's
 * context, no sums) against the general loop: decode rows' token sums are exact integers, so the same rows
 * in any order price the same to the bit. A batch whose first k rows share a context (k from 0 to 9, then
 * other contexts and a prefill chunk) and its reverse (distinct rows first: the loop path) must agree.
 */
describe('equal-context prefix', () => {
  it('deepseek-v4-flash b200 and mistral-7b h200: a prefix of k equal rows prices as the reversed rows (fast-check)', () => {
    const pricers = [makePricer('deepseek-v4-flash', 'b200', { tp: 8 }), makePricer('mistral-7b', 'h200', { tp: 1 })];
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9 }),
        fc.integer({ min: 1, max: 200_000 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 6 }),
        (k, c0, rest) => {
          const rows = [...Array.from({ length: k }, () => row(1, c0)), ...rest.map((c) => row(1, c)), row(600, 50)];
          const fwd: Batch = { requests: rows };
          const rev: Batch = { requests: [...rows.slice(0, -1).reverse(), row(600, 50)] };
          for (const p of pricers) {
            const a = p.price(fwd, { per_kind: true });
            expect(p.price(rev, { per_kind: true })).toStrictEqual(a);
            expect(p.priceColumnsInto(columnsOf(rev), emptyStepPrice(), { per_kind: true })).toStrictEqual(a);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
