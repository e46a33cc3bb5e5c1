/**
 * Engine profiles and validation tiers (issue 16) on the closed-form fake pricer
 * (test/validate/fake-pricer.ts: prefill SM = a + b · tokens, decode HBM = c + d · Σ context).
 * Steps are generated with known host terms (src/core/laws/host.ts engineHostUs) and a known s.
 */
import { describe, expect, it } from 'vitest';
import { ENGINE_HOST_TERMS, engineHostUs } from '../../src/core/laws/host.ts';
import { engineForChip, parseEngineProfile, stringifyEngineProfile } from '../../src/core/schemas/engine.ts';
import { engineProfileGates } from '../../src/registry/engine.ts';
import { fitEngineProfile } from '../../src/validate/engine-profile.ts';
import type { PricerKey, ValidationDeps } from '../../src/validate/priced.ts';
import { validateRows } from '../../src/validate/run.ts';
import { parseStepsCsv, type LocatedStepRow } from '../../src/validate/steps.ts';
import type { TierSummary } from '../../src/validate/types.ts';
import { BASE, fakePricer, stepsCsv, type FakeCoeffs } from './fake-pricer.ts';

const K: FakeCoeffs = { a: 1000, b: 2, c: 500, d: 0.01, e: 0.5, h: 50, overlap_factor: 0.7, cm_factor: 0.85 };
/**
 * Truth: per_step, per_request_step, tp>1 extra, per_kernel, per_rank (µs), the large-step NVLink
 * factor (on prefill steps whose collective message, tokens × bytes per token, is ≥ LARGE bytes), and s.
 * Bytes per token differ by model (m1 8192 B, a hidden-4096 fp16 all-reduce; m2 16384 B), so at 32 MiB
 * m1 pays from 4096 tokens (384·16) and m2 from 2048 (384·8 = 3072 pays, 384·4 does not): no token
 * threshold charges the same steps.
 */
const TRUTH = [3000, 250, 1200, 4, 600, 1.5];
const MIB = 1024 * 1024;
const LARGE = 32 * MIB;
const S = 1.4;
/** Kernels per step: by model, more with prefill rows. */
const kernels = (key: Pick<PricerKey, 'model'>, hasPrefill: boolean) =>
  (key.model === 'm1' ? 500 : 900) + (hasPrefill ? 40 : 0);
/** Collective bytes per scheduled token, by model. */
const bytesPerToken = (key: Pick<PricerKey, 'model'>) => (key.model === 'm1' ? 8192 : 16384);
const deps: ValidationDeps = {
  pricerFor: (_k, o) => fakePricer(K, o?.sm_scale ?? 1),
  kernelsPerStep: kernels,
  collectiveBytesPerToken: bytesPerToken,
};

/** measured = S · SM + HBM + engineHostUs(TRUTH) for one step of n requests. */
function truthUs(model: string, tp: number, prefill: boolean, n: number, units: number, large = LARGE): number {
  const work = prefill ? S * (K.a + K.b * units) : K.c + K.d * units;
  const nvlink_us = prefill ? K.e! * units : 0;
  const large_step_nvlink_us = prefill && units * bytesPerToken({ model }) >= large ? nvlink_us : 0;
  const f = { steps: 1, request_steps: n, kernel_steps: kernels({ model }, prefill), tp, large_step_nvlink_us };
  return work + nvlink_us + engineHostUs(TRUTH, f);
}

function rows(opts: { marker?: boolean; large?: number } = {}): LocatedStepRow[] {
  const rs: Array<Record<string, string | number>> = [];
  for (const model of ['m1', 'm2'])
    for (const tp of [1, 2, 4, 8])
      for (const n of [1, 2, 4, 8, 16, 32]) {
        const base = { ...BASE, model, tp, kind: 'step', group: `${model}-${tp}` };
        rs.push({
          ...base,
          ...{ prefill_requests: n, prefill_tokens: 384 * n, decode_requests: 0, decode_context_tokens: 0 },
          measured_us: truthUs(model, tp, true, n, 384 * n, opts.large),
          group: `${model}-${tp}-pre`,
        });
        rs.push({
          ...base,
          ...{ prefill_requests: 0, prefill_tokens: 0, decode_requests: n, decode_context_tokens: 900 * n },
          measured_us: truthUs(model, tp, false, n, 900 * n, opts.large),
          group: `${model}-${tp}-dec`,
        });
      }
  if (opts.marker)
    // A marker row (its own deployment m3 × tp 2) measured 50× slower than the truth.
    rs.push({
      ...BASE,
      model: 'm3',
      tp: 2,
      kind: 'step',
      ...{ prefill_requests: 0, prefill_tokens: 0, decode_requests: 4, decode_context_tokens: 3600 },
      measured_us: 50 * truthUs('m1', 2, false, 4, 3600),
      group: 'marker',
    });
  return parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
}

