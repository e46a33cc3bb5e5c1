/**
 * The MLA family (issue 13 item 2; seed "Attention"): DeepSeek-V3's latent attention, fitted from the vLLM
 * 0.24.0 whole-module tables and, for comparison and for the floor, from the attention-kernel tables
 * (src/measurements/mla-import.ts). Laws in src/core/laws/mla.ts; every fit is non-negative least squares
 * on relative error (core/numeric/lsq.ts):
 *
 *   decode, per KV dtype (suffix '' bf16, `_fp8kv` fp8), keys = batch · (past + 1):
 *     module: t = floor + per_request · B + per_request_head · B · H + keys · (E / rate + H · head_token)
 *     kernel: the wave law (src/fit/mla-kernel.ts) or t = floor + keys · (E / rate + H · head_token),
 *             whichever trains better (kernelDecode)
 *   prefill (bf16 KV), work = Σ pairs · 640 · H · ε_max/ε(s) / (bf16 peak · ε_max), tokens T = B · s:
 *     module: t = floor + per_token · T + per_token_head · T · H + per_token_sq · T² + work / work_scale
 *     kernel: t = floor + head_token · T · H + work / work_scale
 *   kernel rows are screened for timing spikes first (mla-kernel.ts screenSpikes).
 *
 * E = 576 latent elements × the cache dtype's bytes; H = per-GPU query heads. Module rows are the
 * DeepSeek-V3 checkpoint's format (gemm_type fp8_block; bf16 on a chip without it, moduleGemm): the attention terms do not depend on the linear
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
import { MLA_LATENT_ELEMENTS, MLA_PREFILL_FLOPS_PER_PAIR_HEAD, type MlaWaveDecode } from '../core/laws/mla.ts';
import { nnlsRelative, nnlsRelativeRows, type RelativeSystem, relativeSystem } from '../core/numeric/lsq.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { SET_NAMES, type Units } from '../core/schemas/registry.ts';
import type { MlaRow } from '../measurements/schema.ts';
import { ciFromEstimates, fitError, fmt, holdoutValues, measuredEntry } from './common.ts';
import {
  fitWaveClass,
  SPIKE_RATIO,
  screenSpikes,
  WAVE_BLOCKS,
  WAVE_SPLITS,
  waveClass,
  waveRowUs,
} from './mla-kernel.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** The module rows' linear-layer format the fit uses: DeepSeek-V3's checkpoint format. */
export const MLA_MODULE_GEMM = 'fp8_block';
/** The format fitted where a chip's module rows hold no MLA_MODULE_GEMM row (moduleGemm). */
export const MLA_MODULE_GEMM_FALLBACK = 'bfloat16';

/**
 * The linear-layer format of one op's module rows a fit uses: MLA_MODULE_GEMM (fp8_block) wherever a row of
 * that op has it (every curated chip), else bf16 where one has that (decode and prefill chosen apart) (the onboarded rtx-pro-6000's vLLM 0.24.0
 * rows are bf16 and nvfp4 only). The attention terms the pricer charges do not depend on the linear layers'
 * format; only the projections' terms (never charged) do. Pure.
 */
export function moduleGemm(rows: readonly MlaRow[], op: 'decode_module' | 'prefill_module'): string {
  const module = rows.filter((r) => r.op === op);
  if (!module.length || module.some((r) => r.gemm_dtype === MLA_MODULE_GEMM)) return MLA_MODULE_GEMM;
  return module.some((r) => r.gemm_dtype === MLA_MODULE_GEMM_FALLBACK) ? MLA_MODULE_GEMM_FALLBACK : MLA_MODULE_GEMM;
}

/** Latent entry bytes of a row's cache dtype. */
export function mlaEntryBytes(kv_dtype: string): number {
  return MLA_LATENT_ELEMENTS * (kv_dtype === 'fp8' ? 1 : 2);
}

