/**
 * `--json` of `stepcal registry update` (gate verdict, both accuracy tables, the diff) and of
 * `stepcal onboard` (families supported/unsupported, files written, registry path, summary):
 * shape of the JSON and exit codes, in-process.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { main } from '../../src/cli/main.ts';
import { listStepFiles } from '../../src/measurements/store.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { planUpdate, updateJson, type HoldoutValidator } from '../../src/registry/update.ts';
import { chipRegistry, clone, findEntry } from './fixtures.ts';
import { capture } from '../helpers/capture.ts';

afterEach(() => vi.restoreAllMocks());

const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-json-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Known-answer fake: decode MAPE = |0.95·(2.592e6/rate) − 1|·100, prefill fixed at 2 %. */
const fake: HoldoutValidator = ({ registry }) => {
  const r = 0.95 * (2_592_000 / findEntry(registry, 'attention_decode_rate').value);
  const m = (x: number, n: number) => ({ n, mape_pct: Math.abs(x - 1) * 100, bias_pct: (x - 1) * 100 });
  return { regimes: { prefill: m(1.02, 40), decode: m(r, 60) }, overall: m(r, 100), headline: 'no_overlap' };
};
const refit = (f: (s: CoefficientSet[]) => void) => {
  const s = clone(chipRegistry('h200'));
  f(s);
  return s;
};

describe('updateJson (pure): verdicts and both accuracy tables', () => {
  it('a passing gate: verdict passed, old and new tables per regime, the diff and the merge counts', () => {
    const plan = planUpdate({
      chip: 'h200',
      current: chipRegistry('h200'),
      fitted: refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_462_400)),
      stepFiles: ['steps.csv'],
      validator: fake,
    });
    const j = updateJson(plan, { chip: 'h200', registry: 'registry/h200.yaml', written: true });
    expect(j.status).toBe('written');
    expect(j.gate).toMatchObject({
      verdict: 'passed',
      tolerance_pct: 1,
      step_files: ['steps.csv'],
      composition: 'no_overlap',
    });
    // old decode ratio 0.95 → MAPE 5 %; new rate 0.95 × old → ratio 1 → MAPE 0 %.
    expect(j.accuracy.old!.decode!.mape_pct).toBeCloseTo(5, 9);
    expect(j.accuracy.new!.decode!.mape_pct).toBeCloseTo(0, 9);
    expect(j.accuracy.new!.prefill!.mape_pct).toBeCloseTo(2, 9);
    expect(j.accuracy.old_overall!.n).toBe(100);
    expect(j.gate.rows.map((r) => [r.regime, r.worse])).toEqual([
      ['prefill', false],
      ['decode', false],
    ]);
    expect(j.gate.rows[1]!.mape_delta_pp).toBeCloseTo(-5, 9);
    expect(j.diff.changed.map((c) => c.name)).toEqual(['attention_decode_rate']);
    expect(j.merge.merged).toBe(58);
    expect(JSON.parse(JSON.stringify(j))).toEqual(j); // plain JSON
  });

  it('a failed gate is refused (verdict failed); with --accept-worse it is written (verdict accepted_worse); no steps: skipped_no_holdout', () => {
    const worse = refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_000_000));
    const refused = planUpdate({
      chip: 'h200',
      current: chipRegistry('h200'),
      fitted: worse,
      stepFiles: ['x'],
      validator: fake,
    });
    const j = updateJson(refused, { chip: 'h200', registry: 'r.yaml', written: false });
    expect(j).toMatchObject({ status: 'refused', gate: { verdict: 'failed' } });
    expect(j.gate.rows.find((r) => r.regime === 'decode')!.why).toMatch(/MAPE \+/);
    const accepted = planUpdate({
      chip: 'h200',
      current: chipRegistry('h200'),
      fitted: worse,
      stepFiles: ['x'],
      validator: fake,
      accept_worse: 'demo',
    });
    expect(updateJson(accepted, { chip: 'h200', registry: 'r.yaml', written: false })).toMatchObject({
      status: 'dry_run',
      gate: { verdict: 'accepted_worse' },
    });
    const noSteps = planUpdate({
      chip: 'h200',
      current: chipRegistry('h200'),
      fitted: worse,
      stepFiles: [],
      validator: fake,
      no_holdout: 'new part',
    });
    expect(updateJson(noSteps, { chip: 'h200', registry: 'r.yaml', written: true })).toMatchObject({
      status: 'written',
      gate: { verdict: 'skipped_no_holdout', rows: [], tolerance_pct: null },
      accuracy: { old: null, new: null },
    });
  });
});

