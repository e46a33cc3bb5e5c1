/**
 * Known answers from seed ch02 (inside-deepinfer-ch02-where-the-time-goes.txt) §2.1–2.3, printed by
 * labs/05_cost.py. Every number below is the chapter's own.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CHAPTER_PARAMS,
  CHAPTER_SWEEP_R,
  broadcastSpecs,
  crossover,
  ridgeIntensity,
  stepPoint,
  sweep,
} from '../../src/analytics/roofline.ts';
import { parseRooflineConfig } from '../../src/core/schemas/roofline.ts';
import { rooflineCsv, rooflineSvg, rooflineTable } from '../../src/report/roofline.ts';
import { runCli } from '../helpers/cli.ts';

const P = CHAPTER_PARAMS;

describe('step law T(R,N) = h + max(M/W, F/P) (chapter eq. 2.1)', () => {
  it('reproduces the opening sweep: steps and rates at R = N', () => {
    const pts = sweep(
      P,
      CHAPTER_SWEEP_R.map((r) => ({ requests: r, positions: r })),
    );
    // Exact µs, not approximately: times are computed multiply-first.
    expect(pts.map((p) => p.step_us)).toEqual([61, 64, 68, 76, 92, 100, 148, 276]);
    expect(pts.map((p) => p.transfer_us)).toEqual([41, 44, 48, 56, 72, 80, 104, 168]);
    expect(pts.map((p) => p.compute_us)).toEqual([2, 8, 16, 32, 64, 80, 128, 256]);
    expect(pts.map((p) => Math.round(p.useful_tokens_per_s))).toEqual([
      16393, 62500, 117647, 210526, 347826, 400000, 432432, 463768,
    ]);
  });

  it('R = N = 16 moves 5.6 MB in 56 µs and does 32 Mops in 32 µs', () => {
    const p = stepPoint(P, 16, 16);
    expect(p.traffic_bytes).toBe(5_600_000);
    expect(p.ops).toBe(32_000_000);
    expect(p.bound).toBe('memory');
  });

  it('doubling the compute rate at R = N = 16 leaves the step at 76 µs (transfer-bound)', () => {
    expect(stepPoint(P, 16, 16).step_us).toBe(76);
    const fast = stepPoint({ ...P, compute_ops_per_s: 2e12 }, 16, 16);
    expect(fast.compute_us).toBe(16);
    expect(fast.step_us).toBe(76);
  });

  it('four times the context traffic at R = N = 32 takes the step from 92 to 188 µs', () => {
    expect(stepPoint(P, 32, 32).step_us).toBe(92);
    const wide = stepPoint({ ...P, context_scale: 4 }, 32, 32);
    expect(wide.transfer_us).toBe(168);
    expect(wide.step_us).toBe(188);
  });

  it('holding R = 16, N = 16, 28, 96 gives 76, 76, 212 µs with transfer fixed at 56', () => {
    const pts = sweep(P, broadcastSpecs([16], [16, 28, 96], undefined));
    expect(pts.map((p) => p.step_us)).toEqual([76, 76, 212]);
    expect(pts.map((p) => p.transfer_us)).toEqual([56, 56, 56]);
    expect(pts.map((p) => p.compute_us)).toEqual([32, 56, 192]);
  });

  it('useful throughput U/T: U = 24 at N = 32 and U = 28 at N = 64, R = 16 (eq. 2.2)', () => {
    const a = stepPoint(P, 16, 32, 24);
    const b = stepPoint(P, 16, 64, 28);
    expect(a.step_us).toBe(84);
    expect(Math.round(a.useful_tokens_per_s)).toBe(285714);
    expect(b.step_us).toBe(148);
    expect(Math.round(b.useful_tokens_per_s)).toBe(189189);
  });

  it('crossover at R = N = 40 where intensity = P/W = 10 ops/B (80 Mops / 8 MB)', () => {
    expect(ridgeIntensity(P)).toBe(10);
    const c = crossover(P)!;
    expect(c.requests).toBe(40);
    expect(c.positions).toBe(40);
    expect(c.intensity_ops_per_byte).toBe(10);
    expect(c.step_us).toBe(100);
    const at40 = stepPoint(P, 40, 40);
    expect(at40.ops / at40.traffic_bytes).toBe(80_000_000 / 8_000_000);
    // four times the context: transfer grows faster than compute, no crossover along N = R
    expect(crossover({ ...P, context_scale: 4 })).toBeUndefined();
    // six positions per request (verification): compute catches up much sooner
    expect(crossover(P, 6)!.requests).toBeCloseTo(4e6 / (1.2e6 - 1e5), 12);
  });

  it('above the crossover T(R,R) = 20 + 2R and the rate approaches 500,000 tokens/s', () => {
    for (const r of [41, 100, 1000]) expect(stepPoint(P, r, r).step_us).toBeCloseTo(20 + 2 * r, 9);
    expect(stepPoint(P, 1e6, 1e6).useful_tokens_per_s).toBeLessThan(500_000);
    expect(stepPoint(P, 1e6, 1e6).useful_tokens_per_s).toBeGreaterThan(499_990);
  });

  it('properties: T ≥ h + each term; T non-decreasing in R and in N; on a tie the bound is memory', () => {
    fc.assert(
      fc.property(fc.nat(5000), fc.nat(5000), fc.nat(100), fc.nat(100), (r, n, dr, dn) => {
        const a = stepPoint(P, r, n);
        const b = stepPoint(P, r + dr, n + dn);
        return (
          a.step_us >= P.overhead_us + a.transfer_us &&
          a.step_us >= P.overhead_us + a.compute_us &&
          b.step_us >= a.step_us &&
          (a.bound === 'compute') === a.compute_us > a.transfer_us
        );
      }),
    );
  });

  it('rejects negative counts and lists that cannot be paired', () => {
    expect(() => stepPoint(P, -1, 1)).toThrow(/requests/);
    expect(() => broadcastSpecs([1, 2], [1, 2, 3], undefined)).toThrow(
      /positions has 3 values; expected 1 or 3|requests has 2 values/,
    );
  });
});

describe('roofline presentation', () => {
  it('prints what the chapter prints: one decimal µs, integer tokens/s', () => {
    const t = rooflineTable(
      sweep(P, [
        { requests: 1, positions: 1 },
        { requests: 128, positions: 128 },
      ]),
    );
    expect(t).toMatch(/\b1\s+1\s+1\s+41\.0\s+2\.0\s+61\.0\s+16393\b/);
    expect(t).toMatch(/\b128\s+128\s+128\s+168\.0\s+256\.0\s+276\.0\s+463768\b/);
    expect(t.split('\n')[0]).toMatch(/\(µs\).*\(tokens\/s\)/);
  });

  it('CSV has one row per point with unit-suffixed columns; SVG holds both panels', () => {
    const pts = sweep(
      P,
      CHAPTER_SWEEP_R.map((r) => ({ requests: r, positions: r })),
    );
    const csv = rooflineCsv(pts).trim().split('\n');
    expect(csv[0]).toBe(
      'requests,positions,useful_tokens,traffic_bytes,ops,transfer_us,compute_us,step_us,bound,intensity_ops_per_byte,useful_tokens_per_s',
    );
    expect(csv).toHaveLength(9);
    expect(csv[4]!.split(',').slice(0, 9)).toEqual([
      '16',
      '16',
      '16',
      '5600000',
      '32000000',
      '56',
      '32',
      '76',
      'memory',
    ]);
    const svg = rooflineSvg(pts, 't');
    expect(svg).toContain('transfer M/W (µs)');
    expect(svg).toContain('useful U/T (tokens/s)');
    expect(svg).toContain('id="plot0"');
    expect(svg).toContain('id="plot1"');
    expect(svg).not.toContain('id="plot"');
  });

  it('YAML config errors name the file and field', () => {
    expect(parseRooflineConfig('shared_bytes: 1\nrequests: [1, 2]\n', 'p.yaml')).toEqual({
      shared_bytes: 1,
      requests: [1, 2],
    });
    expect(() => parseRooflineConfig('bandwidth: 1\n', 'p.yaml')).toThrow(/p\.yaml.*bandwidth/);
    expect(() => parseRooflineConfig('mem_bytes_per_s: 0\n', 'p.yaml')).toThrow(/p\.yaml: field "mem_bytes_per_s"/);
  });
});

describe('stepcal roofline (CLI)', () => {
  it('prints the sweep and writes CSV + SVG; flags override the YAML file', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'roofline-'));
    const cfg = path.join(dir, 'p.yaml');
    writeFileSync(cfg, 'compute_ops_per_s: 2.0e12\nrequests: 16\n');
    const r = await runCli(['roofline', '--config', cfg, '--out-dir', dir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\b16\s+16\s+16\s+56\.0\s+16\.0\s+76\.0\s+210526\b/);
    expect(readFileSync(path.join(dir, 'roofline.csv'), 'utf8').trim().split('\n')).toHaveLength(2);
    expect(readFileSync(path.join(dir, 'roofline.svg'), 'utf8')).toMatch(/^<svg/);
    const j = await runCli(['roofline', '--requests', '32', '--context-scale', '4', '--no-files', '--json']);
    const out = JSON.parse(j.stdout);
    expect(out.points[0].step_us).toBe(188);
    expect(out.crossover).toBeNull();
  });

  it('a bad flag value is a usage error (exit 2); a bad YAML field is a user error (exit 1)', async () => {
    expect((await runCli(['roofline', '--requests', 'x', '--no-files'])).code).toBe(2);
    const dir = mkdtempSync(path.join(tmpdir(), 'roofline-'));
    const cfg = path.join(dir, 'bad.yaml');
    writeFileSync(cfg, 'overhead: 20\n');
    const r = await runCli(['roofline', '--config', cfg, '--no-files']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bad.yaml');
  });
});
