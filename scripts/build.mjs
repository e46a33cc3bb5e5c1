#!/usr/bin/env node
/**
 * Compile src/ to dist/ (tsc -p tsconfig.build.json) so that `stepcal` starts without transpiling
 * (issue 17 start-up goal). Run by `npm ci`/`npm install` (the `prepare` script) and `npm run build`.
 * dist/ is rebuilt from scratch; then dist/.inputs.json lists, for the top-level help and for each
 * command, the source files its modules come from (bin/stepcal.mjs checks only those; see there), and
 * dist/.stamp is written last: bin/stepcal.mjs runs dist/ only while that stamp is newer than every
 * source file the command loads, and the TypeScript sources through tsx otherwise.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { checkInputsHash, TYPECHECKED } from './typecheck.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(ROOT, 'dist');
rmSync(dist, { recursive: true, force: true });
// What this tsc run type-checks, hashed before it starts (scripts/typecheck.mjs: `npm test` then leaves src/ unchecked while this still holds).
const checkedInputs = checkInputsHash(ROOT);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const r = spawnSync(process.execPath, [tsc, '-p', path.join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
if (r.status !== 0) {
  rmSync(dist, { recursive: true, force: true });
  process.stderr.write('build: tsc failed; dist/ removed (stepcal runs from the sources through tsx)\n');
  process.exit(r.status ?? 1);
}
writeFileSync(path.join(ROOT, TYPECHECKED), `${checkedInputs}\n`);

// Relative module references in emitted code: static imports and re-exports, side-effect imports,
// dynamic imports, and `new URL('./x.js', …)` (a worker's module, src/fit/parallel.ts). A reference
// this does not see would let an edited file hide behind a fresh-looking build, so every literal
// './…js' or '../…js' string in a module counts as a reference (over-counting only costs a stat).
const REF = /['"](\.\.?\/[^'"\s]+\.js)['"]/g;

/** dist-relative path → the dist-relative paths it references. */
function graph() {
  const g = new Map();
  for (const d of readdirSync(dist, { withFileTypes: true, recursive: true })) {
    if (!d.isFile() || !d.name.endsWith('.js')) continue;
    const file = path.join(d.parentPath, d.name);
    const rel = path.relative(dist, file);
    const refs = new Set();
    for (const m of readFileSync(file, 'utf8').matchAll(REF)) {
      const to = path.relative(dist, path.resolve(path.dirname(file), m[1]));
      if (existsSync(path.join(dist, to))) refs.add(to);
    }
    g.set(rel, refs);
  }
  return g;
}

/** Every module reachable from `entries` (static, dynamic and URL references alike), as src/ paths. */
function closure(g, entries) {
  const seen = new Set();
  const stack = [...entries];
  while (stack.length) {
    const f = stack.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    for (const t of g.get(f) ?? []) stack.push(t);
  }
  return [...seen].map((f) => path.join('src', f.replace(/\.js$/, '.ts')).split(path.sep).join('/')).sort();
}

const g = graph();
// The top-level help loads main.js and its static imports, not the commands (commands/index.js loads
// each command on demand): follow only static references for it.
const STATIC = /^\s*(?:import|export)\b[^'"]*?['"](\.\.?\/[^'"]+\.js)['"]/gm;
const staticRefs = (rel) =>
  [...readFileSync(path.join(dist, rel), 'utf8').matchAll(STATIC)].map((m) =>
    path.relative(dist, path.resolve(path.dirname(path.join(dist, rel)), m[1])),
  );
const helpSet = new Set();
for (const stack = ['cli/main.js']; stack.length; ) {
  const f = stack.pop();
  if (helpSet.has(f)) continue;
  helpSet.add(f);
  stack.push(...staticRefs(f));
}
const help = closure(new Map([...helpSet].map((f) => [f, new Set()])), [...helpSet]);
const { COMMANDS } = await import(pathToFileURL(path.join(dist, 'cli', 'commands', 'index.js')).href);
const commands = {};
for (const c of COMMANDS) {
  const m = /import\(\s*['"]\.\/([^'"]+\.js)['"]\s*\)/.exec(c.load.toString());
  if (!m) throw new Error(`build: cannot tell which module command ${c.name} loads (${c.load})`);
  commands[c.name] = closure(g, [`cli/commands/${m[1]}`]);
}
writeFileSync(path.join(dist, '.inputs.json'), `${JSON.stringify({ help, commands })}\n`);
writeFileSync(path.join(dist, '.stamp'), `${new Date().toISOString()}\n`);
