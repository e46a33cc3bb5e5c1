import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkMeasurements } from '../../src/measurements/check.ts';
import { sha256 } from '../../src/core/io/fs.ts';
import { writeMeasurements } from '../../src/measurements/store.ts';
import { coefficientTable } from '../../src/report/calibrate-summary.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { runCli as cli } from '../helpers/cli.ts';

const REG = 'test/fixtures/registry/blis-h100.yaml';
const SPLIT_H100 = 'measurements/h100/splitwise.steps.csv';

describe('stepcal validate (CLI) on the stored Splitwise H100 rows', () => {
  it('--json: every row priced, per-regime metrics for both compositions, pinned inputs', async () => {
    const r = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--json',
    ]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    const scored = v.rows.filter(
      (x: { excluded?: string; used_for_host_fit: boolean }) => !x.excluded && !x.used_for_host_fit,
    ).length;
    expect(v.overall.n).toBe(scored);
    for (const g of ['prefill', 'decode', 'static_batch']) {
      expect(v.regimes_by_composition.no_overlap[g].n).toBeGreaterThan(20);
      expect(v.regimes_by_composition.overlap[g].n).toBe(v.regimes_by_composition.no_overlap[g].n);
    }
    expect(v.regimes.mixed).toBeNull();
    // Overlap ≤ CMOverlap ≤ NoOverlap on every row (registry host terms: the same host in all three)
    for (const x of v.rows) {
      expect(x.predicted_us.overlap).toBeLessThanOrEqual(x.predicted_us.cm_overlap * (1 + 1e-12));
      expect(x.predicted_us.cm_overlap).toBeLessThanOrEqual(x.predicted_us.no_overlap * (1 + 1e-12));
    }
    for (const g of ['prefill', 'decode', 'static_batch'])
      expect(v.regimes_by_composition.cm_overlap[g].n).toBe(v.regimes_by_composition.no_overlap[g].n);
    // extrapolation counted per reason: the GEMM-ramp reason first, its counts consistent with the rows
    expect(v.extrapolation[0].reason).toMatch(
      /^GEMM ramp below its fitted m range: the bf16 ramp at fewer than [0-9.]+ tokens per step$/,
    );
    const withReason = (reason: string) =>
      v.rows.filter((x: { extrapolation_reasons: string[] }) => x.extrapolation_reasons.includes(reason));
    for (const e of v.extrapolation) {
      expect(e.rows).toBe(withReason(e.reason).length);
      expect(e.scored_rows).toBe(
        withReason(e.reason).filter(
          (x: { excluded?: string; used_for_host_fit: boolean }) => !x.excluded && !x.used_for_host_fit,
        ).length,
      );
    }
    expect(v.pinned.inputs).toEqual([{ file: SPLIT_H100, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) }]);
    expect(v.pinned.flags).toEqual(['--chip h100']);
    // every power-capped row is priced but not scored
    const capped = v.rows.filter((x: { flags: string }) => x.flags.includes('power_capped'));
    expect(capped.length).toBeGreaterThan(0);
    expect(capped.every((x: { excluded?: string }) => x.excluded !== undefined)).toBe(true);
  });

  it('text summary names the headline and the per-regime goal verdicts; --fit-host batch=1 says what it cannot separate', async () => {
    const r = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--fit-host',
      'batch=1',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^compositions with .* \(apart from the tiers\), \* = (NoOverlap|CMOverlap|Overlap): /m);
    expect(r.stdout).toMatch(/\*?CMOverlap +decode +\d+/);
    expect(r.stdout).toMatch(/\*?NoOverlap +decode +\d+/);
    expect(r.stdout).toMatch(
      /batch=1 rows alone cannot separate the per-request-per-step cost from the per-step constant/,
    );
  });

  it("without --fit-host it says in one line that the registry host terms priced the rows and points to calibrate's rule", async () => {
    const r = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
    ]);
    expect(r.code).toBe(0);
    const notes = r.stdout.split('\n').filter((l) => l.includes('--fit-host'));
    expect(notes).toEqual([
      "host terms: the registry's (no --fit-host); calibrate fits them per engine: pass --fit-host fraction=0.25 to match",
    ]);
    // JSON on stdout stays parseable; the note moves to stderr
    const j = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--json',
    ]);
    expect(JSON.parse(j.stdout).host_fit).toBeFalsy();
    expect(j.stderr).toContain('pass --fit-host fraction=0.25 to match');
    // with the rule calibrate uses, no note
    const f = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--fit-host',
      'fraction=0.25',
    ]);
    expect(f.stdout).not.toContain("host terms: the registry's");
  });

  it('user errors exit 1 with the file named; a bad composition is refused (exit 2)', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'stepcal-val-'));
    const bad = path.join(dir, 'bad.steps.csv');
    writeFileSync(bad, 'model,chip,tp,weight_dtype,engine,kind,source\nllama-2-70b,h100,2,fp16,e,step,x\n');
    const r = await cli(['validate', '--no-tiers', '--chip', 'h100', '--steps', bad, '--registry', REG, '--no-report']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.steps\.csv row 1 column "measured_us": missing column/);
    const r2 = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      'nope.yaml',
    ]);
    expect(r2.code).toBe(1);
    expect(r2.stderr).toMatch(/registry not found: nope\.yaml/);
    const r3 = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--composition',
      'max',
    ]);
    expect(r3.code).toBe(2); // a flag value outside its list is a usage error
    expect(r3.stderr).toMatch(/argument 'max' is invalid\. expected one of no_overlap, cm_overlap, overlap/);
    const r4 = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--engine-sm',
      'on',
    ]);
    expect(r4.code).toBe(2); // a flag that needs another: usage
    expect(r4.stderr).toMatch(/--engine-sm on needs --fit-host/);
    const r5 = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--engine-sm',
      'sometimes',
    ]);
    expect(r5.code).toBe(2); // not one of the choices: a usage error
  });

  it('--fit-host prints both NoOverlap variants (without / with s) and pins the engine-sm mode', async () => {
    const r = await cli([
      'validate',
      '--no-tiers',
      '--chip',
      'h100',
      '--steps',
      SPLIT_H100,
      '--registry',
      REG,
      '--no-report',
      '--json',
      '--fit-host',
      'fraction=0.25',
      '--engine-sm',
      'off',
    ]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    expect(v.pinned.flags).toEqual(['--chip h100', '--fit-host fraction=0.25', '--engine-sm off']);
    expect(v.engine_sm.used).toBe(false);
    expect(v.engine_sm.scales).toHaveLength(1);
    expect(v.engine_sm.scales[0].engine).toBe('splitwise');
    // off: the headline NoOverlap is the host-only variant, scored on the same rows as the variant with s
    expect(v.regimes_by_composition.no_overlap.prefill.mape_pct).toBe(v.engine_sm.without.regimes.prefill.mape_pct);
    expect(v.engine_sm.with.overall.n).toBe(v.engine_sm.without.overall.n);
    expect(v.host_fit.weighting).toBe('relative');
  });
});

