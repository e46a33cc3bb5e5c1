/**
 * `npm run bench`: runs every `bench/*.bench.ts` (or only those whose name contains argv[2]) in
 * name order. Each module's default export is an async function that prints its own figures.
 * Benchmarks print times and ratios against their goals; they never fail the build.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const dir = path.dirname(fileURLToPath(import.meta.url));
const filter = process.argv[2] ?? '';
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts') && f.includes(filter))
  .sort();
process.env.STEPCAL_QUIET = '1';
for (const f of files) {
  const mod = (await import(pathToFileURL(path.join(dir, f)).href)) as { default: () => Promise<void> };
  process.stdout.write(`\n== ${f}\n`);
  await mod.default();
}
