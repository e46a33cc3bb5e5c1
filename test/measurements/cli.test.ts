import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { aicPath, SPLITWISE_CSV, tmpDir } from './helpers.ts';

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => ((stdout += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => ((stderr += String(s)), true));
  try {
    return { code: await main(['node', 'stepcal', ...args]), stdout, stderr };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe('stepcal import (CLI)', () => {
  it('--json prints what was written on stdout only', async () => {
    const out = tmpDir();
    const r = await cli(['import', 'aiconfigurator', aicPath('a100_sxm', 'context_attention_perf', 'vllm-0.14.0'), '--chip', 'a100', '--out', out, '--json']);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.written).toEqual([
      expect.objectContaining({ file: path.join(out, 'attention_prefill.vllm-0.14.0.csv.gz'), family: 'attention_prefill', lane: 'vllm-0.14.0', rows_in: 5457, rows_out: 5049, duplicate_configs: 408 }),
    ]);
  });

  it('prints a table of files and row counts', async () => {
    const out = tmpDir();
    const r = await cli(['import', 'splitwise', SPLITWISE_CSV, '--chip', 'a100', '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('file\tfamily\tlane\trows_in\trows_out\trepeated_configs');
    expect(r.stdout).toContain(`${path.join(out, 'splitwise.steps.csv')}\tstep\tsplitwise\t1260\t228\t228`);
  });

  it('exit 1 with the message on stderr for bad input; exit 2 for a usage error', async () => {
    const bad = await cli(['import', 'aiconfigurator', SPLITWISE_CSV, '--chip', 'h200', '--out', tmpDir()]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(/^stepcal: .*perf_model\.csv: cannot infer the measurement family from the table name "perf_model"/);
    expect(bad.stderr).not.toMatch(/\n\s+at /); // no stack without --debug
    expect((await cli(['import', 'bogus', 'x'])).code).toBe(2);
    expect((await cli(['import'])).code).toBe(2);
  });
});
