/**
 * One held-out row in another unit (step-units.ts `checkStepRowUnits`): a row whose measured µs was
 * written in ms sits ×1000 under its own priced work and is refused naming file, row and column, while
 * no row of the shipped splitwise step files comes near the bound (priced with the real pricer on each
 * chip's registry).
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { InputError } from '../../src/core/errors.ts';
import { readText } from '../../src/core/io/fs.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { priceRows } from '../../src/validate/priced.ts';
import { defaultValidationDeps } from '../../src/validate/pricing.ts';
import { validateRows } from '../../src/validate/run.ts';
import { checkStepRowUnits, STEP_ROW_FACTOR } from '../../src/validate/step-units.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import { BASE, fakePricer, stepsCsv } from './fake-pricer.ts';

const work = (us: number) => ({
  no_overlap_nohost_us: us,
  cm_overlap_nohost_us: 0.9 * us,
  overlap_nohost_us: 0.8 * us,
});

function thrown(f: () => void): InputError {
  try {
    f();
  } catch (e) {
    if (e instanceof InputError) return e;
    throw e;
  }
  throw new Error('expected an InputError');
}

describe('one step row in another unit', () => {
  it('refuses a row under 1/50 of its fastest priced work without host (hand values)', () => {
    const row = (measured_us: number) => [{ file: 's.csv', row: 7, measured_us }];
    // fastest composition 0.8 · 50,000 = 40,000 µs: the bound is 800 µs
    expect(() => checkStepRowUnits(row(800), [work(50_000)])).not.toThrow();
    const fast = thrown(() => checkStepRowUnits(row(40), [work(50_000)]));
    expect(fast.location).toEqual({ file: 's.csv', row: 7, column: 'measured_us' });
    expect(fast.message).toBe(
      's.csv row 7 column "measured_us": measured 40 µs is 1/1,000 of this row\'s priced work (40,000 µs at the ' +
        "registry's rates, without host, the fastest composition); no step runs under 1/50 of it, so this row " +
        'alone is in another unit: ms instead of µs?',
    );
    // a row far slower than its price is not judged (a host cost the registry lacks, not a unit)
    expect(() => checkStepRowUnits(row(1e9), [work(50_000)])).not.toThrow();
    // a row priced at 0 (nothing to compare) is not judged
    expect(() => checkStepRowUnits(row(1), [work(0)])).not.toThrow();
  });

  it('validateRows refuses one row of a file written in ms, though the file median is fine', () => {
    const K = { a: 1000, b: 2, c: 500, d: 0.01, h: 50 };
    const step = { ...BASE, kind: 'step', prefill_requests: 1, decode_requests: 0, decode_context_tokens: 0 };
    // each row measured at its NoOverlap price a + b·t + h; row 3 (t = 2048: work 1000 + 2·2048 = 5,096 µs) in ms
    const rs = [512, 1024, 2048, 4096].map((t, i) => ({
      ...step,
      prefill_tokens: t,
      measured_us: (K.a + K.b * t + K.h) / (i === 2 ? 1000 : 1),
    }));
    const rows = parseStepsCsv(stepsCsv(rs), 'm.steps.csv').rows;
    const deps = { pricerFor: () => fakePricer(K) };
    expect(() => validateRows(rows, { chip: 'h100' }, deps)).toThrow(
      /^m\.steps\.csv row 3 column "measured_us": measured 5\.146 µs is 1\/990\.3 of this row's priced work \(5,096 µs at .*ms instead of µs\?$/,
    );
    rs[2]!.measured_us *= 1000;
    expect(validateRows(parseStepsCsv(stepsCsv(rs), 'm.steps.csv').rows, { chip: 'h100' }, deps).rows).toHaveLength(4);
  });

  for (const chip of ['h100', 'a100']) {
    it(`never fires on the shipped ${chip} splitwise steps, with a 4× margin`, () => {
      const file = path.join(REPO_ROOT, 'measurements', chip, 'splitwise.steps.csv');
      const rows = parseStepsCsv(readText(file), file).rows;
      const registry = loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
      const P = priceRows(rows, {}, defaultValidationDeps(registry));
      expect(() => checkStepRowUnits(P.rows, P.priced)).not.toThrow();
      const fastest = Math.min(
        ...P.priced.map(
          (p, i) =>
            rows[i]!.measured_us / Math.min(p.no_overlap_nohost_us, p.cm_overlap_nohost_us, p.overlap_nohost_us),
        ),
      );
      expect(rows.length).toBeGreaterThan(200);
      expect(fastest).toBeGreaterThan(4 / STEP_ROW_FACTOR);
      // and one row in ms is refused, naming the file's row
      const slipped = rows.map((r, i) => (i === 0 ? { ...r, measured_us: r.measured_us / 1000 } : r));
      expect(() => checkStepRowUnits(slipped, P.priced)).toThrow(/row 1 column "measured_us": .*ms instead of µs\?/);
    }, 60_000);
  }
});
