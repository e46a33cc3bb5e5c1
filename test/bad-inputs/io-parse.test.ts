/**
 * Bad-input corpus, parsing and output-path group (fixB review): the steps reader is told the comma
 * (a `|` in the `group` cells must not make papaparse guess `|`), a short row is named with its field
 * count, count columns are whole numbers, a truncated `.gz` or a folder keeps its reason, and an
 * output folder that cannot be created fails at once (Node's recursive mkdir loops forever under /proc).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { makeDirs } from '../../src/core/io/staging.ts';
import { parseStepsCsv } from '../../src/measurements/store.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

const STEPS_TEXT = readFileSync(path.join(REPO_ROOT, 'measurements', 'h100', 'splitwise.steps.csv'), 'utf8');
const [HEADER, ...LINES] = STEPS_TEXT.trim().split('\n') as [string, ...string[]];
const COLS = HEADER.split(',');
/** The first 12 h100 held-out rows (their `group` cells hold `|`), `f` applied to data row r (1-based). */
const stepsText = (f: (cells: string[], r: number) => void = () => {}): string =>
  [
    HEADER,
    ...LINES.slice(0, 12).map((l, i) => {
      const c = l.split(',');
      f(c, i + 1);
      return c.join(',');
    }),
  ]
    .map((l) => `${l}\n`)
    .join('');
const validate = (file: string) => (t: string) => [
  'validate',
  '--chip',
  'h100',
  '--steps',
  path.join(t, file),
  '--no-report',
];

describe('the steps reader is told the delimiter', () => {
  it('reads `|` in group cells as text: 12 rows, the group kept whole', () => {
    const { rows } = parseStepsCsv(stepsText(), 's.steps.csv');
    expect(rows).toHaveLength(12);
    expect(rows[0]!.group).toBe('llama-2-70b|h100|tp2|p512|o128|prefill');
    expect(rows[0]!.prefill_tokens).toBe(512);
  });
  it('names row 9 and the field count of a row cut short to 5 fields', () => {
    const text = stepsText((c, r) => {
      if (r === 9) c.splice(5);
    });
    expect(() => parseStepsCsv(text, 's.steps.csv')).toThrow(
      `s.steps.csv row 9: expected ${COLS.length} fields (as in the header, row 0), got 5`,
    );
  });
});

const CASES: BadInputCase[] = [
  {
    name: 'held-out steps with row 9 cut to 5 fields (`|` in group)',
    setup: (t) =>
      writeFileSync(
        path.join(t, 's.steps.csv'),
        stepsText((c, r) => {
          if (r === 9) c.splice(5);
        }),
      ),
    args: validate('s.steps.csv'),
    code: 1,
    message: `s.steps.csv row 9: expected ${COLS.length} fields (as in the header, row 0), got 5`,
  },
  {
    name: 'held-out steps with prefill_tokens 1.5 (a fractional count)',
    setup: (t) =>
      writeFileSync(
        path.join(t, 's.steps.csv'),
        stepsText((c, r) => {
          if (r === 3) c[COLS.indexOf('prefill_tokens')] = '1.5';
        }),
      ),
    args: validate('s.steps.csv'),
    code: 1,
    message: 's.steps.csv row 3 column "prefill_tokens": expected a whole number (a count), got 1.5',
  },
  {
    name: 'held-out steps with batch 2.5 on a static batch',
    setup: (t) => {
      const text = stepsText().replace(/\n$/, '');
      const row = COLS.map(
        (c) =>
          ({
            model: 'llama-2-70b',
            chip: 'h100',
            tp: '2',
            weight_dtype: 'fp16',
            engine: 'splitwise',
            kind: 'static_batch',
            batch: '2.5',
            prompt_tokens: '512',
            output_tokens: '128',
            measured_us: '1000',
            source: 'x',
          })[c] ?? '',
      );
      writeFileSync(path.join(t, 's.steps.csv'), `${text}\n${row.join(',')}\n`);
    },
    args: validate('s.steps.csv'),
    code: 1,
    message: 's.steps.csv row 13 column "batch": expected a whole number (a count), got 2.5',
  },
  {
    name: 'truncated .steps.csv.gz keeps its reason',
    setup: (t) => {
      const gz = gzipSync(Buffer.from(stepsText()));
      writeFileSync(path.join(t, 'trunc.steps.csv.gz'), gz.subarray(0, Math.floor(gz.length / 2)));
    },
    args: validate('trunc.steps.csv.gz'),
    code: 1,
    message: /trunc\.steps\.csv\.gz: truncated gzip file \(.*\): copy or download it again/,
  },
  {
    name: 'a folder given as --steps says so',
    setup: (t) => mkdirSync(path.join(t, 'd.steps.csv')),
    args: validate('d.steps.csv'),
    code: 1,
    message: 'd.steps.csv: it is a folder, expected a file',
  },
  {
    name: 'validate --out an existing file names the path itself',
    setup: (t) => writeFileSync(path.join(t, 'out'), 'x'),
    args: (t) => ['validate', '--chip', 'h100', '--no-tiers', '--out', path.join(t, 'out')],
    code: 1,
    message: /cannot write .*\/out: it is a file, expected a folder/,
  },
];

describe('bad inputs: parsing and output paths', () => {
  runCorpus(CASES);
});

describe.skipIf(!existsSync('/proc/self'))('an output folder that cannot be created fails at once', () => {
  it('makeDirs under /proc throws ENOENT for /proc/stepcal-x (Node recursive mkdir loops forever)', () => {
    expect(() => makeDirs('/proc/stepcal-x/y')).toThrow(
      expect.objectContaining({ code: 'ENOENT', path: '/proc/stepcal-x' }),
    );
  });
  runCorpus([
    {
      name: 'validate --out /proc/x',
      args: ['validate', '--chip', 'h100', '--no-tiers', '--out', '/proc/stepcal-x'],
      code: 1,
      message: 'cannot write /proc/stepcal-x: no such file or folder, and it cannot be created there',
    },
  ]);
});
