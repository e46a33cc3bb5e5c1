/**
 * Registry fixtures built from the BLIS values printed in reference §1.5 (H100/H200), so every
 * test starts from a registry the real checks accept.
 */
import type { CoefficientEntry, CoefficientSet, NamedEntry } from '../../src/core/schemas/registry.ts';

const src = [{ kind: 'model' as const, cite: 'fixture: reference §1.5 value table', role: 'primary' as const }];

export function measured(
  chip: string,
  value: number,
  units: CoefficientEntry['units'],
  family: string,
  extra: Partial<CoefficientEntry> = {},
): CoefficientEntry {
  return {
    value,
    units,
    method: 'measured',
    fitted: true,
    scope: { hardware: [chip] },
    sources: src,
    evidence: { family, lane: 'vllm-0.25.0' },
    ...extra,
  };
}

/** Floors of reference §1.5 (fp16 + int8 all_reduce/all_gather, 2/4/8 ranks), with rates. */
export const REF_COLLECTIVES: Record<string, Record<string, Array<[number, number, number, number]>>> = {
  // [ranks, floor, peak, transition]
  h200: {
    all_reduce_fp16: [
      [2, 4.38, 165_100, 130_000],
      [4, 4.43, 118_660, 95_750],
      [8, 4.71, 134_260, 104_250],
    ],
    all_gather_fp16: [
      [2, 5.08, 257_645.3, 197_000],
      [4, 7.13, 211_087.3, 171_250],
      [8, 10.3, 192_431.0, 148_500],
    ],
    reduce_scatter_fp16: [
      [2, 5.16, 247_750.7, 193_250],
      [4, 7.11, 207_425.4, 176_500],
      [8, 10.24, 192_654.7, 177_750],
    ],
    alltoall_fp16: [
      [2, 6.35, 297_702.6, 226_750],
      [4, 6.64, 212_642.4, 167_250],
      [8, 7.39, 177_782.4, 143_750],
    ],
    all_reduce_int8: [
      [2, 6.2, 308_211.7, 241_000],
      [4, 9.48, 230_302.0, 202_000],
      [8, 16.65, 201_446.5, 174_000],
    ],
  },
  h100: {
    all_reduce_fp16: [
      [2, 4.18, 166_770, 128_000],
      [4, 4.52, 118_380, 89_750],
      [8, 4.61, 133_910, 97_000],
    ],
    all_gather_fp16: [
      [2, 5.14, 258_468.9, 191_250],
      [4, 7.07, 211_790.1, 164_000],
      [8, 10.14, 191_534.4, 145_500],
    ],
    reduce_scatter_fp16: [
      [2, 5.14, 249_035.6, 185_250],
      [4, 6.99, 206_517.4, 169_000],
      [8, 10.24, 191_827.3, 176_000],
    ],
    alltoall_fp16: [
      [2, 6.47, 279_949.8, 224_500],
      [4, 6.48, 192_145.9, 160_750],
      [8, 7.44, 180_107.3, 143_000],
    ],
    all_reduce_int8: [
      [2, 6.38, 309_614.1, 231_000],
      [4, 9.44, 230_689.0, 194_250],
      [8, 15.49, 200_514.3, 171_750],
    ],
  },
};

/** BLIS's published 16-rank (a) floors for the same (op, dtype), reference §1.5. */
export const REF_16RANK_FLOORS: Record<string, Record<string, number>> = {
  h200: {
    all_reduce_fp16: 5.15,
    all_gather_fp16: 17.24,
    reduce_scatter_fp16: 17.0,
    alltoall_fp16: 8.78,
    all_reduce_int8: 30.6,
  },
  h100: {
    all_reduce_fp16: 5.17,
    all_gather_fp16: 16.79,
    reduce_scatter_fp16: 17.03,
    alltoall_fp16: 8.76,
    all_reduce_int8: 27.64,
  },
};

