/**
 * `stepcal flops --model <name|graph.yaml> --batch <spec>` — main-model work of one step counted
 * from scheduled (q, k) per request, as (attention, total), in plain or FP8-equivalent FLOPs, and
 * MFU against a chip reference in the same convention (seed ch02 §2.5.1–2.5.2).
 */
import type { Command } from 'commander';
import { UserError } from '../../core/errors.ts';
import { loadChip } from '../../core/catalog/chip.ts';
import { oneOf, parsePositive, parsePositiveInt } from '../../analytics/args.ts';
import {
  COMPUTE_FORMATS,
  MFU_SCOPE,
  batchFlops,
  dominantGemmFormat,
  mfu,
  referencePeak,
  type ComputeFormat,
  type FlopsConvention,
  type FlopsCount,
} from '../../analytics/flops.ts';
import { loadModel } from '../../core/catalog/model.ts';
import { parseBatchSpec } from '../../pricer/batch.ts';
import { flopsModelFromGraph, graphPath, scheduledFromRequest } from '../../analytics/flops-graph.ts';
import { fmtFixed, fmtNum } from '../../core/render/format.ts';
import { renderTable } from '../../core/render/table.ts';

interface Opts {
  model: string;
  batch: string[];
  formatWeighted?: boolean;
  chip?: string;
  stepUs?: number;
  gpus: number;
  peakTflops?: number;
  gemmFormat?: ComputeFormat;
  attentionFormat: ComputeFormat;
  json?: boolean;
}

const collect = (v: string, prev: string[] = []) => [...prev, ...v.split(',').map((s) => s.trim()).filter(Boolean)];
const gflop = (x: number) => fmtFixed(x / 1e9, 3);

