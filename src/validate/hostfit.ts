/**
 * Per-engine host-overhead fit (issue 7, `--fit-host`). Pure.
 *
 * Engine-side CPU time is part of every measured step and differs by engine (Splitwise's engine
 * ≈ 25 ms per step, vLLM far less). Four terms, all µs, summed over the steps of a row:
 *   host = per_step_us · steps + per_request_step_us · Σ_steps requests
 *        + per_kernel_us · Σ_steps kernels + per_step_tp_gt1_us · steps · [tp > 1]
 *        + per_step_per_rank_us · steps · tp
 * The last term generalises the tp > 1 extra: a per-step control cost that grows with the number
 * of tensor-parallel workers the engine drives (one message / launch path per rank). DECISION
 * (docs/validation.md): Splitwise's decode steps at batch 1 take 29.7 ms at tp 4 and 29.8 ms at
 * tp 8 on H100 while the weight read halves, so the engine's per-step cost is not one constant.
 * fitted by least squares to the residual (measured − priced-without-host), separately for each
 * engine and each composition, with every term constrained ≥ 0 (a term that comes out negative is
 * fixed at 0 and the rest refitted). A term whose feature column is a linear combination of the
 * terms already admitted (in the order above) is not identified by the training rows: it is held at
 * 0 and reported as such, never split arbitrarily.
 *
 * Training subsets (declared, deterministic):
 * - `batch=1`: rows whose batch (static_batch) or total requests (step) is 1. Then Σ requests =
 *   steps on every row, so the per-request term cannot be separated from the per-step constant.
 * - `fraction=F` (0 < F < 1): k = round(1/F); within each group (the row's `group`, else its
 *   (model, chip, tp, kind, engine, regime) key), in input order, the row at 0-based index i trains
 *   when (i + g) mod k = k − 1, g being the group's 0-based first-seen number. DECISION: the offset
 *   rotates with g so that groups that are batch sweeps of the same shape do not all give up the same
 *   batch (which would leave the per-request term collinear with the per-step constant).
 */
import { LuDecomposition, Matrix, QrDecomposition } from 'ml-matrix';
import { UsageError } from '../core/errors.ts';
import type { Composition, HostFitEngine, HostTerm } from './types.ts';
import { gridGoldenMin } from '../core/numeric/stats.ts';
import {
  ENGINE_HOST_TERMS,
  engineHostColumns,
  engineHostUs,
  LARGE_STEP_MESSAGE_BYTES_GRID,
  type EngineHostFeatures,
} from '../core/laws/host.ts';

/** Host-fit features of one row (all summed over the row's steps; the law: src/core/laws/host.ts). */
export interface HostFeatures extends EngineHostFeatures {
  /** Σ priced SM µs (the regressor of the engine compute-efficiency term); 0 when not used. */
  sm_us?: number;
  /**
   * Per threshold of `LARGE_STEP_MESSAGE_BYTES_GRID`, the row's large-step NVLink µs (expand.ts
   * `RowPrice.large_nvlink_us_by_t`); `atLargeStepBytes` picks one as `large_step_nvlink_us`.
   */
  large_nvlink_us_by_t?: readonly number[];
}

/**
 * The features with the large-step regressor taken at threshold `message_bytes` (one of
 * `LARGE_STEP_MESSAGE_BYTES_GRID`); undefined threshold or no per-threshold sums → the features as given.
 * @throws Error when `tokens` is not on the grid
 */
export function atLargeStepBytes(f: HostFeatures, message_bytes: number | undefined): HostFeatures {
  if (message_bytes === undefined || !f.large_nvlink_us_by_t) return f;
  const k = LARGE_STEP_MESSAGE_BYTES_GRID.indexOf(message_bytes);
  if (k < 0)
    throw new Error(
      `large-step threshold ${message_bytes} bytes is not on the grid ${LARGE_STEP_MESSAGE_BYTES_GRID.join(', ')}`,
    );
  // One object per row and threshold, made once (every fold and trial reads the same rows again).
  let byK = AT_THRESHOLD.get(f);
  if (!byK) {
    byK = new Array<HostFeatures | undefined>(LARGE_STEP_MESSAGE_BYTES_GRID.length);
    AT_THRESHOLD.set(f, byK);
  }
  let at = byK[k];
  if (!at) {
    at = { ...f, large_step_nvlink_us: f.large_nvlink_us_by_t[k]! };
    byK[k] = at;
  }
  return at;
}

