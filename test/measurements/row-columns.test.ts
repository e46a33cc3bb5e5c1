/**
 * RowColumns (src/measurements/row-columns.ts): rows read back equal the rows pushed (keys, order and
 * values bit for bit) through every storage widening, on hand cases and random rows (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { csvRowLines } from '../../src/core/render/csv.ts';
import { RowColumns, readerOf } from '../../src/measurements/row-columns.ts';

describe('RowColumns', () => {
  it('round-trips hand rows through int → num → any widening, absent keys and -0', () => {
    const rows: Array<Record<string, unknown>> = [
      { chip: 'h200', m: 1, lat: 5 },
      { chip: 'h200', m: 2 ** 31, lat: 5.5 }, // m leaves int32: widens to float64
      { chip: 'b200', m: 3, lat: -0, extra: 'x' }, // a new key: absent in the rows before
      { chip: 'b200', lat: 7 }, // m absent
      { chip: 7, m: 4, lat: 'n/a' }, // chip and lat widen to plain arrays
    ];
    const c = new RowColumns();
    for (const r of rows) c.push(r);
    expect(c.length).toBe(5);
    expect([...c]).toEqual(rows);
    expect(Object.is(c.at(2)!.lat, -0)).toBe(true);
    expect(Object.keys(c.at(3)!)).toEqual(['chip', 'lat']);
    expect(c.at(5)).toBeUndefined();
    expect(c.at(-1)).toBeUndefined();
  });

  it('text ids widen from one byte to int32 at the 257th distinct string, values intact', () => {
    const c = new RowColumns();
    for (let i = 0; i < 600; i++) c.push({ s: `v${i % 300}`, k: i });
    expect(c.at(0)).toEqual({ s: 'v0', k: 0 });
    expect(c.at(255)).toEqual({ s: 'v255', k: 255 });
    expect(c.at(256)).toEqual({ s: 'v256', k: 256 });
    expect(c.at(599)).toEqual({ s: 'v299', k: 599 });
  });

  it('equals its input on random rows, past several capacity doublings (fast-check)', () => {
    const value = fc.oneof(
      fc.integer(),
      fc.double(),
      fc.constantFrom('bf16', 'fp8', '', 'a,b', ' x', 'µs'),
      fc.string({ maxLength: 3 }),
    );
    const row = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), value);
    fc.assert(
      fc.property(fc.array(row, { maxLength: 2500 }), (rows) => {
        const c = new RowColumns();
        for (const r of rows) c.push(r);
        expect(c.length).toBe(rows.length);
        for (let i = 0; i < rows.length; i++) expect(c.at(i)).toEqual(rows[i]);
        // A column reader reads what `at` builds, absent keys as undefined, on columns and arrays alike.
        for (const k of ['a', 'b', 'c', 'd', 'z']) {
          const fromColumns = readerOf(c, k);
          const fromArray = readerOf(rows, k);
          for (let i = 0; i < rows.length; i++) {
            expect(Object.is(fromColumns(i), rows[i]![k])).toBe(true);
            expect(Object.is(fromArray(i), rows[i]![k])).toBe(true);
          }
        }
        // The CSV lines written from the typed columns as bytes equal the generic writer's, in pieces.
        const cols = ['d', 'a', 'z', 'b', 'c'];
        const cut = rows.length >> 1;
        const bytes = Buffer.concat([c.csvLines(cols, 0, cut), c.csvLines(cols, cut, rows.length)]).toString('utf8');
        expect(bytes).toBe(
          csvRowLines(
            cols.map((k) => readerOf(rows, k)),
            0,
            rows.length,
          ),
        );
      }),
      { numRuns: 25, seed: 3 },
    );
  });
});

describe('RowColumns.csvLines line prefix', () => {
  it('repeats the leading text cells of the line before only while their ids repeat; a quoted cell breaks the run', () => {
    const rows: Array<Record<string, unknown>> = [];
    const lanes = ['vllm-0.24.0', 'sglang', 'needs,quote', 'sglang'];
    for (let i = 0; i < 40; i++)
      rows.push({ chip: 'h200', lane: lanes[(i >> 3) % 4], dtype: i % 5 === 0 ? 'fp8' : 'bf16', m: i, lat: i / 3 });
    const c = new RowColumns();
    for (const r of rows) c.push(r);
    const cols = ['chip', 'lane', 'dtype', 'm', 'lat'];
    for (const [a, b] of [
      [0, 40],
      [7, 9],
      [16, 25],
    ] as const)
      expect(c.csvLines(cols, a, b).toString('utf8')).toBe(
        csvRowLines(
          cols.map((k) => (i: number) => rows[a + i]![k]),
          0,
          b - a,
        ),
      );
  });
});

describe('RowColumns.sink', () => {
  it('a text column past 256 distinct values keeps every value through capacity doublings (int32 ids grow)', () => {
    const c = new RowColumns();
    const o = c.sink(['s', 'k']);
    for (let i = 0; i < 5000; i++) {
      o.text(0, `v${i % 700}`);
      o.int(1, i);
      o.end();
    }
    for (const i of [0, 255, 256, 1023, 1024, 2047, 2048, 4999]) expect(c.at(i)).toEqual({ s: `v${i % 700}`, k: i });
  });

  it('bulk rows equal the same rows cell by cell: text fills, int32 and float64 copies, an integer-valued first latency', () => {
    const rows = (n: number, from: number) =>
      Array.from({ length: n }, (_, i) => ({ s: from ? 'b' : 'a', m: from + i, lat: (from + i) / 4 }));
    const one = new RowColumns();
    const cellwise = one.sink(['s', 'm', 'lat']);
    const many = new RowColumns();
    const bulk = many.sink(['s', 'm', 'lat']);
    for (const [n, from] of [
      [3, 0],
      [1500, 3],
      [0, 9],
      [2000, 1503],
    ] as const) {
      const list = rows(n, from);
      for (const r of list) {
        cellwise.text(0, r.s);
        cellwise.int(1, r.m);
        cellwise.num(2, r.lat);
        cellwise.end();
      }
      bulk.bulk!(n, [from ? 'b' : 'a', Int32Array.from(list, (r) => r.m), Float64Array.from(list, (r) => r.lat)]);
    }
    expect(many.length).toBe(3503);
    expect([...many]).toEqual([...one]);
    expect(many.kindOf('lat')).toBe('num'); // 0 then 0.25: widened from int as cell by cell
  });
});
