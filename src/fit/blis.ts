/**
 * BLIS's published H100/H200 values (registry @ b4d8e2b8), transcribed from reference §1.5 for the
 * comparison table in fits/<chip>/README.md only. Never used as a fit input.
 */
import { BLIS_COLLECTIVES } from './collective-blis.ts';

/** name → { h100, h200, note } for the primitives and attention sets. */
export const BLIS_PUBLISHED: Record<string, { h100?: number; h200?: number; note: string }> = {
  gemm_eps_max_bf16: {
    h100: 1.0,
    h200: 0.992,
    note: 'vLLM 0.25.0 gemm lane, LSQ on the envelope over all m (memory-bound m included)',
  },
  gemm_m_half_bf16: { h100: 170, h200: 110, note: 'as above; small m (memory-bound) rows shape BLIS m_half' },
  gemm_eps_max_fp8: { h100: 0.648, h200: 0.736, note: 'vLLM 0.25.0, CutlassFP8ScaledMMLinearKernel' },
  gemm_m_half_fp8: { h100: 131, h200: 113, note: 'vLLM 0.25.0' },
  gemm_eps_max_fp8_block: { h100: 0.749, h200: 0.738, note: 'vLLM 0.25.0 (unreachable in the BLIS kernel)' },
  gemm_m_half_fp8_block: { h100: 160, h200: 106, note: 'vLLM 0.25.0 (unreachable in the BLIS kernel)' },
  hbm_derate: { h100: 0.8, h200: 0.8, note: 'BLIS: vendor_spec transcription of the AIC prior, not measured' },
  moe_routing_imbalance_median: { h100: 0.998, h200: 0.999, note: 'vLLM 0.25.0 moe, power_law_1.01 / balanced' },
  moe_routing_imbalance_p90: { h100: 1.387, h200: 1.394, note: 'vLLM 0.25.0 moe' },
  attention_decode_floor: {
    h100: 14.5,
    h200: 13.5,
    note: 'vLLM 0.25.0; joint fit on every full-attention row (0.5 µs grid)',
  },
  attention_decode_rate: {
    h100: 2412000,
    h200: 2592000,
    note: 'vLLM 0.25.0; joint fit incl. cache-resident working sets',
  },
  attention_prefill_floor: { h100: 19.5, h200: 18.5, note: 'vLLM 0.25.0; with BLIS bf16 ramp' },
  attention_prefill_work_scale: {
    h100: 0.4,
    h200: 0.4,
    note: 'vLLM 0.25.0 (0.44 @746dc183); relative to BLIS bf16 ramp',
  },
  attention_decode_floor_swa: { h100: 15.0, h200: 14.0, note: 'vLLM 0.25.0; bytes with min(ctx, window)' },
  attention_decode_rate_swa: {
    h100: 871000,
    h200: 864000,
    note: 'vLLM 0.25.0; joint fit incl. cache-resident working sets',
  },
};

/** Published value for a coefficient name on a chip, with its note, or undefined. */
export function blisPublished(name: string, chip: string): { value: number; note: string } | undefined {
  const p = BLIS_PUBLISHED[name];
  if (p) {
    const v = chip === 'h100' ? p.h100 : chip === 'h200' ? p.h200 : undefined;
    return v === undefined ? undefined : { value: v, note: p.note };
  }
  const m =
    /^collective_(floor|peak_rate|transition_rate)_(all_reduce|all_gather|reduce_scatter|alltoall)_(fp16|int8)_(\d+)rank_(.+)$/.exec(
      name,
    );
  if (!m) return undefined;
  const [, kind, op, dtype, ranks, c] = m;
  if (c !== chip) return undefined;
  const t = BLIS_COLLECTIVES[chip]?.[op!]?.[dtype!]?.[Number(ranks)];
  if (!t) return undefined;
  const i = kind === 'floor' ? 0 : kind === 'peak_rate' ? 1 : 2;
  const fp16Rate = dtype === 'fp16' && i > 0;
  const lane = op === 'all_reduce' && dtype === 'fp16' ? 'vLLM custom all-reduce (CUDA graph) 0.24.0' : 'NCCL 2.29.2';
  return {
    value: t[i]!,
    note: fp16Rate
      ? `${lane}; published fp16 rates are likely element counts read as bytes: byte-correct ≈ 2× = ${2 * t[i]!}`
      : lane,
  };
}