describe('stepcal registry update --json (CLI)', () => {
  const a100 = path.join(REPO_ROOT, 'registry', 'a100.yaml');
  const haveSteps = existsSync(a100) && listStepFiles(path.join(REPO_ROOT, 'measurements', 'a100')).length > 0;
  const variant = (f: (s: CoefficientSet[]) => void, name: string) => {
    const s = loadRegistryFile(a100);
    f(s);
    const file = path.join(tmp, name);
    writeFileSync(file, stringifyCoefficientSets(s));
    return file;
  };

  it.skipIf(!haveSteps)(
    "real gate on a100 held-out steps, with calibrate's engine terms: a slower decode rate outside its ci95 is refused (refused_shift) and passes with --accept-shift; a faster HBM is refused",
    async () => {
      const before = readFileSync(a100);
      const slower = variant((s) => {
        const e = findEntry(s, 'attention_decode_rate');
        e.value = Math.round(e.value * 0.8);
        delete e.ci95;
      }, 'slower.yaml');
      let c = capture();
      expect(
        await main([
          'node',
          'stepcal',
          'registry',
          'update',
          '--chip',
          'a100',
          '--from',
          slower,
          '--dry-run',
          '--json',
        ]),
      ).toBe(1);
      let j = JSON.parse(c.out());
      expect(j).toMatchObject({ status: 'refused', gate: { verdict: 'refused_shift' } });
      expect(j.shifted).toEqual([
        expect.stringMatching(/^attention_decode_rate 1646000 \[1618000, 1675000\] → 1316800 \(no ci95\)$/),
      ]);
      vi.restoreAllMocks();
      c = capture();
      expect(
        await main([
          'node',
          'stepcal',
          'registry',
          'update',
          '--chip',
          'a100',
          '--from',
          slower,
          '--dry-run',
          '--json',
          '--accept-shift',
          'test: a deliberate shift',
        ]),
      ).toBe(0);
      j = JSON.parse(c.out());
      expect(j).toMatchObject({
        status: 'dry_run',
        chip: 'a100',
        gate: { verdict: 'passed', tolerance_pct: 1, composition: expect.any(String) },
      });
      expect(Object.keys(j.accuracy.old).sort()).toEqual(Object.keys(j.accuracy.new).sort());
      expect(j.accuracy.old.decode.n).toBeGreaterThan(0);
      expect(j.diff.changed.map((x: { name: string }) => x.name)).toEqual(['attention_decode_rate']);

      vi.restoreAllMocks();
      const faster = variant((s) => {
        findEntry(s, 'hbm_derate').value = 1;
        delete findEntry(s, 'hbm_derate').ci95;
        const e = findEntry(s, 'attention_decode_rate');
        e.value = Math.round(e.value * 1.2);
        delete e.ci95;
      }, 'faster.yaml');
      c = capture();
      expect(await main(['node', 'stepcal', 'registry', 'update', '--chip', 'a100', '--from', faster, '--json'])).toBe(
        1,
      );
      j = JSON.parse(c.out());
      expect(j).toMatchObject({ status: 'refused', gate: { verdict: 'refused_shift' } });
      expect(c.err()).toMatch(
        /refused: 2 coefficient\(s\) moved outside both ci95 intervals.*hbm_derate 0\.7795 \[0\.7716, 0\.7876\] → 1 \(no ci95\)/,
      );
      expect(readFileSync(a100).equals(before)).toBe(true);
    },
  );

  it('no held-out steps: --no-holdout writes (exit 0, verdict skipped_no_holdout); without a reason it is refused (exit 1)', async () => {
    const reg = path.join(tmp, 'h200.yaml');
    const from = path.join(tmp, 'fitted.yaml');
    writeFileSync(reg, stringifyCoefficientSets(chipRegistry('h200')));
    writeFileSync(from, stringifyCoefficientSets(refit((s) => (findEntry(s, 'gemm_m_half_bf16').value = 120))));
    const args = [
      'node',
      'stepcal',
      'registry',
      'update',
      '--chip',
      'h200',
      '--from',
      from,
      '--registry',
      reg,
      '--measurements-dir',
      tmp,
      '--json',
    ];
    let c = capture();
    expect(await main(args)).toBe(1);
    expect(JSON.parse(c.out())).toMatchObject({
      status: 'refused',
      gate: { verdict: 'skipped_no_holdout' },
      diff: { changed: [{ name: 'gemm_m_half_bf16' }] },
    });
    vi.restoreAllMocks();
    c = capture();
    expect(await main([...args, '--no-holdout', 'new part'])).toBe(0);
    expect(JSON.parse(c.out())).toMatchObject({
      status: 'written',
      registry: reg,
      gate: { verdict: 'skipped_no_holdout' },
    });
    expect(findEntry(loadRegistryFile(reg), 'gemm_m_half_bf16').value).toBe(120);
  });
});

