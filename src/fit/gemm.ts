/**
 * GEMM efficiency ramp per compute dtype (reference §4.3 law, §6.3 method).
 *
 * efficiency(row) = 2·m·n·k / (latency_us · peak_flops_per_us(dtype))     (datasheet dense peak)
 * eps(m)          = eps_max · m / (m + m_half)                             (1-factor ramp)
 * eps(m, n, k)    = eps(m) · n/(n + n_half) · k/(k + k_half)               (shape-aware ramp)
 *
 * Memory-bound rows (weight bytes n·k·bytes(dtype) / datasheet HBM bandwidth > FLOPs / peak) are
 * classified and kept out of the compute ramp. With weight bytes only, the rule reduces to a token
 * threshold m < m* = peak · bytes(dtype) / (2 · HBM bandwidth) (206 tokens for H200 bf16/fp8).
 *
 * Stored: the ENVELOPE fit (best efficiency per m over all shapes), as BLIS stores it; the all-rows
 * fit is reported beside it. See docs/fitting.md.
 */
import type { Chip } from '../core/catalog/chip.ts';
import { peakFlopsPerUs } from '../core/catalog/chip.ts';
import { bytesPerElement, type GemmDtype, GEMM_DTYPES } from '../core/catalog/dtypes.ts';
import {
  achievedEfficiency,
  computeBoundMinM,
  gemmEfficiency,
  type RampCoefficients,
  shapeEfficiency,
  shapeFactor,
} from '../core/laws/gemm.ts';
import { solveLinear } from '../core/numeric/lsq.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { geometricError, groupBy, median, type7Sorted } from '../core/numeric/stats.ts';
import type { FitError } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { GemmRow } from '../measurements/schema.ts';
import { memoByObject } from '../core/text-memo.ts';
import { ciFromEstimates, fitError, fmt, holdoutValues, measuredEntry, reduceRepeatsBy } from './common.ts';
import { compassSearch2, distinctIndex, HalvesObjective, packCells, type PackedCells } from './gemm-polish.ts';
import { levenbergMarquardt2On, type Lm2Problem } from './lm2.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

/**
 * Token count below which a GEMM's weight read outlasts its math at datasheet rates: the law
 * `computeBoundMinM` (core/laws/gemm.ts) at this chip's dense peak and HBM bandwidth.
 * @throws Error when the chip has no datasheet peak for `dtype`.
 */
export function memoryBoundThresholdM(chip: Chip, dtype: GemmDtype): number {
  const peak = peakFlopsPerUs(chip, dtype);
  if (peak === undefined) throw new Error(`${chip.name} has no ${dtype} peak`);
  return computeBoundMinM(peak, bytesPerElement(dtype), chip.hbm_bytes_per_us);
}

/** True when n·k·bytes(dtype) / HBM bandwidth > 2·m·n·k / peak (datasheet rates). */
export function isMemoryBound(row: Pick<GemmRow, 'm' | 'n' | 'k'>, dtype: GemmDtype, chip: Chip): boolean {
  return memoryBoundAt(row, bytesPerElement(dtype), chip.hbm_bytes_per_us, peakFlopsPerUs(chip, dtype)!);
}

/** isMemoryBound with the format's bytes per element, the HBM rate (bytes/µs) and the peak (FLOPs/µs) given. */
function memoryBoundAt(
  row: Pick<GemmRow, 'm' | 'n' | 'k'>,
  bytes_per_element: number,
  hbm_bytes_per_us: number,
  peak_flops_per_us: number,
): boolean {
  const memory_us = (row.n * row.k * bytes_per_element) / hbm_bytes_per_us;
  const compute_us = (2 * row.m * row.n * row.k) / peak_flops_per_us;
  return memory_us > compute_us;
}

/** Levenberg–Marquardt iterations per fit (the library always runs them all; 2–4 parameter fits converge well before). */
export const LM_ITERATIONS = 60;

/**
 * gemm_n_half_<d> / gemm_k_half_<d> are widths in elements (features of the n or k dimension).
 * BLIS's unit enum (reference §1.1) has no "elements" and `tokens` means the m (row) dimension, so
 * they are stored with units `dimensionless` and this statement in `rationale` and evidence notes
 * (docs/fitting.md, "Units of the shape halves").
 */
export const HALF_UNIT_NOTE = 'unit of the half: elements (features), stored as dimensionless';

/**
 * Least-squares fit of eps(m) = eps_max·m/(m+m_half) by Levenberg–Marquardt with the analytic
 * Jacobian (`levenbergMarquardt2`: ml-levenberg-marquardt's steps on plain numbers). @returns NaNs when fewer than 3 distinct m (m_half unidentifiable).
 */
export function fitRamp(
  ms: Numbers,
  effs: Numbers,
  init: [number, number] = [Math.max(...effs), 100],
  counts?: readonly number[],
): { eps_max: number; m_half: number } {
  if (fewerThanThreeDistinct(ms)) return { eps_max: NaN, m_half: NaN };
  // The points as Float64Arrays (the same numbers): the loops below then see one array type, whatever
  // element kind the caller's arrays have (small integers, doubles), and are not deoptimised between them.
  const x = toFloat64(ms);
  const y = toFloat64(effs);
  const w = counts ? toFloat64(counts) : new Float64Array(ms.length).fill(1);
  // Parameterised as (eps_max, ln m_half) so both directions have O(1) curvature: the library's
  // damping is absolute, and m_half in tokens would otherwise converge very slowly.
  const res = levenbergMarquardt2On(new RampProblem(x, y), {
    initialValues: [init[0], Math.log(Math.max(init[1], 1e-3))],
    // Per-point sigmas (weight = 1/sigma², the library's convention); a mean of c rows has sigma ∝ 1/√c.
    ...(counts ? { weights: counts.map((c) => 1 / Math.sqrt(c)) } : {}),
    damping: 1e-3,
    maxIterations: LM_ITERATIONS,
    errorTolerance: 1e-14,
    improvementThreshold: 1e-6,
    minValues: [1e-6, Math.log(1e-3)],
    maxValues: [10, Math.log(1e7)],
  });
  // Polish on the same (weighted) least-squares objective; see fitShapeHalves.
  const sse = (e: number, u: number) => {
    const h = Math.exp(u);
    let t = 0;
    for (let i = 0; i < x.length; i++) {
      const d = gemmEfficiency(x[i]!, e, h) - y[i]!;
      t += w[i]! * d * d;
    }
    return t;
  };
  const [e0, u0] = res.parameterValues as [number, number];
  const pol = compassSearch2(sse, [e0, u0], [0.01, 0.05], 1e-7, 400);
  const [eps_max, u] = pol.x;
  return { eps_max, m_half: Math.exp(u) };
}

/** A list of numbers, plain or typed. */
type Numbers = readonly number[] | Float64Array;

/** `xs` as a Float64Array (itself when it is one; else a copy by index, no iterator). */
function toFloat64(xs: Numbers): Float64Array {
  if (xs instanceof Float64Array) return xs;
  const out = new Float64Array(xs.length);
  for (let i = 0; i < xs.length; i++) out[i] = xs[i]!;
  return out;
}

/** `new Set(xs).size < 3` (SameValueZero: NaN equals NaN, 0 equals −0) without building the set. */
function fewerThanThreeDistinct(xs: Numbers): boolean {
  const same = (a: number, b: number) => a === b || (Number.isNaN(a) && Number.isNaN(b));
  let first = 0;
  let second = 0;
  let count = 0;
  for (let i = 0; i < xs.length; i++) {
    const v = xs[i]!;
    if ((count >= 1 && same(v, first)) || (count >= 2 && same(v, second))) continue;
    if (count === 2) return false;
    if (count === 0) first = v;
    else second = v;
    count++;
  }
  return true;
}