const AT_THRESHOLD = new WeakMap<HostFeatures, Array<HostFeatures | undefined>>();

/**
 * How the training rows are weighted.
 * - `relative` (default): minimise Σ ((pred − meas) / meas)², i.e. each row weighted by 1/measured.
 *   DECISION: the scores are relative (APE, bias), measurement repeats and model errors are
 *   multiplicative, and the Splitwise rows span 40 ms steps to 900 s static batches; an absolute fit
 *   is decided by the few longest static batches.
 * - `absolute`: minimise Σ (pred − meas)² in µs (the original estimator, kept for comparison).
 */
export const HOST_WEIGHTINGS = ['relative', 'absolute'] as const;
export type HostWeighting = (typeof HOST_WEIGHTINGS)[number];

/** Options of `fitHostTerms`. */
export interface HostFitOptions {
  /**
   * Also fit the engine compute-efficiency term s (NoOverlap only):
   *   measured = s · T_SM + T_HBM + T_NVLink + T_NIC + host terms,
   * T_SM entering as one more least-squares regressor (feature `sm_us`), admitted after the host
   * terms. s = 1 is the registry; s > 1 = the engine runs its arithmetic slower than the registry's
   * per-operator tables. Not identified or s ≤ 0 → s held at 1 (noted).
   */
  engineSm?: boolean;
  weighting?: HostWeighting;
  /** Measured µs per training row (needed by `relative` weighting). */
  measured_us?: readonly number[];
  /**
   * Which columns the training rows identify, kept between calls on the same rows, features,
   * weighting and `engineSm` (it does not depend on the residual): `fitHostTermsWithScaleSearch`
   * fits the same design at every trial s. Filled on the first call; `solvers` keeps the
   * decomposition (QR, or LU when square) of each column subset solved, so a later trial solves its
   * new target with it (the decomposition does not depend on the target, and ml-matrix's `solve` of a
   * decomposition leaves it unchanged: the same β, bit for bit, as decomposing again).
   */
  identified?: { columns?: boolean[]; solvers?: Map<string, LeastSquaresSolver>; design?: HostDesign };
}

/** The weighted design of one training set (independent of the target, so shared by a search's trials). */
interface HostDesign {
  X: number[][];
  sm: number[];
  Dw: number[][];
}

export type HostRule = { kind: 'batch1' } | { kind: 'fraction'; fraction: number; k: number };

/** Parse `batch=1` / `fraction=F`. @throws UserError on anything else. */
export function parseHostRule(rule: string): HostRule {
  const s = rule.trim();
  if (s === 'batch=1') return { kind: 'batch1' };
  const m = /^fraction=([0-9]*\.?[0-9]+)$/.exec(s);
  if (m) {
    const f = Number(m[1]);
    if (f > 0 && f < 1) return { kind: 'fraction', fraction: f, k: Math.max(2, Math.round(1 / f)) };
  }
  throw new UsageError(`--fit-host: expected "batch=1" or "fraction=F" with 0 < F < 1, got "${rule}"`);
}

/**
 * Indices of the training rows under `rule`.
 * @param items per row: its batch (requests) and its group key, in input order.
 */
export function selectTrainingRows(
  items: ReadonlyArray<{ batch: number; group: string }>,
  rule: HostRule,
): Set<number> {
  const out = new Set<number>();
  if (rule.kind === 'batch1') {
    items.forEach((it, i) => {
      if (it.batch === 1) out.add(i);
    });
    return out;
  }
  const seen = new Map<string, { n: number; g: number }>();
  items.forEach((it, i) => {
    let s = seen.get(it.group);
    if (!s) {
      s = { n: 0, g: seen.size };
      seen.set(it.group, s);
    }
    if ((s.n + s.g) % rule.k === rule.k - 1) out.add(i);
    s.n++;
  });
  return out;
}

const TERM_NAMES: readonly HostTerm['name'][] = ENGINE_HOST_TERMS;
const featureVector = engineHostColumns;