const SHARED = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'aiconfigurator');
const RAW = path.join(SHARED, 'a100_sxm');
const SYSTEM = path.join(SHARED, 'systems', 'a100_sxm.yaml');

describe.skipIf(!existsSync(RAW))(
  'stepcal onboard --json (CLI; a100 gemm + decode tables only, into a temp root)',
  () => {
    it('success: coverage, files written, registry path and summary; exit 0', async () => {
      const data = path.join(tmp, 'onb-data');
      for (const t of ['gemm_perf', 'generation_attention_perf'])
        cpSync(path.join(RAW, t), path.join(data, t), { recursive: true });
      const out = path.join(tmp, 'onb-out');
      const c = capture();
      expect(
        await main([
          'node',
          'stepcal',
          'onboard',
          '--chip',
          'a100',
          '--data',
          data,
          '--system',
          SYSTEM,
          '--out-root',
          out,
          '--sm-count',
          '108',
          '--l2-mib',
          '40',
          '--json',
        ]),
      ).toBe(0);
      const j = JSON.parse(c.out());
      expect(j.status).toBe('onboarded');
      expect(j.coverage.supported).toEqual(['gemm', 'hbm', 'attention_decode', 'host']);
      expect(j.coverage.unsupported.map((u: { family: string }) => u.family)).toEqual([
        'attention_prefill',
        'collective',
        'moe',
        'recurrent',
        // optional, listed when the folder has no MLA table; never extrapolated (families below)
        'mla',
      ]);
      expect(j.coverage.tables).toEqual({ gemm_perf: 1, generation_attention_perf: 1 });
      expect(j.registry).toBe(path.join(out, 'registry', 'a100.yaml'));
      expect(j.files_written).toContain(j.registry);
      expect(j.files_written).toContain(path.join(out, 'catalog', 'chips', 'a100.yaml'));
      expect(j.files_written).toContain(path.join(out, 'fits', 'a100', 'onboard.md'));
      expect(j.files_written).toContain(path.join(out, 'fits', 'a100', 'README.md'));
      for (const f of j.files_written) expect(existsSync(f), f).toBe(true);
      const reg = loadRegistryFile(j.registry);
      expect(j.summary.entries).toBe(reg.reduce((n, s) => n + s.coefficients.length, 0));
      expect(j.summary.sets).toBe(reg.length);
      expect(Object.values(j.summary.by_method as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(
        j.summary.entries,
      );
      // the only compute-capability-8 sibling in the committed registries is l40s: no holdout, refused
      expect(j.summary.families.map((f: { family: string; status: string }) => `${f.family}:${f.status}`)).toEqual([
        'attention_prefill:refused',
        'collective:refused',
        'moe:refused',
        'recurrent:refused',
      ]);
    });

    it('failure: a required family missing prints status failed with the coverage, exit 1, nothing written', async () => {
      const data = path.join(tmp, 'onb-gemm-only');
      cpSync(path.join(RAW, 'gemm_perf'), path.join(data, 'gemm_perf'), { recursive: true });
      const out = path.join(tmp, 'onb-fail');
      const c = capture();
      expect(
        await main([
          'node',
          'stepcal',
          'onboard',
          '--chip',
          'a100',
          '--data',
          data,
          '--system',
          SYSTEM,
          '--out-root',
          out,
          '--json',
        ]),
      ).toBe(1);
      const j = JSON.parse(c.out());
      expect(j).toMatchObject({ status: 'failed', chip: 'a100', registry_written: false });
      expect(j.reason).toMatch(/cannot support required family attention_decode/);
      expect(j.coverage.unsupported).toContainEqual({ family: 'attention_decode', missing: ['attention_decode'] });
      expect(existsSync(out)).toBe(false);
    });
  },
);
