/**
 * The token range a registry's GEMM ramp was fitted on (for the pricer's `extrapolated` flag).
 * Pure: reads resolved registry entries and chip facts, no I/O.
 */
import { peakFlopsPerUs, type Chip } from '../core/catalog/chip.ts';
import { bytesPerElement } from '../core/catalog/dtypes.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import type { ComputeFormat } from './deployment.ts';
import { computeBoundMinM } from '../core/laws/gemm.ts';

/** `m ≥ 206.1` (or `m >= 206.1`) as the GEMM fitter writes it in the evidence filter (src/fit/gemm.ts). */
const M_EDGE = /\bm\s*(?:≥|>=)\s*([0-9]+(?:\.[0-9]+)?)/;

export interface GemmFittedRange {
  /** Smallest m (tokens) of the rows the ramp was fitted on. */
  min_m: number;
  /** Where `min_m` came from, for the note. */
  source: string;
}

/**
 * Lower edge of the m range `gemm_m_half_<ramp>` was fitted on. The registry states no m-range field,
 * so: the `m ≥ X` the fitter writes into the entry's evidence (inputs' filter, then notes, then the
 * sources' citations); else, for an entry that states nothing (imported values such as BLIS's), the
 * compute-bound ridge peak · bytes / (2 · HBM) of that format on the chip (laws/gemm.ts
 * `computeBoundMinM`, the fitter's own row filter).
 * @returns undefined when the registry has no m_half for the ramp or the chip no peak for its format.
 */
export function gemmFittedRange(
  reg: ResolvedCoefficients,
  ramp: ComputeFormat['ramp'],
  chip: Chip,
): GemmFittedRange | undefined {
  const name = `gemm_m_half_${ramp}`;
  const e = reg.entries.get(name)?.entry;
  if (!e) return undefined;
  const texts = [
    ...(e.evidence?.inputs ?? []).map((i) => i.filter),
    ...(e.evidence?.notes ?? []),
    ...(e.sources ?? []).map((s) => s.cite),
  ];
  for (const t of texts) {
    const m = M_EDGE.exec(t);
    if (m) return { min_m: Number(m[1]), source: `${name} evidence: fitted on compute-bound rows, m ≥ ${m[1]}` };
  }
  const peak = peakFlopsPerUs(chip, ramp === 'mxfp8' ? 'fp8' : ramp);
  if (peak === undefined) return undefined;
  const m = computeBoundMinM(peak, bytesPerElement(ramp), chip.hbm_bytes_per_us);
  return {
    min_m: m,
    source: `${name} states no fitted range; taken as ${chip.name}'s ${ramp} compute-bound ridge peak·bytes/(2·HBM) = ${m.toFixed(1)}`,
  };
}
