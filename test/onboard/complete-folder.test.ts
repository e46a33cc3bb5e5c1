/**
 * Onboarding from a complete upstream chip folder (issue 15), on the reduced committed fixture
 * `test/fixtures/onboard/` (RTX PRO 6000 Blackwell Server, a few hundred rows per fitted table, every
 * skip reason kept; regenerate with `node bin/run-ts.mjs scripts/onboard-fixture.ts`). Every run writes
 * into a temporary --out-root; the test checks that nothing in the repository changes.
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { sha256File } from '../../src/core/io/fs.ts';
import { compareVersions, scanUpstreamFolder } from '../../src/measurements/upstream-folder.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { onboardChip, type OnboardOptions } from '../../src/registry/onboard.ts';
import { resolveChip } from '../../src/registry/onboard-chip.ts';
import { errorsOf, validateRegistry } from '../../src/registry/validate.ts';
import { fitReportOutputs } from '../../src/report/fit.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { makePricer } from '../pricer/helpers.ts';

const FIXTURE = path.join(REPO_ROOT, 'test', 'fixtures', 'onboard');
const DATA = path.join(FIXTURE, 'rtx_pro_6000_server');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-onboard-folder-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const opts = (o: Partial<OnboardOptions> & { outRoot: string }): OnboardOptions => ({
  chip: 'rtx-pro-6000',
  dataDir: DATA,
  bootstrap: { resamples: 50, seed: 7 },
  fitOutputs: fitReportOutputs,
  ...o,
});

/** sha256 of every file under the repository's catalog/, registry/, measurements/ and fits/ (nothing may change). */
function repoSnapshot(): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      const p = path.join(d, n);
      if (statSync(p).isDirectory()) walk(p);
      else out.set(p, sha256File(p));
    }
  };
  for (const d of ['catalog/chips', 'registry', 'measurements', 'fits']) walk(path.join(REPO_ROOT, d));
  return out;
}

describe('upstream folder scan (lane rule, counted skips)', () => {
  it('orders versions as PEP 440 does', () => {
    const v = ['1.3.0rc20', '0.5.10', '1.3.0', '0.5.6.post2', '0.5.9', '1.3.0rc5', '0.1.dev19262', '0.1'];
    expect([...v].sort(compareVersions)).toEqual([
      '0.1.dev19262',
      '0.1',
      '0.5.6.post2',
      '0.5.9',
      '0.5.10',
      '1.3.0rc5',
      '1.3.0rc20',
      '1.3.0',
    ]);
  });

  it('fixture: newest vLLM lane per table, other lanes, pointers, metadata and unfitted tables counted', async () => {
    const s = await scanUpstreamFolder(DATA);
    expect(Object.fromEntries(s.tables.map((t) => [t.table, t.chosen.lane]))).toEqual({
      gemm_perf: 'vllm-0.24.0',
      context_attention_perf: 'vllm-0.24.0',
      generation_attention_perf: 'vllm-0.24.0',
      moe_perf: 'vllm-0.24.0',
      nccl_perf: 'nccl-2.29.2',
      custom_allreduce_perf: 'vllm-0.24.0',
    });
    expect(s.counts).toEqual({
      other_lane: 2,
      reuse_pointer: 1,
      unfitted_table: 1,
      metadata: 1,
      not_a_table: 0,
      refused_table: 0,
    });
    // The SGLang (138 rows) and TRT-LLM (69 rows) custom all-reduce lanes: skipped with their row counts.
    expect(s.skipped.filter((k) => k.kind === 'other_lane').map((k) => [k.reason.split(':')[0], k.rows])).toEqual([
      ['custom_allreduce_perf lane sglang-0.5.14', 138],
      ['custom_allreduce_perf lane trtllm-1.3.0rc20', 69],
    ]);
    expect(s.skipped.find((k) => k.kind === 'reuse_pointer')!.reason).toContain('gemm_perf from version 0.24.0');
    expect(s.skipped.find((k) => k.kind === 'unfitted_table')).toMatchObject({ rows: 50 });
    // --lane overrides one table; an unknown lane is a usage error naming the lanes found.
    const o = await scanUpstreamFolder(DATA, ['custom_allreduce_perf=sglang-0.5.14']);
    expect(o.tables.find((t) => t.table === 'custom_allreduce_perf')!.chosen.lane).toBe('sglang-0.5.14');
    await expect(scanUpstreamFolder(DATA, ['vllm-9.9'])).rejects.toThrow(/--lane vllm-9\.9: no table has that lane/);
  });

  const COMPLETE = path.resolve(
    REPO_ROOT,
    '..',
    'shared',
    'datasets',
    'aiconfigurator-upstream-folder',
    'rtx_pro_6000_server',
  );
  it.skipIf(!existsSync(COMPLETE))('complete folder: every file read or skipped with a reason', async () => {
    const s = await scanUpstreamFolder(COMPLETE);
    expect(s.tables.map((t) => `${t.table}:${t.chosen.lane}:${t.lanes.length}`)).toEqual([
      'gemm_perf:vllm-0.24.0:6',
      'context_attention_perf:vllm-0.24.0:6',
      'generation_attention_perf:vllm-0.24.0:6',
      'moe_perf:vllm-0.24.0:8',
      'nccl_perf:nccl-2.29.2:1',
      'custom_allreduce_perf:vllm-0.24.0:6',
      'gdn_perf:vllm-0.24.0:6',
      'kda_perf:vllm-0.1.dev19262:2',
      'mamba2_perf:trtllm-1.3.0rc20:2',
      // MLA (mla-import.ts): the module tables from vLLM, the kernel tables from SGLang (no vLLM lane holds them).
      'mla_generation_module_perf:vllm-0.24.0:4',
      'mla_context_module_perf:vllm-0.24.0:4',
      'generation_mla_perf:sglang-0.5.14:4',
      'context_mla_perf:sglang-0.5.14:4',
    ]);
    // The folder's 16 MLA table files (mla/: vllm 0.19.0 and 0.24.0 two each, sglang 0.5.10 and 0.5.14 two
    // each, trtllm 1.3.0rc10 and rc20 four each) were all unfitted_table: now 4 are chosen and the other 12
    // are other_lane, so unfitted_table 40 − 16 = 24 and other_lane 34 + 12 = 46.
    expect(s.counts).toEqual({
      other_lane: 46,
      reuse_pointer: 25,
      unfitted_table: 24,
      metadata: 57,
      not_a_table: 0,
      refused_table: 0,
    });
  });
});

