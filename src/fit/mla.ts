/**
 * The MLA family (issue 13 item 2; seed "Attention"): DeepSeek-V3's latent attention, fitted from the vLLM
 * 0.24.0 whole-module tables and, for comparison and for the floor, from the attention-kernel tables
 * (src/measurements/mla-import.ts). Laws in src/core/laws/mla.ts; every fit is non-negative least squares
 * on relative error (core/numeric/lsq.ts):
 *
 *   decode, per KV dtype (suffix '' bf16, `_fp8kv` fp8), keys = batch · (past + 1):
 *     module: t = floor + per_request · B + per_request_head · B · H + keys · (E / rate + H · head_token)
 *     kernel: t = floor + keys · (E / rate + H · head_token)
 *   prefill (bf16 KV), work = Σ pairs · 640 · H · ε_max/ε(s) / (bf16 peak · ε_max), tokens T = B · s:
 *     module: t = floor + per_token · T + per_token_head · T · H + per_token_sq · T² + work / work_scale
 *     kernel: t = floor + work / work_scale
 *
 * E = 576 latent elements × the cache dtype's bytes; H = per-GPU query heads. Module rows are the
 * DeepSeek-V3 checkpoint's format (gemm_type fp8_block): the attention terms do not depend on the linear
 * layers' format, the projection terms (per_request*, per_token*) do, and the pricer charges only the former.
 * per_token_sq (µs per token per token of the step) lets the projections' cost per token rise with the step's
 * tokens T (the module runs its GEMMs at m = T): on l40s the residuals of the law without it are a function
 * of T alone (equal along batch × prompt = T) and the chip's own GEMM rows lose efficiency past m ≈ 8192
 * (bf16 8192 × 8192: 0.65–0.73 at m 2048–4096, 0.48–0.55 at 8192–32768); where the rows do not ask for it
 * the non-negative fit leaves it at or near 0 (docs/fitting.md "MLA").
 * Holdout along context (every 4th distinct past length, prefill: prompt length) and along batch (every 4th
 * distinct batch); fitted on rows in neither, scored on rows in either; ci95 from a seeded bootstrap.
 * Pure: rows in, FamilyFit out.
 */
import { peakFlopsPerUs } from '../core/catalog/chip.ts';
import { prefillPairs } from '../core/laws/attention.ts';
import { rampSlowdown } from '../core/laws/gemm.ts';
import { MLA_LATENT_ELEMENTS, MLA_PREFILL_FLOPS_PER_PAIR_HEAD } from '../core/laws/mla.ts';
import { nnlsRelative, nnlsRelativeRows, relativeSystem } from '../core/numeric/lsq.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { SET_NAMES, type Units } from '../core/schemas/registry.ts';
import type { MlaRow } from '../measurements/schema.ts';
import { ciFromEstimates, fitError, fmt, holdoutValues, measuredEntry } from './common.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** The module rows' linear-layer format the fit uses: DeepSeek-V3's checkpoint format. */
export const MLA_MODULE_GEMM = 'fp8_block';

/** Latent entry bytes of a row's cache dtype. */
export function mlaEntryBytes(kv_dtype: string): number {
  return MLA_LATENT_ELEMENTS * (kv_dtype === 'fp8' ? 1 : 2);
}

/** One fitted law: its rows, design (work per term), terms and holdout axes. */
interface MlaLaw {
  what: string;
  filter: string;
  /** The pricer's law is fitted on these rows (module; kernel where a chip has no module table). */
  priced: boolean;
  rows: (r: MlaRow) => boolean;
  design: (r: MlaRow) => number[];
  /** Registry name, units, whether β is 1/value (a rate or a work scale), and how the pricer uses it. */
  terms: Array<{ name: string; units: Units; inverse: boolean; charge: string }>;
  context: (r: MlaRow) => number;
  contextName: string;
}

const keys = (r: MlaRow) => r.batch * (r.past_tokens + r.query_tokens);
type Term = MlaLaw['terms'][number];
const term = (name: string, units: Units, inverse: boolean, charge: string): Term => ({ name, units, inverse, charge });
/** How the pricer uses each kind of term (docs/pricer.md "MLA"). */
const CHARGE = {
  attention: 'charged by the pricer as the MLA attention term',
  weights: "not charged: the projections' weight reads (∝ local heads), charged as the graph's GEMMs",
  projection: "not charged: the projections' arithmetic, charged as the graph's GEMMs",
  projectionSq:
    "not charged: the projections' cost per token rising with the step's tokens T, in µs per token per token of the step (T²; us_per_token is BLIS's nearest unit); the graph's GEMMs do not charge this rise (docs/pricer.md KNOWN DIVERGENCE 33)",
} as const;

