/**
 * Recurrent-mixer fitter (issue 14 item 3; seed "Recurrent mixers"): per mixer kind (GDN for Qwen3.5, KDA for
 * Kimi-K3, Mamba2 for Nemotron-H) and phase, the laws of src/core/laws/recurrent.ts fitted on the `recurrent`
 * family's rows (aiconfigurator gdn/kda/mamba2 tables, ../shared/datasets/aiconfigurator-modern/README.md).
 *
 * A layer's cost is the sum of the kernels it runs for one shape (README "Rows are per kernel"): rows of one
 * lane are joined on (batch, seq_len, heads, head dims, conv channels) over the recipe's kernel slots
 * (RECIPES), and only shapes with every slot measured are used.
 * - GDN decode: causal_conv1d_update + fused_recurrent_gated_delta_rule_packed_decode; prefill:
 *   causal_conv1d_fn + chunk_gated_delta_rule_{flashinfer,triton}.
 * - KDA decode: fused_kda_decode (conv + recurrence + norm) or, where absent, the pair causal_conv1d_update +
 *   fused_recurrent_kda_packed_decode; prefill: flashkda_fwd (l40s chunk_kda_with_fused_gate) alone: the
 *   causal_conv1d_fn_qkv3 rows are eager and host-bound (0.42–0.78 ms floor, README quirks) and left out.
 * - Mamba2 decode: causal_conv1d_update only (selective_state_update is measured nowhere; the pricer adds the
 *   chunked scan for it, labelled assumed); prefill: causal_conv1d_fn + mamba_chunk_scan_combined (b200 rc15
 *   only; elsewhere no prefill entry, and the pricer prices the chunked scan's arithmetic).
 * Fit: t = floor + work / rate by least squares on relative error (closed form, floor ≥ 0); ci95 by a seeded
 * bootstrap over shapes; holdouts along batch (every fourth distinct batch, common.ts holdoutValues) and, in
 * prefill, along context (seq_len); the decode row's work is context-independent (a fixed-size state).
 * Registry entries (set cost-model-primitives): recurrent_{decode,prefill}_floor_<kind> (us_per_layer,
 * written only when > 0), recurrent_decode_rate_<kind> (bytes_per_us of state read + written),
 * recurrent_prefill_rate_<kind> (flops_per_us of 4·v·d_v·d_k per token). Pure; src/report/fit-recurrent.ts draws.
 */
import { l2Bytes } from '../core/catalog/chip.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { pointWeightedNormalSums } from '../core/numeric/unrolled.ts';
import { groupBy, percentileType7 } from '../core/numeric/stats.ts';
import { recurrentDecodeBytesPerRow, recurrentPrefillFlopsPerToken } from '../core/laws/recurrent.ts';
import { SET_NAMES, type FitError, type Units } from '../core/schemas/registry.ts';
import type { RecurrentRow } from '../measurements/schema.ts';
import { fitError, fmt, holdoutValues, measuredEntry } from './common.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

export const RECURRENT_FAMILY = 'recurrent';

type Mixer = RecurrentRow['mixer'];
type Phase = 'decode' | 'prefill';

/** Which kernels one layer runs: alternative slot lists (the first with joined shapes is used). */
interface Recipe {
  mixer: Mixer;
  phase: Phase;
  options: string[][][];
  /** What the measured sum leaves out, in words (evidence note). */
  leaves_out?: string;
}

export const RECIPES: readonly Recipe[] = [
  {
    mixer: 'gdn',
    phase: 'decode',
    options: [[['causal_conv1d_update'], ['fused_recurrent_gated_delta_rule_packed_decode']]],
  },
  {
    mixer: 'gdn',
    phase: 'prefill',
    options: [[['causal_conv1d_fn'], ['chunk_gated_delta_rule_flashinfer', 'chunk_gated_delta_rule_triton']]],
  },
  {
    mixer: 'kda',
    phase: 'decode',
    options: [[['fused_kda_decode']], [['causal_conv1d_update'], ['fused_recurrent_kda_packed_decode']]],
  },
  {
    mixer: 'kda',
    phase: 'prefill',
    options: [[['flashkda_fwd', 'chunk_kda_with_fused_gate']]],
    leaves_out: 'the q/k/v convs (causal_conv1d_fn_qkv3 rows are eager and host-bound: README quirks)',
  },
  {
    mixer: 'mamba2',
    phase: 'decode',
    options: [[['causal_conv1d_update']]],
    leaves_out:
      'the SSM state update (selective_state_update is measured nowhere; priced as the chunked scan, assumed)',
  },
  { mixer: 'mamba2', phase: 'prefill', options: [[['causal_conv1d_fn'], ['mamba_chunk_scan_combined']]] },
];

