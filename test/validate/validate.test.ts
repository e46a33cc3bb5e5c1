import { describe, expect, it } from 'vitest';
import { priceRow, spread, stepBatch } from '../../src/validate/expand.ts';
import { fitHostTerms, parseHostRule, selectTrainingRows } from '../../src/validate/hostfit.ts';
import { validateRows } from '../../src/validate/run.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import { BASE, fakePricer, stepsCsv, type FakeCoeffs } from './fake-pricer.ts';

const K: FakeCoeffs = { a: 1000, b: 2, c: 500, d: 0.01, h: 50, overlap_factor: 0.8 };
const rowsOf = (rs: Array<Record<string, string | number>>) => parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
const deps = (k: FakeCoeffs = K) => ({ pricerFor: () => fakePricer(k) });
const pre = (n: number, tokens: number, meas: number, extra: Record<string, string | number> = {}) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: n,
  prefill_tokens: tokens,
  decode_requests: 0,
  decode_context_tokens: 0,
  measured_us: meas,
  ...extra,
});
const dec = (n: number, ctx: number, meas: number, extra: Record<string, string | number> = {}) => ({
  ...BASE,
  kind: 'step',
  prefill_requests: 0,
  prefill_tokens: 0,
  decode_requests: n,
  decode_context_tokens: ctx,
  measured_us: meas,
  ...extra,
});

describe('row → batch mapping', () => {
  it('splits class totals equally (to one token) and keeps the sums exact', () => {
    expect(spread(10, 4)).toEqual([3, 3, 2, 2]);
    const [r] = rowsOf([{ ...dec(3, 3001, 1), prefill_requests: 2, prefill_tokens: 1001, prefill_context_tokens: 10 }]);
    const b = stepBatch(r!);
    expect(b.requests).toHaveLength(5);
    expect(b.requests.slice(0, 2).map((q) => [q.scheduled_tokens, q.computed_tokens])).toEqual([
      [501, 5],
      [500, 5],
    ]);
    expect(b.requests.slice(2).map((q) => [q.scheduled_tokens, q.computed_tokens])).toEqual([
      [1, 1001],
      [1, 1000],
      [1, 1000],
    ]);
  });

  it('static batch = one prefill of batch prompts + (output − 1) decodes with growing context (hand arithmetic)', () => {
    // B = 4, P = 100, O = 11.
    // prefill: a + b·B·P = 1000 + 2·400 = 1800; decode i = 0..9: c + d·B·(P + i) → 10·500 + 0.04·(1000 + 45) = 5041.8;
    // host: 11 steps · 50 = 550. NoOverlap = 7391.8; Overlap = 0.8·6841.8 + 550 = 6023.44.
    const [r] = rowsOf([
      { ...BASE, kind: 'static_batch', batch: 4, prompt_tokens: 100, output_tokens: 11, measured_us: 7000 },
    ]);
    const p = fakePricer(K);
    const price = priceRow(r!, p);
    expect(p.calls).toBe(11);
    expect(price.steps).toBe(11);
    expect(price.request_steps).toBe(44);
    expect(price.no_overlap_nohost_us + price.host_us).toBeCloseTo(7391.8, 9);
    expect(price.overlap_nohost_us + price.host_us).toBeCloseTo(6023.44, 9);
    expect(price.resources_us.sm).toBeCloseTo(1800, 9);
    expect(price.resources_us.hbm).toBeCloseTo(5041.8, 9);
    const v = validateRows([r!], { chip: 'h100' }, deps());
    expect(v.rows[0]!.predicted_us.no_overlap).toBeCloseTo(7391.8, 9);
    expect(v.rows[0]!.bottleneck).toBe('hbm');
    expect(v.regimes.static_batch!.n).toBe(1);
  });
});

