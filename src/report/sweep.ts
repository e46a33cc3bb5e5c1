/**
 * The sweep figure (seed "Composing the step", the deepseek-v3 figure): left, each resource's time
 * per step; right, the three estimates on the same scale. Data from src/pricer/sweep.ts.
 */
import { chart, type Series } from '../core/render/svg.ts';
import type { SweepRow } from '../pricer/sweep.ts';
import { RESOURCES } from '../pricer/types.ts';

/** Two side-by-side charts (log-log): per-resource µs, and NoOverlap/CMOverlap/Overlap µs, vs batch size. */
export function sweepSvg(rows: readonly SweepRow[], title: string): string {
  const res: Series[] = RESOURCES.filter((r) => rows.some((x) => x.price.resources_us[r] > 0)).map((r) => ({
    label: r,
    style: 'line' as const,
    points: rows.map((x) => [x.batch, x.price.resources_us[r]] as [number, number]),
  }));
  const all = rows
    .flatMap((x) => [
      x.price.no_overlap_us,
      x.price.compute_memory_overlap_us,
      x.price.overlap_us,
      ...RESOURCES.map((r) => x.price.resources_us[r]),
    ])
    .filter((v) => v > 0);
  const yr: [number, number] = [Math.min(...all), Math.max(...all)];
  const left = chart(res, {
    title: `${title}: time per resource`,
    x_label: 'requests in the batch',
    y_label: 'µs per step',
    x_log: true,
    y_log: true,
    width: 560,
    height: 400,
    y_range: yr,
  });
  const right = chart(
    [
      {
        label: 'NoOverlap',
        style: 'line',
        points: rows.map((x) => [x.batch, x.price.no_overlap_us] as [number, number]),
      },
      {
        label: 'CMOverlap',
        style: 'line',
        dash: '8 2 2 2',
        points: rows.map((x) => [x.batch, x.price.compute_memory_overlap_us] as [number, number]),
      },
      {
        label: 'Overlap',
        style: 'line',
        dash: '5 3',
        points: rows.map((x) => [x.batch, x.price.overlap_us] as [number, number]),
      },
    ],
    {
      title: 'step estimates',
      x_label: 'requests in the batch',
      y_label: 'µs per step',
      x_log: true,
      y_log: true,
      width: 560,
      height: 400,
      y_range: yr,
    },
  );
  const strip = (s: string) => s.replace(/^<svg[^>]*>\n/, '').replace(/<\/svg>\n?$/, '');
  // Give each half its own clip id so the two embedded charts do not share one.
  const l = strip(left)
    .replace(/id="plot"/g, 'id="plot-l"')
    .replace(/url\(#plot\)/g, 'url(#plot-l)');
  const r = strip(right)
    .replace(/id="plot"/g, 'id="plot-r"')
    .replace(/url\(#plot\)/g, 'url(#plot-r)');
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="1120" height="400" viewBox="0 0 1120 400" font-family="sans-serif" font-size="11">\n` +
    `<g>${l}</g>\n<g transform="translate(560,0)">${r}</g>\n</svg>\n`
  );
}