/**
 * One joined layer shape: its regressors x = [1, work] in decode (work = state bytes read + written) and
 * [1, state bytes, FLOPs] in prefill (each sequence starts from a fresh state and writes its final state
 * once, so a per-sequence state term sits beside the per-token arithmetic), and the summed latency.
 */
export interface LayerPoint {
  batch: number;
  seq_len: number;
  v_heads: number;
  x: number[];
  latency_us: number;
  predicted_us: number;
}

/** The fit of one (mixer, phase) on one chip, as plain data. */
export interface RecurrentFit {
  mixer: Mixer;
  phase: Phase;
  lane: string;
  kernels: string[];
  /** The law's coefficients c (µs, µs per unit of each regressor) and their ci95, in regressor order. */
  coef: number[];
  ci95: Array<[number, number]>;
  train: FitError;
  holdout_batch?: FitError;
  holdout_context?: FitError;
  leaves_out?: string;
  points: LayerPoint[];
}

export interface RecurrentData {
  chip: string;
  fits: RecurrentFit[];
  not_fitted: Array<{ mixer: Mixer; phase: Phase; why: string }>;
}

export interface RecurrentFamilyFit extends FamilyFit {
  data: RecurrentData;
}

const TABLE_PHASE: Record<Phase, RecurrentRow['phase']> = { decode: 'generation', prefill: 'context' };
const shapeKey = (r: RecurrentRow) =>
  [r.batch, r.seq_len, r.k_heads, r.v_heads, r.head_k_dim, r.head_v_dim, r.conv_channels].join('|');

/** The law's regressors for a row's shape (core/laws/recurrent.ts): [1, state bytes, (FLOPs)]. */
function regressorsOf(r: RecurrentRow, phase: Phase): number[] {
  const state = r.batch * recurrentDecodeBytesPerRow(r.v_heads, r.head_v_dim, r.head_k_dim);
  return phase === 'decode'
    ? [1, state]
    : [1, state, r.tokens * recurrentPrefillFlopsPerToken(r.v_heads, r.head_v_dim, r.head_k_dim)];
}

/** Join one lane's rows over the slots: one point per shape with every slot measured. */
function joinSlots(rows: readonly RecurrentRow[], slots: string[][], phase: Phase): LayerPoint[] {
  const byShape = groupBy(rows, shapeKey);
  const out: LayerPoint[] = [];
  for (const g of byShape.values()) {
    let t = 0;
    let ok = true;
    for (const slot of slots) {
      const hit = g.find((r) => slot.includes(r.kernel_source));
      if (!hit) ok = false;
      else t += hit.latency_us;
    }
    const r = g[0]!;
    if (ok)
      out.push({
        batch: r.batch,
        seq_len: r.seq_len,
        v_heads: r.v_heads,
        x: regressorsOf(r, phase),
        latency_us: t,
        predicted_us: 0,
      });
  }
  return out.sort((a, b) => a.x.at(-1)! - b.x.at(-1)! || a.batch - b.batch);
}

/** The lane and slot option with the most joined shapes (ties: the later lane by name). */
function pickPoints(rows: readonly RecurrentRow[], recipe: Recipe) {
  let best: { lane: string; kernels: string[]; points: LayerPoint[] } | undefined;
  const phaseRows = rows.filter((r) => r.mixer === recipe.mixer && r.phase === TABLE_PHASE[recipe.phase]);
  for (const [lane, lr] of [...groupBy(phaseRows, (r) => r.lane)].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    for (const slots of recipe.options) {
      const points = joinSlots(lr, slots, recipe.phase);
      const kernels = slots.flatMap((s) => s.filter((k) => lr.some((r) => r.kernel_source === k)));
      if (points.length && (!best || points.length >= best.points.length)) best = { lane, kernels, points };
      if (points.length) break;
    }
  }
  return best;
}

/** Scratch of solveNormal: the augmented system, at most 3 rows of 4 (wider systems grow it). */
let AUG = new Float64Array(12);

