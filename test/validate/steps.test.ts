import { describe, expect, it } from 'vitest';
import { InputError } from '../../src/core/errors.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import { BASE, stepsCsv } from './fake-pricer.ts';

const step = {
  ...BASE,
  kind: 'step',
  prefill_requests: 1,
  prefill_tokens: 512,
  decode_requests: 0,
  decode_context_tokens: 0,
  measured_us: 1000,
};
const stat = { ...BASE, kind: 'static_batch', batch: 4, prompt_tokens: 128, output_tokens: 16, measured_us: 5e5 };

function err(text: string): InputError {
  try {
    parseStepsCsv(text, 'x.steps.csv');
  } catch (e) {
    if (e instanceof InputError) return e;
    throw e;
  }
  throw new Error('expected an InputError');
}

describe('steps.csv reader', () => {
  it('parses steps and static batches, defaults optional columns', () => {
    const { rows, warnings } = parseStepsCsv(stepsCsv([step, stat]), 'x.steps.csv');
    expect(warnings).toEqual([]);
    expect(rows[0]).toMatchObject({
      row: 1,
      kind: 'step',
      prefill_tokens: 512,
      prefill_context_tokens: 0,
      kv_dtype: '',
      group: '',
    });
    expect(rows[1]).toMatchObject({ row: 2, kind: 'static_batch', batch: 4, output_tokens: 16 });
  });
  it('warns on an unknown column and ignores it', () => {
    const { rows, warnings } = parseStepsCsv(stepsCsv([{ ...step, power_w: 300 }]), 'x.steps.csv');
    expect(rows).toHaveLength(1);
    expect(warnings).toEqual(['x.steps.csv: unknown column "power_w" ignored']);
  });
  it('a missing required column names the row and column', () => {
    const { measured_us: _m, ...noMeas } = step;
    const e = err(stepsCsv([noMeas]));
    expect(e.location).toEqual({ file: 'x.steps.csv', row: 1, column: 'measured_us' });
    // static-batch columns are only required by static rows: row 2 is the first that needs them
    const e2 = err(
      stepsCsv([step, { ...BASE, kind: 'static_batch', measured_us: 5 }]).replace(
        /,batch|,prompt_tokens|,output_tokens/g,
        '',
      ),
    );
    expect(e2.location.row).toBe(2);
    expect(e2.location.column).toBe('batch');
  });
  it('an empty required cell, a bad kind, a non-positive time and a non-number are errors naming the row', () => {
    expect(err(stepsCsv([step, { ...step, engine: '' }])).location).toEqual({
      file: 'x.steps.csv',
      row: 2,
      column: 'engine',
    });
    expect(err(stepsCsv([{ ...step, kind: 'forward' }])).location.column).toBe('kind');
    expect(err(stepsCsv([{ ...step, measured_us: 0 }])).location.column).toBe('measured_us');
    expect(err(stepsCsv([{ ...step, prefill_tokens: 'many' }])).message).toMatch(
      /row 1 column "prefill_tokens": expected a finite number/,
    );
    expect(err(stepsCsv([{ ...step, prefill_requests: 0 }])).message).toMatch(/at least one prefill or decode request/);
  });
  it('numeric cells are decimal: a hex, octal or binary literal or Infinity names file, row and column', () => {
    // Number() reads 0x10 as 16 and 0b1 as 1: a measured_us of 0x10 was taken for 16 µs.
    for (const v of ['0x10', '0o20', '0b1', 'Infinity']) {
      const e = err(stepsCsv([step, { ...step, measured_us: v }]));
      expect(e.location, v).toEqual({ file: 'x.steps.csv', row: 2, column: 'measured_us' });
      expect(e.message).toContain(`expected a finite number (decimal), got "${v}"`);
    }
    expect(err(stepsCsv([{ ...step, prefill_tokens: '0x200' }])).location.column).toBe('prefill_tokens');
    expect(err(stepsCsv([{ ...step, tp: '0b10' }])).location.column).toBe('tp');
    expect(err(stepsCsv([{ ...step, measured_us: '' }])).message).toMatch(/row 1 column "measured_us": empty cell/);
    // decimal forms stay numbers
    const ok = parseStepsCsv(
      stepsCsv([
        { ...step, measured_us: '1.6e1' },
        { ...step, measured_us: ' 16 ' },
      ]),
      'x.csv',
    );
    expect(ok.rows.map((r) => r.measured_us)).toEqual([16, 16]);
    expect(err('')).toBeInstanceOf(InputError);
  });
});
