/**
 * One refit per chip for the whole test run, shared by every test that needs it (issue 17: the
 * reproducibility checks and onboarding used to refit the same chip up to three times).
 *
 * `sharedRefit(chip)` runs `fitAll(chip)` in-process and keeps what the refit-and-compare tests
 * read: the output files exactly as `fit all` would write them (registry, fits/<chip>/README.md and
 * figures, from the same `fitOutputFiles`/`renderFitReport` the CLI uses) and the coefficient sets.
 * The result is stored under `.cache/refit/` (gitignored), content-addressed: the key is a sha256 of
 * every file that can change a fit's output (the modules this helper imports, followed through their
 * relative imports: the fit, report, registry, measurements and core modules it runs, ~75 of src/'s
 * files; catalog/; the chip's measurements/; the lockfile; this file) and the Node version. A change
 * to the pricer, validation, serving or the CLI, which no fit imports (depcheck keeps stages from
 * importing upward), keeps the stored refits. A later run with the same key reuses it; any change to a fitter,
 * an input or a dependency is a new key and a new refit. The comparison with the committed files
 * always runs against the disk, so a hand edit of registry/ or fits/ is caught either way.
 * `STEPCAL_NO_REFIT_CACHE=1` forces a refit (and stores nothing).
 *
 * Two test workers asking for the same chip at once: the first takes a lock (an exclusive mkdir)
 * and refits; the other waits for the stored result instead of fitting it a second time.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { type FitAllResult, fitAll } from '../../src/fit/index.ts';
import { stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { scopeRefusals } from '../../src/registry/onboard.ts';
import { fitOutputFiles, renderFitReport } from '../../src/report/fit.ts';

/** A chip's refit as the comparison needs it; `files` paths are repo-relative with `/`. */
export interface Refit {
  chip: string;
  key: string;
  files: Array<{ file: string; data: string }>;
  sets: CoefficientSet[];
  refusals: string[];
}

const CACHE_DIR = path.join(REPO_ROOT, '.cache', 'refit');
/** A lock older than this is a dead holder's, pid or not (a cold refit of the largest chip takes ~1 min of CPU). */
const STALE_LOCK_MS = 15 * 60_000;
const inProcess = new Map<string, Promise<Refit>>();

/** Every file under `dir` (recursively), sorted, as repo-relative paths. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile())
    .map((d) => path.relative(REPO_ROOT, path.join(d.parentPath, d.name)).split(path.sep).join('/'))
    .sort();
}

const HELPER = 'test/helpers/refit.ts';
/** The fit worker's entry: loaded by URL (new Worker), so no import names it. */
const WORKER = 'src/fit/worker.ts';
/** A relative TypeScript import or re-export (static, `import type`, or dynamic `import('…')`). */
const RELATIVE_IMPORT = /(?:\bfrom|\bimport\(?)\s*'(\.{1,2}\/[^']+\.ts)'/g;

/**
 * Every repo-relative source file reachable from `entry` through relative imports, sorted. Type-only
 * imports are followed too (more files in the key, never fewer). Bare imports (node:, packages) are
 * covered by the lockfile and the Node version.
 */
function importClosure(entry: string): string[] {
  const seen = new Set<string>();
  const todo = [entry];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of readFileSync(path.join(REPO_ROOT, f), 'utf8').matchAll(RELATIVE_IMPORT))
      todo.push(path.posix.normalize(path.posix.join(path.posix.dirname(f), m[1]!)));
  }
  return [...seen].sort();
}

/** sha256 over (path, bytes) of every input of `chip`'s fit and report, the lockfile, this helper and the Node version. */
export function refitKey(chip: string): string {
  const h = createHash('sha256').update(`node ${process.version}\n`);
  const files = [
    // src/fit/worker.ts is started by URL (src/fit/parallel.ts), not imported, so the closure misses it.
    ...[...new Set([...importClosure(HELPER), ...importClosure(WORKER)])].filter((f) => f !== HELPER).sort(),
    ...filesUnder(path.join(REPO_ROOT, 'catalog')),
    ...filesUnder(path.join(REPO_ROOT, 'measurements', chip)),
    'package-lock.json',
    HELPER,
  ];
  for (const f of files) {
    h.update(`${f}\n`);
    h.update(readFileSync(path.join(REPO_ROOT, f)));
  }
  return h.digest('hex');
}

