/**
 * Three compositions in validation: CMOverlap's engine term s by bounded 1-D search, the headline rule
 * among three, training rows out of every score, and rows counted per extrapolation reason.
 */
import { describe, expect, it } from 'vitest';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { extrapolationReason } from '../../src/validate/expand.ts';
import { CM_SM_SCALE_BOUNDS, fitHostTermsWithScaleSearch } from '../../src/validate/hostfit.ts';
import { extrapolationCounts, headlineChoice, validateRows } from '../../src/validate/run.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import {
  COMPOSITIONS,
  REGIMES,
  type Composition,
  type Regime,
  type RegimeMetrics,
  type RowResult,
} from '../../src/validate/types.ts';
import { computeMetrics } from '../../src/validate/metrics.ts';
import { makePricer } from '../pricer/helpers.ts';
import { BASE, fakePricer, stepsCsv, type FakeCoeffs } from './fake-pricer.ts';

const K: FakeCoeffs = { a: 1000, b: 2, c: 500, d: 0.01, h: 50, overlap_factor: 0.8, cm_factor: 0.9 };
const rowsOf = (rs: Array<Record<string, string | number>>) => parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
/** Deps whose pricer honours sm_scale (as the real one does). */
const scaled = (k: FakeCoeffs = K) => ({
  pricerFor: (_key: unknown, o?: { sm_scale?: number }) => fakePricer(k, o?.sm_scale ?? 1),
});
const pre = (n: number, tokens: number, meas: number, group: string, extra: Record<string, string | number> = {}) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: n,
  prefill_tokens: tokens,
  decode_requests: 0,
  decode_context_tokens: 0,
  measured_us: meas,
  group,
  ...extra,
});
const dec = (n: number, ctx: number, meas: number, group: string, extra: Record<string, string | number> = {}) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: 0,
  prefill_tokens: 0,
  decode_requests: n,
  decode_context_tokens: ctx,
  measured_us: meas,
  group,
  ...extra,
});

// Truth for CMOverlap on the fake (CMOverlap = 0.9 · work + host): the engine's SM runs S = 1.6× the
// priced SM, host = 20,000 µs per step + 300 µs per request per step.
const S = 1.6;
function truthRows(): Array<Record<string, string | number>> {
  const rs: Array<Record<string, string | number>> = [];
  for (const n of [1, 2, 4, 8, 16, 32]) {
    rs.push(pre(n, 512 * n, 0.9 * S * (K.a + K.b * 512 * n) + 20000 + 300 * n, 'pre'));
    rs.push(dec(n, 1000 * n, 0.9 * (K.c + K.d * 1000 * n) + 20000 + 300 * n, 'dec'));
  }
  return rs;
}

