import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { UserError } from '../../src/core/errors.ts';
import { BLIS_HOST_ASSUMED, fitHost, fitHostLinear, tQuantile975 } from '../../src/fit/host.ts';
import type { HostRow } from '../../src/measurements/schema.ts';
import type { FitContext } from '../../src/fit/types.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { hostSection } from '../../src/report/fit-host.ts';

const ctx: FitContext = {
  chip: loadChip('h200'),
  inputs: [{ file: 'measurements/h200/host.bench-1.csv.gz', sha256: 'd'.repeat(64), lane: 'bench-1' }],
  bootstrap: { resamples: 200, seed: 1 },
  prior: new Map(),
};

/**
 * Published small table (issue 3): graph replay ≈ 15 µs fixed + 0.58 µs per node; eager ≈ 6.4 µs per
 * launch; at N = 64, 411.7 µs eager vs 49.1 µs graph. The eager intercept implied by 411.7 − 64·6.4 = 2.1 µs.
 */
const N = [1, 2, 4, 8, 16, 32, 64, 128];
const graph = (n: number) => 15 + 0.58 * n;
const eager = (n: number) => 2.1 + 6.4 * n;

function rowsFrom(noise: number, seed: number, repeats: number): HostRow[] {
  const rand = seededRandom(seed);
  const rows: HostRow[] = [];
  for (const n of N)
    for (let r = 0; r < repeats; r++) {
      const f = () => 1 + noise * (2 * rand() - 1);
      rows.push({
        chip: 'h200',
        lane: 'bench-1',
        kernel_source: '',
        what: 'graph_replay',
        kernels: n,
        latency_us: graph(n) * f(),
      });
      rows.push({
        chip: 'h200',
        lane: 'bench-1',
        kernel_source: '',
        what: 'eager_launch',
        kernels: n,
        latency_us: eager(n) * f(),
      });
    }
  return rows;
}

