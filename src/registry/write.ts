/**
 * The registry's atomic write, with a test hook between the temp write and the rename.
 *
 * Same protocol as `writeFileAtomic` (src/core/io/fs.ts): write a temp file in the target's
 * directory (flushed), then rename it over the target; an interrupted writer leaves the previous
 * file byte-identical (at worst a stale `.<name>.<pid>.<hex>.tmp` beside it, which every reader
 * ignores). The hook `STEPCAL_TEST_PAUSE_BEFORE_RENAME_MS` (environment, milliseconds) sleeps after
 * the temp file is complete and before the rename, so a test can kill the process in that window.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';

/** Environment variable of the test hook. */
export const PAUSE_ENV = 'STEPCAL_TEST_PAUSE_BEFORE_RENAME_MS';

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Atomically replace `file` with `text` (see module comment). */
export function writeTextAtomic(file: string, text: string): void {
  const dir = path.dirname(file);
  mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, text, { flush: true });
    const pause = Number(process.env[PAUSE_ENV] ?? 0);
    if (pause > 0) sleepSync(pause);
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** Atomically write sets as multi-document YAML. */
export function writeRegistryAtomic(file: string, sets: readonly CoefficientSet[]): void {
  writeTextAtomic(file, stringifyCoefficientSets(sets));
}
