/**
 * Parquet input (the upstream format; the shared dataset only has CSV copies, so the test writes Parquet
 * from a real CSV slice with hyparquet-writer) and the system-descriptor → chip-file import.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import path from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { chipFromObject, loadChip } from '../../src/core/catalog/chip.ts';
import { runImport } from '../../src/measurements/pipeline.ts';
import { readText } from '../../src/core/io/fs.ts';
import { normalizeAicTable } from '../../src/measurements/aiconfigurator.ts';
import { systemToChip } from '../../src/measurements/system.ts';
import { csvTable, parquetTable } from '../../src/measurements/table.ts';
import { AIC, aicPath, csvSlice, tmpDir } from './helpers.ts';

const INT_COLS = new Set([
  'm',
  'n',
  'k',
  'batch_size',
  'isl',
  'num_heads',
  'num_key_value_heads',
  'head_dim',
  'beam_width',
  'step',
  'window_size',
  'num_gpus',
  'message_size',
]);

/**
 * A minimal valid Zstandard frame holding `input` in raw (stored) blocks — RFC 8878 §3.1: magic,
 * frame header (single segment, 4-byte content size), then ≤128 KiB raw blocks. Node 20 has no zstd
 * encoder; this lets the test exercise the ZSTD decode path that most upstream files use.
 */
function zstdStored(input: Uint8Array): Uint8Array {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(9);
  head.writeUInt32LE(0xfd2fb528, 0);
  head[4] = 0xa0; // FCS flag 2 (4 bytes) | single segment
  head.writeUInt32LE(input.length, 5);
  parts.push(head);
  const MAX = 128 * 1024;
  let off = 0;
  do {
    const n = Math.min(MAX, input.length - off);
    const last = off + n >= input.length ? 1 : 0;
    const bh = Buffer.alloc(3);
    const v = last | (0 << 1) | (n << 3);
    bh[0] = v & 0xff;
    bh[1] = (v >> 8) & 0xff;
    bh[2] = (v >> 16) & 0xff;
    parts.push(bh, Buffer.from(input.subarray(off, off + n)));
    off += n;
  } while (off < input.length);
  return new Uint8Array(Buffer.concat(parts));
}

/** Write a CSV slice as Parquet with real column types (int64 as bigint, latency double, text string). */
function toParquet(header: string, lines: string[], codec: 'SNAPPY' | 'GZIP' | 'ZSTD' | 'UNCOMPRESSED'): ArrayBuffer {
  const cols = header.split(',');
  const cells = lines.map((l) => l.split(','));
  const columnData = cols.map((name, j) => {
    if (INT_COLS.has(name)) return { name, data: cells.map((c) => BigInt(c[j]!)), type: 'INT64' as const };
    if (name === 'latency') return { name, data: cells.map((c) => Number(c[j])), type: 'DOUBLE' as const };
    return { name, data: cells.map((c) => c[j]!), type: 'STRING' as const };
  });
  return parquetWriteBuffer({
    columnData,
    codec,
    compressors: { GZIP: (b: Uint8Array) => new Uint8Array(gzipSync(b)), ZSTD: zstdStored },
  });
}

describe('Parquet input', () => {
  const file = aicPath('h200_sxm', 'generation_attention_perf', 'vllm-0.24.0');
  const { header, lines } = csvSlice(file, (_, i) => i < 3000);
  const fromCsv = normalizeAicTable(
    'generation_attention_perf',
    csvTable([header, ...lines].join('\n'), file),
    'h200',
    loadChip('h200'),
  );

  it.each(['SNAPPY', 'GZIP', 'ZSTD', 'UNCOMPRESSED'] as const)(
    '%s Parquet gives the same rows as the CSV copy',
    async (codec) => {
      const dir = tmpDir();
      const pq = path.join(dir, 'generation_attention_perf.parquet');
      const buf = toParquet(header, lines, codec);
      writeFileSync(pq, Buffer.from(buf));
      const { parquetMetadata } = await import('hyparquet');
      const meta = parquetMetadata(buf);
      expect(meta.row_groups[0]!.columns[0]!.meta_data!.codec).toBe(codec);
      const raw = await parquetTable(pq);
      expect(raw.header).toEqual(header.split(','));
      expect(typeof raw.rows[0]![5]).toBe('bigint'); // int64 arrives as bigint and is converted
      const fromPq = normalizeAicTable('generation_attention_perf', { ...raw, file }, 'h200', loadChip('h200'));
      expect(fromPq.rows).toEqual(fromCsv.rows);
      expect(fromPq.rows.length).toBe(3000);
    },
  );

  it('stepcal import aiconfigurator reads the upstream Parquet layout and records its upstream path', async () => {
    const dir = tmpDir();
    const up = path.join(dir, 'systems', 'data', 'h200_sxm', 'attention', 'vllm', '0.24.0');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(up, { recursive: true });
    const pq = path.join(up, 'generation_attention_perf.parquet');
    writeFileSync(pq, Buffer.from(toParquet(header, lines.slice(0, 100), 'ZSTD')));
    const out = path.join(dir, 'out');
    const w = await runImport('aiconfigurator', [pq], { out }); // chip inferred from the h200_sxm folder
    expect(w[0]).toMatchObject({ family: 'attention_decode', lane: 'vllm-0.24.0', rows_in: 100, rows_out: 100 });
    const prov = parseYaml(readText(path.join(out, 'attention_decode.vllm-0.24.0.provenance.yaml')));
    expect(prov.chip).toBe('h200');
    expect(prov.source_path).toBe(
      'aic-core/src/aiconfigurator_core/systems/data/h200_sxm/attention/vllm/0.24.0/generation_attention_perf.parquet',
    );
  });

  it('a corrupt Parquet file is an error naming the file', async () => {
    const dir = tmpDir();
    const pq = path.join(dir, 'gemm_perf.parquet');
    writeFileSync(pq, 'PAR1 not really');
    await expect(runImport('aiconfigurator', [pq], { chip: 'h200', out: dir })).rejects.toThrow(
      /gemm_perf\.parquet: not a readable Parquet file/,
    );
  });
});