describe('the chip entry: catalog read, descriptor diff, defaults listed', () => {
  it('reads the catalog entry; a differing one is shown, not replaced', () => {
    const cat = path.join(tmp, 'cat');
    cpSync(path.join(REPO_ROOT, 'catalog', 'chips', 'rtx-pro-6000.yaml'), path.join(cat, 'rtx-pro-6000.yaml'));
    const f = path.join(cat, 'rtx-pro-6000.yaml');
    writeFileSync(f, readFileSync(f, 'utf8').replace('hbm_tb_per_s: 1.792', 'hbm_tb_per_s: 1.9'));
    const system = path.join(FIXTURE, 'systems', 'rtx_pro_6000_server.yaml');
    const r = resolveChip({ chip: 'rtx-pro-6000', catalogDir: cat, systemFile: system });
    expect(r.source).toBe('catalog');
    expect(r.chip.hbm_tb_per_s).toBe(1.9);
    expect(r.diff).toEqual([{ fact: 'hbm_tb_per_s', catalog: '1.9', descriptor: '1.792' }]);
    expect(r.updated!.chip).toMatchObject({ hbm_tb_per_s: 1.792, sm_count: 188, l2_mib: 128, peer_link: 'pcie' });
    // No catalog entry: built from the descriptor, SM count and L2 defaulted and listed.
    const n = resolveChip({ chip: 'new-part', catalogDir: cat, systemFile: system });
    expect(n.source).toBe('descriptor');
    expect(n.defaulted.map((d) => d.split(' ')[0])).toEqual(['sm_count', 'l2_mib']);
    expect(n.yaml).toContain('# Defaulted facts');
  });
});

