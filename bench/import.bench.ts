/**
 * Import benchmark (issue 2): time to import the full h200 vLLM GEMM table (~107k rows: read CSV, map
 * units, units-slip check, collapse repeats, coverage, gzip, atomic write) and the process's peak memory.
 * Goals: 3 s and 500 MB. Prints ratios; never fails.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadChip, REPO_ROOT } from '../src/core/catalog/chip.ts';
import { importAicFiles } from '../src/measurements/import.ts';

const GOAL_S = 3;
const GOAL_MB = 500;

export default async function bench(): Promise<void> {
  const input = path.resolve(
    REPO_ROOT,
    '..',
    'shared',
    'datasets',
    'aiconfigurator',
    'h200_sxm',
    'gemm_perf',
    'vllm-0.24.0',
    'gemm_perf.csv',
  );
  const out = mkdtempSync(path.join(os.tmpdir(), 'stepcal-bench-'));
  try {
    const chipInfo = loadChip('h200');
    const t0 = performance.now();
    const [s] = await importAicFiles([input], { chip: 'h200', chipInfo, outDir: out });
    const elapsed_s = (performance.now() - t0) / 1000;
    const mem = process.memoryUsage();
    const peak_rss_mb = process.resourceUsage().maxRSS / 1024;
    process.stdout.write(
      `import h200 gemm (${s!.rows_out} rows): ${elapsed_s.toFixed(2)} s (goal ${GOAL_S} s, ratio ${(elapsed_s / GOAL_S).toFixed(2)})\n` +
        `peak RSS ${peak_rss_mb.toFixed(0)} MB (goal ${GOAL_MB} MB, ratio ${(peak_rss_mb / GOAL_MB).toFixed(2)}); ` +
        `heap used after ${(mem.heapUsed / 2 ** 20).toFixed(0)} MB, rss after ${(mem.rss / 2 ** 20).toFixed(0)} MB\n`,
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}
