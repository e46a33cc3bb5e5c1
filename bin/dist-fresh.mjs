// Whether bin/stepcal.mjs may run dist/ for a command line (also read by bench/startup.bench.ts and
// bench/validate.bench.ts, which say which path they timed). dist/ is fresh for a run when
// dist/.stamp is newer than every source file the run loads: those dist/.inputs.json
// (scripts/build.mjs) lists for the top-level help and for the command argv names (the same word
// src/cli/main.ts picks), so `stepcal --help` stats six files, not all of src/ (issue 17 start-up).
// Without that list (an older build) every file under src/ is checked. STEPCAL_FROM_SOURCE=1: never.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The source files (repo-relative) a run with `argv` loads, per dist/.inputs.json; undefined without it. */
function inputsFor(argv) {
  let inputs;
  try {
    inputs = JSON.parse(readFileSync(path.join(root, 'dist', '.inputs.json'), 'utf8'));
  } catch {
    return undefined;
  }
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  const word = words[0] === 'help' ? words[1] : words[0];
  return [...inputs.help, ...(Object.hasOwn(inputs.commands, word) ? inputs.commands[word] : [])];
}

/** Every file under src/, repo-relative. */
function allSources() {
  const src = path.join(root, 'src');
  return readdirSync(src, { withFileTypes: true, recursive: true }).map((d) =>
    path.relative(root, path.join(d.parentPath, d.name)),
  );
}

/** True when dist/ was built after the last change to any source file this run loads. */
export function distIsFresh(argv) {
  if (process.env.STEPCAL_FROM_SOURCE === '1') return false;
  let built;
  try {
    built = statSync(path.join(root, 'dist', '.stamp')).mtimeMs;
  } catch {
    return false;
  }
  for (const f of inputsFor(argv) ?? allSources()) {
    const s = statSync(path.join(root, f), { throwIfNoEntry: false });
    if (!s || s.mtimeMs > built) return false;
  }
  return true;
}
