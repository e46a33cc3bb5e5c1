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
import { levenbergMarquardt } from 'ml-levenberg-marquardt';
import type { Chip } from '../core/catalog/chip.ts';
import { peakFlopsPerUs } from '../core/catalog/chip.ts';
import { bytesPerElement, type GemmDtype, GEMM_DTYPES } from '../core/catalog/dtypes.ts';
import type { GemmRow } from '../measurements/schema.ts';
import type { FitError } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import { chart } from '../core/render/svg.ts';
import { ciFromEstimates, fitError, fmt, holdoutValues, measuredEntry, patternSearch, reduceRepeats, thin } from './common.ts';
import { geometricError, groupBy, seededRandom } from '../core/numeric/stats.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext, type FittedCoefficient } from './types.ts';

/** Achieved fraction of the dtype's dense peak. */
export function gemmEfficiency(row: Pick<GemmRow, 'm' | 'n' | 'k' | 'latency_us'>, peakFlopsPerUsValue: number): number {
  return (2 * row.m * row.n * row.k) / (row.latency_us * peakFlopsPerUsValue);
}

/** Token count below which a GEMM's weight read outlasts its math at datasheet rates. */
export function memoryBoundThresholdM(chip: Chip, dtype: GemmDtype): number {
  const peak = peakFlopsPerUs(chip, dtype);
  if (peak === undefined) throw new Error(`${chip.name} has no ${dtype} peak`);
  return (peak * bytesPerElement(dtype)) / (2 * chip.hbm_bytes_per_us);
}

