import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { gunzipSync, gzipSync } from 'node:zlib';
import { InputError } from '../../src/core/errors.ts';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { writeMeasurements } from '../../src/measurements/store.ts';
import type { AttentionDecodeRow, AttentionPrefillRow, GemmRow } from '../../src/measurements/schema.ts';
import { decodeKvBytes, prefillCausalFlops } from '../../src/fit/attention.ts';
import { checkFitOutputs, writeFitOutputs } from '../../src/cli/fit-outputs.ts';
import { gemmEfficiency } from '../../src/core/laws/gemm.ts';
import { applyGates, defaultLane, fitAll } from '../../src/fit/index.ts';
import { renderFitReport } from '../../src/report/fit.ts';
import type { CoefficientEntry } from '../../src/core/schemas/registry.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-fit-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const chip = loadChip('h200');
const lane = 'vllm-0.24.0';
const prov = (family: 'gemm' | 'attention_decode' | 'attention_prefill') => ({
  family,
  chip: 'h200',
  lane,
  source_repository: 'test',
  source_path: 'generated',
  source_commit: '0',
  licence: 'Apache-2.0',
  inputs: [],
  filters: [],
  rows_in: 0,
  rows_out: 0,
  units: {},
});

function makeStore(dir: string): void {
  const gemm: GemmRow[] = [];
  for (const m of [8, 64, 256, 512, 1024, 4096, 8192])
    for (const n of [4096, 16384, 65536])
      for (const k of [1024, 2048, 4096, 8192, 16384]) {
        const t = Math.max((2 * m * n * k) / (989.5e6 * gemmEfficiency(m, 0.9, 100)), 5 + (n * k * 2) / (0.85 * 4.8e6));
        gemm.push({ chip: 'h200', lane, kernel_source: 'k', dtype: 'bf16', m, n, k, latency_us: t });
      }
  const dec: AttentionDecodeRow[] = [];
  for (const [n_q, n_kv, head_dim] of [
    [32, 8, 128],
    [64, 8, 128],
    [16, 2, 64],
    [8, 1, 128],
  ] as const)
    for (const batch of [1, 16, 256])
      for (const context_tokens of [16, 1024, 8192, 32768]) {
        const r = {
          chip: 'h200',
          lane,
          kernel_source: 'fa3',
          batch,
          context_tokens,
          n_q,
          n_kv,
          head_dim,
          window: 0,
          kv_dtype: 'bf16',
          latency_us: 0,
        };
        r.latency_us = 13 + decodeKvBytes(r) / 3.9e6;
        dec.push(r);
      }
  const pre: AttentionPrefillRow[] = [];
  for (const [n_q, n_kv, head_dim] of [
    [32, 8, 128],
    [64, 8, 128],
    [16, 2, 64],
    [8, 1, 128],
  ] as const)
    for (const batch of [1, 4])
      for (const new_tokens of [64, 1024, 8192]) {
        const r = {
          chip: 'h200',
          lane,
          kernel_source: 'fa3',
          batch,
          new_tokens,
          prefix_tokens: 0,
          n_q,
          n_kv,
          head_dim,
          window: 0,
          dtype: 'bf16',
          kv_dtype: 'bf16',
          latency_us: 0,
        };
        r.latency_us = 20 + prefillCausalFlops(r) / (989.5e6 * 0.9 * 0.45);
        pre.push(r);
      }
  writeMeasurements(dir, 'gemm', lane, gemm, prov('gemm'));
  writeMeasurements(dir, 'attention_decode', lane, dec, prov('attention_decode'));
  writeMeasurements(dir, 'attention_prefill', lane, pre, prov('attention_prefill'));
}

