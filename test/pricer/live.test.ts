/**
 * The live batch (src/pricer/live.ts, issue 17): a batch whose owner adds, changes, removes and advances
 * rows while it keeps their integer sums must walk and price exactly as the Batch of its rows, to the bit.
 * Random sequences of joins, changes (decode ↔ prefill ↔ no tokens, speculative verify rows of every
 * width), removals and whole-batch advances, on every reader shape the walk knows (windows, compressed
 * streams with and without a cap, full context), compared after every operation with the Batch of the
 * test's own copy of the rows (kept apart from the live batch, so a row the live batch stores wrongly
 * fails too): every field of the walk (so one mis-kept sum fails), and every field of the price through
 * real pricers.
 */
import { describe, expect, it } from 'vitest';
import type { ReaderSpec } from '../../src/core/laws/attention.ts';
import { seededRandom as rng } from '../../src/core/numeric/resample.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import { engineProfiledPricer } from '../../src/pricer/engine.ts';
import { LiveBatch } from '../../src/pricer/live.ts';
import type { Batch, StepPrice } from '../../src/pricer/types.ts';
import { BatchWalk, walkBatch } from '../../src/pricer/walk.ts';
import { loadEngineProfile } from '../../src/registry/engine.ts';
import { makePricer, walkPlanOf as plan } from './helpers.ts';

/** DeepSeek-V4-Flash's readers, then every other shape (walk-readers.test.ts). */
const READERS: ReaderSpec[] = [
  { window: 128, ratio: 0, cap: Infinity },
  { window: 0, ratio: 4, cap: Infinity },
  { window: 128, ratio: 4, cap: 512 },
  { window: 128, ratio: 128, cap: Infinity },
  { window: Infinity, ratio: 0, cap: Infinity },
  { window: 0, ratio: 1, cap: 2048 },
  { window: 1024, ratio: 0, cap: Infinity },
  { window: 64, ratio: 3, cap: 700 },
  { window: 0, ratio: 1, cap: Infinity },
  { window: Infinity, ratio: 4, cap: Infinity },
];
/** A reader the counted advance does not keep (live-reads.ts): the batch advances row by row. */
const FRACTIONAL: ReaderSpec = { window: 96, ratio: 2.5, cap: 300 };

/** The bits of every number, so +0 and −0 (and any last-bit difference) differ. */
const bits = (xs: ArrayLike<number>) =>
  Array.from(new Float64Array(Array.from(xs)), (x) => (Object.is(x, -0) ? '-0' : x.toString(16)));

/** Every field a walk writes, as bits. */
function walkState(w: BatchWalk) {
  return {
    counts: bits([w.tok, w.nReq, w.nPrefill, w.decTok, w.headRows, w.ctxSumAll]),
    uniform: w.uniform,
    decRead: bits(w.decRead),
    preRead: bits(w.preRead),
    allRead: bits(w.allRead),
    preRaw: bits(w.preRaw),
    prefill: bits(w.prefill),
  };
}

/** What the operations exercised, so a generator that stopped reaching a case fails. */
interface Coverage {
  [op: string]: number;
}

/** The rows as the test keeps them, apart from the live batch: handle → scheduled and computed tokens. */
type Shadow = Map<number, { s: number; c: number }>;

/** The shadow's rows as a Batch, in handle order (the order a live batch prices its rows in). */
function shadowBatch(rows: Shadow): Batch {
  const hs = [...rows.keys()].sort((a, b) => a - b);
  return {
    requests: hs.map((h) => {
      const { s, c } = rows.get(h)!;
      return { scheduled_tokens: s, computed_tokens: c, prompt_tokens: c + s };
    }),
  };
}

/**
 * One random operation on `live` and on the shadow `rows` alike: a join, a change, a removal or an
 * advance, with token counts around the readers' windows and saturation points, the decode width and
 * threshold, no tokens, and prefill chunks.
 */
