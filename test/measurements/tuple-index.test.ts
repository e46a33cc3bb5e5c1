/**
 * TupleIndex (src/measurements/tuple-index.ts) against the joined-string keys it replaced: the same ids
 * in first-seen order on random tables (fast-check), through growth, with strings that a join without
 * a terminator would confuse.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RowColumns } from '../../src/measurements/row-columns.ts';
import { TupleIndex } from '../../src/measurements/tuple-index.ts';

/** Reference: ids by a JSON key of the tuple (exact for strings and numbers). */
function reference(rows: ReadonlyArray<Record<string, unknown>>, cols: readonly string[]): number[] {
  const ids = new Map<string, number>();
  return rows.map((r) => {
    const k = JSON.stringify(cols.map((c) => r[c]));
    let id = ids.get(k);
    if (id === undefined) {
      id = ids.size;
      ids.set(k, id);
    }
    return id;
  });
}

describe('TupleIndex', () => {
  it('gives the reference ids on random tables, across table growth (fast-check)', () => {
    const row = fc.record({
      dtype: fc.constantFrom('bf16', 'fp8', 'fp8_block'),
      m: fc.integer({ min: 1, max: 40 }),
      n: fc.integer({ min: 1, max: 40 }),
      x: fc.constantFrom(0.5, 1, 1.5, -0, 1e-9),
    });
    fc.assert(
      fc.property(fc.array(row, { minLength: 0, maxLength: 3000 }), (rows) => {
        const cols = ['dtype', 'm', 'n', 'x'];
        const idx = new TupleIndex(cols, rows);
        const ids = rows.map((_, i) => idx.add(i));
        const ref = reference(rows, cols);
        expect(ids).toEqual(ref);
        expect(idx.size).toBe(new Set(ref).size);
        // The same rows as RowColumns (text hashed and compared by dictionary id): the same ids.
        const columns = new RowColumns();
        for (const r of rows) columns.push(r);
        const byId = new TupleIndex(cols, columns);
        expect(rows.map((_, i) => byId.add(i))).toEqual(ref);
      }),
      { numRuns: 40, seed: 12 },
    );
  });

  it('keeps ("ab", "c") and ("a", "bc") apart, and sets `added` only for a new tuple', () => {
    const rows = [
      { a: 'ab', b: 'c' },
      { a: 'a', b: 'bc' },
      { a: 'ab', b: 'c', z: 9 },
    ];
    const idx = new TupleIndex(['a', 'b'], rows);
    expect(idx.add(0)).toBe(0);
    expect(idx.added).toBe(true);
    expect(idx.add(1)).toBe(1);
    expect(idx.add(2)).toBe(0); // columns outside the tuple do not count
    expect(idx.added).toBe(false);
    expect(idx.size).toBe(2);
  });

  it('100,000 distinct tuples: ids 0…99,999 in order, each found again', () => {
    const rows = Array.from({ length: 100_000 }, (_, i) => ({ m: i % 317, n: Math.floor(i / 317) }));
    // Every 997th row again at the end, as a copy: found by value, not by identity.
    for (let i = 0; i < 100_000; i += 997) rows.push({ ...rows[i]! });
    const idx = new TupleIndex(['m', 'n'], rows);
    for (let i = 0; i < 100_000; i++) expect(idx.add(i)).toBe(i);
    for (let j = 100_000, i = 0; j < rows.length; j++, i += 997) expect(idx.add(j)).toBe(i);
    expect(idx.size).toBe(100_000);
  });
});
