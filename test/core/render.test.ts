import fc from 'fast-check';
import Papa from 'papaparse';
import { describe, expect, it } from 'vitest';
import { csvHeader, csvRowLines, writeCsv } from '../../src/core/render/csv.ts';
import {
  fmtDec,
  fmtFixed,
  fmtGrouped,
  fmtInt,
  fmtInterval,
  fmtNum,
  fmtPercent,
  fmtSig,
  fmtSigExp,
  fmtTick,
} from '../../src/core/render/format.ts';
import { chart, wrapWords } from '../../src/core/render/svg.ts';
import { htmlTable, markdownTable, renderTable, tableLines, textTable } from '../../src/core/render/table.ts';

describe('core/render/format', () => {
  it('fmtDec keeps toFixed exactly (signed zero included) and prints a dash for missing values', () => {
    expect(fmtDec(-0.04, 1)).toBe('-0.0');
    expect(fmtDec(2.345, 2)).toBe((2.345).toFixed(2));
    expect(fmtDec(undefined, 1)).toBe('–');
    expect(fmtDec(NaN, 3)).toBe('–');
    expect(fmtDec(Infinity, 1, 'n/a')).toBe('n/a');
  });
  it('fmtFixed drops the sign of a rounded zero; fmtNum drops trailing zeros', () => {
    expect(fmtFixed(61, 1)).toBe('61.0');
    expect(fmtFixed(-0.01, 1)).toBe('0.0');
    expect(fmtFixed(-1.25, 1)).toBe('-1.3');
    expect(fmtNum(19.2)).toBe('19.2');
    expect(fmtNum(15)).toBe('15');
    expect(fmtNum(5.500000001)).toBe('5.5');
    expect(fmtNum(-0.0001)).toBe('0');
  });
  it('fmtSig and fmtSigExp: significant digits, exponent outside [expBelow, expAbove)', () => {
    expect(fmtSig(0.95841, 3)).toBe('0.958');
    expect(fmtSig(40000, 3)).toBe('40000');
    const o3 = { expAbove: 1e5, expBelow: 1e-3, expDigits: 2, compact: true };
    expect(fmtSigExp(1_601_000, 3, o3)).toBe('1.60e6');
    expect(fmtSigExp(6.74e-6, 3, o3)).toBe('6.74e-6');
    expect(fmtSigExp(0, 3, o3)).toBe('0');
    expect(fmtSigExp(99_999, 3, o3)).toBe('100000');
    expect(fmtSigExp(123456, 6, { expAbove: 1e5, expBelow: 1e-3, expDigits: 4 })).toBe('1.2346e+5');
    expect(fmtSigExp(NaN, 3, o3)).toBe('NaN');
    expect(fmtInterval([1, 2.5], (x) => fmtSig(x, 2))).toBe('[1, 2.5]');
    expect(fmtInterval(undefined, String)).toBe('–');
  });
  it('integers, grouped rates, percentages and ticks', () => {
    expect(fmtInt(285714.5, true)).toBe('285,715');
    expect(fmtInt(-2.5)).toBe('-3');
    expect(fmtGrouped(19200, 1)).toBe('19,200');
    expect(fmtGrouped(2000 / 9, 1)).toBe('222.2');
    expect(fmtPercent(0.00086)).toBe('0.086 %');
    expect(fmtPercent(0.049)).toBe('4.9 %');
    expect([0, 0.0123, 250, 12_500, 2_500_000, 3e9].map(fmtTick)).toEqual(['0', '0.012', '250', '12.5k', '2.5M', '3G']);
  });
});

describe('core/render/table', () => {
  it('text table: widths from header, cells and minimum width; trailing blanks trimmed unless asked', () => {
    const cols = [
      { header: 'name', align: 'left' as const },
      { header: 'µs', width: 4 },
    ];
    expect(
      tableLines(cols, [
        ['a', '1.5'],
        ['bbbbb', '10'],
      ]),
    ).toEqual(['name     µs', 'a       1.5', 'bbbbb    10']);
    expect(tableLines([{ header: 'x', align: 'left', width: 3 }], [['y']], { trimEnd: false, gap: '|' })).toEqual([
      'x  ',
      'y  ',
    ]);
    expect(renderTable(cols, [], { header: true })).toBe('name    µs\n');
    expect(textTable({ header: ['k', 'v'], rows: [['long', '1']] })).toEqual(['k     v', 'long  1']);
  });
  it('markdown and HTML tables escape what would break them', () => {
    expect(markdownTable({ header: ['a (µs)', 'b'], rows: [['x|y', '2']] })).toBe(
      '| a (µs) | b |\n|---|---|\n| x\\|y | 2 |\n',
    );
    expect(htmlTable({ header: ['<a>'], rows: [['&']] }, 'c')).toBe(
      '<table class="c"><thead><tr><th>&lt;a&gt;</th></tr></thead><tbody>\n<tr><td>&amp;</td></tr>\n</tbody></table>\n',
    );
  });
});