describe('calibrate pieces', () => {
  it('checkMeasurements reads row counts from provenance and catches a file that changed', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'stepcal-cal-'));
    const prov = {
      family: 'host' as const,
      chip: 'h100',
      lane: 'x',
      source_repository: 'r',
      source_path: 'p',
      source_commit: 'c',
      licence: 'l',
      inputs: [],
      filters: [],
      rows_in: 2,
      rows_out: 2,
      units: {},
    };
    const file = writeMeasurements(
      dir,
      'host',
      'x',
      [
        { chip: 'h100', lane: 'x', kernel_source: '', what: 'eager_launch', kernels: 10, latency_us: 30 },
        { chip: 'h100', lane: 'x', kernel_source: '', what: 'eager_launch', kernels: 20, latency_us: 60 },
      ],
      prov,
    );
    writeFileSync(
      path.join(dir, 'lab.steps.csv'),
      'model,chip,tp,weight_dtype,engine,kind,batch,prompt_tokens,output_tokens,measured_us,source\nm,h100,1,bf16,e,static_batch,1,10,5,100,s\n',
    );
    const c = checkMeasurements(dir);
    expect(c.map((x) => [x.family, x.rows, x.status])).toEqual([
      ['host', 2, 'ok'],
      ['step (held-out)', 1, 'ok'],
    ]);
    writeFileSync(file, 'tampered');
    expect(checkMeasurements(dir)[0]!.status).toBe('sha256 differs from provenance output_sha256');
    expect(sha256('tampered')).toHaveLength(64);
  });

  it('coefficient table: one line per non-collective entry with units and ci95, collectives condensed', () => {
    const t = coefficientTable(loadRegistryFile(REG));
    const eps = t.rows.find((r) => r[0] === 'gemm_eps_max_bf16')!;
    expect(eps.slice(1, 3)).toEqual(['1', 'dimensionless']);
    const ar = t.rows.filter((r) => r[0]!.startsWith('collective all_reduce'));
    expect(ar.length).toBeGreaterThan(0);
    expect(t.rows.some((r) => r[0]!.startsWith('collective_'))).toBe(false);
    expect(t.header).toContain('ci95');
  });
});