/**
 * Least-squares solution β of X β ≈ y (dense, a few columns): Householder QR from ml-matrix (LU when
 * X is square). X must have full column rank, which `identifiedColumns` guarantees for the columns
 * passed here.
 */
export function solveLeastSquares(
  X: () => number[][],
  y: number[],
  cache?: Map<string, LeastSquaresSolver>,
  key = '',
): number[] {
  let d = cache?.get(key);
  if (!d) {
    // As ml-matrix's `solve(A, b)`: LU when A is square, Householder QR otherwise.
    const A = new Matrix(X());
    d = A.isSquare() ? new LuDecomposition(A) : householderOf(new QrDecomposition(A));
    cache?.set(key, d);
  }
  return 'rdiag' in d ? householderSolve(d, y) : d.solve(Matrix.columnVector(y)).getColumn(0);
}

/** ml-matrix's Householder QR factors, column by column (QR below and on the diagonal, R above). */
interface Householder {
  /** QR[·][k] per column k, length m. */
  cols: Float64Array[];
  rdiag: Float64Array;
}

/**
 * The factors ml-matrix keeps on a QrDecomposition (`QR`, `Rdiag`: fields of its JAMA port that its
 * typings leave out; ml-matrix 6.x). Without them, the decomposition itself solves (same β).
 */
function householderOf(qr: QrDecomposition): Householder | QrDecomposition {
  const f = qr as unknown as { QR?: Matrix; Rdiag?: Float64Array };
  if (!qr.isFullRank() || !(f.QR instanceof Matrix) || !(f.Rdiag instanceof Float64Array)) return qr;
  const Q = f.QR;
  const cols = Array.from({ length: Q.columns }, (_, k) => Float64Array.from(Q.getColumn(k)));
  return { cols, rdiag: Float64Array.from(f.Rdiag) };
}

/**
 * Least-squares solution for one target y from the stored factors: the same operations in the same
 * order as ml-matrix's `QrDecomposition.solve` of a one-column matrix (so the same β, bit for bit),
 * without its per-row matrix copies (issue 17: a fold's s search solves ≈ 37 targets of ≈ 365 rows).
 */
function householderSolve(h: Householder, y: readonly number[]): number[] {
  const m = y.length;
  const n = h.cols.length;
  const x = Float64Array.from(y);
  for (let k = 0; k < n; k++) {
    const q = h.cols[k]!;
    let s = 0;
    for (let i = k; i < m; i++) s += q[i]! * x[i]!;
    s = -s / q[k]!;
    for (let i = k; i < m; i++) x[i] = x[i]! + s * q[i]!;
  }
  for (let k = n - 1; k >= 0; k--) {
    x[k] = x[k]! / h.rdiag[k]!;
    const q = h.cols[k]!;
    for (let i = 0; i < k; i++) x[i] = x[i]! - x[k]! * q[i]!;
  }
  return Array.from(x.subarray(0, n));
}

/** A decomposition of a design matrix that solves X β ≈ y for any target y. */
type LeastSquaresSolver = Householder | QrDecomposition | LuDecomposition;

/**
 * Which columns are identified, admitted greedily in order: a column is admitted when its
 * least-squares residual on the admitted ones keeps more than 1e-9 of its norm. A column with a
 * non-finite entry (kernel counts unknown) is never admitted. The residual is the column less its
 * projection on an orthonormal basis of the admitted columns (Gram–Schmidt, orthogonalised twice, so
 * the residual is accurate far below the 1e-9 threshold), in plain arrays: cheaper than a QR
 * per candidate column, and the same decisions (issue 17).
 */
export function identifiedColumns(X: number[][]): boolean[] {
  const p = X[0]?.length ?? 0;
  const basis: Float64Array[] = [];
  const ok: boolean[] = [];
  for (let c = 0; c < p; c++) {
    const v = Float64Array.from(X, (r) => r[c]!);
    const norm0 = v.every(Number.isFinite) ? norm2(v) : 0;
    let kept = norm0 > 0;
    let norm = norm0;
    if (kept && basis.length) {
      for (let pass = 0; pass < 2; pass++)
        for (const q of basis) {
          let d = 0;
          for (let i = 0; i < v.length; i++) d += q[i]! * v[i]!;
          for (let i = 0; i < v.length; i++) v[i] = v[i]! - d * q[i]!;
        }
      norm = norm2(v);
      kept = norm > 1e-9 * norm0;
    }
    if (kept) basis.push(v.map((x) => x / norm));
    ok.push(kept);
  }
  return ok;
}

