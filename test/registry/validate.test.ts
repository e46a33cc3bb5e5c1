import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import {
  busBandwidthFactor,
  collectiveRateBound,
  errorsOf,
  formatProblem,
  validateRegistry,
  validateRegistryText,
} from '../../src/registry/validate.ts';
import { chipRegistry, clone, findEntry } from './fixtures.ts';

const FILE = 'registry/h200.yaml';
const errs = (sets: CoefficientSet[]) => errorsOf(validateRegistry(sets, FILE));

/** Mutate a copy of the h200 fixture and return its error messages. */
function mutate(f: (sets: CoefficientSet[]) => void): string[] {
  const sets = clone(chipRegistry('h200'));
  f(sets);
  return errs(sets).map(formatProblem);
}

describe('registry validate: the fixtures pass', () => {
  it('h200 and h100 built from reference §1.5 values have no errors', () => {
    expect(errs(chipRegistry('h200'))).toEqual([]);
    expect(errs(chipRegistry('h100'))).toEqual([]);
    expect(errs([...chipRegistry('h100'), ...chipRegistry('h200')].map((s) => s))).toEqual([]);
  });
});

describe('registry validate: schema failures name file, set, entry and field', () => {
  it('missing required field', () => {
    const m = mutate(
      (s) => delete (findEntry(s, 'gemm_m_half_bf16') as unknown as Partial<Record<string, unknown>>).units,
    );
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry gemm_m_half_bf16 [hardware=h200]: field units: required field is missing',
    ]);
  });
  it('units and method enums', () => {
    const m = mutate((s) => {
      (findEntry(s, 'gemm_m_half_bf16') as unknown as Record<string, unknown>).units = 'ms';
      (findEntry(s, 'gemm_m_half_fp8') as unknown as Record<string, unknown>).method = 'guessed';
    });
    expect(m.some((x) => x.includes('entry gemm_m_half_bf16 [hardware=h200]: field units: "ms" is not one of'))).toBe(
      true,
    );
    expect(
      m.some((x) => x.includes('entry gemm_m_half_fp8 [hardware=h200]: field method: "guessed" is not one of')),
    ).toBe(true);
  });
  it('non-finite value, zero without not_charged', () => {
    const m = mutate((s) => {
      findEntry(s, 'gemm_m_half_bf16').value = Number.NaN;
      findEntry(s, 'gemm_m_half_fp8').value = 0;
    });
    expect(m).toContain(
      'registry/h200.yaml: set cost-model-primitives: entry gemm_m_half_bf16 [hardware=h200]: field value: must be a finite number, got NaN',
    );
    expect(m).toContain(
      'registry/h200.yaml: set cost-model-primitives: entry gemm_m_half_fp8 [hardware=h200]: field value: 0 is allowed only with method: not_charged',
    );
  });
  it('ci95 not containing the value', () => {
    const m = mutate((s) => (findEntry(s, 'gemm_eps_max_bf16').ci95 = [0.5, 0.9]));
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field ci95: [0.5, 0.9] does not contain the value 0.992',
    ]);
  });
  it('rationale required for non-measured; fitted only with measured', () => {
    const m = mutate((s) => {
      const e = findEntry(s, 'hbm_derate');
      delete e.rationale;
      e.fitted = true;
    });
    expect(m).toContain(
      'registry/h200.yaml: set cost-model-primitives: entry hbm_derate [hardware=h200]: field rationale: required for method: vendor_spec (every method except measured)',
    );
    expect(m).toContain(
      'registry/h200.yaml: set cost-model-primitives: entry hbm_derate [hardware=h200]: field fitted: fitted: true is allowed only with method: measured (method is vendor_spec)',
    );
  });
  it('duplicate (name, scope), scope lists compared as sets', () => {
    const m = mutate((s) => {
      const p = s[0]!;
      p.coefficients.push({
        name: 'hbm_derate',
        entry: { ...clone(findEntry(s, 'hbm_derate')), scope: { hardware: ['H200'] } },
      });
    });
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry hbm_derate [hardware=H200]: field scope: duplicate (name, scope): already defined in set cost-model-primitives',
    ]);
  });
  it('unknown keys are errors except evidence; evidence is unknown under the strict layout', () => {
    const m = mutate((s) => ((findEntry(s, 'gemm_m_half_bf16') as unknown as Record<string, unknown>).note = 'x'));
    expect(m).toEqual([
      expect.stringContaining('entry gemm_m_half_bf16 [hardware=h200]: field note: unknown key "note"'),
    ]);
    const strict = errorsOf(validateRegistry(chipRegistry('h200'), FILE, { strictBlis: true }));
    expect(strict.length).toBeGreaterThan(0);
    expect(strict.every((p) => p.field === 'evidence')).toBe(true);
  });
  it('set-level problems from the raw text (unknown set key, non-single-key coefficient)', () => {
    const text = 'kind: CoefficientSet\nname: x\nextra: 1\ncoefficients:\n  - {a: {value: 1}, b: {value: 2}}\n';
    const { problems } = validateRegistryText(text, 'f.yaml');
    const msgs = problems.map(formatProblem);
    expect(msgs).toContain('f.yaml: set x: field extra: unknown set key "extra"');
    expect(msgs).toContain(
      'f.yaml: set x: field coefficients[0]: coefficient #0: expected a single-key map {name: entry}',
    );
  });
  it('a round trip through YAML text keeps the fixture valid', () => {
    const { problems } = validateRegistryText(stringifyCoefficientSets(chipRegistry('h200')), FILE);
    expect(errorsOf(problems)).toEqual([]);
  });
});

