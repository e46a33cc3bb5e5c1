/**
 * Reading and importing a table larger than one read block (src/measurements/table.ts reads 4 MiB
 * blocks of whole lines into one reused buffer; the stored file is compressed block by block while
 * it is read): the cells, row offsets and the stored text equal those of the whole file read at once; the
 * GEMM lines taken from the input bytes equal the lines written from the mapped rows.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { mapAicInto, mapAicRows } from '../../src/measurements/aiconfigurator.ts';
import { importAicFiles } from '../../src/measurements/import.ts';
import { RowColumns, type RowSink } from '../../src/measurements/row-columns.ts';
import { FAMILY_COLUMNS } from '../../src/measurements/schema.ts';
import { rowsToCsv } from '../../src/measurements/store.ts';
import { csvTable, readTableChunks } from '../../src/measurements/table.ts';
import { tmpDir } from './helpers.ts';

const HEADER = 'framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency';

/**
 * `rows` GEMM lines (≈ 70 bytes each, so 150k rows span three blocks), latencies from a roofline at 70 % of
 * the h200 dense peak and 80 % of HBM plus 5 µs (the units check passes them); the kernel changes half way
 * (inside the second block, which is then mapped row by row instead of in bulk).
 */
function gemmLines(rows: number): readonly string[] {
  const hit = built.get(rows);
  if (hit) return hit;
  const lines = buildGemmLines(rows);
  built.set(rows, lines);
  return lines;
}
/** The lines of `gemmLines`, built once per row count: three tests read the same 150k lines, none writes them. */
const built = new Map<number, readonly string[]>();
function buildGemmLines(rows: number): string[] {
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

describe('a truncated gzip table', () => {
  it('is refused as a truncated file naming it, in a small file and past the first block', async () => {
    const dir = tmpDir();
    for (const rows of [50, 150_000]) {
      const whole = gzipSync(`${HEADER}\n${gemmLines(rows).join('\n')}\n`);
      const file = path.join(dir, `gemm_perf_${rows}.csv.gz`);
      writeFileSync(file, whole.subarray(0, Math.floor(whole.length * 0.8)));
      await expect(readTableChunks(file, () => {})).rejects.toThrow(
        `cannot read ${file}: truncated gzip file (unexpected end of file): copy or download it again`,
      );
    }
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

describe('GEMM stored lines taken from the input bytes (aiconfigurator.ts storedGemmLines)', () => {
  /** The chunk's rows mapped, the stored lines the mapper gave (if any) and the lines csvLines writes from the rows. */
  async function mapOnce(lines: string[]): Promise<{ stored?: string; fromRows: string; rows: number }> {
    const file = path.join(tmpDir(), 'gemm_perf.csv');
    writeFileSync(file, `${HEADER}\n${lines.join('\n')}\n`);
    const rows = new RowColumns<object>();
    let sink: RowSink | undefined;
    let stored: Buffer | undefined;
    await readTableChunks(file, (chunk) =>
      mapAicInto(
        'gemm_perf',
        chunk,
        'h200',
        (keys) => (sink ??= rows.sink(keys)),
        rows,
        (b) => {
          stored = Buffer.from(b);
        },
      ),
    );
    const fromRows = rows.csvLines(FAMILY_COLUMNS.gemm, 0, rows.length).toString('utf8');
    return { ...(stored ? { stored: stored.toString('utf8') } : {}), fromRows, rows: rows.length };
  }

  it('equal csvLines of the mapped rows on random cells; integers not spelled as String prints them fall back', async () => {
    const plainInt = fc.integer({ min: 1, max: 2 ** 31 - 1 }).map(String);
    // Spellings `ints` accepts whose text is not String(v): a leading zero, a decimal point.
    const oddInt = fc.oneof(
      fc.integer({ min: 1, max: 99_999 }).map((v) => `0${v}`),
      fc.integer({ min: 1, max: 99_999 }).map((v) => `${v}.0`),
    );
    const latency = fc.oneof(
      fc.integer({ min: 1, max: 10 ** 9 }).map((v) => (v / 10 ** 8).toFixed(8)),
      fc.double({ min: 1e-4, max: 50, noNaN: true }).map((v) => v.toPrecision(6)),
      // 15 significant digits: still the exact decimal fast path (digits ≤ 2⁵³), so still mapped in bulk.
      fc.double({ min: 1e-4, max: 50, noNaN: true }).map((v) => v.toPrecision(15)),
    );
    const row = (int: fc.Arbitrary<string>) =>
      fc
        .tuple(int, int, int, latency)
        .map(([m, n, k, l]) => `VLLM,0.24.0,NVIDIA H200,gemm,default,bfloat16,${m},${n},${k},${l}`);
    await fc.assert(
      fc.asyncProperty(fc.array(row(plainInt), { minLength: 1, maxLength: 40 }), fc.nat(), async (lines, at) => {
        const plain = await mapOnce(lines);
        expect(plain.stored).toBe(plain.fromRows);
        // One odd spelling anywhere: no stored lines from the input, and csvLines writes String of the value.
        const odd = [...lines];
        const cells = odd[at % odd.length]!.split(',');
        cells[6 + (at % 3)] = fc.sample(oddInt, { numRuns: 1, seed: at })[0]!;
        odd[at % odd.length] = cells.join(',');
        const fallback = await mapOnce(odd);
        expect(fallback.stored).toBeUndefined();
        expect(fallback.rows).toBe(lines.length);
      }),
      { numRuns: 40, seed: 17 },
    );
  });

  it('on a hand chunk: the prefix, the input digits of m, n, k, and String of the latency in µs', async () => {
    const { stored, fromRows } = await mapOnce([
      'VLLM,0.24.0,NVIDIA H200,gemm,default,bfloat16,1,128,4096,0.00500867',
      'VLLM,0.24.0,NVIDIA H200,gemm,default,bfloat16,2147483647,10,7,0.001',
    ]);
    // 0.00500867 ms × 1000 is not the double nearest 5.00867: String prints its 17 digits.
    expect(stored).toBe(
      'h200,vllm-0.24.0,default,bf16,1,128,4096,5.0086699999999995\nh200,vllm-0.24.0,default,bf16,2147483647,10,7,1\n',
    );
    expect(stored).toBe(fromRows);
  });
});