/**
 * Euclidean norm, √Σ v², by a plain loop: `Math.hypot(...v)` spread a few hundred arguments per
 * call and was most of `identifiedColumns` (acc18). The columns are weighted µs ratios, far from
 * overflow; the norm only decides admission against the 1e-9 ratio, never a fitted value.
 */
function norm2(v: Float64Array): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]! * v[i]!;
  return Math.sqrt(s);
}

/**
 * Design matrix of a training set: host columns, then (engineSm) the SM column, each row weighted by
 * `w`. The target (fitHostTerms) is the residual, + T_SM when the SM column is fitted, since the
 * residual was taken against the price that already holds s = 1 · T_SM.
 */
function hostDesign(features: readonly HostFeatures[], w: (i: number) => number, engineSm?: boolean): HostDesign {
  const X = features.map(featureVector);
  const sm = features.map((f) => f.sm_us ?? 0);
  const Dw = X.map((r, i) => (engineSm ? [...r, sm[i]!] : r).map((x) => x * w(i)));
  return { X, sm, Dw };
}

/**
 * Fit one engine's host terms for one composition.
 * @param features per training row.
 * @param residual_us per training row: measured − priced-without-host, µs.
 */
export function fitHostTerms(
  engine: string,
  composition: Composition,
  features: readonly HostFeatures[],
  residual_us: readonly number[],
  ruleKind: HostRule['kind'],
  opts: HostFitOptions = {},
): HostFitEngine {
  const notes: string[] = [];
  const weighting = opts.weighting ?? 'relative';
  const n = features.length;
  if (weighting === 'relative' && (opts.measured_us === undefined || opts.measured_us.length !== n)) {
    throw new Error('fitHostTerms: relative weighting needs measured_us for every training row');
  }
  const w = (i: number): number => (weighting === 'relative' ? 1 / opts.measured_us![i]! : 1);
  // The design does not depend on the target: a search's trials share it (`identified`).
  if (opts.identified && !opts.identified.design) opts.identified.design = hostDesign(features, w, opts.engineSm);
  const { X, sm, Dw } = opts.identified?.design ?? hostDesign(features, w, opts.engineSm);
  const nh = TERM_NAMES.length;
  const ident = opts.identified?.columns ?? identifiedColumns(Dw);
  if (opts.identified) opts.identified.columns = ident;
  const smIdentified = opts.engineSm ? ident[nh]! : false;
  const y = residual_us.map((r, i) => (opts.engineSm ? r + (smIdentified ? sm[i]! : 0) : r));
  const yw = y.map((v, i) => v * w(i));
  const active = ident.map((v) => v);
  const p = active.length;
  const fixedZero = new Array<boolean>(p).fill(false);
  let beta = new Array<number>(p).fill(0);
  for (let iter = 0; iter < p; iter++) {
    const cols = active.map((a, i) => (a ? i : -1)).filter((i) => i >= 0);
    beta = new Array<number>(p).fill(0);
    if (cols.length === 0) break;
    if (opts.identified) opts.identified.solvers ??= new Map();
    const sol = solveLeastSquares(
      () => Dw.map((r) => cols.map((c) => r[c]!)),
      yw,
      opts.identified?.solvers,
      cols.join(','),
    );
    cols.forEach((c, j) => {
      beta[c] = sol[j]!;
    });
    const neg = cols.filter((c) => beta[c]! < 0);
    if (neg.length === 0) break;
    // drop the most negative-contributing term and refit (simple active set for ≥ 0). A
    // non-positive s is dropped the same way and then held at 1 (below).
    const worst = neg.reduce((a, b) => (beta[a]! < beta[b]! ? a : b));
    active[worst] = false;
    fixedZero[worst] = true;
    if (worst === nh) {
      // s ≤ 0 is not an efficiency: hold s = 1, i.e. fit the host terms to the residual itself.
      for (let i = 0; i < n; i++) yw[i] = residual_us[i]! * w(i);
    }
  }
  let sm_scale: HostFitEngine['sm_scale'];
  if (opts.engineSm) {
    if (!smIdentified)
      sm_scale = {
        value: 1,
        identified: false,
        note: 'T_SM is a linear combination of the host columns on the training rows: s held at 1',
      };
    else if (!active[nh])
      sm_scale = { value: 1, identified: true, note: 'least squares gave s ≤ 0 (no efficiency); s held at 1' };
    else sm_scale = { value: beta[nh]!, identified: true };
  }
  const terms: HostTerm[] = TERM_NAMES.map((name, i) => {
    const t: HostTerm = { name, value_us: active[i] ? beta[i]! : 0, identified: ident[i]! };
    if (!ident[i]) {
      t.note =
        name === 'per_kernel_us' && X.some((r) => !Number.isFinite(r[3]!))
          ? 'kernel counts unknown for these rows: not fitted'
          : 'not identified by the training rows (collinear with the terms before it); held at 0, its cost is inside the identified terms';
    } else if (fixedZero[i]) t.note = 'least squares gave a negative value; constrained to 0';
    return t;
  });
  if (ruleKind === 'batch1') {
    notes.push(
      'batch=1 rows alone cannot separate the per-request-per-step cost from the per-step constant: ' +
        'per_step_us below is the constant plus one request’s cost, and per_request_step_us is not identified (held at 0). ' +
        'Predictions at batch > 1 therefore carry no per-request host cost; use fraction=F to identify it.',
    );
  }
  if (!ident[2])
    notes.push(
      'no mix of tp = 1 and tp > 1 steps in the training rows: the tp > 1 extra is not separated from the per-step constant',
    );
  let ss = 0;
  let ssRel = 0;
  X.forEach((r, i) => {
    const pred =
      r.reduce((a, x, j) => a + (Number.isFinite(x) ? x * terms[j]!.value_us : 0), 0) +
      (sm_scale ? (sm_scale.value - 1) * sm[i]! : 0);
    ss += (residual_us[i]! - pred) ** 2;
    if (opts.measured_us) ssRel += ((residual_us[i]! - pred) / opts.measured_us[i]!) ** 2;
  });
  return {
    engine,
    composition,
    n_train: X.length,
    terms,
    ...(sm_scale ? { sm_scale } : {}),
    weighting,
    train_rms_us: X.length ? Math.sqrt(ss / X.length) : NaN,
    ...(opts.measured_us && X.length ? { train_rms_rel_pct: 100 * Math.sqrt(ssRel / X.length) } : {}),
    notes,
  };
}