/**
 * Solve the q×q normal equations A (row-major) with right-hand side rhs by Gaussian elimination with
 * partial pivoting on the augmented rows [A | rhs] (one scratch array; the arithmetic of eliminating
 * on row arrays, step for step), writing x to `out`; false when singular.
 */
function solveNormal(A: Float64Array, rhs: Float64Array, q: number, out: Float64Array): boolean {
  const w = q + 1;
  if (AUG.length < q * w) AUG = new Float64Array(q * w);
  const M = AUG;
  for (let i = 0; i < q; i++) {
    for (let j = 0; j < q; j++) M[i * w + j] = A[i * q + j]!;
    M[i * w + q] = rhs[i]!;
  }
  for (let c = 0; c < q; c++) {
    let p = c;
    for (let r = c + 1; r < q; r++) if (Math.abs(M[r * w + c]!) > Math.abs(M[p * w + c]!)) p = r;
    if (p !== c)
      for (let j = 0; j < w; j++) {
        const t = M[c * w + j]!;
        M[c * w + j] = M[p * w + j]!;
        M[p * w + j] = t;
      }
    if (!(Math.abs(M[c * w + c]!) > 0)) return false;
    for (let r = 0; r < q; r++) {
      if (r === c) continue;
      const f = M[r * w + c]! / M[c * w + c]!;
      for (let j = c; j <= q; j++) M[r * w + j] = M[r * w + j]! - f * M[c * w + j]!;
    }
  }
  for (let i = 0; i < q; i++) out[i] = M[i * w + q]! / M[i * w + i]!;
  return true;
}

/** Points packed for fitting: regressors row-major (n × k), latencies (µs) and the first IRLS weights 1/t². */
interface Packed {
  x: Float64Array;
  t: Float64Array;
  k: number;
  w0: Float64Array;
}

function packPoints(points: readonly LayerPoint[]): Packed {
  const k = points[0]!.x.length;
  const x = new Float64Array(points.length * k);
  const t = new Float64Array(points.length);
  const w0 = new Float64Array(points.length);
  points.forEach((p, n) => {
    for (let j = 0; j < k; j++) x[n * k + j] = p.x[j]!;
    t[n] = p.latency_us;
    w0[n] = 1 / t[n]! ** 2;
  });
  return { x, t, k, w0 };
}

/** Scratch of wls: the active columns, the normal equations and their solution (k ≤ 8). */
const COLS = new Int32Array(8);
const NORMAL_A = new Float64Array(64);
const NORMAL_RHS = new Float64Array(8);
const SOLUTION = new Float64Array(8);

/**
 * Weighted least squares of t on the active regressors, the others held at 0; `w` the weight of each
 * point (by index into the points: a resample's repeats share it).
 * Sums accumulate point by point in the same order and association as a plain loop over the points
 * (core/numeric/unrolled.ts: the loop over the active columns unrolled).
 */
function wls(d: Packed, use: ArrayLike<number>, active: boolean[], w: Float64Array): number[] {
  let q = 0;
  for (let i = 0; i < active.length; i++) if (active[i]) COLS[q++] = i;
  // The sums write A[0 … q² − 1] and rhs[0 … q − 1], reading cols[0 … q − 1].
  if (q > 0) pointWeightedNormalSums(q)(d.x, d.t, d.k, use, w, COLS, NORMAL_A, NORMAL_RHS);
  const ok = solveNormal(NORMAL_A, NORMAL_RHS, q, SOLUTION);
  const c = new Array<number>(active.length).fill(0);
  for (let i = 0; i < q; i++) c[COLS[i]!] = ok ? SOLUTION[i]! : Number.NaN;
  return c;
}

/** The first active coefficient that is negative or NaN, or −1. */
const firstBad = (c: readonly number[], active: readonly boolean[]) => c.findIndex((v, j) => active[j] && !(v >= 0));

/**
 * t = Σ c_j · x_j with every c_j ≥ 0, by least squares on log error: iteratively reweighted least squares
 * (weights 1/(t·pred), five passes from relative-error weights 1/t²), a coefficient that goes negative
 * dropped to 0. Deterministic, closed form per pass.
 * @returns the coefficients (c_0 µs, c_j µs per unit of x_j), undefined when the work terms all vanish
 */
export function fitLinearLog(points: readonly LayerPoint[]): number[] | undefined {
  return fitPacked(packPoints(points), Uint32Array.from(points.keys()));
}

/**
 * IRLS weights at coefficients `c`, by point: w_u = 1/(t_u·max(pred_u, 1e-9)) for each point u in `distinct`
 * (the points of `use`), pred_u summed over j in order.
 */
