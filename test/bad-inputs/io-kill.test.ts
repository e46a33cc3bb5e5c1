/**
 * Kill -9 and concurrency (issue 12 item 6), in a temp copy of the repository (bin, src, catalog,
 * registry, one chip's measurements and fits, a node_modules link), never in this checkout.
 *
 * How 20 kill points per command stay cheap: one real run is frozen with SIGSTOP at each seeded
 * point, its output state copied, then resumed (SIGCONT). A process frozen at an instant leaves on
 * disk exactly what SIGKILL at that instant leaves (every write is synchronous and flushed, and a
 * stopped process writes nothing), so each copy is the state after a kill -9 there. The run is then
 * killed for real with SIGKILL at a last seeded point, and a real next run cleans that up. Calibrate's
 * points before its commit are one per state its files can be in, anchored to its progress lines (`EARLY`
 * below), so a faster fit cannot move them; the rest are drawn (mulberry32, fixed seed) inside the
 * commit window, which the test hooks widen (`STEPCAL_TEST_COMMIT_STEP_MS` before each rename of an
 * output set, `STEPCAL_TEST_PAUSE_BEFORE_RENAME_MS` between a registry temp file and its rename).
 *
 * Checked after every kill: the registry is the old bytes or the new bytes; after the clean-up a
 * next run does (the same `cleanUpAfterKilledRuns` every writing command runs first, under the lock)
 * the whole output set (registry + fits/<chip>/*) is entirely the old one or entirely the new one,
 * and no staging folder, temp file or lock is left.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { parseCoefficientSets, stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import {
  cleanUpAfterKilledRuns,
  COMMIT_PAUSE_ENV,
  LOCK_NAME,
  LOCK_WAIT_ENV,
  STAGING_PREFIX,
} from '../../src/core/io/staging.ts';
import { PAUSE_ENV } from '../../src/core/io/fs.ts';

const CHIP = 'a100';
const KILLS = 20;

/**
 * The kill points before calibrate's commit, one per distinct state its files can be in, each anchored
 * to the progress line (or file) that starts that state rather than to a time, so a faster fit or
 * validation cannot move a point past the commit (a point taken earlier or later inside one state leaves
 * the same files). Calibrate writes nothing before its commit except the lock and, while it validates,
 * the staged registry's temp file beside the target; so: no lock yet (just spawned), lock held while the
 * measurements are checked, lock held mid-fit, lock held at the gates, and lock plus the temp file while
 * validating. The commit itself (staging folder written, COMMIT marker, renames one by one) gets the
 * remaining seeded points, drawn inside its widened window.
 */
const EARLY: ReadonlyArray<{ what: string; reached: (stderr: string, temp: boolean) => boolean; concurrent?: true }> = [
  { what: 'the spawned calibrate', reached: () => true },
  { what: 'the measurement check', reached: (e) => e.includes('1/6 checking measurements') },
  { what: 'the fit, mid-way', reached: (e) => e.includes('fit attention_prefill ...'), concurrent: true },
  { what: 'the registry gates', reached: (e) => e.includes('3/6 registry gates') },
  {
    what: "the validation's temp registry",
    reached: (e, temp) => (e.includes('5/6 validating') && temp) || e.includes('6/6 writing'),
  },
];

/**
 * A runnable copy of the repository with one chip's data. @returns its root. The build (dist/) is
 * copied when there is one, and every file keeps its modification time, so the copy's bin/stepcal.mjs
 * makes the checkout's choice (bin/dist-fresh.mjs): the compiled build when it is newer than the sources
 * (a fresh clone after `npm ci`, CI), the sources through tsx when one was edited since. Each spawned CLI
 * under tsx pays ≈ 1.5 s of CPU to transpile and load src/ before any work, and this file spawns seven.
 */
function tempRepo(base: string): string {
  const root = path.join(base, 'repo');
  mkdirSync(root);
  for (const p of [
    'bin',
    'src',
    'dist',
    'catalog',
    'registry',
    'package.json',
    'tsconfig.json',
    `measurements/${CHIP}`,
    `fits/${CHIP}`,
  ]) {
    if (p === 'dist' && !existsSync(path.join(REPO_ROOT, p))) continue;
    cpSync(path.join(REPO_ROOT, p), path.join(root, p), { recursive: true, preserveTimestamps: true });
  }
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(root, 'node_modules'));
  symlinkSync(path.resolve(REPO_ROOT, '..', 'shared'), path.join(base, 'shared'));
  return root;
}