/**
 * The ramp eps(m) = e·m/(m + e^u) at the points `ms` with its analytic Jacobian, for
 * levenbergMarquardt2On: ∂/∂e = m/(m + h), ∂/∂u = −e·m·h/(m + h)², h = e^u.
 */
class RampProblem implements Lm2Problem {
  constructor(
    private readonly ms: Float64Array,
    readonly y: Float64Array,
  ) {}
  values(e: number, u: number, out: Float64Array): void {
    const h = Math.exp(u);
    const ms = this.ms;
    for (let i = 0; i < ms.length; i++) out[i] = gemmEfficiency(ms[i]!, e, h);
  }
  partials(e: number, u: number, d0: Float64Array, d1: Float64Array): void {
    const h = Math.exp(u);
    const ms = this.ms;
    for (let i = 0; i < ms.length; i++) {
      const m = ms[i]!;
      d0[i] = m / (m + h);
      d1[i] = (-e * m * h) / ((m + h) * (m + h));
    }
  }
  /** The same arithmetic one point at a time (a one-point RampProblem), for the library fallback. */
  pointwise() {
    const at = (m: number) => new RampProblem(Float64Array.of(m), new Float64Array(0));
    const f = new Float64Array(1);
    const d0 = new Float64Array(1);
    const d1 = new Float64Array(1);
    return {
      x: Array.from(this.ms),
      model:
        ([e, u]: number[]) =>
        (m: number) => {
          at(m).values(e!, u!, f);
          return f[0]!;
        },
      jacobian:
        ([e, u]: number[]) =>
        (m: number, out: Float64Array) => {
          at(m).partials(e!, u!, d0, d1);
          out[0] = d0[0]!;
          out[1] = d1[0]!;
        },
    };
  }
}

/**
 * Least-squares ramp over ALL rows, computed exactly from per-m sufficient statistics: Σ(y − f(m))²
 * over rows equals Σ_m c_m·(ȳ_m − f(m))² + const, so a count-weighted fit to the per-m means gives
 * the same optimum as a fit to every row, in a fraction of the time.
 */
export function fitRampAllRows(
  points: ReadonlyArray<{ m: number; eff: number }>,
  init?: [number, number],
): { eps_max: number; m_half: number } {
  const acc = new Map<number, { s: number; c: number }>();
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    const a = acc.get(p.m);
    if (a) {
      a.s += p.eff;
      a.c++;
    } else acc.set(p.m, { s: p.eff, c: 1 });
  }
  const ms = [...acc.keys()].sort((a, b) => a - b);
  const ys = ms.map((m) => acc.get(m)!.s / acc.get(m)!.c);
  return fitRamp(
    ms,
    ys,
    init ?? [Math.max(...ys), 100],
    ms.map((m) => acc.get(m)!.c),
  );
}

/** Best efficiency per distinct m, sorted by m. */
export function envelope(points: ReadonlyArray<{ m: number; eff: number }>): Array<{ m: number; eff: number }> {
  const best = new Map<number, number>();
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    if (!(best.get(p.m)! >= p.eff)) best.set(p.m, p.eff);
  }
  return [...best.entries()].sort((a, b) => a[0] - b[0]).map(([m, eff]) => ({ m, eff }));
}

/**
 * Fit n_half, k_half of the shape factor with eps(m) fixed, on aggregated points: for each (n, k),
 * r = median over m of ln(eff / eps(m)); minimise Σ w·(ln(n/(n+nh)) + ln(k/(k+kh)) − r)² (LM),
 * weights = rows per (n, k).
 */
export function fitShapeHalves(
  cells: ReadonlyArray<{ n: number; k: number; r: number; w: number }>,
  init: [number, number] = [256, 256],
  warm = false,
): { n_half: number; k_half: number } {
  if (cells.length < 3) return { n_half: NaN, k_half: NaN };
  const packed = packCells(cells);
  if (warm) return polishPacked(packed, [Math.log(init[0]), Math.log(init[1])], 0.02, 150);
  const res = levenbergMarquardt2On(new HalvesProblem(packed), {
    initialValues: [Math.log(init[0]), Math.log(init[1])],
    weights: cells.map((c) => 1 / Math.sqrt(c.w)),
    damping: 1e-3,
    maxIterations: LM_ITERATIONS,
    errorTolerance: 1e-14,
    improvementThreshold: 1e-6,
    minValues: [Math.log(1e-3), Math.log(1e-3)],
    maxValues: [Math.log(1e6), Math.log(1e6)],
  });
  // Polish with a compass search on the same weighted objective (the library runs a fixed number of
  // iterations with absolute damping; the polish makes the optimum independent of the start).
  return polishPacked(packed, res.parameterValues, 0.05, 400);
}

/**
 * ln f(n; e^u_n) + ln f(k; e^u_k) at every cell (f = core/laws shapeFactor) and its Jacobian −h/(x + h)
 * per axis, for levenbergMarquardt2On: each taken once per distinct n and k (the same numbers as per
 * cell), then read by each cell's index.
 */
class HalvesProblem implements Lm2Problem {
  readonly y: Float64Array;
  private readonly n: Float64Array;
  private readonly k: Float64Array;
  constructor(private readonly c: PackedCells) {
    this.y = c.r;
    this.n = new Float64Array(c.nValues.length);
    this.k = new Float64Array(c.kValues.length);
  }
  values(un: number, uk: number, out: Float64Array): void {
    const { nValues, kValues, nIndex, kIndex } = this.c;
    const nh = Math.exp(un);
    const kh = Math.exp(uk);
    for (let j = 0; j < nValues.length; j++) this.n[j] = Math.log(shapeFactor(nValues[j]!, nh));
    for (let j = 0; j < kValues.length; j++) this.k[j] = Math.log(shapeFactor(kValues[j]!, kh));
    for (let i = 0; i < nIndex.length; i++) out[i] = this.n[nIndex[i]!]! + this.k[kIndex[i]!]!;
  }
  partials(un: number, uk: number, d0: Float64Array, d1: Float64Array): void {
    const { nValues, kValues, nIndex, kIndex } = this.c;
    const nh = Math.exp(un);
    const kh = Math.exp(uk);
    for (let j = 0; j < nValues.length; j++) this.n[j] = -nh / (nValues[j]! + nh);
    for (let j = 0; j < kValues.length; j++) this.k[j] = -kh / (kValues[j]! + kh);
    for (let i = 0; i < nIndex.length; i++) {
      d0[i] = this.n[nIndex[i]!]!;
      d1[i] = this.k[kIndex[i]!]!;
    }
  }
  /** Cell i's value and partials from the bulk passes (x = cell indices), for the library fallback. */
  pointwise() {
    const count = this.c.r.length;
    const f = new Float64Array(count);
    const d0 = new Float64Array(count);
    const d1 = new Float64Array(count);
    return {
      x: Array.from({ length: count }, (_, i) => i),
      model: ([un, uk]: number[]) => {
        this.values(un!, uk!, f);
        const at = f.slice();
        return (i: number) => at[i]!;
      },
      jacobian: ([un, uk]: number[]) => {
        this.partials(un!, uk!, d0, d1);
        const [a, b] = [d0.slice(), d1.slice()];
        return (i: number, out: Float64Array) => {
          out[0] = a[i]!;
          out[1] = b[i]!;
        };
      },
    };
  }
}

/**
 * The polish's compass search on packed cells (`halvesObjective`: ln f(n), ln f(k) once per distinct
 * n and k, and per-axis sums so that a poll costs one pass over the distinct values of its axis).
 */
function polishPacked(
  c: PackedCells,
  x0: readonly number[],
  step: number,
  maxEvals: number,
): { n_half: number; k_half: number } {
  const o = new HalvesObjective(c);
  const pol = compassSearch2((un, uk, axis) => o.value(un, uk, axis), [x0[0]!, x0[1]!], [step, step], 1e-6, maxEvals);
  const [un, uk] = pol.x;
  return { n_half: Math.exp(un), k_half: Math.exp(uk) };
}

