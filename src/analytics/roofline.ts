/**
 * The chapter's two-resource step law and the roofline quantities derived from it. Pure functions:
 * no I/O, no clock.
 *
 * Source: seed `shared/seeds/inside-deepinfer-ch02-where-the-time-goes.txt` ("the chapter"):
 * §2.1 Listing 2.1 and equation 2.1 (step law), §2.2 (crossover, arithmetic intensity, context
 * scale), §2.2.1 (positions reuse context), §2.3 equation 2.2 (useful throughput).
 *
 * Units: bytes, operations (ops), seconds for the rates, µs for every returned time, tokens/s for
 * rates of output. Times are computed as `amount · 1e6 / rate` (multiply first) so that the
 * chapter's round constants give exact µs (4,100,000 B at 1e11 B/s → 41 µs, not 41.000000000000004).
 */

/** Parameters of the step law (chapter §2.1, Listing 2.1), each named with its unit. */
export interface RooflineParams {
  /** Bytes read once per step regardless of batch (e.g. weights). Chapter: 4,000,000. */
  shared_bytes: number;
  /** Context bytes read per active request per step, at context_scale 1. Chapter: 100,000. */
  bytes_per_request: number;
  /** Arithmetic operations per evaluated position. Chapter: 2,000,000. */
  ops_per_position: number;
  /** Memory bandwidth W, bytes per second. Chapter: 1e11. */
  mem_bytes_per_s: number;
  /** Arithmetic rate P, operations per second. Chapter: 1e12. */
  compute_ops_per_s: number;
  /** Serial overhead h, µs, not overlapped with either cost. Chapter: 20. */
  overhead_us: number;
  /** Multiplier on per-request context traffic (chapter §2.2: "four times context traffic" = 4). */
  context_scale: number;
}

/** The chapter's hypothetical constants (Listing 2.1, `labs/05_cost.py`). */
export const CHAPTER_PARAMS: Readonly<RooflineParams> = Object.freeze({
  shared_bytes: 4_000_000,
  bytes_per_request: 100_000,
  ops_per_position: 2_000_000,
  mem_bytes_per_s: 1e11,
  compute_ops_per_s: 1e12,
  overhead_us: 20,
  context_scale: 1,
});

/** The request counts of the chapter's opening sweep (R = N). */
export const CHAPTER_SWEEP_R = Object.freeze([1, 4, 8, 16, 32, 40, 64, 128]);

/** One evaluated point of the step law. */
export interface StepPoint {
  /** Active requests R. */
  requests: number;
  /** Evaluated positions N. */
  positions: number;
  /** Useful output tokens U of the step. */
  useful_tokens: number;
  /** M(R) = shared_bytes + R · bytes_per_request · context_scale, bytes. */
  traffic_bytes: number;
  /** F(N) = N · ops_per_position, operations. */
  ops: number;
  /** M(R)/W, µs. */
  transfer_us: number;
  /** F(N)/P, µs. */
  compute_us: number;
  /** T(R,N) = h + max(transfer, compute), µs (equation 2.1). */
  step_us: number;
  /** Which term the max picked ('memory' on a tie, as Listing 2.1's `max` returns its first argument). */
  bound: 'memory' | 'compute';
  /** Arithmetic intensity I = F/M, operations per byte (chapter §2.2). */
  intensity_ops_per_byte: number;
  /** Useful throughput U / T, tokens per second (equation 2.2). */
  useful_tokens_per_s: number;
}

/** Validate parameters. @throws Error naming the first bad field (caller wraps with its source). */
export function checkParams(p: RooflineParams): void {
  const nonneg: Array<keyof RooflineParams> = [
    'shared_bytes',
    'bytes_per_request',
    'ops_per_position',
    'overhead_us',
    'context_scale',
  ];
  for (const k of nonneg) {
    if (!(Number.isFinite(p[k]) && p[k] >= 0)) throw new Error(`${k} must be a finite number ≥ 0, got ${p[k]}`);
  }
  for (const k of ['mem_bytes_per_s', 'compute_ops_per_s'] as const) {
    if (!(Number.isFinite(p[k]) && p[k] > 0)) throw new Error(`${k} must be a finite number > 0, got ${p[k]}`);
  }
}

/** M(R) in bytes: shared_bytes + R · bytes_per_request · context_scale (chapter §2.1). */
export function trafficBytes(p: RooflineParams, requests: number): number {
  return p.shared_bytes + requests * p.bytes_per_request * p.context_scale;
}

/** F(N) in operations: N · ops_per_position (chapter §2.1). */
export function opsFor(p: RooflineParams, positions: number): number {
  return positions * p.ops_per_position;
}

/**
 * Evaluate T(R, N) = h + max(M(R)/W, F(N)/P) (chapter equation 2.1) and U/T (equation 2.2).
 *
 * @param requests R, active requests (≥ 0)
 * @param positions N, evaluated positions (≥ 0); ordinary decode has N = R
 * @param useful_tokens U, useful output of the step; defaults to R (one token per request per step)
 * @throws Error on negative or non-finite counts
 * @example stepPoint(CHAPTER_PARAMS, 16, 16).step_us === 76
 */
