#!/usr/bin/env node
// The `stepcal` command. Runs the compiled dist/ (built at install by the `prepare` script,
// scripts/build.mjs) when it is fresh for this command line (bin/dist-fresh.mjs: dist/.stamp newer
// than every source file the run loads); otherwise, or with STEPCAL_FROM_SOURCE=1, loads the
// TypeScript sources through tsx (the dev path: no build needed, an edited source is never shadowed
// by a stale build).
import { distIsFresh } from './dist-fresh.mjs';

let main;
if (distIsFresh(process.argv)) ({ main } = await import('../dist/cli/main.js'));
else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../src/cli/main.ts'));
}
process.exitCode = await main(process.argv);
