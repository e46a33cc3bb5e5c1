/**
 * Host time by CUDA-graph mode (seed "Host time"; reference §4.10; vLLM v0.31.0's choice).
 *
 *   full      one graph replay for the whole step
 *   piecewise one replay per piece; the graph splits at each attention or recurrent mixer
 *   eager     every kernel launched at the eager cost
 * A batch larger than the largest captured size runs eager and is never charged less than the same
 * batch captured. Every kernel also pays a dispatch cost (added by the caller). Pure.
 *
 * KNOWN DIVERGENCE 2 (reference §4.10 keeps TotalLayers + 1 replays and prices over-capture batches
 * with graphs): piecewise capture pays one replay per piece, pieces = attention/recurrent mixers + 1
 * (the caller counts them), and a batch past the largest capture is charged max(eager, captured).
 */
/** vLLM CUDA-graph modes (vLLM `CompilationConfig.cudagraph_mode`). */
export const CUDAGRAPH_MODES = ['FULL_AND_PIECEWISE', 'PIECEWISE', 'FULL', 'FULL_DECODE_ONLY', 'NONE'] as const;
export type CudagraphMode = (typeof CUDAGRAPH_MODES)[number];

export const GRAPH_FULL = 0;
export const GRAPH_PIECEWISE = 1;
export const GRAPH_EAGER = 2;

/** The graph mode vLLM picks for a batch: uniform decode (every row 1 + num_spec_tokens) or not. */
export function graphModeFor(mode: CudagraphMode, uniformDecode: boolean): number {
  switch (mode) {
    case 'FULL':
      return GRAPH_FULL;
    case 'PIECEWISE':
      return GRAPH_PIECEWISE;
    case 'FULL_AND_PIECEWISE':
      return uniformDecode ? GRAPH_FULL : GRAPH_PIECEWISE;
    case 'FULL_DECODE_ONLY':
      return uniformDecode ? GRAPH_FULL : GRAPH_EAGER;
    case 'NONE':
      return GRAPH_EAGER;
  }
}

/**
 * Launch/replay cost of one pass, µs (without per-kernel dispatch).
 * @param graphMode GRAPH_FULL | GRAPH_PIECEWISE | GRAPH_EAGER
 * @param overCapture the batch is larger than the largest captured size
 * @param replay_us one replay of a whole-step graph
 * @param piece_us one replay of a piecewise piece
 * @param pieces pieces of the pass under piecewise capture
 * @param eager_us the pass launched eagerly
 */
export function launchUs(
  graphMode: number,
  overCapture: boolean,
  replay_us: number,
  piece_us: number,
  pieces: number,
  eager_us: number,
): number {
  if (graphMode === GRAPH_EAGER) return eager_us;
  const captured = graphMode === GRAPH_FULL ? replay_us : piece_us * pieces;
  // Past the largest captured size the step runs eager, never cheaper than captured (seed "Host time").
  if (overCapture) return eager_us > captured ? eager_us : captured;
  return captured;
}

/**
 * Eager launch cost of one pass, µs: per kernel where the registry measures it
 * (`host_launch_eager_per_kernel`), else per layer (`host_launch_eager_per_layer`; reference §4.10).
 * @param per_kernel_us eager cost per kernel, or undefined when only the per-layer figure exists
 * @param per_layer_us eager cost per layer (used only when per_kernel_us is undefined)
 * @param kernels kernels launched in the pass; layers its layers
 */
export function eagerLaunchUs(
  per_kernel_us: number | undefined,
  per_layer_us: number,
  kernels: number,
  layers: number,
): number {
  return per_kernel_us !== undefined ? per_kernel_us * kernels : per_layer_us * layers;
}

/**
 * Host time of one pass, µs: its launch or replay cost (`launchUs`) plus a dispatch cost per kernel
 * (seed "Host time"; reference §4.10).
 * @param launch_us `launchUs` of the pass
 * @param dispatch_us_per_kernel `host_launch_per_kernel`
 * @param kernels kernels of the pass
 */
export function passHostUs(launch_us: number, dispatch_us_per_kernel: number, kernels: number): number {
  return launch_us + dispatch_us_per_kernel * kernels;
}

/**
 * The engine terms of an engine profile (issue 7, issue 16; docs/validation.md "Host overheads" and
 * "Large-step collective factor"), in the order they are admitted by the fit. µs per unit of the
 * regressor; `large_step_nvlink_factor` is dimensionless (µs per priced NVLink µs).
 */
export const ENGINE_HOST_TERMS = [
  'per_step_us',
  'per_request_step_us',
  'per_step_tp_gt1_us',
  'per_kernel_us',
  'per_step_per_rank_us',
  'large_step_nvlink_factor',
] as const;

