/** serve's context-limit check (run.ts `checkContext`): prompt + output against max_position_embeddings. */
import { describe, expect, it } from 'vitest';
import { InputError, UserError } from '../../src/core/errors.ts';
import { checkLimits } from '../../src/pricer/limits.ts';
import { checkContext } from '../../src/serve/run.ts';
import type { RequestSpec } from '../../src/serve/types.ts';

const limit = { model: 'm', max_positions: 100, allow_over_capacity: false };
const req = (id: string, isl: number, osl: number, row?: number): RequestSpec => ({
  id,
  isl,
  osl,
  ...(row !== undefined ? { where: { file: 'r.csv', row } } : {}),
});

describe('checkContext', () => {
  it('passes prompt + output up to the limit, and checks nothing without a stated limit', () => {
    expect(checkContext([req('a', 90, 10), req('b', 1, 1)], limit)).toEqual([]);
    expect(checkContext([req('a', 1000, 10)], undefined)).toEqual([]);
  });

  it("refuses the first request over it with price's wording; a replayed one by file and lowest row", () => {
    const e = (() => {
      try {
        checkContext([req('a', 50, 10, 4), req('b', 95, 10, 7), req('c', 100, 1, 2)], limit);
      } catch (err) {
        return err;
      }
    })();
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).location).toEqual({ file: 'r.csv', row: 2 });
    expect((e as Error).message).toBe(
      'r.csv row 2: request "c" (ISL 100 + OSL 1; 2 of 3 requests over): context: a request reaches 101 tokens, ' +
        "over m's max_position_embeddings 100; it cannot be served as given (pass --allow-over-capacity to serve it anyway, with a note)",
    );
    // price words the same problem the same way
    const batch = { requests: [{ scheduled_tokens: 1, computed_tokens: 100 }] };
    expect(() => checkLimits('m', batch as never, { extrapolation_notes: [] }, 100, false)).toThrow(
      "context: a request reaches 101 tokens, over m's max_position_embeddings 100;",
    );
    const drawn = () => checkContext([req('r0', 99, 2)], limit);
    expect(drawn).toThrow(UserError);
    expect(drawn).toThrow(/^request "r0" \(ISL 99 \+ OSL 2; 1 of 1 requests over\): context: a request reaches 101/);
  });

  it('--allow-over-capacity: one note naming the longest request and how many are over', () => {
    const notes = checkContext([req('a', 150, 10), req('b', 10, 10), req('c', 200, 5)], {
      ...limit,
      allow_over_capacity: true,
    });
    expect(notes).toEqual([
      "over capacity (--allow-over-capacity): context: a request reaches 205 tokens, over m's max_position_embeddings 100 " +
        '(2 of 3 requests; the longest, "c": ISL 200 + OSL 5)',
    ]);
  });
});