describe('fitAll orchestrator', () => {
  const mdir = path.join(tmp, 'measurements', 'h200');
  makeStore(mdir);
  const opts = { measurementsDir: mdir, repoRoot: tmp, bootstrap: { resamples: 200, seed: 5 } };

  it('is byte-identical across runs and --check is clean after writing', async () => {
    const a = await fitAll('h200', opts);
    const b = await fitAll('h200', opts);
    expect(a.refusals).toEqual([]);
    expect(a.registry_text).toBe(b.registry_text);
    const [ra, rb] = [renderFitReport(a), renderFitReport(b)];
    expect(ra.readme).toBe(rb.readme);
    expect(ra.figures.map((f) => f.svg)).toEqual(rb.figures.map((f) => f.svg));
    const out = { registryOut: path.join(tmp, 'registry', 'h200.yaml'), fitsDir: path.join(tmp, 'fits', 'h200') };
    writeFitOutputs(a, out);
    expect(checkFitOutputs(b, out)).toEqual([]);
    // sets in BLIS layout; provenance relative to the repo root
    expect(a.sets.map((s) => s.name)).toEqual([
      'cost-model-primitives',
      'cost-model-attention',
      'cost-model-host-overheads',
    ]);
    const eps = a.sets[0]!.coefficients.find((c) => c.name === 'gemm_eps_max_bf16')!.entry;
    expect(eps.evidence!.inputs![0]!.file).toBe('measurements/h200/gemm.vllm-0.24.0.csv.gz');
    expect(eps.value).toBeCloseTo(0.9, 2);
    const scale = a.sets[1]!.coefficients.find((c) => c.name === 'attention_prefill_work_scale')!.entry;
    expect(scale.value).toBeGreaterThan(0);
    // Prefill rows generated without a ramp: the sequence ramp refits to s_half 0, which is not stored.
    expect(a.sets[1]!.coefficients.some((c) => c.name === 'attention_prefill_s_half')).toBe(false);
    expect(readFileSync(path.join(out.fitsDir, 'README.md'), 'utf8')).toContain(
      '| gemm_eps_max_bf16 | dimensionless |',
    );
    // drift is named by entry
    const text = readFileSync(out.registryOut, 'utf8').replace(/value: 0\.9\d*/, 'value: 0.5');
    writeFileSync(out.registryOut, text);
    expect(checkFitOutputs(b, out)).toContain('cost-model-primitives/gemm_eps_max_bf16: changed');
  });

  it('writes nothing when a family refuses', async () => {
    const r = await fitAll('h200', { ...opts, families: ['attention_prefill'] });
    r.refusals.push('synthetic refusal');
    const out = { registryOut: path.join(tmp, 'refused', 'h200.yaml'), fitsDir: path.join(tmp, 'refused', 'fits') };
    expect(() => writeFitOutputs(r, out)).toThrow(/nothing written/);
    expect(existsSync(out.registryOut)).toBe(false);
    expect(existsSync(out.fitsDir)).toBe(false);
  });

  it('gives the same results on worker threads as in this thread, in the same order', async () => {
    const serial = await fitAll('h200', { ...opts, workers: 1 });
    const started: string[] = [];
    const parallel = await fitAll('h200', {
      ...opts,
      workers: 2,
      onFamily: (f, p) => p === 'start' && started.push(f),
    });
    expect(serial.workers).toBe(0);
    expect(parallel.workers).toBe(2);
    // every family ran (decode as its two parts, full and SWA, each a task of its own), and the
    // results come back in fit order whatever the schedule
    const tasks = serial.families.flatMap((f) =>
      f.family === 'attention_decode' ? ['attention_decode (full)', 'attention_decode (swa)'] : [f.family],
    );
    expect([...started].sort()).toEqual(tasks.sort());
    const decode = (r: typeof serial) => r.families.find((f) => f.family === 'attention_decode');
    expect(decode(parallel)).toEqual(decode(serial));
    expect(parallel.families.map((f) => f.family)).toEqual(serial.families.map((f) => f.family));
    expect(parallel.registry_text).toBe(serial.registry_text);
    expect(parallel.coefficients).toEqual(serial.coefficients);
    expect(parallel.warnings).toEqual(serial.warnings);
    const [rs, rp] = [renderFitReport(serial), renderFitReport(parallel)];
    expect(rp.readme).toBe(rs.readme);
    expect(rp.figures.map((f) => f.svg)).toEqual(rs.figures.map((f) => f.svg));
    // prefill divides by this run's bf16 ramp (its dependency), on a worker as here
    const scale = (r: typeof serial) =>
      r.coefficients.find((c) => c.name === 'attention_prefill_work_scale')!.entry.value;
    expect(scale(parallel)).toBe(scale(serial));
  });

  it('gives the same results with one worker beside this thread (STEPCAL_FIT_WORKERS=beside)', async () => {
    const serial = await fitAll('h200', { ...opts, workers: 1 });
    const done: string[] = [];
    const beside = await fitAll('h200', {
      ...opts,
      workers: 'beside',
      onFamily: (f, p) => p === 'done' && done.push(f),
    });
    expect(beside.workers).toBe(1);
    expect([...done].sort()).toEqual(serial.families.map((f) => f.family).sort());
    expect(beside.families.map((f) => f.family)).toEqual(serial.families.map((f) => f.family));
    expect(beside.registry_text).toBe(serial.registry_text);
    expect(beside.coefficients).toEqual(serial.coefficients);
    expect(beside.warnings).toEqual(serial.warnings);
    expect(renderFitReport(beside).readme).toBe(renderFitReport(serial).readme);
  });

  it("rethrows a worker's input error as the same InputError (file, row, column)", async () => {
    const bad = path.join(tmp, 'bad', 'measurements', 'h200');
    makeStore(bad);
    const file = path.join(bad, `gemm.${lane}.csv.gz`);
    const lines = gunzipSync(readFileSync(file)).toString('utf8').split('\n');
    lines[3] = lines[3]!.replace(/,[^,]+$/, ',-1');
    writeFileSync(file, gzipSync(lines.join('\n')));
    const run = (workers: number | 'beside') => fitAll('h200', { ...opts, measurementsDir: bad, workers });
    const inThread = await run(1).catch((e: unknown) => e);
    const onWorker = await run(2).catch((e: unknown) => e);
    // Beside: the GEMM table is read on both sides (gemm on the worker, hbm here); hbm, first here, meets the row.
    const beside = await run('beside').catch((e: unknown) => e);
    expect(inThread).toBeInstanceOf(InputError);
    for (const e of [onWorker, beside]) {
      expect(e).toBeInstanceOf(InputError);
      expect((e as InputError).message).toBe((inThread as InputError).message);
      expect((e as InputError).location).toEqual({ file, row: 3, column: 'latency_us' });
    }
  });

  it("beside: an input error on the worker's side (prefill) or on this thread's (decode) is the same InputError as in one thread", async () => {
    for (const family of ['attention_prefill', 'attention_decode'] as const) {
      const bad = path.join(tmp, `bad-${family}`, 'measurements', 'h200');
      makeStore(bad);
      const file = path.join(bad, `${family}.${lane}.csv.gz`);
      const lines = gunzipSync(readFileSync(file)).toString('utf8').split('\n');
      lines[2] = lines[2]!.replace(/,[^,]+$/, ',-1');
      writeFileSync(file, gzipSync(lines.join('\n')));
      const run = (workers: number | 'beside') => fitAll('h200', { ...opts, measurementsDir: bad, workers });
      const inThread = await run(1).catch((e: unknown) => e);
      const beside = await run('beside').catch((e: unknown) => e);
      expect(inThread).toBeInstanceOf(InputError);
      expect(beside).toBeInstanceOf(InputError);
      expect((beside as InputError).message).toBe((inThread as InputError).message);
      expect((beside as InputError).location).toEqual({ file, row: 2, column: 'latency_us' });
    }
  });

  it('picks the vllm lane by default', () => {
    expect(defaultLane(['trtllm-1.3.0rc20', 'vllm-0.24.0'])).toBe('vllm-0.24.0');
    expect(defaultLane(['nccl-2.29.2'])).toBe('nccl-2.29.2');
  });
});