/**
 * Extra SM µs a row carries under the fit's engine compute-efficiency term: (s − 1) · T_SM
 * (0 without the term). Added to the NoOverlap price.
 */
export function engineSmExtraUs(fit: HostFitEngine, f: HostFeatures): number {
  return fit.sm_scale ? (fit.sm_scale.value - 1) * (f.sm_us ?? 0) : 0;
}

/**
 * The s a fit prices chip `chip` with: the chip's own (`sm_scale_by_chip`) when the fit has one, else
 * the pooled `sm_scale`, else 1.
 */
export function smScaleFor(fit: HostFitEngine | undefined, chip: string): number {
  return fit?.sm_scale_by_chip?.[chip] ?? fit?.sm_scale?.value ?? 1;
}

/** Host µs of a row under fitted terms (the large-step term at the fit's threshold). */
export function applyHostTerms(fit: HostFitEngine, f: HostFeatures): number {
  return engineHostUs(
    fit.terms.map((t) => t.value_us),
    atLargeStepBytes(f, fit.large_step_message_bytes),
  );
}

/** The large-step collective extra of a row under fitted terms, µs (part of `applyHostTerms`). */
export function largeStepExtraUs(fit: HostFitEngine, f: HostFeatures): number {
  const t = fit.terms.find((x) => x.name === 'large_step_nvlink_factor');
  const x = atLargeStepBytes(f, fit.large_step_message_bytes).large_step_nvlink_us ?? 0;
  return t && t.value_us !== 0 ? t.value_us * x : 0;
}

