import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runImport } from '../../src/measurements/pipeline.ts';
import { FAMILY_COLUMNS } from '../../src/measurements/schema.ts';
import { parseSplitwise, splitwiseStepRows } from '../../src/measurements/splitwise.ts';
import { parseStepsCsv, readProvenance, readStepsFile } from '../../src/measurements/store.ts';
import * as validateSteps from '../../src/validate/steps.ts';
import { MEASUREMENTS, SPLITWISE_CSV, tmpDir } from './helpers.ts';

const text = readFileSync(SPLITWISE_CSV, 'utf8');

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

describe('Splitwise perf_model.csv → steps', () => {
  const parsed = parseSplitwise(text, SPLITWISE_CSV);

  it('collapses 1260 rows into 228 configurations (each repeated; the 512/1/128 centre listed 3 × 5 times)', () => {
    expect(parsed.rows_in).toBe(1260);
    expect(parsed.configs).toHaveLength(228);
    expect(parsed.repeated_configs).toBe(228);
    const centre = parsed.configs.filter((c) => c.prompt === 512 && c.batch === 1 && c.output === 128);
    expect(centre).toHaveLength(12);
    expect(centre.every((c) => c.repeats === 15)).toBe(true);
    expect(parsed.configs.filter((c) => c.repeats === 5)).toHaveLength(216);
  });

  it('takes the per-column median of the repeats, in µs', () => {
    const rows = text
      .trim()
      .split('\n')
      .slice(1)
      .map((l) => l.split(','));
    const sel = rows.filter(
      (r) =>
        r[0] === 'llama2-70b' &&
        r[1] === 'a100-80gb' &&
        r[10] === '2' &&
        r[2] === '512' &&
        r[3] === '1' &&
        r[4] === '128',
    );
    expect(sel).toHaveLength(15);
    const c = parsed.configs.find(
      (x) =>
        x.model === 'llama-2-70b' &&
        x.hardware === 'a100-80gb' &&
        x.tp === 2 &&
        x.prompt === 512 &&
        x.batch === 1 &&
        x.output === 128,
    )!;
    expect(c.chip).toBe('a100');
    expect(c.prompt_us).toBeCloseTo(median(sel.map((r) => Number(r[7]))) * 1000, 6);
    expect(c.token_us).toBeCloseTo(median(sel.map((r) => Number(r[8]))) * 1000, 6);
    expect(c.e2e_us).toBeCloseTo(median(sel.map((r) => Number(r[9]))) * 1000, 6);
    // e2e ≈ prompt + (output − 1) · token for a well-behaved config
    expect(c.e2e_us / (c.prompt_us + 127 * c.token_us)).toBeCloseTo(1, 2);
  });

  it('flags exactly the batch-64 tp-2 configs as admitted_fewer (prompt_time falls while batch grows)', () => {
    const af = parsed.configs.filter((c) => c.flags.includes('admitted_fewer'));
    expect(af.map((c) => `${c.hardware}|tp${c.tp}|b${c.batch}`).sort()).toEqual([
      'a100-80gb|tp2|b64',
      'h100-80gb-pcap|tp2|b64',
      'h100-80gb|tp2|b64',
    ]);
    const a = af.find((c) => c.hardware === 'a100-80gb')!;
    const b32 = parsed.configs.find(
      (c) => c.hardware === 'a100-80gb' && c.tp === 2 && c.batch === 32 && c.prompt === 512 && c.output === 128,
    )!;
    expect(a.prompt_us).toBeLessThan(b32.prompt_us / 8); // 794 ms vs 6633 ms
    expect(a.token_us).toBeLessThan(b32.token_us);
    expect(a.e2e_us / (a.prompt_us + 127 * a.token_us)).toBeGreaterThan(10);
  });

  it('flags long-output batch-1 rows that stopped early and the power-capped H100', () => {
    const c = parsed.configs.find(
      (x) => x.hardware === 'a100-80gb' && x.tp === 4 && x.batch === 1 && x.output === 8192,
    )!;
    expect(c.flags).toContain('stopped_early');
    expect(c.e2e_us / (c.prompt_us + 8191 * c.token_us)).toBeLessThan(0.1);
    expect(parsed.configs.filter((x) => x.flags.includes('power_capped'))).toHaveLength(76);
    expect(parsed.configs.filter((x) => x.hardware === 'h100-80gb' && x.flags.length === 0).length).toBeGreaterThan(50);
  });

  it('expands one config into prefill step, decode step at prompt + output/2, and static batch', () => {
    const c = parsed.configs.find(
      (x) => x.hardware === 'h100-80gb' && x.tp === 4 && x.batch === 8 && x.prompt === 512 && x.output === 128,
    )!;
    const [pre, dec, sb] = splitwiseStepRows([c], 'src.csv');
    expect(pre).toMatchObject({
      model: 'llama-2-70b',
      chip: 'h100',
      tp: 4,
      engine: 'splitwise',
      kind: 'step',
      prefill_requests: 8,
      prefill_tokens: 4096,
      decode_requests: 0,
      measured_us: c.prompt_us,
      group: 'llama-2-70b|h100|tp4|p512|o128|prefill',
      source: 'src.csv',
      flags: '',
    });
    expect(dec).toMatchObject({
      kind: 'step',
      prefill_requests: 0,
      decode_requests: 8,
      decode_context_tokens: 8 * (512 + 64),
      measured_us: c.token_us,
      group: 'llama-2-70b|h100|tp4|p512|o128|decode',
    });
    expect(sb).toMatchObject({
      kind: 'static_batch',
      batch: 8,
      prompt_tokens: 512,
      output_tokens: 128,
      measured_us: c.e2e_us,
    });
  });

  it('curated files: a100 228 rows, h100 456 rows, header = FAMILY_COLUMNS.step, readable by readStepsFile', () => {
    for (const [chip, n] of [
      ['a100', 228],
      ['h100', 456],
    ] as const) {
      const file = path.join(MEASUREMENTS, chip, 'splitwise.steps.csv');
      expect(readFileSync(file, 'utf8').split('\n')[0]).toBe((FAMILY_COLUMNS.step as readonly string[]).join(','));
      const { rows, warnings } = readStepsFile(file);
      expect(warnings).toEqual([]);
      expect(rows).toHaveLength(n);
      expect(rows.every((r) => r.chip === chip && r.engine === 'splitwise' && r.measured_us > 0)).toBe(true);
      const prov = readProvenance(file);
      expect(prov.rows_out).toBe(n);
      expect(prov.inputs[0]!.sha256).toMatch(/^[0-9a-f]{64}$/);
    }
    const a100 = readStepsFile(path.join(MEASUREMENTS, 'a100', 'splitwise.steps.csv')).rows;
    expect(a100.filter((r) => r.flags.includes('admitted_fewer'))).toHaveLength(3);
    expect(a100.filter((r) => r.kind === 'static_batch')).toHaveLength(76);
  });

  it('unknown model / hardware and missing columns are errors naming the row', () => {
    const lines = text.split('\n');
    lines[3] = lines[3]!.replace('llama2-70b', 'llama2-13b');
    expect(() => parseSplitwise(lines.join('\n'), 'p.csv')).toThrow(
      /p\.csv row 3 column "model": unknown model "llama2-13b"/,
    );
    const hw = text.replace(/^(llama2-70b,)a100-80gb/m, '$1v100');
    expect(() => parseSplitwise(hw, 'p.csv')).toThrow(/row 1 column "hardware": unknown hardware "v100"/);
    const noTp = text.replace(',tensor_parallel', ',tp');
    expect(() => parseSplitwise(noTp, 'p.csv')).toThrow(/row 0 \(header\) column "tensor_parallel": missing column/);
    const zero = text.split('\n');
    zero[5] = zero[5]!
      .split(',')
      .map((c, i) => (i === 8 ? '0' : c))
      .join(',');
    expect(() => parseSplitwise(zero.join('\n'), 'p.csv')).toThrow(
      /row 5 column "token_time": expected a positive number \(a latency\), got 0/,
    );
  });

  it('stepcal import splitwise --chip h100 --out writes one chip atomically', async () => {
    const out = tmpDir();
    const w = await runImport('splitwise', [SPLITWISE_CSV], { chip: 'h100', out });
    expect(w).toHaveLength(1);
    expect(w[0]).toMatchObject({ family: 'step', rows_out: 456 });
    expect(readFileSync(w[0]!.file, 'utf8')).toBe(
      readFileSync(path.join(MEASUREMENTS, 'h100', 'splitwise.steps.csv'), 'utf8'),
    );
    await expect(runImport('splitwise', [SPLITWISE_CSV], { out })).rejects.toThrow(
      /holds several chips \(a100, h100\); pass --chip/,
    );
  });
});

