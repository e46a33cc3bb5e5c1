import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { InputError } from '../../src/core/errors.ts';
import { readText } from '../../src/core/io/fs.ts';

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
