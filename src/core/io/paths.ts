/**
 * Paths: names that become paths (issue 12 item 7) and how stepcal prints and records file paths.
 *
 * A chip, model or lane name given on the command line is joined to a folder (`catalog/chips/<chip>.yaml`,
 * `measurements/<chip>/`, `registry/<chip>.yaml`), so it must be a plain name, `[a-z0-9._-]+`, and the
 * path it makes must stay inside that folder (`..` matches the pattern but leaves it).
 *
 * Paths are printed and recorded relative to the repository root (REPO_ROOT, the checkout that holds
 * this file), so pins, provenance and messages are the same on every clone.
 */
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../errors.ts';

/** The checkout that holds this file (src/core/io/ → three levels up); also exported by core/catalog/chip.ts. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** The pattern every name that becomes a path must match. */
export const NAME_RE = /^[a-z0-9._-]+$/;

/**
 * Check `name` (the value of `what`, e.g. `--chip`) and return `<dir>/<name><suffix>`.
 * @throws UsageError (exit 2) when the name does not match NAME_RE or the path leaves `dir`.
 */
export function pathInside(what: string, name: string, dir: string, suffix = ''): string {
  checkName(what, name);
  const root = path.resolve(dir);
  const file = path.resolve(root, name + suffix);
  const rel = path.relative(root, file);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel) || rel.includes(path.sep)) {
    throw new UsageError(`${what} "${name}": must name a file inside ${dir}, but resolves to ${file}`);
  }
  return file;
}

/** @throws UsageError (exit 2) unless `name` matches NAME_RE and is not `.` or `..`. */
export function checkName(what: string, name: string): void {
  if (!NAME_RE.test(name) || name === '.' || name === '..') {
    throw new UsageError(
      `${what} "${name}": expected a name of lower-case letters, digits, '.', '_' or '-' ([a-z0-9._-]+, not . or ..)`,
    );
  }
}

/** A path as printed: relative to the repository root when inside it, else as given. */
export function displayPath(file: string): string {
  const rel = path.relative(REPO_ROOT, path.resolve(file));
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
}

/** The shared data beside the checkout (`<repo>/../shared`, often a link to one copy for every checkout). */
const SHARED_ROOT = path.join(REPO_ROOT, '..', 'shared');

/**
 * A path as recorded in provenance, with `/` separators: `../shared/<path inside it>` for a file under
 * the checkout's `../shared` (compared through links, so `../shared/x`, `/work/shared/x` and a path
 * through a linked checkout all record the same), else relative to the repository root.
 */
export function provenanceRelativePath(file: string): string {
  const real = realOrResolved(file);
  const inShared = insideOf(realOrResolved(SHARED_ROOT), real);
  if (inShared !== undefined) return ['..', 'shared', ...inShared.split(path.sep)].join('/');
  const inRepo = insideOf(realOrResolved(REPO_ROOT), real);
  const rel = inRepo ?? path.relative(REPO_ROOT, path.resolve(file));
  return rel.split(path.sep).join('/');
}

/** `file` with every link resolved; as resolved (`path.resolve`) when it does not exist. */
function realOrResolved(file: string): string {
  try {
    return realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}

/** `file` relative to `dir` when it lies inside it, else undefined. */
function insideOf(dir: string, file: string): string | undefined {
  const rel = path.relative(dir, file);
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : undefined;
}
