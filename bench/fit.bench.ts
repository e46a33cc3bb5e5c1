/**
 * Times `fitAll` for h200 from the shipped measurements, bootstrap (200 resamples) included, and
 * prints the time per family against the 20 s goal (2 cores). Bootstraps run on envelope points
 * (GEMM ramp), on per-(n,k) cells clustered by whole k (shape halves) and on ≤ 3000-row resamples
 * (attention, HBM); see docs/fitting.md.
 */
import { fitAll } from '../src/fit/index.ts';

export default async function bench(): Promise<void> {
  const t0 = performance.now();
  const r = await fitAll('h200');
  const total_s = (performance.now() - t0) / 1000;
  for (const [family, ms] of Object.entries(r.timings_ms))
    process.stdout.write(`  ${family.padEnd(18)} ${(ms / 1000).toFixed(2)} s\n`);
  process.stdout.write(
    `fit all h200 (incl. reading measurements): ${total_s.toFixed(1)} s; goal 20 s; ratio ${(total_s / 20).toFixed(2)} (≤ 1 meets the goal)\n`,
  );
  // issue 13: the new families (expert time on the moe rows already read; MLA, reading its own table) add ≤ 1.0 s.
  const experts_s = (r.timings_ms.moe_experts ?? 0) / 1000;
  const mla_s = (r.timings_ms.mla ?? 0) / 1000;
  const added = experts_s + mla_s;
  process.stdout.write(
    `issue 13 families: moe_experts ${experts_s.toFixed(2)} s + mla ${mla_s.toFixed(2)} s (incl. reading its table) = ${added.toFixed(2)} s added; goal ≤ 1.0 s; ratio ${added.toFixed(2)}\n`,
  );
}