export function register(program: Command): void {
  program
    .command('flops')
    .description('Main-model FLOPs of one step from scheduled (q, k): (attention, total), plain or FP8-equivalent, and MFU (chapter 2 §2.5.1-2.5.2)')
    .requiredOption('--model <name|graph.yaml>', 'catalog model name (catalog/models/<name>/graph.yaml) or a graph YAML path')
    .requiredOption('--batch <spec>', 'decode:N@CTX, decode:NxT@CTX, prefill:NxTOKENS[@CTX]; repeat or comma-join', collect)
    .option('--format-weighted', 'FP8-equivalent accounting (per multiply-add: FP4 1, FP8 2, BF16 4, TF32/FP32 8) instead of plain FLOPs (2)')
    .option('--chip <name|file.yaml>', 'chip for the MFU reference (catalog/chips)')
    .option('--step-us <us>', 'measured step time for MFU, µs', parsePositive)
    .option('--gpus <n>', 'devices running this one model replica (e.g. tp); the reference is multiplied by n', parsePositiveInt, 1)
    .option('--peak-tflops <t>', 'override the chip reference, dense TFLOP/s per device, in the chosen convention', parsePositive)
    .option('--gemm-format <f>', `compute format of GEMMs without their own weight_dtype (${COMPUTE_FORMATS.join(', ')}); default from the model`, oneOf(COMPUTE_FORMATS))
    .option('--attention-format <f>', 'compute format of attention arithmetic', oneOf(COMPUTE_FORMATS), 'bf16')
    .option('--json', 'print JSON instead of the table')
    .action((opts: Opts) => {
      const convention: FlopsConvention = opts.formatWeighted ? 'fp8-equivalent' : 'plain';
      const graph = loadModel(opts.model);
      const file = graphPath(opts.model);
      const shape = flopsModelFromGraph(graph, file, {
        ...(opts.gemmFormat ? { gemm_format: opts.gemmFormat } : {}),
        attention_format: opts.attentionFormat,
      });
      const groups = opts.batch.map((spec) => {
        const reqs = parseBatchSpec(spec).map(scheduledFromRequest);
        return { spec, reqs, count: batchFlops(shape, reqs, convention) };
      });
      const total: FlopsCount = { attention: 0, non_attention: 0, logits: 0, total: 0 };
      for (const g of groups) for (const k of Object.keys(total) as Array<keyof FlopsCount>) total[k] += g.count[k];
      const positions = groups.reduce((s, g) => s + g.reqs.reduce((a, r) => a + r.q, 0), 0);

      let mfuOut: (ReturnType<typeof mfu> & { basis: string; gpus: number }) | undefined;
      if (opts.stepUs !== undefined) {
        let ref: { flops_per_s: number; basis: string };
        if (opts.peakTflops !== undefined) ref = { flops_per_s: opts.peakTflops * 1e12, basis: `given ${opts.peakTflops} TFLOP/s (${convention})` };
        else {
          if (!opts.chip) throw new UserError('MFU needs --chip (or --peak-tflops) together with --step-us');
          const chip = loadChip(opts.chip);
          try {
            ref = referencePeak(chip.peak_tflops, convention, dominantGemmFormat(shape));
          } catch (err) {
            throw new UserError(`${chip.name}: ${(err as Error).message}`);
          }
          ref.basis = `${chip.name} ${ref.basis}`;
        }
        mfuOut = { ...mfu(total.total, opts.stepUs, ref.flops_per_s * opts.gpus), basis: ref.basis, gpus: opts.gpus };
      } else if (opts.chip || opts.peakTflops) {
        throw new UserError('MFU needs --step-us (the measured step time) together with --chip or --peak-tflops');
      }

      const conventionText =
        convention === 'plain' ? 'plain FLOPs (2 per multiply-add, any format)' : 'FP8-equivalent FLOPs (per multiply-add: FP4 1, FP8 2, BF16 4, TF32/FP32 8)';
      if (opts.json) {
        process.stdout.write(
          JSON.stringify(
            {
              model: shape.name,
              graph: file,
              convention,
              groups: groups.map((g) => ({ spec: g.spec, requests: g.reqs.length, flops: g.count })),
              positions,
              flops: total,
              total_includes_attention: true,
              scope: MFU_SCOPE,
              omitted: shape.omitted,
              mfu: mfuOut ?? null,
            },
            null,
            2,
          ) + '\n',
        );
        return;
      }
      const rows = groups.map((g) => {
        const r0 = g.reqs[0];
        return [
          g.spec,
          String(g.reqs.length),
          r0 ? String(r0.q) : '-',
          r0 ? String(r0.k) : '-',
          r0 ? (r0.is_prompt ? 'prompt' : 'decode') : '-',
          gflop(g.count.attention),
          gflop(g.count.non_attention),
          gflop(g.count.logits),
          gflop(g.count.total),
        ];
      });
      rows.push(['all', String(groups.reduce((s, g) => s + g.reqs.length, 0)), '', '', '', gflop(total.attention), gflop(total.non_attention), gflop(total.logits), gflop(total.total)]);
      const out: string[] = [];
      out.push(`Main-model work of one step: ${shape.name} (${file}); convention: ${conventionText}`);
      out.push(
        renderTable(
          [
            { header: 'batch', align: 'left' },
            { header: 'requests' },
            { header: 'q (positions/req)' },
            { header: 'k (keys/req)' },
            { header: 'rows', align: 'left' },
            { header: 'attention (GFLOP)' },
            { header: 'other matrix (GFLOP)' },
            { header: 'logits (GFLOP)' },
            { header: 'total (GFLOP)' },
          ],
          rows,
        ).trimEnd(),
      );
      out.push(`total = attention + other matrix + logits (it already includes attention; never add the two): (${gflop(total.attention)}, ${gflop(total.total)}) GFLOP over ${positions} positions`);
      out.push(`scope: ${MFU_SCOPE}${shape.omitted.length ? `; also left out for this model: ${shape.omitted.join(', ')}` : ''}`);
      if (mfuOut) {
        out.push(
          `MFU = ${fmtNum(mfuOut.flops_per_s / 1e12, 3)} TFLOP/s counted / ${fmtNum(mfuOut.reference_flops_per_s / 1e12, 3)} TFLOP/s reference ` +
            `(${mfuOut.basis} × ${mfuOut.gpus} device${mfuOut.gpus > 1 ? 's' : ''}) = ${fmtFixed(100 * mfuOut.mfu, 2)} % (${convention} FLOPs, step ${opts.stepUs} µs)`,
        );
        if (mfuOut.mfu > 1) out.push('warning: MFU above 100 %: check the step time, --gpus and that the reference uses the same convention');
      }
      process.stdout.write(out.join('\n') + '\n');
    });
}