/** Bounds of the CMOverlap engine compute-efficiency search, s ∈ [1/4, 4] (DECISION, docs/validation.md). */
export const CM_SM_SCALE_BOUNDS: readonly [number, number] = [0.25, 4];

/**
 * Fit one engine's host terms together with an engine compute-efficiency term s that enters
 * non-linearly (CMOverlap: per layer max(s · T_SM, T_HBM), so the price must be recomputed for each s).
 * For each trial s the host terms are solved by weighted least squares (`fitHostTerms`, same weighting,
 * terms ≥ 0) on the residual measured − priced-without-host(s); s minimises the training objective
 * (Σ ((pred − meas)/meas)² relative, Σ (pred − meas)² absolute) by a bounded 1-D search in log s:
 * a grid of 13 points, 2^(k/3) for k = −6..6 (so s = 1 is tried), then 24 golden-section steps inside
 * the best grid point's neighbours (|Δ log2 s| ≈ 1e-5 at the end). Deterministic.
 *
 * s is held at 1 (identified = false) when the objective does not change over the grid (the priced
 * training rows do not depend on s, e.g. every layer HBM-bound at every trial). A minimum at a bound is
 * kept and noted.
 * @param nohostAt priced-without-host µs of every training row at scale s (same order as `features`).
 * @param measured_us measured µs per training row.
 * @returns the fit at the chosen s, with `sm_scale` set; `nohost_us` the training rows' prices at it.
 */
export function fitHostTermsWithScaleSearch(
  engine: string,
  composition: Composition,
  features: readonly HostFeatures[],
  measured_us: readonly number[],
  nohostAt: (s: number) => readonly number[],
  ruleKind: HostRule['kind'],
  weighting: HostWeighting = 'relative',
): HostFitEngine {
  const fitAt = new Map<number, HostFitEngine>();
  const identified = {};
  const objective = (log2s: number): number => {
    const s = 2 ** log2s;
    let f = fitAt.get(log2s);
    if (!f) {
      const priced = nohostAt(s);
      const resid = measured_us.map((m, i) => m - priced[i]!);
      f = fitHostTerms(engine, composition, features, resid, ruleKind, { weighting, measured_us, identified });
      fitAt.set(log2s, f);
    }
    const v = weighting === 'relative' ? f.train_rms_rel_pct! : f.train_rms_us;
    return Number.isFinite(v) ? v : Infinity;
  };
  const lo = Math.log2(CM_SM_SCALE_BOUNDS[0]);
  const hi = Math.log2(CM_SM_SCALE_BOUNDS[1]);
  const grid = Array.from({ length: 13 }, (_, k) => lo + ((hi - lo) * k) / 12);
  const vals = grid.map(objective);
  const vmin = Math.min(...vals);
  const vmax = Math.max(...vals);
  if (!(vmax - vmin > 1e-12 * Math.max(Math.abs(vmin), 1e-300))) {
    const f = fitAt.get(0)!;
    return {
      ...f,
      sm_scale: {
        value: 1,
        identified: false,
        note: 'the priced training rows do not depend on s over the search range: s held at 1',
      },
    };
  }
  // Golden section inside the best grid point's neighbours (every evaluation is cached in fitAt).
  gridGoldenMin(objective, grid, { iterations: 24, tol: 0 });
  // The best point evaluated (grid or golden section).
  let best = 0;
  let bestV = Infinity;
  for (const [x] of fitAt) {
    const v = objective(x);
    if (v < bestV || (v === bestV && Math.abs(x) < Math.abs(best))) {
      best = x;
      bestV = v;
    }
  }
  const f = fitAt.get(best)!;
  const s = 2 ** best;
  const atBound = best <= lo + 1e-3 || best >= hi - 1e-3;
  return {
    ...f,
    sm_scale: {
      value: s,
      identified: true,
      ...(atBound
        ? {
            note: `s at the search bound ${s < 1 ? CM_SM_SCALE_BOUNDS[0] : CM_SM_SCALE_BOUNDS[1]} (range ${CM_SM_SCALE_BOUNDS.join('–')}); the training rows want a value outside it`,
          }
        : {}),
    },
  };
}
