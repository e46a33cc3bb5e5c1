#!/usr/bin/env node
// Runs a TypeScript entry point with tsx's ESM loader, so stepcal needs no build step.
import { register } from 'tsx/esm/api';
import { pathToFileURL } from 'node:url';
import path from 'node:path';

register();
const [, , entry, ...rest] = process.argv;
if (!entry) {
  process.stderr.write('usage: run-ts.mjs <file.ts> [args...]\n');
  process.exit(2);
}
process.argv = [process.argv[0], entry, ...rest];
await import(pathToFileURL(path.resolve(entry)).href);
