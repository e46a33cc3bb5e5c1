/**
 * Every bad-input case of issue 2: an error naming file, row and column and what was expected, and
 * nothing written — a failed import leaves earlier files untouched.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runImport } from '../../src/measurements/pipeline.ts';
import { aicPath, csvSlice, getCell, setCell, tmpDir, writeTable } from './helpers.ts';

const GEMM = aicPath('h200_sxm', 'gemm_perf', 'vllm-0.24.0');
const DECODE = aicPath('h200_sxm', 'generation_attention_perf', 'vllm-0.24.0');
const gemm = csvSlice(GEMM, (_, i) => i < 20);

/** Snapshot of every file (name → bytes) in a directory. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(dir).sort()) out[f] = readFileSync(path.join(dir, f)).toString('base64');
  return out;
}

/**
 * Import a good gemm table into `out`, then a bad one (same family and lane, so it would overwrite);
 * expect the error and the directory byte-for-byte unchanged.
 */
async function expectRejected(table: string, header: string, lines: string[], message: RegExp): Promise<Error> {
  const dir = tmpDir();
  const out = path.join(dir, 'out');
  const good = writeTable(path.join(dir, 'good'), 'gemm_perf', gemm.header, gemm.lines);
  await runImport('aiconfigurator', [good], { chip: 'h200', out });
  const before = snapshot(out);
  expect(Object.keys(before)).toEqual(['gemm.vllm-0.24.0.csv.gz', 'gemm.vllm-0.24.0.provenance.yaml']);
  const bad = writeTable(path.join(dir, 'bad'), table, header, lines);
  const err = await runImport('aiconfigurator', [bad], { chip: 'h200', out }).then(
    () => undefined,
    (e: Error) => e,
  );
  expect(err, 'import should fail').toBeInstanceOf(Error);
  expect(err!.message).toMatch(message);
  expect(err!.message).toContain(bad);
  expect(snapshot(out)).toEqual(before);
  expect(readdirSync(out).some((f) => f.endsWith('.tmp'))).toBe(false);
  return err!;
}

