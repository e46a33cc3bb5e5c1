/**
 * The engine compute-efficiency term s (NoOverlap: measured = s · T_SM + T_HBM + T_NVLink + T_NIC + host)
 * and the host-fit weighting, on the closed-form fake pricer (test/validate/fake-pricer.ts): prefill
 * steps charge SM = a + b · tokens, decode steps charge HBM = c + d · Σ context.
 */
import { describe, expect, it } from 'vitest';
import { engineSmExtraUs, fitHostTerms } from '../../src/validate/hostfit.ts';
import { engineSmChoice, validateRows } from '../../src/validate/run.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import type { RegimeMetrics } from '../../src/validate/types.ts';
import { BASE, fakePricer, stepsCsv, type FakeCoeffs } from './fake-pricer.ts';

const K: FakeCoeffs = { a: 1000, b: 2, c: 500, d: 0.01, h: 50, overlap_factor: 0.8 };
const rowsOf = (rs: Array<Record<string, string | number>>) => parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
const deps = { pricerFor: () => fakePricer(K) };
const pre = (n: number, tokens: number, meas: number, group: string) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: n,
  prefill_tokens: tokens,
  decode_requests: 0,
  decode_context_tokens: 0,
  measured_us: meas,
  group,
});
const dec = (n: number, ctx: number, meas: number, group: string) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: 0,
  prefill_tokens: 0,
  decode_requests: n,
  decode_context_tokens: ctx,
  measured_us: meas,
  group,
});

// Truth: the engine runs its arithmetic S = 1.6× slower than the fake's SM price, and spends
// 20,000 µs per step + 300 µs per request per step on the host.
const S = 1.6;
const PER_STEP = 20000;
const PER_REQ = 300;
function truthRows(): Array<Record<string, string | number>> {
  const rs: Array<Record<string, string | number>> = [];
  for (const n of [1, 2, 4, 8, 16, 32]) {
    rs.push(pre(n, 512 * n, S * (K.a + K.b * 512 * n) + PER_STEP + PER_REQ * n, 'pre'));
    rs.push(dec(n, 1000 * n, K.c + K.d * 1000 * n + PER_STEP + PER_REQ * n, 'dec'));
  }
  return rs;
}