function reweight(d: Packed, distinct: Int32Array, c: readonly number[], w: Float64Array): void {
  const { x, t, k } = d;
  for (let m = 0; m < distinct.length; m++) {
    const u = distinct[m]!;
    const row = u * k;
    let pred = 0;
    for (let j = 0; j < k; j++) pred = pred + c[j]! * x[row + j]!;
    w[u] = 1 / (t[u]! * Math.max(pred, 1e-9));
  }
}

/** The distinct values of `use` (each in 0…n−1), in first-seen order. */
function distinctOf(use: ArrayLike<number>, n: number): Int32Array {
  const seen = new Uint8Array(n);
  const out = new Int32Array(Math.min(n, use.length));
  let m = 0;
  for (let j = 0; j < use.length; j++) {
    const u = use[j]!;
    if (seen[u]) continue;
    seen[u] = 1;
    out[m++] = u;
  }
  return out.subarray(0, m);
}

/** fitLinearLog on the packed points at `use` (a bootstrap resample: points packed once, not per resample). */
function fitPacked(d: Packed, use: ArrayLike<number>): number[] | undefined {
  const active = new Array<boolean>(d.k).fill(true);
  // weights by point: 1/t² first (packed once), then each pass's IRLS weights
  const w = Float64Array.from(d.w0);
  const distinct = distinctOf(use, d.t.length);
  let c = wls(d, use, active, w);
  for (let pass = 0; pass < 6; pass++) {
    for (let j = firstBad(c, active); j >= 0 && active.some(Boolean); j = firstBad(c, active)) {
      active[j] = false;
      c = wls(d, use, active, w);
    }
    reweight(d, distinct, c, w);
    if (pass < 5) c = wls(d, use, active, w);
  }
  return c.slice(1).some((v) => v > 0) && c.every((v) => Number.isFinite(v)) ? c : undefined;
}

const dot = (c: readonly number[], x: readonly number[]) => c.reduce((s, v, j) => s + v * x[j]!, 0);
const predict = dot;

/** Fit on the points outside `held`, scored on those inside it. */
function holdout(points: LayerPoint[], held: (p: LayerPoint) => boolean): FitError | undefined {
  const train = points.filter((p) => !held(p));
  const test = points.filter(held);
  const c = test.length && train.length >= 4 ? fitLinearLog(train) : undefined;
  if (!c) return undefined;
  return fitError(
    test.map((p) => predict(c, p.x)),
    test.map((p) => p.latency_us),
  );
}

/** Fit one recipe on one chip's rows; a string says why not. */
export function fitRecipe(rows: readonly RecurrentRow[], recipe: Recipe, ctx: FitContext): RecurrentFit | string {
  const pick = pickPoints(rows, recipe);
  if (!pick) return 'no shape with every kernel of the layer measured';
  // Decode states that fit in L2 are read from it, not HBM (README: l40s 475 % of HBM at ≤ 100 MB): the
  // rate is fitted on shapes whose state exceeds L2.
  const l2 = l2Bytes(ctx.chip.l2_mib);
  const points = recipe.phase === 'decode' ? pick.points.filter((p) => p.x[1]! / 2 > l2) : pick.points;
  if (points.length < 8) return `only ${points.length} joined shapes`;
  const c = fitLinearLog(points);
  if (!c) return 'the work terms vanished (no work dependence identifiable)';
  for (const p of points) p.predicted_us = predict(c, p.x);
  const packed = packPoints(points);
  const boot = resampleEstimates(points.length, ctx.bootstrap.resamples, ctx.bootstrap.seed, (idx) =>
    fitPacked(packed, idx),
  );
  const ci = (j: number): [number, number] => {
    const xs = boot.map((b) => b[j]!);
    return [Math.min(c[j]!, percentileType7(xs, 0.025)), Math.max(c[j]!, percentileType7(xs, 0.975))];
  };
  const batches = holdoutValues(points.map((p) => p.batch));
  const seqs = holdoutValues(points.map((p) => p.seq_len));
  return {
    mixer: recipe.mixer,
    phase: recipe.phase,
    lane: pick.lane,
    kernels: pick.kernels,
    coef: c,
    ci95: c.map((_, j) => ci(j)),
    train: fitError(
      points.map((p) => p.predicted_us),
      points.map((p) => p.latency_us),
    ),
    ...opt(
      'holdout_batch',
      holdout(points, (p) => batches.has(p.batch)),
    ),
    ...(recipe.phase === 'prefill'
      ? opt(
          'holdout_context',
          holdout(points, (p) => seqs.has(p.seq_len)),
        )
      : {}),
    ...(recipe.leaves_out ? { leaves_out: recipe.leaves_out } : {}),
    points,
  };
}