/** True when n·k·bytes(dtype) / HBM bandwidth > 2·m·n·k / peak (datasheet rates). */
export function isMemoryBound(row: Pick<GemmRow, 'm' | 'n' | 'k'>, dtype: GemmDtype, chip: Chip): boolean {
  const peak = peakFlopsPerUs(chip, dtype)!;
  const memory_us = (row.n * row.k * bytesPerElement(dtype)) / chip.hbm_bytes_per_us;
  const compute_us = (2 * row.m * row.n * row.k) / peak;
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

/** eps_max · m / (m + m_half). */
export function rampEff(eps_max: number, m_half: number, m: number): number {
  return (eps_max * m) / (m + m_half);
}

/**
 * Least-squares fit of eps(m) = eps_max·m/(m+m_half) by Levenberg–Marquardt with the analytic
 * Jacobian. @returns NaNs when fewer than 3 distinct m (m_half unidentifiable).
 */
export function fitRamp(
  ms: readonly number[],
  effs: readonly number[],
  init: [number, number] = [Math.max(...effs), 100],
  counts?: readonly number[],
): { eps_max: number; m_half: number } {
  if (new Set(ms).size < 3) return { eps_max: NaN, m_half: NaN };
  // Parameterised as (eps_max, ln m_half) so both directions have O(1) curvature: the library's
  // damping is absolute, and m_half in tokens would otherwise converge very slowly.
  const res = levenbergMarquardt({ x: ms, y: effs }, ([e, u]) => {
    const h = Math.exp(u!);
    return (m) => (e! * m) / (m + h);
  }, {
    initialValues: [init[0], Math.log(Math.max(init[1], 1e-3))],
    // The library takes per-point sigmas (weight = 1/sigma²); a mean of c rows has sigma ∝ 1/√c.
    ...(counts ? { weights: counts.map((c) => 1 / Math.sqrt(c)) } : {}),
    jacobianFunction: ([e, u]) => {
      const h = Math.exp(u!);
      return (m) => [m / (m + h), (-e! * m * h) / ((m + h) * (m + h))];
    },
    damping: 1e-3,
    maxIterations: LM_ITERATIONS,
    errorTolerance: 1e-14,
    improvementThreshold: 1e-6,
    minValues: [1e-6, Math.log(1e-3)],
    maxValues: [10, Math.log(1e7)],
  });
  // Polish on the same (weighted) least-squares objective; see fitShapeHalves.
  const w = counts ?? ms.map(() => 1);
  const sse = ([e, u]: readonly number[]) => {
    const h = Math.exp(u!);
    let t = 0;
    for (let i = 0; i < ms.length; i++) {
      const d = (e! * ms[i]!) / (ms[i]! + h) - effs[i]!;
      t += w[i]! * d * d;
    }
    return t;
  };
  const pol = patternSearch(sse, res.parameterValues, [0.01, 0.05], { minStep: 1e-7, maxEvals: 400 });
  const [eps_max, u] = pol.x as [number, number];
  return { eps_max, m_half: Math.exp(u) };
}

/**
 * Least-squares ramp over ALL rows, computed exactly from per-m sufficient statistics: Σ(y − f(m))²
 * over rows equals Σ_m c_m·(ȳ_m − f(m))² + const, so a count-weighted fit to the per-m means gives
 * the same optimum as a fit to every row, in a fraction of the time.
 */
export function fitRampAllRows(points: ReadonlyArray<{ m: number; eff: number }>, init?: [number, number]): { eps_max: number; m_half: number } {
  const acc = new Map<number, { s: number; c: number }>();
  for (const p of points) {
    const a = acc.get(p.m);
    if (a) (a.s += p.eff), a.c++;
    else acc.set(p.m, { s: p.eff, c: 1 });
  }
  const ms = [...acc.keys()].sort((a, b) => a - b);
  const ys = ms.map((m) => acc.get(m)!.s / acc.get(m)!.c);
  return fitRamp(ms, ys, init ?? [Math.max(...ys), 100], ms.map((m) => acc.get(m)!.c));
}

/** Best efficiency per distinct m, sorted by m. */
export function envelope(points: ReadonlyArray<{ m: number; eff: number }>): Array<{ m: number; eff: number }> {
  const best = new Map<number, number>();
  for (const p of points) if (!(best.get(p.m)! >= p.eff)) best.set(p.m, p.eff);
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
  if (warm) return polishHalves(cells, [Math.log(init[0]), Math.log(init[1])], 0.02, 150);
  const idx = cells.map((_, i) => i);
  const res = levenbergMarquardt(
    { x: idx, y: cells.map((c) => c.r) },
    ([un, uk]) => {
      const nh = Math.exp(un!);
      const kh = Math.exp(uk!);
      return (i) => {
        const c = cells[i]!;
        return Math.log(c.n / (c.n + nh)) + Math.log(c.k / (c.k + kh));
      };
    },
    {
      initialValues: [Math.log(init[0]), Math.log(init[1])],
      weights: cells.map((c) => 1 / Math.sqrt(c.w)),
      jacobianFunction: ([un, uk]) => {
        const nh = Math.exp(un!);
        const kh = Math.exp(uk!);
        return (i) => {
          const c = cells[i]!;
          return [-nh / (c.n + nh), -kh / (c.k + kh)];
        };
      },
      damping: 1e-3,
      maxIterations: LM_ITERATIONS,
      errorTolerance: 1e-14,
      improvementThreshold: 1e-6,
      minValues: [Math.log(1e-3), Math.log(1e-3)],
      maxValues: [Math.log(1e6), Math.log(1e6)],
    },
  );
  // Polish with a compass search on the same weighted objective (the library runs a fixed number of
  // iterations with absolute damping; the polish makes the optimum independent of the start).
  return polishHalves(cells, res.parameterValues, 0.05, 400);
}

function polishHalves(cells: ReadonlyArray<{ n: number; k: number; r: number; w: number }>, x0: readonly number[], step: number, maxEvals: number): { n_half: number; k_half: number } {
  const sse = ([un, uk]: readonly number[]) => {
    const nh = Math.exp(un!);
    const kh = Math.exp(uk!);
    let t = 0;
    for (const c of cells) {
      const d = Math.log(c.n / (c.n + nh)) + Math.log(c.k / (c.k + kh)) - c.r;
      t += c.w * d * d;
    }
    return t;
  };
  const pol = patternSearch(sse, x0, [step, step], { minStep: 1e-6, maxEvals });
  const [un, uk] = pol.x as [number, number];
  return { n_half: Math.exp(un), k_half: Math.exp(uk) };
}

interface Pt {
  m: number;
  n: number;
  k: number;
  eff: number;
  latency_us: number;
  kernel_source: string;
}

function shapeCells(points: readonly Pt[], eps_max: number, m_half: number) {
  const g = groupBy(points, (p) => `${p.n},${p.k}`);
  const cells: Array<{ n: number; k: number; r: number; w: number }> = [];
  for (const ps of g.values()) {
    const rs = ps.map((p) => Math.log(p.eff / rampEff(eps_max, m_half, p.m))).sort((a, b) => a - b);
    const h = (rs.length - 1) / 2;
    const r = (rs[Math.floor(h)]! + rs[Math.ceil(h)]!) / 2;
    cells.push({ n: ps[0]!.n, k: ps[0]!.k, r, w: ps.length });
  }
  return cells;
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
    free: { eps_max: number; m_half: number; n_half: number; k_half: number; holdout_geo: number };
    stored: boolean;
  };
  held_k: number[];
  m_max: number;
}

