/**
 * Levenberg–Marquardt for two-parameter models with an analytic Jacobian, computing exactly what
 * `levenbergMarquardt` of ml-levenberg-marquardt 5.1.0 computes for them (same operations in the
 * same order, so the same parameters bit for bit), on plain numbers instead of ml-matrix objects:
 * the GEMM ramp fits run it 200 times per dtype for their bootstrap, where the library's matrix
 * allocations were most of the time (issue 17). The library's steps, for p = 2 parameters:
 *
 *   ws_i = 1/w_i² (w_i the sigmas, default 1); G = −∂f/∂p (2 × n); r_i = y_i − f(x_i)
 *   H = G·diag(ws)·Gᵀ + damping·I;  g = G·(r / ws);  δ = H⁻¹g (Cholesky)
 *   p ← clamp(p − δ, min, max); error = Σ (y_i − f(x_i))² / ws_i
 *   improvement = (previous − error) / δᵀ(damping·δ + g); damping ÷ 9 (≥ 1e-7) if above the
 *   threshold, else × 11 (≤ 1e7); the best parameters seen (by more than errorTolerance) are returned.
 *
 * When the damped Hessian is not positive definite (the library then inverts it instead), the
 * library itself is run on the same problem, so the answer is always the library's.
 * test/fit/lm2.test.ts compares the two on random problems, bit for bit.
 */
import { levenbergMarquardt } from 'ml-levenberg-marquardt';

/** Options of `levenbergMarquardt2` (the library's names; all required here). */
export interface Lm2Options {
  initialValues: readonly [number, number];
  /** Per-point sigmas (the library's `weights`); absent = 1. */
  weights?: readonly number[];
  damping: number;
  maxIterations: number;
  errorTolerance: number;
  improvementThreshold: number;
  minValues: readonly [number, number];
  maxValues: readonly [number, number];
}

type Model = (p: number[]) => (x: number) => number;
/**
 * ∂f/∂p at x written into `out` (out[0], out[1]): the partials without an array per point (the library's
 * form, an array returned per point, was ≈ 63 MB of allocation per h200 fit; libraryFit adapts it).
 */
type Jacobian = (p: number[]) => (x: number, out: Float64Array) => void;

/**
 * A two-parameter least-squares problem evaluated at every point at once: what `levenbergMarquardt2On`
 * fits. `values` and `partials` must give what the pointwise `model` and `jacobian` of `pointwise()` give at
 * each point (the library fallback runs those); one call per parameter point, so the model's per-point
 * arithmetic is one loop that V8 compiles with the model inlined (no closure, no boxed number per point).
 */
export interface Lm2Problem {
  /** Measured values, one per point. */
  readonly y: ArrayLike<number>;
  /** f(x_i; p0, p1) for every point i, into `out`. */
  values(p0: number, p1: number, out: Float64Array): void;
  /** ∂f/∂p0 and ∂f/∂p1 at every point, into `d0` and `d1`. */
  partials(p0: number, p1: number, d0: Float64Array, d1: Float64Array): void;
  /** The same model point by point (levenbergMarquardt2's arguments), for the library fallback. */
  pointwise(): { x: readonly number[]; model: Model; jacobian: Jacobian };
}

/** `Lm2Problem` of a pointwise model (levenbergMarquardt2's arguments). */
class PointwiseProblem implements Lm2Problem {
  private readonly partial = new Float64Array(2);
  constructor(
    private readonly x: readonly number[],
    readonly y: readonly number[],
    private readonly model: Model,
    private readonly jacobian: Jacobian,
  ) {}
  values(p0: number, p1: number, out: Float64Array): void {
    const f = this.model([p0, p1]);
    for (let i = 0; i < this.x.length; i++) out[i] = f(this.x[i]!);
  }
  partials(p0: number, p1: number, d0: Float64Array, d1: Float64Array): void {
    const j = this.jacobian([p0, p1]);
    const out = this.partial;
    for (let i = 0; i < this.x.length; i++) {
      j(this.x[i]!, out);
      d0[i] = out[0]!;
      d1[i] = out[1]!;
    }
  }
  pointwise() {
    return { x: this.x, model: this.model, jacobian: this.jacobian };
  }
}

/** Σ (y_i − f_i)² / ws_i (the library's errorCalculation) with f_i = `f[i]`. */
function sse(y: Float64Array, f: Float64Array, ws: Float64Array): number {
  let error = 0;
  for (let i = 0; i < ws.length; i++) error += (y[i]! - f[i]!) ** 2 / ws[i]!;
  return error;
}

/** The undamped normal equations at the current parameters: H = G·diag(ws)·Gᵀ (h00, h10, h11) and g. */
interface Normal {
  h00: number;
  h10: number;
  h11: number;
  g0: number;
  g1: number;
}

/** The step's result (δ and g), reused by every step of one fit. */
interface Step {
  d0: number;
  d1: number;
  g0: number;
  g1: number;
}

/** H and g (into `ne`) from f (`f`) and −∂f/∂p (`-j0`, `-j1`) at the current parameters. */
function normalSums(
  y: Float64Array,
  f: Float64Array,
  j0: Float64Array,
  j1: Float64Array,
  ws: Float64Array,
  ne: Normal,
) {
  let h00 = 0;
  let h10 = 0;
  let h11 = 0;
  let g0 = 0;
  let g1 = 0;
  for (let k = 0; k < ws.length; k++) {
    const a = -j0[k]!;
    const b = -j1[k]!;
    const wa = ws[k]! * a;
    const wb = ws[k]! * b;
    h00 += a * wa;
    h10 += b * wa;
    h11 += b * wb;
    const r = (y[k]! - f[k]!) / ws[k]!;
    g0 += a * r;
    g1 += b * r;
  }
  ne.h00 = h00;
  ne.h10 = h10;
  ne.h11 = h11;
  ne.g0 = g0;
  ne.g1 = g1;
}

