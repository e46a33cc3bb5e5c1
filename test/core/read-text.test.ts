import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { InputError } from '../../src/core/errors.ts';
import { readText, sha256File } from '../../src/core/io/fs.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-read-text-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('readText on a .gz that does not decompress', () => {
  const full = gzipSync(Buffer.from('m,n,k,latency_us\n'.repeat(2000)));
  const cases: Array<[string, Uint8Array, RegExp]> = [
    ['truncated', full.subarray(0, full.length >> 1), /truncated gzip file \(unexpected end of file\)/],
    ['empty', new Uint8Array(0), /truncated gzip file \(unexpected end of file\)/],
    ['not gzip at all', Buffer.from('m,n,k\n1,2,3\n'), /not a valid gzip file/],
  ];
  for (const [name, bytes, message] of cases)
    it(`${name}: an InputError naming the file, not a zlib error`, () => {
      const file = path.join(tmp, `${name.replace(/ /g, '-')}.csv.gz`);
      writeFileSync(file, bytes);
      let err: unknown;
      try {
        readText(file);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(InputError);
      expect((err as Error).message).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
      expect((err as Error).message).toMatch(message);
      expect((err as Error).message).toContain('copy or download it again');
    });

  it('a whole file reads back as written', () => {
    const file = path.join(tmp, 'whole.csv.gz');
    writeFileSync(file, full);
    expect(readText(file)).toBe('m,n,k,latency_us\n'.repeat(2000));
  });
});

describe('readText / sha256File on what is not a readable file', () => {
  const messageOf = (fn: () => unknown): string => {
    try {
      fn();
    } catch (e) {
      expect(e).toBeInstanceOf(InputError);
      return (e as Error).message;
    }
    throw new Error('expected a throw');
  };

  it('a missing file: "<file>: file not found"', () => {
    const file = path.join(tmp, 'missing.csv');
    expect(messageOf(() => readText(file))).toBe(`${file}: file not found`);
    expect(messageOf(() => sha256File(file))).toBe(`${file}: file not found`);
  });

  it('a folder: "<file>: it is a folder, expected a file" (not a bare EISDIR without the path)', () => {
    const dir = path.join(tmp, 'folder.yaml');
    mkdirSync(dir);
    expect(messageOf(() => readText(dir))).toBe(`${dir}: it is a folder, expected a file`);
    const gz = path.join(tmp, 'folder.csv.gz');
    mkdirSync(gz);
    expect(messageOf(() => readText(gz))).toBe(`${gz}: it is a folder, expected a file`);
  });

  it('a path through a file: "a parent of it is a file"', () => {
    const file = path.join(tmp, 'plain.txt');
    writeFileSync(file, 'x');
    expect(messageOf(() => readText(path.join(file, 'x.csv')))).toBe(
      `${path.join(file, 'x.csv')}: a parent of it is a file, not a folder`,
    );
  });
});