/** Fraction of (geo − 1) the shape-aware ramp must remove on held-out k to be stored. */
export const SHAPE_STORE_RULE = 0.75;

function freeShapeFit(train: readonly Pt[], init: [number, number, number, number]) {
  // Deterministic subsample (≤ ~3000 rows): this fit is reported, never stored.
  const ok = train.filter((_, i) => i % Math.max(1, Math.ceil(train.length / 3000)) === 0);
  const idx = ok.map((_, i) => i);
  const res = levenbergMarquardt(
    { x: idx, y: ok.map((p) => Math.log(p.eff)) },
    ([le, um, un, uk]) => {
      const [mh, nh, kh] = [Math.exp(um!), Math.exp(un!), Math.exp(uk!)];
      return (i) => {
        const p = ok[i]!;
        return le! + Math.log(p.m / (p.m + mh)) + Math.log(p.n / (p.n + nh)) + Math.log(p.k / (p.k + kh));
      };
    },
    {
      initialValues: init.map((v) => Math.log(Math.max(v, 1e-3))),
      jacobianFunction: ([, um, un, uk]) => {
        const [mh, nh, kh] = [Math.exp(um!), Math.exp(un!), Math.exp(uk!)];
        return (i) => {
          const p = ok[i]!;
          return [1, -mh / (p.m + mh), -nh / (p.n + nh), -kh / (p.k + kh)];
        };
      },
      damping: 1e-3,
      maxIterations: LM_ITERATIONS,
      errorTolerance: 1e-14,
      improvementThreshold: 1e-6,
      minValues: [Math.log(1e-3), Math.log(1e-3), Math.log(1e-3), Math.log(1e-3)],
      maxValues: [Math.log(2), Math.log(1e6), Math.log(1e6), Math.log(1e6)],
    },
  );
  const [eps_max, m_half, n_half, k_half] = res.parameterValues.map(Math.exp) as [number, number, number, number];
  return { eps_max, m_half, n_half, k_half };
}

/**
 * Fit one dtype's ramp. Rows must be one dtype; repeats (same m, n, k, kernel) are reduced to their median.
 * @returns the result, or a refusal string when m_half is unidentifiable.
 */
