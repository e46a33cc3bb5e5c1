/**
 * The live-batch step the pricer benches time (issue 17, docs/pricer.md "Live batches"): what a scheduler
 * does each step on a LiveBatch, then the price. Each call advances every decode row by one token and
 * moves each prefill row on to its next chunk (computed += its chunk), then undoes both (decode rows one
 * token back, prefill rows to their chunk), then prices with `priceLiveInto`: so every call prices the
 * bench's fixed case, as the per-row lines do, and pays for two advances and two changes per prefill row,
 * twice a real step's bookkeeping. DECISION: undo before pricing rather than price the advanced batch on
 * every other call: a step whose contexts change formats its memory note again where one applies (GLM-5
 * on b200: 0.2-0.7 kB a call in both paths, notes.ts NotesMemo holds the last inputs), which would time
 * the note, not the walk, and the per-row lines price one fixed batch.
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
  const call = () => {
    live.advanceDecodes(1);
    for (let i = 0; i < preRows.length; i += 3)
      live.set(preRows[i]!, preRows[i + 1]!, preRows[i + 2]! + preRows[i + 1]!);
    live.advanceDecodes(-1);
    for (let i = 0; i < preRows.length; i += 3) live.set(preRows[i]!, preRows[i + 1]!, preRows[i + 2]!);
    return api.priceLiveInto!(live, out);
  };
  const sameAsBatch = () => {
    const a = { ...call() };
    const b = { ...api.priceInto(batch, out) };
    return (
      JSON.stringify(a) === JSON.stringify(b) && a.no_overlap_us === b.no_overlap_us && a.overlap_us === b.overlap_us
    );
  };
  return { call, sameAsBatch };
}
