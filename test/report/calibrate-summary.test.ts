/**
 * calibrate's one-screen summary: ≤ 100 columns, ≤ 50 lines, warnings counted (printed once on stderr by
 * the command), extrapolated collective widths labelled as such.
 */
import { describe, expect, it } from 'vitest';
import { validateWithProgress } from '../../src/validate/calibrate.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import {
  calibrateSummaryLines,
  calibrateWarnings,
  coefficientTable,
  collectiveTextTable,
  lawLines,
  sig3,
  wrapLine,
  type CalibrateOutcome,
} from '../../src/report/calibrate-summary.ts';

const REG = 'test/fixtures/registry/blis-h100.yaml';
const STEPS = 'measurements/h100/splitwise.steps.csv';
const MOE =
  'moe: refused on a100: no balanced-routing rows in 6360 MoE rows (lanes vllm-0.14.0), so the imbalance cannot be formed';

/** The fixture registry with its 2/4/8-rank collectives measured and 16-rank widths extrapolated (method assumed). */
function sets(): CoefficientSet[] {
  const s = loadRegistryFile(REG);
  for (const set of s)
    for (const c of set.coefficients) {
      if (!c.name.startsWith('collective_')) continue;
      if (/_16rank_/.test(c.name)) {
        c.entry.method = 'assumed';
        c.entry.evidence = {
          family: 'collective',
          extrapolation: { predictor: 'floor_linear_in_ranks', from: ['h100:2rank', 'h100:4rank', 'h100:8rank'] },
        };
      } else c.entry.method = 'measured';
    }
  return s;
}

function outcome(): CalibrateOutcome {
  const base = { chip: 'h100', registryFile: REG, stepFiles: [STEPS] };
  return {
    chip: 'h100',
    checks: [
      {
        file: 'measurements/h100/gemm.vllm-0.24.0.csv.gz',
        family: 'gemm',
        lane: 'vllm-0.24.0',
        rows: 107188,
        status: 'ok',
      },
      {
        file: 'measurements/h100/attention_decode.vllm-0.24.0.csv.gz',
        family: 'attention_decode',
        lane: 'vllm-0.24.0',
        rows: 62166,
        status: 'ok',
      },
      { file: STEPS, family: 'step (held-out)', lane: 'splitwise', rows: 456, status: 'ok' },
    ],
    sets: sets(),
    fit_refusals: [],
    fit_warnings: [MOE, 'attention_decode: no sliding-window rows; no _swa pair', MOE],
    registry_file: 'registry/h100.yaml',
    validation: validateWithProgress({ ...base, fitHost: 'fraction=0.25', engineSm: 'auto', flags: [] }),
    validation_registry_host: validateWithProgress({ ...base, flags: [] }),
    report_files: ['fits/h100/report.md', 'fits/h100/report.html'],
  };
}