export function fitRampForDtype(
  rowsIn: readonly GemmRow[],
  dtype: GemmDtype,
  chip: Chip,
  bootstrap: { resamples: number; seed: number },
): RampResult | string {
  const peak = peakFlopsPerUs(chip, dtype)!;
  const rows = reduceRepeats(rowsIn, (r) => `${r.m}|${r.n}|${r.k}|${r.kernel_source}`);
  const all: Pt[] = rows.map((r) => ({ m: r.m, n: r.n, k: r.k, latency_us: r.latency_us, kernel_source: r.kernel_source, eff: gemmEfficiency(r, peak) }));
  const compute = all.filter((p) => !isMemoryBound(p, dtype, chip));
  const distinctM = new Set(compute.map((p) => p.m));
  if (distinctM.size < 3) {
    return `gemm ${dtype}: m_half unidentifiable (${distinctM.size} distinct m among ${compute.length} compute-bound rows; need ≥ 3)`;
  }
  const heldK = holdoutValues(compute.map((p) => p.k));
  const mMax = Math.max(...distinctM);
  const train = compute.filter((p) => !heldK.has(p.k) && p.m !== mMax);
  const holdK = compute.filter((p) => heldK.has(p.k) && p.m !== mMax);
  const holdM = compute.filter((p) => p.m === mMax);

  // Envelope fit: holdout split, then the stored fit on every compute-bound row's envelope.
  const envTrain = envelope(train);
  const envFull = envelope(compute);
  const splitFit = fitRamp(envTrain.map((p) => p.m), envTrain.map((p) => p.eff));
  const envHold = [...envelope(holdK), ...envelope(holdM)];
  const stored = fitRamp(envFull.map((p) => p.m), envFull.map((p) => p.eff));
  const predEnv = (f: { eps_max: number; m_half: number }, pts: ReadonlyArray<{ m: number }>) => pts.map((p) => rampEff(f.eps_max, f.m_half, p.m));
  const envelope_train = fitError(predEnv(stored, envFull), envFull.map((p) => p.eff));
  const envelope_holdout = envHold.length ? fitError(predEnv(splitFit, envHold), envHold.map((p) => p.eff)) : { geo: NaN, mape_pct: NaN, n: 0 };

  // Pairs bootstrap over the envelope points (the statistic the stored value is fitted on).
  const rand = seededRandom(bootstrap.seed);
  const bE: number[] = [];
  const bH: number[] = [];
  const nE = envFull.length;
  for (let b = 0; b < bootstrap.resamples; b++) {
    const xs: number[] = [];
    const ys: number[] = [];
    for (let i = 0; i < nE; i++) {
      const p = envFull[Math.floor(rand() * nE)]!;
      xs.push(p.m);
      ys.push(p.eff);
    }
    const f = fitRamp(xs, ys, [stored.eps_max, stored.m_half]);
    if (Number.isFinite(f.eps_max)) {
      bE.push(f.eps_max);
      bH.push(f.m_half);
    }
  }

  // All-rows fit (reported beside the envelope).
  const allSplit = fitRampAllRows(train, [stored.eps_max * 0.7, stored.m_half]);
  const allFull = fitRampAllRows(compute, [stored.eps_max * 0.7, stored.m_half]);
  const holdRows = [...holdK, ...holdM];
  const all_rows_train = fitError(predEnv(allFull, compute), compute.map((p) => p.eff));
  const all_rows_holdout = holdRows.length ? fitError(predEnv(allSplit, holdRows), holdRows.map((p) => p.eff)) : { geo: NaN, mape_pct: NaN, n: 0 };

  const large_m = envFull.filter((p) => p.m >= 4096).map((p) => ({ m: p.m, measured: p.eff, predicted: rampEff(stored.eps_max, stored.m_half, p.m) }));

  // Shape-aware ramp: halves fitted with the envelope ramp fixed, whole-k holdout.
  const trainK = compute.filter((p) => !heldK.has(p.k));
  const holdKAll = compute.filter((p) => heldK.has(p.k));
  const halvesSplit = fitShapeHalves(shapeCells(trainK, splitFit.eps_max, splitFit.m_half));
  const halves = fitShapeHalves(shapeCells(compute, stored.eps_max, stored.m_half));
  const shapePred = (e: number, mh: number, nh: number, kh: number, p: Pt) => e * (p.m / (p.m + mh)) * (p.n / (p.n + nh)) * (p.k / (p.k + kh));
  const meas = holdKAll.map((p) => p.eff);
  const geo = (pred: number[]) => (pred.length ? geometricError(pred, meas) : NaN);
  const holdout_geo_envelope = geo(holdKAll.map((p) => rampEff(splitFit.eps_max, splitFit.m_half, p.m)));
  const allSplitK = fitRampAllRows(trainK, [allFull.eps_max, allFull.m_half]);
  const holdout_geo_all_rows = geo(holdKAll.map((p) => rampEff(allSplitK.eps_max, allSplitK.m_half, p.m)));
  const shapeHoldPred = holdKAll.map((p) => shapePred(splitFit.eps_max, splitFit.m_half, halvesSplit.n_half, halvesSplit.k_half, p));
  const holdout_geo_shape = geo(shapeHoldPred);
  // Full errors of the shape-aware ramp: train on every compute-bound row with the stored halves,
  // holdout on the whole-k rows with halves fitted without them.
  const shape_holdout: FitError = shapeHoldPred.length ? fitError(shapeHoldPred, meas) : { geo: NaN, mape_pct: NaN, n: 0 };
  const free = freeShapeFit(trainK, [stored.eps_max, stored.m_half, halves.n_half || 100, halves.k_half || 100]);
  const free_holdout = geo(holdKAll.map((p) => shapePred(free.eps_max, free.m_half, free.n_half, free.k_half, p)));
  // Cluster bootstrap over whole k values for the halves (k is the dimension the fit must cross).
  const ks = [...new Set(compute.map((p) => p.k))].sort((a, b) => a - b);
  const byK = groupBy(compute, (p) => String(p.k));
  const cellsByK = new Map<number, ReturnType<typeof shapeCells>>();
  for (const k of ks) cellsByK.set(k, shapeCells(byK.get(String(k))!, stored.eps_max, stored.m_half));
  const bN: number[] = [];
  const bK: number[] = [];
  const rand2 = seededRandom(bootstrap.seed + 1);
  for (let b = 0; b < bootstrap.resamples; b++) {
    const cells: Array<{ n: number; k: number; r: number; w: number }> = [];
    for (let i = 0; i < ks.length; i++) cells.push(...cellsByK.get(ks[Math.floor(rand2() * ks.length)]!)!);
    if (new Set(cells.map((c) => c.k)).size < 2) continue;
    const f = fitShapeHalves(cells, [halves.n_half, halves.k_half], true);
    bN.push(f.n_half);
    bK.push(f.k_half);
  }
  const best1 = Math.min(holdout_geo_envelope, holdout_geo_all_rows);
  const storedShape =
    Number.isFinite(holdout_geo_shape) && Number.isFinite(best1) && holdout_geo_shape - 1 <= SHAPE_STORE_RULE * (best1 - 1);
  const shape_train = fitError(
    compute.map((p) => shapePred(stored.eps_max, stored.m_half, halves.n_half, halves.k_half, p)),
    compute.map((p) => p.eff),
  );

  return {
    dtype,
    rows_total: all.length,
    rows_memory_bound: all.length - compute.length,
    m_threshold: memoryBoundThresholdM(chip, dtype),
    envelope_fit: { eps_max: stored.eps_max, m_half: stored.m_half, ci_eps: ciFromEstimates(bE), ci_m_half: ciFromEstimates(bH) },
    all_rows_fit: allFull,
    envelope_train,
    envelope_holdout,
    all_rows_train,
    all_rows_holdout,
    large_m,
    shape: {
      n_half: halves.n_half,
      k_half: halves.k_half,
      ci_n: ciFromEstimates(bN),
      ci_k: ciFromEstimates(bK),
      holdout_geo_envelope,
      holdout_geo_all_rows,
      holdout_geo_shape,
      shape_train,
      shape_holdout,
      free: { ...free, holdout_geo: free_holdout },
      stored: storedShape,
    },
    held_k: [...heldK].sort((a, b) => a - b),
    m_max: mMax,
  };
}