describe('system descriptor → chip file', () => {
  const src = path.join(AIC, 'systems', 'h200_sxm.yaml');

  it('keeps datasheet facts apart from the priors the descriptor marks unofficial', () => {
    const { chip, yaml } = systemToChip(readFileSync(src, 'utf8'), src, 'h200', 'ref', { sm_count: 132, l2_mib: 50 });
    expect(chip).toMatchObject({
      name: 'h200',
      sm_version: 90,
      peak_tflops: { bf16: 989, fp8: 1978, int8: 1978 },
      hbm_tb_per_s: 4.8,
      hbm_gib: 141,
      nvlink_gb_per_s_per_dir: 450,
      nic_gb_per_s_per_dir: 50,
      gpus_per_node: 8,
      sm_count: 132,
      l2_mib: 50,
      priors: { hbm_derate: 0.8, hbm_constant_latency_us: 3, p2p_latency_us: 10 },
    });
    const parsed = chipFromObject(parseYaml(yaml), 'converted');
    expect(parsed.hbm_bytes_per_us).toBe(4.8e6);
    expect(yaml).toMatch(/nonofficial correction based on observations/);
    expect(yaml).toMatch(/Not carried .*misc\.nccl_mem, misc\.other_mem/);
  });

  it('b200: fp4_tc_flops → nvfp4 peak; l40s: 46068 MiB → 44.99 GiB', () => {
    const b = systemToChip(readFileSync(path.join(AIC, 'systems', 'b200_sxm.yaml'), 'utf8'), 'b200', 'b200', 'ref', {
      sm_count: 148,
    });
    expect(b.chip.peak_tflops).toMatchObject({ bf16: 2250, fp8: 4500, nvfp4: 9000 });
    expect(b.chip.hbm_tb_per_s).toBe(7.7);
    const l = systemToChip(readFileSync(path.join(AIC, 'systems', 'l40s.yaml'), 'utf8'), 'l40s', 'l40s', 'ref', {
      sm_count: 142,
    });
    expect(l.chip.hbm_gib).toBe(44.99);
    expect(l.chip.nvlink_gb_per_s_per_dir).toBe(32);
  });

  it('missing facts are errors naming the field', () => {
    expect(() => systemToChip(readFileSync(src, 'utf8'), src, 'h200', 'ref')).toThrow(
      /h200_sxm\.yaml column "gpu\.sm_count": .*pass --sm-count/,
    );
    const noBw = readFileSync(src, 'utf8').replace(/^ {2}mem_bw: .*$/m, '');
    expect(() => systemToChip(noBw, src, 'h200', 'ref', { sm_count: 1 })).toThrow(
      /column "gpu\.mem_bw": missing field/,
    );
    expect(() => systemToChip('', src, 'h200', 'ref')).toThrow(/empty file/);
  });

  it('stepcal import system fills sm_count / l2 from the existing catalog entry', async () => {
    const out = path.join(tmpDir(), 'h100.yaml');
    const w = await runImport('system', [path.join(AIC, 'systems', 'h100_sxm.yaml')], { out });
    expect(w[0]!.file).toBe(out);
    const chip = chipFromObject(parseYaml(readText(out)), out);
    const cat = loadChip('h100');
    expect(chip.name).toBe('h100');
    expect(chip.sm_count).toBe(cat.sm_count);
    expect(chip.l2_mib).toBe(cat.l2_mib);
    expect(chip.hbm_tb_per_s).toBe(3.35);
    expect(chip.priors?.hbm_derate).toBe(0.8);
  });
});