describe('registry validate: physics failures', () => {
  const h200 = loadChip('h200');
  it('link bound: bus factor and bound for h200 (450 GB/s per direction, slack 1.25)', () => {
    expect(busBandwidthFactor('all_reduce', 8)).toBeCloseTo(1.75, 12);
    expect(busBandwidthFactor('all_gather', 2)).toBeCloseTo(0.5, 12);
    // 1.25 × 450,000 bytes/µs ÷ 1.75 = 321,428.57
    expect(collectiveRateBound(h200, 'all_reduce', 8)).toBeCloseTo(321_428.571, 2);
  });
  it('rate above the datasheet: attention decode rate vs HBM, collective rate vs link', () => {
    const m = mutate((s) => {
      findEntry(s, 'attention_decode_rate').value = 4_900_000; // h200 HBM is 4,800,000 bytes/µs
      findEntry(s, 'collective_peak_rate_all_reduce_int8_8rank_h200').value = 400_000; // bound 321,428.6
      findEntry(s, 'collective_transition_rate_all_reduce_int8_8rank_h200').value = 300_000;
    });
    expect(m).toContain(
      "registry/h200.yaml: set cost-model-attention: entry attention_decode_rate [hardware=h200]: field value: rate 4900000 bytes/µs exceeds h200's datasheet HBM rate 4800000 bytes/µs",
    );
    expect(
      m.some((x) =>
        x.includes(
          'entry collective_peak_rate_all_reduce_int8_8rank_h200 [hardware=h200]: field value: rate 400000 bytes/µs exceeds the link bound 321429',
        ),
      ),
    ).toBe(true);
    expect(m).toHaveLength(2);
  });
  it('eps_max outside (0, 1.05], hbm_derate outside (0, 1]', () => {
    const m = mutate((s) => {
      findEntry(s, 'gemm_eps_max_bf16').value = 1.06;
      findEntry(s, 'gemm_eps_max_bf16').ci95 = [1, 1.1];
      findEntry(s, 'hbm_derate').value = 1.2;
    });
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field value: eps_max 1.06 is outside (0, 1.05] (a fraction of the dense datasheet peak)',
      'registry/h200.yaml: set cost-model-primitives: entry hbm_derate [hardware=h200]: field value: hbm_derate 1.2 is outside (0, 1]',
    ]);
  });
  it('eps_max in (1, 1.05] is a warning (asymptote above datasheet peak), not an error; 1.05 is the error bound', () => {
    for (const [value, warned] of [
      [1.03, true],
      [1.05, true],
      [1.0, false],
    ] as const) {
      const sets = clone(chipRegistry('h200'));
      findEntry(sets, 'gemm_eps_max_bf16').value = value;
      findEntry(sets, 'gemm_eps_max_bf16').ci95 = [0.95, value];
      const ps = validateRegistry(sets, FILE);
      expect(errorsOf(ps)).toEqual([]);
      expect(ps.map(formatProblem)).toEqual(
        warned
          ? [
              `registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field value: warning: eps_max ${value} is above 1: asymptote above datasheet peak (allowed up to 1.05)`,
            ]
          : [],
      );
    }
    expect(
      mutate((s) => {
        findEntry(s, 'gemm_eps_max_bf16').value = 1.0501;
        findEntry(s, 'gemm_eps_max_bf16').ci95 = [1, 1.06];
      }),
    ).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field value: eps_max 1.0501 is outside (0, 1.05] (a fraction of the dense datasheet peak)',
    ]);
  });
  it('a ci95 upper bound above the datasheet rate is a warning naming the entry (eps_max, HBM, link)', () => {
    const sets = clone(chipRegistry('h200'));
    findEntry(sets, 'gemm_eps_max_bf16').ci95 = [0.9, 1.02]; // value 0.992
    const rate = findEntry(sets, 'attention_decode_rate');
    rate.ci95 = [rate.value * 0.9, 5_000_000]; // h200 HBM 4,800,000 bytes/µs
    const peak = findEntry(sets, 'collective_peak_rate_all_reduce_int8_8rank_h200');
    peak.ci95 = [peak.value * 0.9, 330_000]; // link bound 321,429
    const ps = validateRegistry(sets, FILE);
    expect(errorsOf(ps)).toEqual([]);
    expect(ps.map(formatProblem)).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field ci95: warning: upper bound 1.02 exceeds the datasheet peak (eps_max) 1; the value 0.992 is within it, its ci95 is not',
      "registry/h200.yaml: set cost-model-attention: entry attention_decode_rate [hardware=h200]: field ci95: warning: upper bound 5000000 exceeds h200's datasheet HBM rate (bytes/µs) 4800000; the value 2592000 is within it, its ci95 is not",
      'registry/h200.yaml: set cost-model-collectives: entry collective_peak_rate_all_reduce_int8_8rank_h200 [hardware=h200]: field ci95: warning: upper bound 330000 exceeds the h200 link bound (bytes/µs) 321429; the value 201446.5 is within it, its ci95 is not',
    ]);
  });
  it('an empty registry file (no sets, or sets without coefficients) is an error', () => {
    for (const [text, msg] of [
      ['', 'empty registry: no CoefficientSet documents'],
      ['# nothing\n', 'empty registry: no CoefficientSet documents'],
      ['kind: CoefficientSet\nname: x\ncoefficients: []\n', 'empty registry: 1 set(s) but no coefficients'],
    ] as const) {
      const { problems } = validateRegistryText(text, 'e.yaml');
      expect(errorsOf(problems).map(formatProblem)).toEqual([`e.yaml: ${msg}`]);
    }
  });
  it('r_t > r_peak', () => {
    const m = mutate((s) => (findEntry(s, 'collective_transition_rate_alltoall_fp16_4rank_h200').value = 220_000));
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-collectives: entry collective_transition_rate_alltoall_fp16_4rank_h200 [hardware=h200]: field value: r_t 220000 bytes/µs exceeds r_peak 212642.4 bytes/µs',
    ]);
  });
  it('floors decreasing with ranks', () => {
    const m = mutate((s) => (findEntry(s, 'collective_floor_all_gather_fp16_8rank_h200').value = 7.0));
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-collectives: entry collective_floor_all_gather_fp16_8rank_h200 [hardware=h200]: field value: floor 7 µs at 8 ranks is below 7.13 µs at 4 ranks (floors must not decrease with ranks)',
    ]);
  });
  it('kind floor above 3× the part-wide floor; MoE p90 below median', () => {
    const m = mutate((s) => {
      findEntry(s, 'attention_decode_floor_swa').value = 41; // 3 × 13.5 = 40.5
      findEntry(s, 'moe_routing_imbalance_p90').value = 0.9;
    });
    expect(m).toEqual([
      'registry/h200.yaml: set cost-model-primitives: entry moe_routing_imbalance_p90 [hardware=h200]: field value: p90 0.9 is below the median 0.999',
      'registry/h200.yaml: set cost-model-attention: entry attention_decode_floor_swa [hardware=h200]: field value: kind floor 41 µs exceeds 3× the part-wide attention_decode_floor 13.5 µs',
    ]);
  });
  it('warns on a width extrapolation over floors from several lanes (the l40s all_reduce fp16 case)', () => {
    const sets = clone(chipRegistry('h200'));
    findEntry(sets, 'collective_floor_all_reduce_fp16_2rank_h200').evidence!.lane = 'vllm-0.24.0';
    sets[2]!.coefficients.push({
      name: 'collective_floor_all_reduce_fp16_16rank_h200',
      entry: {
        value: 5.2,
        units: 'us_per_transfer',
        method: 'assumed',
        fitted: false,
        scope: { hardware: ['h200'] },
        rationale: 'width extrapolation from 2/4/8 ranks (test)',
        evidence: {
          family: 'collective',
          extrapolation: { predictor: 'floor_linear_in_ranks', from: ['h200:2rank', 'h200:4rank', 'h200:8rank'] },
        },
      },
    });
    const ps = validateRegistry(sets, FILE);
    expect(errorsOf(ps)).toEqual([]);
    expect(ps.map(formatProblem)).toEqual([
      'registry/h200.yaml: set cost-model-collectives: entry collective_floor_all_reduce_fp16_16rank_h200 [hardware=h200]: field evidence.extrapolation: warning: width extrapolation over floors measured on several lanes (nccl-2.29.2, vllm-0.24.0); `stepcal registry extrapolate widths` refuses such a fit',
    ]);
  });
  it('an unknown chip is a warning and skips datasheet bounds only', () => {
    const sets = clone(chipRegistry('h200'));
    for (const s of sets) for (const c of s.coefficients) c.entry.scope = { hardware: ['mystery'] };
    const ps = validateRegistry(sets, FILE);
    expect(errorsOf(ps)).toEqual([]);
    expect(ps.map(formatProblem)).toEqual([
      'registry/h200.yaml: warning: chip "mystery" is not in the catalog: its datasheet-bound checks are skipped',
    ]);
  });
});