/** The dtype of a gemm row as a GemmDtype, or undefined for formats without a ramp. */
function asGemmDtype(d: string): GemmDtype | undefined {
  return (GEMM_DTYPES as readonly string[]).includes(d) ? (d as GemmDtype) : undefined;
}

/**
 * GEMM family fitter. Fits every dtype that has rows and a datasheet peak on this chip.
 * Coefficients (set cost-model-primitives): gemm_eps_max_<d>, gemm_m_half_<d>, and
 * gemm_n_half_<d>/gemm_k_half_<d> when the shape ramp clearly wins on held-out k.
 * Writes `gemm_eps_max_<d>`/`gemm_m_half_<d>` results into nothing: the orchestrator reads them
 * from the returned coefficients.
 */
export function fitGemm(rowsIn: readonly GemmRow[], ctx: FitContext): FamilyFit & { ramps: RampResult[] } {
  const fit: FamilyFit & { ramps: RampResult[] } = { ...emptyFamilyFit('gemm'), ramps: [] };
  const rows = reduceRepeats(rowsIn, (r) => `${r.dtype}|${r.m}|${r.n}|${r.k}|${r.kernel_source}`);
  const byDtype = groupBy(rows, (r) => r.dtype);
  const md: string[] = ['## GEMM efficiency ramp', ''];
  const dtypes = [...byDtype.keys()].sort((a, b) => GEMM_DTYPES.indexOf(a as GemmDtype) - GEMM_DTYPES.indexOf(b as GemmDtype));
  for (const d of dtypes) {
    const dtype = asGemmDtype(d);
    if (!dtype || peakFlopsPerUs(ctx.chip, dtype) === undefined) {
      fit.warnings.push(`gemm ${d}: no datasheet peak on ${ctx.chip.name}; not fitted`);
      continue;
    }
    const r = fitRampForDtype(byDtype.get(d)!, dtype, ctx.chip, ctx.bootstrap);
    if (typeof r === 'string') {
      fit.refusals.push(r);
      continue;
    }
    fit.ramps.push(r);
    addRampCoefficients(fit, r, ctx);
    md.push(...rampReport(r, ctx));
    fit.figures.push(...rampFigures(r, byDtype.get(d)!, ctx.chip));
  }
  fit.report_md = md.join('\n') + '\n';
  return fit;
}