function decodeLaw(op: 'decode_module' | 'decode_kernel', kv: 'bf16' | 'fp8'): MlaLaw {
  const module = op === 'decode_module';
  const sfx = kv === 'fp8' ? '_fp8kv' : '';
  const E = mlaEntryBytes(kv);
  const attn = (r: MlaRow) => [keys(r) * E, keys(r) * r.heads];
  return {
    what: `${module ? 'module' : 'kernel'} decode, ${kv} KV`,
    filter: `op ${op}, kv_dtype ${kv}${module ? `, gemm_dtype ${MLA_MODULE_GEMM}` : ''}`,
    priced: module,
    rows: (r) => r.op === op && r.kv_dtype === kv && (!module || r.gemm_dtype === MLA_MODULE_GEMM),
    design: module ? (r) => [1, r.heads, r.batch, r.batch * r.heads, ...attn(r)] : (r) => [1, ...attn(r)],
    terms: [
      term(`mla_decode_floor${sfx}`, 'us_per_layer', false, CHARGE.attention),
      ...(module
        ? [
            term(`mla_decode_per_head${sfx}`, 'us_per_layer', false, CHARGE.weights),
            term(`mla_decode_per_request${sfx}`, 'us_per_request', false, CHARGE.projection),
            term(`mla_decode_per_request_head${sfx}`, 'us_per_request', false, CHARGE.projection),
          ]
        : []),
      term(`mla_decode_rate${sfx}`, 'bytes_per_us', true, CHARGE.attention),
      term(`mla_decode_head_token${sfx}`, 'us_per_token', false, CHARGE.attention),
    ],
    context: (r) => r.past_tokens,
    contextName: 'past_tokens',
  };
}

/** Prefill work at work_scale 1 (µs): Σ pairs · 640 · H on the bf16 ramp at the row's own prompt length. */
function prefillWork(r: MlaRow, peak: number, eps: number, mh: number): number {
  const pairs = prefillPairs(r.query_tokens, r.past_tokens, { window: Infinity, ratio: 0, cap: Infinity });
  const flops = r.batch * pairs * MLA_PREFILL_FLOPS_PER_PAIR_HEAD * r.heads;
  return (flops * rampSlowdown(r.query_tokens, mh)) / (peak * eps);
}

function prefillLaw(op: 'prefill_module' | 'prefill_kernel', peak: number, eps: number, mh: number): MlaLaw {
  const module = op === 'prefill_module';
  const w = (r: MlaRow) => prefillWork(r, peak, eps, mh);
  const T = (r: MlaRow) => r.batch * r.query_tokens;
  return {
    what: `${module ? 'module' : 'kernel'} prefill`,
    filter: `op ${op}, kv_dtype bf16, query_tokens > 1${module ? `, gemm_dtype ${MLA_MODULE_GEMM}` : ''}`,
    priced: module,
    rows: (r) =>
      r.op === op && r.kv_dtype === 'bf16' && r.query_tokens > 1 && (!module || r.gemm_dtype === MLA_MODULE_GEMM),
    design: module ? (r) => [1, r.heads, T(r), T(r) * r.heads, T(r) * T(r), w(r)] : (r) => [1, w(r)],
    terms: [
      term('mla_prefill_floor', 'us_per_layer', false, CHARGE.attention),
      ...(module
        ? [
            term('mla_prefill_per_head', 'us_per_layer', false, CHARGE.weights),
            term('mla_prefill_per_token', 'us_per_token', false, CHARGE.projection),
            term('mla_prefill_per_token_head', 'us_per_token', false, CHARGE.projection),
            term('mla_prefill_per_token_sq', 'us_per_token', false, CHARGE.projectionSq),
          ]
        : []),
      term('mla_prefill_work_scale', 'dimensionless', true, CHARGE.attention),
    ],
    context: (r) => r.query_tokens,
    contextName: 'query_tokens',
  };
}