describe('fitHostLinear', () => {
  it('recovers the published table exactly and reproduces its N = 64 figures', () => {
    const g = fitHostLinear(N.map((n) => ({ kernels: n, latency_us: graph(n) })));
    expect(g.a_us).toBeCloseTo(15, 9);
    expect(g.b_us_per_kernel).toBeCloseTo(0.58, 9);
    expect(g.n).toBe(8);
    expect(g.residual_geo).toBeCloseTo(1, 9);
    const e = fitHostLinear(N.map((n) => ({ kernels: n, latency_us: eager(n) })));
    expect(e.b_us_per_kernel).toBeCloseTo(6.4, 9);
    expect(e.a_us + 64 * e.b_us_per_kernel).toBeCloseTo(411.7, 6);
    // The published 49.1 µs graph figure sits 6% under 15 + 0.58·64 = 52.1 ("about" in the source).
    expect(Math.abs((g.a_us + 64 * g.b_us_per_kernel) / 49.1 - 1)).toBeLessThan(0.07);
    expect(e.a_us + 64 * e.b_us_per_kernel).toBeGreaterThan(7 * (g.a_us + 64 * g.b_us_per_kernel)); // eager ≫ graph at 64 kernels
  });

  it('weighted fit and ci95 by hand for three points', () => {
    // Points (1,2), (2,4), (3,5), weights 1/y² = 1/4, 1/16, 1/25:
    // Sw = 0.3525, Swx = 0.495, Swxx = 0.86, Swy = 0.95, Swxy = 1.6, det = 0.3525·0.86 − 0.495² = 0.058125
    // b = (0.3525·1.6 − 0.495·0.95)/det = 0.09375/0.058125; a = (0.95 − 0.495·b)/0.3525.
    const f = fitHostLinear([
      { kernels: 1, latency_us: 2 },
      { kernels: 2, latency_us: 4 },
      { kernels: 3, latency_us: 5 },
    ]);
    const b = 0.09375 / 0.058125;
    const a = (0.95 - 0.495 * b) / 0.3525;
    expect(f.b_us_per_kernel).toBeCloseTo(b, 12);
    expect(f.a_us).toBeCloseTo(a, 12);
    // s² = Σ w r² / (n − 2); SE(b) = sqrt(s²·Sw/det); SE(a) = sqrt(s²·Swxx/det); t(0.975, 1) = 12.706.
    const r = [2 - (a + b), 4 - (a + 2 * b), 5 - (a + 3 * b)];
    const s2 = r[0]! ** 2 / 4 + r[1]! ** 2 / 16 + r[2]! ** 2 / 25;
    expect(f.ci95_b[1] - b).toBeCloseTo(12.706 * Math.sqrt((s2 * 0.3525) / 0.058125), 9);
    expect(f.ci95_a[1] - a).toBeCloseTo(12.706 * Math.sqrt((s2 * 0.86) / 0.058125), 9);
  });

  it('symmetric ±20% noise on repeats does not bias the fit (9 repeats, median-reduced, 20 seeds)', () => {
    const gb: number[] = [];
    const ga: number[] = [];
    const eb: number[] = [];
    for (let seed = 1; seed <= 20; seed++) {
      const rows = rowsFrom(0.2, seed, 9);
      const g = fitHostLinear(rows.filter((r) => r.what === 'graph_replay'));
      const e = fitHostLinear(rows.filter((r) => r.what === 'eager_launch'));
      gb.push(g.b_us_per_kernel);
      ga.push(g.a_us);
      eb.push(e.b_us_per_kernel);
      expect(g.ci95_b[0]).toBeLessThanOrEqual(g.b_us_per_kernel);
      expect(g.ci95_b[1]).toBeGreaterThanOrEqual(g.b_us_per_kernel);
    }
    const avg = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.abs(avg(gb) / 0.58 - 1)).toBeLessThan(0.02);
    expect(Math.abs(avg(ga) / 15 - 1)).toBeLessThan(0.03);
    expect(Math.abs(avg(eb) / 6.4 - 1)).toBeLessThan(0.02);
  });

  it('throws UserError on a negative intercept and on fewer than 2 distinct N', () => {
    expect(() =>
      fitHostLinear([
        { kernels: 10, latency_us: 5 },
        { kernels: 20, latency_us: 15 },
      ]),
    ).toThrow(/negative intercept/);
    expect(() =>
      fitHostLinear([
        { kernels: 10, latency_us: 5 },
        { kernels: 10, latency_us: 6 },
      ]),
    ).toThrow(UserError);
    expect(() =>
      fitHostLinear([
        { kernels: 10, latency_us: 5 },
        { kernels: 10, latency_us: 6 },
      ]),
    ).toThrow(/2 distinct N/);
    expect(() =>
      fitHostLinear([
        { kernels: 0, latency_us: 5 },
        { kernels: 1, latency_us: 6 },
      ]),
    ).toThrow(/kernels/);
  });

  it('recovers any non-negative line exactly (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 100, noNaN: true }),
        fc.double({ min: 0.01, max: 20, noNaN: true }),
        (a, b) => {
          const f = fitHostLinear(N.map((n) => ({ kernels: n, latency_us: a + b * n })));
          return Math.abs(f.a_us - a) < 1e-6 * (1 + a) && Math.abs(f.b_us_per_kernel - b) < 1e-6 * (1 + b);
        },
      ),
      { numRuns: 100 },
    );
  });

  it('t quantiles: table and large-dof expansion', () => {
    expect(tQuantile975(1)).toBe(12.706);
    expect(tQuantile975(30)).toBe(2.042);
    expect(tQuantile975(120)).toBeCloseTo(1.98, 2);
    expect(tQuantile975(1e6)).toBeCloseTo(1.96, 3);
  });
});