describe('engine compute-efficiency term s', () => {
  it('fitHostTerms recovers a known s and host terms (closed form, both weightings)', () => {
    // rows: SM-only prefill-like and SM-free decode-like rows; residual = measured − (T_SM + T_HBM)
    const sm = [2000, 5000, 11000, 0, 0, 0];
    const hbm = [0, 0, 0, 800, 900, 1200];
    const req = [1, 2, 4, 1, 8, 16];
    const meas = sm.map((x, i) => S * x + hbm[i]! + PER_STEP + PER_REQ * req[i]!);
    const feats = sm.map((x, i) => ({ steps: 1, request_steps: req[i]!, kernel_steps: NaN, tp: 2, sm_us: x }));
    const resid = meas.map((m, i) => m - sm[i]! - hbm[i]!);
    for (const weighting of ['relative', 'absolute'] as const) {
      const f = fitHostTerms('e', 'no_overlap', feats, resid, 'fraction', {
        engineSm: true,
        weighting,
        measured_us: meas,
      });
      expect(f.sm_scale!.value).toBeCloseTo(S, 9);
      expect(f.sm_scale!.identified).toBe(true);
      expect(f.terms[0]!.value_us).toBeCloseTo(PER_STEP, 6);
      expect(f.terms[1]!.value_us).toBeCloseTo(PER_REQ, 8);
      expect(f.train_rms_us).toBeLessThan(1e-6);
      // extra SM of the first row = (s − 1) · 2000 = 1200 µs
      expect(engineSmExtraUs(f, feats[0]!)).toBeCloseTo(1200, 6);
    }
  });

  it('s is held at 1 when T_SM is collinear with the host columns, or when least squares gives s ≤ 0', () => {
    // T_SM = 1000 · steps on every row: indistinguishable from the per-step constant
    const feats = [1, 2, 3].map((n) => ({ steps: n, request_steps: n * n, kernel_steps: NaN, tp: 2, sm_us: 1000 * n }));
    const meas = [5000, 9000, 14000];
    const f = fitHostTerms(
      'e',
      'no_overlap',
      feats,
      meas.map((m, i) => m - feats[i]!.sm_us),
      'fraction',
      { engineSm: true, measured_us: meas },
    );
    expect(f.sm_scale).toMatchObject({ value: 1, identified: false });
    expect(engineSmExtraUs(f, feats[0]!)).toBe(0);
    // measured falls as T_SM grows: s would be negative
    const g = [0, 1, 2, 3].map((i) => ({
      steps: 1,
      request_steps: 1 + (i % 2),
      kernel_steps: NaN,
      tp: 2,
      sm_us: 1000 * i,
    }));
    const m2 = [9000, 8000, 7500, 6000];
    const f2 = fitHostTerms(
      'e',
      'no_overlap',
      g,
      m2.map((m, i) => m - g[i]!.sm_us),
      'fraction',
      { engineSm: true, measured_us: m2 },
    );
    expect(f2.sm_scale).toMatchObject({ value: 1, identified: true });
    expect(f2.sm_scale!.note).toMatch(/s ≤ 0/);
  });

  it('relative weighting minimises Σ((pred − meas)/meas)², absolute Σ(pred − meas)² (hand arithmetic)', () => {
    // one identified column (steps = 1): β = Σ r_i w_i² / Σ w_i²; residuals 100, 1000 µs, measured 1,000 and 10,000 µs
    const feats = [0, 1].map(() => ({ steps: 1, request_steps: 1, kernel_steps: NaN, tp: 1 }));
    const meas = [1000, 10000];
    const rel = fitHostTerms('e', 'no_overlap', feats, [100, 1000], 'fraction', { measured_us: meas });
    expect(rel.terms[0]!.value_us).toBeCloseTo((100 / 1e6 + 1000 / 1e8) / (1 / 1e6 + 1 / 1e8), 9); // 108.9109
    const abs = fitHostTerms('e', 'no_overlap', feats, [100, 1000], 'fraction', { weighting: 'absolute' });
    expect(abs.terms[0]!.value_us).toBeCloseTo(550, 9);
    expect(() => fitHostTerms('e', 'no_overlap', feats, [100, 1000], 'fraction')).toThrow(
      /relative weighting needs measured_us/,
    );
  });

  it('validateRows: recovers s on the training rows, predicts the held-out rows exactly, never scores a training row', () => {
    const v = validateRows(
      rowsOf(truthRows()),
      { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto', composition: 'no_overlap' },
      deps,
    );
    const es = v.engine_sm!;
    expect(es.scales).toEqual([{ engine: 'e', value: expect.closeTo(S, 9), identified: true }]);
    expect(es.used).toBe(true);
    expect(es.reason).toMatch(/^with s: mean over regimes of held-out NoOverlap MAPE/);
    // groups pre (g 0) and dec (g 1), k = 2: pre's 2nd/4th/6th (rows 3, 7, 11) and dec's 1st/3rd/5th (rows 2, 6, 10)
    const train = v.host_fit!.training_rows.map((t) => t.row);
    expect(train).toEqual([2, 3, 6, 7, 10, 11]);
    for (const r of v.rows) expect(r.used_for_host_fit).toBe(train.includes(r.row));
    // every metric counts the 6 held-out rows only, in both variants
    expect(v.overall.n).toBe(6);
    expect(es.with.overall.n).toBe(6);
    expect(es.without.overall.n).toBe(6);
    expect(es.with.regimes.prefill!.n + es.with.regimes.decode!.n).toBe(6);
    expect(v.regimes.prefill!.mape_pct).toBeLessThan(1e-6);
    expect(v.regimes.decode!.mape_pct).toBeLessThan(1e-6);
    // without s the prefill rows are predicted too fast (the host terms cannot absorb a slope in tokens)
    expect(es.without.regimes.prefill!.bias_pct).toBeLessThan(-5);
    // the headline's SM share carries s: held-out prefill row 1 (n = 1): SM = 1.6 · (1000 + 1024) = 3238.4 µs
    const r1 = v.rows.find((r) => r.row === 1)!;
    expect(r1.resources_us.sm).toBeCloseTo(S * (K.a + K.b * 512), 6);
    expect(r1.predicted_us.no_overlap).toBeCloseTo(r1.measured_us, 6);
  });

  it('a training row cannot move a held-out score except through the fit: perturbing it changes s, not the scored set', () => {
    const rs = truthRows();
    const rows = rowsOf(rs);
    const v0 = validateRows(rows, { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'on' }, deps);
    // row 3 (prefill, trains) measured 10 % slower: s moves, the scored rows stay the same six
    const bumped = rows.map((r) => (r.row === 3 ? { ...r, measured_us: r.measured_us * 1.1 } : r));
    const v1 = validateRows(bumped, { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'on' }, deps);
    expect(v1.engine_sm!.scales[0]!.value).not.toBeCloseTo(S, 3);
    const scored = (v: typeof v0) => v.rows.filter((r) => !r.used_for_host_fit).map((r) => r.row);
    expect(scored(v1)).toEqual(scored(v0));
    expect(scored(v1)).not.toContain(3);
  });

  it('mode off keeps the host-only variant but still reports both; on forces s; on without --fit-host is refused', () => {
    const off = validateRows(rowsOf(truthRows()), { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'off' }, deps);
    expect(off.engine_sm!.used).toBe(false);
    expect(off.host_fit!.fits.every((f) => f.sm_scale === undefined)).toBe(true);
    expect(off.engine_sm!.with.regimes.prefill!.mape_pct).toBeLessThan(1e-6);
    expect(off.regimes_by_composition.no_overlap.prefill!.mape_pct).toBeCloseTo(
      off.engine_sm!.without.regimes.prefill!.mape_pct,
      12,
    );
    expect(() => validateRows(rowsOf(truthRows()), { chip: 'h100', engineSm: 'on' }, deps)).toThrow(
      /--engine-sm on needs --fit-host/,
    );
  });

  it('engineSmChoice: equal weight per regime, ties → without', () => {
    const m = (mape_pct: number): RegimeMetrics => ({
      n: 1,
      mape_pct,
      median_ape_pct: mape_pct,
      p90_ape_pct: mape_pct,
      bias_pct: 0,
      geo_mean_ratio: 1,
    });
    const without = { prefill: m(30), decode: m(10), mixed: null, static_batch: m(10) };
    // pooled over many decode rows this could look worse; per-regime mean: 50/3 vs 16/3+... = (12 + 12 + 11)/3
    expect(
      engineSmChoice(without, { prefill: m(12), decode: m(12), mixed: null, static_batch: m(11) }, 'auto').use,
    ).toBe(true);
    expect(engineSmChoice(without, { ...without }, 'auto')).toMatchObject({
      use: false,
      reason: expect.stringMatching(/tie → without s/),
    });
    expect(engineSmChoice(without, { prefill: m(1), decode: m(1), mixed: null, static_batch: m(1) }, 'off').use).toBe(
      false,
    );
  });
});