describe('core/render/csv', () => {
  const cols = ['a', 'b', 'c'];
  const papa = (rows: ReadonlyArray<Record<string, unknown>>) =>
    `${Papa.unparse({ fields: cols, data: rows.map((r) => cols.map((c) => r[c])) }, { newline: '\n' })}\n`;
  it('writes exactly what papaparse writes: hand cases with every quoting rule', () => {
    const rows = [
      { a: 1, b: 'x', c: undefined },
      { a: -0, b: ' lead', c: null },
      { a: 1e21, b: 'a,b', c: 'q"t' },
      { a: 'line\nbreak', b: '\ufeffbom', c: true },
      { a: '', b: 'trail ', c: 0.1 + 0.2 },
    ];
    expect(writeCsv(cols, rows)).toBe(
      'a,b,c\n1,x,\n0," lead",\n1e+21,"a,b","q""t"\n"line\nbreak","\ufeffbom",true\n,"trail ",0.30000000000000004\n',
    );
    expect(writeCsv(cols, rows)).toBe(papa(rows));
    expect(writeCsv(cols, [])).toBe('a,b,c\n\n'); // papaparse's header-only output ends with its own newline
  });
  it('equals papaparse on random rows of numbers and strings (fast-check)', () => {
    const cell = fc.oneof(
      fc.double({ noNaN: true }),
      fc.integer(),
      fc.string({ maxLength: 6 }),
      fc.constant(undefined),
      fc.constantFrom(',', '"', ' ', '\r', '\n'),
    );
    fc.assert(
      fc.property(fc.array(fc.record({ a: cell, b: cell, c: cell }), { maxLength: 30 }), (rows) => {
        expect(writeCsv(cols, rows)).toBe(papa(rows));
      }),
      { numRuns: 300, seed: 7 },
    );
  });
  it('csvHeader + csvRowLines over column readers, in pieces, equal writeCsv (fast-check)', () => {
    const cell = fc.oneof(
      fc.double({ noNaN: true }),
      fc.integer(),
      fc.string({ maxLength: 6 }),
      fc.constant(undefined),
    );
    fc.assert(
      fc.property(fc.array(fc.record({ a: cell, b: cell, c: cell }), { minLength: 1, maxLength: 40 }), (rows) => {
        const readers = cols.map((k) => (i: number) => (rows[i] as Record<string, unknown>)[k]);
        const cut = rows.length >> 1; // two pieces, as the streaming writer feeds them to gzip
        const text = csvHeader(cols) + csvRowLines(readers, 0, cut) + csvRowLines(readers, cut, rows.length);
        expect(text).toBe(writeCsv(cols, rows));
      }),
      { numRuns: 200, seed: 11 },
    );
  });
});

