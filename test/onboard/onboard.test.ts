/**
 * End-to-end onboarding: a shipped chip (a100, the smallest) onboarded "as new" from a temporary
 * copy of its raw upstream tables and its system descriptor, into a temporary output root; the
 * resulting registry must equal the normal path's (`fitAll('a100')` over the curated store, shared
 * with the reproducibility check through test/helpers/refit.ts).
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { diffRegistries } from '../../src/registry/diff.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { familyOfName } from '../../src/core/schemas/names.ts';
import { chosenTables, coverageOf, onboardChip } from '../../src/registry/onboard.ts';
import { scanUpstreamFolder } from '../../src/measurements/upstream-folder.ts';
import { errorsOf, validateRegistry } from '../../src/registry/validate.ts';
import { fitReportOutputs } from '../../src/report/fit.ts';
import { runCli } from '../helpers/cli.ts';
import { sharedRefit } from '../helpers/refit.ts';

const SHARED = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'aiconfigurator');
const RAW = path.join(SHARED, 'a100_sxm');
const SYSTEM = path.join(SHARED, 'systems', 'a100_sxm.yaml');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-onboard-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!existsSync(RAW))('stepcal onboard (a100 as a new chip)', () => {
  it('coverage lists what the data can and cannot support, and fails early without a required family', async () => {
    const data = path.join(tmp, 'partial');
    cpSync(path.join(RAW, 'gemm_perf'), path.join(data, 'gemm_perf'), { recursive: true });
    cpSync(path.join(RAW, 'nccl_perf'), path.join(data, 'nccl_perf'), { recursive: true });
    const c = coverageOf(chosenTables(await scanUpstreamFolder(data)));
    expect(c.supported).toEqual(['gemm', 'collective', 'host']);
    expect(c.unsupported).toEqual([
      { family: 'hbm', missing: ['attention_decode'] },
      { family: 'attention_decode', missing: ['attention_decode'] },
      { family: 'attention_prefill', missing: ['attention_prefill'] },
      { family: 'moe', missing: ['moe'] },
      { family: 'recurrent', missing: ['recurrent'] },
      // MLA is optional: listed as unsupported when the folder has no MLA table, never a stop.
      { family: 'mla', missing: ['mla'] },
    ]);
    const out = path.join(tmp, 'partial-out');
    await expect(
      onboardChip({
        chip: 'a100',
        dataDir: data,
        systemFile: SYSTEM,
        outRoot: out,
        sm_count: 108,
        l2_mib: 40,
        fitOutputs: fitReportOutputs,
      }),
    ).rejects.toThrow(
      /cannot support required family attention_decode; nothing written\.\n.*\ncannot support hbm: no attention_decode table/,
    );
    expect(existsSync(out)).toBe(false);
  });

  it('the CLI prints the coverage once, before the error, which is the last line on stderr', async () => {
    const data = path.join(tmp, 'gemm-only');
    cpSync(path.join(RAW, 'gemm_perf'), path.join(data, 'gemm_perf'), { recursive: true });
    const out = path.join(tmp, 'gemm-only-out');
    const r = await runCli(['onboard', '--chip', 'foo', '--data', data, '--out-root', out]);
    expect(r.code).toBe(1);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines.filter((l) => l.startsWith('families the data can support: ')).length).toBe(1);
    expect(lines.filter((l) => l === 'cannot support hbm: no attention_decode table').length).toBe(1);
    expect(lines.at(-1)).toBe(
      'stepcal: onboard foo: the data cannot support required family attention_decode; nothing written.',
    );
    expect(lines.indexOf('families the data can support: gemm, host')).toBeLessThan(lines.length - 1);
    expect(existsSync(out)).toBe(false);
  });

  it('onboards from raw tables into a temp root; the registry equals the normal path', async () => {
    const data = path.join(tmp, 'data', 'a100_sxm');
    cpSync(RAW, data, { recursive: true });
    const out = path.join(tmp, 'out');
    const lines: string[] = [];
    const r = await onboardChip({
      chip: 'a100',
      dataDir: path.join(tmp, 'data'),
      systemFile: SYSTEM,
      outRoot: out,
      sm_count: 108,
      l2_mib: 40,
      log: (l) => lines.push(l),
      fitOutputs: fitReportOutputs,
    });
    expect(r.files.registry).toBe(path.join(out, 'registry', 'a100.yaml'));
    expect(lines[0]!.split('\n')[0]).toBe(
      'families the data can support: gemm, hbm, attention_decode, attention_prefill, collective, moe, host',
    );
    const onboarded = loadRegistryFile(r.files.registry);
    const normal = await sharedRefit('a100'); // the run's one a100 refit (test/helpers/refit.ts)
    // The normal path also fits families from curated tables an upstream base folder does not hold
    // (MLA and sparse, from aiconfigurator-modern; onboarding does not read them yet): compare the rest.
    const MODERN = new Set(['mla', 'sparse']);
    const onboardable = (sets: typeof normal.sets) =>
      sets.map((s) => ({
        ...s,
        coefficients: s.coefficients.filter((c) => !MODERN.has(familyOfName(c.name))),
      }));
    const d = diffRegistries(onboardable(normal.sets), onboarded);
    // Same entries, same values, same evidence (input paths are relative to each root, so they agree too).
    expect({
      added: d.added.map((x) => x.name),
      removed: d.removed.map((x) => x.name),
      changed: d.changed.map((x) => `${x.name}: ${x.fields}`),
    }).toEqual({ added: [], removed: [], changed: [] });
    expect(d.unchanged).toBe(onboardable(normal.sets).reduce((n, s) => n + s.coefficients.length, 0));
    expect(
      errorsOf(validateRegistry(onboarded, r.files.registry, { chip: (n) => (n === 'a100' ? r.chip : undefined) })),
    ).toEqual([]);
    // a100's MoE fit refuses (no balanced rows); the family extrapolation refuses too: its only
    // same-generation sibling (compute capability 8.x) in the committed registries is at most l40s.
    const moe = r.families.find((f) => f.family === 'moe')!;
    expect(moe.status).toBe('refused');
    expect(readFileSync(r.files.report, 'utf8')).toContain('- family moe: REFUSED');
    // The chip file came from the descriptor.
    expect(r.chip).toMatchObject({
      name: 'a100',
      sm_version: 80,
      hbm_tb_per_s: 2.039,
      nvlink_gb_per_s_per_dir: 300,
      sm_count: 108,
    });
  }, 900_000); // two a100 fits (the onboarding, and the shared refit when this run has none yet)
});