/** One row of a dtype: its shape and achieved efficiency (fraction of the dense peak). */
interface Pt {
  m: number;
  n: number;
  k: number;
  eff: number;
}

/** Rows grouped by (n, k): the groups in first-seen order, each its rows' positions in row order. */
interface ShapeGroups {
  n: number[];
  k: number[];
  rows: number[][];
}

/**
 * `rows` grouped by (n, k) (the groups a key string `${n},${k}` would give, in the same order), from
 * each row's index among the distinct n and k (`distinctIndex`).
 */
function shapeGroups(rows: readonly Pt[], n: DistinctIndex, k: DistinctIndex): ShapeGroups {
  const groupOf = new Int32Array(n.values.length * k.values.length).fill(-1);
  const g: ShapeGroups = { n: [], k: [], rows: [] };
  for (let i = 0; i < rows.length; i++) {
    const key = n.index[i]! * k.values.length + k.index[i]!;
    let at = groupOf[key]!;
    if (at < 0) {
      at = groupOf[key] = g.rows.length;
      g.n.push(rows[i]!.n);
      g.k.push(rows[i]!.k);
      g.rows.push([]);
    }
    g.rows[at]!.push(i);
  }
  return g;
}

/**
 * The shape cells of `rows` (grouped as `g`) for a ramp: per (n, k), r = median over its rows of
 * ln(eff / eps(m)) and w = its row count; with `keepK`, only the groups whose k it keeps (the cells of
 * those rows alone: every row of a group has the group's k).
 */
function shapeCells(
  rows: readonly Pt[],
  g: ShapeGroups,
  ramp: Ramp,
  keepK?: (k: number) => boolean,
): Array<{ n: number; k: number; r: number; w: number }> {
  const cells: Array<{ n: number; k: number; r: number; w: number }> = [];
  for (let c = 0; c < g.rows.length; c++) {
    if (keepK && !keepK(g.k[c]!)) continue;
    const at = g.rows[c]!;
    const lnRatio = new Float64Array(at.length);
    for (let j = 0; j < at.length; j++) {
      const p = rows[at[j]!]!;
      lnRatio[j] = Math.log(p.eff / gemmEfficiency(p.m, ramp.eps_max, ramp.m_half));
    }
    cells.push({ n: g.n[c]!, k: g.k[c]!, r: medianInPlace(lnRatio), w: at.length });
  }
  return cells;
}

/**
 * `median` (core/numeric/stats) of `v`, sorting `v` in place: the typed array's native numeric sort orders
 * values as `median`'s (a, b) => a − b sort does, equal values then being the same number, unless a NaN or
 * a −0 is among them (−0 and 0 compare equal there and keep their order): then `median` itself.
 */
function medianInPlace(v: Float64Array): number {
  for (let i = 0; i < v.length; i++) if (Number.isNaN(v[i]!) || Object.is(v[i], -0)) return median(Array.from(v));
  return type7Sorted(v.sort(), 0.5);
}

/** Ramp results of one dtype, reused by the orchestrator's report and tests. */
export interface RampResult {
  dtype: GemmDtype;
  rows_total: number;
  rows_memory_bound: number;
  m_threshold: number;
  envelope_fit: { eps_max: number; m_half: number; ci_eps: [number, number]; ci_m_half: [number, number] };
  all_rows_fit: { eps_max: number; m_half: number };
  envelope_train: FitError;
  envelope_holdout: FitError;
  all_rows_train: FitError;
  all_rows_holdout: FitError;
  large_m: Array<{ m: number; measured: number; predicted: number }>;
  shape: {
    n_half: number;
    k_half: number;
    ci_n: [number, number];
    ci_k: [number, number];
    holdout_geo_envelope: number;
    holdout_geo_all_rows: number;
    holdout_geo_shape: number;
    /** Errors of the shape-aware ramp on all compute-bound rows (train) and on held-out whole k (holdout). */
    shape_train: FitError;
    shape_holdout: FitError;
    /** The joint 4-coefficient fit (jointShapeFit) on every compute-bound row, its errors and held-out-k geo. */
    joint: JointShape;
    /** Which shape-aware fit is stored (when `stored`): the lower held-out-k geo, ties → staged. */
    method: 'staged' | 'joint';
    stored: boolean;
  };
  held_k: number[];
  m_max: number;
  /** The dtype's dense peak (FLOPs per µs, datasheet) the efficiencies are fractions of. */
  peak_flops_per_us: number;
  /** Every row after median-of-repeats (the figure's scatter), in row order. */
  points: Array<{ m: number; eff: number; memory_bound: boolean }>;
  /** Best efficiency per distinct m over the compute-bound rows (what the stored ramp is fitted on). */
  envelope: Array<{ m: number; eff: number }>;
}

/** Fraction of (geo − 1) the shape-aware ramp must remove on held-out k to be stored. */
export const SHAPE_STORE_RULE = 0.75;

/** Upper bound of eps_max in the joint shape fit: the dense datasheet peak (the registry gates allow 1.05). */
export const JOINT_EPS_MAX_BOUND = 1;

/** Log-coefficient bounds of the joint fit: ln eps_max ≤ ln JOINT_EPS_MAX_BOUND, halves in [1e-3, 1e6]. */
const JOINT_LO = Math.log(1e-3);
const JOINT_HI = [Math.log(JOINT_EPS_MAX_BOUND), Math.log(1e6), Math.log(1e6), Math.log(1e6)] as const;

/** Rows of the joint fit packed once: ln efficiency and each row's index among the distinct m, n and k. */
interface JointRows {
  lnEff: Float64Array;
  dims: Array<{ values: Float64Array; index: Int32Array; ln: Float64Array; jac: Float64Array }>;
}

/** One axis of JointRows (one object shape for every caller, the module's warm-up included). */
function jointDim(values: Float64Array, index: Int32Array): JointRows['dims'][0] {
  return { values, index, ln: new Float64Array(values.length), jac: new Float64Array(values.length) };
}

function packJointRows(rows: readonly Pt[], axes: RowAxes = rowAxes(rows)): JointRows {
  return {
    lnEff: lnEffs(rows),
    dims: [axes.m, axes.n, axes.k].map((d) => jointDim(d.values, d.index)),
  };
}

