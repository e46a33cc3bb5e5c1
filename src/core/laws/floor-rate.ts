/**
 * The "floor + work / rate" law shared by several families (seed "One layer"; reference §4.4–4.6):
 *
 *   t_us = floor_us + work / rate
 *
 * - decode attention: work = KV bytes read, rate in bytes per µs (`attention_decode_*`);
 * - prefill attention: work = causal FLOPs / (bf16 peak · ε_bf16(tokens)) in µs, rate = work_scale;
 * - an HBM read with a per-call cost: work = bytes, rate = datasheet bytes per µs · hbm_derate;
 * - recurrent mixers: work = state bytes, rate in bytes per µs (`recurrent_*`).
 *
 * Pure. A rate ≤ 0 is the caller's error and yields Infinity, never a silent 0.
 */

/** floor_us + work / rate, in µs. */
export function floorPlusWork(floor_us: number, work: number, rate: number): number {
  return floor_us + work / rate;
}

/**
 * Time to stream `bytes` from HBM at the datasheet rate times the measured derate (seed "Memory";
 * reference §4.4: the pricer charges bytes / (datasheet · hbm_derate)), in µs.
 */
export function hbmReadUs(bytes: number, hbm_bytes_per_us: number, hbm_derate: number): number {
  return bytes / (hbm_bytes_per_us * hbm_derate);
}

/**
 * `floorPlusWork` with the rate folded into a per-unit cost at construction: floor_us + units ·
 * us_per_unit, where us_per_unit = floorPlusWork(0, work_per_unit, rate) (for instance µs per cached
 * token read = KV bytes per token / decode rate). In µs.
 */
export function floorPlusUnits(floor_us: number, units: number, us_per_unit: number): number {
  return floor_us + units * us_per_unit;
}
