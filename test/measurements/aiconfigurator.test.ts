import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { readText } from '../../src/core/io/fs.ts';
import {
  aicTableFromPath,
  collapseDuplicates,
  mapAicInto,
  mapAicRows,
  normalizeAicTable,
} from '../../src/measurements/aiconfigurator.ts';
import { aicUpstreamPath, importAicFiles } from '../../src/measurements/import.ts';
import { RowColumns, type RowSink } from '../../src/measurements/row-columns.ts';
import type { RawTable } from '../../src/measurements/cell-table.ts';
import type { AttentionDecodeRow, AttentionPrefillRow, CollectiveRow, GemmRow } from '../../src/measurements/schema.ts';
import { listMeasurementFiles, listStepFiles, readMeasurements, readProvenance } from '../../src/measurements/store.ts';
import { csvTable, readTableChunks } from '../../src/measurements/table.ts';
import { aicPath, csvSlice, getCell, MEASUREMENTS, tmpDir, writeTable } from './helpers.ts';

/** Exact row counts of every curated file (rows_out after collapsing repeats). */
const CURATED_ROWS: Record<string, number> = {
  'a100/attention_decode.vllm-0.14.0.csv.gz': 5431,
  'a100/attention_prefill.vllm-0.14.0.csv.gz': 5049,
  'a100/collective.nccl-2.27.3.csv.gz': 504,
  'a100/collective.vllm-0.14.0.csv.gz': 138,
  'a100/gemm.vllm-0.14.0.csv.gz': 9240,
  'a100/moe.vllm-0.14.0.csv.gz': 6360,
  'b200/attention_decode.vllm-0.24.0.csv.gz': 61810,
  'b200/attention_prefill.vllm-0.24.0.csv.gz': 49980,
  'b200/collective.nccl-2.29.2.csv.gz': 504,
  'b200/collective.vllm-0.24.0.csv.gz': 138,
  'b200/gemm.vllm-0.24.0.csv.gz': 142968,
  'b200/moe.vllm-0.24.0.csv.gz': 63510,
  'b200/sparse.vllm-0.24.0.csv.gz': 7476,
  'h100/attention_decode.vllm-0.24.0.csv.gz': 62166,
  'h100/attention_prefill.vllm-0.24.0.csv.gz': 50830,
  'h100/collective.nccl-2.29.2.csv.gz': 504,
  'h100/collective.vllm-0.24.0.csv.gz': 138,
  'h100/gemm.vllm-0.24.0.csv.gz': 107188,
  'h100/moe.vllm-0.24.0.csv.gz': 49862,
  'h200/attention_decode.vllm-0.24.0.csv.gz': 62166,
  'h200/attention_prefill.vllm-0.24.0.csv.gz': 50830,
  'h200/collective.nccl-2.29.2.csv.gz': 504,
  'h200/collective.vllm-0.24.0.csv.gz': 138,
  'h200/gemm.trtllm-1.3.0rc20.csv.gz': 100668,
  'h200/gemm.vllm-0.24.0.csv.gz': 107225,
  'h200/moe.vllm-0.24.0.csv.gz': 48762,
  'h200/sparse.vllm-0.24.0.csv.gz': 7479,
  'l40s/attention_decode.vllm-0.24.0.csv.gz': 60523,
  'l40s/attention_prefill.vllm-0.24.0.csv.gz': 50158,
  'l40s/collective.nccl-2.27.3.csv.gz': 504,
  'l40s/collective.vllm-0.14.0.csv.gz': 138,
  'l40s/gemm.vllm-0.24.0.csv.gz': 107066,
  'l40s/moe.vllm-0.24.0.csv.gz': 48317,
  // recurrent mixers (issue 14), from ../shared/datasets/aiconfigurator-modern/
  'b200/recurrent.trtllm-1.3.0rc15.csv.gz': 878,
  'b200/recurrent.trtllm-1.3.0rc20.csv.gz': 568,
  'b200/recurrent.vllm-0.1.dev19262.csv.gz': 1203,
  'b200/recurrent.vllm-0.24.0.csv.gz': 4427,
  'h100/recurrent.trtllm-1.3.0rc20.csv.gz': 545,
  'h100/recurrent.vllm-0.1.dev19262.csv.gz': 1203,
  'h100/recurrent.vllm-0.24.0.csv.gz': 4423,
  'h100/sparse.vllm-0.24.0.csv.gz': 7475,
  'h200/recurrent.trtllm-1.3.0rc20.csv.gz': 568,
  'h200/recurrent.vllm-0.1.dev19262.csv.gz': 1203,
  'h200/recurrent.vllm-0.24.0.csv.gz': 4427,
  'l40s/recurrent.trtllm-1.3.0rc20.csv.gz': 517,
  'l40s/recurrent.vllm-0.1.dev19262.csv.gz': 1145,
  'l40s/recurrent.vllm-0.24.0.csv.gz': 4193,
  // MLA module and kernel tables (issue 13), from ../shared/datasets/aiconfigurator-modern/
  'a100/mla.vllm-0.14.0.csv.gz': 2245,
  'b200/mla.vllm-0.24.0.csv.gz': 22056,
  'h100/mla.vllm-0.24.0.csv.gz': 14310,
  'h200/mla.vllm-0.24.0.csv.gz': 14358,
  'l40s/mla.vllm-0.24.0.csv.gz': 6871,
  // DeepEP dispatch and combine (issue 13 item 3), from ../shared/datasets/aiconfigurator-modern/ (sglang lane)
  'b200/expert_alltoall.sglang-0.5.12.csv.gz': 5320,
  'h100/expert_alltoall.sglang-0.5.12.csv.gz': 5320,
  'h200/expert_alltoall.sglang-0.5.12.csv.gz': 5320,
};

