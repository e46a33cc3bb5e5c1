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

/** Σ (y_i − f(x_i))² / ws_i at `p` (the library's errorCalculation). */
function sse(x: readonly number[], y: readonly number[], model: Model, p: number[], ws: Float64Array): number {
  let error = 0;
  const f = model(p);
  for (let i = 0; i < x.length; i++) error += (y[i]! - f(x[i]!)) ** 2 / ws[i]!;
  return error;
}

/**
 * The Jacobian's output at one point, reused by every step (read before the next point's call). Module-level, so
 * levenbergMarquardt2 is not re-entrant: a model or Jacobian must not call it (none does; JavaScript runs one
 * call at a time per thread, and each worker thread has its own module instance).
 */
const PARTIALS = new Float64Array(2);

/** One damped Gauss–Newton step: δ and g (null when H is not positive definite). */
function step(
  x: readonly number[],
  y: readonly number[],
  model: Model,
  jacobian: Jacobian,
  p: number[],
  damping: number,
  ws: Float64Array,
): { d0: number; d1: number; g0: number; g1: number } | null {
  const f = model(p);
  const jac = jacobian(p);
  let h00 = 0;
  let h10 = 0;
  let h11 = 0;
  let g0 = 0;
  let g1 = 0;
  for (let k = 0; k < x.length; k++) {
    const fx = f(x[k]!);
    jac(x[k]!, PARTIALS);
    const a = -PARTIALS[0]!;
    const b = -PARTIALS[1]!;
    const wa = ws[k]! * a;
    const wb = ws[k]! * b;
    h00 += a * wa;
    h10 += b * wa;
    h11 += b * wb;
    const r = (y[k]! - fx) / ws[k]!;
    g0 += a * r;
    g1 += b * r;
  }
  h00 += damping;
  h11 += damping;
  // Cholesky of [[h00, h10], [h10, h11]] and its two triangular solves, as ml-matrix does them.
  if (!(h00 > 0)) return null;
  const l00 = Math.sqrt(h00);
  const l10 = h10 / l00;
  const dd = h11 - l10 * l10;
  if (!(dd > 0)) return null;
  const l11 = Math.sqrt(dd);
  const z0 = g0 / l00;
  const z1 = (g1 - z0 * l10) / l11;
  const d1 = z1 / l11;
  const d0 = (z0 - d1 * l10) / l00;
  return { d0, d1, g0, g1 };
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
  const { x, y } = data;
  const ws = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) ws[i] = o.weights ? 1 / o.weights[i]! ** 2 : 1 / 1 ** 2;
  const p = [o.initialValues[0], o.initialValues[1]];
  let damping = o.damping;
  let error = sse(x, y, model, p, ws);
  let optimalError = error;
  let optimal = p.slice();
  let converged = error <= o.errorTolerance;
  for (let it = 0; it < o.maxIterations && !converged; it++) {
    const previous = error;
    const s = step(x, y, model, jacobian, p, damping, ws);
    if (!s) return libraryFit(data, model, jacobian, o);
    p[0] = Math.min(Math.max(o.minValues[0], p[0]! - s.d0), o.maxValues[0]);
    p[1] = Math.min(Math.max(o.minValues[1], p[1]! - s.d1), o.maxValues[1]);
    error = sse(x, y, model, p, ws);
    if (Number.isNaN(error)) break;
    if (error < optimalError - o.errorTolerance) {
      optimalError = error;
      optimal = p.slice();
    }
    let denom = 0;
    denom += s.d0 * (s.d0 * damping + s.g0);
    denom += s.d1 * (s.d1 * damping + s.g1);
    damping =
      (previous - error) / denom > o.improvementThreshold ? Math.max(damping / 9, 1e-7) : Math.min(damping * 11, 1e7);
    converged = error <= o.errorTolerance;
  }
  return { parameterValues: optimal, parameterError: optimalError };
}

/** The library itself on the same problem (its answer when the damped Hessian is not positive definite). */
function libraryFit(
  data: { x: readonly number[]; y: readonly number[] },
  model: Model,
  jacobian: Jacobian,
  o: Lm2Options,
): { parameterValues: number[]; parameterError: number } {
  const r = levenbergMarquardt({ x: [...data.x], y: [...data.y] }, (p) => model(p), {
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
