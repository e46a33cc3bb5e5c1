/**
 * CsvChunk (src/measurements/cell-table.ts): a block of CSV bytes read cell by cell gives the values the
 * row-array reader gave (split on commas, papaparse for a quoted line, `textCell` / `numCell`
 * semantics), on hand cases and random blocks (fast-check); the decimal fast path equals `Number()`.
 */
import fc from 'fast-check';
import Papa from 'papaparse';
import { describe, expect, it } from 'vitest';
import { type CellTable, cellsOf, splitCsvBlock } from '../../src/measurements/cell-table.ts';

const header = ['a', 'b', 'c'];

/** The reference: the lines split as the row-array reader split them, seen through cellsOf. */
function reference(text: string): CellTable {
  const rows = text
    .split('\n')
    .map((l) => l.replace(/\r$/, ''))
    .filter((l) => l !== '')
    .map((l) => (l.includes('"') ? (Papa.parse<string[]>(l).data[0] ?? []) : l.split(',')));
  return cellsOf({ file: 'f.csv', header, rows });
}

function chunk(text: string) {
  const buf = Buffer.from(text, 'utf8');
  return splitCsvBlock('f.csv', header, buf, buf.length);
}

function expectSame(text: string): void {
  const got = chunk(text);
  const want = reference(text);
  expect(got.length).toBe(want.length);
  for (let r = 0; r < want.length; r++) {
    for (let j = 0; j < header.length; j++) {
      expect(got.text(r, j)).toBe(want.text(r, j));
      expect(Object.is(got.num(r, j), want.num(r, j))).toBe(true);
      expect(got.cell(r, j)).toBe(want.cell(r, j));
    }
  }
  // As rows of cells: the same cells under the header (a quoted line keeps its cells past it, as before).
  const head = (rows: unknown[][]) => rows.map((cells) => cells.slice(0, header.length));
  expect(head(got.toRawTable().rows)).toEqual(head(want.toRawTable().rows));
}

describe('CsvChunk', () => {
  it('reads short rows, empty cells, CR line ends, blank lines, extra cells and quoted lines', () => {
    const text = '1,x,2.5\r\n\n3,,\n4\n5,"q,1",-0\n 6 ,  y ,1e3\n7,µs,0x10,extra\n\r\n8,bf16,0.0098';
    expectSame(text);
    const c = chunk(text);
    expect(c.length).toBe(7);
    expect(c.cell(2, 1)).toBeUndefined(); // row "4": b and c missing
    expect(c.cell(1, 1)).toBe(''); // row "3,,": b present and empty
    expect(c.text(3, 1)).toBe('q,1');
    expect(Object.is(c.num(3, 2), -0)).toBe(true);
    expect(c.num(4, 0)).toBe(6);
    expect(c.text(4, 1)).toBe('y');
    expect(c.num(5, 2)).toBeNaN(); // 0x10: a hex literal is not a measured number (Number() would read 16)
    expect(c.num(6, 2)).toBe(0.0098);
  });

  it('a run of equal text cells reads as one string, and a new text after it is read anew', () => {
    const c = chunk('1,bf16,1\n2,bf16,1\n3,fp8,1\n4,bf16,1\n');
    expect([0, 1, 2, 3].map((r) => c.text(r, 1))).toEqual(['bf16', 'bf16', 'fp8', 'bf16']);
  });

  it('decimal cells equal Number() on random digit strings (Clinger fast path and its fallback)', () => {
    const decimal = fc
      .tuple(
        fc.boolean(),
        fc.stringMatching(/^[0-9]{0,18}$/),
        fc.option(fc.stringMatching(/^[0-9]{0,24}$/), { nil: undefined }),
      )
      .map(([neg, int, frac]) => `${neg ? '-' : ''}${int}${frac === undefined ? '' : `.${frac}`}`);
    fc.assert(
      fc.property(fc.array(decimal, { minLength: 1, maxLength: 50 }), (cells) => {
        const c = chunk(cells.map((x) => `${x},t,0`).join('\n'));
        expect(c.length).toBe(cells.length);
        for (let r = 0; r < cells.length; r++) {
          const s = cells[r]!;
          const want = s === '' ? NaN : Number(s);
          expect(Object.is(c.num(r, 0), want)).toBe(true);
        }
      }),
      { numRuns: 300, seed: 7 },
    );
  });

  it('equals the row-array reader on random blocks (fast-check)', () => {
    const cell = fc.oneof(
      fc.integer().map(String),
      fc.double({ noNaN: true }).map(String),
      fc.constantFrom('', ' ', 'bf16', ' fp8 ', 'µs', '1e-3', '"q"', '"a,b"', 'x"y'),
      fc.stringMatching(/^[a-z0-9. ]{0,4}$/),
    );
    const line = fc.array(cell, { minLength: 1, maxLength: 5 }).map((cells) => cells.join(','));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 40 }), fc.boolean(), (lines, crlf) => {
        expectSame(lines.join(crlf ? '\r\n' : '\n'));
      }),
      { numRuns: 200, seed: 11 },
    );
  });

  it('lines that repeat the leading cells of the line before: the same cells, and sameText / sameTexts say which columns hold one value (fast-check)', () => {
    // A small alphabet, so consecutive lines often share leading cells; ragged lines (missing and extra cells), blank lines.
    const cell = fc.constantFrom('', 'a', 'ab', 'b', '7', '07', '1.5', ' a');
    const line = fc.oneof(
      fc.array(cell, { minLength: 1, maxLength: 5 }).map((cells) => cells.join(',')),
      fc.constant(''),
    );
    // Most lines of a block start with the same one or two cells (as an AIConfigurator sweep's do).
    const lead = fc.array(cell, { minLength: 0, maxLength: 2 }).map((cells) => cells.map((c) => `${c},`).join(''));
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), lead, fc.nat(3), fc.boolean(), (rest, prefix, plain, crlf) => {
        const lines = rest.map((l, i) => (i % 4 < plain || l === '' ? l : prefix + l));
        const text = lines.join(crlf ? '\r\n' : '\n');
        expectSame(text);
        const got = chunk(text);
        const want = reference(text);
        for (let j = 0; j < header.length; j++) {
          // The reference: every row has cell j and its bytes are row 0's.
          const cells = Array.from({ length: want.length }, (_, r) => want.cell(r, j));
          const one = want.length > 0 && cells.every((c) => c !== undefined && c === cells[0]);
          expect(got.sameText(j)).toBe(one ? want.text(0, j) : undefined);
        }
        for (const js of [
          [0, 1],
          [0, 2],
          [1, 2],
        ])
          expect(got.sameTexts(js)).toEqual(js.map((j) => got.sameText(j)));
      }),
      { numRuns: 400, seed: 23 },
    );
  });
});
