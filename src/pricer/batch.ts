/**
 * Batch builders and the `--batch` spec parser (seed "What a batch is").
 */
import { UserError } from '../core/errors.ts';
import type { Batch, ColumnBatch, Request } from './types.ts';

/** `n` requests each decoding `tokens` (default 1) token(s) against `ctx` tokens already cached. */
export function decodeBatch(n: number, ctx: number, tokens = 1): Batch {
  const requests: Request[] = [];
  for (let i = 0; i < n; i++) requests.push({ scheduled_tokens: tokens, computed_tokens: ctx, prompt_tokens: ctx });
  return { requests };
}

/** `n` requests each scheduling `tokens` prompt tokens on top of `ctx` already-computed tokens (chunked prefill). */
export function prefillBatch(n: number, tokens: number, ctx = 0): Batch {
  const requests: Request[] = [];
  for (let i = 0; i < n; i++)
    requests.push({ scheduled_tokens: tokens, computed_tokens: ctx, prompt_tokens: ctx + tokens });
  return { requests };
}

/** The columns of `batch` (scheduled and computed tokens per row, in order): it prices identically (types.ts ColumnBatch). */
export function columnsOf(batch: Batch): ColumnBatch {
  const reqs = batch.requests;
  const scheduled = new Float64Array(reqs.length);
  const computed = new Float64Array(reqs.length);
  for (let i = 0; i < reqs.length; i++) {
    scheduled[i] = reqs[i]!.scheduled_tokens;
    computed[i] = reqs[i]!.computed_tokens;
  }
  return { n: reqs.length, scheduled, computed };
}

const SPEC = /^(decode|prefill):(\d+)(?:x(\d+))?(?:@(\d+))?$/;

/**
 * Parse one batch spec into requests:
 *   `decode:32@1024`      32 requests decoding 1 token at 1,024 cached tokens
 *   `decode:32x2@1024`    32 requests scheduling 2 tokens each (speculative verify) at 1,024 cached
 *   `prefill:4x2048`      4 prompts of 2,048 tokens, nothing cached
 *   `prefill:4x2048@512`  4 chunks of 2,048 tokens on top of 512 cached tokens
 * @throws UserError showing the accepted forms, when N or T is 0 (the spec schedules nothing), or when a
 *   decode's CTX is 0 (nothing cached to decode against: that step is a prefill).
 */
export function parseBatchSpec(spec: string): Request[] {
  const m = SPEC.exec(spec.trim());
  if (!m)
    throw new UserError(
      `bad batch spec "${spec}" (expected decode:N@CTX, decode:NxT@CTX, prefill:NxTOKENS or prefill:NxTOKENS@CTX)`,
    );
  const n = Number(m[2]);
  const ctx = m[4] === undefined ? 0 : Number(m[4]);
  const tokens = m[3] === undefined ? undefined : Number(m[3]);
  // A spec that schedules nothing is a typo, not a request for an empty step (the library still
  // prices an explicitly empty batch: host only).
  if (n < 1) throw new UserError(`bad batch spec "${spec}": the request count N must be at least 1`);
  if (tokens !== undefined && tokens < 1)
    throw new UserError(`bad batch spec "${spec}": the tokens per request T must be at least 1`);
  if (m[1] === 'decode') {
    if (m[4] === undefined) throw new UserError(`bad batch spec "${spec}": a decode needs its context (decode:N@CTX)`);
    // A decode reads a KV cache; with nothing cached the step is the prompt's first chunk, a prefill.
    if (ctx < 1)
      throw new UserError(
        `bad batch spec "${spec}": context must be ≥ 1 for decode (CTX is the tokens already cached; with none cached it is a prefill, prefill:NxT)`,
      );
    return decodeBatch(n, ctx, tokens ?? 1).requests;
  }
  if (tokens === undefined)
    throw new UserError(`bad batch spec "${spec}": a prefill needs its token count (prefill:NxTOKENS[@CTX])`);
  return prefillBatch(n, tokens, ctx).requests;
}

/** Concatenate several specs into one batch. */
export function parseBatchSpecs(specs: readonly string[]): Batch {
  return { requests: specs.flatMap(parseBatchSpec) };
}
