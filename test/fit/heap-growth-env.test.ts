/** `stepcal fit` refuses a bad STEPCAL_FIT_HEAP_GROWING_PERCENT before any work (src/cli/commands/fit.ts). */
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';

describe('STEPCAL_FIT_HEAP_GROWING_PERCENT', () => {
  afterEach(() => {
    delete process.env.STEPCAL_FIT_HEAP_GROWING_PERCENT;
  });

  it.each(['abc', '-5', '1.5', '100000'])('"%s" is a usage error (exit 2, one line naming the variable)', async (v) => {
    process.env.STEPCAL_FIT_HEAP_GROWING_PERCENT = v;
    const r = await runCli(['fit', 'hbm', '--chip', 'h200', '--check']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`STEPCAL_FIT_HEAP_GROWING_PERCENT must be an integer from 0 to 1000 (got "${v}")`);
  });
});