function step(live: LiveBatch, rows: Shadow, r: () => number, cov: Coverage): void {
  const p = live.plan;
  const count = (k: string) => {
    cov[k] = (cov[k] ?? 0) + 1;
  };
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  const sched = () =>
    pick([
      p.uniformWidth,
      p.uniformWidth,
      0,
      1 + Math.floor(r() * p.threshold),
      p.threshold + 1 + Math.floor(r() * 3000),
    ]);
  const ctx = () => Math.max(0, pick([0, 5, 127, 128, 1024, 2048, 2100, 8191, 65_536]) + Math.floor(r() * 9) - 4);
  const isDecode = (s: number) => s > 0 && s <= p.threshold;
  const handles = [...rows.keys()];
  const u = r();
  if (u < 0.4 || handles.length === 0) {
    const row = { s: sched(), c: ctx() };
    rows.set(live.add(row.s, row.c), row);
    count('add');
  } else if (u < 0.6) {
    const h = pick(handles);
    const old = rows.get(h)!;
    // the row's next chunk or step (computed += scheduled), or anything else
    const row = { s: sched(), c: r() < 0.5 ? old.c + old.s : ctx() };
    live.set(h, row.s, row.c);
    rows.set(h, row);
    count(old.s > p.threshold && row.s > p.threshold ? 'set prefill → prefill' : 'set');
  } else if (u < 0.75) {
    const h = pick(handles);
    live.remove(h);
    rows.delete(h);
    count('remove');
  } else {
    // a rewind only where every decode row has computed a token (contexts stay ≥ 0)
    // 1 to 3 tokens on or back (the counted advance), or 9 to 40 on (row by row)
    const back = 1 + Math.floor(r() * 3);
    const canRewind = [...rows.values()].every((q) => !isDecode(q.s) || q.c >= back);
    const u2 = r();
    const d = canRewind && u2 < 0.25 ? -back : u2 < 0.35 ? 9 + Math.floor(r() * 32) : 1 + Math.floor(r() * 3);
    live.advanceDecodes(d);
    for (const q of rows.values()) if (isDecode(q.s)) q.c += d;
    count(d < 0 ? 'rewind' : d > 8 ? 'advance row by row' : 'advance');
  }
  for (const q of rows.values())
    count(q.s === 0 ? 'zero' : q.s > p.threshold ? 'prefill' : q.s === p.uniformWidth ? 'uniform' : 'other');
}