describe('plausibility gates', () => {
  const e = (value: number, extra: Partial<CoefficientEntry> = {}): CoefficientEntry => ({
    value,
    units: 'dimensionless',
    method: 'measured',
    fitted: true,
    scope: { hardware: ['h200'] },
    ...extra,
  });
  const c = (name: string, entry: CoefficientEntry) => ({ set: 'x', name, entry });
  it('refuses eps_max outside (0, 1.05], a CI without its value, a rate above the datasheet, falling floors and r_t above r_peak', () => {
    const fails = applyGates(chip, [
      c('gemm_eps_max_bf16', e(1.2)),
      c('gemm_m_half_bf16', e(100, { ci95: [110, 120] })),
      c('attention_decode_rate', e(5e6, { units: 'bytes_per_us' })),
      c('collective_floor_all_reduce_fp16_2rank_h200', e(5)),
      c('collective_floor_all_reduce_fp16_4rank_h200', e(4)),
      c('collective_peak_rate_all_reduce_fp16_2rank_h200', e(300000)),
      c('collective_transition_rate_all_reduce_fp16_2rank_h200', e(310000)),
    ]);
    expect(fails.some((f) => f.startsWith('gemm_eps_max_bf16'))).toBe(true);
    expect(fails.some((f) => f.startsWith('gemm_m_half_bf16: ci95'))).toBe(true);
    expect(fails.some((f) => f.startsWith('attention_decode_rate'))).toBe(true);
    expect(fails.some((f) => f.startsWith('collective_floor_all_reduce_fp16_4rank_h200'))).toBe(true);
    expect(fails.some((f) => f.startsWith('collective_transition_rate_all_reduce_fp16_2rank_h200'))).toBe(true);
    expect(applyGates(chip, [c('gemm_eps_max_bf16', e(0.9, { ci95: [0.88, 0.93] }))])).toEqual([]);
  });
});
