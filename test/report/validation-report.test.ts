import { describe, expect, it } from 'vitest';
import {
  compositionTable,
  extrapolationTable,
  goalVerdict,
  regimeTable,
  rowTable,
  uniquifyIds,
  validationCharts,
  validationHtml,
  validationMarkdown,
} from '../../src/report/validation.ts';
import { markdownTable } from '../../src/core/render/table.ts';
import { accuracyMarkdown } from '../../src/report/summary.ts';
import { largeStepFactorText } from '../../src/report/tiers.ts';
import { validateRows } from '../../src/validate/run.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';
import type { ValidationResult } from '../../src/validate/types.ts';
import { BASE, fakePricer, stepsCsv } from '../validate/fake-pricer.ts';

const K = { a: 1000, b: 2, c: 500, d: 0.01, h: 50, overlap_factor: 0.8, cm_factor: 0.9 };
const GEMM_NOTE =
  'GEMM ramp below its fitted m range: the bf16 ramp at fewer than 153 tokens per step (gemm_m_half_bf16 evidence: fitted on compute-bound rows, m ≥ 153)';
function cancelling(): ValidationResult {
  const rs: Array<Record<string, string | number>> = [];
  for (let i = 1; i <= 9; i++) {
    rs.push({
      ...BASE,
      kind: 'step',
      prefill_requests: 0,
      prefill_tokens: 0,
      decode_requests: i,
      decode_context_tokens: 1000 * i,
      measured_us: (K.c + K.d * 1000 * i + K.h) / 0.98,
      group: 'dec',
    });
  }
  rs.push({
    ...BASE,
    kind: 'step',
    prefill_requests: 1,
    prefill_tokens: 500,
    decode_requests: 0,
    decode_context_tokens: 0,
    measured_us: (K.a + K.b * 500 + K.h) / 1.6,
    group: 'pre',
  });
  rs.push({
    ...BASE,
    kind: 'static_batch',
    batch: 2,
    prompt_tokens: 10,
    output_tokens: 5,
    measured_us: 4000,
    flags: 'stopped_early',
  });
  const rows = parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
  const core = validateRows(
    rows,
    { chip: 'h100', composition: 'no_overlap' },
    { pricerFor: () => fakePricer({ ...K, decode_notes: [GEMM_NOTE] }) },
  );
  return {
    ...core,
    pinned: {
      registry_sha256: 'abc',
      stepcal_version: '0.1.0',
      flags: ['--chip h100'],
      inputs: [{ file: 't.steps.csv', sha256: 'def' }],
    },
  };
}

