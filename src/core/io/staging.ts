/**
 * All-or-nothing output sets, the checkout lock, and clean-up after a killed run (issue 12 item 6).
 *
 * Protocol of `commitFiles` (one output set, e.g. `registry/<chip>.yaml` + `fits/<chip>/*`):
 * 1. every file is written (flushed) into a staging folder `.stepcal-staging-<pid>-<hex>/` in the
 *    deepest folder that holds every target (the repository root for calibrate), named `0`, `1`, …;
 * 2. `COMMIT` (the list of targets, relative to that folder) is written to a temp name and renamed into the staging folder:
 *    this rename is the commit point;
 * 3. each staged file is renamed over its target (same file system, so each rename is atomic);
 * 4. the staging folder is removed.
 * A run killed before step 2 leaves the old set (plus a staging folder); one killed after it leaves
 * a COMMIT that the next run completes (roll forward), so after `recoverStaging` the set is the old
 * one or the new one, never a mix. `recoverStaging` and `removeStaleTemps` run at the start of every
 * writing command (under the lock) and say on stderr what they removed or completed.
 *
 * The lock is `<root>/.stepcal.lock`, created with `link` (atomic, fails if it exists) and holding
 * `{pid, command, since}`. A second run waits up to `STEPCAL_LOCK_WAIT_S` seconds (default 300)
 * for it, then refuses (exit 1); a lock whose pid is not running is taken over with a message.
 */
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  constants,
  existsSync,
  linkSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.ts';
import { note } from './progress.ts';

/** Name prefix of staging folders. */
export const STAGING_PREFIX = '.stepcal-staging-';
/** Lock file name (in the root of the checkout or of the output folder). */
export const LOCK_NAME = '.stepcal.lock';
/** Test hook: milliseconds to sleep before each rename of a commit (widens the window a kill test aims at). */
export const COMMIT_PAUSE_ENV = 'STEPCAL_TEST_COMMIT_STEP_MS';
/** Seconds a run waits for another run's lock before refusing. */
export const LOCK_WAIT_ENV = 'STEPCAL_LOCK_WAIT_S';
/** Temp files of `writeFileAtomic`: `.<name>.<pid>.<8 hex>.tmp`. */
const TEMP_RE = /^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$/;
const STAGING_RE = /^\.stepcal-staging-(\d+)-[0-9a-f]{8}$/;

