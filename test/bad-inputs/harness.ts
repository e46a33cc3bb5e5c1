/**
 * Table-driven bad-input corpus (issue "Reliability"). Each case names its input, the exit code it
 * must produce and a fragment of the message it must print on stderr, and the harness checks that
 * no file in the repository changed: `git status --porcelain --ignored --untracked-files=all`
 * before and after must be identical, and so must the bytes of every file it lists.
 *
 * Cases run the CLI in-process (test/helpers/cli.ts); inputs live in a fresh temp folder per case.
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { runCli } from '../helpers/cli.ts';

/** One bad or edge-case input. */
export interface BadInputCase {
  /** What is wrong with the input (shown as the test name). */
  name: string;
  /** CLI arguments; a function receives the case's temp folder (inputs written by `setup`). */
  args: string[] | ((tmp: string) => string[]);
  /** Writes the case's input files into `tmp` (absolute path). */
  setup?: (tmp: string) => void;
  /** Expected exit code: 1 data or user error, 2 usage error (0 for an edge case handled with a note). */
  code: number;
  /** A fragment (or pattern) the message on stderr must contain. */
  message: string | RegExp;
  /** Where the message is printed: stderr (default) or stdout. */
  stream?: 'stderr' | 'stdout';
}

/** The repository's file state: every listed path with a content hash (folders by listing only). */
export function repoState(): string {
  const listing = execFileSync('git', ['status', '--porcelain=v1', '--ignored', '--untracked-files=all'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  const lines = listing
    .split('\n')
    .filter(Boolean)
    // node_modules is the install; .stepcal.lock is the checkout lock, which commands in another test
    // worker hold for a moment while they run in-process (its clean-up is tested in io-kill.test.ts);
    // .cache/ is the test run's own scratch (the shared refit of test/helpers/refit.ts, written by
    // another worker at any moment; tsc's build info), never written by a stepcal command.
    .filter(
      (l) =>
        !l.slice(3).startsWith('node_modules') &&
        !l.slice(3).startsWith('.cache/') &&
        path.basename(l.slice(3)) !== '.stepcal.lock',
    );
  return lines
    .map((l) => {
      const p = path.join(REPO_ROOT, l.slice(3));
      if (!existsSync(p) || statSync(p).isDirectory()) return l;
      return `${l} ${createHash('sha256').update(readFileSync(p)).digest('hex')}`;
    })
    .join('\n');
}

/**
 * Register one vitest `it` per case. Each case compares the repository's state after it with the state
 * just before it; the state after one case is reused as the state before the next (the cases of one
 * corpus run one after another in one worker, and a case's setup writes only into its temp folder), so
 * each case lists and hashes the repository once instead of twice.
 */
export function runCorpus(cases: readonly BadInputCase[]): void {
  let state: string | undefined;
  for (const c of cases) {
    it(`${c.name} → exit ${c.code}`, async () => {
      const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-bad-'));
      try {
        c.setup?.(tmp);
        const before = state ?? repoState();
        state = undefined; // a case that fails below takes a fresh state for the next one
        const args = typeof c.args === 'function' ? c.args(tmp) : c.args;
        const r = await runCli(args);
        const text = c.stream === 'stdout' ? r.stdout : r.stderr;
        expect({ code: r.code, text }).toMatchObject({ code: c.code });
        if (typeof c.message === 'string') expect(text).toContain(c.message);
        else expect(text).toMatch(c.message);
        if (c.code !== 0) expect(text).not.toMatch(/^\s+at .*\(.*:\d+:\d+\)$/m);
        const after = repoState();
        expect(after).toBe(before);
        state = after;
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    });
  }
}
