/**
 * Validation with the engine fit (issue 17 goal: a ~300-row steps file scored with the engine fit in
 * ≤ 2 s, whole process). Each case is a fresh `node bin/stepcal.mjs validate --chip <c> --fit-host
 * fraction=0.25` (the protocol `calibrate` runs: engine host terms and s fitted on every 4th row,
 * the rest scored) over the chip's shipped Splitwise steps file (a100 228 rows, h100 456 rows).
 * Reports the median wall time and the child's own CPU (user + system) of 3 runs: the shared 2-core
 * machine makes wall time noisy. Uses dist/ when fresh for the command (bin/dist-fresh.mjs), tsx
 * otherwise, and says which.
 * Prints figures; never fails.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { distIsFresh } from '../bin/dist-fresh.mjs';

const GOAL_S = 2;
const RUNS = 3;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin', 'stepcal.mjs');
/** Preloaded into each child: print its CPU time (µs) on fd 2 at exit. */
const CPU_HOOK = `data:text/javascript,process.on('exit',()=>{const c=process.cpuUsage();process.stderr.write('\\ncpu_us='+(c.user+c.system)+'\\n')})`;

export default async function bench(): Promise<void> {
  for (const chip of ['a100', 'h100']) {
    const args = ['validate', '--chip', chip, '--fit-host', 'fraction=0.25'];
    const via = distIsFresh(['node', 'stepcal', ...args]) ? 'dist/' : 'tsx: dist/ missing or stale';
    const walls: number[] = [];
    const cpus: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now();
      const r = spawnSync(process.execPath, ['--import', CPU_HOOK, bin, ...args], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, STEPCAL_QUIET: '1' },
      });
      walls.push((performance.now() - t0) / 1000);
      cpus.push(Number(/cpu_us=(\d+)/.exec(r.stderr)?.[1] ?? Number.NaN) / 1e6);
      if (r.status !== 0) process.stdout.write(`  (validate --chip ${chip} exited with ${r.status})\n`);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const wall = median(walls);
    process.stdout.write(
      `validate --chip ${chip} --fit-host fraction=0.25 (${via}): ` +
        `${wall.toFixed(2)} s wall (${median(cpus).toFixed(2)} s CPU), median of ${RUNS}; goal ${GOAL_S} s ` +
        `(ratio ${(wall / GOAL_S).toFixed(2)}, wall)\n`,
    );
  }
}
