/**
 * `stepcal registry copy`: re-scoping, collective names rewritten, method/copied_from/rationale set,
 * refusals (target physics, over measured data, from copies), validator clean, and the committed
 * copy (registry/b300.yaml) regenerates byte for byte (gb200 is fitted from measurements since issue 15).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { capture } from '../helpers/capture.ts';
import { loadChip, REPO_ROOT, type Chip } from '../../src/core/catalog/chip.ts';
import { main } from '../../src/cli/main.ts';
import { copyRegistry, datasheetDifferences, renameForChip, scopeText } from '../../src/registry/copy.ts';
import { extrapolateFamily } from '../../src/registry/extrapolate.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { chipFreeName, parseCollectiveName } from '../../src/core/schemas/names.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { errorsOf, formatProblem, validateRegistry } from '../../src/registry/validate.ts';
import { chipRegistry, clone, findEntry } from './fixtures.ts';

const chip = (n: string): Chip => loadChip(n);
const entries = (sets: readonly CoefficientSet[]) =>
  sets.flatMap((s) => s.coefficients.map((c) => ({ set: s.name, ...c })));
const B200_FILE = path.join(REPO_ROOT, 'registry', 'b200.yaml');
const haveB200 = existsSync(B200_FILE);

describe('copyRegistry: b200 → b300 (the committed copy)', () => {
  const source = haveB200 ? loadRegistryFile(B200_FILE) : [];
  const r = haveB200 ? copyRegistry({ from: chip('b200'), to: chip('b300'), source }) : undefined;

  it.skipIf(!haveB200)(
    'copies every b200 entry, re-scoped to [b300], method copied, fitted false, copied_from the source scope',
    () => {
      expect(r!.status).toBe('write');
      const src = entries(source);
      const out = entries(r!.sets);
      expect(out).toHaveLength(src.length);
      expect(r!.copied).toBe(src.length);
      expect(r!.by_source_method).toEqual({
        measured: src.filter((c) => c.entry.method === 'measured').length,
        not_charged: src.filter((c) => c.entry.method === 'not_charged').length,
        assumed: src.filter((c) => c.entry.method === 'assumed').length,
      });
      for (let i = 0; i < src.length; i++) {
        const s = src[i]!;
        const c = out[i]!;
        expect(c.set).toBe(s.set);
        expect(chipFreeName(c.name)).toBe(chipFreeName(s.name));
        expect(c.entry).toMatchObject({
          value: s.entry.value,
          units: s.entry.units,
          // A term the source does not charge stays not charged (a copied 0 would be refused).
          method: s.entry.method === 'not_charged' ? 'not_charged' : 'copied',
          fitted: false,
          scope: { hardware: ['b300'] },
          copied_from: s.entry.scope.model
            ? `{hardware: [b200], model: [${s.entry.scope.model.join(', ')}]}`
            : '{hardware: [b200]}',
        });
        expect(c.entry.sources).toEqual(s.entry.sources);
        expect(c.entry.ci95).toEqual(s.entry.ci95);
        expect(c.entry.evidence!.family).toBe(s.entry.evidence!.family);
        expect(c.entry.evidence!.copy).toEqual({
          from: 'b200',
          source_name: s.name,
          source_method: s.entry.method,
          source_file: 'registry/b200.yaml',
        });
        expect(c.entry.evidence!.notes![0]).toMatch(/^copied from registry\/b200\.yaml .*not a measurement on b300$/);
        expect(c.entry.evidence!.notes!.slice(1)).toEqual(s.entry.evidence!.notes ?? []);
        // The rationale says why, what differs, what scales, and the source entry's own method.
        expect(c.entry.rationale).toMatch(/^Copied from b200, not measured on b300: B300 \(Blackwell Ultra/);
        expect(c.entry.rationale).toContain('ASSUMPTION');
        expect(c.entry.rationale).toContain('nvfp4 peak 13500 vs 9000 TFLOP/s');
        expect(c.entry.rationale).toContain(`Source entry: ${s.name} on b200, method ${s.entry.method}`);
      }
    },
  );

  it.skipIf(!haveB200)(
    'rewrites every collective name to the target chip (96 names: 4 ops × 2 dtypes × 4 widths × 3 params; + 12 DeepEP: 2 modes × 2 phases × 3 params)',
    () => {
      expect(r!.renamed).toBe(108);
      const ep = entries(r!.sets).filter((c) => c.name.startsWith('expert_alltoall_'));
      expect(ep).toHaveLength(12);
      for (const c of ep) expect(c.name.endsWith('_8rank_b300')).toBe(true);
      const coll = entries(r!.sets).filter((c) => c.name.startsWith('collective_'));
      expect(coll).toHaveLength(96);
      for (const c of coll) expect(parseCollectiveName(c.name)!.chip).toBe('b300');
      expect(entries(r!.sets).some((c) => c.name.includes('b200'))).toBe(false);
      expect(renameForChip('collective_floor_all_reduce_fp16_8rank_b200', 'b200', 'gb200').name).toBe(
        'collective_floor_all_reduce_fp16_8rank_gb200',
      );
      expect(renameForChip('gemm_eps_max_bf16', 'b200', 'b300')).toEqual({ name: 'gemm_eps_max_bf16', renamed: false });
    },
  );

  it.skipIf(!haveB200)('the copy passes the validator against the target datasheet (errors: none)', () => {
    expect(errorsOf(validateRegistry(r!.sets, 'registry/b300.yaml')).map(formatProblem)).toEqual([]);
    expect(datasheetDifferences(chip('b200'), chip('b300'))).toContain('HBM 8 vs 7.7 TB/s');
  });

  it.skipIf(!haveB200)(
    'the committed registry/b300.yaml is exactly what `stepcal registry copy --from b200` writes (regenerate on drift); gb200 is fitted from its own measurements now',
    () => {
      for (const to of ['b300']) {
        const file = path.join(REPO_ROOT, 'registry', `${to}.yaml`);
        const again = copyRegistry({ from: chip('b200'), to: chip(to), source });
        expect(again.status).toBe('write');
        expect(
          stringifyCoefficientSets(again.sets) === readFileSync(file, 'utf8'),
          `${to} is stale: run \`stepcal registry copy --from b200 --to ${to}\``,
        ).toBe(true);
      }
      const gb = copyRegistry({ from: chip('b200'), to: chip('gb200'), source }).sets;
      expect(findEntry(gb, 'hbm_derate').rationale).toMatch(
        /different NVLink domain|NVL72 rack that is one NVLink domain/,
      );
    },
  );
});

describe('copyRegistry refusals', () => {
  it('refuses a copy that breaks the target physics and names the entries (h200 → a100: decode rate above a100 HBM)', () => {
    const r = copyRegistry({
      from: chip('h200'),
      to: chip('a100'),
      source: chipRegistry('h200'),
      reason: 'test: Hopper to Ampere is not comparable',
    });
    expect(r.status).toBe('refused');
    const errs = errorsOf(r.problems).map(formatProblem);
    expect(errs).toEqual([
      "registry/a100.yaml: set cost-model-attention: entry attention_decode_rate [hardware=a100]: field value: rate 2592000 bytes/µs exceeds a100's datasheet HBM rate 2039000 bytes/µs",
    ]);
    expect(r.reason).toContain('entry attention_decode_rate [hardware=a100]');
  });

  it('refuses when collective rates exceed the target link bound (h200 → l40s over PCIe)', () => {
    const r = copyRegistry({
      from: chip('h200'),
      to: chip('l40s'),
      source: chipRegistry('h200'),
      reason: 'test: NVLink rates on a PCIe part',
    });
    expect(r.status).toBe('refused');
    const errs = errorsOf(r.problems);
    const names = new Set(errs.map((p) => p.entry));
    expect(names.has('collective_peak_rate_all_reduce_fp16_8rank_l40s [hardware=l40s]')).toBe(true);
    expect(names.has('attention_decode_rate [hardware=l40s]')).toBe(true);
    // every rate of every collective: 5 (op, dtype) × 3 widths × 2 rates exceed 1.25 × 32 GB/s
    expect(errs.filter((p) => /exceeds the link bound/.test(p.message))).toHaveLength(30);
    expect(r.reason).toMatch(/breaks l40s's physics in 31 place\(s\)/);
  });

  it('refuses to overwrite a registry measured on the target, naming the entries', () => {
    const r = copyRegistry({
      from: chip('h200'),
      to: chip('h100'),
      source: chipRegistry('h200'),
      existing: chipRegistry('h100'),
      reason: 'test: same Hopper silicon, more HBM',
    });
    expect(r.status).toBe('refused');
    expect(r.reason).toMatch(
      /holds 57 entries measured on h100 \(gemm_eps_max_bf16, gemm_m_half_bf16, .* and 49 more\): copies never replace measured data/,
    );
    expect(r.sets).toEqual([]);
  });

  it('overwrites an earlier copy (listing what it replaces), but refuses to drop entries of other hardware', () => {
    const reason = 'test: same Hopper silicon, more HBM';
    const first = copyRegistry({ from: chip('h200'), to: chip('h100'), source: chipRegistry('h200'), reason });
    expect(first.status).toBe('write');
    const again = copyRegistry({
      from: chip('h200'),
      to: chip('h100'),
      source: chipRegistry('h200'),
      existing: first.sets,
      reason,
    });
    expect(again.status).toBe('write');
    expect(again.replaces).toHaveLength(first.copied);
    expect(new Set(again.replaces.map((x) => x.method))).toEqual(new Set(['copied']));
    const mixed = [...first.sets, ...chipRegistry('h200')];
    const r = copyRegistry({
      from: chip('h200'),
      to: chip('h100'),
      source: chipRegistry('h200'),
      existing: mixed,
      reason,
    });
    expect(r.status).toBe('refused');
    expect(r.reason).toMatch(/not scoped to h100 \(gemm_eps_max_bf16 \[hardware=h200\]/);
  });

  it('refuses copies of copies, an unknown pair without --reason, and a reason too short to say anything', () => {
    const first = copyRegistry({
      from: chip('h200'),
      to: chip('h100'),
      source: chipRegistry('h200'),
      reason: 'test: same Hopper silicon, more HBM',
    });
    const r = copyRegistry({
      from: chip('h100'),
      to: chip('h200'),
      source: first.sets,
      reason: 'test: copy back the copy',
    });
    expect(r.status).toBe('refused');
    expect(r.reason).toMatch(/themselves copies .*copy from the measured original/);
    expect(copyRegistry({ from: chip('h200'), to: chip('h100'), source: chipRegistry('h200') }).reason).toMatch(
      /no --reason given/,
    );
    expect(
      copyRegistry({ from: chip('h200'), to: chip('h100'), source: chipRegistry('h200'), reason: 'similar' }).reason,
    ).toMatch(/at least 20 characters/);
    expect(
      copyRegistry({
        from: chip('h200'),
        to: chip('h200'),
        source: chipRegistry('h200'),
        reason: 'test: the same chip twice',
      }).reason,
    ).toMatch(/same chip/);
  });

  it('keeps other scope dimensions, leaves out entries not scoped to the source', () => {
    const src = clone(chipRegistry('h200'));
    src[0]!.coefficients[1]!.entry.scope = { hardware: ['h200'], tp: [8] };
    src[0]!.coefficients.push({
      name: 'gemm_k_half_bf16',
      entry: { ...src[0]!.coefficients[1]!.entry, scope: { hardware: ['h100'] } },
    });
    const r = copyRegistry({
      from: chip('h200'),
      to: chip('h100'),
      source: src,
      reason: 'test: same Hopper silicon, more HBM',
    });
    expect(r.status).toBe('write');
    const m = entries(r.sets).find((c) => c.name === 'gemm_m_half_bf16')!;
    expect(m.entry.scope).toEqual({ hardware: ['h100'], tp: [8] });
    expect(m.entry.copied_from).toBe('{hardware: [h200], tp: [8]}');
    expect(r.skipped).toEqual(['cost-model-primitives: gemm_k_half_bf16 [hardware=h100]: not scoped to h200']);
    expect(scopeText({ hardware: ['a', 'b'], model: ['m'] })).toBe('{hardware: [a, b], model: [m]}');
  });
});

describe('family extrapolation ignores copied entries (a copy is not an independent sibling)', () => {
  it.skipIf(!haveB200)(
    'with b200 and its two copies, a new compute-capability-10 chip still has one sibling, so the holdout refuses',
    () => {
      const b200 = loadRegistryFile(B200_FILE);
      const others = [
        { chip: chip('b200'), sets: b200 },
        { chip: chip('b300'), sets: copyRegistry({ from: chip('b200'), to: chip('b300'), source: b200 }).sets },
        { chip: chip('gb200'), sets: copyRegistry({ from: chip('b200'), to: chip('gb200'), source: b200 }).sets },
      ];
      const target = { chip: { ...chip('b200'), name: 'b100' }, sets: [] };
      const r = extrapolateFamily(target, others, 'gemm');
      expect(r.status).toBe('refused');
      expect(r.reason).toMatch(/only one same-generation sibling \(b200\)/);
    },
  );
});

describe('stepcal registry copy (CLI, in-process)', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-copy-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  afterEach(() => vi.restoreAllMocks());
  it('writes the copy (--json: status, counts, problems), then refuses over a measured registry (exit 1, file byte-identical)', async () => {
    const src = path.join(tmp, 'h200.yaml');
    writeFileSync(src, stringifyCoefficientSets(chipRegistry('h200')));
    const outFile = path.join(tmp, 'h100.yaml');
    let c = capture();
    const args = [
      'node',
      'stepcal',
      'registry',
      'copy',
      '--from',
      'h200',
      '--to',
      'h100',
      '--from-registry',
      src,
      '--out',
      outFile,
      '--reason',
      'test: same Hopper silicon, more HBM',
    ];
    expect(await main([...args, '--json'])).toBe(0);
    const j = JSON.parse(c.out());
    expect(j).toMatchObject({
      status: 'written',
      from: 'h200',
      to: 'h100',
      copied: 58,
      renamed: 45,
      by_source_method: { measured: 57, vendor_spec: 1 },
      skipped: [],
      replaces: [],
    });
    expect(errorsOf(j.problems)).toEqual([]);
    const written = loadRegistryFile(outFile);
    expect(entries(written).every((e) => e.entry.method === 'copied' && e.entry.scope.hardware![0] === 'h100')).toBe(
      true,
    );

    vi.restoreAllMocks();
    writeFileSync(outFile, stringifyCoefficientSets(chipRegistry('h100')));
    const before = readFileSync(outFile);
    c = capture();
    expect(await main(args)).toBe(1);
    expect(c.err()).toMatch(/refused: .*holds 57 entries measured on h100/);
    expect(readFileSync(outFile).equals(before)).toBe(true);

    vi.restoreAllMocks();
    c = capture();
    expect(await main([...args.slice(0, 8), '--to', 'nope', '--from-registry', src])).toBe(1);
    expect(c.err()).toMatch(/--to: unknown chip "nope"/);
  });
});
