/**
 * Units-slip check of a fused-MoE table (issue 13 "Units": a MoE latency ×1000 is refused with file,
 * row and column). The bound uses bytes the layer must read whatever the routing: on a rank holding every
 * expert (ep = 1) a token touches at least one local expert, so one layer reads at least
 * 3 · H · I/tp · bytes_per_element of expert weights (gated FFN). Not k experts: the skewed synthetic
 * routings may pick one expert several times (h200 rows with top-22 of 512 experts run above HBM if k
 * distinct experts are assumed).
 * - upper bound: on rows where those bytes exceed NOT_CACHE_RESIDENT_L2_MULTIPLE × L2, bytes / latency_us
 *   must not exceed UNITS_SLIP_HBM_FACTOR × the datasheet HBM rate (a table in ms read as µs ÷1000 breaks it);
 * - lower bound: the best such row must reach UNITS_SLIP_MIN_HBM_FRACTION of HBM (a ×1000 slip the other way
 *   puts every row below 0.1 %).
 * dtypes whose weight width is unknown are not judged; a table with no qualifying row is not judged.
 */
import { InputError } from '../core/errors.ts';
import { type Chip, l2Bytes } from '../core/catalog/chip.ts';
import type { RowList } from './row-columns.ts';
import type { MoeRow } from './schema.ts';
import { NOT_CACHE_RESIDENT_L2_MULTIPLE } from './units.ts';

/** Upper bound: a MoE layer's least weight bytes / latency ≤ this × the datasheet HBM rate. */
export const UNITS_SLIP_HBM_FACTOR = 1.05;
/** Lower bound: the best qualifying row must reach this fraction of the datasheet HBM rate. */
export const UNITS_SLIP_MIN_HBM_FRACTION = 0.05;

/** Weight bytes per element of a fused-MoE table's `moe_dtype` spelling (undefined: not judged). */
export function moeWeightBytes(dtype: string): number | undefined {
  const d = dtype.toLowerCase();
  if (d === 'bf16' || d === 'fp16') return 2;
  if (d.startsWith('fp8')) return 1;
  if (d.startsWith('w4') || d.startsWith('int4') || d.startsWith('nvfp4') || d.startsWith('mxfp4')) return 0.5;
  return undefined;
}

/** Least expert-weight bytes one layer reads (ep = 1 rows; undefined otherwise or for an unknown dtype). */
export function moeMinWeightBytes(r: MoeRow): number | undefined {
  const b = moeWeightBytes(r.dtype);
  if (b === undefined || r.ep !== 1 || r.tokens < 1) return undefined;
  return 3 * r.hidden * (r.inter / r.tp) * b;
}

/**
 * @param rows rows in input order; row i is reported as input row i+1
 * @throws InputError containing "check units (ms vs µs vs s?)"
 */
export function checkMoeUnits(rows: RowList<MoeRow>, chip: Chip, file: string, latencyColumn = 'latency'): void {
  const min = NOT_CACHE_RESIDENT_L2_MULTIPLE * l2Bytes(chip.l2_mib);
  const hbm = chip.hbm_bytes_per_us;
  let best = -1;
  let bestI = -1;
  let n = 0;
  for (let i = 0; i < rows.length; i++) {
    const r = rows.at(i)!;
    const bytes = moeMinWeightBytes(r);
    if (bytes === undefined || bytes <= min) continue;
    n++;
    const bw = bytes / r.latency_us;
    if (bw > UNITS_SLIP_HBM_FACTOR * hbm) {
      throw new InputError(
        { file, row: i + 1, column: latencyColumn },
        `MoE layer reading at least ${(bytes / 1e6).toFixed(0)} MB of expert weights in ${r.latency_us} µs implies ${(bw / 1e6).toFixed(2)} TB/s, ` +
          `${(bw / hbm).toFixed(1)}× the ${chip.name} datasheet HBM of ${(hbm / 1e6).toFixed(2)} TB/s; check units (ms vs µs vs s?)`,
      );
    }
    if (bw > best) {
      best = bw;
      bestI = i;
    }
  }
  if (n === 0 || best >= UNITS_SLIP_MIN_HBM_FRACTION * hbm) return;
  const r = rows.at(bestI)!;
  throw new InputError(
    { file, row: bestI + 1, column: latencyColumn },
    `the fastest of ${n} MoE layers reading more than ${NOT_CACHE_RESIDENT_L2_MULTIPLE}× L2 of expert weights (${r.latency_us} µs) implies ` +
      `${((100 * best) / hbm).toFixed(3)} % of the ${chip.name} datasheet HBM (below ${UNITS_SLIP_MIN_HBM_FRACTION * 100} %); check units (ms vs µs vs s?)`,
  );
}
