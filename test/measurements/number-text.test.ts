/**
 * number-text.ts `writeNumber`: the bytes it writes are `String(v)` for every double, on hand cases
 * (powers of two and ten, the edges of the [1e-6, 1e15) range it decides itself, 16- and 17-digit
 * values) and on random doubles of every kind a latency column holds (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decimalNumber } from '../../src/core/numeric/decimal.ts';
import { writeNumber } from '../../src/measurements/number-text.ts';

/** writeNumber's bytes as text, through a sink that grows like RowColumns' ByteOut. */
function text(v: number): string {
  const out = {
    buf: Buffer.alloc(4),
    pos: 0,
    reserve(n: number) {
      if (this.pos + n <= this.buf.length) return;
      const b = Buffer.alloc(this.pos + n);
      this.buf.copy(b, 0, 0, this.pos);
      this.buf = b;
    },
  };
  writeNumber(out, v);
  return out.buf.toString('latin1', 0, out.pos);
}

describe('writeNumber', () => {
  it('hand cases: short, 16- and 17-digit, range edges, powers of two and ten', () => {
    // 5.00867 ms × 1000 is not the double nearest 5008.67: String prints 16 digits of it.
    expect(text(0.00500867 * 1000)).toBe('5.0086699999999995');
    expect(text(0.1 + 0.2)).toBe('0.30000000000000004');
    expect(text(5015.12)).toBe('5015.12');
    expect(text(12)).toBe('12');
    const cases = [
      1e-6,
      1e-6 * (1 - 2 ** -53),
      1e15,
      999999999999999.9,
      0.1,
      1,
      10,
      1000,
      9.999999999999998,
      0.09999999999999999,
      2 ** -20,
      2 ** 10,
      2 ** 49,
      2 ** 50 + 0.5,
      123456789012345.6,
      1.0000000000000002,
      4.35,
      4.35 * 1000,
      0,
      -0,
      -1.5,
      Number.NaN,
      Infinity,
      5e-324,
      1.7976931348623157e308,
      1e21,
      1e-7,
    ];
    for (const v of cases) expect(text(v), String(v)).toBe(String(v));
  });

  it('equals String(v) on random latencies (few digits × 1000), random magnitudes and random bits (fast-check)', () => {
    const fewDigits = fc
      .tuple(fc.double({ min: 1e-4, max: 1e4, noNaN: true }), fc.integer({ min: 1, max: 9 }))
      .map(([x, p]) => Number(x.toPrecision(p)) * 1000);
    const anyMagnitude = fc
      .tuple(fc.double({ min: 1, max: 10, noNaN: true }), fc.integer({ min: -8, max: 16 }))
      .map(([x, e]) => x * 10 ** e);
    fc.assert(
      fc.property(fc.oneof(fewDigits, anyMagnitude, fc.double()), (v) => {
        expect(text(v)).toBe(String(v));
      }),
      { numRuns: 20_000, seed: 17 },
    );
  });
});

describe('decimalNumber', () => {
  it('reads decimal text as Number() does, and nothing else', () => {
    for (const t of ['16', ' 83.8 ', '-3.5', '+2', '.5', '5.', '1e-7', '2.5E3', '007', '-0'])
      expect(decimalNumber(t), t).toBe(Number(t));
    // JS literal syntax Number() accepts: 0x10 → 16, 0o7 → 7, 0b1 → 1, '' → 0, Infinity
    for (const t of ['0x10', '0X1F', '0o7', '0b1', ' 0B11 ', '', '  ', 'Infinity', '-Infinity', '1e999', '1_000', 'x'])
      expect(decimalNumber(t), JSON.stringify(t)).toBeNaN();
  });
});
