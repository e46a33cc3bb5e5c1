#!/usr/bin/env node
/**
 * Compile src/ to dist/ (tsc -p tsconfig.build.json) so that `stepcal` starts without transpiling
 * (issue 17 start-up goal). Run by `npm ci`/`npm install` (the `prepare` script) and `npm run build`.
 * dist/ is rebuilt from scratch, then dist/.stamp is written last: bin/stepcal.mjs runs dist/ only
 * while that stamp is newer than every file under src/, and the TypeScript sources through tsx otherwise.
 */
import { spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(ROOT, 'dist');
rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
if (r.status !== 0) {
  rmSync(dist, { recursive: true, force: true });
  process.stderr.write('build: tsc failed; dist/ removed (stepcal runs from the sources through tsx)\n');
  process.exit(r.status ?? 1);
}
writeFileSync(path.join(dist, '.stamp'), `${new Date().toISOString()}\n`);