/** One fitted law: its rows, design (work per term), terms and holdout axes. */
interface MlaLaw {
  what: string;
  filter: string;
  /** The kernel tables: rows screened for timing spikes first (mla-kernel.ts screenSpikes). */
  screen: boolean;
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
  floor:
    "not charged: the pricer's floor is the attention kernel's of the GQA tables (decode attention_decode_floor_mla, else attention_decode_floor; prefill the prefill-attention floor)",
  wave: 'charged by the pricer as the MLA decode attention term where the registry has no module law (core/laws/mla.ts mlaWaveDecodeUs)',
  weights: "not charged: the projections' weight reads (∝ local heads), charged as the graph's GEMMs",
  projection: "not charged: the projections' arithmetic, charged as the graph's GEMMs",
  kernelTokenHead:
    "charged by the pricer as µs per prefill token per local query head where the registry has no module law: the kernel's own per-(query token × head) cost (it runs no projections)",
  projectionSq:
    "not charged: the projections' cost per token rising with the step's tokens T, in µs per token per token of the step (T²; us_per_token is BLIS's nearest unit); the graph's GEMMs do not charge this rise (docs/pricer.md KNOWN DIVERGENCE 33)",
} as const;

/** The linear decode law of a table: module (with the projections' terms) or kernel (rows screened for spikes). */
function decodeLaw(op: 'decode_module' | 'decode_kernel', kv: 'bf16' | 'fp8', gemm = MLA_MODULE_GEMM): MlaLaw {
  const module = op === 'decode_module';
  const sfx = kv === 'fp8' ? '_fp8kv' : '';
  const E = mlaEntryBytes(kv);
  const attn = (r: MlaRow) => [keys(r) * E, keys(r) * r.heads];
  return {
    what: `${module ? 'module' : 'kernel'} decode, ${kv} KV`,
    filter: `op ${op}, kv_dtype ${kv}${module ? `, gemm_dtype ${gemm}` : ', timing spikes screened'}`,
    screen: !module,
    rows: (r) => r.op === op && r.kv_dtype === kv && (!module || r.gemm_dtype === gemm),
    design: module ? (r) => [1, r.heads, r.batch, r.batch * r.heads, ...attn(r)] : (r) => [1, ...attn(r)],
    terms: [
      term(`mla_decode_floor${sfx}`, 'us_per_layer', false, CHARGE.floor),
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

function prefillLaw(
  op: 'prefill_module' | 'prefill_kernel',
  peak: number,
  eps: number,
  mh: number,
  gemm = MLA_MODULE_GEMM,
): MlaLaw {
  const module = op === 'prefill_module';
  const w = (r: MlaRow) => prefillWork(r, peak, eps, mh);
  const T = (r: MlaRow) => r.batch * r.query_tokens;
  return {
    what: `${module ? 'module' : 'kernel'} prefill`,
    filter: `op ${op}, kv_dtype bf16, query_tokens > 1${module ? `, gemm_dtype ${gemm}` : ', timing spikes screened'}`,
    screen: !module,
    rows: (r) => r.op === op && r.kv_dtype === 'bf16' && r.query_tokens > 1 && (!module || r.gemm_dtype === gemm),
    design: module ? (r) => [1, r.heads, T(r), T(r) * r.heads, T(r) * T(r), w(r)] : (r) => [1, T(r) * r.heads, w(r)],
    terms: [
      term('mla_prefill_floor', 'us_per_layer', false, CHARGE.floor),
      ...(module
        ? [
            term('mla_prefill_per_head', 'us_per_layer', false, CHARGE.weights),
            term('mla_prefill_per_token', 'us_per_token', false, CHARGE.projection),
            term('mla_prefill_per_token_head', 'us_per_token', false, CHARGE.projection),
            term('mla_prefill_per_token_sq', 'us_per_token', false, CHARGE.projectionSq),
          ]
        : [term('mla_prefill_head_token', 'us_per_token', false, CHARGE.kernelTokenHead)]),
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

/** A law solved on its fit rows (no bootstrap): values in term order, how a resample refits, the scored split. */
interface Solved {
  what: string;
  filter: string;
  terms: Term[];
  values: number[];
  /** The values refitted on a bootstrap resample of `train` (indices into it); undefined when it fails. */
  refit: (idx: Uint32Array) => number[] | undefined;
  train: MlaRow[];
  fit: MlaLawFit;
  errs: { train: ReturnType<typeof fitError>; hold?: ReturnType<typeof fitError> };
  notes: string[];
}

/** A law's rows split for its holdout: every 4th distinct context and every 4th distinct batch. */
interface Split {
  rows: MlaRow[];
  train: MlaRow[];
  hold: MlaRow[];
  ctxHold: Set<number>;
  batchHold: Set<number>;
  isHold: (r: MlaRow) => boolean;
}

function splitRows(rows: MlaRow[], context: (r: MlaRow) => number): Split {
  const ctxHold = holdoutValues(rows.map(context));
  const batchHold = holdoutValues(rows.map((r) => r.batch));
  const isHold = (r: MlaRow) => ctxHold.has(context(r)) || batchHold.has(r.batch);
  return { rows, train: rows.filter((r) => !isHold(r)), hold: rows.filter(isHold), ctxHold, batchHold, isHold };
}

/** What scoring needs of a law: its name, terms and holdout context axis. */
type LawInfo = Pick<MlaLaw, 'what' | 'filter' | 'terms' | 'context' | 'contextName'>;

/**
 * Score a law's values on its split (train and holdout errors, the notes, the report's points) into a Solved.
 * `spikes`: the rows the spike screen took out (mla-kernel.ts), scored in a note beside the holdout.
 */
function scoreLaw(
  law: LawInfo,
  sp: Split,
  values: number[],
  predict: (r: MlaRow) => number,
  refit: Solved['refit'],
  spikes?: { screened: MlaRow[]; of: number },
): Solved {
  const pred = new Map<MlaRow, number>();
  for (const r of sp.rows) pred.set(r, predict(r));
  const at = (r: MlaRow) => pred.get(r) ?? predict(r);
  const err = (rs: readonly MlaRow[]) =>
    fitError(
      rs.map(at),
      rs.map((r) => r.latency_us),
    );
  const geo = (rs: readonly MlaRow[]) => (rs.length ? err(rs).geo : NaN);
  const errs = { train: err(sp.train), ...(sp.hold.length ? { hold: err(sp.hold) } : {}) };
  const holdout_geo = {
    all: errs.hold?.geo ?? NaN,
    context: geo(sp.hold.filter((r) => sp.ctxHold.has(law.context(r)))),
    batch: geo(sp.hold.filter((r) => sp.batchHold.has(r.batch))),
  };
  const notes = [
    `law: ${law.what} (src/core/laws/mla.ts, src/fit/mla.ts${spikes ? ', src/fit/mla-kernel.ts' : ''})`,
    `holdout along context (${law.contextName} ${[...sp.ctxHold].join(', ')}): geo ${holdout_geo.context}`,
    `holdout along batch (${[...sp.batchHold].join(', ')}): geo ${holdout_geo.batch}`,
  ];
  if (spikes) {
    const held = [...sp.hold, ...spikes.screened.filter(sp.isHold)];
    notes.push(
      `timing spikes screened (a row of more work measured < ${SPIKE_RATIO}× of it): ${spikes.screened.length} of ${spikes.of} rows; holdout geo with the screened rows scored too: ${geo(held)}`,
    );
  }
  const points = sp.rows.map((r) => ({
    measured_us: r.latency_us,
    predicted_us: at(r),
    holdout: sp.isHold(r),
    context: law.context(r),
    batch: r.batch,
    heads: r.heads,
  }));
  const fit: MlaLawFit = {
    what: law.what,
    priced: false,
    beta: values,
    names: law.terms.map((t) => t.name),
    train_geo: errs.train.geo,
    context_name: law.contextName,
    holdout_geo,
    points,
  };
  return { ...law, values, refit, train: sp.train, fit, errs, notes };
}

/** A law's rows, screened for timing spikes where the law asks (the kernel tables). */
function lawRows(law: MlaLaw, all: readonly MlaRow[]): { rows: MlaRow[]; spikes?: { screened: MlaRow[]; of: number } } {
  const rows = all.filter(law.rows);
  if (!law.screen) return { rows };
  const { kept, screened } = screenSpikes(rows);
  return { rows: kept, spikes: { screened, of: rows.length } };
}

/**
 * Solve one linear law (module comment): holdout along context (every 4th distinct value) and along batch,
 * fitted on rows in neither. Undefined when too few rows; a refusal when a rate term is pinned at 0.
 */
function solveLaw(
  law: MlaLaw,
  all: readonly MlaRow[],
  out: MlaFit,
  { rows, spikes }: ReturnType<typeof lawRows> = lawRows(law, all),
): Solved | undefined {
  const sp = splitRows(rows, law.context);
  if (sp.train.length < 4 * law.terms.length) {
    if (rows.length) out.warnings.push(`mla: ${law.what}: ${sp.train.length} fit rows, too few; not fitted`);
    return undefined;
  }
  const X = sp.train.map(law.design);
  const y = sp.train.map((r) => r.latency_us);
  const beta = nnlsRelative(X, y);
  if (law.terms.some((t, j) => t.inverse && !(beta[j]! > 0))) {
    out.refusals.push(`mla: ${law.what}: the fit pins the rate term at 0 (no dependence on the work in the rows)`);
    return undefined;
  }
  const toValues = (b: readonly number[]) => law.terms.map((t, j) => (t.inverse ? 1 / b[j]! : b[j]!));
  let sys: RelativeSystem | undefined;
  const refit = (idx: Uint32Array) => {
    sys ??= relativeSystem(X, y);
    return toValues(nnlsRelativeRows(sys, idx));
  };
  return scoreLaw(law, sp, toValues(beta), (r) => dot(law.design(r), beta), refit, spikes);
}

/** The wave law's values in its term order (waveTerms). */
function waveValues(l: MlaWaveDecode, oneHead: boolean): number[] {
  const v = [l.floor_us, l.wave_us, l.key_us];
  return oneHead ? [...v, l.splits] : [...v, l.key_head_us, l.block_heads, l.splits];
}

/** The wave law's registry terms: `_h1` for the one-head kernel, then the cache dtype's suffix. */
function waveTerms(kv: 'bf16' | 'fp8', oneHead: boolean): Term[] {
  const sfx = `${oneHead ? '_h1' : ''}${kv === 'fp8' ? '_fp8kv' : ''}`;
  const floorCharge =
    "not charged: the eager kernel's floor; the pricer's floor is the decode-attention kernel floor (attention_decode_floor_mla, else attention_decode_floor)";
  return [
    term(`mla_decode_floor${sfx}`, 'us_per_layer', false, floorCharge),
    term(`mla_decode_wave_us${sfx}`, 'us_per_layer', false, CHARGE.wave),
    term(`mla_decode_key_us${sfx}`, 'us_per_token', false, CHARGE.wave),
    ...(oneHead ? [] : [term(`mla_decode_key_head_us${sfx}`, 'us_per_token', false, CHARGE.wave)]),
    ...(oneHead ? [] : [term(`mla_decode_block_heads${sfx}`, 'dimensionless', false, CHARGE.wave)]),
    term(`mla_decode_splits${sfx}`, 'dimensionless', false, CHARGE.wave),
  ];
}

/**
 * The decode kernel's wave law (mla-kernel.ts) for one cache dtype: one law for the rows with two or more heads
 * and one for the one-head rows, each with its grid point chosen on its training rows; a resample re-chooses
 * among the grid points within a factor 2 of the fit's.
 */
function solveWaves(
  base: MlaLaw,
  kv: 'bf16' | 'fp8',
  { rows, spikes }: ReturnType<typeof lawRows>,
  slots: number,
  out: MlaFit,
): Solved[] {
  const solved: Solved[] = [];
  for (const oneHead of [false, true]) {
    const cls = rows.filter((r) => (r.heads === 1) === oneHead);
    const sp = splitRows(cls, base.context);
    const what = `${base.what}, ${oneHead ? 'one head (non-grouped kernel)' : 'two or more heads (grouped kernel)'}, in waves`;
    if (sp.train.length < 24) {
      if (cls.length) out.warnings.push(`mla: ${what}: ${sp.train.length} fit rows, too few; not fitted`);
      continue;
    }
    const c = waveClass(sp.train, slots, oneHead);
    const f = fitWaveClass(c, Array.from(sp.train.keys()));
    if (!f) continue;
    const refit = (idx: Uint32Array) => {
      const r = fitWaveClass(c, idx, f.law);
      return r && waveValues(r.law, oneHead);
    };
    const law: LawInfo = {
      ...base,
      what,
      filter: `${base.filter}, heads ${oneHead ? '1' : '≥ 2'}, on ${slots} SMs`,
      terms: waveTerms(kv, oneHead),
    };
    const screened = spikes && { ...spikes, screened: spikes.screened.filter((r) => (r.heads === 1) === oneHead) };
    const s = scoreLaw(law, sp, waveValues(f.law, oneHead), (r) => waveRowUs(f.law, r, slots), refit, screened);
    s.notes.push(
      `grid: block_heads of ${oneHead ? '1 (one head)' : WAVE_BLOCKS.join(', ')} × splits of ${WAVE_SPLITS.join(', ')}, chosen by training geo (${fmt(f.geo)})`,
    );
    solved.push(s);
  }
  return solved;
}

/** Training geo of laws over their rows together: exp of the row-weighted mean of ln geo. */
function pooledTrainGeo(laws: readonly Solved[]): number {
  const n = laws.reduce((a, l) => a + l.errs.train.n, 0);
  return Math.exp(laws.reduce((a, l) => a + l.errs.train.n * Math.log(l.errs.train.geo), 0) / n);
}

/**
 * The kernel decode law of one cache dtype: the wave law (solveWaves) or the linear floor + keys · (E / rate +
 * H · head_token), whichever has the lower training geo over the screened rows (the holdout stays unseen).
 * vLLM's Triton MLA decode (a100, l40s) runs in waves; FlashMLA and the Blackwell kernels do not (b200 wave law
 * train 1.51 against 1.24). The other form's fit is reported after the chosen ones (fitMla).
 */
function kernelDecode(
  kv: 'bf16' | 'fp8',
  rows: readonly MlaRow[],
  slots: number,
  out: MlaFit,
): { chosen: Solved[]; other: Solved[] } {
  // The kernel rows screened once for both forms.
  const law = decodeLaw('decode_kernel', kv);
  const screened = lawRows(law, rows);
  const waves = solveWaves(law, kv, screened, slots, out);
  const linear = solveLaw(law, rows, out, screened);
  if (!linear || !waves.length) return { chosen: linear ? [linear] : waves, other: [] };
  const [gw, gl] = [pooledTrainGeo(waves), linear.errs.train.geo];
  const note = `kernel decode form chosen by training geo over the screened rows: waves ${fmt(gw)}, floor + keys · (E / rate + H · head_token) ${fmt(gl)}`;
  const [chosen, other] = gw < gl ? [waves, [linear]] : [[linear], waves];
  for (const s of chosen) s.notes.push(note);
  return { chosen, other };
}

/** A law's values as text (the comparison note): `name value` per term. */
function valuesText(s: Solved): string {
  return s.terms.map((t, j) => `${t.name} ${fmt(s.values[j]!)}`).join(', ');
}

/** Write a solved law's coefficients (bootstrap ci95) with the other table's laws as a comparison note. */
function writeLaw(s: Solved, others: readonly Solved[], ctx: FitContext, out: MlaFit): void {
  const boot = resampleEstimates(s.train.length, ctx.bootstrap.resamples, ctx.bootstrap.seed, s.refit);
  const cmp = others.length
    ? others
        .map(
          (o) =>
            `comparison, ${o.what} (${o.filter}): ${valuesText(o)}; train geo ${fmt(o.errs.train.geo)}, holdout geo ${fmt(o.fit.holdout_geo.all)}`,
        )
        .join('; ')
    : `no ${s.what.startsWith('module') ? 'kernel' : 'module'} table to compare with on ${ctx.chip.name}`;
  s.terms.forEach((t, j) => {
    const value = s.values[j]!;
    const ci = ciFromEstimates(boot.map((b) => b[j]!));
    const entry = measuredEntry(
      {
        value,
        units: t.units,
        family: 'mla',
        ctx,
        used: { filter: s.filter, rows_used: s.train.length },
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
      entry.rationale = `MLA ${s.what}: the non-negative least-squares fit pins this term at 0 (${s.train.length} rows); priced as 0`;
    }
    out.coefficients.push({ set: SET_NAMES.attention, name: t.name, entry });
  });
  s.fit.priced = true;
}

/**
 * Fit every MLA law present in the rows. The registry's coefficients come from the module tables (the serving
 * lane, CUDA-graph replay); the kernel tables' laws are solved beside them as the comparison (their vLLM
 * rows carry an eager floor, ~150 µs on Hopper, and timing spikes, screened), and stand in only on a chip
 * without a module table (a100): decode as the wave law (mla-kernel.ts), prefill as floor + per-(token × head)
 * + work / work_scale. Module rows of the fp8_block linear layers, else bf16 (moduleGemm, with a warning).
 * Prefill needs this run's bf16 GEMM ramp (`ctx.prior`: gemm_eps_max_bf16,
 * gemm_m_half_bf16), the ramp the pricer divides prefill attention by; without it the prefill laws are refused.
 * @returns coefficients in law order: decode bf16 KV, decode fp8 KV, prefill
 */
export function fitMla(rows: readonly MlaRow[], ctx: FitContext): MlaFit {
  const out: MlaFit = { ...emptyFamilyFit('mla'), mla: [] };
  const gemm = { decode_module: moduleGemm(rows, 'decode_module'), prefill_module: moduleGemm(rows, 'prefill_module') };
  for (const [op, g] of Object.entries(gemm))
    if (g !== MLA_MODULE_GEMM)
      out.warnings.push(
        `mla: no ${MLA_MODULE_GEMM} ${op} rows (the checkpoint's linear-layer format); its module law is fitted on the ${g} rows (the attention terms the pricer charges do not depend on the linear layers' format, the projections' terms, never charged, do)`,
      );
  const pairs: Array<[Solved | undefined, Solved[], Solved[]]> = (['bf16', 'fp8'] as const).map((kv) => {
    const m = solveLaw(decodeLaw('decode_module', kv, gemm.decode_module), rows, out);
    const k = kernelDecode(kv, rows, ctx.chip.sm_count, out);
    return [m, k.chosen, k.other];
  });
  const eps = ctx.prior.get('gemm_eps_max_bf16');
  const mh = ctx.prior.get('gemm_m_half_bf16');
  const peak = peakFlopsPerUs(ctx.chip, 'bf16');
  if (eps === undefined || mh === undefined || peak === undefined)
    out.refusals.push('mla: prefill needs the bf16 GEMM ramp (gemm_eps_max_bf16, gemm_m_half_bf16); fit gemm first');
  else {
    const m = solveLaw(prefillLaw('prefill_module', peak, eps, mh, gemm.prefill_module), rows, out);
    const k = solveLaw(prefillLaw('prefill_kernel', peak, eps, mh), rows, out);
    pairs.push([m, k ? [k] : [], []]);
  }
  for (const [m, ks, other] of pairs) {
    if (m) writeLaw(m, ks, ctx, out);
    else for (const k of ks) writeLaw(k, [], ctx, out);
    for (const s of [...(m ? [m] : []), ...ks, ...other]) out.mla.push(s.fit);
  }
  return out;
}
