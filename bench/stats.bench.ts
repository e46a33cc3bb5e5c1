/**
 * Percentiles and mean on the sizes the hot paths use: 200 values (one bootstrap's estimates, a
 * validation regime's APEs) and 20,000 (a fitter's residuals). Compares the sort-based definitions
 * stepcal used before (written out below as the reference) with src/core/numeric/stats.ts, which now
 * selects with simple-statistics (`quantile`, `quickselect`), and our `mean` with simple-statistics'
 * `mean`. Prints µs per call, the ratio, and whether the values are identical.
 *
 * Outcome (README, Design notes): the percentiles use simple-statistics (same values, several
 * times faster); `mean` stays ours because simple-statistics sums with Kahan–Babuška compensation, so
 * its last digits differ and switching would move registry values.
 */
import * as ss from 'simple-statistics';
import { mean, median, percentileNearestRank, percentileType7, seededRandom } from '../src/core/numeric/stats.ts';

const sorted = (v: readonly number[]) => [...v].sort((a, b) => a - b);
const nearestRankBySort = (v: readonly number[], p: number) => sorted(v)[Math.max(0, Math.ceil(p * v.length) - 1)]!;
function type7BySort(v: readonly number[], p: number): number {
  const s = sorted(v);
  const h = (s.length - 1) * p;
  const lo = Math.floor(h);
  return s[lo]! + (h - lo) * (s[Math.ceil(h)]! - s[lo]!);
}

function timeUs(f: () => number, reps: number): number {
  let sink = 0;
  for (let i = 0; i < Math.min(reps, 50); i++) sink += f();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) sink += f();
  if (Number.isNaN(sink)) process.stdout.write('');
  return ((performance.now() - t0) * 1000) / reps;
}

function row(name: string, aName: string, a: () => number, bName: string, b: () => number, reps: number): void {
  const ta = timeUs(a, reps);
  const tb = timeUs(b, reps);
  const same = a() === b() ? 'identical values' : `values differ (${a()} vs ${b()})`;
  const faster = ta <= tb ? `${aName} ${(tb / ta).toFixed(1)}× faster` : `${bName} ${(ta / tb).toFixed(1)}× faster`;
  process.stdout.write(
    `  ${name.padEnd(22)} ${aName} ${ta.toFixed(1).padStart(8)} µs  ${bName} ${tb.toFixed(1).padStart(8)} µs  ${faster}; ${same}\n`,
  );
}

export default async function bench(): Promise<void> {
  const rand = seededRandom(7);
  for (const n of [200, 20_000]) {
    const x = Array.from({ length: n }, () => 1000 * Math.exp(rand()));
    const reps = n === 200 ? 20_000 : 200;
    process.stdout.write(`n = ${n} (sort = previous implementation, stats = src/core/numeric/stats.ts):\n`);
    row(
      'median',
      'sort',
      () => type7BySort(x, 0.5),
      'stats',
      () => median(x),
      reps,
    );
    row(
      'type 7, p 0.975',
      'sort',
      () => type7BySort(x, 0.975),
      'stats',
      () => percentileType7(x, 0.975),
      reps,
    );
    row(
      'nearest rank, p 0.9',
      'sort',
      () => nearestRankBySort(x, 0.9),
      'stats',
      () => percentileNearestRank(x, 0.9),
      reps,
    );
    row(
      'mean',
      'stats',
      () => mean(x),
      'simple-statistics',
      () => ss.mean(x),
      reps,
    );
  }
}