function addRampCoefficients(fit: FamilyFit, r: RampResult, ctx: FitContext): void {
  const used = {
    filter: `dtype == ${r.dtype}; compute-bound (m ≥ ${fmt(r.m_threshold)}: weight bytes/HBM ≤ FLOPs/peak); envelope = best efficiency per m`,
    rows_used: r.rows_total - r.rows_memory_bound,
  };
  const holdout = { ...r.envelope_holdout, split: `whole k ∈ {${r.held_k.join(', ')}} and m = ${r.m_max} (envelope points)` };
  const notes = [
    `all-rows fit (not stored): eps_max ${fmt(r.all_rows_fit.eps_max)}, m_half ${fmt(r.all_rows_fit.m_half)}; train geo ${r.all_rows_train.geo}, holdout geo ${r.all_rows_holdout.geo}`,
    `${r.rows_memory_bound} memory-bound rows (m < ${fmt(r.m_threshold)}) excluded from the compute ramp`,
    ...r.large_m.filter((p) => p.m >= 8192).map((p) => `large-m bias: m=${p.m} envelope ${fmt(p.measured, 3)} vs predicted ${fmt(p.predicted, 3)}`),
  ];
  const push = (name: string, value: number, units: 'dimensionless' | 'tokens', ci: [number, number], extraNotes: string[] = [], hold = holdout, train = r.envelope_train) =>
    fit.coefficients.push({
      set: SET_NAMES.primitives,
      name,
      entry: measuredEntry({ value, units, family: 'gemm', ctx, used, ci95: ci, ci_method: 'bootstrap', train, holdout: hold, notes: [...notes, ...extraNotes] }),
    } satisfies FittedCoefficient);
  push(`gemm_eps_max_${r.dtype}`, r.envelope_fit.eps_max, 'dimensionless', r.envelope_fit.ci_eps);
  push(`gemm_m_half_${r.dtype}`, r.envelope_fit.m_half, 'tokens', r.envelope_fit.ci_m_half);
  const s = r.shape;
  fit.summary.push(
    `gemm ${r.dtype}: eps_max ${fmt(r.envelope_fit.eps_max)} [${fmt(r.envelope_fit.ci_eps[0])}, ${fmt(r.envelope_fit.ci_eps[1])}], m_half ${fmt(r.envelope_fit.m_half)} tokens; n ${r.rows_total - r.rows_memory_bound} rows; envelope geo train ${r.envelope_train.geo} / holdout ${r.envelope_holdout.geo}; shape ramp holdout geo ${fmt(s.holdout_geo_shape)} vs 1-factor ${fmt(Math.min(s.holdout_geo_envelope, s.holdout_geo_all_rows))}${s.stored ? ' (stored)' : ''}`,
  );
  if (s.stored) {
    const shapeHold = { ...s.shape_holdout, split: `whole k ∈ {${r.held_k.join(', ')}} (all compute-bound rows)` };
    const shapeNote = [
      `shape factor n/(n+n_half)·k/(k+k_half) fitted with eps_max, m_half fixed at the stored envelope ramp`,
      `held-out-k geo: envelope 1-factor ${fmt(s.holdout_geo_envelope)}, all-rows 1-factor ${fmt(s.holdout_geo_all_rows)}, shape-aware ${fmt(s.holdout_geo_shape)}`,
    ];
    for (const [nm, v, ci, dim] of [
      [`gemm_n_half_${r.dtype}`, s.n_half, s.ci_n, 'n (output features, the weight matrix\'s output width)'],
      [`gemm_k_half_${r.dtype}`, s.k_half, s.ci_k, 'k (input features, the reduction width)'],
    ] as const) {
      const entry = measuredEntry({
          value: v,
          units: 'dimensionless',
          family: 'gemm',
          ctx,
          used,
          ci95: ci,
          ci_method: 'bootstrap',
          train: s.shape_train,
          holdout: shapeHold,
          notes: [...shapeNote, `${HALF_UNIT_NOTE}: ${dim}`],
        });
      const { evidence, ci95, ...head } = entry;
      const rationale = `Unit: elements (features) of GEMM dimension ${dim}, not tokens. BLIS's unit enum has no "elements", so the entry is stored as dimensionless (a count); the shape factor is ${nm.includes('_n_') ? 'n/(n + n_half)' : 'k/(k + k_half)'} with ${nm.includes('_n_') ? 'n' : 'k'} in elements.`;
      // Keys in BLIS's order (rationale before ci95), evidence last.
      fit.coefficients.push({ set: SET_NAMES.primitives, name: nm, entry: { ...head, rationale, ...(ci95 ? { ci95 } : {}), ...(evidence ? { evidence } : {}) } });
    }
  }
}

