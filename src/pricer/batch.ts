/**
 * Batch builders and the `--batch` spec parser (seed "What a batch is").
 */
import { UserError } from '../common/errors.ts';
import type { Batch, Request } from './types.ts';

/** `n` requests each decoding `tokens` (default 1) token(s) against `ctx` tokens already cached. */
export function decodeBatch(n: number, ctx: number, tokens = 1): Batch {
  const requests: Request[] = [];
  for (let i = 0; i < n; i++) requests.push({ scheduled_tokens: tokens, computed_tokens: ctx, prompt_tokens: ctx });
  return { requests };
}

/** `n` requests each scheduling `tokens` prompt tokens on top of `ctx` already-computed tokens (chunked prefill). */
export function prefillBatch(n: number, tokens: number, ctx = 0): Batch {
  const requests: Request[] = [];
  for (let i = 0; i < n; i++) requests.push({ scheduled_tokens: tokens, computed_tokens: ctx, prompt_tokens: ctx + tokens });
  return { requests };
}

const SPEC = /^(decode|prefill):(\d+)(?:x(\d+))?(?:@(\d+))?$/;

/**
 * Parse one batch spec into requests:
 *   `decode:32@1024`      32 requests decoding 1 token at 1,024 cached tokens
 *   `decode:32x2@1024`    32 requests scheduling 2 tokens each (speculative verify) at 1,024 cached
 *   `prefill:4x2048`      4 prompts of 2,048 tokens, nothing cached
 *   `prefill:4x2048@512`  4 chunks of 2,048 tokens on top of 512 cached tokens
 * @throws UserError showing the accepted forms.
 */
export function parseBatchSpec(spec: string): Request[] {
  const m = SPEC.exec(spec.trim());
  if (!m) throw new UserError(`bad batch spec "${spec}" (expected decode:N@CTX, decode:NxT@CTX, prefill:NxTOKENS or prefill:NxTOKENS@CTX)`);
  const n = Number(m[2]);
  const ctx = m[4] === undefined ? 0 : Number(m[4]);
  if (m[1] === 'decode') {
    if (m[4] === undefined) throw new UserError(`bad batch spec "${spec}": a decode needs its context (decode:N@CTX)`);
    return decodeBatch(n, ctx, m[3] === undefined ? 1 : Number(m[3])).requests;
  }
  if (m[3] === undefined) throw new UserError(`bad batch spec "${spec}": a prefill needs its token count (prefill:NxTOKENS[@CTX])`);
  return prefillBatch(n, Number(m[3]), ctx).requests;
}

/** Concatenate several specs into one batch. */
export function parseBatchSpecs(specs: readonly string[]): Batch {
  return { requests: specs.flatMap(parseBatchSpec) };
}