describe('LiveBatch', () => {
  for (const [label, threshold, spec] of [
    ['one-token decode', 1, 0],
    ['speculative verify rows (width 3, threshold 4: narrower and wider decode rows)', 4, 2],
  ] as const)
    it(`${label}: after every operation the walk equals walkBatch over its rows, field by field`, () => {
      for (const readers of [READERS, READERS.slice(0, 4), [READERS[4]!], [READERS[0]!, FRACTIONAL]]) {
        const p = plan(readers, threshold, spec);
        const live = new LiveBatch(p);
        const rows: Shadow = new Map();
        const r = rng(17 + readers.length + threshold);
        const cov: Coverage = {};
        const a = new BatchWalk(readers.length);
        const b = new BatchWalk(readers.length);
        for (let i = 0; i < 400; i++) {
          step(live, rows, r, cov);
          const want = shadowBatch(rows);
          live.walkInto(a);
          walkBatch(p, want, b);
          expect(walkState(a), `operation ${i}`).toStrictEqual(walkState(b));
          expect(live.batch()).toStrictEqual(want);
        }
        expect(live.size).toBe(rows.size);
        const ops = ['add', 'set', 'set prefill → prefill', 'remove', 'advance', 'advance row by row', 'rewind'];
        ops.push('zero', 'prefill', 'uniform');
        for (const k of ops) expect(cov[k] ?? 0, k).toBeGreaterThan(0);
        if (threshold > 1) expect(cov.other ?? 0).toBeGreaterThan(0);
      }
    });

  for (const [model, chip, d] of [
    ['llama-3.1-70b', 'h200', { tp: 8 }], // one full-context reader
    ['mistral-7b', 'h200', { tp: 1 }], // a sliding window
    ['deepseek-v4-flash', 'b200', { tp: 8 }], // compressed streams (÷4, ÷128, top-512) and windows
    ['deepseek-v3', 'h200', { tp: 8, speculative: { num_spec_tokens: 3 } }], // a drafter, verify rows 4 wide
  ] as const)
    it(`${model}: priceLiveInto gives the price of its rows' Batch, bit for bit`, () => {
      const pricer = makePricer(model, chip, d);
      const live = pricer.liveBatch();
      const rows: Shadow = new Map();
      const r = rng(5);
      const cov: Coverage = {};
      const a = emptyStepPrice();
      const numbers = (x: StepPrice) =>
        bits([x.overlap_us, x.compute_memory_overlap_us, x.no_overlap_us, ...Object.values(x.resources_us)]);
      for (let i = 0; i < 120; i++) {
        step(live, rows, r, cov);
        const want = pricer.price(shadowBatch(rows));
        const got = pricer.priceLiveInto(live, a);
        expect(got).toStrictEqual(want);
        expect(numbers(got)).toStrictEqual(numbers(want));
      }
      const withKinds = pricer.price(shadowBatch(rows), { per_kind: true });
      expect(pricer.priceLiveInto(live, emptyStepPrice(), { per_kind: true })).toStrictEqual(withKinds);
    });

  it('a 256-row decode batch advanced one token a step prices as the Batch at each step', () => {
    const pricer = makePricer('llama-3.1-70b', 'h200', { tp: 8 });
    const live = pricer.liveBatch();
    for (let i = 0; i < 256; i++) live.add(1, 4095);
    const out = emptyStepPrice();
    for (let t = 0; t < 5; t++) {
      const batch = live.batch();
      expect(batch.requests.every((q) => q.computed_tokens === 4095 + t)).toBe(true);
      expect(pricer.priceLiveInto(live, out)).toStrictEqual(pricer.price(batch));
      live.advanceDecodes();
    }
  });

  it('an engine-profiled pricer prices a live batch as it prices the Batch of its rows', () => {
    const inner = makePricer('llama-3.1-70b', 'h200', { tp: 4 });
    const pricer = engineProfiledPricer(inner, loadEngineProfile('splitwise'), 4);
    const live = pricer.liveBatch();
    for (let i = 0; i < 40; i++) live.add(1, 1000 + 37 * i);
    live.add(0, 5);
    live.add(700, 2048);
    live.advanceDecodes(3);
    const want = pricer.price(live.batch());
    expect(want.resources_us.host).not.toBe(inner.price(live.batch()).resources_us.host);
    expect(pricer.priceLiveInto(live, emptyStepPrice())).toStrictEqual(want);
  });

  it('refuses a handle not in the batch, bad token counts and another pricer', () => {
    const pricer = makePricer('llama-3.1-70b', 'h200', { tp: 8 });
    const live = pricer.liveBatch();
    const h = live.add(1, 10);
    live.remove(h);
    expect(() => live.remove(h)).toThrow(/not a row of this batch/);
    expect(() => live.set(7, 1, 1)).toThrow(/not a row of this batch/);
    expect(() => live.add(1.5, 0)).toThrow(/integers in \[0, 2\^32\]/);
    expect(() => live.add(1, -1)).toThrow(/integers in \[0, 2\^32\]/);
    expect(() => live.add(1, 2 ** 32 + 1)).toThrow(/integers in \[0, 2\^32\]/);
    for (const bad of [Number.NaN, 0.5, Number.POSITIVE_INFINITY, -(2 ** 33)])
      expect(() => live.advanceDecodes(bad)).toThrow(/advanceDecodes takes an integer/);
    live.add(1, 10);
    live.advanceDecodes(2 ** 20); // a large legal advance still prices as the Batch of its rows
    expect(pricer.priceLiveInto(live, emptyStepPrice())).toEqual(pricer.priceInto(live.batch(), emptyStepPrice()));
    const other = makePricer('llama-3.1-70b', 'h200', { tp: 8 });
    expect(() => other.priceLiveInto(live, emptyStepPrice())).toThrow(/another pricer/);
  });
});