describe('calibrate one-screen summary', () => {
  const o = outcome();
  const lines = calibrateSummaryLines(o);

  it('fits 100 columns and about one screen', () => {
    const wide = lines.filter((l) => l.length > 100);
    expect(wide).toEqual([]);
    expect(lines.length).toBeLessThanOrEqual(50);
    expect(lines.length).toBeGreaterThan(20); // coefficients and held-out accuracy are both there
    expect(lines.some((l) => /^ {2}prefill +\d+ +\d+\.\d/.test(l))).toBe(true);
  });

  it('warnings: each once, for stderr; the summary only counts them', () => {
    expect(calibrateWarnings(o)).toEqual([
      MOE,
      'attention_decode: no sliding-window rows; no _swa pair',
      ...o.validation!.warnings.filter((w) => w !== MOE),
    ]);
    expect(lines.filter((l) => l.includes('refused on a100'))).toEqual([]);
    expect(lines).toContain(
      `${calibrateWarnings(o).length} warning(s): printed once each on stderr, and in the report`,
    );
  });

  it('extrapolated collective widths are labelled (method assumed), never "registry"', () => {
    const t = collectiveTextTable(o.sets);
    expect(t.rows.map((r) => r.slice(0, 2))).toContainEqual(['all_reduce fp16', '2/4/8 +16 extrap.']);
    for (const r of t.rows) expect(r[4]).toBe('assumed+measured');
    // peak rates in GB/s (bytes/µs ÷ 1000): all values are link-scale rates
    for (const r of t.rows) for (const x of r[3]!.split('–')) expect(Number(x)).toBeGreaterThan(10);
    const full = coefficientTable(o.sets);
    const ar = full.rows.find((r) => r[0]!.startsWith('collective all_reduce fp16'))!;
    expect(ar[0]).toBe('collective all_reduce fp16 ×2/4/8 +16 extrapolated (method assumed)');
    expect(ar[7]).toBe('assumed + measured');
    expect(full.rows.some((r) => r[7] === 'registry')).toBe(false);
    expect(lines.join('\n')).not.toMatch(/\bregistry\s*$/m);
  });

  it('3 significant digits, no exponent "+"', () => {
    expect(sig3(0.95841)).toBe('0.958');
    expect(sig3(1.0943)).toBe('1.09');
    expect(sig3(1_601_000)).toBe('1.60e6');
    expect(sig3(40000)).toBe('40000');
    expect(sig3(6.74e-6)).toBe('6.74e-6');
  });

  it('one line per fitted law: shared name parts as the label, the rest of each name, lone entries with ci95', () => {
    const ev = (geo: number) => ({
      family: 'moe_experts',
      inputs: [{ file: 'm.csv.gz', filter: 'dtype fp8', rows_used: 9 }],
      train_error: { geo, mape_pct: 1, n: 9 },
      holdout_error: { geo: 1.3, mape_pct: 1, n: 3 },
    });
    const entry = (value: number, units: string, geo: number, method = 'measured') =>
      ({ value, units, method, scope: {}, sources: [], ci95: [value / 2, value * 2], evidence: ev(geo) }) as never;
    const set = {
      name: 's',
      coefficients: [
        { name: 'moe_expert_floor_fp8', entry: entry(37.61, 'us_per_layer', 1.25) },
        { name: 'moe_expert_eps_max_fp8', entry: entry(0.2561, 'dimensionless', 1.25) },
        { name: 'moe_expert_route_rate_fp8', entry: entry(5.14e6, 'bytes_per_us', 1.25, 'not_charged') },
        { name: 'hbm_derate', entry: entry(0.858, 'dimensionless', 1.05) },
      ],
    } as unknown as CoefficientSet;
    expect(lawLines([set])).toEqual([
      '  moe_expert_*_fp8 (n 9, geo× 1.25/1.3): floor 37.6 µs/layer, eps_max 0.256, route_rate 5.14e6 B/µs (not_charged)',
      '  hbm_derate (n 9, geo× 1.05/1.3): 0.858 [0.429, 1.72]',
    ]);
  });

  it('the shipped h200 registry: every entry on exactly one law line, each ≤ 100 columns once wrapped', () => {
    const h200 = loadRegistryFile('registry/h200.yaml');
    const laws = lawLines(h200);
    const wrapped = laws.flatMap((l) => wrapLine(l));
    expect(Math.max(...wrapped.map((l) => l.length))).toBeLessThanOrEqual(100);
    const names = h200
      .flatMap((x) => x.coefficients.map((c) => c.name))
      .filter((n) => !/^(collective_|gemm_|host_)/.test(n));
    // moe_expert_floor_fp8 is on the fp8 law's line as "floor", and on no other line
    expect(laws.filter((l) => l.startsWith('  moe_expert_*_fp8 ') && / floor [0-9.]+ µs\/layer/.test(l))).toHaveLength(
      1,
    );
    expect(laws.length).toBeLessThan(names.length / 2); // entries fitted together share a line
    // items are ", "-separated outside a lone entry's "[lo, hi]"
    const items = laws.reduce((a, l) => a + l.slice(l.indexOf('): ') + 3).split(/, (?![^[]*\])/).length, 0);
    expect(items).toBe(names.length);
  });

  it('wrapLine breaks after ", " / "; " so "7 µs/step" stays whole, and indents continuations', () => {
    const line = `  host (assumed): ${Array.from({ length: 12 }, (_, i) => `term_${i} 7 µs/step`).join(', ')}`;
    const w = wrapLine(line, 60);
    expect(w.length).toBeGreaterThan(2);
    for (const l of w) expect(l.length).toBeLessThanOrEqual(60);
    for (const l of w.slice(1)) expect(l.startsWith('    term_')).toBe(true);
    expect(w.join(' ').replace(/\s+/g, ' ').trim()).toBe(line.trim());
    expect(wrapLine('short')).toEqual(['short']);
  });
});
