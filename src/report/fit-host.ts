/**
 * The host part of the fit report (README "Host overheads", host_overheads.svg), drawn from
 * `fitHost`'s typed result (src/fit/host.ts). Pure.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { fmt } from '../fit/collective-provenance.ts';
import { BLIS_HOST_ASSUMED, type HostFit, type HostKindFit } from '../fit/host.ts';
import type { FitSection } from './fit-common.ts';

/** Markdown, summary lines and figure of the host fit (or of the assumed values it carried). */
export function hostSection(fit: HostFit, chip: Chip): FitSection {
  const kinds = fit.result.kinds;
  const L: string[] = [`## Host overheads (${chip.name})`, ''];
  const summary = kinds.map(
    (k) =>
      `host ${k.what}: a = ${fmt(k.fit.a_us)} µs, b = ${fmt(k.fit.b_us_per_kernel)} µs per unit over ${k.fit.n} N values (train geo ${fmt(k.train.geo)}x)`,
  );
  const figures = [];
  if (kinds.length) {
    L.push(...fittedText(kinds));
    const series: Series[] = kinds.flatMap((k) => [
      { label: `${k.what} measured`, style: 'scatter' as const, points: k.points },
      {
        label: `${k.what} fit`,
        style: 'line' as const,
        points: [k.ns[0]!, k.ns[k.ns.length - 1]!].map((x): [number, number] => [
          x,
          k.fit.a_us + k.fit.b_us_per_kernel * x,
        ]),
      },
    ]);
    figures.push({
      name: 'host_overheads.svg',
      svg: chart(series, {
        title: `${chip.name} host overheads: t = a + b·N`,
        x_label: 'N (kernels or graph nodes)',
        y_label: 'latency µs',
      }),
    });
  } else {
    L.push(
      'No host rows: nothing is fitted. Host terms are properties of the whole engine step and are never fitted from per-operator tables; ' +
        "the BLIS registry's assumed values are carried (method `assumed`, `fitted: false`), to be replaced per engine by `stepcal validate --fit-host`.",
      '',
    );
    summary.push(`host: no host rows; ${BLIS_HOST_ASSUMED.length} BLIS assumed values carried (not fitted)`);
  }
  L.push('| name | value | units | method |', '|---|---|---|---|');
  for (const c of fit.coefficients)
    L.push(
      `| ${c.name} | ${fmt(c.entry.value)} | ${c.entry.units} | ${c.entry.method}${c.entry.fitted ? ', fitted' : ''} |`,
    );
  L.push('');
  return { md: L.join('\n'), summary, figures };
}

function fittedText(kinds: readonly HostKindFit[]): string[] {
  const row = (k: HostKindFit) => {
    const f = k.fit;
    return `| ${k.what} | ${k.rows} | ${f.n} | ${fmt(f.a_us)} (${fmt(f.ci95_a[0])}–${fmt(f.ci95_a[1])}) | ${fmt(f.b_us_per_kernel)} (${fmt(f.ci95_b[0])}–${fmt(f.ci95_b[1])}) | ${fmt(k.train.geo)}x | ${k.holdout ? `${fmt(k.holdout.geo)}x` : '–'} |`;
  };
  return [
    'Fitted `t = a + b·N` per kind from host microbenchmark rows (weighted least squares with weights 1/t² on per-N medians; ci95 from its covariance with a Student-t quantile; holdout = largest N).',
    'Mapping: eager_launch b → `host_launch_per_kernel`; graph_replay a → `host_replay_graph_per_step`, b → `host_replay_graph_per_node`; dispatch b → `host_dispatch_per_kernel` (stepcal name).',
    'Caveat: BLIS charges `host_launch_per_kernel` × kernels in every graph mode (reference §4.10); a measured eager launch cost is larger than the residual-derived 3.2 µs it replaces, so check the step-level error before shipping it.',
    '',
    '| kind | rows | distinct N | a µs (ci95) | b µs per unit (ci95) | train geo | holdout geo |',
    '|---|---|---|---|---|---|---|',
    ...kinds.map(row),
    '',
  ];
}