/** ln eff of each row. */
function lnEffs(rows: readonly Pt[]): Float64Array {
  const out = new Float64Array(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = Math.log(rows[i]!.eff);
  return out;
}

/** Distinct values of a list and each element's position among them (`distinctIndex`). */
type DistinctIndex = ReturnType<typeof distinctIndex>;

/** Each row's index among the distinct m, n and k of `rows`. */
interface RowAxes {
  m: DistinctIndex;
  n: DistinctIndex;
  k: DistinctIndex;
}

const rowAxes = (rows: readonly Pt[]): RowAxes => ({
  m: distinctIndex(rows.map((p) => p.m)),
  n: distinctIndex(rows.map((p) => p.n)),
  k: distinctIndex(rows.map((p) => p.k)),
});

/**
 * The rows of `p` where `keep` is set, in order, as packJointRows would pack them: the same ln eff per
 * row, and the distinct values of `p` (a superset: a table entry no row reads adds nothing to a sum).
 */
function subsetJointRows(p: JointRows, keep: Uint8Array): JointRows {
  let count = 0;
  for (let i = 0; i < keep.length; i++) count += keep[i]!;
  const lnEff = new Float64Array(count);
  const index = p.dims.map(() => new Int32Array(count));
  for (let i = 0, at = 0; i < keep.length; i++) {
    if (!keep[i]) continue;
    lnEff[at] = p.lnEff[i]!;
    for (let u = 0; u < 3; u++) index[u]![at] = p.dims[u]!.index[i]!;
    at++;
  }
  return { lnEff, dims: p.dims.map((d, u) => jointDim(d.values, index[u]!)) };
}

/** ln(x/(x+h)) and −h/(x+h) per distinct value of each axis at log-coefficients x (into the dims' buffers). */
function jointTables(p: JointRows, x: readonly number[]): void {
  for (let u = 0; u < 3; u++) {
    const d = p.dims[u]!;
    const h = Math.exp(x[u + 1]!);
    const values = d.values;
    const ln = d.ln;
    const jac = d.jac;
    for (let j = 0; j < values.length; j++) {
      const v = values[j]!;
      ln[j] = Math.log(v / (v + h));
      jac[j] = -h / (v + h);
    }
  }
}

/**
 * Σ (ln ε(m,n,k) − ln eff)² at log-coefficients x, and (when `ne`) the normal equations JᵀJ, Jᵀr.
 * ln(x/(x+h)) and the Jacobian −h/(x+h) are taken once per distinct m, n and k (the same values as
 * per row), and the sums run over the rows in order, so every sum is the per-row one, bit for bit.
 * The two loops are two functions (`jointSseOnly`, `jointSseNormal`): one function holding both
 * was deoptimised ≈ 40 times per h200 fit (each branch's first run after the other's optimisation),
 * and ran boxed in between (≈ 100 MB of heap numbers).
 */
function jointSse(p: JointRows, x: readonly number[], ne?: { A: number[][]; b: number[] }) {
  jointTables(p, x);
  if (!ne) return jointSseOnly(p, x[0]!);
  const t = NORMAL_SUMS;
  jointSseNormal(p, x[0]!, t);
  ne.b = [t[1]!, t[2]!, t[3]!, t[4]!];
  ne.A = [
    [t[5]!, t[6]!, t[7]!, t[8]!],
    [t[6]!, t[9]!, t[10]!, t[11]!],
    [t[7]!, t[10]!, t[12]!, t[13]!],
    [t[8]!, t[11]!, t[13]!, t[14]!],
  ];
  return t[0]!;
}

/** jointSseNormal's sums: sse, b0–b3, then a00 a01 a02 a03 a11 a12 a13 a22 a23 a33. */
const NORMAL_SUMS = new Float64Array(15);

function jointSseOnly(p: JointRows, x0: number): number {
  const lnEff = p.lnEff;
  const [dm, dn, dk] = p.dims as [JointRows['dims'][0], JointRows['dims'][0], JointRows['dims'][0]];
  const mi = dm.index;
  const ni = dn.index;
  const ki = dk.index;
  const ml = dm.ln;
  const nl = dn.ln;
  const kl = dk.ln;
  let sse = 0;
  for (let i = 0; i < lnEff.length; i++) {
    const r = x0 + ml[mi[i]!]! + nl[ni[i]!]! + kl[ki[i]!]! - lnEff[i]!;
    sse += r * r;
  }
  return sse;
}

function jointSseNormal(p: JointRows, x0: number, out: Float64Array): void {
  const lnEff = p.lnEff;
  const [dm, dn, dk] = p.dims as [JointRows['dims'][0], JointRows['dims'][0], JointRows['dims'][0]];
  let sse = 0;
  // Jᵀr and the upper triangle of JᵀJ; J = [1, jm, jn, jk], so the 1·r and 1·1 terms are r and 1 exactly.
  let b0 = 0,
    b1 = 0,
    b2 = 0,
    b3 = 0;
  let a00 = 0,
    a01 = 0,
    a02 = 0,
    a03 = 0,
    a11 = 0,
    a12 = 0,
    a13 = 0,
    a22 = 0,
    a23 = 0,
    a33 = 0;
  for (let i = 0; i < lnEff.length; i++) {
    const im = dm.index[i]!;
    const iN = dn.index[i]!;
    const ik = dk.index[i]!;
    const r = x0 + dm.ln[im]! + dn.ln[iN]! + dk.ln[ik]! - lnEff[i]!;
    sse += r * r;
    const j1 = dm.jac[im]!;
    const j2 = dn.jac[iN]!;
    const j3 = dk.jac[ik]!;
    b0 += r;
    b1 += j1 * r;
    b2 += j2 * r;
    b3 += j3 * r;
    a00 += 1;
    a01 += j1;
    a02 += j2;
    a03 += j3;
    a11 += j1 * j1;
    a12 += j1 * j2;
    a13 += j1 * j3;
    a22 += j2 * j2;
    a23 += j2 * j3;
    a33 += j3 * j3;
  }
  out[0] = sse;
  out[1] = b0;
  out[2] = b1;
  out[3] = b2;
  out[4] = b3;
  out[5] = a00;
  out[6] = a01;
  out[7] = a02;
  out[8] = a03;
  out[9] = a11;
  out[10] = a12;
  out[11] = a13;
  out[12] = a22;
  out[13] = a23;
  out[14] = a33;
}

/**
 * Calls of jointSseNormal on a one-row table when the module loads, so that its stores after the loop
 * have feedback before any call is long enough for V8 to compile the loop on entry (OSR): code compiled
 * there without that feedback was deoptimised at the loop's end on ≈ 60 calls per h200 fit. One call
 * is not enough: V8 allocates a function's feedback vector only after a few calls (lazy feedback
 * allocation), and a call before that records nothing (with one call, 25 of those deopts were left).
 * Writes only NORMAL_SUMS, which every caller overwrites first.
 */
const WARM_CALLS = 32;

function warmJointSseNormal(): void {
  const dim = () => jointDim(new Float64Array(1), new Int32Array(1));
  jointSseNormal({ lnEff: new Float64Array(1), dims: [dim(), dim(), dim()] }, 0, NORMAL_SUMS);
}
for (let i = 0; i < WARM_CALLS; i++) warmJointSseNormal();

/**
 * The damped Gauss–Newton step of jointShapeFit at `x`, with a coefficient held at its bound while the
 * step would push it past it (an active set: the step of the others is then the constrained one, not a
 * clamped projection of the free step, which stalls the search along a bound).
 * @param ne the normal equations JᵀJ (4 × 4) and Jᵀr at `x`, in log coefficients (ln eps_max, ln m_half, ln n_half, ln k_half)
 * @param lambda Levenberg–Marquardt damping (dimensionless)
 * @returns the step in log coefficients (0 on a held one), or undefined when every coefficient is held or a solve fails
 */
function jointStep(ne: { A: number[][]; b: number[] }, lambda: number, x: readonly number[]): number[] | undefined {
  const damped = (free: readonly number[]) =>
    solveLinear(
      free.map((u) => free.map((k) => (u === k ? ne.A[u]![k]! * (1 + lambda) + 1e-12 : ne.A[u]![k]!))),
      free.map((u) => -ne.b[u]!),
    );
  // Held from the start: a coefficient at a bound whose gradient points past it (its descent direction −b
  // leaves the box); then any the coupled step would still push past.
  let free = [0, 1, 2, 3].filter(
    (u) => !((x[u]! <= JOINT_LO && ne.b[u]! > 0) || (x[u]! >= JOINT_HI[u]! && ne.b[u]! < 0)),
  );
  if (!free.length) return undefined;
  for (let pass = 0; pass < 4; pass++) {
    const d = damped(free);
    if (!d) return undefined;
    const out = free.filter((u, i) => (x[u]! <= JOINT_LO && d[i]! < 0) || (x[u]! >= JOINT_HI[u]! && d[i]! > 0));
    if (!out.length) return [0, 1, 2, 3].map((u) => (free.includes(u) ? d[free.indexOf(u)]! : 0));
    free = free.filter((u) => !out.includes(u));
    if (!free.length) return undefined;
  }
  return undefined;
}

/**
 * Joint shape-aware fit (issue 16 piece 5): eps_max, m_half, n_half and k_half together, least
 * squares on ln(efficiency) over every row given (each row's ln error weighs the same, as in the
 * geometric error the holdout reports), by Levenberg–Marquardt with the analytic Jacobian in log
 * coefficients (a step is taken only when it lowers the sum; bounds eps_max ≤ JOINT_EPS_MAX_BOUND and every
 * coefficient in [1e-3, 1e6], held by jointStep's active set), started from the staged fit (`init`). The
 * staged fit fixes eps_max and m_half at the envelope (the best shape per m), which leaves every other
 * shape below its ramp; the joint fit trades the asymptote against the halves. Deterministic.
 */
export function jointShapeFit(
  rows: readonly Pt[],
  init: [number, number, number, number],
  iterations = LM_ITERATIONS,
): RampCoefficients & { n_half: number; k_half: number } {
  return jointShapeFitPacked(packJointRows(rows), init, iterations);
}

/** jointShapeFit on rows packed by packJointRows (or a subsetJointRows of them). */
function jointShapeFitPacked(
  packed: JointRows,
  init: [number, number, number, number],
  iterations: number,
): RampCoefficients & { n_half: number; k_half: number } {
  const clamp = (x: number[]) => x.map((v, u) => Math.min(JOINT_HI[u]!, Math.max(JOINT_LO, v)));
  let x = clamp(init.map((v) => Math.log(Math.max(v, 1e-3))));
  // A trial is scored by its SSE alone (about half of the trials are rejected); the normal equations
  // at an accepted trial come from a second pass there, the same sums a single pass would give.
  const newNe = () => ({ A: [0, 1, 2, 3].map(() => [0, 0, 0, 0]), b: [0, 0, 0, 0] });
  let ne = newNe();
  let sse = jointSse(packed, x, ne);
  let lambda = 1e-3;
  for (let it = 0; it < iterations && lambda < 1e10; it++) {
    const d = jointStep(ne, lambda, x);
    const trial = d ? clamp(x.map((v, u) => v + d[u]!)) : undefined;
    const tSse = trial ? jointSse(packed, trial) : Infinity;
    if (tSse < sse) {
      const gain = (sse - tSse) / Math.max(sse, 1e-300);
      [x, sse] = [trial!, tSse];
      lambda = Math.max(lambda / 10, 1e-12);
      if (gain < 1e-12) break;
      ne = newNe();
      jointSse(packed, x, ne);
    } else lambda *= 10;
  }
  const [eps_max, m_half, n_half, k_half] = x.map(Math.exp) as [number, number, number, number];
  return { eps_max, m_half, n_half, k_half };
}

/** No holdout rows: the error fields are NaN and n is 0. */
function noError(): FitError {
  return { geo: NaN, mape_pct: NaN, n: 0 };
}

type Ramp = { eps_max: number; m_half: number };
type Bootstrap = { resamples: number; seed: number };

/** ε(m) of a 1-factor ramp at each point (core/laws gemmEfficiency). */
const rampPred = (f: Ramp, pts: ReadonlyArray<{ m: number }>): number[] =>
  pts.map((p) => gemmEfficiency(p.m, f.eps_max, f.m_half));
/** ε(m)·f(n)·f(k) of a shape-aware ramp at each point (core/laws shapeEfficiency). */
const shapePred = (c: RampCoefficients, pts: readonly Pt[]): number[] =>
  pts.map((p) => shapeEfficiency(p.m, p.n, p.k, c));

/** One dtype's points and their holdout split: whole k values (holdoutValues) and the largest m. */
interface RampSplit {
  /** Every row (the report's scatter, RampResult.points), in row order. */
  points: RampResult['points'];
  compute: Pt[];
  heldK: Set<number>;
  mMax: number;
  /** Compute-bound rows with neither a held-out k nor the largest m. */
  train: Pt[];
  holdK: Pt[];
  holdM: Pt[];
  /** Compute-bound rows with (without) a held-out k, any m: the shape ramp's split. */
  trainK: Pt[];
  holdKAll: Pt[];
  /** Per row of `compute`: 1 when its k is not held out (the row is in `trainK`). */
  inTrainK: Uint8Array;
  /** Efficiency of each row of `compute`, and of each row of `holdKAll`. */
  computeEff: number[];
  holdKEff: number[];
  /** Each row of `compute`'s index among its distinct m, n, k; and `compute` grouped by (n, k), for the shape cells. */
  axes: RowAxes;
  groups: ShapeGroups;
}

/**
 * GEMM rows with repeats (same dtype, m, n, k, kernel) reduced to their median (`reduceRepeatsBy`),
 * computed once per rows array: the GEMM and HBM fitters both reduce the same rows.
 */
export const reduceGemmRepeats: (rows: readonly GemmRow[]) => GemmRow[] = memoByObject((rows) =>
  reduceRepeatsBy(rows, ['dtype', 'm', 'n', 'k', 'kernel_source']),
);

function splitRampPoints(
  rowsIn: readonly GemmRow[],
  dtype: GemmDtype,
  chip: Chip,
  peak: number,
  repeatsReduced: boolean,
): RampSplit | string {
  const rows = repeatsReduced ? rowsIn : reduceRepeatsBy(rowsIn, ['m', 'n', 'k', 'kernel_source']);
  // Every row's efficiency and class (isMemoryBound) in one pass: the report's points, and the
  // compute-bound rows the ramp is fitted on.
  const points: RampResult['points'] = new Array(rows.length);
  const compute: Pt[] = [];
  const bytes = bytesPerElement(dtype);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    const eff = achievedEfficiency(r.m, r.n, r.k, r.latency_us, peak);
    const memory_bound = memoryBoundAt(r, bytes, chip.hbm_bytes_per_us, peak);
    points[i] = { m: r.m, eff, memory_bound };
    if (!memory_bound) compute.push({ m: r.m, n: r.n, k: r.k, eff });
  }
  // The distinct m and k are the axes' (first-seen, as a Set of them would keep them).
  const axes = rowAxes(compute);
  const distinctM = axes.m.values;
  if (distinctM.length < 3) {
    return `gemm ${dtype}: m_half unidentifiable (${distinctM.length} distinct m among ${compute.length} compute-bound rows; need ≥ 3)`;
  }
  const heldK = holdoutValues(axes.k.values);
  const mMax = Math.max(...distinctM);
  const s: RampSplit = {
    points,
    compute,
    heldK,
    mMax,
    axes,
    groups: shapeGroups(compute, axes.n, axes.k),
    train: [],
    holdK: [],
    holdM: [],
    trainK: [],
    holdKAll: [],
    inTrainK: new Uint8Array(compute.length),
    computeEff: compute.map((p) => p.eff),
    holdKEff: [],
  };
  // One pass in row order: every list is the filter of `compute` it names.
  for (let i = 0; i < compute.length; i++) {
    const p = compute[i]!;
    const held = heldK.has(p.k);
    if (p.m !== mMax) (held ? s.holdK : s.train).push(p);
    else s.holdM.push(p);
    if (held) {
      s.holdKAll.push(p);
      s.holdKEff.push(p.eff);
    } else {
      s.trainK.push(p);
      s.inTrainK[i] = 1;
    }
  }
  return s;
}