describe('step file reader', () => {
  const header = (FAMILY_COLUMNS.step as readonly string[]).join(',');
  const row = 'llama-2-70b,h100,2,fp16,,,splitwise,step,1,512,0,0,0,0,0,0,83830,g,src,';

  it('is one implementation: the validator re-exports the store reader', () => {
    expect(validateSteps.parseStepsCsv).toBe(parseStepsCsv);
    expect(validateSteps.readStepsFile).toBe(readStepsFile);
  });

  it('ignores unknown columns with one warning each', () => {
    const { rows, warnings } = parseStepsCsv(`${header},note,power_w\n${row},hello,300\n`, 's.steps.csv');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      file: 's.steps.csv',
      row: 1,
      model: 'llama-2-70b',
      tp: 2,
      kind: 'step',
      prefill_tokens: 512,
      measured_us: 83830,
    });
    expect(warnings).toEqual([
      's.steps.csv: unknown column "note" ignored',
      's.steps.csv: unknown column "power_w" ignored',
    ]);
  });

  it('a missing required column or cell is an error naming file, row and column', () => {
    const noModel = `${header.replace('model,', '')}\n${row.replace('llama-2-70b,', '')}\n`;
    expect(() => parseStepsCsv(noModel, 's.csv')).toThrow(
      /^s\.csv row 1 column "model": missing column: not in row 0 \(header\); required by every row, first needed on this row$/,
    );
    const sb = row.replace(',step,1,512,0,0,0,0,0,0,', ',static_batch,0,0,0,0,0,8,512,,');
    expect(() => parseStepsCsv(`${header}\n${row}\n${sb}\n`, 's.csv')).toThrow(
      /^s\.csv row 2 column "output_tokens": empty cell; a value is required for kind=static_batch$/,
    );
    // a per-kind column absent from the header: the first row of that kind is named
    const noBatch = [header, row, sb.replace(',,', ',4,')]
      .map((l) =>
        l
          .split(',')
          .filter((_, i) => i !== 13)
          .join(','),
      )
      .join('\n');
    expect(() => parseStepsCsv(noBatch, 's.csv')).toThrow(
      /^s\.csv row 2 column "batch": missing column: not in row 0 \(header\); required for kind=static_batch, first needed on this row$/,
    );
    expect(() => parseStepsCsv(`${header}\n${row.replace(',step,', ',decode,')}\n`, 's.csv')).toThrow(
      /row 1 column "kind": expected "step" or "static_batch", got "decode"/,
    );
    expect(() => parseStepsCsv(`${header}\n${row.replace(',83830,', ',-1,')}\n`, 's.csv')).toThrow(
      /row 1 column "measured_us": expected a positive number \(µs\), got -1/,
    );
    expect(() => parseStepsCsv(`${header}\n${row.replace(',83830,', ',-5,')}\n`, 's.csv')).toThrow(
      /row 1 column "measured_us": expected a positive number \(µs\), got -5$/,
    );
    expect(() => parseStepsCsv(`${header}\n${row.replace(',83830,', ',0,')}\n`, 's.csv')).toThrow(
      /row 1 column "measured_us": expected a positive number \(µs\), got 0$/,
    );
    expect(() => parseStepsCsv(`${header}\n${row.replace(',2,fp16', ',2.5,fp16')}\n`, 's.csv')).toThrow(
      /row 1 column "tp": expected an integer ≥ 1, got 2\.5/,
    );
    expect(() => parseStepsCsv('', 's.csv')).toThrow(/empty file/);
    expect(() => readStepsFile('/nonexistent/x.steps.csv')).toThrow(/^\/nonexistent\/x\.steps\.csv: file not found$/);
  });

  it('optional columns may be absent (defaults 0 / empty)', () => {
    const minimal =
      'model,chip,tp,weight_dtype,engine,kind,prefill_requests,prefill_tokens,decode_requests,decode_context_tokens,measured_us,source\n' +
      'm,h100,1,bf16,vllm-0.5,step,0,0,4,4096,12000,x\n';
    const dir = tmpDir();
    const f = path.join(dir, 'x.steps.csv');
    writeFileSync(f, minimal);
    const [r] = readStepsFile(f).rows;
    expect(r).toMatchObject({
      kv_dtype: '',
      cudagraph_mode: '',
      prefill_context_tokens: 0,
      batch: 0,
      group: '',
      flags: '',
      decode_context_tokens: 4096,
    });
  });
});

describe('splitwiseStepRows: decode context is a whole count', () => {
  it('odd batch × odd output (a half token before rounding) gives a count the steps schema accepts', () => {
    const base = parseSplitwise(text, SPLITWISE_CSV).configs[0]!;
    // batch 3, prompt 512, output 5: 3 · (512 + 5/2) = 1543.5 → 1544 (half up).
    const rows = splitwiseStepRows([{ ...base, batch: 3, prompt: 512, output: 5 }], 'x.csv');
    const decode = rows.find((r) => r.kind === 'step' && r.decode_requests === 3)!;
    expect(decode.decode_context_tokens).toBe(1544);
  });
});