function rampReport(r: RampResult, ctx: FitContext): string[] {
  const s = r.shape;
  const out = [
    `### ${r.dtype} (${ctx.chip.name}, peak ${fmt(peakFlopsPerUs(ctx.chip, r.dtype)! / 1e6)} TFLOP/s dense)`,
    '',
    `${r.rows_total} rows after median-of-repeats; ${r.rows_memory_bound} memory-bound (m < ${fmt(r.m_threshold)} tokens: weight bytes / datasheet HBM > FLOPs / peak) kept out of the compute ramp.`,
    '',
    '| fit | eps_max | m_half (tokens) | train geo | train MAPE % | holdout geo | holdout MAPE % |',
    '|---|---|---|---|---|---|---|',
    `| envelope (stored) | ${fmt(r.envelope_fit.eps_max)} [${fmt(r.envelope_fit.ci_eps[0])}, ${fmt(r.envelope_fit.ci_eps[1])}] | ${fmt(r.envelope_fit.m_half)} [${fmt(r.envelope_fit.ci_m_half[0])}, ${fmt(r.envelope_fit.ci_m_half[1])}] | ${r.envelope_train.geo} | ${r.envelope_train.mape_pct} | ${r.envelope_holdout.geo} | ${r.envelope_holdout.mape_pct} |`,
    `| all rows | ${fmt(r.all_rows_fit.eps_max)} | ${fmt(r.all_rows_fit.m_half)} | ${r.all_rows_train.geo} | ${r.all_rows_train.mape_pct} | ${r.all_rows_holdout.geo} | ${r.all_rows_holdout.mape_pct} |`,
    '',
    `Holdout: whole k ∈ {${r.held_k.join(', ')}} and the largest m (${r.m_max}). Envelope errors are on envelope points; all-rows errors on every compute-bound row (efficiency error = latency error).`,
    '',
    'Large-m bias of the stored 1-factor ramp (envelope efficiency, measured vs predicted):',
    '',
    '| m | measured | predicted | predicted/measured |',
    '|---|---|---|---|',
    ...r.large_m.map((p) => `| ${p.m} | ${fmt(p.measured, 3)} | ${fmt(p.predicted, 3)} | ${fmt(p.predicted / p.measured, 3)} |`),
    '',
    `Shape-aware ramp (n_half ${fmt(s.n_half)} [${fmt(s.ci_n[0])}, ${fmt(s.ci_n[1])}], k_half ${fmt(s.k_half)} [${fmt(s.ci_k[0])}, ${fmt(s.ci_k[1])}] elements (features; stored as dimensionless), on top of the stored envelope ramp): held-out-k geometric error ${fmt(s.holdout_geo_shape)} against ${fmt(s.holdout_geo_envelope)} (envelope 1-factor) and ${fmt(s.holdout_geo_all_rows)} (all-rows 1-factor). Free 4-parameter fit: eps_max ${fmt(s.free.eps_max)}, m_half ${fmt(s.free.m_half)}, n_half ${fmt(s.free.n_half)}, k_half ${fmt(s.free.k_half)}, held-out-k geo ${fmt(s.free.holdout_geo)}. ${s.stored ? `Stored (removes ≥ ${Math.round((1 - SHAPE_STORE_RULE) * 100)}% of the 1-factor excess error).` : 'Not stored (does not clearly win).'}`,
    '',
    `![gemm ${r.dtype}](gemm_${r.dtype}.svg) ![residuals](gemm_${r.dtype}_residuals.svg)`,
    '',
  ];
  return out;
}