/**
 * The stored envelope ramp (every compute-bound row's envelope), its split twin (train rows only),
 * their errors, and a seeded pairs bootstrap over the envelope points (the statistic the stored
 * value is fitted on), warm-started at the stored fit.
 */
function envelopeFits(s: RampSplit, bootstrap: Bootstrap) {
  const envTrain = envelope(s.train);
  const envFull = envelope(s.compute);
  const split = fitRamp(
    envTrain.map((p) => p.m),
    envTrain.map((p) => p.eff),
  );
  const envHold = [...envelope(s.holdK), ...envelope(s.holdM)];
  const stored = fitRamp(
    envFull.map((p) => p.m),
    envFull.map((p) => p.eff),
  );
  // A resample's points in two buffers reused by every resample (fitRamp keeps neither).
  const ms = new Float64Array(envFull.length);
  const effs = new Float64Array(envFull.length);
  const boot = resampleEstimates(envFull.length, bootstrap.resamples, bootstrap.seed, (idx) => {
    for (let j = 0; j < idx.length; j++) {
      ms[j] = envFull[idx[j]!]!.m;
      effs[j] = envFull[idx[j]!]!.eff;
    }
    const f = fitRamp(ms, effs, [stored.eps_max, stored.m_half]);
    return Number.isFinite(f.eps_max) ? f : undefined;
  });
  return {
    envFull,
    split,
    stored,
    ci_eps: ciFromEstimates(boot.map((f) => f.eps_max)),
    ci_m_half: ciFromEstimates(boot.map((f) => f.m_half)),
    train: fitError(
      rampPred(stored, envFull),
      envFull.map((p) => p.eff),
    ),
    holdout: envHold.length
      ? fitError(
          rampPred(split, envHold),
          envHold.map((p) => p.eff),
        )
      : noError(),
  };
}