export function stepPoint(p: RooflineParams, requests: number, positions: number, useful_tokens = requests): StepPoint {
  for (const [name, v] of [
    ['requests', requests],
    ['positions', positions],
    ['useful_tokens', useful_tokens],
  ] as const) {
    if (!(Number.isFinite(v) && v >= 0)) throw new Error(`${name} must be a finite number ≥ 0, got ${v}`);
  }
  const traffic_bytes = trafficBytes(p, requests);
  const ops = opsFor(p, positions);
  const transfer_us = (traffic_bytes * 1e6) / p.mem_bytes_per_s;
  const compute_us = (ops * 1e6) / p.compute_ops_per_s;
  const bound = compute_us > transfer_us ? 'compute' : 'memory';
  const step_us = p.overhead_us + Math.max(transfer_us, compute_us);
  return {
    requests,
    positions,
    useful_tokens,
    traffic_bytes,
    ops,
    transfer_us,
    compute_us,
    step_us,
    bound,
    intensity_ops_per_byte: traffic_bytes > 0 ? ops / traffic_bytes : Infinity,
    useful_tokens_per_s: step_us > 0 ? (useful_tokens * 1e6) / step_us : Infinity,
  };
}

/** Ridge point P/W in operations per byte: the intensity at which both costs are equal (chapter §2.2). */
export function ridgeIntensity(p: RooflineParams): number {
  return p.compute_ops_per_s / p.mem_bytes_per_s;
}

/** Where transfer time equals compute time along N = k·R. */
export interface Crossover {
  /** R at which M(R)/W = F(k·R)/P (real-valued; the chapter's R = 40). */
  requests: number;
  /** N = k·R at the crossover. */
  positions: number;
  /** Intensity there, operations per byte (= P/W). */
  intensity_ops_per_byte: number;
  /** Step time there, µs. */
  step_us: number;
}

/**
 * Solve (shared + R·b·c)/W = k·R·ops/P for R (chapter §2.2: "40 + R = 2R", R = N = 40).
 * R* = shared / (k·ops·W/P − b·c).
 *
 * @param positions_per_request k, positions per request (1 for ordinary decode)
 * @returns the crossover, or undefined when compute never catches up with transfer along this line
 *   (denominator ≤ 0, or no shared bytes so the costs are proportional)
 */
export function crossover(p: RooflineParams, positions_per_request = 1): Crossover | undefined {
  const k = positions_per_request;
  // Work in ops/bytes·W units: k·ops/P·W − b·c, multiplied through by W to stay exact for round inputs.
  const denom =
    (k * p.ops_per_position * p.mem_bytes_per_s) / p.compute_ops_per_s - p.bytes_per_request * p.context_scale;
  if (!(denom > 0) || !(p.shared_bytes > 0)) return undefined;
  const requests = p.shared_bytes / denom;
  const pt = stepPoint(p, requests, k * requests);
  return { requests, positions: k * requests, intensity_ops_per_byte: pt.intensity_ops_per_byte, step_us: pt.step_us };
}

/** One row request of a sweep: R, N and optionally U (default U = R). */
export interface SweepSpec {
  requests: number;
  positions: number;
  useful_tokens?: number;
}

/** Evaluate the law at each spec, in order. */
export function sweep(p: RooflineParams, specs: readonly SweepSpec[]): StepPoint[] {
  return specs.map((s) => stepPoint(p, s.requests, s.positions, s.useful_tokens ?? s.requests));
}

/**
 * Pair lists of R, N and U by broadcasting: each list has length 1 or the common length L.
 * `positions` undefined → N = k·R; `useful` undefined → U = R.
 * @throws Error when lengths disagree
 */
export function broadcastSpecs(
  requests: readonly number[],
  positions: readonly number[] | undefined,
  useful: readonly number[] | undefined,
  positions_per_request = 1,
): SweepSpec[] {
  const lists = [requests, positions ?? [], useful ?? []].filter((l) => l.length > 0);
  const L = Math.max(...lists.map((l) => l.length));
  for (const [name, l] of [
    ['requests', requests],
    ['positions', positions],
    ['useful tokens', useful],
  ] as const) {
    if (l && l.length !== 1 && l.length !== L) {
      throw new Error(`${name} has ${l.length} values; expected 1 or ${L} to pair with the other lists`);
    }
  }
  const at = (l: readonly number[], i: number) => (l.length === 1 ? l[0]! : l[i]!);
  const out: SweepSpec[] = [];
  for (let i = 0; i < L; i++) {
    const R = at(requests, i);
    const spec: SweepSpec = { requests: R, positions: positions ? at(positions, i) : positions_per_request * R };
    if (useful) spec.useful_tokens = at(useful, i);
    out.push(spec);
  }
  return out;
}
