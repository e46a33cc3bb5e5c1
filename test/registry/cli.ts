/** Run the stepcal CLI in a child process (for tests that need a real process: exit codes, kills). */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';

export const BIN = path.join(REPO_ROOT, 'bin', 'stepcal.mjs');

export function runCli(
  args: string[],
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