/**
 * Seeded cluster bootstrap over whole k values of the shape halves (k is the dimension the fit must
 * cross), with eps_max and m_half fixed at the stored ramp; resamples with a single k are skipped.
 * `cells` are the stored ramp's cells of every compute-bound row: those of one k, in their order, are
 * the cells of that k's rows alone (each cell is one (n, k); first-seen order restricted to one k is
 * that k's rows' first-seen order).
 *
 * A k drawn c times enters its resample once, each of its cells with weight c·w (`resampleBlocks`): the
 * same objective as its c copies (the weights are integer row counts, so c·w and every W_j are exact),
 * summed over ≈ 63 % of the cells, so its sums agree with the copies' to rounding, not bit for bit; the
 * intervals may move in their last digits (issue 17: the polls are ≈ 60 % of the GEMM bootstrap).
 */
function bootstrapHalves(
  cells: ReadonlyArray<{ n: number; k: number; r: number; w: number }>,
  halves: { n_half: number; k_half: number },
  bootstrap: Bootstrap,
) {
  const byK = groupBy(cells, (c) => c.k);
  const ks = [...byK.keys()].sort((a, b) => a - b);
  const cellsByK = ks.map((k) => byK.get(k)!);
  // Every k's cells packed once (distinct n and k over all of them); a resample copies its k's blocks
  // in first-drawn order into reused buffers.
  const all = packCells(cellsByK.flat());
  const start = new Int32Array(ks.length + 1);
  cellsByK.forEach((c, i) => {
    start[i + 1] = start[i]! + c.length;
  });
  const buf = resampleCells(all, all.r.length);
  const drawn = new Int32Array(ks.length);
  const fits = resampleEstimates(ks.length, bootstrap.resamples, bootstrap.seed + 1, (idx) => {
    const { distinct, copies, m } = resampleBlocks(idx, drawn, start, all, buf);
    if (distinct < 2) return undefined;
    if (copies < 3) return { n_half: NaN, k_half: NaN };
    return polishPacked(headCells(buf, m), [Math.log(halves.n_half), Math.log(halves.k_half)], 0.02, 150);
  });
  return { ci_n: ciFromEstimates(fits.map((f) => f.n_half)), ci_k: ciFromEstimates(fits.map((f) => f.k_half)) };
}

/**
 * The cells of one resample of whole k blocks (`idx`, block indices; `start`, each block's first cell in
 * `all`) into `buf`: each block drawn once, in first-drawn order, its weights times the times drawn.
 * `drawn` is scratch (one per block). @returns the distinct blocks, the cells counted with repeats, and the cells written
 */
function resampleBlocks(idx: Uint32Array, drawn: Int32Array, start: Int32Array, all: PackedCells, buf: PackedCells) {
  drawn.fill(0);
  let distinct = 0;
  let copies = 0;
  for (const i of idx) {
    if (!drawn[i]!) distinct++;
    drawn[i]!++;
    copies += start[i + 1]! - start[i]!;
  }
  let m = 0;
  for (const i of idx) {
    const c = drawn[i]!;
    if (!c) continue;
    drawn[i] = 0;
    for (let j = start[i]!; j < start[i + 1]!; j++, m++) {
      copyCell(all, j, buf, m);
      buf.w[m] = c * all.w[j]!;
    }
  }
  return { distinct, copies, m };
}

/** Buffers for up to `size` cells of `all` (its distinct n and k values shared). */
const resampleCells = (all: PackedCells, size: number): PackedCells => ({
  ...all,
  r: new Float64Array(size),
  w: new Float64Array(size),
  nIndex: new Int32Array(size),
  kIndex: new Int32Array(size),
});

/** Cell `j` of `from` written as cell `m` of `to` (both index the same distinct values). */
function copyCell(from: PackedCells, j: number, to: PackedCells, m: number): void {
  to.r[m] = from.r[j]!;
  to.w[m] = from.w[j]!;
  to.nIndex[m] = from.nIndex[j]!;
  to.kIndex[m] = from.kIndex[j]!;
}

/** The first `m` cells of `c` (views). */
const headCells = (c: PackedCells, m: number): PackedCells => ({
  ...c,
  r: c.r.subarray(0, m),
  w: c.w.subarray(0, m),
  nIndex: c.nIndex.subarray(0, m),
  kIndex: c.kIndex.subarray(0, m),
});

/** The joint shape fit of one dtype: coefficients, bootstrap CIs (when stored) and errors. */
export interface JointShape extends Required<RampCoefficients> {
  ci_eps?: [number, number];
  ci_m_half?: [number, number];
  ci_n?: [number, number];
  ci_k?: [number, number];
  train: FitError;
  holdout: FitError;
  holdout_geo: number;
}

/**
 * Formats whose joint shape fit may be stored (DECISION, docs/fitting.md "GEMM ramp"): none yet. The
 * joint fit wins held-out k for fp8 and fp8_block on every chip, but its m_half (h200 fp8 338,
 * fp8_block 973 tokens, fitted on m ≥ 206) prices a one-token GEMM ~10× slower than the envelope ramp
 * (deepseek-v3 h200 decode(1) expert fallback 7.1 → 75.9 ms of SM); it is reported until the small-m
 * extrapolation is handled.
 */
const JOINT_STORABLE: ReadonlySet<GemmDtype> = new Set<GemmDtype>();

/** Rows per bootstrap resample of the joint fit (every ⌈n/JOINT_BOOT_ROWS⌉-th row, before resampling k). */
export const JOINT_BOOT_ROWS = 3000;

/**
 * Seeded cluster bootstrap over whole k of the joint fit, warm-started at the stored fit (20 LM
 * iterations) on a deterministic ≤ JOINT_BOOT_ROWS-row thinning; resamples with one k are skipped.
 */
function bootstrapJoint(compute: readonly Pt[], at: Required<RampCoefficients>, bootstrap: Bootstrap) {
  const step = Math.ceil(compute.length / JOINT_BOOT_ROWS);
  const byK = groupBy(
    compute.filter((_, i) => i % step === 0),
    (p) => p.k,
  );
  const ks = [...byK.keys()].sort((a, b) => a - b);
  const fits = resampleEstimates(ks.length, bootstrap.resamples, bootstrap.seed + 2, (idx) => {
    const picked = Array.from(idx, (i) => ks[i]!);
    if (new Set(picked).size < 2) return undefined;
    return jointShapeFit(
      picked.flatMap((k) => byK.get(k)!),
      [at.eps_max, at.m_half, at.n_half, at.k_half],
      20,
    );
  });
  const ci = (f: (c: Required<RampCoefficients>) => number) => ciFromEstimates(fits.map(f));
  return {
    ci_eps: ci((f) => f.eps_max),
    ci_m_half: ci((f) => f.m_half),
    ci_n: ci((f) => f.n_half),
    ci_k: ci((f) => f.k_half),
  };
}