function collectiveEntries(chip: string, lane = 'nccl-2.29.2'): NamedEntry[] {
  const out: NamedEntry[] = [];
  for (const [key, rows] of Object.entries(REF_COLLECTIVES[chip] ?? {})) {
    const dtype = key.endsWith('int8') ? 'int8' : 'fp16';
    const op = key.slice(0, -(dtype.length + 1));
    for (const [n, floor, peak, trans] of rows) {
      const ev = { family: 'collective', lane };
      out.push({
        name: `collective_floor_${op}_${dtype}_${n}rank_${chip}`,
        entry: { ...measured(chip, floor, 'us_per_transfer', 'collective'), fitted: false, evidence: ev },
      });
      out.push({
        name: `collective_peak_rate_${op}_${dtype}_${n}rank_${chip}`,
        entry: { ...measured(chip, peak, 'bytes_per_us', 'collective'), fitted: false, evidence: ev },
      });
      out.push({
        name: `collective_transition_rate_${op}_${dtype}_${n}rank_${chip}`,
        entry: { ...measured(chip, trans, 'bytes_per_us', 'collective'), evidence: ev },
      });
    }
  }
  return out;
}

/** A small, valid registry for one chip (h100 or h200 values of reference §1.5). */
export function chipRegistry(chip: 'h100' | 'h200'): CoefficientSet[] {
  const h = chip === 'h200';
  return [
    {
      kind: 'CoefficientSet',
      name: 'cost-model-primitives',
      coefficients: [
        {
          name: 'gemm_eps_max_bf16',
          entry: measured(chip, h ? 0.992 : 1.0, 'dimensionless', 'gemm', { ci95: h ? [0.95, 1.0] : [0.96, 1.03] }),
        },
        { name: 'gemm_m_half_bf16', entry: measured(chip, h ? 110 : 170, 'tokens', 'gemm') },
        { name: 'gemm_eps_max_fp8', entry: measured(chip, h ? 0.736 : 0.648, 'dimensionless', 'gemm') },
        { name: 'gemm_m_half_fp8', entry: measured(chip, h ? 113 : 131, 'tokens', 'gemm') },
        {
          name: 'hbm_derate',
          entry: {
            value: 0.8,
            units: 'dimensionless',
            method: 'vendor_spec',
            fitted: false,
            scope: { hardware: [chip] },
            sources: [{ kind: 'vendor_doc', cite: 'aiconfigurator systems yaml', role: 'primary' }],
            rationale: 'mem_bw_empirical_scaling_factor transcribed',
          },
        },
        {
          name: 'moe_routing_imbalance_median',
          entry: measured(chip, h ? 0.999 : 0.998, 'dimensionless', 'moe', { fitted: false }),
        },
        {
          name: 'moe_routing_imbalance_p90',
          entry: measured(chip, h ? 1.394 : 1.387, 'dimensionless', 'moe', { fitted: false }),
        },
      ],
    },
    {
      kind: 'CoefficientSet',
      name: 'cost-model-attention',
      coefficients: [
        {
          name: 'attention_decode_floor',
          entry: measured(chip, h ? 13.5 : 14.5, 'us_per_transfer', 'attention_decode'),
        },
        {
          name: 'attention_decode_rate',
          entry: measured(chip, h ? 2_592_000 : 2_412_000, 'bytes_per_us', 'attention_decode'),
        },
        {
          name: 'attention_prefill_floor',
          entry: measured(chip, h ? 18.5 : 19.5, 'us_per_transfer', 'attention_prefill'),
        },
        { name: 'attention_prefill_work_scale', entry: measured(chip, 0.4, 'dimensionless', 'attention_prefill') },
        {
          name: 'attention_decode_floor_swa',
          entry: measured(chip, h ? 14.0 : 15.0, 'us_per_transfer', 'attention_decode'),
        },
        {
          name: 'attention_decode_rate_swa',
          entry: measured(chip, h ? 864_000 : 871_000, 'bytes_per_us', 'attention_decode'),
        },
      ],
    },
    { kind: 'CoefficientSet', name: 'cost-model-collectives', coefficients: collectiveEntries(chip) },
  ];
}

/** Deep copy. */
export function clone<T>(x: T): T {
  return structuredClone(x);
}

/** The entry `name` in `sets` (first match). */
export function findEntry(sets: readonly CoefficientSet[], name: string): CoefficientEntry {
  for (const s of sets) for (const c of s.coefficients) if (c.name === name) return c.entry;
  throw new Error(`no entry ${name}`);
}