/** Result of one law, for the report: β, names and every row's measured and predicted latency. */
export interface MlaLawFit {
  what: string;
  /** Whether the registry's coefficients come from this law (else it is the comparison). */
  priced: boolean;
  beta: number[];
  names: string[];
  train_geo: number;
  holdout_geo: { all: number; context: number; batch: number };
  /** The holdout's context axis: `past_tokens` (decode) or `query_tokens` (prefill). */
  context_name: string;
  /**
   * Every row of the law: latency (µs), whether held out, its context (tokens, `context_name`), batch
   * (requests) and per-GPU query heads.
   */
  points: Array<{
    measured_us: number;
    predicted_us: number;
    holdout: boolean;
    context: number;
    batch: number;
    heads: number;
  }>;
}

export interface MlaFit extends FamilyFit {
  mla: MlaLawFit[];
}

const dot = (x: readonly number[], b: readonly number[]) => x.reduce((s, v, j) => s + v * b[j]!, 0);

/** One law solved on its fit rows (no bootstrap): β, the design matrix and the scored split. */
interface Solved {
  law: MlaLaw;
  beta: number[];
  X: number[][];
  y: number[];
  train: MlaRow[];
  fit: MlaLawFit;
  errs: { train: ReturnType<typeof fitError>; hold?: ReturnType<typeof fitError> };
  notes: string[];
}

/**
 * Solve one law (module comment): holdout along context (every 4th distinct value) and along batch, fitted
 * on rows in neither. Undefined when too few rows; a refusal when a rate term is pinned at 0.
 */
function solveLaw(law: MlaLaw, all: readonly MlaRow[], out: MlaFit): Solved | undefined {
  const rows = all.filter(law.rows);
  const ctxHold = holdoutValues(rows.map(law.context));
  const batchHold = holdoutValues(rows.map((r) => r.batch));
  const isHold = (r: MlaRow) => ctxHold.has(law.context(r)) || batchHold.has(r.batch);
  const train = rows.filter((r) => !isHold(r));
  const hold = rows.filter(isHold);
  if (train.length < 4 * law.terms.length) {
    if (rows.length) out.warnings.push(`mla: ${law.what}: ${train.length} fit rows, too few; not fitted`);
    return undefined;
  }
  const X = train.map(law.design);
  const y = train.map((r) => r.latency_us);
  const beta = nnlsRelative(X, y);
  if (law.terms.some((t, j) => t.inverse && !(beta[j]! > 0))) {
    out.refusals.push(`mla: ${law.what}: the fit pins the rate term at 0 (no dependence on the work in the rows)`);
    return undefined;
  }
  const err = (rs: readonly MlaRow[]) =>
    fitError(
      rs.map((r) => dot(law.design(r), beta)),
      rs.map((r) => r.latency_us),
    );
  const geo = (rs: readonly MlaRow[]) => (rs.length ? err(rs).geo : NaN);
  const errs = { train: err(train), ...(hold.length ? { hold: err(hold) } : {}) };
  const holdout_geo = {
    all: errs.hold?.geo ?? NaN,
    context: geo(hold.filter((r) => ctxHold.has(law.context(r)))),
    batch: geo(hold.filter((r) => batchHold.has(r.batch))),
  };
  const notes = [
    `law: ${law.what} (src/core/laws/mla.ts, src/fit/mla.ts)`,
    `holdout along context (${law.contextName} ${[...ctxHold].join(', ')}): geo ${holdout_geo.context}`,
    `holdout along batch (${[...batchHold].join(', ')}): geo ${holdout_geo.batch}`,
  ];
  const points = rows.map((r) => ({
    measured_us: r.latency_us,
    predicted_us: dot(law.design(r), beta),
    holdout: isHold(r),
    context: law.context(r),
    batch: r.batch,
    heads: r.heads,
  }));
  const fit = {
    what: law.what,
    priced: false,
    beta,
    names: law.terms.map((t) => t.name),
    train_geo: errs.train.geo,
    context_name: law.contextName,
  };
  return { law, beta, X, y, train, errs, notes, fit: { ...fit, holdout_geo, points } };
}

/** A law's values as text (the comparison note): `name value` per term. */
function valuesText(s: Solved): string {
  return s.law.terms.map((t, j) => `${t.name} ${fmt(t.inverse ? 1 / s.beta[j]! : s.beta[j]!)}`).join(', ');
}

