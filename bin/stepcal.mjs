#!/usr/bin/env node
// The `stepcal` command. Runs the compiled dist/ (built at install by the `prepare` script,
// scripts/build.mjs) when dist/.stamp is newer than every file under src/; otherwise, or with
// STEPCAL_FROM_SOURCE=1, loads the TypeScript sources through tsx (the dev path: no build needed,
// an edited source is never shadowed by a stale build).
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** True when dist/ was built after the last change to any file under src/. */
function distIsFresh() {
  if (process.env.STEPCAL_FROM_SOURCE === '1') return false;
  let built;
  try {
    built = statSync(path.join(root, 'dist', '.stamp')).mtimeMs;
  } catch {
    return false;
  }
  const src = path.join(root, 'src');
  for (const d of readdirSync(src, { withFileTypes: true, recursive: true }))
    if (statSync(path.join(d.parentPath, d.name)).mtimeMs > built) return false;
  return true;
}

let main;
if (distIsFresh()) ({ main } = await import('../dist/cli/main.js'));
else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv);