/** The joint fit on the whole-k split (scored on the held-out k) and on every compute-bound row. */
function jointFits(s: RampSplit, staged: Required<RampCoefficients>, stagedSplit: Required<RampCoefficients>) {
  const start = (c: Required<RampCoefficients>): [number, number, number, number] => [
    Math.min(c.eps_max, JOINT_EPS_MAX_BOUND),
    c.m_half,
    c.n_half || 100,
    c.k_half || 100,
  ];
  // Every compute-bound row packed once; the split's rows (trainK) are a subset of them.
  const rows = packJointRows(s.compute, s.axes);
  const split = jointShapeFitPacked(subsetJointRows(rows, s.inTrainK), start(stagedSplit), LM_ITERATIONS);
  const full = jointShapeFitPacked(rows, start(staged), LM_ITERATIONS);
  const holdPred = s.holdKAll.length ? shapePred(split, s.holdKAll) : [];
  const holdout = s.holdKAll.length ? fitError(holdPred, s.holdKEff) : noError();
  const train = fitError(shapePred(full, s.compute), s.computeEff);
  return {
    ...full,
    train,
    holdout,
    holdout_geo: holdout.n ? geometricError(holdPred, s.holdKEff) : NaN,
  };
}

/**
 * Shape-aware ramp: the staged fit (halves fitted with the envelope ramp fixed) and the joint fit
 * (jointShapeFit), scored on held-out whole k against both 1-factor ramps; the better of the two is
 * stored only when it removes SHAPE_STORE_RULE of the 1-factor excess error.
 */
function shapeFits(
  s: RampSplit,
  split: Ramp,
  stored: Ramp,
  allFull: Ramp,
  bootstrap: Bootstrap,
  dtype: GemmDtype,
): RampResult['shape'] {
  const halvesSplit = fitShapeHalves(shapeCells(s.compute, s.groups, split, (k) => !s.heldK.has(k)));
  const cells = shapeCells(s.compute, s.groups, stored);
  const halves = fitShapeHalves(cells);
  const meas = s.holdKEff;
  const geo = (pred: number[]) => (pred.length ? geometricError(pred, meas) : NaN);
  const holdout_geo_envelope = geo(rampPred(split, s.holdKAll));
  const allSplitK = fitRampAllRows(s.trainK, [allFull.eps_max, allFull.m_half]);
  const holdout_geo_all_rows = geo(rampPred(allSplitK, s.holdKAll));
  const shapeHoldPred = shapePred({ ...split, ...halvesSplit }, s.holdKAll);
  const holdout_geo_shape = geo(shapeHoldPred);
  const joint: JointShape = jointFits(s, { ...stored, ...halves }, { ...split, ...halvesSplit });
  const method = JOINT_STORABLE.has(dtype) && joint.holdout_geo < holdout_geo_shape ? 'joint' : 'staged';
  const bestShape = Math.min(holdout_geo_shape, joint.holdout_geo);
  const best1 = Math.min(holdout_geo_envelope, holdout_geo_all_rows);
  const isStored =
    Number.isFinite(bestShape) && Number.isFinite(best1) && bestShape - 1 <= SHAPE_STORE_RULE * (best1 - 1);
  if (isStored && method === 'joint') Object.assign(joint, bootstrapJoint(s.compute, joint, bootstrap));
  return {
    n_half: halves.n_half,
    k_half: halves.k_half,
    ...bootstrapHalves(cells, halves, bootstrap),
    holdout_geo_envelope,
    holdout_geo_all_rows,
    holdout_geo_shape,
    // Full errors of the staged shape-aware ramp: train on every compute-bound row with the stored
    // halves, holdout on the whole-k rows with halves fitted without them.
    shape_train: fitError(shapePred({ ...stored, ...halves }, s.compute), s.computeEff),
    shape_holdout: shapeHoldPred.length ? fitError(shapeHoldPred, meas) : noError(),
    joint,
    method,
    stored: isStored,
  };
}

/**
 * Fit one dtype's ramp. Rows must be one dtype; repeats (same m, n, k, kernel) are reduced to their
 * median, unless `repeatsReduced` says the caller did so already (fitGemm: the reduction is then a no-op).
 * @returns the result, or a refusal string when m_half is unidentifiable.
 */
export function fitRampForDtype(
  rowsIn: readonly GemmRow[],
  dtype: GemmDtype,
  chip: Chip,
  bootstrap: Bootstrap,
  repeatsReduced = false,
): RampResult | string {
  const peak = peakFlopsPerUs(chip, dtype)!;
  const s = splitRampPoints(rowsIn, dtype, chip, peak, repeatsReduced);
  if (typeof s === 'string') return s;
  const env = envelopeFits(s, bootstrap);
  const stored = env.stored;
  // All-rows fit (reported beside the envelope).
  const allSplit = fitRampAllRows(s.train, [stored.eps_max * 0.7, stored.m_half]);
  const allFull = fitRampAllRows(s.compute, [stored.eps_max * 0.7, stored.m_half]);
  const holdRows = [...s.holdK, ...s.holdM];
  return {
    dtype,
    rows_total: s.points.length,
    rows_memory_bound: s.points.length - s.compute.length,
    m_threshold: memoryBoundThresholdM(chip, dtype),
    envelope_fit: { eps_max: stored.eps_max, m_half: stored.m_half, ci_eps: env.ci_eps, ci_m_half: env.ci_m_half },
    all_rows_fit: allFull,
    envelope_train: env.train,
    envelope_holdout: env.holdout,
    all_rows_train: fitError(rampPred(allFull, s.compute), s.computeEff),
    all_rows_holdout: holdRows.length
      ? fitError(
          rampPred(allSplit, holdRows),
          holdRows.map((p) => p.eff),
        )
      : noError(),
    large_m: env.envFull
      .filter((p) => p.m >= 4096)
      .map((p) => ({ m: p.m, measured: p.eff, predicted: gemmEfficiency(p.m, stored.eps_max, stored.m_half) })),
    shape: shapeFits(s, env.split, stored, allFull, bootstrap, dtype),
    held_k: [...s.heldK].sort((a, b) => a - b),
    m_max: s.mMax,
    peak_flops_per_us: peak,
    points: s.points,
    envelope: env.envFull,
  };
}

/**
 * `groupBy(rows, (r) => r.dtype)` (same groups, same order), reading the Map only when the dtype changes
 * from the row before (the tables store each dtype's rows together).
 */
function groupByDtype(rows: readonly GemmRow[]): Map<string, GemmRow[]> {
  const m = new Map<string, GemmRow[]>();
  let key: string | undefined;
  let group: GemmRow[] = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    if (r.dtype !== key) {
      key = r.dtype;
      let g = m.get(key);
      if (!g) {
        g = [];
        m.set(key, g);
      }
      group = g;
    }
    group.push(r);
  }
  return m;
}

/** The dtype of a gemm row as a GemmDtype, or undefined for formats without a ramp. */
function asGemmDtype(d: string): GemmDtype | undefined {
  return (GEMM_DTYPES as readonly string[]).includes(d) ? (d as GemmDtype) : undefined;
}

/** GEMM family result: the coefficients and one `RampResult` per fitted dtype (in GEMM_DTYPES order). */
export type GemmFit = FamilyFit & { ramps: RampResult[] };