describe('accuracy report', () => {
  const v = cancelling();
  const md = validationMarkdown('h100', v);
  it('shows the regime that pooled figures hide (cancelling errors)', () => {
    const t = regimeTable(v, 'no_overlap');
    const pre = t.rows.find((r) => r[0] === 'prefill')!;
    const pooled = t.rows.find((r) => r[0]!.startsWith('pooled'))!;
    expect(pre[2]).toBe('60.0'); // MAPE %
    expect(pre[5]).toBe('60.0'); // bias %
    expect(pooled[2]).toBe('7.8');
    expect(md).toContain('| prefill | 1 | 60.0 | 60.0 | 60.0 | 60.0 |');
    expect(md).toMatch(/p90 short by 35\.0 pp/);
  });
  it('every column header carries a unit or is a label', () => {
    const header = regimeTable(v, 'no_overlap').header;
    for (const h of header.slice(1, 9)) expect(h).toMatch(/\((%|rows|×|points)\)/);
  });
  it('flagged static rows are priced but not scored, and listed', () => {
    expect(v.rows.find((r) => r.kind === 'static_batch')!.excluded).toBe('stopped_early');
    expect(v.regimes.static_batch).toBeNull();
    expect(md).toContain('excluded: stopped_early');
    expect(md).toContain('| stopped_early | static_batch | 1 |');
  });
  it('pins the evaluation and states the percentile convention', () => {
    expect(md).toContain('registry sha256: abc');
    expect(md).toContain('input: t.steps.csv sha256 def');
    expect(md).toMatch(/nearest-rank/);
  });
  it('HTML is self-contained with every chart inline and unique ids', () => {
    const html = validationHtml('h100', v, {
      fitFigures: [{ name: 'gemm-bf16.svg', svg: '<svg><clipPath id="plot"/><g clip-path="url(#plot)"/></svg>' }],
    });
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)|<link|<img/);
    const charts = validationCharts(v);
    expect(charts.map((c) => c.name)).toEqual([
      'validation-pred-vs-meas.svg',
      'validation-ape-cdf.svg',
      'validation-error-vs-batch-decode.svg',
      'validation-resources.svg',
    ]);
    expect((html.match(/<svg /g) ?? []).length).toBe(charts.length);
    expect(html).toContain('<clipPath id="f0-plot"/><g clip-path="url(#f0-plot)"/>');
    const ids = [...html.matchAll(/ id="([^"]+)"/g)].map((m) => m[1]);
    expect(new Set(ids).size).toBe(ids.length);
  });
  it('three compositions side by side per regime, with units, and the headline rule stated', () => {
    const t = compositionTable(v);
    expect(t.header).toEqual([
      'regime',
      'n (rows)',
      'NoOverlap MAPE (%)',
      'CMOverlap MAPE (%)',
      'Overlap MAPE (%)',
      'NoOverlap median APE (%)',
      'CMOverlap median APE (%)',
      'Overlap median APE (%)',
      'NoOverlap p90 APE (%)',
      'CMOverlap p90 APE (%)',
      'Overlap p90 APE (%)',
      'NoOverlap bias (%)',
      'CMOverlap bias (%)',
      'Overlap bias (%)',
      'lowest MAPE',
    ]);
    // decode: measured = NoOverlap / 0.98; CMOverlap = 0.9 · work + 50, Overlap = 0.8 · work + 50 (work = 500 + 10·i)
    const decode = t.rows.find((r) => r[0] === 'decode')!;
    expect(decode[1]).toBe('9');
    expect(decode[2]).toBe('2.0');
    expect(decode[14]).toBe('NoOverlap');
    expect(md).toContain('### The three compositions side by side (held-out)');
    expect(md).toMatch(
      /Headline composition: the one of NoOverlap, CMOverlap and Overlap with the lowest held-out pooled MAPE \(ties → the earlier in that order/,
    );
    expect(validationCharts(v).find((c) => c.name === 'validation-ape-cdf.svg')!.svg).toContain('decode CMOverlap');
  });
  it('counts rows per extrapolation reason instead of marking rows "extrapolated"', () => {
    const t = extrapolationTable(v)!;
    expect(t.header).toEqual(['#', 'reason', 'rows (all priced)', 'scored rows', 'scored decode (rows)']);
    // 9 decode rows + the flag-excluded static batch (its decode steps carry the note)
    expect(t.rows).toEqual([
      ['1', 'GEMM ramp below its fitted m range: the bf16 ramp at fewer than 153 tokens per step', '10', '9', '9'],
    ]);
    const rows = rowTable(v);
    expect(rows.rows.every((r) => !r.some((c) => c.includes('extrapolated')))).toBe(true);
    const iExt = rows.header.indexOf('extrapolation (reason #)');
    expect(rows.rows.filter((r) => r[iExt] === '1')).toHaveLength(10);
    expect(md).toContain('### Extrapolated rows by reason');
    expect(md).toMatch(/11 rows priced, 10 scored; 1 scored rows priced with no term outside its fitted domain/);
    const acc = accuracyMarkdown(v, 'stepcal validate --chip h100');
    expect(acc).toContain(
      '| 1 | GEMM ramp below its fitted m range: the bf16 ramp at fewer than 153 tokens per step | 10 | 9 | 9 |',
    );
    expect(acc).toContain('| regime | n (rows) | NoOverlap MAPE (%) | CMOverlap MAPE (%) | Overlap MAPE (%) |');
  });
  it('goal verdicts and markdown tables', () => {
    expect(goalVerdict({ n: 1, mape_pct: 5, median_ape_pct: 9, p90_ape_pct: 25, bias_pct: 0, geo_mean_ratio: 1 })).toBe(
      'met',
    );
    expect(
      goalVerdict({ n: 1, mape_pct: 5, median_ape_pct: 12.5, p90_ape_pct: 20, bias_pct: 0, geo_mean_ratio: 1 }),
    ).toBe('median short by 2.5 pp');
    expect(markdownTable({ header: ['a (µs)'], rows: [['x|y']] })).toBe('| a (µs) |\n|---|\n| x\\|y |\n');
    expect(uniquifyIds('<g id="a"/><use href="#a"/>', 'p')).toBe('<g id="p-a"/><use href="#p-a"/>');
  });
});

