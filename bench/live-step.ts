/**
 * The live-batch step the pricer benches time (issue 17, docs/pricer.md "Live batches"): what a scheduler
 * does each step on a LiveBatch, then the price. Each call advances every decode row by one token and
 * moves each prefill row on to its next chunk (computed += its chunk), then prices with `priceLiveInto`;
 * every other call rewinds both (decode rows one token back, prefill rows to their first chunk), so the
 * batch is the bench's fixed case on every second call and one token later on the others, and the
 * contexts do not grow through a run of millions of calls. The advance is inside the timed call.
 */
import type { Batch, StepPrice } from '../src/pricer/types.ts';

/** The live-batch API of a pricer, where the build has it (an older build is benched with the same files). */
interface LiveApi {
  liveBatch(): LiveRows;
  priceLiveInto(live: LiveRows, out: StepPrice): StepPrice;
}
interface LiveRows {
  add(scheduled: number, computed: number): number;
  set(h: number, scheduled: number, computed: number): void;
  advanceDecodes(tokens?: number): void;
}

/**
 * A call advancing and pricing `batch`'s rows as a live batch of `pricer` (see the file comment), and a
 * check that the live price of the fixed case equals `priceInto`'s bit for bit; undefined on a build
 * without live batches. `threshold`: the deployment's decode threshold (rows above it are prefill rows).
 */
export function liveStep(
  pricer: unknown,
  batch: Batch,
  out: StepPrice,
  threshold = 1,
): { call: () => StepPrice; sameAsBatch: () => boolean } | undefined {
  const api = pricer as Partial<LiveApi> & { priceInto(b: Batch, o: StepPrice): StepPrice };
  if (typeof api.liveBatch !== 'function') return undefined;
  const live = api.liveBatch();
  const pre: number[] = [];
  for (const q of batch.requests) {
    const h = live.add(q.scheduled_tokens, q.computed_tokens);
    if (q.scheduled_tokens > threshold) pre.push(h, q.scheduled_tokens, q.computed_tokens);
  }
  const preRows = Int32Array.from(pre);
  let dir = 1;
  const call = () => {
    live.advanceDecodes(dir);
    for (let i = 0; i < preRows.length; i += 3) {
      const s = preRows[i + 1]!;
      live.set(preRows[i]!, s, dir > 0 ? preRows[i + 2]! + s : preRows[i + 2]!);
    }
    dir = -dir;
    return api.priceLiveInto!(live, out);
  };
  const sameAsBatch = () => {
    if (dir < 0) call(); // back to the fixed case
    const a = { ...api.priceLiveInto!(live, out) };
    const b = { ...api.priceInto(batch, out) };
    return (
      JSON.stringify(a) === JSON.stringify(b) && a.no_overlap_us === b.no_overlap_us && a.overlap_us === b.overlap_us
    );
  };
  return { call, sameAsBatch };
}
