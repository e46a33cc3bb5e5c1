/**
 * `fit --lane` names a lane stored for the families asked for, or it is a usage error listing the lanes
 * that are; and `fit <family> --check` that fitted no entry of the family compared nothing, so it fails
 * instead of reporting "the 0 entries … match".
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { runCli } from '../helpers/cli.ts';

describe('fit --lane and an empty fit --check', () => {
  it('fit gemm --lane nope exits 2 naming the lanes stored for gemm', async () => {
    const r = await runCli(['fit', 'gemm', '--chip', 'h200', '--lane', 'nope', '--check']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'stepcal: --lane nope: h200 has no gemm measurements of that lane in measurements/h200 (lanes stored for gemm: trtllm-1.3.0rc20, vllm-0.24.0)\n',
    );
  });

  it('fit all --lane nope exits 2 naming every stored lane', async () => {
    const r = await runCli(['fit', 'all', '--chip', 'h200', '--lane', 'nope', '--check']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /--lane nope: h200 has no measurements of that lane .*\(lanes stored: .*trtllm-1\.3\.0rc20, .*vllm-0\.24\.0\)/,
    );
  });

  it('fit <family> --check with no entry of the family exits 1 saying nothing was compared', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'stepcal-lane-'));
    try {
      for (const f of ['gemm.vllm-0.24.0.csv.gz', 'gemm.vllm-0.24.0.provenance.yaml'])
        copyFileSync(path.join(REPO_ROOT, 'measurements', 'h200', f), path.join(dir, f));
      const r = await runCli(['fit', 'recurrent', '--chip', 'h200', '--measurements', dir, '--check']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('fit --check h200: recurrent fitted no entries, so nothing was compared');
      expect(r.stderr).not.toContain('match registry');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