/** A chip whose registry `stepcal onboard` wrote (its onboarding report is committed). */
function isOnboarded(chip: string): boolean {
  return existsSync(path.join(REPO_ROOT, 'fits', chip, 'onboard.md'));
}

/** The fit as onboarding writes it: entries refused by a non-required gate are left out (issue 15). */
function onboardedResult(fit: FitAllResult): FitAllResult {
  const { sets } = scopeRefusals(fit.chip, fit.refusals, fit.sets);
  return { ...fit, sets, registry_text: stringifyCoefficientSets(sets) };
}

async function refitNow(chip: string, key: string): Promise<Refit> {
  // One thread: vitest already runs two test workers on the two cores, and fit workers would each
  // reload the modules and hold their own heap (≈ 2.5 s CPU and 100 MiB more per refit; docs/performance.md).
  const fitted = await fitAll(chip, { workers: 1 });
  const result = isOnboarded(chip) ? onboardedResult(fitted) : fitted;
  const files = fitOutputFiles(result, {}, renderFitReport(result)).map(({ file, data }) => ({
    file: path.relative(REPO_ROOT, file).split(path.sep).join('/'),
    data,
  }));
  return { chip, key, files, sets: result.sets, refusals: result.refusals };
}

/** Store `r` atomically and drop this chip's entries under other keys. */
function store(r: Refit): void {
  const file = path.join(CACHE_DIR, `${r.chip}-${r.key}.json`);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(r));
  renameSync(tmp, file);
  for (const n of readdirSync(CACHE_DIR))
    if (n.startsWith(`${r.chip}-`) && n.endsWith('.json') && !n.includes(r.key)) rmSync(path.join(CACHE_DIR, n));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Whether a refit lock's holder is gone: its pid (written just after the mkdir) is no longer a
 * process, as when a test run is interrupted mid-refit (Ctrl-C, or `npm test` stopping vitest when a
 * static check fails), or the lock is older than STALE_LOCK_MS (a holder that died before writing its pid).
 */
function lockIsStale(lock: string): boolean {
  const st = statSync(lock, { throwIfNoEntry: false });
  if (!st) return false;
  let pid = 0;
  try {
    pid = Number(readFileSync(path.join(lock, 'pid'), 'utf8'));
  } catch {
    // not written yet, or the lock was just released
  }
  if (pid > 0 && pid !== process.pid) {
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') return true;
    }
  }
  return Date.now() - st.mtimeMs > STALE_LOCK_MS;
}

async function loadOrRefit(chip: string): Promise<Refit> {
  const key = refitKey(chip);
  if (process.env.STEPCAL_NO_REFIT_CACHE === '1') return refitNow(chip, key);
  mkdirSync(CACHE_DIR, { recursive: true });
  const file = path.join(CACHE_DIR, `${chip}-${key}.json`);
  const lock = `${file}.lock`;
  for (;;) {
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as Refit;
    try {
      mkdirSync(lock);
      writeFileSync(path.join(lock, 'pid'), String(process.pid));
    } catch {
      if (lockIsStale(lock)) rmSync(lock, { recursive: true, force: true });
      await sleep(250);
      continue;
    }
    try {
      const r = await refitNow(chip, key);
      store(r);
      return r;
    } finally {
      rmSync(lock, { recursive: true, force: true });
    }
  }
}

/** `chip`'s refit, computed at most once per key (see the module comment). */
export function sharedRefit(chip: string): Promise<Refit> {
  let p = inProcess.get(chip);
  if (!p) {
    p = loadOrRefit(chip);
    inProcess.set(chip, p);
  }
  return p;
}