function rampFigures(r: RampResult, rows: readonly GemmRow[], chip: Chip): Array<{ name: string; svg: string }> {
  const peak = peakFlopsPerUs(chip, r.dtype)!;
  const pts = rows.map((row) => ({ m: row.m, eff: gemmEfficiency(row, peak), mb: isMemoryBound(row, r.dtype, chip) }));
  const env = envelope(pts.filter((p) => !p.mb));
  const ms = [...new Set(pts.map((p) => p.m))].sort((a, b) => a - b);
  const e = r.envelope_fit;
  const a = r.all_rows_fit;
  const main = chart(
    [
      { label: 'compute-bound rows', points: thin(pts.filter((p) => !p.mb), 1500).map((p) => [p.m, p.eff]), style: 'scatter', color: '#9ecae1', radius: 1.5 },
      { label: 'memory-bound rows', points: thin(pts.filter((p) => p.mb), 500).map((p) => [p.m, p.eff]), style: 'scatter', color: '#bbbbbb', radius: 1.5 },
      { label: 'envelope', points: env.map((p) => [p.m, p.eff]), style: 'scatter', color: '#d62728', radius: 2.5 },
      { label: 'envelope fit (stored)', points: ms.map((m) => [m, rampEff(e.eps_max, e.m_half, m)]), style: 'line', color: '#d62728' },
      { label: 'all-rows fit', points: ms.map((m) => [m, rampEff(a.eps_max, a.m_half, m)]), style: 'line', color: '#2ca02c', dash: '4 3' },
    ],
    { title: `${chip.name} GEMM ${r.dtype}: efficiency vs m`, x_label: 'm (tokens)', y_label: 'efficiency (fraction of dense peak)', x_log: true, y_range: [0, 1.1] },
  );
  const resid = chart(
    [{ label: 'ln(pred/meas), envelope', points: env.map((p) => [p.m, Math.log(rampEff(e.eps_max, e.m_half, p.m) / p.eff)]), style: 'scatter', color: '#d62728', radius: 2.5 }],
    { title: `${chip.name} GEMM ${r.dtype}: residuals of the stored ramp`, x_label: 'm (tokens)', y_label: 'ln(predicted / measured)', x_log: true, h_lines: [{ y: 0, label: 'zero' }] },
  );
  return [
    { name: `gemm_${r.dtype}.svg`, svg: main },
    { name: `gemm_${r.dtype}_residuals.svg`, svg: resid },
  ];
}