function countDataLines(file: string): number {
  const buf = file.endsWith('.gz') ? gunzipSync(readFileSync(file)) : readFileSync(file);
  let n = 0;
  for (let i = buf.indexOf(10); i >= 0; i = buf.indexOf(10, i + 1)) n++;
  return n - 1; // header
}

describe('curated measurements', () => {
  it('ship exactly the expected files with the expected row counts, matching their provenance', () => {
    const found: string[] = [];
    for (const chip of ['a100', 'b200', 'h100', 'h200', 'l40s']) {
      for (const f of listMeasurementFiles(path.join(MEASUREMENTS, chip)))
        found.push(`${chip}/${path.basename(f.file)}`);
    }
    expect(found.sort()).toEqual(Object.keys(CURATED_ROWS).sort());
    for (const [rel, rows] of Object.entries(CURATED_ROWS)) {
      const file = path.join(MEASUREMENTS, rel);
      expect(countDataLines(file), rel).toBe(rows);
      const prov = readProvenance(file);
      expect(prov.rows_out, rel).toBe(rows);
      expect(prov.source_repository).toBe('ai-dynamo/aiconfigurator');
      expect(prov.source_commit).toBe('095f58a51c4ca8e61b66ec108d86f223f8d559ce');
      expect(prov.licence).toBe('Apache-2.0');
      expect(prov.inputs[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
      // The sparse family combines five tables of one lane (src/measurements/sparse-import.ts), joined by '; '.
      for (const part of prov.source_path.split('; '))
        expect(part).toMatch(
          /^aic-core\/src\/aiconfigurator_core\/systems\/data\/[a-z0-9_]+\/(gemm|attention|moe|comm|sparse_attention|mhc|msa|linear_attention|kda|mla)\/(vllm|trtllm|nccl|sglang)\/[^/]+\/[a-z0-9_]+\.parquet$/,
        );
    }
  });

  it('a100 context attention: 408 repeated configurations collapsed, reported in provenance', () => {
    const prov = readProvenance(path.join(MEASUREMENTS, 'a100/attention_prefill.vllm-0.14.0.csv.gz'));
    expect(prov.rows_in).toBe(5457);
    expect(prov.duplicate_configs).toBe(408);
    expect(prov.rows_out).toBe(5049);
  });

  it('h200 4096×4096×4096 bf16 GEMM is 168 µs = 818 TFLOP/s (dataset README known answer)', () => {
    const rows = readMeasurements(path.join(MEASUREMENTS, 'h200'), 'gemm', { lane: 'vllm-0.24.0' });
    expect(rows.length).toBe(107225);
    const r = rows.find((x) => x.dtype === 'bf16' && x.m === 4096 && x.n === 4096 && x.k === 4096)!;
    expect(r.latency_us).toBeCloseTo(168.0693, 3);
    expect(r.chip).toBe('h200');
    expect(r.lane).toBe('vllm-0.24.0');
    expect(r.kernel_source).toBe('torch.nn.functional.linear');
    const tflops = (2 * 4096 ** 3) / r.latency_us / 1e6;
    expect(tflops).toBeCloseTo(817.75, 2);
    expect(Math.round(tflops)).toBe(818);
  });

  it('splitwise step files sit beside the per-operator files', () => {
    expect(listStepFiles(path.join(MEASUREMENTS, 'a100')).map((f) => path.basename(f))).toEqual([
      'splitwise.steps.csv',
    ]);
    expect(listStepFiles(path.join(MEASUREMENTS, 'h100')).map((f) => path.basename(f))).toEqual([
      'splitwise.steps.csv',
    ]);
    expect(listStepFiles(path.join(MEASUREMENTS, 'h200'))).toEqual([]);
  });
});

describe('AIConfigurator mapping', () => {
  it('infers the table from the file name and the upstream path from either layout', () => {
    expect(aicTableFromPath('/x/h200_sxm/gemm_perf/vllm-0.24.0/gemm_perf.csv')).toBe('gemm_perf');
    expect(aicTableFromPath('nccl_perf.parquet')).toBe('nccl_perf');
    expect(() => aicTableFromPath('/x/foo_perf.csv')).toThrow(/cannot infer the measurement family.*foo_perf/);
    expect(aicUpstreamPath('/s/h200_sxm/nccl_perf/nccl-2.29.2/nccl_perf.csv')).toBe(
      'aic-core/src/aiconfigurator_core/systems/data/h200_sxm/comm/nccl/2.29.2/nccl_perf.parquet',
    );
    expect(aicUpstreamPath('/u/systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet')).toBe(
      'aic-core/src/aiconfigurator_core/systems/data/h200_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet',
    );
  });

  it('nccl: message_size elements → bytes (half ×2, int8 ×1), ms → µs, lane nccl-<version>', () => {
    const file = aicPath('h200_sxm', 'nccl_perf', 'nccl-2.29.2');
    const raw = csvTable(readText(file), file);
    const imp = normalizeAicTable('nccl_perf', raw, 'h200');
    const rows = imp.rows as CollectiveRow[];
    expect(rows.length).toBe(504);
    const half = rows.filter((r) => r.dtype === 'fp16');
    const int8 = rows.filter((r) => r.dtype === 'int8');
    expect(half.length).toBe(252);
    expect(int8.length).toBe(252);
    // half runs 256…268,435,456 elements = 512 B … 512 MiB; int8 512…536,870,912 elements = the same bytes.
    expect(Math.min(...half.map((r) => r.message_bytes))).toBe(512);
    expect(Math.max(...half.map((r) => r.message_bytes))).toBe(512 * 1024 * 1024);
    expect(Math.min(...int8.map((r) => r.message_bytes))).toBe(512);
    expect(Math.max(...int8.map((r) => r.message_bytes))).toBe(512 * 1024 * 1024);
    expect(rows[0]).toMatchObject({
      op: 'all_gather',
      ranks: 2,
      nodes: 1,
      message_bytes: 512,
      backend: 'nccl',
      lane: 'nccl-2.29.2',
      kernel_source: 'NCCL',
    });
    expect(rows[0]!.latency_us).toBeCloseTo(5.36, 10); // 0.00536 ms
    // 8-GPU all_reduce of 512 MiB: bus bandwidth ≈ 460 GB/s (NVLink 4; dataset README check)
    const ar = rows.find(
      (r) => r.op === 'all_reduce' && r.ranks === 8 && r.dtype === 'fp16' && r.message_bytes === 2 ** 29,
    )!;
    const busbw = (((2 * 7) / 8) * (ar.message_bytes / ar.latency_us)) / 1e3;
    expect(busbw).toBeGreaterThan(440);
    expect(busbw).toBeLessThan(480);
  });

  it('custom all-reduce: bf16 elements ×2 bytes, vllm_graph/eager → custom_graph/custom_eager', () => {
    const file = aicPath('h200_sxm', 'custom_allreduce_perf', 'vllm-0.24.0');
    const imp = normalizeAicTable('custom_allreduce_perf', csvTable(readText(file), file), 'h200');
    const rows = imp.rows as CollectiveRow[];
    expect(rows.length).toBe(138);
    expect(rows[0]).toMatchObject({
      op: 'all_reduce',
      dtype: 'bf16',
      ranks: 2,
      message_bytes: 256,
      backend: 'custom_graph',
      lane: 'vllm-0.24.0',
    });
    expect(rows[1]!.backend).toBe('custom_eager');
    expect(rows[0]!.latency_us).toBeCloseTo(4.37792003, 6);
  });

  it('decode attention: context_tokens = step + 1; prefill new_tokens = isl, prefix = step', () => {
    const dfile = aicPath('h200_sxm', 'generation_attention_perf', 'vllm-0.24.0');
    const { header, lines } = csvSlice(dfile, (_, i) => i < 50);
    const d = normalizeAicTable('generation_attention_perf', csvTable([header, ...lines].join('\n'), dfile), 'h200');
    const r0 = d.rows.at(0) as AttentionDecodeRow;
    expect(r0.context_tokens).toBe(Number(getCell(header, lines[0]!, 'step')) + 1);
    expect(r0).toMatchObject({ batch: 32, n_q: 64, n_kv: 1, head_dim: 64, kv_dtype: 'bf16', window: 0 });
    expect((d.rows.at(1) as AttentionDecodeRow).kv_dtype).toBe('fp8');
    const pfile = aicPath('h200_sxm', 'context_attention_perf', 'vllm-0.24.0');
    const p = csvSlice(pfile, (_, i) => i < 5);
    const pr = normalizeAicTable('context_attention_perf', csvTable([p.header, ...p.lines].join('\n'), pfile), 'h200');
    expect(pr.rows.at(0) as AttentionPrefillRow).toMatchObject({
      batch: 4,
      new_tokens: 16384,
      prefix_tokens: 0,
      n_q: 64,
      n_kv: 64,
      head_dim: 64,
      dtype: 'bf16',
      kv_dtype: 'fp8',
    });
    expect((pr.rows.at(0) as AttentionPrefillRow).latency_us).toBeCloseTo(17671.32314046224, 6);
  });

  it('a100 attention has no window_size column → window 0; its repeats collapse to the pair mean', () => {
    const file = aicPath('a100_sxm', 'context_attention_perf', 'vllm-0.14.0');
    const raw = csvTable(readText(file), file);
    expect(raw.header).not.toContain('window_size');
    const imp = normalizeAicTable('context_attention_perf', raw, 'a100', loadChip('a100'));
    expect(imp.rows_in).toBe(5457);
    expect(imp.duplicate_configs).toBe(408);
    expect(imp.rows_removed).toBe(408);
    expect(imp.rows.length).toBe(5049);
    expect((imp.rows as AttentionPrefillRow[]).every((r) => r.window === 0)).toBe(true);
  });

  it('collapseDuplicates takes the median (mean of a pair), keeps first-occurrence order', () => {
    const base = { chip: 'x', lane: 'l', kernel_source: 'k', dtype: 'bf16', n: 1, k: 1 };
    const rows: GemmRow[] = [
      { ...base, m: 1, latency_us: 10 },
      { ...base, m: 2, latency_us: 5 },
      { ...base, m: 1, latency_us: 14 },
      { ...base, m: 2, latency_us: 7 },
      { ...base, m: 2, latency_us: 100 },
    ];
    const c = collapseDuplicates('gemm', rows);
    expect(c.rows.map((r) => [r.m, r.latency_us])).toEqual([
      [1, 12],
      [2, 7],
    ]);
    expect(c.duplicate_configs).toBe(2);
    expect(c.rows_removed).toBe(3);
  });

  it('collapseDuplicates on typed columns: rows in increasing key order are kept as they are (no index); out of order, repeats still found', () => {
    const base = { chip: 'x', lane: 'l', kernel_source: 'k', dtype: 'bf16', n: 1, k: 1 };
    const sorted = new RowColumns<GemmRow>();
    for (let m = 1; m <= 50; m++) sorted.push({ ...base, m, latency_us: m });
    const kept = collapseDuplicates('gemm', sorted);
    expect(kept.rows).toBe(sorted);
    expect([kept.duplicate_configs, kept.rows_removed]).toEqual([0, 0]);
    // A repeat of m = 2 after m = 3: not increasing, so the index runs and collapses the pair to its mean.
    const repeated = new RowColumns<GemmRow>();
    for (const [m, latency_us] of [
      [1, 1],
      [2, 4],
      [3, 9],
      [2, 6],
    ] as const)
      repeated.push({ ...base, m, latency_us });
    const c = collapseDuplicates('gemm', repeated);
    expect([...c.rows].map((r) => [r.m, r.latency_us])).toEqual([
      [1, 1],
      [2, 5],
      [3, 9],
    ]);
    expect(c.duplicate_configs).toBe(1);
    // Equal neighbours (a repeat in a row) are not increasing either.
    const twice = new RowColumns<GemmRow>();
    for (const latency_us of [4, 6]) twice.push({ ...base, m: 1, latency_us });
    expect(collapseDuplicates('gemm', twice).rows.length).toBe(1);
  });

  it('GEMM chunks mapped in bulk (one value per text column) give the rows the row-by-row mapper gives; a bad cell keeps its row error', async () => {
    const header = 'framework,version,device,op_name,kernel_source,gemm_dtype,m,n,k,latency';
    const lines = Array.from(
      { length: 3000 },
      (_, i) =>
        `VLLM,0.24.0,NVIDIA H200,gemm,default,bfloat16,${1 + i},128,${64 + (i % 7)},${(0.005 + i * 1e-6).toPrecision(6)}`,
    );
    const viaChunks = async (ls: string[]) => {
      const f = writeTable(tmpDir(), 'gemm_perf', header, ls);
      const rows = new RowColumns<object>();
      let sink: RowSink | undefined;
      await readTableChunks(f, (chunk) =>
        mapAicInto('gemm_perf', chunk, 'h200', (keys) => (sink ??= rows.sink(keys)), rows),
      );
      return [...rows];
    };
    const table = (ls: string[]): RawTable => ({
      file: 'g.csv',
      header: header.split(','),
      rows: ls.map((l) => l.split(',')),
    });
    expect(await viaChunks(lines)).toEqual(mapAicRows('gemm_perf', table(lines), 'h200'));
    // Two dtypes in one chunk: not one value per column, so mapped row by row, same rows.
    const mixed = lines.map((l, i) => (i % 2 ? l.replace('bfloat16', 'fp8') : l));
    expect(await viaChunks(mixed)).toEqual(mapAicRows('gemm_perf', table(mixed), 'h200'));
    // A bad m on row 2001 and a bad latency on row 2500: the row mapper's first error, at its row.
    const bad = lines.map((l, i) =>
      i === 2000 ? l.replace(',2001,128,', ',0,128,') : i === 2499 ? l.replace(/,[^,]+$/, ',-1') : l,
    );
    await expect(viaChunks(bad)).rejects.toThrow(/gemm_perf\.csv row 2001 column "m": expected an integer ≥ 1, got 0/);
  });

  it('importAicFiles writes data + provenance with sha256 and unit conversions', async () => {
    const dir = tmpDir();
    const file = aicPath('l40s', 'custom_allreduce_perf', 'vllm-0.22.0');
    const sums = await importAicFiles([file], {
      chip: 'l40s',
      chipInfo: loadChip('l40s'),
      outDir: dir,
      sourceCommit: 'abc',
    });
    expect(sums).toHaveLength(1);
    // the 0.22.0 folder holds a copy of the 0.14.0 table: the file is named after the rows' lane
    expect(path.basename(sums[0]!.file)).toBe('collective.vllm-0.14.0.csv.gz');
    const prov = readProvenance(sums[0]!.file);
    expect(prov.units.message_bytes).toMatch(/× 2/);
    expect(prov.units.latency_us).toMatch(/ms.*1000/);
    expect(prov.source_path).toBe(
      'aic-core/src/aiconfigurator_core/systems/data/l40s/comm/vllm/0.22.0/custom_allreduce_perf.parquet',
    );
    expect(prov.inputs[0]!.rows).toBe(138);
    expect(readdirSync(dir).sort()).toEqual([
      'collective.vllm-0.14.0.csv.gz',
      'collective.vllm-0.14.0.provenance.yaml',
    ]);
    expect(existsSync(path.join(dir, 'x'))).toBe(false);
  });

  it('a ragged sweep is reported per dtype, not an error, and no rows are invented', async () => {
    const file = aicPath('h200_sxm', 'gemm_perf', 'vllm-0.24.0');
    const { header, lines } = csvSlice(file, (_, i) => i < 400);
    // keep 3 bf16 shapes and 2 of the same shapes in fp8
    const shape = (l: string) => ['m', 'n', 'k'].map((c) => getCell(header, l, c)).join('x');
    const bf = lines.filter((l) => getCell(header, l, 'gemm_dtype') === 'bfloat16').slice(0, 3);
    const shapes = new Set(bf.map(shape));
    const fp8 = lines.filter((l) => getCell(header, l, 'gemm_dtype') === 'fp8' && shapes.has(shape(l))).slice(0, 2);
    expect(fp8.length).toBe(2);
    const dir = tmpDir();
    const input = writeTable(path.join(dir, 'in'), 'gemm_perf', header, [...bf, ...fp8]);
    const imp = normalizeAicTable('gemm_perf', csvTable(readText(input), input), 'h200', loadChip('h200'));
    expect(imp.rows.length).toBe(5);
    expect(imp.coverage).toEqual({
      bf16: { rows: 3, shapes: 3, of_shapes: 3 },
      fp8: { rows: 2, shapes: 2, of_shapes: 3 },
    });
  });
});
