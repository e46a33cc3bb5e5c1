/**
 * .gitignore covers what commands generate as build outputs or leave behind when killed, and never a
 * committed file.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';

/** Whether git would ignore `rel` (tracked or not: `--no-index`). */
function ignored(rel: string): boolean {
  return spawnSync('git', ['check-ignore', '-q', '--no-index', rel], { cwd: REPO_ROOT }).status === 0;
}

describe('.gitignore', () => {
  it('ignores the serve sweep figure (a build output) and the lock a killed run leaves', () => {
    expect(ignored('fits/h100/serve-sweep-llama-3.1-8b.svg')).toBe(true);
    expect(ignored('.stepcal.lock')).toBe(true);
    expect(ignored('fits/h100/.stepcal.lock')).toBe(true);
    // The committed fit figures stay tracked.
    expect(ignored('fits/h100/gemm_bf16.svg')).toBe(false);
  });

  it('ignores no committed file', () => {
    const listed = execFileSync('git', ['ls-files', '-ci', '--exclude-standard'], { cwd: REPO_ROOT, encoding: 'utf8' });
    expect(listed).toBe('');
  });
});
