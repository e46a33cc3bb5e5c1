/** Text and JSON of `stepcal flops` (a counted step and its MFU; src/analytics/flops-step.ts). Pure. */
import { MFU_SCOPE } from '../analytics/flops.ts';
import type { StepFlops, StepMfu } from '../analytics/flops-step.ts';
import { fmtFixed, fmtNum } from '../core/render/format.ts';
import { renderTable } from '../core/render/table.ts';

const gflop = (x: number) => fmtFixed(x / 1e9, 3);

const CONVENTION_TEXT = {
  plain: 'plain FLOPs (2 per multiply-add, any format)',
  'fp8-equivalent': 'FP8-equivalent FLOPs (per multiply-add: FP4 1, FP8 2, BF16 4, TF32/FP32 8)',
} as const;

/** The `--json` document: per spec, totals, scope, what the model leaves out, and MFU (or null). */
export function flopsJson(s: StepFlops, m: StepMfu | undefined): unknown {
  return {
    model: s.shape.name,
    graph: s.file,
    convention: s.convention,
    groups: s.groups.map((g) => ({ spec: g.spec, requests: g.reqs.length, flops: g.count })),
    positions: s.positions,
    flops: s.total,
    total_includes_attention: true,
    scope: MFU_SCOPE,
    omitted: s.shape.omitted,
    mfu: m ?? null,
  };
}

/** One row per batch spec, then the `all` row (GFLOP, 3 decimals). */
function flopsRows(s: StepFlops): string[][] {
  const rows = s.groups.map((g) => {
    const r0 = g.reqs[0];
    const c = g.count;
    const shape = r0 ? [String(r0.q), String(r0.k), r0.is_prompt ? 'prompt' : 'decode'] : ['-', '-', '-'];
    return [
      g.spec,
      String(g.reqs.length),
      ...shape,
      gflop(c.attention),
      gflop(c.non_attention),
      gflop(c.logits),
      gflop(c.total),
    ];
  });
  const t = s.total;
  rows.push([
    'all',
    String(s.groups.reduce((a, g) => a + g.reqs.length, 0)),
    '',
    '',
    '',
    gflop(t.attention),
    gflop(t.non_attention),
    gflop(t.logits),
    gflop(t.total),
  ]);
  return rows;
}

const FLOPS_COLUMNS = [
  { header: 'batch', align: 'left' as const },
  { header: 'requests' },
  { header: 'q (positions/req)' },
  { header: 'k (keys/req)' },
  { header: 'rows', align: 'left' as const },
  { header: 'attention (GFLOP)' },
  { header: 'other matrix (GFLOP)' },
  { header: 'logits (GFLOP)' },
  { header: 'total (GFLOP)' },
];

/** The text output: header line, table, the (attention, total) line, scope, and MFU when measured. `step_us` is the measured step. */
export function flopsText(s: StepFlops, m: StepMfu | undefined, step_us?: number): string {
  const out: string[] = [];
  out.push(`Main-model work of one step: ${s.shape.name} (${s.file}); convention: ${CONVENTION_TEXT[s.convention]}`);
  out.push(renderTable(FLOPS_COLUMNS, flopsRows(s)).trimEnd());
  const t = s.total;
  out.push(
    `total = attention + other matrix + logits (it already includes attention; never add the two): (${gflop(t.attention)}, ${gflop(t.total)}) GFLOP over ${s.positions} positions`,
  );
  out.push(
    `scope: ${MFU_SCOPE}${s.shape.omitted.length ? `; also left out for this model: ${s.shape.omitted.join(', ')}` : ''}`,
  );
  if (m) {
    out.push(
      `MFU = ${fmtNum(m.flops_per_s / 1e12, 3)} TFLOP/s counted / ${fmtNum(m.reference_flops_per_s / 1e12, 3)} TFLOP/s reference ` +
        `(${m.basis} × ${m.gpus} device${m.gpus > 1 ? 's' : ''}) = ${fmtFixed(100 * m.mfu, 2)} % (${s.convention} FLOPs, step ${step_us} µs)`,
    );
    if (m.mfu > 1)
      out.push('warning: MFU above 100 %: check the step time, --gpus and that the reference uses the same convention');
  }
  return `${out.join('\n')}\n`;
}