/**
 * GEMM family fitter. Fits every dtype that has rows and a datasheet peak on this chip.
 * Coefficients (set cost-model-primitives): gemm_eps_max_<d>, gemm_m_half_<d>, and
 * gemm_n_half_<d>/gemm_k_half_<d> when the shape ramp clearly wins on held-out k.
 * The orchestrator reads `gemm_eps_max_<d>`/`gemm_m_half_<d>` from the returned coefficients.
 */
export function fitGemm(rowsIn: readonly GemmRow[], ctx: FitContext): GemmFit {
  const fit: GemmFit = { ...emptyFamilyFit('gemm'), ramps: [] };
  const rows = reduceGemmRepeats(rowsIn);
  const byDtype = groupByDtype(rows);
  const dtypes = [...byDtype.keys()].sort(
    (a, b) => GEMM_DTYPES.indexOf(a as GemmDtype) - GEMM_DTYPES.indexOf(b as GemmDtype),
  );
  for (const d of dtypes) {
    const dtype = asGemmDtype(d);
    if (!dtype || peakFlopsPerUs(ctx.chip, dtype) === undefined) {
      fit.warnings.push(`gemm ${d}: no datasheet peak on ${ctx.chip.name}; not fitted`);
      continue;
    }
    const r = fitRampForDtype(byDtype.get(d)!, dtype, ctx.chip, ctx.bootstrap, true);
    if (typeof r === 'string') {
      fit.refusals.push(r);
      continue;
    }
    fit.ramps.push(r);
    fit.coefficients.push(...rampCoefficients(r, ctx), ...(r.shape.stored ? shapeHalfCoefficients(r, ctx) : []));
  }
  return fit;
}

/** Rows an entry of this ramp was fitted on (evidence `filter`, `rows_used`). */
function rampRowsUsed(r: RampResult) {
  return {
    filter: `dtype == ${r.dtype}; compute-bound (m ≥ ${fmt(r.m_threshold)}: weight bytes/HBM ≤ FLOPs/peak); envelope = best efficiency per m`,
    rows_used: r.rows_total - r.rows_memory_bound,
  };
}

/** True when the stored ramp is the joint shape fit (its eps_max and m_half replace the envelope's). */
const jointStored = (r: RampResult) => r.shape.stored && r.shape.method === 'joint';

function rampCoefficients(r: RampResult, ctx: FitContext): FittedCoefficient[] {
  const used = rampRowsUsed(r);
  const j = r.shape.joint;
  const joint = jointStored(r);
  const holdout = joint
    ? { ...j.holdout, split: `whole k ∈ {${r.held_k.join(', ')}} (all compute-bound rows)` }
    : { ...r.envelope_holdout, split: `whole k ∈ {${r.held_k.join(', ')}} and m = ${r.m_max} (envelope points)` };
  const notes = [
    ...(joint
      ? [
          `joint shape-aware fit stored (eps_max, m_half, n_half, k_half together on ln efficiency, eps_max ≤ ${JOINT_EPS_MAX_BOUND}): held-out-k geo ${fmt(j.holdout_geo)} vs staged ${fmt(r.shape.holdout_geo_shape)}`,
          `envelope fit (not stored): eps_max ${fmt(r.envelope_fit.eps_max)}, m_half ${fmt(r.envelope_fit.m_half)}; train geo ${r.envelope_train.geo}, holdout geo ${r.envelope_holdout.geo}`,
        ]
      : []),
    `all-rows fit (not stored): eps_max ${fmt(r.all_rows_fit.eps_max)}, m_half ${fmt(r.all_rows_fit.m_half)}; train geo ${r.all_rows_train.geo}, holdout geo ${r.all_rows_holdout.geo}`,
    `${r.rows_memory_bound} memory-bound rows (m < ${fmt(r.m_threshold)}) excluded from the compute ramp`,
    ...r.large_m
      .filter((p) => p.m >= 8192)
      .map((p) => `large-m bias: m=${p.m} envelope ${fmt(p.measured, 3)} vs predicted ${fmt(p.predicted, 3)}`),
  ];
  const entry = (value: number, units: 'dimensionless' | 'tokens', ci: [number, number]) =>
    measuredEntry({
      value,
      units,
      family: 'gemm',
      ctx,
      used,
      ci95: ci,
      ci_method: 'bootstrap',
      train: joint ? j.train : r.envelope_train,
      holdout,
      notes,
    });
  const e = joint
    ? { eps: j.eps_max, mh: j.m_half, ci_eps: j.ci_eps!, ci_mh: j.ci_m_half! }
    : {
        eps: r.envelope_fit.eps_max,
        mh: r.envelope_fit.m_half,
        ci_eps: r.envelope_fit.ci_eps,
        ci_mh: r.envelope_fit.ci_m_half,
      };
  return [
    { set: SET_NAMES.primitives, name: `gemm_eps_max_${r.dtype}`, entry: entry(e.eps, 'dimensionless', e.ci_eps) },
    { set: SET_NAMES.primitives, name: `gemm_m_half_${r.dtype}`, entry: entry(e.mh, 'tokens', e.ci_mh) },
  ];
}

/** gemm_n_half_<d> and gemm_k_half_<d> (stored only when the shape ramp clearly wins on held-out k). */
function shapeHalfCoefficients(r: RampResult, ctx: FitContext): FittedCoefficient[] {
  const s = r.shape;
  const joint = jointStored(r);
  const j = s.joint;
  const used = rampRowsUsed(r);
  const shapeHold = {
    ...(joint ? j.holdout : s.shape_holdout),
    split: `whole k ∈ {${r.held_k.join(', ')}} (all compute-bound rows)`,
  };
  const shapeNote = [
    joint
      ? `shape factor n/(n+n_half)·k/(k+k_half) fitted jointly with eps_max and m_half (stored: the joint fit)`
      : `shape factor n/(n+n_half)·k/(k+k_half) fitted with eps_max, m_half fixed at the stored envelope ramp`,
    `held-out-k geo: envelope 1-factor ${fmt(s.holdout_geo_envelope)}, all-rows 1-factor ${fmt(s.holdout_geo_all_rows)}, staged shape-aware ${fmt(s.holdout_geo_shape)}, joint shape-aware ${fmt(j.holdout_geo)}`,
  ];
  const halves = [
    [
      `gemm_n_half_${r.dtype}`,
      joint ? j.n_half : s.n_half,
      joint ? j.ci_n! : s.ci_n,
      "n (output features, the weight matrix's output width)",
    ],
    [
      `gemm_k_half_${r.dtype}`,
      joint ? j.k_half : s.k_half,
      joint ? j.ci_k! : s.ci_k,
      'k (input features, the reduction width)',
    ],
  ] as const;
  return halves.map(([nm, v, ci, dim]) => {
    const entry = measuredEntry({
      value: v,
      units: 'dimensionless',
      family: 'gemm',
      ctx,
      used,
      ci95: ci,
      ci_method: 'bootstrap',
      train: joint ? j.train : s.shape_train,
      holdout: shapeHold,
      notes: [...shapeNote, `${HALF_UNIT_NOTE}: ${dim}`],
    });
    const { evidence, ci95, ...head } = entry;
    const rationale = `Unit: elements (features) of GEMM dimension ${dim}, not tokens. BLIS's unit enum has no "elements", so the entry is stored as dimensionless (a count); the shape factor is ${nm.includes('_n_') ? 'n/(n + n_half)' : 'k/(k + k_half)'} with ${nm.includes('_n_') ? 'n' : 'k'} in elements.`;
    // Keys in BLIS's order (rationale before ci95), evidence last.
    return {
      set: SET_NAMES.primitives,
      name: nm,
      entry: { ...head, rationale, ...(ci95 ? { ci95 } : {}), ...(evidence ? { evidence } : {}) },
    };
  });
}
