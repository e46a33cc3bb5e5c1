/**
 * Start-up of the `stepcal` command (issue 17 goal: ≤ 150 ms for `stepcal --help`, and for
 * `stepcal price …` minus its work). Each case is a fresh `node bin/stepcal.mjs …` process, timed
 * wall-clock from spawn to exit; the child's own CPU time (user + system) is reported beside it,
 * because the shared 2-core machine makes wall time noisy. `price --help` loads the price command
 * and everything it imports and prices nothing: the start-up part of a `stepcal price` run.
 * Without a fresh dist/ (`npm run build`, run by `npm ci`) bin/stepcal.mjs falls back to tsx and
 * the figures show that path: each line says which path the command took (bin/dist-fresh.mjs).
 *
 * NODE_EXTRA_CA_CERTS: where it is set (this workspace sets it), Node reads and parses that
 * certificate bundle at every start-up, 60–90 ms here, before any of stepcal's code runs. Each case
 * is timed as the environment has it and again without the variable, beside `node -e 0` both ways,
 * so the floor and stepcal's own part above it are both shown (docs/performance.md "Start-up").
 * Prints figures; never fails.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { distIsFresh } from '../bin/dist-fresh.mjs';

const GOAL_MS = 150;
const RUNS = 7;
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'bin', 'stepcal.mjs');
/** Preloaded into each child: print its CPU time (µs) on fd 2 at exit, after everything else. */
const CPU_HOOK = `data:text/javascript,process.on('exit',()=>{const c=process.cpuUsage();process.stderr.write('\\ncpu_us='+(c.user+c.system)+'\\n')})`;

/** The environment without NODE_EXTRA_CA_CERTS. */
function withoutCaCerts(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  return env;
}

/** Median wall and CPU ms of `RUNS` fresh processes running `args` in `env`. */
function time(args: string[], env: NodeJS.ProcessEnv = process.env): { wall_ms: number; cpu_ms: number } {
  const walls: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const r = spawnSync(process.execPath, ['--import', CPU_HOOK, ...args], { cwd: root, env, encoding: 'utf8' });
    walls.push(performance.now() - t0);
    cpus.push(Number(/cpu_us=(\d+)/.exec(r.stderr)?.[1] ?? Number.NaN) / 1000);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return { wall_ms: median(walls), cpu_ms: median(cpus) };
}

export default async function bench(): Promise<void> {
  const line = (what: string, t: { wall_ms: number; cpu_ms: number }, goal?: number) =>
    process.stdout.write(
      `${what}: ${t.wall_ms.toFixed(0)} ms wall (${t.cpu_ms.toFixed(0)} ms CPU), median of ${RUNS}` +
        (goal ? `; goal ${goal} ms (ratio ${(t.wall_ms / goal).toFixed(2)}, wall)` : '') +
        '\n',
    );
  const ca = process.env.NODE_EXTRA_CA_CERTS !== undefined;
  const envs: Array<[string, NodeJS.ProcessEnv]> = ca
    ? [
        ['as set here, NODE_EXTRA_CA_CERTS set', process.env],
        ['without NODE_EXTRA_CA_CERTS', withoutCaCerts()],
      ]
    : [['NODE_EXTRA_CA_CERTS not set', process.env]];
  const via = (argv: string[]) => (distIsFresh(['node', 'stepcal', ...argv]) ? 'dist/' : 'tsx: dist/ missing or stale');
  for (const [label, env] of envs) {
    process.stdout.write(`${label}:\n`);
    line('  node itself (node -e 0)', time(['-e', '0'], env));
    line(`  stepcal --help (${via(['--help'])})`, time([bin, '--help'], env), GOAL_MS);
    line(
      `  stepcal price --help (${via(['price', '--help'])}; price command loaded, no pricing)`,
      time([bin, 'price', '--help'], env),
      GOAL_MS,
    );
  }
  line(
    'stepcal --help from the sources (STEPCAL_FROM_SOURCE=1, tsx)',
    time([bin, '--help'], { ...process.env, STEPCAL_FROM_SOURCE: '1' }),
  );
}