describe('stepcal onboard on the reduced complete folder', () => {
  it('one command: reads the catalog, writes only under --out-root, coverage per family and what pricing refuses', async () => {
    const before = repoSnapshot();
    const out = path.join(tmp, 'out');
    const r = await onboardChip(opts({ outRoot: out }));
    expect(repoSnapshot()).toEqual(before);
    expect(r.resolved.source).toBe('catalog');
    expect(r.files.registry).toBe(path.join(out, 'registry', 'rtx-pro-6000.yaml'));
    const fam = Object.fromEntries(r.family_coverage.map((f) => [f.family, f.status]));
    expect(fam).toMatchObject({ gemm: 'measured', hbm: 'measured', attention_decode: 'measured', host: 'assumed' });
    expect(r.pricing.topology).toMatch(/^PCIe-only part: collectives within 8 GPUs cross PCIe/);
    const cov = JSON.parse(readFileSync(r.files.coverage, 'utf8'));
    expect(cov.read_or_skipped).toEqual([
      { kind: 'metadata', files: 1, rows: 0 },
      { kind: 'other_lane', files: 2, rows: 207 },
      { kind: 'reuse_pointer', files: 1, rows: 0 },
      { kind: 'unfitted_table', files: 1, rows: 50 },
    ]);
    // Imported tables are named where they were written (under --out-root, relative), never the private work folder.
    expect(cov.imported.length).toBeGreaterThan(0);
    for (const t of cov.imported as Array<{ file: string }>)
      expect(t.file).toMatch(/^measurements\/rtx-pro-6000\/[^/]+\.csv\.gz$/);
    for (const f of r.files.measurements)
      expect(f.startsWith(path.join(out, 'measurements', 'rtx-pro-6000'))).toBe(true);
    expect(cov.families.find((f: { family: string }) => f.family === 'collective').tables[1]).toMatchObject({
      table: 'custom_allreduce_perf',
      lane_chosen: 'vllm-0.24.0',
      lanes_found: ['sglang-0.5.14', 'trtllm-1.3.0rc20', 'vllm-0.24.0'],
    });
    // A non-required entry refused by its gate is left out; the rest of the registry stands.
    for (const x of r.refused) expect(x.family).toBe('gemm');
    for (const x of r.refused) expect(x.name).not.toMatch(/bf16/);
    const sets = loadRegistryFile(r.files.registry);
    expect(
      errorsOf(validateRegistry(sets, r.files.registry, { chip: (n) => (n === 'rtx-pro-6000' ? r.chip : undefined) })),
    ).toEqual([]);

    // Never replaced silently: a changed registry under the out-root is refused with the diff …
    const written = readFileSync(r.files.registry, 'utf8');
    writeFileSync(r.files.registry, readFileSync(r.files.registry, 'utf8').replace(/value: ([0-9.]+)/, 'value: 1$1'));
    await expect(onboardChip(opts({ outRoot: out }))).rejects.toThrow(
      /would replace .* nothing written[\s\S]*registry diff: 0 added, 0 removed, 1 changed/,
    );
    // … and written with --replace-registry.
    await onboardChip(opts({ outRoot: out, replaceRegistry: true }));
    expect(readFileSync(r.files.registry, 'utf8')).toBe(written);
  }, 600_000);

  it('without comm tables and with a refused MoE table: succeeds, both reported missing, pricing that needs them refused clearly', async () => {
    const data = path.join(tmp, 'no-comm', 'rtx_pro_6000_server');
    cpSync(DATA, data, { recursive: true });
    rmSync(path.join(data, 'comm'), { recursive: true });
    // One configuration measured twice, 2× apart: the importer refuses the table (conflicting repeats).
    // MoE is optional, so onboarding leaves that table out with the reason instead of stopping.
    const moe = path.join(data, 'moe', 'vllm', '0.24.0', 'moe_perf.csv');
    const [mHead, mFirst, ...mRest] = readFileSync(moe, 'utf8').trimEnd().split('\n');
    const twice = mFirst!.replace(/,([0-9.]+)$/, (_, v: string) => `,${Number(v) * 2}`);
    writeFileSync(moe, `${[mHead, mFirst, twice, ...mRest].join('\n')}\n`);
    const out = path.join(tmp, 'no-comm-out');
    const logged: string[] = [];
    const r = await onboardChip(
      opts({
        dataDir: data,
        outRoot: out,
        systemFile: path.join(FIXTURE, 'systems', 'rtx_pro_6000_server.yaml'),
        log: (l) => logged.push(l),
      }),
    );
    expect(r.scan.counts.refused_table).toBe(1);
    expect(r.scan.skipped.find((k) => k.kind === 'refused_table')!.reason).toMatch(
      /moe_perf\.csv row 2 column "latency": conflicting repeats: 2 rows of one configuration/,
    );
    expect(logged.some((l) => l.startsWith('refused table (left out, family moe fits without it)'))).toBe(true);
    expect(r.coverage.unsupported).toContainEqual({ family: 'moe', missing: ['moe'] });
    expect(r.family_coverage.find((f) => f.family === 'moe')!.status).toBe('missing');
    expect(readFileSync(path.join(out, 'fits', 'rtx-pro-6000', 'onboard.md'), 'utf8')).toContain(
      '- refused table (left out): ',
    );
    expect(r.coverage.unsupported).toContainEqual({ family: 'collective', missing: ['collective'] });
    expect(r.family_coverage.find((f) => f.family === 'collective')!.status).toBe('missing');
    // sm_120 has no same-generation sibling: the family extrapolation refuses, nothing is invented.
    expect(r.families.find((f) => f.family === 'collective')!.status).toBe('refused');
    expect(r.pricing.refuses).toEqual(
      expect.arrayContaining([
        'tp > 1 (every dense layer all-reduces): no all_reduce collective measured (no comm table with all_reduce rows)',
        'ep > 1 (expert-parallel MoE dispatch and combine): no alltoall collective measured (no comm table with alltoall rows)',
      ]),
    );
    const reg = loadRegistryFile(r.files.registry);
    expect(
      makePricer('llama-3.1-8b', 'rtx-pro-6000', { tp: 1 }, reg).price(decodeBatch(8, 1024)).overlap_us,
    ).toBeGreaterThan(0);
    expect(() => makePricer('llama-3.1-8b', 'rtx-pro-6000', { tp: 2 }, reg).price(decodeBatch(8, 1024))).toThrow(
      /cannot price all_reduce over 2 ranks on rtx-pro-6000 .*no all_reduce collective at any width/,
    );
  }, 600_000);

  it('a refused table of a required family (decode attention) stops the run, naming file, row and column', async () => {
    const data = path.join(tmp, 'dup-decode', 'rtx_pro_6000_server');
    cpSync(DATA, data, { recursive: true });
    const f = path.join(data, 'attention', 'vllm', '0.24.0', 'generation_attention_perf.csv');
    const [head, first, ...rest] = readFileSync(f, 'utf8').trimEnd().split('\n');
    const cols = head!.split(',');
    const lat = cols.indexOf('latency');
    const twice = first!.split(',');
    twice[lat] = String(Number(twice[lat]) * 2);
    writeFileSync(f, `${[head, first, twice.join(','), ...rest].join('\n')}\n`);
    const out = path.join(tmp, 'dup-decode-out');
    await expect(
      onboardChip(
        opts({ dataDir: data, outRoot: out, systemFile: path.join(FIXTURE, 'systems', 'rtx_pro_6000_server.yaml') }),
      ),
    ).rejects.toThrow(/generation_attention_perf\.csv row 2 column "latency": conflicting repeats/);
    expect(existsSync(out)).toBe(false);
  });

  it('a ×10 units slip in one dtype (every bf16 GEMM row) is caught on an onboarding run; nothing written', async () => {
    const data = path.join(tmp, 'slip', 'rtx_pro_6000_server');
    cpSync(DATA, data, { recursive: true });
    const f = path.join(data, 'gemm', 'vllm', '0.24.0', 'gemm_perf.csv');
    const [head, ...rows] = readFileSync(f, 'utf8').trimEnd().split('\n');
    const cols = head!.split(',');
    const [dt, lat] = [cols.indexOf('gemm_dtype'), cols.indexOf('latency')];
    const slipped = rows.map((line) => {
      const c = line.split(',');
      if (c[dt] === 'bfloat16') c[lat] = String(Number(c[lat]) * 10);
      return c.join(',');
    });
    writeFileSync(f, `${[head, ...slipped].join('\n')}\n`);
    const out = path.join(tmp, 'slip-out');
    await expect(
      onboardChip(
        opts({ dataDir: data, outRoot: out, systemFile: path.join(FIXTURE, 'systems', 'rtx_pro_6000_server.yaml') }),
      ),
    ).rejects.toThrow(/bf16|bfloat16|hbm_derate/);
    expect(existsSync(path.join(out, 'registry', 'rtx-pro-6000.yaml'))).toBe(false);
  }, 600_000);
});