describe('CMOverlap engine term: bounded 1-D search with the host terms solved inside', () => {
  // rows: arithmetic a_i, weight reads b_i; priced CMOverlap without host = max(s · a_i, b_i)
  const a = [2000, 6000, 12000, 300, 500, 800, 9000];
  const b = [1500, 1500, 4000, 2500, 3000, 3500, 2000];
  const req = [1, 2, 4, 1, 8, 16, 3];
  const feats = a.map((_, i) => ({ steps: 1, request_steps: req[i]!, kernel_steps: NaN, tp: 2 }));
  const priced = (s: number) => a.map((x, i) => Math.max(s * x, b[i]!));
  const truth = (s: number) => priced(s).map((p, i) => p + 5000 + 250 * req[i]!);

  it('recovers a known s inside max(s·SM, HBM) and the host terms (both weightings)', () => {
    for (const weighting of ['relative', 'absolute'] as const) {
      const f = fitHostTermsWithScaleSearch('e', 'cm_overlap', feats, truth(1.6), priced, 'fraction', weighting);
      expect(f.sm_scale!.identified).toBe(true);
      expect(f.sm_scale!.note).toBeUndefined();
      expect(f.sm_scale!.value).toBeCloseTo(1.6, 3);
      expect(f.terms[0]!.value_us).toBeCloseTo(5000, -1);
      expect(f.terms[1]!.value_us).toBeCloseTo(250, 0);
      expect(f.train_rms_rel_pct!).toBeLessThan(0.01);
    }
  });

  it('holds s at 1 when the priced rows do not depend on it, and notes a minimum at a bound', () => {
    const flat = fitHostTermsWithScaleSearch('e', 'cm_overlap', feats, truth(1), () => b, 'fraction');
    expect(flat.sm_scale).toMatchObject({ value: 1, identified: false });
    expect(flat.sm_scale!.note).toMatch(/do not depend on s/);
    // truth s = 8 lies outside [0.25, 4]: the search stops at 4 and says so
    const hi = fitHostTermsWithScaleSearch('e', 'cm_overlap', feats, truth(8), priced, 'fraction');
    expect(hi.sm_scale!.value).toBeCloseTo(CM_SM_SCALE_BOUNDS[1], 3);
    expect(hi.sm_scale!.note).toMatch(/search bound 4/);
  });

  it('validateRows: the CMOverlap fit recovers S, predicts held-out rows exactly, and the headline follows the evidence', () => {
    const v = validateRows(rowsOf(truthRows()), { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto' }, scaled());
    const es = v.engine_sm_cm_overlap!;
    expect(es.composition).toBe('cm_overlap');
    expect(es.scales).toHaveLength(1);
    expect(es.scales[0]!.value).toBeCloseTo(S, 3);
    expect(es.used).toBe(true);
    expect(es.reason).toMatch(/^with s: mean over regimes of held-out CMOverlap MAPE/);
    expect(v.regimes_by_composition.cm_overlap.prefill!.mape_pct).toBeLessThan(0.01);
    expect(v.regimes_by_composition.cm_overlap.decode!.mape_pct).toBeLessThan(0.01);
    expect(v.headline).toBe('cm_overlap');
    expect(v.headline_reason).toMatch(
      /^CMOverlap has the lowest held-out pooled MAPE over 6 rows \(NoOverlap [0-9.]+%, CMOverlap 0\.0%, Overlap [0-9.]+%; per regime NoOverlap \/ CMOverlap \/ Overlap: prefill /,
    );
    const fit = v.host_fit!.fits.find((f) => f.composition === 'cm_overlap')!;
    expect(fit.sm_scale!.value).toBeCloseTo(S, 3);
    expect(fit.terms[0]!.value_us).toBeCloseTo(20000, -2);
    // rows report the headline's resources: prefill row 1 (held out) SM = s · (1000 + 2·512), host = its CMOverlap host
    const r1 = v.rows.find((r) => r.row === 1)!;
    expect(r1.used_for_host_fit).toBe(false);
    expect(r1.resources_us.sm / (K.a + K.b * 512)).toBeCloseTo(S, 3);
    expect(r1.host_us).toBeCloseTo(r1.predicted_us.cm_overlap - 0.9 * r1.resources_us.sm, 6);
    expect(r1.resources_us.host).toBe(r1.host_us);
    // one fit per composition, host-only for Overlap
    expect(v.host_fit!.fits.map((f) => f.composition).sort()).toEqual([...COMPOSITIONS].sort());
    expect(v.host_fit!.fits.find((f) => f.composition === 'overlap')!.sm_scale).toBeUndefined();
  });

  it('--engine-sm off skips the CMOverlap search; a pricer factory that ignores sm_scale holds s at 1', () => {
    const off = validateRows(rowsOf(truthRows()), { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'off' }, scaled());
    expect(off.engine_sm_cm_overlap).toBeUndefined();
    expect(off.host_fit!.fits.find((f) => f.composition === 'cm_overlap')!.sm_scale).toBeUndefined();
    const deaf = validateRows(
      rowsOf(truthRows()),
      { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto' },
      { pricerFor: () => fakePricer(K) },
    );
    expect(deaf.engine_sm_cm_overlap!.scales[0]).toMatchObject({ value: 1, identified: false });
  });
});

describe('training rows are excluded from every score, in all three compositions', () => {
  const rs = truthRows();
  rs.push(dec(64, 64000, 99999, 'dec', { flags: 'power_capped' }));
  const rows = rowsOf(rs);
  const v = validateRows(rows, { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto' }, scaled());
  const held = (rr: readonly RowResult[]) => rr.filter((r) => !r.used_for_host_fit && r.excluded === undefined);

  it('each composition’s per-regime and pooled metrics are those of the held-out rows alone', () => {
    const h = held(v.rows);
    expect(h).toHaveLength(6);
    expect(v.rows.filter((r) => r.used_for_host_fit)).toHaveLength(6);
    for (const c of COMPOSITIONS) {
      const pts = (xs: readonly RowResult[]) =>
        xs.map((r) => ({
          predicted_us: r.predicted_us[c],
          measured_us: r.measured_us,
          group: r.group,
          batch: r.batch,
        }));
      expect(v.overall_by_composition[c]).toEqual(computeMetrics(pts(h)));
      for (const g of REGIMES) {
        const rg = h.filter((r) => r.regime === g);
        const m: RegimeMetrics | null = v.regimes_by_composition[c][g as Regime];
        if (!rg.length) expect(m).toBeNull();
        else expect(m).toEqual(computeMetrics(pts(rg)));
      }
      for (const grp of v.groups)
        expect(grp.metrics[c].n).toBe(
          h.filter((r) => r.regime === grp.key.regime && r.group === `${grp.key.regime === 'prefill' ? 'pre' : 'dec'}`)
            .length,
        );
    }
  });

  it('perturbing a training row changes fits, never the scored set, in any composition', () => {
    const bumped = rows.map((r) => (r.row === 3 ? { ...r, measured_us: r.measured_us * 3 } : r));
    const v1 = validateRows(bumped, { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto' }, scaled());
    const scoredRows = (x: typeof v) => held(x.rows).map((r) => r.row);
    expect(scoredRows(v1)).toEqual(scoredRows(v));
    expect(scoredRows(v1)).not.toContain(3);
    for (const c of COMPOSITIONS) expect(v1.overall_by_composition[c].n).toBe(6);
    expect(v1.engine_sm_cm_overlap!.scales[0]!.value).not.toBeCloseTo(S, 2);
  });
});

describe('headline among three', () => {
  const m = (mape_pct: number): RegimeMetrics => ({
    n: 10,
    mape_pct,
    median_ape_pct: mape_pct,
    p90_ape_pct: mape_pct,
    bias_pct: 0,
    geo_mean_ratio: 1,
  });
  const by = (x: Record<Composition, number>) =>
    Object.fromEntries(
      COMPOSITIONS.map((c) => [c, { prefill: m(x[c]), decode: null, mixed: null, static_batch: null }]),
    ) as Record<Composition, Record<Regime, RegimeMetrics | null>>;
  const overall = (x: Record<Composition, number>) =>
    Object.fromEntries(COMPOSITIONS.map((c) => [c, m(x[c])])) as Record<Composition, RegimeMetrics>;
  it('lowest pooled MAPE wins; ties go to NoOverlap, then CMOverlap; forcing says so', () => {
    const x = { no_overlap: 8.3, cm_overlap: 6.8, overlap: 19.8 };
    expect(headlineChoice(overall(x), by(x), 10)).toEqual({
      headline: 'cm_overlap',
      headline_reason:
        'CMOverlap has the lowest held-out pooled MAPE over 10 rows (NoOverlap 8.3%, CMOverlap 6.8%, Overlap 19.8%; per regime NoOverlap / CMOverlap / Overlap: prefill 8.3% / 6.8% / 19.8%)',
    });
    const tie = { no_overlap: 9, cm_overlap: 5, overlap: 5 };
    expect(headlineChoice(overall(tie), by(tie), 10).headline).toBe('cm_overlap');
    expect(headlineChoice(overall(tie), by(tie), 10).headline_reason).toMatch(
      /tie with Overlap → the earlier of NoOverlap, CMOverlap, Overlap/,
    );
    const all = { no_overlap: 5, cm_overlap: 5, overlap: 5 };
    expect(headlineChoice(overall(all), by(all), 10).headline).toBe('no_overlap');
    expect(headlineChoice(overall(x), by(x), 10, 'overlap')).toMatchObject({
      headline: 'overlap',
      headline_reason: expect.stringMatching(
        /^forced by --composition overlap \(held-out pooled MAPE NoOverlap 8\.3%, CMOverlap 6\.8%, Overlap 19\.8%\)$/,
      ),
    });
  });
});

describe('extrapolation reasons', () => {
  it('groups the real pricer’s notes: parenthetical source and per-step figures dropped', () => {
    // decode:256@4096 on H200 exceeds HBM (docs/pricer.md "Extrapolation flags"); decode:2 runs the ramp below its fitted m range
    const big = makePricer('llama-3.1-8b', 'h200', {}).price(decodeBatch(256, 4095));
    const small = makePricer('llama-3.1-8b', 'h200', {}).price(decodeBatch(2, 1000));
    const reasons = [...big.extrapolation_notes, ...small.extrapolation_notes].map(extrapolationReason);
    expect(reasons).toContain("memory: weights + the batch's KV cache exceed the chip's HBM");
    const gemm = reasons.find((r) => r.startsWith('GEMM ramp below'));
    expect(gemm).toMatch(/^GEMM ramp below its fitted m range: the bf16 ramp at fewer than [0-9.]+ tokens per step$/);
    expect(
      extrapolationReason(
        'all_reduce over 16 ranks priced with the 8-rank h100 coefficients (measured widths: 2, 4, 8)',
      ),
    ).toBe('all_reduce over 16 ranks priced with the 8-rank h100 coefficients');
    expect(
      extrapolationReason('a collective message of 600000000 bytes exceeds the largest fitted size (536870912 bytes)'),
    ).toBe('a collective message exceeds the largest fitted size (512 MiB)');
    expect(
      extrapolationReason("memory: weights 150.2 GiB per rank exceed h200's 141 GiB of HBM before any KV cache"),
    ).toBe("memory: weights alone exceed the chip's HBM");
    expect(
      extrapolationReason(
        'no attention_decode_rate_mla in the registry: mla decode priced with the full-attention rate',
      ),
    ).toBe('no attention_decode_rate_mla in the registry: mla decode priced with the full-attention rate');
  });

  it('counts rows per reason (all, scored, scored per regime), most frequent first', () => {
    const r = (regime: Regime, reasons: string[], extra: Partial<RowResult> = {}) =>
      ({ regime, extrapolation_reasons: reasons, used_for_host_fit: false, ...extra }) as RowResult;
    const counts = extrapolationCounts([
      r('decode', ['A', 'B']),
      r('decode', ['A']),
      r('prefill', ['B']),
      r('decode', ['A'], { used_for_host_fit: true }),
      r('static_batch', ['A'], { excluded: 'stopped_early' }),
      r('prefill', []),
    ]);
    expect(counts).toEqual([
      { reason: 'A', rows: 4, scored_rows: 2, scored_by_regime: { decode: 2 } },
      { reason: 'B', rows: 2, scored_rows: 2, scored_by_regime: { decode: 1, prefill: 1 } },
    ]);
  });
});