/** Every file of the output set (registry/<chip>.yaml, fits/<chip>/*) with its bytes, plus leftovers anywhere they may sit. */
function outputState(root: string): { set: Map<string, string>; leftovers: string[] } {
  const set = new Map<string, string>();
  set.set('registry', readFileSync(path.join(root, 'registry', `${CHIP}.yaml`), 'latin1'));
  const fits = path.join(root, 'fits', CHIP);
  for (const n of readdirSync(fits).sort())
    if (!n.startsWith('.')) set.set(`fits/${n}`, readFileSync(path.join(fits, n), 'latin1'));
  const leftovers = [root, path.join(root, 'registry'), fits, path.join(root, 'measurements', CHIP)].flatMap((d) =>
    readdirSync(d)
      .filter((n) => n.startsWith(STAGING_PREFIX) || n.endsWith('.tmp') || n === LOCK_NAME)
      .map((n) => path.relative(root, path.join(d, n))),
  );
  return { set, leftovers };
}

/** Copy what a kill leaves (the output set, staging folders, temp files, the lock) into `dest`, laid out as a checkout. */
function snapshot(root: string, dest: string): void {
  mkdirSync(path.join(dest, 'measurements', CHIP), { recursive: true });
  cpSync(path.join(root, 'registry'), path.join(dest, 'registry'), { recursive: true });
  cpSync(path.join(root, 'fits', CHIP), path.join(dest, 'fits', CHIP), { recursive: true });
  for (const n of readdirSync(root))
    if (n.startsWith(STAGING_PREFIX) || n === LOCK_NAME)
      cpSync(path.join(root, n), path.join(dest, n), { recursive: true });
}