/** Block the thread for `ms` milliseconds (the CLI's writes are synchronous). */
export function sleepSync(ms: number): void {
  if (ms > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Whether a process with this pid is running (EPERM means it exists under another user). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Unique temp-file name beside `file` (the pattern `removeStaleTemps` recognises). */
export function tempNameFor(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
}

/** The deepest existing-or-creatable folder that contains every file (its common ancestor). */
export function commonFolder(files: readonly string[]): string {
  const dirs = files.map((f) => path.resolve(path.dirname(f)).split(path.sep));
  const first = dirs[0] ?? [process.cwd()];
  let n = first.length;
  for (const d of dirs) {
    let i = 0;
    while (i < n && i < d.length && d[i] === first[i]) i++;
    n = i;
  }
  return first.slice(0, n).join(path.sep) || path.sep;
}

/**
 * Create folder `dir` and its missing parents, one level at a time, stopping at the first error that
 * is not EEXIST. (Node's `mkdirSync(dir, { recursive: true })` loops forever where a parent refuses
 * children with ENOENT, as /proc does: mkdir(/proc/x) ENOENT, mkdir(/proc) EEXIST, again.)
 * @throws the system's error (with `path` set) for the first folder that cannot be made; ENOTDIR when
 *   an existing part of the path is a file.
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  for (let d = path.resolve(dir); ; ) {
    const st = statOrUndefined(d);
    if (st) {
      if (!st.isDirectory()) throw Object.assign(new Error(`${d} is not a folder`), { code: 'ENOTDIR', path: d });
      break;
    }
    missing.push(d);
    const up = path.dirname(d);
    if (up === d) break;
    d = up;
  }
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/** `statSync(d)`, or undefined when d or a parent is missing or a parent is a file (the walk up goes on). */
function statOrUndefined(d: string): ReturnType<typeof statSync> {
  try {
    return statSync(d, { throwIfNoEntry: false });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw err;
  }
}

/** A user error for a failed file-system call: names the path and the reason (read-only, a folder, …). */
export function writeError(target: string, err: unknown): UserError {
  const e = err as NodeJS.ErrnoException;
  const why: Record<string, string> = {
    EACCES: 'permission denied (is the folder read-only?)',
    EPERM: 'operation not permitted (is the folder read-only?)',
    EROFS: 'read-only file system',
    EISDIR: 'it is a folder, expected a file',
    ENOTDIR: 'a parent of it is a file, not a folder',
    ENOSPC: 'no space left on the device',
    EEXIST: 'a file is in the way',
    ENOENT: 'no such file or folder, and it cannot be created there',
  };
  // makeDirs names the part of the path that is a file: the target itself, or one of its parents.
  if (e?.code === 'ENOTDIR' && e.path !== undefined && path.resolve(e.path) === path.resolve(target))
    return new UserError(`cannot write ${target}: it is a file, expected a folder`);
  return new UserError(`cannot write ${target}: ${why[e?.code ?? ''] ?? e?.message ?? String(err)}`);
}

/**
 * Write a set of files all-or-nothing (see the module comment). Creates missing folders.
 * @throws UserError naming the target when a folder is read-only or a target is a folder; nothing
 *   has replaced any target then.
 */
export function commitFiles(files: ReadonlyArray<{ file: string; data: string | Uint8Array }>): void {
  if (files.length === 0) return;
  const targets = files.map((f) => path.resolve(f.file));
  for (const t of targets)
    if (existsSync(t) && statSync(t).isDirectory()) throw writeError(t, Object.assign(new Error(), { code: 'EISDIR' }));
  const root = commonFolder(targets);
  const staging = path.join(root, `${STAGING_PREFIX}${process.pid}-${randomBytes(4).toString('hex')}`);
  try {
    makeDirs(staging);
    files.forEach((f, i) => {
      writeFileSync(path.join(staging, String(i)), f.data, { flush: true });
    });
    for (const d of new Set(targets.map((t) => path.dirname(t)))) {
      makeDirs(d);
      accessSync(d, constants.W_OK);
    }
    // Targets relative to the staging folder's parent, so a moved or copied checkout recovers in place.
    writeFileSync(path.join(staging, 'COMMIT.tmp'), JSON.stringify(targets.map((t) => path.relative(root, t))), {
      flush: true,
    });
  } catch (err) {
    // existsSync first: rmSync's force forgives ENOENT only, not a parent that is a file (ENOTDIR).
    if (existsSync(staging)) rmSync(staging, { recursive: true, force: true });
    throw writeError((err as NodeJS.ErrnoException).path ?? root, err);
  }
  renameSync(path.join(staging, 'COMMIT.tmp'), path.join(staging, 'COMMIT'));
  try {
    applyCommit(staging, targets);
  } catch (err) {
    const e = writeError((err as NodeJS.ErrnoException & { dest?: string }).dest ?? staging, err);
    throw new UserError(`${e.message}; the committed set stays in ${staging} and the next run completes it`);
  }
}

/** Rename every staged file that is still there over its target, then remove the staging folder. */
function applyCommit(staging: string, targets: readonly string[]): number {
  const pause = Number(process.env[COMMIT_PAUSE_ENV] ?? 0);
  const root = path.dirname(staging);
  let moved = 0;
  targets.forEach((rel, i) => {
    const t = path.resolve(root, rel);
    const src = path.join(staging, String(i));
    if (!existsSync(src)) return;
    sleepSync(pause);
    makeDirs(path.dirname(t));
    renameSync(src, t);
    moved++;
  });
  rmSync(staging, { recursive: true, force: true });
  return moved;
}

/**
 * Finish or discard staging folders left in `root` by killed runs: one with a COMMIT is completed
 * (its remaining files renamed into place), one without is removed (the old set stays). Folders of
 * running processes are left alone. Says on stderr what it did.
 * @returns how many folders were handled.
 */
export function recoverStaging(root: string): number {
  if (!existsSync(root)) return 0;
  let handled = 0;
  for (const name of readdirSync(root)) {
    const m = STAGING_RE.exec(name);
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid !== process.pid && pidAlive(pid)) continue;
    const dir = path.join(root, name);
    const commit = path.join(dir, 'COMMIT');
    if (existsSync(commit)) {
      const targets = JSON.parse(readFileSync(commit, 'utf8')) as string[];
      const moved = applyCommit(dir, targets);
      note(
        `stepcal: completed an output set interrupted in pid ${pid}: ${moved} of ${targets.length} file(s) renamed into place from ${dir}`,
      );
    } else {
      const n = readdirSync(dir).length;
      rmSync(dir, { recursive: true, force: true });
      note(
        `stepcal: removed an unfinished staging folder of killed pid ${pid} (${n} file(s), not committed; the previous outputs stand): ${dir}`,
      );
    }
    handled++;
  }
  return handled;
}

/**
 * Remove `writeFileAtomic` temp files (`.<name>.<pid>.<hex>.tmp`) of processes that are not running,
 * in each folder of `dirs` (not recursive). Says on stderr how many it removed and where.
 */
export function removeStaleTemps(dirs: readonly string[]): number {
  let removed = 0;
  for (const dir of new Set(dirs.map((d) => path.resolve(d)))) {
    if (!existsSync(dir) || !statSync(dir).isDirectory()) continue;
    const stale = readdirSync(dir).filter((n) => {
      const m = TEMP_RE.exec(n);
      return m !== null && Number(m[1]) !== process.pid && !pidAlive(Number(m[1]));
    });
    for (const n of stale) rmSync(path.join(dir, n), { force: true });
    if (stale.length)
      note(`stepcal: removed ${stale.length} stale temp file(s) left by a killed run in ${dir}: ${stale.join(', ')}`);
    removed += stale.length;
  }
  return removed;
}

interface LockInfo {
  pid: number;
  command: string;
  since: string;
}

function readLock(file: string): LockInfo | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as LockInfo;
  } catch {
    return undefined;
  }
}

