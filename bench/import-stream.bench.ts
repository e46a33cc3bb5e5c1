/**
 * Streaming import benchmark (issue 12 item 5, issue 17): 2,000,000 synthetic GEMM rows (unique
 * shapes, bf16, latencies from a roofline at 70 % of the h200 dense peak and 80 % of HBM plus 5 µs,
 * so they pass the units-slip check) written to a temp `gemm_perf.csv.gz`, then imported
 * (chunked read, map, units check, repeats, coverage, gzip, staged write). Prints rows/s and the
 * process's peak RSS beside the goals: ≥ 500k rows/s and ≤ 300 MiB (issue 17); issue 12 asks < 400 MB.
 * Never fails.
 */
import { createWriteStream, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { createGzip } from 'node:zlib';
import { loadChip } from '../src/core/catalog/chip.ts';
import { importAicFiles } from '../src/measurements/import.ts';

/** Rows generated: 2M by default; `STEPCAL_BENCH_IMPORT_ROWS` (a multiple of 10,000) for a quicker look. */
const ROWS = Number(process.env.STEPCAL_BENCH_IMPORT_ROWS ?? 2_000_000);
const GOAL_ROWS_PER_S = 500_000;
const GOAL_MIB = 300;

/** Write ROWS rows (m × n × k grid, ROWS/10,000 × 100 × 100) as gzip CSV without holding them. */
async function writeSynthetic(file: string, peakFlopsPerUs: number, hbmBytesPerUs: number): Promise<void> {
  const gz = createGzip({ level: 1 });
  const out = createWriteStream(file);
  gz.pipe(out);
  gz.write('framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency\n');
  let lines: string[] = [];
  for (let i = 0; i < ROWS / 10_000; i++) {
    const m = 1 + i * 41;
    for (let j = 0; j < 100; j++) {
      const n = 128 + j * 128;
      for (let l = 0; l < 100; l++) {
        const k = 128 + l * 96;
        const us =
          Math.max((2 * m * n * k) / (0.7 * peakFlopsPerUs), (2 * (m * k + k * n + m * n)) / (0.8 * hbmBytesPerUs)) + 5;
        lines.push(`VLLM,0.24.0,NVIDIA H200,gemm,default,bfloat16,${m},${n},${k},${(us / 1000).toPrecision(6)}`);
        if (lines.length === 10_000) {
          if (!gz.write(lines.join('\n') + '\n')) await once(gz, 'drain');
          lines = [];
        }
      }
    }
  }
  if (lines.length) gz.write(lines.join('\n') + '\n');
  gz.end();
  await once(out, 'finish');
}

export default async function bench(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'stepcal-bench-stream-'));
  try {
    const chipInfo = loadChip('h200');
    const input = path.join(dir, 'in', 'gemm_perf.csv.gz');
    (await import('node:fs')).mkdirSync(path.dirname(input), { recursive: true });
    await writeSynthetic(input, chipInfo.peak_tflops.bf16! * 1e6, chipInfo.hbm_bytes_per_us);
    const rssBefore = process.resourceUsage().maxRSS / 1024;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const [s] = await importAicFiles([input], { chip: 'h200', chipInfo, outDir: path.join(dir, 'out') });
    const elapsed_s = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    // CPU of this thread pool (main + gzip workers): on a loaded machine the wall time is not the import's.
    const cpu_s = (cpu.user + cpu.system) / 1e6;
    const peak_mib = process.resourceUsage().maxRSS / 1024;
    const rate = ROWS / elapsed_s;
    process.stdout.write(
      `streaming import of ${ROWS.toLocaleString('en')} synthetic GEMM rows (${(statSync(input).size / 2 ** 20).toFixed(0)} MiB gzip in, ${s!.rows_out.toLocaleString('en')} rows out): ` +
        `${elapsed_s.toFixed(2)} s = ${(rate / 1000).toFixed(0)}k rows/s (goal ≥ ${GOAL_ROWS_PER_S / 1000}k rows/s: ${rate >= GOAL_ROWS_PER_S ? 'met' : 'NOT met'}); CPU ${cpu_s.toFixed(2)} s = ${(ROWS / cpu_s / 1000).toFixed(0)}k rows per CPU-second\n` +
        `peak RSS ${peak_mib.toFixed(0)} MiB (goal ≤ ${GOAL_MIB} MiB: ${peak_mib <= GOAL_MIB ? 'met' : 'NOT met'}; issue 12 bound 400 MB: ${peak_mib * 1.048576 < 400 ? 'met' : 'NOT met'}); ` +
        `peak before the import (generating the input) ${rssBefore.toFixed(0)} MiB\n`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