const MIB = 1024 * 1024;

/**
 * Candidate thresholds of the large-step collective term, bytes of one all-reduce message (acc19;
 * docs/validation.md "Large-step collective factor"): a step whose collective message (scheduled
 * tokens × the deployment's collective bytes per token, `collectiveMessageBytes`) is at least the
 * threshold pays `large_step_nvlink_factor` × its priced NVLink µs on top. 0 = every step (a plain
 * factor on the registry's NVLink law); the others are powers of two from 8 MiB to 256 MiB. Each fit
 * picks one on its training rows. Bytes, not tokens, because the mechanism the rows point to is the
 * engine switching all-reduce implementation above a message size, which a token count does not
 * carry to a model of another hidden size.
 */
export const LARGE_STEP_MESSAGE_BYTES_GRID: readonly number[] = [0, 8, 16, 32, 64, 128, 256].map((m) => m * MIB);

/**
 * Bytes of a step's collective message: scheduled tokens × bytes per token of one collective of the
 * pass (hidden · activation bytes for a tensor-parallel all-reduce; src/pricer/pricer.ts
 * `PricerInfo.collective_message_bytes_per_token`).
 */
export function collectiveMessageBytes(step_tokens: number, bytes_per_token: number): number {
  return step_tokens * bytes_per_token;
}

/**
 * Priced NVLink µs a step adds to the large-step regressor: all of it when the step's collective
 * message is at least `threshold_bytes`, else 0. Every collective of a dense tensor-parallel step
 * carries the same message (the all-reduce after attention and after the MLP), so the whole step's
 * NVLink time is the time of the collectives over the threshold.
 */
export function largeStepNvlinkUs(message_bytes: number, nvlink_us: number, threshold_bytes: number): number {
  return message_bytes >= threshold_bytes ? nvlink_us : 0;
}
export type EngineHostTerm = (typeof ENGINE_HOST_TERMS)[number];

/** What the engine host law reads from a row or a step (every count summed over the row's steps). */
export interface EngineHostFeatures {
  steps: number;
  /** Σ over steps of the requests in each step. */
  request_steps: number;
  /** Σ kernels dispatched; NaN when unknown (the per-kernel term then contributes nothing). */
  kernel_steps: number;
  /** Tensor-parallel width. */
  tp: number;
  /**
   * Σ priced NVLink µs (registry law, s-independent) of the steps whose collective message is at least
   * the profile's `large_step_message_bytes` (`largeStepNvlinkUs`); absent = 0.
   */
  large_step_nvlink_us?: number;
}

/**
 * Regressors of the engine host law, in `ENGINE_HOST_TERMS` order:
 * [steps, Σ requests, steps · [tp > 1], Σ kernels, steps · tp, Σ large-step NVLink µs].
 */
export function engineHostColumns(f: EngineHostFeatures): number[] {
  return [
    f.steps,
    f.request_steps,
    f.tp > 1 ? f.steps : 0,
    f.kernel_steps,
    f.steps * f.tp,
    f.large_step_nvlink_us ?? 0,
  ];
}

/**
 * Engine host time, µs (issue 16; docs/validation.md "Host overheads"; the law the host fit and the
 * pricer's engine profile share):
 *   host = per_step_us · steps + per_request_step_us · Σ requests + per_step_tp_gt1_us · steps · [tp > 1]
 *        + per_kernel_us · Σ kernels + per_step_per_rank_us · steps · tp
 *        + large_step_nvlink_factor · Σ large-step NVLink µs (acc18).
 * A zero term or a non-finite regressor (kernel counts unknown) contributes nothing.
 * @param values_us one value per `ENGINE_HOST_TERMS` entry, µs per unit of its regressor
 */
export function engineHostUs(values_us: readonly number[], f: EngineHostFeatures): number {
  const x = engineHostColumns(f);
  let s = 0;
  for (let j = 0; j < x.length; j++) {
    const v = values_us[j] ?? 0;
    if (v !== 0 && Number.isFinite(x[j]!)) s += v * x[j]!;
  }
  return s;
}

/**
 * Largest batch, in requests, a decode graph captured at `capture_tokens` replays when every request's row
 * is `row_tokens` wide: ⌊capture / row⌋ (seed "Host time"). Under a 64-token capture with five draft tokens
 * the target's rows are 1 + 5 wide (10 requests) and a parallel-block drafter's (DSpark) 5 wide (12 requests).
 */
export function captureCeilingRequests(capture_tokens: number, row_tokens: number): number {
  return Math.floor(capture_tokens / row_tokens);
}
