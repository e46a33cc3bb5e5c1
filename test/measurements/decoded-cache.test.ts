import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readText } from '../../src/core/io/fs.ts';
import {
  cachedCheck,
  cachedRows,
  DECODED_CACHE_DIR,
  decodeRows,
  encodeRows,
  keyOf,
} from '../../src/measurements/decoded-cache.ts';
import { parseCanonicalCsv } from '../../src/measurements/store.ts';
import { MEASUREMENTS } from './helpers.ts';

/** A key no real table has, so these tests' entries are their own (removed afterwards). */
const fakeSha = () => `test${randomBytes(30).toString('hex')}`;
const made: string[] = [];
afterAll(() => {
  if (!existsSync(DECODED_CACHE_DIR)) return;
  for (const name of readdirSync(DECODED_CACHE_DIR))
    if (made.some((k) => name.startsWith(keyOf(k)))) rmSync(path.join(DECODED_CACHE_DIR, name));
});

/** Every row equal, key for key in the same order, each value Object.is-equal. */
function expectSameRows(got: ReadonlyArray<object>, want: ReadonlyArray<object>): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i] as Record<string, unknown>;
    const w = want[i] as Record<string, unknown>;
    const keys = Object.keys(w);
    if (Object.keys(g).join() !== keys.join()) expect([i, Object.keys(g)]).toEqual([i, keys]);
    for (const k of keys) if (!Object.is(g[k], w[k])) expect([i, k, g[k]]).toEqual([i, k, w[k]]);
  }
}

describe('decoded measurement cache', () => {
  it('gives back the parsed rows of stored tables exactly (ints, floats, texts, key order)', () => {
    for (const name of [
      'h200/sparse.vllm-0.24.0.csv.gz',
      'a100/gemm.vllm-0.14.0.csv.gz',
      'h200/mla.vllm-0.24.0.csv.gz',
    ]) {
      const file = path.join(MEASUREMENTS, name);
      const family = path.basename(name).split('.')[0] as 'sparse' | 'gemm' | 'mla';
      const rows = parseCanonicalCsv(family, readText(file), file);
      const bytes = encodeRows(rows as unknown as Array<Record<string, unknown>>);
      expect(bytes).toBeDefined();
      expectSameRows(decodeRows(bytes!), rows);
    }
  });

  it('keeps -0, fractions, large integers and many distinct strings', () => {
    const rows = Array.from({ length: 70_000 }, (_, i) => ({
      a: i === 3 ? -0 : i * 1.5,
      b: i === 5 ? 2 ** 40 : i,
      s: `name-${i}`,
      t: i % 2 ? 'x' : 'y',
    }));
    const back = decodeRows<(typeof rows)[number]>(encodeRows(rows)!);
    expectSameRows(back, rows);
    expect(Object.is(back[3]!.a, -0)).toBe(true);
    expect(back[5]!.b).toBe(2 ** 40);
  });

  it('does not store rows it cannot give back exactly', () => {
    expect(encodeRows([{ a: 1 }, { a: 'x' }])).toBeUndefined();
    expect(encodeRows([{ a: 1 }, { b: 1 }])).toBeUndefined();
    expect(
      encodeRows([
        { a: 1, b: 2 },
        { b: 2, a: 1 },
      ]),
    ).toBeUndefined();
    expect(encodeRows([{ a: undefined }])).toBeUndefined();
    expect(encodeRows([{ a: true }])).toBeUndefined();
  });

  it('decodes once per key, then reads the entry; a damaged entry is decoded again', () => {
    const sha = fakeSha();
    made.push(sha);
    const rows = [
      { m: 1, latency_us: 2.5, dtype: 'bf16' },
      { m: 2, latency_us: 3.25, dtype: 'fp8' },
    ];
    let decoded = 0;
    const decode = () => {
      decoded++;
      return rows.map((r) => ({ ...r }));
    };
    expect(cachedRows(sha, decode)).toEqual(rows);
    expect(cachedRows(sha, decode)).toEqual(rows);
    expect(decoded).toBe(1);
    const entries = () => readdirSync(DECODED_CACHE_DIR).filter((n) => n.startsWith(keyOf(sha)));
    for (const name of entries()) writeFileSync(path.join(DECODED_CACHE_DIR, name), 'garbage');
    expect(cachedRows(sha, decode)).toEqual(rows);
    expect(decoded).toBe(2);
    // One flipped bit in a number column: well-formed, but not what was stored (the sha256 trailer).
    for (const name of entries()) {
      const file = path.join(DECODED_CACHE_DIR, name);
      const bytes = readFileSync(file);
      const at = bytes.length - 32 - 9;
      bytes.writeUInt8(bytes.readUInt8(at) ^ 0x01, at);
      writeFileSync(file, bytes);
    }
    expect(cachedRows(sha, decode)).toEqual(rows);
    expect(decoded).toBe(3);
    const other = fakeSha();
    made.push(other);
    expect(cachedRows(other, decode)).toEqual(rows);
    expect(decoded).toBe(4);
  });

  it('runs the units check until it passes once for that table and datasheet; a failure is not remembered', () => {
    const sha = fakeSha();
    made.push(sha);
    let checks = 0;
    const bad = () => {
      checks++;
      throw new Error('units slip');
    };
    expect(() => cachedCheck(sha, '{"chip":1}', bad)).toThrow('units slip');
    expect(() => cachedCheck(sha, '{"chip":1}', bad)).toThrow('units slip');
    const good = () => {
      checks++;
    };
    cachedCheck(sha, '{"chip":1}', good);
    cachedCheck(sha, '{"chip":1}', good);
    expect(checks).toBe(3);
    cachedCheck(sha, '{"chip":2}', good);
    expect(checks).toBe(4);
  });

  it('is off with STEPCAL_NO_MEASUREMENT_CACHE=1', () => {
    const sha = fakeSha();
    made.push(sha);
    let decoded = 0;
    const decode = () => {
      decoded++;
      return [{ a: 1 }];
    };
    process.env.STEPCAL_NO_MEASUREMENT_CACHE = '1';
    try {
      cachedRows(sha, decode);
      cachedRows(sha, decode);
    } finally {
      delete process.env.STEPCAL_NO_MEASUREMENT_CACHE;
    }
    expect(decoded).toBe(2);
  });
});
