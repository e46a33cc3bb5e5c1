/**
 * The file-format schemas of src/core/schemas: the registry's JSON Schema export stays current, and
 * each schema accepts the shipped files and refuses the inputs issue 12 lists (a string value, NaN,
 * unknown op/backend, a fractional count), with real values.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import {
  CollectiveRowSchema,
  GemmRowSchema,
  MoeRowSchema,
  ProvenanceSchema,
  StepRowSchema,
} from '../../src/core/schemas/measurements.ts';
import { CoefficientEntrySchema, registryJsonSchemaText } from '../../src/core/schemas/registry.ts';
import { parseCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { listMeasurementFiles, parseCanonicalCsv, readProvenance } from '../../src/measurements/store.ts';
import { parseStepsCsv } from '../../src/validate/steps.ts';

const h200Text = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
/** h200's registry with the first occurrence of `a` replaced by `b`. */
const edited = (a: string, b: string) => {
  const i = h200Text.indexOf(a);
  expect(i).toBeGreaterThan(0);
  return h200Text.slice(0, i) + b + h200Text.slice(i + a.length);
};

describe('registry schema', () => {
  it('docs/registry.schema.json is the current export (regenerate: node bin/run-ts.mjs scripts/registry-schema.ts)', () => {
    expect(readFileSync(path.join(REPO_ROOT, 'docs', 'registry.schema.json'), 'utf8')).toBe(registryJsonSchemaText());
    const js = JSON.parse(registryJsonSchemaText()) as { $schema: string; required: string[] };
    expect(js.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(js.required).toEqual(['kind', 'name', 'coefficients']);
  });

  it('every shipped registry loads (245 h200 entries in 4 sets: 179 + 16 sparse + 8 four-bit expert + 12 recurrent + 18 MLA + 12 DeepEP all-to-all)', () => {
    for (const f of readdirSync(path.join(REPO_ROOT, 'registry')).filter((n) => n.endsWith('.yaml'))) {
      const sets = parseCoefficientSets(readFileSync(path.join(REPO_ROOT, 'registry', f), 'utf8'), f);
      expect(sets.length).toBe(4);
    }
    // 148 = the base families, including the MoE expert law: fp8 / fp8_block / int4 gained a per-touched-expert
    // cost (moe_expert_per_expert_*), and fp8_block's m_half fits to 0 (no ramp once the per-expert cost is charged) and is not written;
    // + attention_prefill_s_half (the prefill per-sequence ramp, docs/fitting.md) = 149;
    // + attention_decode_{item_us,p_half}[_swa] (the decode work-item law, stored since acc16) = 153;
    // + moe_expert_pair_rate_{fp8,fp8_block,int4,mxfp4} (the expert law's pair term, 453c5fa) and fp8_block's
    // m_half, which fits above 0 again beside it (moe_expert_m_half_fp8_block) = 158;
    // fitted with the balanced routing's distinct experts (experts branch, 2026-12-02) fp8_block's m_half pins at 0 again = 157.
    // + the lane's expert kernel sets (experts3, docs/pricer.md "Expert kernels"): fp8_block Triton at ep 1
    // (floor, eps_max, route_rate, per_expert: its pair term pins and m_half fits to 0) 4, fp8_block CUTLASS at
    // ep > 1 (floor, eps_max, m_half, route_rate, per_expert, pair_rate) 6, mxfp4 gpt-oss Triton (floor, eps_max,
    // m_half, route_rate, pair_rate) 5 = 172.
    // + the weight re-read past the first m-tile (experts5, docs/fitting.md): moe_expert_reread_{bf16, fp8_block,
    // fp8_block_triton_ep1, fp8_block_cutlass_epn} (fp8, mxfp4, int4 and the gpt-oss set pin it at 0) = 176.
    // + the token term (session 16, docs/fitting.md): moe_expert_token_rate_{bf16, fp8, fp8_block, fp8_block_triton_ep1,
    // fp8_block_cutlass_epn} (mxfp4, int4 and the gpt-oss set pin it free), less fp8_block's and fp8_block_cutlass_epn's
    // route_rate, which the token term replaces (pinned free, not written) = 179.
    expect(parseCoefficientSets(h200Text, 'h200.yaml').reduce((n, s) => n + s.coefficients.length, 0)).toBe(245);
  });

  it('a string, a NaN and an unknown key are errors naming file, set, entry and field', () => {
    const m = /gemm_eps_max_bf16:\n\s+value: ([0-9.]+)/.exec(h200Text)!;
    expect(() => parseCoefficientSets(edited(m[0], m[0].replace(m[1]!, '"0.8"')), 'registry/h200.yaml')).toThrow(
      'registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field value: must be a finite number, got "0.8"',
    );
    expect(() => parseCoefficientSets(edited(m[0], m[0].replace(m[1]!, '.nan')), 'r.yaml')).toThrow(
      'entry gemm_eps_max_bf16 [hardware=h200]: field value: must be a finite number, got NaN',
    );
    expect(() => parseCoefficientSets(edited(m[0], m[0].replace('value:', 'valu: 1\n      value:')), 'r.yaml')).toThrow(
      /entry gemm_eps_max_bf16 .*Unrecognized key.*valu/,
    );
  });

  it('loading keeps the file bytes: parse then stringify reproduces registry/h200.yaml', async () => {
    const { stringifyCoefficientSets } = await import('../../src/core/schemas/registry-yaml.ts');
    expect(stringifyCoefficientSets(parseCoefficientSets(h200Text, 'h200.yaml'))).toBe(h200Text);
  });

  it('entry: ci95 must be two finite numbers; scope lists ints', () => {
    const base = {
      value: 0.9,
      units: 'dimensionless',
      method: 'measured',
      fitted: true,
      scope: { hardware: ['h200'] },
    };
    expect(CoefficientEntrySchema.safeParse(base).success).toBe(true);
    expect(CoefficientEntrySchema.safeParse({ ...base, ci95: [0.8, Infinity] }).success).toBe(false);
    expect(CoefficientEntrySchema.safeParse({ ...base, scope: { tp: [2.5] } }).success).toBe(false);
    expect(CoefficientEntrySchema.safeParse({ ...base, units: 'ms' }).success).toBe(false);
  });
});

describe('measurement schemas', () => {
  const coll = {
    chip: 'h200',
    lane: 'nccl-2.29.2',
    kernel_source: 'NCCL',
    op: 'all_reduce',
    dtype: 'fp16',
    ranks: 8,
    nodes: 1,
    message_bytes: 1024,
    backend: 'nccl',
    latency_us: 12.5,
  };
  it('collective rows: op and backend are known values, ranks ≥ 2', () => {
    expect(CollectiveRowSchema.parse(coll)).toEqual(coll);
    expect(CollectiveRowSchema.safeParse({ ...coll, op: 'bogus_op' }).success).toBe(false);
    expect(CollectiveRowSchema.safeParse({ ...coll, backend: 'not_a_backend' }).success).toBe(false);
    expect(CollectiveRowSchema.safeParse({ ...coll, ranks: 1 }).success).toBe(false);
  });
  it('gemm rows: integer dims, positive latency; moe: topk ≤ experts', () => {
    const g = {
      chip: 'h200',
      lane: 'vllm-0.24.0',
      kernel_source: '',
      dtype: 'bf16',
      m: 4096,
      n: 4096,
      k: 4096,
      latency_us: 180.2,
    };
    expect(GemmRowSchema.parse(g)).toEqual(g);
    expect(GemmRowSchema.safeParse({ ...g, m: 4096.5 }).success).toBe(false);
    expect(GemmRowSchema.safeParse({ ...g, latency_us: 0 }).success).toBe(false);
    const moe = {
      chip: 'h200',
      lane: 'v',
      kernel_source: '',
      tokens: 8,
      hidden: 4096,
      inter: 14336,
      topk: 2,
      experts: 8,
      tp: 1,
      ep: 1,
      dtype: 'bf16',
      distribution: 'power_law_1.2',
      latency_us: 50,
    };
    expect(MoeRowSchema.safeParse(moe).success).toBe(true);
    expect(MoeRowSchema.safeParse({ ...moe, topk: 9 }).success).toBe(false);
    expect(MoeRowSchema.safeParse({ ...moe, distribution: 'zipf' }).success).toBe(false);
  });
  it('the canonical reader refuses op: bogus_op naming file, row and column', () => {
    const header = 'chip,lane,kernel_source,op,dtype,ranks,nodes,message_bytes,backend,latency_us';
    const text = `${header}\nh200,nccl-2.29.2,NCCL,all_reduce,fp16,8,1,1024,nccl,12.5\nh200,nccl-2.29.2,NCCL,bogus_op,fp16,8,1,1024,nccl,12.5\n`;
    expect(() => parseCanonicalCsv('collective', text, 'c.csv')).toThrow(/c\.csv row 2 column "op".*"bogus_op"/);
    expect(() =>
      parseCanonicalCsv('collective', text.replace(',bogus_op,', ',all_reduce,').replace('nccl,12.5\n$', ''), 'c.csv'),
    ).not.toThrow();
    expect(() =>
      parseCanonicalCsv(
        'collective',
        text.replace(',bogus_op,', ',all_reduce,').replace(/nccl,12\.5\n$/, 'not_a_backend,12.5\n'),
        'c.csv',
      ),
    ).toThrow(/row 2 column "backend"/);
  });
  it('every shipped provenance file parses; a bad sha256 is refused', () => {
    let n = 0;
    for (const chip of ['a100', 'b200', 'h100', 'h200', 'l40s'])
      for (const f of listMeasurementFiles(path.join(REPO_ROOT, 'measurements', chip))) {
        const p = readProvenance(f.file);
        expect(p.family).toBe(f.family);
        n++;
      }
    expect(n).toBeGreaterThanOrEqual(25);
    const p = readProvenance(listMeasurementFiles(path.join(REPO_ROOT, 'measurements', 'h200'))[0]!.file);
    expect(ProvenanceSchema.safeParse({ ...p, output_sha256: 'abc' }).success).toBe(false);
  });
});

describe('one steps reader', () => {
  const file = path.join(REPO_ROOT, 'measurements', 'h100', 'splitwise.steps.csv');
  const text = readFileSync(file, 'utf8');
  it('the canonical reader of family step is parseStepsCsv (same rows, same strictness)', () => {
    const strict = parseStepsCsv(text, file).rows.map(({ file: _f, row: _r, ...r }) => r);
    expect(parseCanonicalCsv('step', text, file)).toEqual(strict);
    for (const r of strict.slice(0, 20)) expect(StepRowSchema.parse(r)).toEqual(r);
    const lines = text.split('\n');
    const bad = [lines[0], lines[1]!.replace(',splitwise,step,', ',splitwise,,')].join('\n');
    expect(() => parseCanonicalCsv('step', bad, 's.csv')).toThrow(/s\.csv row 1 column "kind"/);
    expect(() => parseStepsCsv(bad, 's.csv')).toThrow(/s\.csv row 1 column "kind"/);
  });
});
