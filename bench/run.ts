/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or only those whose name contains argv[2]) in
 * name order, each in a fresh Node process so one benchmark's heap cannot inflate another's peak
 * memory. Each module's default export is an async function that prints its own figures.
 * Benchmarks print times and ratios against their goals; they never fail the build.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));
const single = process.env.STEPCAL_BENCH_CHILD;
if (single) {
  process.env.STEPCAL_QUIET = '1';
  const mod = (await import(pathToFileURL(path.join(dir, single)).href)) as { default: () => Promise<void> };
  await mod.default();
} else {
  const filter = process.argv[2] ?? '';
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.bench.ts') && f.includes(filter))
    .sort();
  const runner = path.join(dir, '..', 'bin', 'run-ts.mjs');
  for (const f of files) {
    process.stdout.write(`\n== ${f}\n`);
    const r = spawnSync(process.execPath, [runner, fileURLToPath(import.meta.url)], {
      stdio: 'inherit',
      env: { ...process.env, STEPCAL_BENCH_CHILD: f },
    });
    if (r.status !== 0) process.stdout.write(`(${f} exited with ${r.status})\n`);
  }
}
