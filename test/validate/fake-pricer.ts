/**
 * A fake pricer with closed-form prices, for validation tests:
 * prefill step (any request schedules > 1 token) = a + b·Σ scheduled tokens (charged to SM),
 * decode step = c + d·Σ computed tokens (charged to HBM), host = h per step; a prefill step's
 * all-reduce = e·Σ scheduled tokens (NVLink, default e = 0, never scaled by s), added to every composition;
 * NoOverlap = work + host, CMOverlap = cm_factor·work + host, Overlap = overlap_factor·work + host.
 * `sm_scale` multiplies the SM (prefill) work, as the real pricer's `sm_scale` option does.
 */
import type { Batch, Pricer, StepPrice } from '../../src/pricer/types.ts';

export interface FakeCoeffs {
  a: number;
  b: number;
  c: number;
  d: number;
  h: number;
  /** NVLink µs per scheduled token of a prefill step (default 0). */
  e?: number;
  overlap_factor?: number;
  /** CMOverlap = cm_factor · work + host (default 1; keep overlap_factor ≤ cm_factor ≤ 1). */
  cm_factor?: number;
  /** Extrapolation notes every decode step carries (default none). */
  decode_notes?: string[];
}

export function fakePricer(k: FakeCoeffs, sm_scale = 1): Pricer & { calls: number } {
  const p = {
    calls: 0,
    price(batch: Batch): StepPrice {
      p.calls++;
      const isPrefill = batch.requests.some((r) => r.scheduled_tokens > 1);
      let sm = 0;
      let hbm = 0;
      let nvlink = 0;
      const tokens = batch.requests.reduce((s, r) => s + r.scheduled_tokens, 0);
      if (isPrefill) {
        sm = sm_scale * (k.a + k.b * tokens);
        nvlink = (k.e ?? 0) * tokens;
      } else hbm = k.c + k.d * batch.requests.reduce((s, r) => s + r.computed_tokens, 0);
      const work = sm + hbm;
      return {
        no_overlap_us: work + nvlink + k.h,
        overlap_us: (k.overlap_factor ?? 1) * work + nvlink + k.h,
        compute_memory_overlap_us: (k.cm_factor ?? 1) * work + nvlink + k.h,
        bottleneck: isPrefill ? 'sm' : 'hbm',
        resources_us: { sm, hbm, nvlink, nic: 0, host: k.h },
        extrapolated: !isPrefill && (k.decode_notes?.length ?? 0) > 0,
        extrapolation_notes: isPrefill ? [] : (k.decode_notes ?? []),
      };
    },
  };
  return p;
}

/** A steps.csv text from partial rows (header = all columns used). */
export function stepsCsv(rows: Array<Record<string, string | number>>): string {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  return `${[cols.join(','), ...rows.map((r) => cols.map((c) => String(r[c] ?? '')).join(','))].join('\n')}\n`;
}

export const BASE = { model: 'm', chip: 'h100', tp: 2, weight_dtype: 'bf16', engine: 'e', source: 'test' };
