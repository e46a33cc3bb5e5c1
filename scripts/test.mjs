#!/usr/bin/env node
/**
 * `npm test`: the static checks (tsc, the dependency rule, Biome, knip) and the vitest suite.
 *
 * The four checks are independent and mostly single-threaded, so they run at the same time (issue 17:
 * `npm test` ≤ 2 min on 2 cores; one after another they took ~16 s, together ~9 s, see
 * docs/performance.md). vitest starts beside them: tsc alone is the checks' critical path, so for most
 * of it one core would sit idle, and vitest's start-up and first refits fill it. vitest's output is
 * held back until every check has passed, then printed and followed live; so the output reads as
 * before (the checks, then the tests) and no test result is shown for code that does not type-check.
 * Each check's output is kept and printed whole, in the order below, once it ends, so the output of
 * two steps is never interleaved. Any red check stops vitest (its whole process group) and fails the
 * run with the check's own exit status. Arguments after `--` go to vitest (`npm test -- test/fit`).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** A package's bin script, run with this node (no shell, no .bin shims). */
const bin = (pkg, file) => path.join(ROOT, 'node_modules', pkg, file);

/** The checks: a name and the node script with its arguments. */
const CHECKS = [
  // tsc over src/, test/ and bench/; src/ only when the build's own check of it no longer holds (see there).
  ['tsc', [path.join(ROOT, 'scripts', 'typecheck.mjs')]],
  ['depcheck', [path.join(ROOT, 'scripts', 'dep-graph.mjs'), '--check']],
  ['biome', [bin('@biomejs/biome', 'bin/biome'), 'check', '.']],
  ['knip', [bin('knip', 'bin/knip.js')]],
];

/** Run one check with its output buffered. @returns its name, exit status and combined output. */
function runCheck([name, args]) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    child.on('error', (e) => resolve({ name, status: 1, output: `${e.message}\n` }));
    child.on('close', (code, signal) =>
      resolve({ name, status: code ?? (signal ? 1 : 0), output: Buffer.concat(out).toString() }),
    );
  });
}

/**
 * Start vitest with its output held: chunks are kept (stdout and stderr apart, each in order) until
 * `release()`, then written and piped live. Colour follows this process's terminal (vitest sees pipes).
 * It runs in its own process group so `stop()` ends its test workers too.
 */
function startVitest(args) {
  const env = { ...process.env };
  if (process.stdout.isTTY && env.FORCE_COLOR === undefined && env.NO_COLOR === undefined) env.FORCE_COLOR = '1';
  const child = spawn(process.execPath, [bin('vitest', 'vitest.mjs'), 'run', ...args], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let held = [];
  for (const [from, to] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ])
    from.on('data', (d) => (held ? held.push([to, d]) : to.write(d)));
  const exit = new Promise((resolve) => child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
  const release = () => {
    for (const [to, d] of held) to.write(d);
    held = undefined;
  };
  const stop = () => {
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  };
  return { exit, release, stop };
}

const t0 = Date.now();
const vitest = startVitest(process.argv.slice(2));
// An interrupted `npm test` takes vitest's group down with it (it is detached from ours).
for (const sig of ['SIGINT', 'SIGTERM'])
  process.on(sig, () => {
    vitest.stop();
    process.exit(130);
  });
const results = await Promise.all(CHECKS.map(runCheck));
for (const r of results) {
  process.stdout.write(r.output);
  if (r.status !== 0) process.stderr.write(`npm test: ${r.name} failed (exit ${r.status})\n`);
}
const failed = results.find((r) => r.status !== 0);
if (failed) {
  vitest.stop();
  process.exit(failed.status);
}
process.stdout.write(`npm test: ${CHECKS.map(([n]) => n).join(', ')} clean in ${Date.now() - t0} ms\n`);
vitest.release();
process.exit(await vitest.exit);
