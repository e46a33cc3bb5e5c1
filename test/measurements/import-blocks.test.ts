/**
 * Reading and importing a table larger than one read block (src/measurements/table.ts reads 4 MiB
 * blocks of whole lines into one reused buffer; the stored file is compressed block by block while
 * it is read): the cells, row offsets and the stored text equal those of the whole file read at once.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { mapAicRows } from '../../src/measurements/aiconfigurator.ts';
import { importAicFiles } from '../../src/measurements/import.ts';
import { rowsToCsv } from '../../src/measurements/store.ts';
import { csvTable, readTableChunks } from '../../src/measurements/table.ts';
import { tmpDir } from './helpers.ts';

const HEADER = 'framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency';

/**
 * `rows` GEMM lines (≈ 70 bytes each, so 150k rows span three blocks), latencies from a roofline at 70 % of
 * the h200 dense peak and 80 % of HBM plus 5 µs (the units check passes them); the kernel changes half way
 * (inside the second block, which is then mapped row by row instead of in bulk).
 */
function gemmLines(rows: number): string[] {
  const chip = loadChip('h200');
  const peak = chip.peak_tflops.bf16! * 1e6;
  return Array.from({ length: rows }, (_, i) => {
    const [m, n, k] = [1 + (i % 997), 128 + 64 * Math.floor(i / 997), 4096];
    const us =
      Math.max((2 * m * n * k) / (0.7 * peak), (2 * (m * k + k * n + m * n)) / (0.8 * chip.hbm_bytes_per_us)) + 5;
    return `VLLM,0.24.0,NVIDIA H200,gemm,${i < rows / 2 ? 'default' : 'cublas'},bfloat16,${m},${n},${k},${(us / 1000).toPrecision(6)}`;
  });
}

describe('readTableChunks past one block', () => {
  it('gives every cell and row offset of a 10 MB gzip CSV with CRLF lines, a blank line before the header and no final newline', async () => {
    const lines = gemmLines(150_000);
    const file = path.join(tmpDir(), 'gemm_perf.csv.gz');
    writeFileSync(file, gzipSync(Buffer.from(`\r\n${HEADER}\r\n${lines.join('\r\n')}`), { level: 1 }));
    const offsets: number[] = [];
    let r = 0;
    let mismatches = 0;
    const total = await readTableChunks(file, (chunk, offset) => {
      expect(chunk.header).toEqual(HEADER.split(','));
      offsets.push(offset);
      expect(offset).toBe(r);
      for (let i = 0; i < chunk.length; i++, r++) {
        const cells = lines[r]!.split(',');
        for (let j = 0; j < cells.length; j++) if (chunk.cell(i, j) !== cells[j]) mismatches++;
      }
    });
    expect(total).toBe(150_000);
    expect(r).toBe(150_000);
    expect(mismatches).toBe(0);
    // 10.6 MB of text in 4 MiB blocks: three chunks.
    expect(offsets.length).toBe(3);
  });
});

describe('importAicFiles past one block', () => {
  it('stores the text of the whole table: equal to writing the mapped rows at once', async () => {
    const lines = gemmLines(150_000);
    const dir = tmpDir();
    const file = path.join(dir, 'in', 'gemm_perf.csv');
    mkdirSync(path.dirname(file));
    writeFileSync(file, `${HEADER}\n${lines.join('\n')}\n`);
    const [s] = await importAicFiles([file], {
      chip: 'h200',
      chipInfo: loadChip('h200'),
      outDir: path.join(dir, 'out'),
    });
    expect(s!.rows_out).toBe(150_000);
    const stored = gunzipSync(readFileSync(s!.file)).toString('utf8');
    const rows = mapAicRows('gemm_perf', csvTable(readFileSync(file, 'utf8'), file), 'h200');
    expect(stored).toBe(rowsToCsv('gemm', rows));
  });
});