/** One attempt: true when the lock is ours. Takes over a lock whose pid is dead (or our own leftover). */
function tryLock(file: string, mine: string): boolean {
  const tmp = tempNameFor(file);
  writeFileSync(tmp, mine);
  try {
    linkSync(tmp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw writeError(file, err);
    const held = readLock(file);
    if (held && held.pid !== process.pid && pidAlive(held.pid)) return false;
    // Stale (dead pid, our own leftover, or unreadable): move it aside atomically, then retry once.
    const aside = `${file}.stale-${process.pid}`;
    try {
      renameSync(file, aside);
      unlinkSync(aside);
    } catch {
      return false;
    }
    if (held?.pid !== process.pid)
      note(
        `stepcal: took over a stale lock ${file} (pid ${held?.pid ?? '?'} running "${held?.command ?? '?'}" since ${held?.since ?? '?'} is not running)`,
      );
    return tryLock(file, mine);
  } finally {
    rmSync(tmp, { force: true });
  }
}

/**
 * Take the lock of `root` for `command`, waiting up to STEPCAL_LOCK_WAIT_S seconds (default 300).
 * @returns a release function (idempotent).
 * @throws UserError when another running stepcal holds it past the wait, or root is not writable.
 */
export function acquireLock(root: string, command: string): () => void {
  const file = path.join(root, LOCK_NAME);
  // A root this run creates is removed again if the run leaves it empty (a refused run writes nothing).
  const created = !existsSync(root);
  try {
    makeDirs(root);
  } catch (err) {
    throw writeError(root, err);
  }
  const mine = JSON.stringify({ pid: process.pid, command, since: new Date().toISOString() } satisfies LockInfo);
  const waitS = Number(process.env[LOCK_WAIT_ENV] ?? 300);
  const deadline = Date.now() + (Number.isFinite(waitS) && waitS >= 0 ? waitS : 300) * 1000;
  let told = false;
  while (!tryLock(file, mine)) {
    const held = readLock(file);
    if (Date.now() >= deadline) {
      throw new UserError(
        `another stepcal run holds ${file} (pid ${held?.pid}, "${held?.command}", since ${held?.since}); try again when it has finished`,
      );
    }
    if (!told) note(`stepcal: waiting for pid ${held?.pid} ("${held?.command}") to release ${file} ...`);
    told = true;
    sleepSync(200);
  }
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (readLock(file)?.pid === process.pid) rmSync(file, { force: true });
    if (created && existsSync(root) && readdirSync(root).length === 0) rmSync(root, { recursive: true, force: true });
  };
}

/**
 * Run `fn` holding the lock of `root`, after finishing or discarding what killed runs left in `root`
 * (staging folders) and in `dirs` (temp files). The lock is released however `fn` ends.
 */
export async function withOutputLock<T>(
  root: string,
  command: string,
  dirs: readonly string[],
  fn: () => T | Promise<T>,
): Promise<T> {
  const release = acquireLock(root, command);
  try {
    cleanUpAfterKilledRuns(root, dirs);
    return await fn();
  } finally {
    release();
  }
}

/** What every writing run does first, under the lock: staging folders in root and dirs, then temp files. */
export function cleanUpAfterKilledRuns(root: string, dirs: readonly string[]): void {
  recoverStaging(root);
  for (const d of dirs) if (path.resolve(d) !== path.resolve(root)) recoverStaging(d);
  removeStaleTemps([root, ...dirs]);
}

/** Synchronous `withOutputLock`. */
export function withOutputLockSync<T>(root: string, command: string, dirs: readonly string[], fn: () => T): T {
  const release = acquireLock(root, command);
  try {
    cleanUpAfterKilledRuns(root, dirs);
    return fn();
  } finally {
    release();
  }
}

/**
 * The folder whose lock guards writing `targets`: the checkout (`repoRoot`) when every target is
 * inside it, else the deepest folder holding them all (a scratch output folder gets its own lock).
 */
export function lockRootFor(targets: readonly string[], repoRoot: string): string {
  const root = path.resolve(repoRoot);
  const inside = targets.every((t) => {
    const rel = path.relative(root, path.resolve(t));
    return !rel.startsWith('..') && !path.isAbsolute(rel);
  });
  return inside ? root : commonFolder(targets);
}