describe('bad input is rejected with file/row/column and writes nothing', () => {
  it('missing column', async () => {
    const header = gemm.header.replace(',gemm_dtype', '');
    const lines = gemm.lines.map((l) =>
      l
        .split(',')
        .filter((_, i) => i !== gemm.header.split(',').indexOf('gemm_dtype'))
        .join(','),
    );
    await expectRejected(
      'gemm_perf',
      header,
      lines,
      /row 0 \(header\) column "gemm_dtype": missing column; expected columns .*gemm_dtype/,
    );
  });

  it('non-numeric cell', async () => {
    const lines = gemm.lines.slice();
    lines[6] = setCell(gemm.header, lines[6]!, 'k', '4k');
    await expectRejected('gemm_perf', gemm.header, lines, /row 7 column "k": expected a finite number, got "4k"/);
  });

  it.each([
    ['hex', '0x80'],
    ['binary', '0b1000'],
    ['octal', '0o200'],
  ])('a %s literal in an integer column is not a number (Number() would read it as 128)', async (_name, value) => {
    const lines = gemm.lines.slice();
    lines[6] = setCell(gemm.header, lines[6]!, 'm', value);
    await expectRejected(
      'gemm_perf',
      gemm.header,
      lines,
      new RegExp(`row 7 column "m": expected a finite number, got "${value}"`),
    );
  });

  it.each([
    ['zero', '0', /row 3 column "latency": expected a positive number \(a latency\), got 0/],
    ['negative', '-0.25', /row 3 column "latency": expected a positive number \(a latency\), got -0.25/],
    ['non-finite', 'inf', /row 3 column "latency": expected a finite number, got "inf"/],
    ['NaN', 'NaN', /row 3 column "latency": expected a finite number, got "NaN"/],
    ['empty', '', /row 3 column "latency": expected a finite number, got ""/],
  ])('%s latency', async (_name, value, re) => {
    const lines = gemm.lines.slice();
    lines[2] = setCell(gemm.header, lines[2]!, 'latency', value);
    await expectRejected('gemm_perf', gemm.header, lines, re);
  });

  it('unknown dtype', async () => {
    const lines = gemm.lines.slice();
    lines[4] = setCell(gemm.header, lines[4]!, 'gemm_dtype', 'int3');
    await expectRejected(
      'gemm_perf',
      gemm.header,
      lines,
      /row 5 column "gemm_dtype": unknown GEMM dtype "int3" \(expected one of bfloat16, bf16, fp8, fp8_block, nvfp4\)/,
    );
  });

  it('a dtype or op wrong on every row is named at row 1 (the chunk read whole, one value per text column)', async () => {
    const dtypes = gemm.lines.map((l) => setCell(gemm.header, l, 'gemm_dtype', 'int3'));
    await expectRejected('gemm_perf', gemm.header, dtypes, /row 1 column "gemm_dtype": unknown GEMM dtype "int3"/);
    const ops = gemm.lines.map((l) => setCell(gemm.header, l, 'op_name', 'bmm'));
    await expectRejected('gemm_perf', gemm.header, ops, /row 1 column "op_name": unknown op "bmm"/);
  });

  it('unknown op', async () => {
    const lines = gemm.lines.slice();
    lines[0] = setCell(gemm.header, lines[0]!, 'op_name', 'bmm');
    await expectRejected(
      'gemm_perf',
      gemm.header,
      lines,
      /row 1 column "op_name": unknown op "bmm" for this table \(expected gemm\)/,
    );
  });

  it('unknown collective op', async () => {
    const nccl = csvSlice(aicPath('h200_sxm', 'nccl_perf', 'nccl-2.29.2'), (_, i) => i < 4);
    const lines = nccl.lines.slice();
    lines[1] = setCell(nccl.header, lines[1]!, 'op_name', 'broadcast');
    await expectRejected('nccl_perf', nccl.header, lines, /row 2 column "op_name": unknown op "broadcast"/);
  });

  it('empty file', async () => {
    const dir = tmpDir();
    const out = path.join(dir, 'out');
    const empty = path.join(dir, 'gemm_perf.csv');
    writeFileSync(empty, '');
    await expect(runImport('aiconfigurator', [empty], { chip: 'h200', out })).rejects.toThrow(
      /gemm_perf\.csv: empty file: expected a header row and data rows/,
    );
    writeFileSync(empty, `${gemm.header}\n`);
    await expect(runImport('aiconfigurator', [empty], { chip: 'h200', out })).rejects.toThrow(
      /gemm_perf\.csv row 1: no data rows/,
    );
    expect(() => readdirSync(out)).toThrow(); // never created
  });

  it('units slip in a GEMM table (latency in seconds labelled ms): "check units"', async () => {
    // 1000× too fast: every row's implied rate is far above 1.2 × the 989.5 TFLOP/s bf16 peak once the shape is big
    const lines = gemm.lines.map((l) =>
      setCell(gemm.header, l, 'latency', String(Number(getCell(gemm.header, l, 'latency')) / 1000)),
    );
    const err = await expectRejected(
      'gemm_perf',
      gemm.header,
      lines,
      /row \d+ column "latency": gemm dtype bf16: the fastest row implies .* TFLOP\/s, .* % of 990 TFLOP\/s \(h200's dense tensor-core peak\), above the physical bound 120\.0 %.*likely ×1000 too fast.*check units \(ms vs µs vs s\?\)/,
    );
    expect(err.message).toContain('check units (ms vs µs vs s?)');
  });

  it('units slip too SLOW in a GEMM table (latency written in µs, labelled ms: ×1000): "check units"', async () => {
    // the 20 h200 rows include large bf16 shapes that really run at ~90 % of the 989.5 TFLOP/s peak; ×1000 puts the best under 0.1 %
    const lines = gemm.lines.map((l) =>
      setCell(gemm.header, l, 'latency', String(Number(getCell(gemm.header, l, 'latency')) * 1000)),
    );
    const err = await expectRejected(
      'gemm_perf',
      gemm.header,
      lines,
      /row \d+ column "latency": gemm dtype bf16: the fastest of \d+ rows that can be judged implies .* TFLOP\/s, 0\.0\d+ % of 990 TFLOP\/s .*below the plausible band \[20\.0 %, 120\.0 %\].*likely ×1000 too slow.*check units \(ms vs µs vs s\?\)/,
    );
    expect(err.message).toContain('check units (ms vs µs vs s?)');
    // ×10 (issue 12: a ×10 slip gave hbm_derate 0.085): the fastest large shape at ≈ 9 % is below the 20 % band floor
    const x10 = gemm.lines.map((l) =>
      setCell(gemm.header, l, 'latency', String(Number(getCell(gemm.header, l, 'latency')) * 10)),
    );
    const dir = tmpDir();
    const bad10 = writeTable(dir, 'gemm_perf', gemm.header, x10);
    await expect(runImport('aiconfigurator', [bad10], { chip: 'h200', out: path.join(dir, 'out') })).rejects.toThrow(
      /below the plausible band \[20\.0 %, 120\.0 %\].*likely ×10 too slow/,
    );
  });

  it('units slip in decode attention: bandwidth above 1.05× HBM on a working set far above L2', async () => {
    // rows whose KV working set is > 4 × 50 MiB on h200
    const { header, lines } = csvSlice(DECODE, () => true);
    const h = header.split(',');
    const [bi, si, kvi, hdi, dti, wi] = [
      'batch_size',
      'step',
      'num_key_value_heads',
      'head_dim',
      'kv_cache_dtype',
      'window_size',
    ].map((c) => h.indexOf(c)) as number[];
    const big = lines
      .filter((l) => {
        const c = l.split(',');
        const kvBytes =
          Number(c[bi!]) * (Number(c[si!]) + 1) * Number(c[kvi!]) * Number(c[hdi!]) * 2 * (c[dti!] === 'fp8' ? 1 : 2);
        return c[wi!] === '0' && kvBytes > 1e9; // ≫ 4 × 50 MiB of L2
      })
      .slice(0, 5);
    expect(big.length).toBe(5);
    const lines2 = big.map((l, i) =>
      i === 3 ? setCell(header, l, 'latency', String(Number(getCell(header, l, 'latency')) / 1000)) : l,
    );
    const dir = tmpDir();
    const bad = writeTable(dir, 'generation_attention_perf', header, lines2);
    await expect(runImport('aiconfigurator', [bad], { chip: 'h200', out: path.join(dir, 'out') })).rejects.toThrow(
      /row 4 column "latency": attention_decode kv_dtype bf16: the fastest row implies .* GB\/s, .* % of 4\.80e\+3 GB\/s \(h200's HBM rate\), above the physical bound 105\.0 %.*check units \(ms vs µs vs s\?\)/,
    );
    // the unmodified rows pass
    const ok = writeTable(path.join(dir, 'ok'), 'generation_attention_perf', header, big);
    const written = await runImport('aiconfigurator', [ok], { chip: 'h200', out: path.join(dir, 'out') });
    expect(written[0]!.rows_out).toBe(5);
    // every row ×1000 too slow: the best large working set reads at < 0.1 % of HBM
    const slow = writeTable(
      path.join(dir, 'slow'),
      'generation_attention_perf',
      header,
      big.map((l) => setCell(header, l, 'latency', String(Number(getCell(header, l, 'latency')) * 1000))),
    );
    await expect(runImport('aiconfigurator', [slow], { chip: 'h200', out: path.join(dir, 'out2') })).rejects.toThrow(
      /row \d column "latency": attention_decode kv_dtype bf16: the fastest of 5 rows that can be judged implies .* GB\/s, 0\.0\d+ % of 4\.80e\+3 GB\/s .*below the plausible band \[25\.0 %, 105\.0 %\].*likely ×1000 too slow.*check units \(ms vs µs vs s\?\)/,
    );
  });

  it('a failing input among several writes none of them', async () => {
    const dir = tmpDir();
    const out = path.join(dir, 'out');
    const good = aicPath('h200_sxm', 'custom_allreduce_perf', 'vllm-0.24.0');
    const lines = gemm.lines.slice();
    lines[9] = setCell(gemm.header, lines[9]!, 'm', '');
    const bad = writeTable(dir, 'gemm_perf', gemm.header, lines);
    await expect(runImport('aiconfigurator', [good, bad], { chip: 'h200', out })).rejects.toThrow(
      /row 10 column "m": expected a finite number, got ""/,
    );
    expect(() => readdirSync(out)).toThrow();
  });
});
