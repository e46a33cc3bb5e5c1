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

/**
 * Price `n` requests each decoding against `ctx` tokens of context, for each n. Each decode row schedules
 * `rowTokens` tokens: 1, or 1 + k under speculative decoding with k draft tokens (the verify width).
 */
export function sweepDecode(pricer: Pricer, sizes: readonly number[], ctx: number, rowTokens = 1): SweepRow[] {
  return sizes.map((n) => ({ batch: n, price: pricer.price(decodeBatch(n, ctx - 1, rowTokens)) }));
}