describe('engine compute-efficiency term in the report', () => {
  // truth: prefill SM runs 1.5× slower than priced, host = 2000 µs per step
  const rs: Array<Record<string, string | number>> = [];
  for (const n of [1, 2, 4, 8, 16, 32]) {
    rs.push({
      ...BASE,
      kind: 'step',
      prefill_requests: n,
      prefill_tokens: 256 * n,
      decode_requests: 0,
      decode_context_tokens: 0,
      measured_us: 1.5 * (K.a + K.b * 256 * n) + 2000,
      group: 'pre',
    });
    rs.push({
      ...BASE,
      kind: 'step',
      prefill_requests: 0,
      prefill_tokens: 0,
      decode_requests: n,
      decode_context_tokens: 500 * n,
      measured_us: K.c + K.d * 500 * n + 2000,
      group: 'dec',
    });
  }
  const rows = parseStepsCsv(stepsCsv(rs), 't.steps.csv').rows;
  const core = validateRows(
    rows,
    { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto', composition: 'no_overlap' },
    { pricerFor: () => fakePricer(K) },
  );
  const v: ValidationResult = {
    ...core,
    pinned: {
      registry_sha256: 'abc',
      stepcal_version: '0.1.0',
      flags: ['--chip h100', '--fit-host fraction=0.5', '--engine-sm auto'],
      inputs: [{ file: 't.steps.csv', sha256: 'def' }],
    },
  };
  it('shows both variants per regime, the fitted s and why the headline uses it', () => {
    const md = validationMarkdown('h100', v);
    expect(md).toContain('### NoOverlap without vs with the engine compute-efficiency term s (held-out)');
    expect(md).toMatch(/e s = 1\.500\. Headline NoOverlap uses s — with s: mean over regimes/);
    // the prefill line: 3 held-out rows, with s every error is 0.0 (the bias is 0 up to rounding
    // noise of the least squares, ~1e-13 %, so it may print with either sign)
    expect(md).toMatch(
      /\| prefill \| 3 \| [0-9.]+ \| 0\.0 \| [0-9.]+ \| 0\.0 \| [0-9.]+ \| 0\.0 \| -[0-9.]+ \| -?0\.0 \| met \|/,
    );
    expect(validationHtml('h100', v)).toContain('engine compute-efficiency term s (held-out)</h3>');
  });
  it('with a pricer that honours sm_scale, CMOverlap gets its own s section (bounded search)', () => {
    const core2 = validateRows(
      rows,
      { chip: 'h100', fitHost: 'fraction=0.5', engineSm: 'auto' },
      { pricerFor: (_k, o) => fakePricer(K, o?.sm_scale ?? 1) },
    );
    const v2: ValidationResult = { ...core2, pinned: v.pinned };
    const md = validationMarkdown('h100', v2);
    expect(md).toContain('### CMOverlap without vs with the engine compute-efficiency term s (held-out)');
    expect(md).toMatch(
      /CMOverlap: measured = Σ_layers \(max\(s · T_SM, T_HBM\) \+ T_NVLink \+ T_NIC \+ experts\) \+ head \+ host, s by a bounded 1-D search in \[0\.25, 4\]/,
    );
    // truth SM 1.5× and CMOverlap = 0.9 · work: the search lands where 0.9 · s = 1.5 on prefill, i.e. s ≈ 1.667
    expect(core2.engine_sm_cm_overlap!.scales[0]!.value).toBeCloseTo(1.5 / 0.9, 1);
  });
});

describe('large-step factor label', () => {
  it('is dimensionless (× NVLink) and carries its threshold in MiB', () => {
    // 67108864 B = 64 × 1024 × 1024 B = 64 MiB
    expect(largeStepFactorText(2.5, 67108864)).toBe('2.50× NVLink at ≥ 64 MiB');
    expect(largeStepFactorText(2.717, undefined)).toBe('2.72× NVLink at ≥ ?');
  });
});
