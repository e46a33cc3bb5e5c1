#!/usr/bin/env node
/**
 * `npm test`'s type check (scripts/test.mjs): `tsc --noEmit -p tsconfig.json` over src/, test/ and
 * bench/, without checking src/ a second time in a fresh clone.
 *
 * The build (scripts/build.mjs, run by `npm ci` as `prepare`) already type-checks every file of src/
 * with the same compiler options (tsconfig.build.json extends tsconfig.json) and fails on any error.
 * When it passes it writes dist/.typechecked, a sha256 of what that check depended on (`checkInputsHash`:
 * every file under src/, both tsconfigs, the lockfile). Here:
 *   - a warm incremental cache (.cache/tsc/typecheck.tsbuildinfo, a developer's checkout) → plain
 *     incremental `tsc`, which re-checks only what changed (≈ 6 s CPU, docs/performance.md);
 *   - else, dist/.typechecked equal to the current hash (a fresh clone after `npm ci`, CI) → one program
 *     over tsconfig.json whose diagnostics are asked for the files outside src/ only (test/, bench/),
 *     plus the options' and global ones; src/'s declarations are still read and checked as far as the
 *     tests use them, but src/'s bodies are not checked again (≈ 25 % less CPU than the whole tsc);
 *   - else (no build, a failed build, any src/ or config edit since) → the whole `tsc`.
 * Exit 2 with the diagnostics on any error (as tsc), 0 otherwise.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** Where the build records the hash of the src/ it type-checked clean. */
export const TYPECHECKED = path.join('dist', '.typechecked');

/** sha256 over (path, bytes) of every file under src/, tsconfig.json, tsconfig.build.json and package-lock.json. */
export function checkInputsHash(root = ROOT) {
  const src = readdirSync(path.join(root, 'src'), { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile())
    .map((d) => path.relative(root, path.join(d.parentPath, d.name)).split(path.sep).join('/'))
    .sort();
  const h = createHash('sha256');
  for (const f of [...src, 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json']) {
    h.update(`${f}\n`);
    h.update(readFileSync(path.join(root, f)));
  }
  return h.digest('hex');
}

/** The whole check through tsc itself (incremental, as `npm run typecheck`). @returns its exit status. */
function wholeTsc() {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '-p', path.join(ROOT, 'tsconfig.json')], {
    stdio: 'inherit',
  });
  return r.status ?? 1;
}

/** Diagnostics of test/ and bench/ (and the program's options and globals), src/ taken as checked. @returns the exit status. */
function outsideSrc() {
  const ts = createRequire(import.meta.url)('typescript');
  const host = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => ROOT,
    getNewLine: () => '\n',
  };
  const cfg = ts.getParsedCommandLineOfConfigFile(
    path.join(ROOT, 'tsconfig.json'),
    { noEmit: true, incremental: false },
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => process.stderr.write(ts.formatDiagnostic(d, host)) },
  );
  if (!cfg) return 2;
  const program = ts.createProgram({
    rootNames: cfg.fileNames,
    options: cfg.options,
    configFileParsingDiagnostics: cfg.errors,
  });
  const diagnostics = [
    ...program.getConfigFileParsingDiagnostics(),
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
  ];
  let files = 0;
  for (const sf of program.getSourceFiles()) {
    const rel = path.relative(ROOT, sf.fileName).split(path.sep).join('/');
    if (rel.startsWith('../') || rel.startsWith('node_modules/') || rel.startsWith('src/')) continue;
    files++;
    diagnostics.push(...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf));
  }
  process.stdout.write(
    `tsc: src/ as type-checked by the build (${TYPECHECKED} matches); checked the ${files} files of test/ and bench/ against it\n`,
  );
  if (!diagnostics.length) return 0;
  process.stdout.write(ts.formatDiagnostics(diagnostics, host));
  process.stdout.write(`\nFound ${diagnostics.length} error(s).\n`);
  return 2;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const warm = existsSync(path.join(ROOT, '.cache', 'tsc', 'typecheck.tsbuildinfo'));
  let recorded = '';
  try {
    recorded = readFileSync(path.join(ROOT, TYPECHECKED), 'utf8').trim();
  } catch {
    // no build, or an older one: check everything
  }
  process.exitCode = !warm && recorded === checkInputsHash() ? outsideSrc() : wholeTsc();
}
