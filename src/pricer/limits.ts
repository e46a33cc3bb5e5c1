/**
 * Limits of what the pricer prices (issue 12 item 8), applied by the CLI around `price` and
 * `sweep` (the per-step pricer stays a pure price):
 * - a request whose context after the step (computed + scheduled tokens) exceeds the model's
 *   `max_position_embeddings` (its Hugging Face config.json) cannot be served;
 * - a batch whose weights + KV cache per GPU exceed the chip's HBM (the pricer's "memory:" notes,
 *   src/pricer/pricer.ts) cannot be resident.
 * Each is an error unless `allow_over_capacity`, which turns it into a note. `registryNotes` lists
 * the copied and assumed coefficients a price used.
 */
import { UserError } from '../core/errors.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import type { Batch, StepPrice } from './types.ts';

/** How a limit overridden by `--allow-over-capacity` is noted (price, sweep, serve). */
export const OVER_CAPACITY_NOTE = 'over capacity (--allow-over-capacity): ';

/**
 * The context-limit problem of a request that reaches `tokens` positions, or undefined within the
 * limit (or with no stated limit). The one wording of the check: price, sweep and serve.
 * @param maxPositions the model's max_position_embeddings; undefined = no stated limit
 * @example contextProblem('llama-3.1-70b', 200000, 131072) → "context: a request reaches 200000 tokens, over llama-3.1-70b's max_position_embeddings 131072"
 */
export function contextProblem(model: string, tokens: number, maxPositions: number | undefined): string | undefined {
  if (maxPositions === undefined || !(tokens > maxPositions)) return undefined;
  return `context: a request reaches ${tokens} tokens, over ${model}'s max_position_embeddings ${maxPositions}`;
}

/**
 * Notes (or the error) for a priced batch.
 * @param maxPositions the model's max_position_embeddings; undefined = no stated limit (not checked)
 * @param allowOverCapacity true: over-limit batches become notes, else a UserError
 * @returns notes to print beside the price (empty when within limits)
 * @throws UserError naming the limit, the value and `--allow-over-capacity`
 */
export function checkLimits(
  model: string,
  batch: Batch,
  price: Pick<StepPrice, 'extrapolation_notes'>,
  maxPositions: number | undefined,
  allowOverCapacity: boolean,
): string[] {
  const problems: string[] = [];
  let longest = 0;
  for (const r of batch.requests) longest = Math.max(longest, r.computed_tokens + r.scheduled_tokens);
  const context = contextProblem(model, longest, maxPositions);
  if (context) problems.push(context);
  for (const n of price.extrapolation_notes)
    if (n.startsWith('memory:')) problems.push(`capacity: ${n.slice('memory:'.length).trim()}`);
  if (problems.length && !allowOverCapacity)
    throw new UserError(
      `${problems.join('; ')}; this batch cannot run as given (pass --allow-over-capacity to price it anyway, with a note)`,
    );
  return problems.map((p) => OVER_CAPACITY_NOTE + p);
}

/**
 * Coefficients a pricer read whose method is `copied` or `assumed` (b300/gb200 registries are
 * copies of b200), one note each: `name: copied from b200 (…)`.
 */
export function registryNotes(reg: ResolvedCoefficients): string[] {
  const out: string[] = [];
  for (const name of reg.usedNames()) {
    const e = reg.entries.get(name)!.entry;
    if (e.method === 'copied')
      out.push(
        `${name}: copied from ${e.evidence?.copy?.from ?? e.copied_from ?? 'another chip'} (not measured on this chip)`,
      );
    else if (e.method === 'assumed')
      out.push(
        `${name}: assumed, not measured (${(e.rationale ?? 'no rationale').split(/[.(]/)[0]!.trim().slice(0, 100)})`,
      );
  }
  return out;
}
