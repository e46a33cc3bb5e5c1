/**
 * File helpers used at the edges of stepcal. Every write is atomic: the content goes to a temporary
 * file in the same directory, which is then renamed over the target, so an interrupted write leaves
 * the previous file intact.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';

/** Write `data` to `file` atomically (temp file in the same directory, fsync by writeFileSync, rename). */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const dir = path.dirname(file);
  mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, data, { flush: true });
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Write several files so that either all land or none do: each is first written to a temp file;
 * only when every temp file exists are they renamed into place.
 */
export function writeFilesAtomic(files: ReadonlyArray<{ file: string; data: string | Uint8Array }>): void {
  const staged: Array<{ tmp: string; file: string }> = [];
  try {
    for (const { file, data } of files) {
      const dir = path.dirname(file);
      mkdirSync(dir, { recursive: true });
      const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      writeFileSync(tmp, data, { flush: true });
      staged.push({ tmp, file });
    }
  } catch (err) {
    for (const s of staged) rmSync(s.tmp, { force: true });
    throw err;
  }
  for (const s of staged) renameSync(s.tmp, s.file);
}

/** Read a text file, transparently gunzipping names ending in `.gz`. */
export function readText(file: string): string {
  const buf = readFileSync(file);
  return file.endsWith('.gz') ? gunzipSync(buf).toString('utf8') : buf.toString('utf8');
}

/** Encode text for `file`: gzip (level 9, mtime 0, so output is byte-reproducible) if the name ends in `.gz`. */
export function encodeText(file: string, text: string): Uint8Array {
  return file.endsWith('.gz') ? gzipSync(Buffer.from(text, 'utf8'), { level: 9 }) : Buffer.from(text, 'utf8');
}

/** Hex sha256 of bytes or of a file's bytes. */
export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

export function sha256File(file: string): string {
  return sha256(readFileSync(file));
}
