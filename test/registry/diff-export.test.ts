import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exportBlis, importBlis } from '../../src/registry/blis.ts';
import { diffRegistries, formatDiff } from '../../src/registry/diff.ts';
import { stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { entryKey } from '../../src/core/schemas/names.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { errorsOf, validateRegistryText } from '../../src/registry/validate.ts';
import { chipRegistry, clone, findEntry } from './fixtures.ts';
import { runCli as cliInProcess } from '../helpers/cli.ts';
import { runCli } from './cli.ts';

describe('registry diff', () => {
  it('reports added, removed and changed entries with relative change and ci overlap', () => {
    const a = chipRegistry('h200');
    const b = clone(a);
    const eps = findEntry(b, 'gemm_eps_max_bf16');
    eps.value = 0.9;
    eps.ci95 = [0.85, 0.94]; // old [0.95, 1.0]: no overlap
    findEntry(b, 'attention_decode_rate').value = 2_851_200; // +10%
    b[0]!.coefficients = b[0]!.coefficients.filter((c) => c.name !== 'moe_routing_imbalance_p90');
    b[1]!.coefficients.push({
      name: 'attention_decode_rate_mla',
      entry: { ...clone(findEntry(a, 'attention_decode_rate')), value: 2_928_000 },
    });
    const d = diffRegistries(a, b);
    expect(d.added.map((x) => x.name)).toEqual(['attention_decode_rate_mla']);
    expect(d.removed.map((x) => x.name)).toEqual(['moe_routing_imbalance_p90']);
    expect(d.changed.map((x) => x.name)).toEqual(['gemm_eps_max_bf16', 'attention_decode_rate']);
    const e = d.changed[0]!;
    expect(e.relative_change).toBeCloseTo((0.9 - 0.992) / 0.992, 12);
    expect(e.ci_overlap).toBe(false);
    expect(e.fields).toEqual(['ci95', 'value']);
    expect(d.changed[1]!.relative_change).toBeCloseTo(0.1, 12);
    expect(d.changed[1]!.ci_overlap).toBeNull();
    expect(d.unchanged).toBe(chipRegistry('h200').reduce((n, s) => n + s.coefficients.length, 0) - 3);
    const text = formatDiff(d);
    expect(text).toContain('added 1, removed 1, changed 2');
    expect(text).toContain(
      'cost-model-primitives | gemm_eps_max_bf16 [hardware=h200] | 0.992 | 0.9 | -9.27% | [0.95, 1] | [0.85, 0.94] | NO | ci95,value',
    );
    expect(text).toContain('+ cost-model-attention: attention_decode_rate_mla [hardware=h200] = 2.9280e+6 (measured)');
  });
  it('scope lists compare as sets: reordering hardware is no change', () => {
    const a: CoefficientSet[] = [
      {
        kind: 'CoefficientSet',
        name: 's',
        coefficients: [
          {
            name: 'x',
            entry: { ...findEntry(chipRegistry('h200'), 'hbm_derate'), scope: { hardware: ['h100', 'h200'] } },
          },
        ],
      },
    ];
    const b = clone(a);
    b[0]!.coefficients[0]!.entry.scope = { hardware: ['h200', 'h100'] };
    expect(diffRegistries(a, b)).toMatchObject({ added: [], removed: [], changed: [], unchanged: 1 });
  });
});

describe('registry export --format blis / import round trip', () => {
  it('one file per (set, hardware); evidence stripped; import reproduces every public field', () => {
    const sets = [...chipRegistry('h200'), ...chipRegistry('h100')];
    const files = exportBlis(sets);
    expect(files.map((f) => f.path)).toEqual([
      'h100/cost-model-primitives.yaml',
      'h100/cost-model-attention.yaml',
      'h100/cost-model-collectives.yaml',
      'h200/cost-model-primitives.yaml',
      'h200/cost-model-attention.yaml',
      'h200/cost-model-collectives.yaml',
    ]);
    for (const f of files) {
      expect(f.text).not.toContain('evidence');
      expect(errorsOf(validateRegistryText(f.text, f.path, { strictBlis: true }).problems)).toEqual([]);
    }
    const back = importBlis(
      files.map((f) => ({ file: f.path, text: f.text })),
      'h200',
    );
    expect(back.skipped_other_hardware).toBe(chipRegistry('h100').reduce((n, s) => n + s.coefficients.length, 0)); // the h100 files' entries
    const flat = (ss: readonly CoefficientSet[], chip: string) =>
      new Map(
        ss.flatMap((s) =>
          s.coefficients
            .filter((c) => c.entry.scope.hardware?.includes(chip))
            .map((c) => [`${s.name} ${entryKey(c.name, c.entry.scope)}`, c.entry] as const),
        ),
      );
    const want = flat(sets, 'h200');
    const got = flat(back.sets, 'h200');
    expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
    for (const [k, e] of want) {
      const g = got.get(k)!;
      const { evidence: _ev, ...pub } = e;
      expect(g).toEqual(pub);
    }
  });
});

describe('registry CLI: diff --json, export → import files', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-reg-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  // export and import run in-process (the files on disk are the point); diff is the spawned case: its
  // exit code and JSON on stdout through a real process.
  it('round-trips through the files on disk', async () => {
    const reg = path.join(tmp, 'h200.yaml');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(reg, stringifyCoefficientSets(chipRegistry('h200')));
    const ex = await cliInProcess(['registry', 'export', '--format', 'blis', '--out', path.join(tmp, 'blis'), reg]);
    expect(ex.code).toBe(0);
    const exported = ['cost-model-primitives', 'cost-model-attention', 'cost-model-collectives'].map((s) =>
      path.join(tmp, 'blis', 'h200', `${s}.yaml`),
    );
    const back = path.join(tmp, 'back.yaml');
    const im = await cliInProcess([
      'registry',
      'import',
      '--format',
      'blis',
      '--chip',
      'h200',
      '--out',
      back,
      ...exported,
    ]);
    expect(im.stderr).toBe('');
    expect(im.code).toBe(0);
    const d = runCli(['registry', 'diff', '--json', reg, back]);
    expect(d.status).toBe(0);
    const j = JSON.parse(d.stdout) as { added: unknown[]; removed: unknown[]; changed: Array<{ fields: string[] }> };
    expect(j.added).toEqual([]);
    expect(j.removed).toEqual([]);
    // Only the stripped evidence differs.
    expect(j.changed.every((c) => c.fields.join() === 'evidence')).toBe(true);
    expect(j.changed.length).toBe(
      chipRegistry('h200').reduce((n, s) => n + s.coefficients.filter((c) => c.entry.evidence).length, 0),
    );
    expect(readFileSync(exported[0]!, 'utf8')).toMatch(/^kind: CoefficientSet\nname: cost-model-primitives\n/);
  });
});
