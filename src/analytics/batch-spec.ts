/**
 * Batch specs for `stepcal flops`, in the pricer's grammar (seed "What a batch is"):
 *   `decode:32@1024`      32 requests decoding 1 token against 1,024 cached tokens
 *   `decode:16x6@1024`    16 requests scheduling 6 positions each (verification)
 *   `prefill:4x2048`      4 prompts of 2,048 tokens, nothing cached
 *   `prefill:4x2048@512`  4 prompt chunks of 2,048 tokens on top of 512 computed tokens
 * Several specs may be joined with commas. Used until the pricer's `parseBatchSpec` is committed;
 * it returns the same request shape (src/pricer/types.ts `Request`).
 */
import { UserError } from '../common/errors.ts';
import type { PricerRequestLike } from './flops-graph.ts';

const SPEC = /^(decode|prefill):(\d+)(?:x(\d+))?(?:@(\d+))?$/;

/** Parse one spec. @throws UserError showing the accepted forms */
export function parseBatchSpecLocal(spec: string): PricerRequestLike[] {
  const m = SPEC.exec(spec.trim());
  if (!m) throw new UserError(`bad batch spec "${spec}" (expected decode:N@CTX, decode:NxT@CTX, prefill:NxTOKENS or prefill:NxTOKENS@CTX)`);
  const n = Number(m[2]);
  const ctx = m[4] === undefined ? 0 : Number(m[4]);
  const out: PricerRequestLike[] = [];
  if (m[1] === 'decode') {
    if (m[4] === undefined) throw new UserError(`bad batch spec "${spec}": a decode needs its context (decode:N@CTX)`);
    const t = m[3] === undefined ? 1 : Number(m[3]);
    for (let i = 0; i < n; i++) out.push({ scheduled_tokens: t, computed_tokens: ctx, prompt_tokens: ctx });
    return out;
  }
  if (m[3] === undefined) throw new UserError(`bad batch spec "${spec}": a prefill needs its token count (prefill:NxTOKENS[@CTX])`);
  const t = Number(m[3]);
  for (let i = 0; i < n; i++) out.push({ scheduled_tokens: t, computed_tokens: ctx, prompt_tokens: ctx + t });
  return out;
}
