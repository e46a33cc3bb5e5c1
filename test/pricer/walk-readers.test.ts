/**
 * The walk's per-reader sums (src/pricer/walk.ts boundedDecodeSums: closed forms from the least decode
 * context, one pass over the stored contexts otherwise, ⌈x · 2^-k⌉ for a power-of-two ratio) against a
 * row-by-row reference: Σ decodeTokensRead(c + s, reader) over the decode rows, and for the prefill rows
 * their pairs and tokens read, on batches of distinct contexts, equal runs, straddled windows and caps,
 * speculative rows and prefill chunks, as a Batch and as a ColumnBatch. Token counts are integers, so the
 * sums are exact and must agree to the bit. One DeepSeek-V4-Flash case is worked by hand.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeTokensRead, type ReaderSpec } from '../../src/core/laws/attention.ts';
import { columnsOf } from '../../src/pricer/batch.ts';
import type { Batch } from '../../src/pricer/types.ts';
import { BatchWalk, walkBatch, walkColumns, type WalkPlan } from '../../src/pricer/walk.ts';
import { walkPlanOf as plan } from './helpers.ts';

const row = (s: number, c: number) => ({ scheduled_tokens: s, computed_tokens: c, prompt_tokens: c });

/** DeepSeek-V4-Flash's readers (its graph: window 128; compressed ÷4 whole; ÷4 top-512 + window; ÷128 + window). */
const V4_FLASH: ReaderSpec[] = [
  { window: 128, ratio: 0, cap: Infinity },
  { window: 0, ratio: 4, cap: Infinity },
  { window: 128, ratio: 4, cap: 512 },
  { window: 128, ratio: 128, cap: Infinity },
];
/** Every other shape: full context, GLM-5's indexer and top-2048, a window with a whole stream, a ratio that is not a power of two. */
const OTHERS: ReaderSpec[] = [
  { window: Infinity, ratio: 0, cap: Infinity },
  { window: 0, ratio: 1, cap: Infinity },
  { window: 0, ratio: 1, cap: 2048 },
  { window: Infinity, ratio: 4, cap: Infinity },
  { window: 1024, ratio: 0, cap: Infinity },
  { window: 64, ratio: 3, cap: 700 },
  { window: 0, ratio: 3, cap: Infinity },
];

/** Per reader, Σ over the decode rows (0 < s ≤ threshold) of the tokens read, row by row in batch order. */
function reference(p: WalkPlan, batch: Batch): number[] {
  return p.readers.map((r) =>
    batch.requests
      .filter((q) => q.scheduled_tokens > 0 && q.scheduled_tokens <= p.threshold)
      .reduce((sum, q) => sum + decodeTokensRead(q.computed_tokens + q.scheduled_tokens, r), 0),
  );
}

describe('walk: per-reader decode sums', () => {
  it('DeepSeek-V4-Flash, four decode rows at 8,192…8,195 after the step and one prefill chunk (by hand)', () => {
    const p = plan(V4_FLASH);
    const batch: Batch = { requests: [row(1, 8191), row(1, 8192), row(1, 8193), row(1, 8194), row(2048, 4096)] };
    const w = new BatchWalk(4);
    walkBatch(p, batch, w);
    // window 128 only: every row reads its 128 newest keys → 4 · 128 = 512
    // ÷4, whole stream: ⌈8192/4⌉ = 2048, ⌈8193/4⌉ = ⌈2048.25⌉ = 2049, ⌈8194/4⌉ = 2049, ⌈8195/4⌉ = 2049 → 8,195
    // window 128 + ÷4 top-512: every row has ≥ 2,048 compressed entries, capped at 512 → 4 · (128 + 512) = 2,560
    // window 128 + ÷128: ⌈8192/128⌉ = 64, then ⌈64.008⌉ = 65 three times → 259; + 512 = 771
    expect(Array.from(w.decRead)).toStrictEqual([512, 8195, 2560, 771]);
    expect(w.decTok).toBe(4);
    walkColumns(p, columnsOf(batch), w);
    expect(Array.from(w.decRead)).toStrictEqual([512, 8195, 2560, 771]);
  });

  it('64 distinct contexts (8,192…8,255) as the reference sums them row by row', () => {
    const p = plan(V4_FLASH);
    const batch: Batch = { requests: [...Array.from({ length: 64 }, (_, i) => row(1, 8191 + i)), row(2048, 4096)] };
    const w = new BatchWalk(4);
    walkBatch(p, batch, w);
    // Σ ⌈x/4⌉ over x = 8,192…8,255: 2,048 once, 2,049…2,063 four times each, 2,064 three times
    // = 2,048 + 4 · 30,840 + 3 · 2,064 = 131,600
    expect(w.decRead[1]).toBe(131_600);
    expect(Array.from(w.decRead)).toStrictEqual(reference(p, batch));
  });

  it('the least context at and around every window and saturation point (x = W, x = ratio · cap, ±2)', () => {
    const readers = [...V4_FLASH, ...OTHERS];
    const p = plan(readers);
    const points = readers.flatMap((r) => [r.window, r.ratio * r.cap, r.ratio * (r.cap - 1)]).filter(Number.isFinite);
    const w = new BatchWalk(readers.length);
    for (const t of points)
      for (let d = -2; d <= 2; d++) {
        const least = Math.max(1, t + d);
        // the least context first, last, and as an equal prefix of 4 (the walk's leading rows)
        for (const ctxs of [
          [least, least + 1, least + 7, least + 300],
          [least + 5, least + 2, least + 1, least],
          [least, least, least, least, least + 1, least + 3],
        ]) {
          const batch: Batch = { requests: [...ctxs.map((x) => row(1, x - 1)), row(700, 9)] };
          walkBatch(p, batch, w);
          expect(Array.from(w.decRead)).toStrictEqual(reference(p, batch));
          walkColumns(p, columnsOf(batch), w);
          expect(Array.from(w.decRead)).toStrictEqual(reference(p, batch));
        }
      }
  });

  it('any batch: Batch and ColumnBatch sums equal the row-by-row reference (fast-check)', () => {
    const readers = [...V4_FLASH, ...OTHERS];
    const ctx = fc.oneof(fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 0, max: 300_000 }));
    const anyRow = fc.oneof(
      { weight: 6, arbitrary: ctx.map((c) => row(1, c)) },
      { weight: 2, arbitrary: ctx.map((c) => row(3, c)) },
      { weight: 1, arbitrary: ctx.map((c) => row(0, c)) },
      { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 4, max: 900 }), ctx).map(([s, c]) => row(s, c)) },
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 0, max: 300_000 }),
        fc.array(anyRow, { maxLength: 40 }),
        fc.constantFrom(0, 2),
        (k, c0, rest, spec) => {
          // k leading rows of one context (the walk's equal prefix), then anything
          const width = 1 + spec;
          const batch: Batch = { requests: [...Array.from({ length: k }, () => row(width, c0)), ...rest] };
          const p = plan(readers, 1, spec);
          const w = new BatchWalk(readers.length);
          const want = reference(p, batch);
          walkBatch(p, batch, w);
          expect(Array.from(w.decRead)).toStrictEqual(want);
          walkColumns(p, columnsOf(batch), w);
          expect(Array.from(w.decRead)).toStrictEqual(want);
        },
      ),
      { numRuns: 300 },
    );
  });
});
