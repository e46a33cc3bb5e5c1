/** `stepcal sweep`: price decode steps over batch sizes; print a table and write an SVG (seed figure). */
import path from 'node:path';
import type { Command } from 'commander';
import { parseFlagList, parseFlagNumber } from '../../core/flags.ts';
import { writeFileAtomic } from '../../core/io/fs.ts';
import { REPO_ROOT } from '../../core/catalog/chip.ts';
import { fmtDec } from '../../core/render/format.ts';
import { type Column, renderTable } from '../../core/render/table.ts';
import { type SweepRow, sweepDecode } from '../../pricer/sweep.ts';
import { sweepSvg } from '../../report/sweep.ts';
import { engineLine, setupPricer } from '../../pricer/setup.ts';
import { displayPath } from '../../core/io/paths.ts';
import { addDeploymentOptions, deploymentFromFlags } from './price.ts';

/** Columns of the sweep table (µs per step, and per request for NoOverlap). */
const SWEEP_COLUMNS: Column[] = [
  { header: 'batch' },
  ...[
    'sm_us',
    'hbm_us',
    'nvlink_us',
    'nic_us',
    'host_us',
    'NoOverlap_us',
    'CMOverlap_us',
    'Overlap_us',
    'us_per_req',
  ].map((header) => ({ header, width: 9 })),
  { header: 'bottleneck', align: 'left' },
];

function sweepCells(r: SweepRow): string[] {
  const p = r.price;
  const us = [
    p.resources_us.sm,
    p.resources_us.hbm,
    p.resources_us.nvlink,
    p.resources_us.nic,
    p.resources_us.host,
    p.no_overlap_us,
    p.compute_memory_overlap_us,
    p.overlap_us,
  ];
  return [
    String(r.batch),
    ...[...us, p.no_overlap_us / r.batch].map((v) => fmtDec(v, 1)),
    p.bottleneck + (p.extrapolated ? ' (extrapolated)' : ''),
  ];
}

export function register(program: Command): void {
  addDeploymentOptions(
    program
      .command('sweep')
      .description(
        'per-resource time and the three estimates (NoOverlap, CMOverlap, Overlap) vs batch size (every request decoding one token)',
      ),
  )
    .option(
      '--context <tokens>',
      "context each request decodes against, the new token included (≥ 2: a decode reads at least one cached token, as price's decode:N@CTX with CTX ≥ 1)",
      '4096',
    )
    .option('--batches <list>', 'comma-separated batch sizes', '1,2,4,8,16,32,64,128,256')
    .option(
      '--out <file>',
      'SVG path (default: fits/<chip>/sweep-<model>.svg under the repository root, a build output git ignores)',
    )
    .option('--json', 'print JSON')
    .action((o: Record<string, string | undefined> & { json?: boolean }) => {
      const s = setupPricer(o.model!, o.chip!, deploymentFromFlags(o), o.registry, o.engine);
      // The sweep decodes against ctx − 1 cached tokens (pricer/sweep.ts): with none cached it would be a prefill.
      const ctx = parseFlagNumber('--context', String(o.context), { integer: true, min: 2 });
      const sizes = parseFlagList('--batches', String(o.batches), { integer: true, min: 1 });
      // Under --spec-tokens k every decode row verifies 1 + k tokens (vLLM schedules the drafts with the token).
      const rows = sweepDecode(s.pricer, sizes, ctx, 1 + (s.deployment.speculative?.num_spec_tokens ?? 0));
      const info = s.pricer.info;
      const kv = info.kv_from_checkpoint
        ? `${info.kv_from_checkpoint.dtype}, the checkpoint's`
        : (s.deployment.kv_dtype ?? 'auto');
      const title = `${s.model.name} ${info.served_dtype} (KV ${kv}, ${info.kv_bytes_per_element} B/element) on ${s.deployment.tp}×${s.chip.name} (tp ${s.deployment.tp}), decode @ ${ctx}`;
      const out = o.out ?? path.join(REPO_ROOT, 'fits', s.chip.name, `sweep-${s.model.name}.svg`);
      writeFileAtomic(out, sweepSvg(rows, title));
      if (o.json) {
        process.stdout.write(
          `${JSON.stringify(
            {
              model: s.model.name,
              chip: s.chip.name,
              deployment: s.deployment,
              registry: displayPath(s.registry_file),
              engine_note: engineLine(s.engine),
              kv_bytes_per_element: info.kv_bytes_per_element,
              ...(info.kv_from_checkpoint ? { kv_from_checkpoint: info.kv_from_checkpoint } : {}),
              context: ctx,
              svg: out,
              rows,
            },
            null,
            2,
          )}\n`,
        );
        return;
      }
      process.stdout.write(`${title}\nregistry ${displayPath(s.registry_file)}\n${engineLine(s.engine)}\n\n`);
      process.stdout.write(renderTable(SWEEP_COLUMNS, rows.map(sweepCells), { gap: ' ' }));
      process.stdout.write(`\nwrote ${path.relative(process.cwd(), out) || out}\n`);
    });
}