describe('per-regime reporting', () => {
  it('cancelling errors: pooled figures look fine while one regime is off by > 50%', () => {
    // 9 decode rows predicted 2% fast, 1 prefill row predicted 60% slow → pooled MAPE 7.8%, prefill 60%.
    const rs = [] as Array<Record<string, string | number>>;
    for (let i = 1; i <= 9; i++) {
      const predicted = K.c + K.d * 1000 * i + K.h;
      rs.push(dec(i, 1000 * i, predicted / 0.98));
    }
    rs.push(pre(1, 500, (K.a + K.b * 500 + K.h) / 1.6));
    const v = validateRows(rowsOf(rs), { chip: 'h100', composition: 'no_overlap' }, deps());
    expect(v.overall.mape_pct).toBeCloseTo((9 * 2 + 60) / 10, 6);
    expect(v.overall.mape_pct).toBeLessThan(10);
    expect(v.regimes.prefill!.mape_pct).toBeCloseTo(60, 6);
    expect(v.regimes.decode!.bias_pct).toBeCloseTo(-2, 6);
    expect(v.regimes.prefill!.bias_pct).toBeCloseTo(60, 6);
    expect(v.regimes.static_batch).toBeNull();
    expect(v.groups.map((g) => g.key.regime).sort()).toEqual(['decode', 'prefill']);
  });

  it('skips rows of another chip with a warning and picks the headline from held-out MAPE', () => {
    const rs = [dec(1, 1000, 600, {}), dec(2, 2000, 600, {}), { ...dec(1, 1, 1), chip: 'a100' }];
    const v = validateRows(rowsOf(rs), { chip: 'h100' }, deps());
    expect(v.rows).toHaveLength(2);
    expect(v.warnings[0]).toMatch(/1 row\(s\) measured on another chip \(a100\) skipped/);
    // measured 600 vs NoOverlap 560/570 and Overlap 458/466: NoOverlap is closer
    expect(v.headline).toBe('no_overlap');
    expect(v.headline_reason).toMatch(
      /NoOverlap has the lowest held-out pooled MAPE over 2 rows \(NoOverlap 5.8%, CMOverlap 5.8%, Overlap 23.0%/,
    );
    // the fake prices CMOverlap = NoOverlap (cm_factor 1): the tie goes to NoOverlap, and says so
    expect(v.headline_reason).toMatch(/tie with CMOverlap → the earlier of NoOverlap, CMOverlap, Overlap/);
  });
});

describe('host fit', () => {
  it('parses rules and refuses others', () => {
    expect(parseHostRule('batch=1')).toEqual({ kind: 'batch1' });
    expect(parseHostRule('fraction=0.25')).toEqual({ kind: 'fraction', fraction: 0.25, k: 4 });
    expect(() => parseHostRule('fraction=1.5')).toThrow(/"fraction=F" with 0 < F < 1/);
    expect(() => parseHostRule('all')).toThrow(/--fit-host/);
  });

  it('fraction=F takes every k-th row per group, deterministically', () => {
    const items = [...Array(10)].map((_, i) => ({ batch: i + 1, group: i < 6 ? 'a' : 'b' }));
    // k = 3: group a (g = 0, indices 0..5) → (i + 0) mod 3 = 2 → 2, 5; group b (g = 1, indices 6..9 → i = 0..3) → (i + 1) mod 3 = 2 → i = 1 → 7
    expect([...selectTrainingRows(items, { kind: 'fraction', fraction: 1 / 3, k: 3 })]).toEqual([2, 5, 7]);
    expect([...selectTrainingRows(items, { kind: 'batch1' })]).toEqual([0]);
  });

  it('recovers known host terms with fraction=0.5 and excludes the training rows from every error', () => {
    // truth: host = 25,000 µs per step + 300 µs per request per step (the fake pricer's own host is 50 µs)
    const rs = [] as Array<Record<string, string | number>>;
    for (const n of [1, 2, 4, 8, 16, 32]) {
      rs.push(dec(n, 1000 * n, K.c + K.d * 1000 * n + 25000 + 300 * n, { group: 'dec' }));
      rs.push(pre(n, 512 * n, K.a + K.b * 512 * n + 25000 + 300 * n, { group: 'pre' }));
    }
    const v = validateRows(rowsOf(rs), { chip: 'h100', fitHost: 'fraction=0.5' }, deps());
    const f = v.host_fit!.fits.find((x) => x.composition === 'no_overlap')!;
    const term = (n: string) => f.terms.find((t) => t.name === n)!;
    expect(term('per_step_us').value_us).toBeCloseTo(25000, 4);
    expect(term('per_request_step_us').value_us).toBeCloseTo(300, 6);
    expect(term('per_step_tp_gt1_us').identified).toBe(false); // every row is tp 2
    expect(term('per_kernel_us').identified).toBe(false); // kernel counts unknown to the fake
    expect(term('per_step_per_rank_us').identified).toBe(false); // steps · tp = 2 · steps: collinear with per_step_us
    // groups dec (g 0: rows 1,3,5,7,9,11) and pre (g 1: rows 2,4,...): k = 2 → dec's 2nd, 4th, 6th; pre's 1st, 3rd, 5th
    expect(v.host_fit!.training_rows.map((t) => t.row)).toEqual([2, 3, 6, 7, 10, 11]);
    expect(v.rows.filter((r) => r.used_for_host_fit)).toHaveLength(6);
    expect(v.overall_by_composition.no_overlap.n).toBe(6);
    expect(v.overall_by_composition.no_overlap.mape_pct).toBeLessThan(1e-6);
  });

  it('batch=1 cannot separate the per-request term from the per-step constant, and says so', () => {
    const rs = [dec(1, 1000, 30000), dec(1, 2000, 30010), dec(4, 4000, 32000), pre(1, 512, 40000), pre(4, 2048, 50000)];
    const v = validateRows(rowsOf(rs), { chip: 'h100', fitHost: 'batch=1' }, deps());
    expect(v.host_fit!.training_rows.map((t) => t.row)).toEqual([1, 2, 4]);
    expect(v.host_fit!.notes.join(' ')).toMatch(
      /batch=1 rows alone cannot separate the per-request-per-step cost from the per-step constant/,
    );
    const f = v.host_fit!.fits[0]!;
    expect(f.terms.find((t) => t.name === 'per_step_us')!.identified).toBe(true);
    expect(f.terms.find((t) => t.name === 'per_request_step_us')).toMatchObject({ identified: false, value_us: 0 });
    expect(v.overall.n).toBe(2);
  });

  it('recovers a per-step-per-rank cost when the training rows span several tp widths', () => {
    // truth: host = 5,000 µs per step + 1,500 µs per step per tp rank + 200 µs per request per step
    const rs = [] as Array<Record<string, string | number>>;
    for (const tp of [2, 4, 8]) {
      for (const n of [1, 4, 16, 64])
        rs.push(dec(n, 1000 * n, K.c + K.d * 1000 * n + 5000 + 1500 * tp + 200 * n, { tp, group: `dec-tp${tp}` }));
    }
    const v = validateRows(rowsOf(rs), { chip: 'h100', fitHost: 'fraction=0.5' }, deps());
    const f = v.host_fit!.fits.find((x) => x.composition === 'no_overlap')!;
    const term = (n: string) => f.terms.find((t) => t.name === n)!;
    expect(term('per_step_us').value_us).toBeCloseTo(5000, 4);
    expect(term('per_request_step_us').value_us).toBeCloseTo(200, 6);
    expect(term('per_step_tp_gt1_us').identified).toBe(false); // every row has tp > 1
    expect(term('per_step_per_rank_us').value_us).toBeCloseTo(1500, 4);
    expect(v.overall_by_composition.no_overlap.mape_pct).toBeLessThan(1e-6);
  });

  it('a negative least-squares term is constrained to 0', () => {
    const feats = [1, 2, 3].map((n) => ({ steps: 1, request_steps: n, kernel_steps: NaN, tp: 1 }));
    const f = fitHostTerms('e', 'no_overlap', feats, [100, 90, 80], 'fraction', { weighting: 'absolute' });
    expect(f.terms[1]).toMatchObject({ name: 'per_request_step_us', value_us: 0 });
    expect(f.terms[0]!.value_us).toBeCloseTo(90, 9);
  });
});
