/**
 * File helpers used at the edges of stepcal: the one atomic writer of a single file and, through
 * `./staging.ts`, of a set of files (all land or none), plus reading, gzip and hashing.
 */
import { createHash } from 'node:crypto';
import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { InputError } from '../errors.ts';
import { commitFiles, makeDirs, sleepSync, tempNameFor, writeError } from './staging.ts';

/**
 * Test hook (environment, milliseconds): sleep after the temp file is complete and before the
 * rename, so a test can kill the process in that window.
 */
export const PAUSE_ENV = 'STEPCAL_TEST_PAUSE_BEFORE_RENAME_MS';

/**
 * Write `data` to `file` atomically: a temp file `.<name>.<pid>.<hex>.tmp` in the same folder
 * (flushed), renamed over the target, so an interrupted write leaves the previous file byte-identical
 * (a killed run's temp file is removed by the next writing run, `removeStaleTemps`).
 * @throws UserError naming the file when its folder is not writable or the target is a folder.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const dir = path.dirname(file);
  let tmp: string | undefined;
  try {
    makeDirs(dir);
    if (statSync(file, { throwIfNoEntry: false })?.isDirectory())
      throw Object.assign(new Error('is a folder'), { code: 'EISDIR' });
    tmp = tempNameFor(file);
    writeFileSync(tmp, data, { flush: true });
    sleepSync(Number(process.env[PAUSE_ENV] ?? 0));
    renameSync(tmp, file);
  } catch (err) {
    if (tmp) rmSync(tmp, { force: true });
    throw writeError(file, err);
  }
}

/** Write several files so that either all land or none do (staging folder + commit, see ./staging.ts). */
export function writeFilesAtomic(files: ReadonlyArray<{ file: string; data: string | Uint8Array }>): void {
  commitFiles(files);
}

/** Why a file could not be read, by errno code (the rest print the system's message). */
const READ_WHY: Readonly<Record<string, string>> = {
  ENOENT: 'file not found',
  EISDIR: 'it is a folder, expected a file',
  ENOTDIR: 'a parent of it is a file, not a folder',
  EACCES: 'cannot read it: permission denied',
  EPERM: 'cannot read it: operation not permitted',
  ENAMETOOLONG: 'cannot read it: the name is too long',
  ELOOP: 'cannot read it: too many levels of symbolic links',
};

/**
 * The user error for a failed read of `file`: `<file>: file not found`, `<file>: it is a folder,
 * expected a file`, `<file>: cannot read it: <reason>` (the read-side twin of staging.ts writeError).
 */
export function readError(file: string, err: unknown): InputError {
  const e = err as NodeJS.ErrnoException;
  return new InputError({ file }, READ_WHY[e?.code ?? ''] ?? `cannot read it: ${e?.message ?? String(err)}`);
}

/**
 * Read a file's bytes.
 * @throws InputError naming the file when it cannot be read (missing, a folder, no permission, …).
 */
export function readBytes(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw readError(file, err);
  }
}

/**
 * Read a text file, transparently gunzipping names ending in `.gz`.
 * @throws InputError naming the file when a `.gz` does not decompress (truncated: zlib's Z_BUF_ERROR,
 *   "unexpected end of file", which an empty file gives too; or corrupt), and when the file cannot
 *   be read (readBytes: "file not found", "it is a folder, expected a file", …).
 */
export function readText(file: string): string {
  const buf = readBytes(file);
  if (!file.endsWith('.gz')) return buf.toString('utf8');
  try {
    return gunzipSync(buf).toString('utf8');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const what = e.code === 'Z_BUF_ERROR' ? 'truncated gzip file' : 'not a valid gzip file';
    throw new InputError({ file }, `${what} (${e.message}): copy or download it again`);
  }
}

/** Encode text for `file`: gzip (level 9, mtime 0, so output is byte-reproducible) if the name ends in `.gz`. */
export function encodeText(file: string, text: string): Uint8Array {
  return file.endsWith('.gz') ? gzipSync(Buffer.from(text, 'utf8'), { level: 9 }) : Buffer.from(text, 'utf8');
}

/** Hex sha256 of bytes or of a file's bytes. */
export function sha256(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Hex sha256 of a file's bytes. @throws InputError naming the file when it cannot be read (readBytes). */
export function sha256File(file: string): string {
  return sha256(readBytes(file));
}
