/**
 * Request-level validation (issue 18 §5): the Splitwise static batches score the same through serve
 * as through the static-batch path; the CSV format and its errors; `stepcal validate --requests`.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { validateRows } from '../../src/validate/run.ts';
import { defaultValidationDeps } from '../../src/validate/pricing.ts';
import { parseRequestsCsv, requestRowsFromStaticBatches, validateRequestRows } from '../../src/validate/requests.ts';
import { readStepsFile } from '../../src/validate/steps.ts';
import { runCli as cli } from '../helpers/cli.ts';

const REGISTRY = loadRegistryFile('registry/h100.yaml');
const SPLIT = 'measurements/h100/splitwise.steps.csv';

describe('request-level validation', () => {
  it('the Splitwise static batches score the same through serve as through the static-batch path (CMOverlap, registry host terms)', () => {
    const rows = readStepsFile(SPLIT).rows.map((r) => ({ ...r, file: SPLIT }));
    const stat = validateRows(rows, { chip: 'h100' }, defaultValidationDeps(REGISTRY));
    const viaServe = validateRequestRows(requestRowsFromStaticBatches(rows), { chip: 'h100', registry: REGISTRY });
    const a = stat.regimes_by_composition.cm_overlap.static_batch!;
    const b = viaServe.metrics.e2e_mean_us!;
    expect(b.n).toBe(a.n);
    expect(a.n).toBeGreaterThan(40);
    for (const k of [
      'mape_pct',
      'median_ape_pct',
      'p90_ape_pct',
      'bias_pct',
      'geo_mean_ratio',
      'shape_mape_pct',
    ] as const)
      expect(b[k]!).toBeCloseTo(a[k]!, 6);
    expect(b.shape_n).toBe(a.shape_n);
    // row by row, and no serve run needed a preemption or refused a request
    const byRow = new Map(
      stat.rows.filter((r) => r.regime === 'static_batch').map((r) => [r.row, r.predicted_us.cm_overlap]),
    );
    for (const r of viaServe.rows) {
      expect(Math.abs(r.predicted.e2e_mean_us! - byRow.get(r.row)!)).toBeLessThan(1e-3);
      expect(r.preemptions + r.refused).toBe(0);
    }
    expect(viaServe.metrics.ttft_mean_us).toBeNull();
  });

  it('parses the documented CSV, fills defaults, and names file, row and column of bad cells', () => {
    const text = [
      'model,chip,tp,weight_dtype,engine,workload,concurrency,rate_per_s,requests,isl,osl,ttft_mean_us,tpot_mean_us,e2e_mean_us,output_tokens_per_s,group',
      'llama-3.1-8b,h100,1,bf16,vllm,closed,8,,32,512,64,40000,9000,,,g1',
      'llama-3.1-8b,h100,1,bf16,vllm,open,,2.5,20,256,32,,,,400,g2',
    ].join('\n');
    const rows = parseRequestsCsv(text, 'x.requests.csv');
    const defaults = { ep: 1, dp: 1, max_num_seqs: 256, max_num_batched_tokens: undefined, chunked_prefill: true };
    expect(rows[0]).toMatchObject({
      ...defaults,
      concurrency: 8,
      measured: { ttft_mean_us: 40000, tpot_mean_us: 9000 },
    });
    expect(rows[1]).toMatchObject({ workload: 'open', rate_per_s: 2.5, measured: { output_tokens_per_s: 400 } });
    const zero = text.replace(',closed,8,', ',closed,0,');
    expect(() => parseRequestsCsv(zero, 'x.csv')).toThrow(
      /x\.csv row 1 column "concurrency": expected a positive integer, got "0"/,
    );
    expect(() => parseRequestsCsv(text.replace(',open,,2.5,', ',open,,,'), 'x.csv')).toThrow(
      /x\.csv row 2 column "rate_per_s": expected a rate > 0/,
    );
    expect(() => parseRequestsCsv(text.replace('40000,9000', ','), 'x.csv')).toThrow(
      /x\.csv row 1: no measured metric/,
    );
    expect(() => parseRequestsCsv('model,chip\n', 'x.csv')).toThrow(
      /x\.csv row 0 \(header\) column "tp": missing column/,
    );
  });

  it('scores each metric over the rows that carry it: a row measured at the prediction scores 0 % there', () => {
    const head = 'model,chip,tp,weight_dtype,engine,workload,concurrency,requests,isl,osl';
    const cfg = 'llama-3.1-8b,h100,1,bf16,vllm,closed,4,8,256,16';
    const probe = validateRequestRows(parseRequestsCsv(`${head},ttft_mean_us\n${cfg},1\n`, 'p.csv'), {
      chip: 'h100',
      registry: REGISTRY,
    });
    const ttft = probe.rows[0]!.predicted.ttft_mean_us!;
    const v = validateRequestRows(
      parseRequestsCsv(`${head},ttft_mean_us,output_tokens_per_s\n${cfg},${ttft},\n${cfg},${ttft * 2},\n`, 'q.csv'),
      { chip: 'h100', registry: REGISTRY },
    );
    expect(v.rows.map((r) => r.ape_pct.ttft_mean_us)).toEqual([0, 50]);
    expect(v.metrics.ttft_mean_us!.mape_pct).toBeCloseTo(25, 9);
    expect(v.metrics.output_tokens_per_s).toBeNull();
  });

  it('stepcal validate --requests: a steps file contributes its static batches; a requests file is read as documented', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'stepcal-req-'));
    const f = path.join(dir, 'a.requests.csv');
    const csv = [
      'model,chip,tp,weight_dtype,engine,workload,concurrency,requests,isl,osl,tpot_mean_us',
      'llama-3.1-8b,h100,1,bf16,vllm,closed,4,8,256,16,7000',
    ];
    writeFileSync(f, `${csv.join('\n')}\n`);
    const r = await cli(['validate', '--chip', 'h100', '--requests', SPLIT, f, '--json']);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    expect(v.metrics.e2e_mean_us.n).toBeGreaterThan(40);
    expect(v.metrics.tpot_mean_us.n).toBe(1);
    const t = await cli(['validate', '--chip', 'h100', '--requests', f]);
    expect(t.code).toBe(0);
    expect(t.stdout).toMatch(/tpot_mean_us +1 /);
    expect(t.stdout).toMatch(/goal/);
  });
});