const tierOf = (ts: TierSummary[] | undefined, t: TierSummary['tier']) => ts!.find((x) => x.tier === t)!;

describe('engine profile fit', () => {
  it('recovers known host terms and s from steps generated with them', () => {
    const p = fitEngineProfile(
      rows(),
      {
        engine: 'e',
        provenance: {
          stepcal_version: 'test',
          steps: [{ file: 't.steps.csv', sha256: '0', rows: 96 }],
          registries: [{ chip: 'h100', file: 'r.yaml', sha256: '0' }],
        },
      },
      deps,
    );
    // NoOverlap is the law the rows were generated with: its training objective is ~0, the others not.
    expect(p.composition).toBe('no_overlap');
    expect(p.fit.training_objective_rel_pct.no_overlap).toBeLessThan(1e-6);
    expect(p.fit.training_objective_rel_pct.cm_overlap).toBeGreaterThan(0.1);
    ENGINE_HOST_TERMS.forEach((t, j) => {
      expect(p.terms[t].value).toBeCloseTo(TRUTH[j]!, 6 - String(Math.round(TRUTH[j]!)).length);
      expect(p.terms[t].identified).toBe(true);
      expect(p.terms[t].ci95[0]).toBeLessThanOrEqual(p.terms[t].value + 1e-6);
      expect(p.terms[t].ci95[1]).toBeGreaterThanOrEqual(p.terms[t].value - 1e-6);
    });
    expect(p.sm_scale.value).toBeCloseTo(S, 3);
    // the threshold is recovered on the training rows: 16 MiB would charge m1's 3072-token steps (24 MiB),
    // 64 MiB miss m2's 3072- and 6144-token ones (48 and 96 MiB: 96 pays at 64, 48 does not)
    expect(p.large_step_message_bytes).toBe(LARGE);
    // 96 rows: every 4th of each 6-row group held out → 2 per group (rotating offset) = 32 held out.
    expect(p.fit.n_train + p.fit.holdout.n).toBe(96);
    expect(p.fit.holdout.regimes.decode!.median_ape_pct).toBeLessThan(1e-6);
    expect(engineProfileGates(p)).toEqual([]);
    // the registry object round-trips through its YAML and schema
    expect(parseEngineProfile(stringifyEngineProfile(p), 'x.yaml')).toEqual(p);
  });

  it.each([0, 8 * MIB, 64 * MIB, 128 * MIB])(
    'recovers the large-step threshold %i bytes and its factor (the plain NVLink factor is threshold 0)',
    (large) => {
      const p = fitEngineProfile(
        rows({ large }),
        {
          engine: 'e',
          provenance: {
            stepcal_version: 'test',
            steps: [{ file: 't.steps.csv', sha256: '0', rows: 96 }],
            registries: [{ chip: 'h100', file: 'r.yaml', sha256: '0' }],
          },
        },
        deps,
      );
      // prefill steps schedule 384·n tokens, n = 1..32, × 8192 or 16384 B: each threshold charges a
      // different set of them
      expect(p.large_step_message_bytes).toBe(large);
      expect(p.terms.large_step_nvlink_factor.value).toBeCloseTo(TRUTH[5]!, 4);
      expect(p.sm_scale.value).toBeCloseTo(S, 3);
    },
  );

  it('recovers a known s per chip (CMOverlap rows, s 1.4 on h100 and 1.1 on a100) with --engine-s per-chip', () => {
    // measured = cm_factor · (s_chip · prefill SM or decode HBM) + NVLink + engineHostUs(TRUTH): the fake
    // pricer's CMOverlap law with each chip's own s; the host terms are shared.
    const S_BY_CHIP: Record<string, number> = { h100: 1.4, a100: 1.1 };
    const cmAt = (r: LocatedStepRow, chip: string) => {
      const pre = r.prefill_requests > 0;
      const units = pre ? r.prefill_tokens : r.decode_context_tokens;
      const n = pre ? r.prefill_requests : r.decode_requests;
      const work = K.cm_factor! * (pre ? S_BY_CHIP[chip]! * (K.a + K.b * units) : K.c + K.d * units);
      const nvlink_us = pre ? K.e! * units : 0;
      const large_step_nvlink_us = pre && units * bytesPerToken(r) >= LARGE ? nvlink_us : 0;
      const f = { steps: 1, request_steps: n, kernel_steps: kernels(r, pre), tp: r.tp, large_step_nvlink_us };
      return { ...r, chip, measured_us: work + nvlink_us + engineHostUs(TRUTH, f) };
    };
    const both = [...rows().map((r) => cmAt(r, 'h100')), ...rows().map((r) => cmAt(r, 'a100'))];
    const input = (chip_scales: boolean) => ({
      engine: 'e',
      chip_scales,
      resamples: 24, // point values are what this test checks; 24 resamples keep the ci95 gates meaningful
      provenance: {
        stepcal_version: 'test',
        steps: [{ file: 't.steps.csv', sha256: '0', rows: 192 }],
        registries: [{ chip: 'h100', file: 'r.yaml', sha256: '0' }],
      },
    });
    const p = fitEngineProfile(both, input(true), deps);
    expect(p.composition).toBe('cm_overlap');
    expect(p.sm_scale_by_chip!.h100!.value).toBeCloseTo(1.4, 3);
    expect(p.sm_scale_by_chip!.a100!.value).toBeCloseTo(1.1, 3);
    ENGINE_HOST_TERMS.forEach((t, j) => {
      expect(p.terms[t].value).toBeCloseTo(TRUTH[j]!, 3 - String(Math.round(TRUTH[j]!)).length);
    });
    expect(p.fit.training_objective_rel_pct.cm_overlap!).toBeLessThan(0.01);
    expect(engineProfileGates(p)).toEqual([]);
    expect(parseEngineProfile(stringifyEngineProfile(p), 'x.yaml')).toEqual(p);
    // one pooled s cannot price both chips: between the two, and a worse training fit
    const pooled = fitEngineProfile(both, input(false), deps);
    expect(pooled.sm_scale_by_chip).toBeUndefined();
    expect(pooled.sm_scale.value).toBeGreaterThan(1.1);
    expect(pooled.sm_scale.value).toBeLessThan(1.4);
    expect(pooled.fit.training_objective_rel_pct.cm_overlap!).toBeGreaterThan(
      p.fit.training_objective_rel_pct.cm_overlap! + 1,
    );
    // a chip with rows prices with its own s; one without falls back to the pooled s, and says so
    expect(engineForChip(p, 'a100').sm_scale.value).toBe(p.sm_scale_by_chip!.a100!.value);
    expect(engineForChip(p, 'a100').sm_scale.note).toMatch(/a100's own/);
    expect(engineForChip(p, 'b200').sm_scale.value).toBe(p.sm_scale.value);
    expect(engineForChip(p, 'b200').sm_scale.note).toMatch(/pooled \(the profile has no b200 rows\)/);
  });

  it('the schema names the file and field of a bad value; the gate refuses a negative host term', () => {
    expect(() => parseEngineProfile('kind: EngineProfile\nname: Bad Name\n', 'e.yaml')).toThrow(/e\.yaml: field name/);
    const p = fitEngineProfile(
      rows(),
      {
        engine: 'e',
        provenance: {
          stepcal_version: 't',
          steps: [{ file: 'f', sha256: '0', rows: 1 }],
          registries: [{ chip: 'h100', file: 'r', sha256: '0' }],
        },
      },
      deps,
    );
    const bad = { ...p, terms: { ...p.terms, per_step_us: { ...p.terms.per_step_us, value: -1 } } };
    expect(engineProfileGates(bad).join('\n')).toMatch(
      /^e: terms\.per_step_us\.value: -1 µs: expected >= 0 \(a host cost cannot be negative\)$/m,
    );
    // the large-step factor is dimensionless (× priced NVLink µs), not µs
    const f = p.terms.large_step_nvlink_factor;
    const badF = { ...p, terms: { ...p.terms, large_step_nvlink_factor: { ...f, value: -0.5 } } };
    expect(engineProfileGates(badF).join('\n')).toMatch(
      /e: terms\.large_step_nvlink_factor\.value: -0\.5 × \(priced NVLink µs\): expected >= 0/,
    );
  });

  it('validate --engine with a profile whose name matches no row: no tier (e), and a warning line says so', () => {
    const p = fitEngineProfile(
      rows(),
      {
        engine: 'e',
        provenance: {
          stepcal_version: 't',
          steps: [{ file: 'f', sha256: '0', rows: 1 }],
          registries: [{ chip: 'h100', file: 'r', sha256: '0' }],
        },
      },
      deps,
    );
    const hit = validateRows(rows(), { chip: 'h100', tiers: { profile: p } }, deps);
    expect(hit.tiers!.some((t) => t.tier === 'engine_profile')).toBe(true);
    expect(hit.warnings).toEqual([]);
    const miss = validateRows(rows(), { chip: 'h100', tiers: { profile: { ...p, name: 'notok' } } }, deps);
    expect(miss.tiers!.some((t) => t.tier === 'engine_profile')).toBe(false);
    expect(miss.warnings).toEqual([
      "--engine notok: no rows of engine notok on h100 were scored (the rows' engines: e), so there is no tier (e)",
    ]);
  });
});

describe('validation tiers', () => {
  it('no fold scores a row it trained on; a planted marker row is scored only by a profile fitted without it', () => {
    const all = rows({ marker: true });
    const v = validateRows(all, { chip: 'h100', tiers: {} }, deps);
    const marker = v.rows.findIndex((r) => r.group === 'marker');
    expect(marker).toBeGreaterThanOrEqual(0);
    for (const t of v.tiers!) {
      for (const f of t.folds) {
        const train = new Set(f.train);
        for (const i of f.scored) expect(train.has(i)).toBe(false);
      }
    }
    const b = tierOf(v.tiers, 'cross_deployment');
    // The marker's own deployment is its own fold: scored there, trained nowhere in it.
    const own = b.folds.filter((f) => f.scored.includes(marker));
    expect(own).toHaveLength(1);
    expect(own[0]!.label).toMatch(/without m3 tp2 h100/);
    // Every other fold trained on it (it is an eligible row of another deployment).
    expect(b.folds.filter((f) => f.train.includes(marker))).toHaveLength(b.folds.length - 1);
    // The marker is predicted near the truth (ratio ≈ 1/50) by the profile fitted on the others.
    expect(b.predicted_us[marker]! / v.rows[marker]!.measured_us).toBeLessThan(0.05);
    // (b) scores every scored row exactly once.
    expect(b.folds.flatMap((f) => f.scored).sort((x, y) => x - y)).toEqual(v.rows.map((_, i) => i));
    // The outlier list (> 25 % off) is the marker alone: the generated rows are priced exactly, and the
    // marker is measured 50× its truth, so its error is 1/50 − 1 = −98 %; its resource terms are the
    // fake pricer's decode HBM c + d · Σ context = 500 + 0.01 · 3600 = 536 µs at s = 1, no SM.
    expect(b.outliers!.map((o) => o.row)).toEqual([marker]);
    const o = b.outliers![0]!;
    expect(o.error_pct).toBeCloseTo((b.predicted_us[marker]! / v.rows[marker]!.measured_us - 1) * 100, 9);
    expect(o.error_pct).toBeLessThan(-95);
    expect(o.resources_us.hbm).toBeCloseTo(536, 9);
    expect(o.resources_us.sm).toBe(0);
    expect(o.tokens).toBe(4);
    expect(tierOf(v.tiers, 'uncalibrated').outliers).toBeUndefined();
  });

  it('with another chip, (b) trains on its rows (another chip is another deployment) and (b′) does not', () => {
    // The other chip's rows are the same generated steps on chip a100, plus a marker deployment there.
    const onA100 = (rs: LocatedStepRow[]) => rs.map((r) => ({ ...r, chip: 'a100', file: 'a.steps.csv' }));
    const other = onA100(rows({ marker: true }));
    const otherMarker = 96; // the marker row is appended after the 96 generated rows
    const here = rows({ marker: true });
    const v = validateRows(here, { chip: 'h100', tiers: { otherRows: other } }, deps);
    const marker = v.rows.findIndex((r) => r.group === 'marker');
    const b = tierOf(v.tiers, 'cross_deployment');
    const same = tierOf(v.tiers, 'cross_deployment_same_chip');
    for (const t of [b, same])
      for (const f of t.folds) {
        const train = new Set(f.train);
        for (const i of f.scored) expect(train.has(i)).toBe(false);
        // only this chip's rows are scored (indices below this chip's row count)
        for (const i of f.scored) expect(i).toBeLessThan(here.length);
      }
    // this chip's marker: scored by its own fold only, in both variants
    expect(b.folds.filter((f) => f.scored.includes(marker)).map((f) => f.label)).toEqual(['without m3 tp2 h100']);
    expect(same.folds.filter((f) => f.scored.includes(marker)).map((f) => f.label)).toEqual(['without m3 tp2 h100']);
    // the same model × tp on a100 is another deployment: every (b) fold trains on it, no (b′) fold does
    const a100Marker = here.length + otherMarker;
    expect(b.folds.every((f) => f.train.includes(a100Marker))).toBe(true);
    expect(same.folds.some((f) => f.train.some((i) => i >= here.length))).toBe(false);
    // (b) trains each fold on this chip's other deployments plus all 97 rows of a100
    const own = b.folds.find((f) => f.label === 'without m1 tp4 h100')!;
    const ownSame = same.folds.find((f) => f.label === 'without m1 tp4 h100')!;
    expect(own.train.length).toBe(ownSame.train.length + other.length);
  });

  it('cross-deployment recovers the truth on generated rows; uncalibrated does not', () => {
    const v = validateRows(rows(), { chip: 'h100', tiers: {} }, deps);
    const b = tierOf(v.tiers, 'cross_deployment');
    expect(b.overall.median_ape_pct).toBeLessThan(1e-4);
    expect(b.picks).toEqual({ no_overlap: 8, cm_overlap: 0, overlap: 0 });
    expect(tierOf(v.tiers, 'uncalibrated').overall.median_ape_pct).toBeGreaterThan(10);
    expect(tierOf(v.tiers, 'in_deployment').overall.median_ape_pct).toBeLessThan(1e-4);
    expect(v.tiers!.some((t) => t.tier === 'cross_chip')).toBe(false);
  });

  it('the composition of each fold depends on its training rows only: permuting the scored rows changes no choice', () => {
    // Rows generated with CMOverlap's law (cm_factor), so folds pick CMOverlap; then one deployment's
    // measured times are permuted among its rows: only the fold that scores them sees the change.
    const cmRows = rows().map((r) => {
      const pre = r.prefill_requests > 0;
      const units = pre ? r.prefill_tokens : r.decode_context_tokens;
      const n = pre ? r.prefill_requests : r.decode_requests;
      const work = K.cm_factor! * (pre ? S * (K.a + K.b * units) : K.c + K.d * units);
      const nvlink_us = pre ? K.e! * units : 0;
      const large_step_nvlink_us = pre && units * bytesPerToken(r) >= LARGE ? nvlink_us : 0;
      const f = { steps: 1, request_steps: n, kernel_steps: kernels(r, pre), tp: r.tp, large_step_nvlink_us };
      return { ...r, measured_us: work + nvlink_us + engineHostUs(TRUTH, f) };
    });
    const before = validateRows(cmRows, { chip: 'h100', tiers: {} }, deps);
    const idx = cmRows.map((r, i) => (r.model === 'm2' && r.tp === 4 ? i : -1)).filter((i) => i >= 0);
    const permuted = cmRows.map((r) => ({ ...r }));
    idx.forEach((i, j) => {
      permuted[i]!.measured_us = cmRows[idx[(j + 5) % idx.length]!]!.measured_us;
    });
    const after = validateRows(permuted, { chip: 'h100', tiers: {} }, deps);
    const picks = (v: typeof before) => tierOf(v.tiers, 'cross_deployment').folds.map((f) => [f.label, f.composition]);
    expect(picks(before).filter(([, c]) => c === 'cm_overlap')).toHaveLength(8);
    const own = tierOf(after.tiers, 'cross_deployment').folds.find((f) => /without m2 tp4/.test(f.label))!;
    expect(own.composition).toBe('cm_overlap');
    const ownBefore = tierOf(before.tiers, 'cross_deployment').folds.find((f) => /without m2 tp4/.test(f.label))!;
    expect(own.sm_scale).toBe(ownBefore.sm_scale);
    expect(own.train).toEqual(ownBefore.train);
    // and the scores of the permuted deployment do change (the permutation reached the scored rows)
    expect(tierOf(after.tiers, 'cross_deployment').overall.median_ape_pct).toBeGreaterThan(
      tierOf(before.tiers, 'cross_deployment').overall.median_ape_pct,
    );
  });
});

describe('tier report figures', () => {
  it('draw predicted vs measured per tier and tier (b) residuals vs batch, context and tp', async () => {
    const { tierCharts } = await import('../../src/report/tiers.ts');
    const v = validateRows(rows(), { chip: 'h100', tiers: {} }, deps);
    const charts = tierCharts({ ...v, pinned: { registry_sha256: '', stepcal_version: '', flags: [], inputs: [] } });
    expect(charts.map((c) => c.name)).toEqual([
      'validation-tier-uncalibrated.svg',
      'validation-tier-cross_deployment.svg',
      'validation-tier-in_deployment.svg',
      'validation-tier-b-residual-batch.svg',
      'validation-tier-b-residual-context.svg',
      'validation-tier-b-residual-tp.svg',
    ]);
    // every scored row is one dot in each tier-(b) figure (96 rows)
    for (const c of charts.slice(3)) expect(c.svg.match(/<circle/g)?.length).toBe(96);
    // decode context: 900 tokens per request on every decode row
    expect(new Set(v.rows.filter((r) => r.regime === 'decode').map((r) => r.context_tokens))).toEqual(new Set([900]));
  });
});
