#!/usr/bin/env node
/**
 * `npm test`: the static checks (tsc, the dependency rule, Biome, knip), then the vitest suite.
 *
 * The four checks are independent and mostly single-threaded, so they run at the same time (issue 17:
 * `npm test` ≤ 2 min on 2 cores; one after another they took ~16 s, together ~9 s, see
 * docs/performance.md). Each step's output is kept and printed whole, in the order below, once it ends,
 * so the output of two steps is never interleaved. Any red step fails the run with its own exit status,
 * and vitest does not start (as with the `&&` chain this replaces). Arguments after `--` go to vitest
 * (`npm test -- test/fit`).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** A package's bin script, run with this node (no shell, no .bin shims). */
const bin = (pkg, file) => path.join(ROOT, 'node_modules', pkg, file);

/** The checks: a name and the node script with its arguments. */
const CHECKS = [
  ['tsc', [bin('typescript', 'bin/tsc'), '--noEmit', '-p', 'tsconfig.json']],
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

const t0 = Date.now();
const results = await Promise.all(CHECKS.map(runCheck));
for (const r of results) {
  process.stdout.write(r.output);
  if (r.status !== 0) process.stderr.write(`npm test: ${r.name} failed (exit ${r.status})\n`);
}
const failed = results.find((r) => r.status !== 0);
if (failed) process.exit(failed.status);
process.stdout.write(`npm test: ${CHECKS.map(([n]) => n).join(', ')} clean in ${Date.now() - t0} ms\n`);

const vitest = spawn(process.execPath, [bin('vitest', 'vitest.mjs'), 'run', ...process.argv.slice(2)], {
  cwd: ROOT,
  stdio: 'inherit',
});
vitest.on('close', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