describe('fitHost', () => {
  it('with host rows: fitted launch and replay entries replace the assumed ones', () => {
    const r = fitHost(rowsFrom(0.05, 3, 5), ctx);
    expect(r.refusals).toEqual([]);
    const by = new Map(r.coefficients.map((c) => [c.name, c.entry]));
    const lk = by.get('host_launch_per_kernel')!;
    expect(lk).toMatchObject({
      method: 'measured',
      fitted: true,
      units: 'us_per_transfer',
      scope: { hardware: ['h200'] },
    });
    expect(Math.abs(lk.value / 6.4 - 1)).toBeLessThan(0.05);
    const rs = by.get('host_replay_graph_per_step')!;
    expect(rs.units).toBe('us_per_step');
    expect(Math.abs(rs.value / 15 - 1)).toBeLessThan(0.1);
    const rn = by.get('host_replay_graph_per_node')!;
    expect(Math.abs(rn.value / 0.58 - 1)).toBeLessThan(0.1);
    expect(rn.evidence?.ci_method).toBe('lm_covariance');
    expect(rn.evidence?.holdout_error?.split).toContain('largest N (128)');
    expect(rn.evidence?.inputs?.[0]).toMatchObject({ file: 'measurements/h200/host.bench-1.csv.gz', rows_used: 40 });
    // Terms without rows stay assumed.
    expect(by.get('host_launch_eager_per_layer')).toMatchObject({ value: 7, method: 'assumed', fitted: false });
    for (const c of r.coefficients) {
      expect(c.set).toBe('cost-model-host-overheads');
      if (c.entry.ci95) {
        expect(c.entry.ci95[0]).toBeLessThanOrEqual(c.entry.value);
        expect(c.entry.ci95[1]).toBeGreaterThanOrEqual(c.entry.value);
      }
    }
    expect(hostSection(r, ctx.chip).figures).toHaveLength(1);
  });

  it('without host rows: carries the BLIS assumed values, never fitted', () => {
    const r = fitHost([], ctx);
    expect(r.refusals).toEqual([]);
    expect(r.coefficients.map((c) => [c.name, c.entry.value, c.entry.units])).toEqual([
      ['host_admission_per_request', 40000, 'us_per_request'],
      ['host_admission_per_token', 0.35, 'us_per_token'],
      ['host_output_token', 45.9, 'us_per_token'],
      ['host_completion', 777.3, 'us_per_request'],
      ['host_launch_eager_per_layer', 7, 'us_per_layer'],
      ['host_replay_graph_per_step', 7, 'us_per_step'],
      ['host_launch_per_kernel', 3.2, 'us_per_transfer'],
    ]);
    for (const c of r.coefficients) {
      expect(c.set).toBe('cost-model-host-overheads');
      expect(c.entry).toMatchObject({ method: 'assumed', fitted: false, scope: { hardware: ['h200'] } });
      expect(c.entry.rationale!.length).toBeGreaterThan(300);
      expect(c.entry.rationale).toContain('stepcal validate --fit-host');
      expect(c.entry.sources?.[0]?.cite).toContain('b4d8e2b8');
    }
    expect(r.coefficients.filter((c) => c.entry.ci95).map((c) => c.name)).toEqual(['host_launch_per_kernel']);
    expect(r.coefficients.find((c) => c.name === 'host_launch_per_kernel')!.entry.ci95).toEqual([3.1, 3.3]);
    expect(hostSection(r, ctx.chip).figures).toEqual([]);
    expect(BLIS_HOST_ASSUMED).toHaveLength(7);
  });

  it('a negative intercept becomes a refusal naming the kind', () => {
    const rows: HostRow[] = [
      { chip: 'h200', lane: 'bench-1', kernel_source: '', what: 'graph_replay', kernels: 10, latency_us: 5 },
      { chip: 'h200', lane: 'bench-1', kernel_source: '', what: 'graph_replay', kernels: 20, latency_us: 15 },
    ];
    const r = fitHost(rows, ctx);
    expect(r.refusals).toHaveLength(1);
    expect(r.refusals[0]).toMatch(/host graph_replay on h200: .*negative intercept/);
  });
});
