/**
 * Batch-size sweep of decode steps (seed "Composing the step", the deepseek-v3 figure). Returns data;
 * src/report/sweep.ts draws it.
 */
import { decodeBatch } from './batch.ts';
import type { Pricer, StepPrice } from './types.ts';

export interface SweepRow {
  batch: number;
  price: StepPrice;
}

/** Price `n` requests each decoding one token against `ctx` tokens of context, for each n. */
export function sweepDecode(pricer: Pricer, sizes: readonly number[], ctx: number): SweepRow[] {
  return sizes.map((n) => ({ batch: n, price: pricer.price(decodeBatch(n, ctx - 1)) }));
}
