/**
 * Units check of held-out step files (issue 12 item 2): a file whose measured step times sit a
 * median ≥ STEP_UNITS_FACTOR× away from the priced times is a units slip (ms given as µs reads
 * ×1000 too fast), not a 50,000 % error. Held-out errors of a working registry are tens of percent
 * (README "Accuracy": pooled MAPE 6.8–19.8 %, worst group p90 under 50 %), so a 20× median is no fit
 * error. One row in another unit leaves the median where it was (one row of 228 at 83.8 for 83,827 µs
moved the pooled MAPE from 42.6 % to 392 %), so each row is also judged against its own priced work
(`checkStepRowUnits`), as the importer judges each operator row (src/measurements/units.ts,
"this row alone is in another unit"). Pure.
 */
import { InputError, UserError } from '../core/errors.ts';
import { median } from '../core/numeric/stats.ts';
import { likelyFactor } from '../measurements/units.ts';

/** Median |ln(priced / measured)| a file may show before it is refused as a units slip: a factor 20. */
export const STEP_UNITS_FACTOR = 20;

/**
 * @param rows held-out rows with their file and measured µs
 * @param priced_us the priced time of each row (same order), µs, composition without host fit
 * @throws UserError naming the file, the median ratio, rows and the likely factor, ending in "units?"
 */
export function checkStepUnits(
  rows: ReadonlyArray<{ file: string; measured_us: number }>,
  priced_us: readonly number[],
): void {
  const byFile = new Map<string, number[]>();
  rows.forEach((r, i) => {
    const p = priced_us[i]!;
    if (!(p > 0)) return;
    let a = byFile.get(r.file);
    if (!a) {
      a = [];
      byFile.set(r.file, a);
    }
    a.push(p / r.measured_us);
  });
  for (const [file, ratios] of byFile) {
    const m = median(ratios);
    if (m >= STEP_UNITS_FACTOR || m <= 1 / STEP_UNITS_FACTOR)
      throw new UserError(
        `${file} column "measured_us": the priced step time is a median ${m >= 1 ? `${m.toPrecision(3)}×` : `1/${(1 / m).toPrecision(3)} of`} the measured one over ${ratios.length} rows ` +
          `(a fit error is tens of percent, not ×${STEP_UNITS_FACTOR}); likely ${likelyFactor(m)}; units? (measured_us must be µs)`,
      );
  }
}

/**
 * How far under its own priced work (without host, the fastest of the three compositions) one row's
 * measured time may sit before it is refused as in another unit: 1/50. Shipped rows
 * (measurements/{h100,a100}/splitwise.steps.csv, flagged rows included) reach 1/10.7 (an a100 static
 * batch that stopped early): a 4.7× margin; a ×1000 slip of any row lands 20× past the bound. Only the
 * fast side is judged: a row far slower than its price is as often a host or engine cost the registry
 * lacks (the host fit's business) as a unit slip.
 */
export const STEP_ROW_FACTOR = 50;

/** A row's priced work at the registry's rates, µs (validate/expand.ts RowPrice). */
export interface RowWork {
  no_overlap_nohost_us: number;
  cm_overlap_nohost_us: number;
  overlap_nohost_us: number;
}

const sig = (x: number) => Number(x.toPrecision(4)).toLocaleString('en-US');

/**
 * One row in another unit: refuse a row measured under 1/STEP_ROW_FACTOR of its priced work without
 * host (every step of it reads the weights from HBM once), with "ms instead of µs?".
 * @param rows held-out rows with their file, 1-based data row and measured µs
 * @param work each row's priced work (same order), µs; rows priced ≤ 0 are not judged
 * @throws InputError naming file, row and column "measured_us", the measured and priced µs and the ratio
 */
export function checkStepRowUnits(
  rows: ReadonlyArray<{ file: string; row: number; measured_us: number }>,
  work: readonly RowWork[],
): void {
  rows.forEach((r, i) => {
    const w = work[i]!;
    const lo = Math.min(w.no_overlap_nohost_us, w.cm_overlap_nohost_us, w.overlap_nohost_us);
    const m = r.measured_us;
    if (lo > 0 && m * STEP_ROW_FACTOR < lo)
      throw new InputError(
        { file: r.file, row: r.row, column: 'measured_us' },
        `measured ${sig(m)} µs is 1/${sig(lo / m)} of this row's priced work (${sig(lo)} µs at the registry's rates, ` +
          `without host, the fastest composition); no step runs under 1/${STEP_ROW_FACTOR} of it, so this row alone is in another unit: ms instead of µs?`,
      );
  });
}
