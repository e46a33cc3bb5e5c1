/**
 * Rates under peaks, within noise (issue 15 item 3): an attention rate (bytes/µs) fitted above the
 * datasheet HBM bandwidth cannot be a DRAM rate, but a fitted rate carries its bootstrap ci95. When that
 * interval reaches down to the datasheet rate, the excess is within the measured noise: the value is
 * projected onto the constraint (set to the datasheet rate, the nearest feasible value), the ci95 kept,
 * and the entry's evidence says so. A rate whose whole ci95 lies above the datasheet is left for the
 * gates to refuse. In place; pure otherwise.
 */
import type { Chip } from '../core/catalog/chip.ts';
import type { FittedCoefficient } from './types.ts';

/**
 * Repair attention rates above the datasheet HBM bandwidth within their ci95 (module comment).
 * @returns one message per repaired entry.
 */
export function repairRatesUnderPeak(chip: Chip, coefficients: readonly FittedCoefficient[]): string[] {
  const out: string[] = [];
  const peak = chip.hbm_bytes_per_us;
  for (const { name, entry: e } of coefficients) {
    if (!(name.startsWith('attention_') && name.includes('_rate')) || e.method !== 'measured') continue;
    if (!(e.value > peak) || !e.ci95 || e.ci95[0] > peak) continue;
    const note = `${name}: fitted rate ${e.value} B/us is ${(100 * (e.value / peak - 1)).toFixed(2)}% above the datasheet HBM ${peak} B/us, within its ci95 [${e.ci95[0]}, ${e.ci95[1]}] (the measured noise): set to the datasheet rate (projection onto rate ≤ peak)`;
    e.value = peak;
    e.evidence = { ...(e.evidence ?? {}), notes: [...(e.evidence?.notes ?? []), note] } as typeof e.evidence;
    out.push(`repaired within noise: ${note}`);
  }
  return out;
}