/** One damped Gauss–Newton step from `ne`: δ and g into `s`; false when H + damping·I is not positive definite. */
function step(ne: Normal, damping: number, s: Step): boolean {
  const h00 = ne.h00 + damping;
  const h10 = ne.h10;
  const h11 = ne.h11 + damping;
  // Cholesky of [[h00, h10], [h10, h11]] and its two triangular solves, as ml-matrix does them.
  if (!(h00 > 0)) return false;
  const l00 = Math.sqrt(h00);
  const l10 = h10 / l00;
  const dd = h11 - l10 * l10;
  if (!(dd > 0)) return false;
  const l11 = Math.sqrt(dd);
  const z0 = ne.g0 / l00;
  const z1 = (ne.g1 - z0 * l10) / l11;
  s.d1 = z1 / l11;
  s.d0 = (z0 - s.d1 * l10) / l00;
  s.g0 = ne.g0;
  s.g1 = ne.g1;
  return true;
}

/**
 * Fit the two parameters of `model` to (x, y). Same arguments and result as the library's
 * `levenbergMarquardt` with a `jacobianFunction` (its defaults for the damping steps, 11 and 9).
 * @returns the best parameters seen and their error
 */
export function levenbergMarquardt2(
  data: { x: readonly number[]; y: readonly number[] },
  model: Model,
  jacobian: Jacobian,
  o: Lm2Options,
): { parameterValues: number[]; parameterError: number } {
  return levenbergMarquardt2On(new PointwiseProblem(data.x, data.y, model, jacobian), o);
}

/**
 * `levenbergMarquardt2` on a problem evaluated at every point at once (same steps, same result bit for
 * bit). The model's values at the parameters a step starts from are those of the error pass that ended
 * the step before (the same parameters), so each iteration evaluates the model once, not twice.
 * @returns the best parameters seen and their error
 */
export function levenbergMarquardt2On(
  problem: Lm2Problem,
  o: Lm2Options,
): { parameterValues: number[]; parameterError: number } {
  // y as a Float64Array (the same numbers), so sse and step see one array type.
  const y = problem.y instanceof Float64Array ? problem.y : Float64Array.from(problem.y);
  const n = y.length;
  const ws = new Float64Array(n);
  for (let i = 0; i < n; i++) ws[i] = o.weights ? 1 / o.weights[i]! ** 2 : 1 / 1 ** 2;
  const f = new Float64Array(n);
  const j0 = new Float64Array(n);
  const j1 = new Float64Array(n);
  const s: Step = { d0: 0, d1: 0, g0: 0, g1: 0 };
  const ne: Normal = { h00: 0, h10: 0, h11: 0, g0: 0, g1: 0 };
  let p0 = o.initialValues[0];
  let p1 = o.initialValues[1];
  let damping = o.damping;
  problem.values(p0, p1, f);
  let error = sse(y, f, ws);
  let optimalError = error;
  let best0 = p0;
  let best1 = p1;
  let converged = error <= o.errorTolerance;
  // A step that leaves the parameters where they were (bit for bit) leaves f, the partials, H, g and the
  // error as they were: only the damping changes, so they are not recomputed (over half the iterations
  // of the GEMM ramp fits, which run all 60 long after converging).
  let stale = true;
  for (let it = 0; it < o.maxIterations && !converged; it++) {
    const previous = error;
    if (stale) {
      problem.partials(p0, p1, j0, j1);
      normalSums(y, f, j0, j1, ws, ne);
    }
    if (!step(ne, damping, s)) return libraryFit(problem, o);
    const n0 = Math.min(Math.max(o.minValues[0], p0 - s.d0), o.maxValues[0]);
    const n1 = Math.min(Math.max(o.minValues[1], p1 - s.d1), o.maxValues[1]);
    stale = !(Object.is(n0, p0) && Object.is(n1, p1));
    if (stale) {
      p0 = n0;
      p1 = n1;
      problem.values(p0, p1, f);
      error = sse(y, f, ws);
    }
    if (Number.isNaN(error)) break;
    if (error < optimalError - o.errorTolerance) {
      optimalError = error;
      best0 = p0;
      best1 = p1;
    }
    let denom = 0;
    denom += s.d0 * (s.d0 * damping + s.g0);
    denom += s.d1 * (s.d1 * damping + s.g1);
    damping =
      (previous - error) / denom > o.improvementThreshold ? Math.max(damping / 9, 1e-7) : Math.min(damping * 11, 1e7);
    converged = error <= o.errorTolerance;
  }
  return { parameterValues: [best0, best1], parameterError: optimalError };
}

/** The library itself on the same problem (its answer when the damped Hessian is not positive definite). */
function libraryFit(problem: Lm2Problem, o: Lm2Options): { parameterValues: number[]; parameterError: number } {
  const { x, model, jacobian } = problem.pointwise();
  const r = levenbergMarquardt({ x: [...x], y: Array.from(problem.y) }, (p) => model(p), {
    initialValues: [...o.initialValues],
    ...(o.weights ? { weights: [...o.weights] } : {}),
    jacobianFunction: (p) => {
      const j = jacobian(p);
      return (v) => {
        const out = new Float64Array(2);
        j(v, out);
        return [out[0]!, out[1]!];
      };
    },
    damping: o.damping,
    maxIterations: o.maxIterations,
    errorTolerance: o.errorTolerance,
    improvementThreshold: o.improvementThreshold,
    minValues: [...o.minValues],
    maxValues: [...o.maxValues],
  });
  return { parameterValues: r.parameterValues, parameterError: r.parameterError };
}