/** Spawn the CLI in `root`; collects stderr; resolves `exit` with the code or signal. */
function run(
  root: string,
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; stderr: () => string; exit: Promise<{ code: number | null; signal: string | null }> } {
  let err = '';
  const child = spawn(process.execPath, [path.join(root, 'bin', 'stepcal.mjs'), ...args], {
    cwd: root,
    // One fit thread: the kills test the commit protocol, which runs on the main thread; fit workers
    // would each load the fitters again (and transpile them, when the copy runs from the sources).
    env: { ...process.env, STEPCAL_QUIET: '', STEPCAL_FIT_WORKERS: '1', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const exit = new Promise<{ code: number | null; signal: string | null }>((r) =>
    child.on('exit', (code, signal) => r({ code, signal })),
  );
  return { child, stderr: () => err, exit };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(cond: () => boolean, what: string, limitMs = 300_000): Promise<void> {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > limitMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** Freeze `child`, copy its output state to a new snapshot folder, resume it. */
function freezeAndCopy(child: ChildProcess, root: string, snaps: string[], base: string): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGSTOP');
  const dest = path.join(base, `snap-${snaps.length}`);
  snapshot(root, dest);
  snaps.push(dest);
  child.kill('SIGCONT');
}

/** Check every snapshot: registry old or new; after clean-up the set is entirely old or entirely new and nothing is left. */
function checkSnapshots(
  snaps: readonly string[],
  oldState: Map<string, string>,
  newRegistry: string,
): { old: number; new: number; mid: number } {
  return quietly(() => checkEach(snaps, oldState, newRegistry)); // the clean-up's messages are checked on the real next run
}

/** Run `fn` with STEPCAL_QUIET=1, restoring the variable after. */
function quietly<T>(fn: () => T): T {
  const prev = process.env.STEPCAL_QUIET;
  process.env.STEPCAL_QUIET = '1';
  try {
    return fn();
  } finally {
    if (prev === undefined) delete process.env.STEPCAL_QUIET;
    else process.env.STEPCAL_QUIET = prev;
  }
}

function checkEach(
  snaps: readonly string[],
  oldState: Map<string, string>,
  newRegistry: string,
): { old: number; new: number; mid: number } {
  const seen = { old: 0, new: 0, mid: 0 };
  let newSet: Map<string, string> | undefined;
  for (const s of snaps) {
    const before = outputState(s);
    expect([oldState.get('registry'), newRegistry]).toContain(before.set.get('registry'));
    if (before.leftovers.length) seen.mid++;
    cleanUpAfterKilledRuns(s, [
      path.join(s, 'registry'),
      path.join(s, 'fits', CHIP),
      path.join(s, 'measurements', CHIP),
    ]);
    rmSync(path.join(s, LOCK_NAME), { force: true }); // the next run takes over a dead holder's lock (checked for real below)
    const after = outputState(s);
    expect(after.leftovers, s).toEqual([]);
    if (after.set.get('registry') === oldState.get('registry')) {
      expect(Object.fromEntries(after.set), `${s}: old registry, so the old set`).toEqual(Object.fromEntries(oldState));
      seen.old++;
    } else {
      expect(after.set.get('registry')).toBe(newRegistry);
      newSet ??= after.set;
      expect(Object.fromEntries(after.set), `${s}: new registry, so the new set`).toEqual(Object.fromEntries(newSet));
      seen.new++;
    }
  }
  return seen;
}

describe('kill -9 at seeded points, and two runs at once (temp copy of the repository)', () => {
  let base: string;
  let root: string;
  beforeAll(() => {
    base = mkdtempSync(path.join(tmpdir(), 'stepcal-kill-'));
    root = tempRepo(base);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it(`calibrate: ${KILLS} kill points before and inside the commit; the next run finishes or discards the set; a second calibrate refuses or waits`, async () => {
    // Make the old set differ from what calibrate writes: a comment in the registry and the fit README, an old report.
    const regFile = path.join(root, 'registry', `${CHIP}.yaml`);
    const newRegistry = readFileSync(regFile, 'latin1'); // calibrate reproduces the committed registry (fit all --check)
    writeFileSync(regFile, `# old\n${newRegistry}`, 'latin1');
    writeFileSync(path.join(root, 'fits', CHIP, 'README.md'), '# old README\n');
    writeFileSync(path.join(root, 'fits', CHIP, 'report.md'), '# old report\n');
    const oldState = outputState(root).set;

    const rand = seededRandom(20261201);
    // The commit renames the registry, fits/<chip>/* (what oldState holds), the reports and the validation
    // charts: more than oldState.size files, so points within oldState.size steps land inside it, and the
    // real kill (right after the last point) finds the holder's lock on disk, however loaded the machine.
    const commitFiles = oldState.size;
    const stepMs = 60;
    const inCommit = Array.from({ length: KILLS - EARLY.length }, () => rand() * commitFiles * stepMs).sort(
      (a, b) => a - b,
    );
    const lastKill = rand() * commitFiles * stepMs;

    const a = run(root, ['calibrate', '--chip', CHIP], { [COMMIT_PAUSE_ENV]: String(stepMs) });
    const snaps: string[] = [];
    const tempOf = () => readdirSync(path.join(root, 'registry')).some((n) => n.endsWith('.tmp'));
    for (const point of EARLY) {
      await waitFor(() => point.reached(a.stderr(), tempOf()) || a.child.exitCode !== null, point.what);
      expect(a.child.exitCode, `calibrate ended before ${point.what}:\n${a.stderr()}`).toBeNull();
      a.child.kill('SIGSTOP');
      snapshot(root, path.join(base, `snap-${snaps.length}`));
      snaps.push(path.join(base, `snap-${snaps.length}`));
      // Two runs at once, while the holder is frozen with its lock (so however fast it is, it holds the lock
      // throughout): with no wait a second calibrate refuses (exit 1); with a 1 s wait it waits, then refuses.
      if (point.concurrent) {
        expect(existsSync(path.join(root, LOCK_NAME)), 'the holder has its lock mid-fit').toBe(true);
        const b = run(root, ['calibrate', '--chip', CHIP], { [LOCK_WAIT_ENV]: '0' });
        const c = run(root, ['calibrate', '--chip', CHIP], { [LOCK_WAIT_ENV]: '1' });
        const [bx, cx] = await Promise.all([b.exit, c.exit]);
        expect(bx.code).toBe(1);
        expect(b.stderr()).toMatch(
          new RegExp(`another stepcal run holds .*\\.stepcal\\.lock \\(pid ${a.child.pid}, "calibrate --chip ${CHIP}"`),
        );
        expect(cx.code).toBe(1);
        expect(c.stderr()).toContain(`waiting for pid ${a.child.pid} ("calibrate --chip ${CHIP}")`);
      }
      a.child.kill('SIGCONT');
    }

    await waitFor(() => a.stderr().includes('6/6 writing'), 'the commit of calibrate');
    const tc = Date.now();
    for (const t of inCommit) {
      await sleep(Math.max(0, tc + t - Date.now()));
      freezeAndCopy(a.child, root, snaps, base);
    }
    await sleep(Math.max(0, tc + lastKill - Date.now()));
    a.child.kill('SIGKILL');
    expect((await a.exit).signal).toBe('SIGKILL');
    expect(snaps.length).toBe(KILLS);

    const seen = checkSnapshots(snaps, oldState, newRegistry);
    expect(seen.old + seen.new).toBe(KILLS);
    expect(seen.old).toBeGreaterThan(0);

    // The real kill: the registry is old or new now; a next writing run (here a registry update that
    // then fails on its input) takes over the dead holder's lock and completes or discards the set.
    const killed = outputState(root);
    expect([oldState.get('registry'), newRegistry]).toContain(killed.set.get('registry'));
    expect(killed.leftovers).toContain(LOCK_NAME);
    const next = run(root, [
      'registry',
      'update',
      '--chip',
      CHIP,
      '--from',
      path.join(base, 'missing.yaml'),
      '--no-holdout',
      'clean-up check',
    ]);
    expect((await next.exit).code).toBe(1);
    expect(next.stderr()).toMatch(/took over a stale lock .*\(pid \d+ running "calibrate --chip a100"/);
    expect(next.stderr()).toMatch(
      /stepcal: (completed an output set interrupted in pid \d+|removed an unfinished staging folder of killed pid \d+)/,
    );
    const after = outputState(root);
    expect(after.leftovers).toEqual([]);
    const expected = after.set.get('registry') === oldState.get('registry') ? oldState : undefined;
    if (expected) expect(Object.fromEntries(after.set)).toEqual(Object.fromEntries(expected));
    else expect(after.set.get('registry')).toBe(newRegistry);
  }, 900_000);

  it(`registry update: ${KILLS} kill points around the temp write and rename; the old or the new bytes, and the next run removes the temp file`, async () => {
    const regFile = path.join(root, 'registry', `${CHIP}.yaml`);
    const oldBytes = readFileSync(regFile, 'latin1');
    const sets = parseCoefficientSets(oldBytes, regFile);
    const target = sets.flatMap((s) => s.coefficients).find((c) => c.entry.ci95 && c.entry.value > 0)!;
    target.entry.value = (target.entry.value + target.entry.ci95![0]) / 2; // halfway to its lower ci95 bound: a plausible refit
    const from = path.join(base, 'fitted.yaml');
    writeFileSync(from, stringifyCoefficientSets(sets));

    // No held-out steps (a --measurements-dir with none), so the update takes its --no-holdout branch and writes
    // without scoring the old and the new registry on a100's steps (two validations, ≈ 2.8 s of CPU per run):
    // what this test kills is the temp write and the rename, which every writing update shares; the gate's
    // own refusals and merges are test/registry/update.test.ts's.
    const noSteps = path.join(base, 'no-steps');
    const update = [
      'registry',
      'update',
      '--chip',
      CHIP,
      '--from',
      from,
      '--no-holdout',
      'kill test',
      '--measurements-dir',
      noSteps,
    ];
    const rand = seededRandom(7);
    const pauseMs = 400;
    const points = Array.from({ length: KILLS }, () => rand() * (pauseMs + 300)).sort((a, b) => a - b);
    const u = run(root, update, {
      [PAUSE_ENV]: String(pauseMs),
    });
    const tmpOf = () => readdirSync(path.join(root, 'registry')).find((n) => n.endsWith('.tmp'));
    await waitFor(() => tmpOf() !== undefined || u.child.exitCode !== null, 'the registry temp file');
    const t0 = Date.now();
    const snaps: string[] = [];
    for (const t of points) {
      await sleep(Math.max(0, t0 + t - Date.now()));
      if (u.child.exitCode !== null) break;
      freezeAndCopy(u.child, root, snaps, base);
    }
    expect((await u.exit).code, u.stderr()).toBe(0);
    const newBytes = readFileSync(regFile, 'latin1');
    expect(newBytes).not.toBe(oldBytes);
    expect(snaps.length).toBeGreaterThan(KILLS / 2);
    let withTemp = 0;
    for (const s of snaps) {
      const reg = readFileSync(path.join(s, 'registry', `${CHIP}.yaml`), 'latin1');
      expect([oldBytes, newBytes]).toContain(reg);
      const temps = readdirSync(path.join(s, 'registry')).filter((n) => n.endsWith('.tmp'));
      if (temps.length) withTemp++;
      quietly(() => cleanUpAfterKilledRuns(s, [path.join(s, 'registry')]));
      expect(readdirSync(path.join(s, 'registry')).filter((n) => n.endsWith('.tmp'))).toEqual([]);
      expect(readFileSync(path.join(s, 'registry', `${CHIP}.yaml`), 'latin1')).toBe(reg);
    }
    expect(withTemp).toBeGreaterThan(0);

    // A real kill between the temp write and the rename, then a real next run.
    writeFileSync(regFile, oldBytes, 'latin1');
    const k = run(root, update, {
      [PAUSE_ENV]: '20000',
    });
    await waitFor(() => tmpOf() !== undefined, 'the registry temp file');
    await sleep(100 + rand() * 200);
    k.child.kill('SIGKILL');
    expect((await k.exit).signal).toBe('SIGKILL');
    expect(readFileSync(regFile, 'latin1')).toBe(oldBytes);
    expect(tmpOf()).toBeDefined();
    const next = run(root, update);
    expect((await next.exit).code, next.stderr()).toBe(0);
    expect(next.stderr()).toMatch(/removed \d+ stale temp file\(s\) left by a killed run in .*registry/);
    expect(tmpOf()).toBeUndefined();
    expect(readFileSync(regFile, 'latin1')).toBe(newBytes);
    expect(statSync(regFile).isFile()).toBe(true);
  }, 300_000);
});
