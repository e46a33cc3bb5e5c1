/**
 * One step's main-model work from batch specs, and its MFU against a chip reference (seed ch02
 * §2.5.1–2.5.2): the library call behind `stepcal flops`. Reads the model graph and chip files of
 * the catalog; writes nothing.
 */
import { loadChip } from '../core/catalog/chip.ts';
import { loadModel } from '../core/catalog/model.ts';
import { UsageError, UserError } from '../core/errors.ts';
import { parseBatchSpec } from '../pricer/batch.ts';
import {
  batchFlops,
  dominantGemmFormat,
  type ComputeFormat,
  type FlopsConvention,
  type FlopsCount,
  type FlopsModel,
  type Mfu,
  mfu,
  referencePeak,
} from './flops.ts';
import { flopsModelFromGraph, graphPath, scheduledFromRequest } from './flops-graph.ts';

/** What to count: model, batch specs, accounting convention and compute formats. */
export interface StepFlopsInput {
  /** catalog model name or a graph YAML path */
  model: string;
  /** batch specs (`decode:N@CTX`, `prefill:NxTOKENS[@CTX]`, …) */
  batch: readonly string[];
  convention: FlopsConvention;
  gemmFormat?: ComputeFormat;
  attentionFormat: ComputeFormat;
}

/** One batch spec's requests and their FLOPs. */
export interface FlopsGroup {
  spec: string;
  reqs: ReturnType<typeof scheduledFromRequest>[];
  count: FlopsCount;
}

/** A step's FLOPs: per spec, summed, and the positions (scheduled tokens) they cover. */
export interface StepFlops {
  shape: FlopsModel;
  /** the graph file read */
  file: string;
  convention: FlopsConvention;
  groups: FlopsGroup[];
  total: FlopsCount;
  positions: number;
}

/**
 * Count one step's FLOPs, spec by spec (FLOPs; `total` = attention + other matrix + logits).
 * @throws UserError for an unknown model or a malformed batch spec
 */
export function stepFlops(o: StepFlopsInput): StepFlops {
  const graph = loadModel(o.model);
  const file = graphPath(o.model);
  const shape = flopsModelFromGraph(graph, file, {
    ...(o.gemmFormat ? { gemm_format: o.gemmFormat } : {}),
    attention_format: o.attentionFormat,
  });
  const groups = o.batch.map((spec) => {
    const reqs = parseBatchSpec(spec).map(scheduledFromRequest);
    return { spec, reqs, count: batchFlops(shape, reqs, o.convention) };
  });
  const total: FlopsCount = { attention: 0, non_attention: 0, logits: 0, total: 0 };
  for (const g of groups) for (const k of Object.keys(total) as Array<keyof FlopsCount>) total[k] += g.count[k];
  const positions = groups.reduce((s, g) => s + g.reqs.reduce((a, r) => a + r.q, 0), 0);
  return { shape, file, convention: o.convention, groups, total, positions };
}

/** MFU with the reference it was measured against (`basis`) and the devices it spans. */
export type StepMfu = Mfu & { basis: string; gpus: number };

/** What MFU needs: the measured step and a reference (a chip, or a peak given in the same convention). */
export interface MfuInput {
  step_us?: number;
  chip?: string;
  peak_tflops?: number;
  gpus: number;
}

/**
 * MFU of a counted step: counted FLOP/s over the reference (dense TFLOP/s per device × gpus), or
 * undefined when no step time is given.
 * @throws UsageError (exit 2) when a step time lacks a reference or a reference lacks a step time; UserError when
 *   the chip has no peak for the convention
 */
export function stepMfu(s: StepFlops, o: MfuInput): StepMfu | undefined {
  if (o.step_us === undefined) {
    if (o.chip || o.peak_tflops)
      throw new UsageError('MFU needs --step-us (the measured step time) together with --chip or --peak-tflops');
    return undefined;
  }
  let ref: { flops_per_s: number; basis: string };
  if (o.peak_tflops !== undefined)
    ref = { flops_per_s: o.peak_tflops * 1e12, basis: `given ${o.peak_tflops} TFLOP/s (${s.convention})` };
  else {
    if (!o.chip) throw new UsageError('MFU needs --chip (or --peak-tflops) together with --step-us');
    const chip = loadChip(o.chip);
    try {
      ref = referencePeak(chip.peak_tflops, s.convention, dominantGemmFormat(s.shape));
    } catch (err) {
      throw new UserError(`${chip.name}: ${(err as Error).message}`);
    }
    ref.basis = `${chip.name} ${ref.basis}`;
  }
  return { ...mfu(s.total.total, o.step_us, ref.flops_per_s * o.gpus), basis: ref.basis, gpus: o.gpus };
}
