/**
 * `stepcal flops --model <name|graph.yaml> --batch <spec>` — main-model work of one step counted
 * from scheduled (q, k) per request, as (attention, total), in plain or FP8-equivalent FLOPs, and
 * MFU against a chip reference in the same convention (seed ch02 §2.5.1–2.5.2).
 */
import type { Command } from 'commander';
import { oneOf, parsePositive, parsePositiveInt } from '../../analytics/args.ts';
import { COMPUTE_FORMATS, type ComputeFormat } from '../../analytics/flops.ts';
import { stepFlops, stepMfu } from '../../analytics/flops-step.ts';
import { flopsJson, flopsText } from '../../report/flops.ts';

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

const collect = (v: string, prev: string[] = []) => [
  ...prev,
  ...v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];

export function register(program: Command): void {
  program
    .command('flops')
    .description(
      'Main-model FLOPs of one step from scheduled (q, k): (attention, total), plain or FP8-equivalent, and MFU (chapter 2 §2.5.1-2.5.2)',
    )
    .requiredOption(
      '--model <name|graph.yaml>',
      'catalog model name (catalog/models/<name>/graph.yaml) or a graph YAML path',
    )
    .requiredOption(
      '--batch <spec>',
      'decode:N@CTX, decode:NxT@CTX, prefill:NxTOKENS[@CTX]; repeat or comma-join',
      collect,
    )
    .option(
      '--format-weighted',
      'FP8-equivalent accounting (per multiply-add: FP4 1, FP8 2, BF16 4, TF32/FP32 8) instead of plain FLOPs (2)',
    )
    .option('--chip <name|file.yaml>', 'chip for the MFU reference (catalog/chips)')
    .option('--step-us <us>', 'measured step time for MFU, µs', parsePositive)
    .option(
      '--gpus <n>',
      'devices running this one model replica (e.g. tp); the reference is multiplied by n',
      parsePositiveInt,
      1,
    )
    .option(
      '--peak-tflops <t>',
      'override the chip reference, dense TFLOP/s per device, in the chosen convention',
      parsePositive,
    )
    .option(
      '--gemm-format <f>',
      `compute format of GEMMs without their own weight_dtype (${COMPUTE_FORMATS.join(', ')}); default from the model`,
      oneOf(COMPUTE_FORMATS),
    )
    .option('--attention-format <f>', 'compute format of attention arithmetic', oneOf(COMPUTE_FORMATS), 'bf16')
    .option('--json', 'print JSON instead of the table')
    .action((opts: Opts) => {
      const counted = stepFlops({
        model: opts.model,
        batch: opts.batch,
        convention: opts.formatWeighted ? 'fp8-equivalent' : 'plain',
        ...(opts.gemmFormat ? { gemmFormat: opts.gemmFormat } : {}),
        attentionFormat: opts.attentionFormat,
      });
      const m = stepMfu(counted, {
        gpus: opts.gpus,
        ...(opts.stepUs !== undefined ? { step_us: opts.stepUs } : {}),
        ...(opts.chip ? { chip: opts.chip } : {}),
        ...(opts.peakTflops !== undefined ? { peak_tflops: opts.peakTflops } : {}),
      });
      process.stdout.write(
        opts.json ? `${JSON.stringify(flopsJson(counted, m), null, 2)}\n` : flopsText(counted, m, opts.stepUs),
      );
    });
}