/** Write a solved law's coefficients (bootstrap ci95) with the other table's law as a comparison note. */
function writeLaw(s: Solved, other: Solved | undefined, ctx: FitContext, out: MlaFit): void {
  const sys = relativeSystem(s.X, s.y);
  const boot = resampleEstimates(s.train.length, ctx.bootstrap.resamples, ctx.bootstrap.seed, (idx) =>
    nnlsRelativeRows(sys, idx),
  );
  const cmp = other
    ? `comparison, ${other.law.what} (${other.law.filter}): ${valuesText(other)}; train geo ${fmt(other.errs.train.geo)}, holdout geo ${fmt(other.fit.holdout_geo.all)}`
    : `no ${s.law.what.startsWith('module') ? 'kernel' : 'module'} table to compare with on ${ctx.chip.name}`;
  s.law.terms.forEach((t, j) => {
    const value = t.inverse ? 1 / s.beta[j]! : s.beta[j]!;
    const ci = ciFromEstimates(boot.map((b) => (t.inverse ? 1 / b[j]! : b[j]!)));
    const entry = measuredEntry(
      {
        value,
        units: t.units,
        family: 'mla',
        ctx,
        used: { filter: s.law.filter, rows_used: s.train.length },
        ci95: [Math.min(ci[0], value), Math.max(ci[1], value)],
        ci_method: 'bootstrap',
        train: s.errs.train,
        ...(s.errs.hold ? { holdout: { ...s.errs.hold, split: 'context and batch, every 4th distinct value' } } : {}),
        notes: [...s.notes, t.charge, cmp],
      },
      'mla',
    );
    if (entry.value === 0) {
      // A term the non-negative fit pins at 0 is written as not charged (the sparse family's rule).
      entry.method = 'not_charged';
      entry.fitted = false;
      entry.rationale = `MLA ${s.law.what}: the non-negative least-squares fit pins this term at 0 (${s.train.length} rows); priced as 0`;
    }
    out.coefficients.push({ set: SET_NAMES.attention, name: t.name, entry });
  });
  s.fit.priced = true;
}

/**
 * Fit every MLA law present in the rows. The registry's coefficients come from the module tables (the serving
 * lane, CUDA-graph replay); the kernel tables' law is solved beside them as the comparison (their vLLM 0.14.0
 * rows on Hopper carry a ~150 µs eager floor), and stands in only on a chip without a module table (a100).
 * Prefill needs this run's bf16 GEMM ramp (`ctx.prior`: gemm_eps_max_bf16, gemm_m_half_bf16), the ramp the
 * pricer divides prefill attention by; without it the prefill laws are refused.
 * @returns coefficients in law order: decode bf16 KV, decode fp8 KV, prefill
 */
export function fitMla(rows: readonly MlaRow[], ctx: FitContext): MlaFit {
  const out: MlaFit = { ...emptyFamilyFit('mla'), mla: [] };
  const pairs: Array<[MlaLaw, MlaLaw]> = [
    [decodeLaw('decode_module', 'bf16'), decodeLaw('decode_kernel', 'bf16')],
    [decodeLaw('decode_module', 'fp8'), decodeLaw('decode_kernel', 'fp8')],
  ];
  const eps = ctx.prior.get('gemm_eps_max_bf16');
  const mh = ctx.prior.get('gemm_m_half_bf16');
  const peak = peakFlopsPerUs(ctx.chip, 'bf16');
  if (eps === undefined || mh === undefined || peak === undefined)
    out.refusals.push('mla: prefill needs the bf16 GEMM ramp (gemm_eps_max_bf16, gemm_m_half_bf16); fit gemm first');
  else pairs.push([prefillLaw('prefill_module', peak, eps, mh), prefillLaw('prefill_kernel', peak, eps, mh)]);
  for (const [moduleLaw, kernelLaw] of pairs) {
    const m = solveLaw(moduleLaw, rows, out);
    const k = solveLaw(kernelLaw, rows, out);
    if (m) writeLaw(m, k, ctx, out);
    else if (k) writeLaw(k, undefined, ctx, out);
    for (const s of [m, k]) if (s) out.mla.push(s.fit);
  }
  return out;
}
