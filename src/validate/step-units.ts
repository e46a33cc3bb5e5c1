/**
 * Units check of held-out step files (issue 12 item 2): a file whose measured step times sit a
 * median ≥ STEP_UNITS_FACTOR× away from the priced times is a units slip (ms given as µs reads
 * ×1000 too fast), not a 50,000 % error. Held-out errors of a working registry are tens of percent
 * (README "Accuracy": pooled MAPE 6.8–19.8 %, worst group p90 under 50 %), so a 20× median is no fit
 * error. Pure.
 */
import { UserError } from '../core/errors.ts';
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