describe('core/render/svg chart', () => {
  const pts: Array<[number, number]> = [
    [1, -0.62],
    [10, 0.05],
    [1000, 0.31],
  ];
  it('a linear axis through 0 labels its tick 0, not the running sum’s rounding error', () => {
    // Ticks from −0.6 in steps of 0.2: −0.6 + 3 · 0.2 = 5.55e-17 in doubles; the tick must read 0.
    const svg = chart([{ label: 'r', points: pts, style: 'scatter' }], {
      title: 't',
      x_label: 'x',
      y_label: 'y',
      x_log: true,
    });
    expect(svg).toMatch(/>0<\/text>/);
    expect(svg).not.toMatch(/e-1[0-9]/);
  });
  it('a title wider than the figure is centred on it at a smaller size; a short one keeps 13 px over the plot', () => {
    const long = 'x'.repeat(120); // 120 × 7.8 px = 936 px > 720: size 13 · 704 / 936 = 9.8 px, centred at 360
    const a = chart([{ label: 'r', points: pts, style: 'scatter' }], { title: long, x_label: 'x', y_label: 'y' });
    // No space to break it at: one line at 9.8 px.
    expect(a).toContain(`<text x="360" y="18" text-anchor="middle" font-size="9.8" font-weight="bold">${long}</text>`);
    // With spaces, a title that would need under 10 px breaks at the space nearest its middle: two halves of
    // 59 characters (59 · 7.8 = 460.2 px fits 704 px: 13 px), the second line 13 · 1.15 = 14.95 → 14.9 px lower.
    const words = `${'a'.repeat(59)} ${'b'.repeat(59)}`;
    const c = chart([{ label: 'r', points: pts, style: 'scatter' }], { title: words, x_label: 'x', y_label: 'y' });
    expect(c).toContain(
      `<text x="360" y="14" text-anchor="middle" font-size="13" font-weight="bold"><tspan x="360" dy="0">${'a'.repeat(59)}</tspan><tspan x="360" dy="14.9">${'b'.repeat(59)}</tspan></text>`,
    );
    // 'short' is 5 × 7.8 = 39 px: fits around the plot's centre (720 / 2 − 170 / 2 = 275).
    const b = chart([{ label: 'r', points: pts, style: 'scatter' }], { title: 'short', x_label: 'x', y_label: 'y' });
    expect(b).toContain('<text x="275" y="18" text-anchor="middle" font-size="13" font-weight="bold">short</text>');
  });
  it('legend labels wrap at spaces to the legend column (170 − 31 px at 6.1 px a glyph: 22 characters)', () => {
    expect(wrapWords('fit at each row: floor + p·item + work/rate(p)', 22)).toEqual([
      'fit at each row: floor',
      '+ p·item +',
      'work/rate(p)',
    ]);
    expect(wrapWords('a-very-long-single-word-label', 10)).toEqual(['a-very-long-single-word-label']);
    const svg = chart([{ label: 'fit at each row: floor + p·item + work/rate(p)', points: pts, style: 'scatter' }], {
      title: 't',
      x_label: 'x',
      y_label: 'y',
    });
    // Three tspans, 13 px apart, at the legend's text column (70 + 480 + 12 + 15 = 577).
    expect(svg).toContain(
      '<tspan x="577" dy="0">fit at each row: floor</tspan><tspan x="577" dy="13">+ p·item +</tspan><tspan x="577" dy="13">work/rate(p)</tspan>',
    );
  });
  it('dots at the data extremes sit inside the frame (3 % of the span added), and a dashed line gets a dashed swatch', () => {
    // x from 2 to 8 on a linear axis: padded by 0.18 each side, so x = 2 maps inside the 70 px frame:
    // 70 + (2 − 1.82) / (8.18 − 1.82) · 480 = 83.6.
    const svg = chart(
      [
        {
          label: 'dots',
          points: [
            [2, 1],
            [8, 3],
          ],
          style: 'scatter',
        },
        {
          label: 'dashed',
          points: [
            [2, 1],
            [8, 3],
          ],
          style: 'line',
          dash: '4 3',
        },
      ],
      { title: 't', x_label: 'x', y_label: 'y' },
    );
    expect(svg).toContain('<circle cx="83.6"');
    expect(svg).toMatch(
      /<line x1="562" y1="[0-9.]+" x2="574" y2="[0-9.]+" stroke="#d62728" stroke-width="2" stroke-dasharray="4 3"\/>/,
    );
  });
  it('a log axis under 2.5 decades ticks at 1, 2 and 5 × each power of ten; a wider one at the powers only', () => {
    const labels = (svg: string) => [...svg.matchAll(/text-anchor="middle">([^<]+)<\/text>/g)].map((m) => m[1]);
    const narrow = chart(
      [
        {
          label: 'r',
          points: [
            [1, 1],
            [200, 2],
          ],
          style: 'line',
        },
      ],
      { title: 't', x_label: 'x', y_label: 'y', x_log: true },
    );
    expect(labels(narrow)).toEqual(expect.arrayContaining(['1', '2', '5', '10', '20', '50', '100', '200']));
    const wide = chart(
      [
        {
          label: 'r',
          points: [
            [1, 1],
            [1e5, 2],
          ],
          style: 'line',
        },
      ],
      { title: 't', x_label: 'x', y_label: 'y', x_log: true },
    );
    expect(labels(wide)).not.toContain('2');
    expect(labels(wide)).toEqual(expect.arrayContaining(['1', '10', '100', '1000', '10k', '100k']));
  });
});