const opt = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
  v === undefined ? {} : ({ [k]: v } as { [P in K]?: V });

/** A rate from a µs-per-unit coefficient and its ci95 (the bounds swap: a larger cost is a lower rate). */
const asRate = (c: number, ci: [number, number]): [number, [number, number]] => [
  1 / c,
  [1 / ci[1], ci[0] > 0 ? 1 / ci[0] : Number.POSITIVE_INFINITY],
];

/** Registry entries of one fit (module doc); a term the fit pinned at 0 is not written (absent = not charged). */
function entries(f: RecurrentFit, ctx: FitContext): FamilyFit['coefficients'] {
  const l2 = f.phase === 'decode' ? `; state > L2 (${ctx.chip.l2_mib} MiB)` : '';
  const filter = `mixer ${f.mixer}, phase ${f.phase}, lane ${f.lane}; layer = Σ ${f.kernels.join(' + ')} per shape${l2}; repeats median-reduced`;
  const law =
    f.phase === 'decode'
      ? 't = floor + rows·2·S/rate, S = v·d_v·d_k·4 B fp32 state'
      : 't = floor + sequences·2·S/state_rate + tokens·4·v·d_v·d_k/rate';
  const notes = [
    `law: ${law} (core/laws/recurrent.ts), fitted on log error (IRLS, coefficients ≥ 0)`,
    ...(f.holdout_context
      ? [`context (seq_len) holdout: geo ${fmt(f.holdout_context.geo)} over ${f.holdout_context.n}`]
      : []),
    ...(f.phase === 'decode'
      ? ['no context holdout: a decode row reads a fixed-size state, whatever its context']
      : []),
    ...(f.leaves_out ? [`not in the measured sum: ${f.leaves_out}`] : []),
    ...f.coef.flatMap((v, j) => (v === 0 ? [`term ${j} pinned at 0 by the fit (not written)`] : [])),
  ];
  const holdout = f.holdout_batch
    ? { ...f.holdout_batch, split: 'every fourth distinct batch held out (common.ts holdoutValues)' }
    : undefined;
  const mk = (what: string, value: number, units: Units, ci: [number, number]) => ({
    set: SET_NAMES.primitives,
    name: `recurrent_${f.phase}_${what}_${f.mixer}`,
    entry: measuredEntry({
      value,
      units,
      family: RECURRENT_FAMILY,
      ctx: { ...ctx, inputs: ctx.inputs.filter((i) => i.lane === f.lane) },
      used: { filter, rows_used: f.points.length },
      ci95: ci,
      ci_method: 'bootstrap',
      train: f.train,
      ...(holdout ? { holdout } : {}),
      notes,
    }),
  });
  const [c0, c1, c2] = f.coef;
  const out = c0! > 0 ? [mk('floor', c0!, 'us_per_layer', f.ci95[0]!)] : [];
  if (c1! > 0) {
    const [v, ci] = asRate(c1!, f.ci95[1]!);
    out.push(mk(f.phase === 'decode' ? 'rate' : 'state_rate', v, 'bytes_per_us', ci));
  }
  if (c2 !== undefined && c2 > 0) {
    const [v, ci] = asRate(c2, f.ci95[2]!);
    out.push(mk('rate', v, 'flops_per_us', ci));
  }
  return out;
}

/** Fit every recipe of the chip (module doc). Never throws on data problems. */
export function fitRecurrent(rows: readonly RecurrentRow[], ctx: FitContext): RecurrentFamilyFit {
  const out = emptyFamilyFit(RECURRENT_FAMILY);
  const data: RecurrentData = { chip: ctx.chip.name, fits: [], not_fitted: [] };
  for (const recipe of RECIPES) {
    const r = fitRecipe(rows, recipe, ctx);
    if (typeof r === 'string') {
      data.not_fitted.push({ mixer: recipe.mixer, phase: recipe.phase, why: r });
      continue;
    }
    data.fits.push(r);
    out.coefficients.push(...entries(r, ctx));
  }
  return { ...out, data };
}
