/**
 * The sparse family (issue 14 items 1-2; seed "Attention", "Hyper-connections"): DeepSeek-V4's sparse
 * latent attention, its block-index scorer (the indexer) and the mHC kernels, from the `sparse` rows
 * (src/measurements/sparse-import.ts). Every law is a function of src/core/laws (sparse.ts, attention.ts,
 * floor-rate.ts) shared with the pricer, and each fit is non-negative least squares on relative error
 * (core/numeric/lsq.ts):
 *
 *   decode (query_tokens = 1):  t = floor + bytes / rate, bytes = batch · entries read · entry bytes
 *     sparse_decode_{floor,rate}   entries = window + the whole compressed stream (HCA selects nothing)
 *     indexer_decode_{floor,rate}  entries = the compressed index keys, indexKeyBytes each
 *   prefill form (query_tokens > 1): t = fixed + per_request · batch + per_token · tokens + bytes / rate,
 *     bytes = query-key pairs (prefillPairs) · entry bytes, read in the kernel's per-query blocks
 *     sparse_prefill_{fixed,per_request,per_token,rate}, indexer_prefill_{…}
 *   mHC, per site and half:  t / sites = floor + tokens · mhcBytesPerToken / rate
 *     mhc_{pre,post}_{floor,rate}
 *   MiniMax-M3 MSA module (the whole module, projections to o_proj; bf16 linears and KV):
 *     decode  t = floor + bytes / rate, bytes = module weights + batch · (selected KV + whole index stream)
 *       msa_decode_{floor,rate}
 *     prefill t = fixed + per_request · batch + per_token · tokens + FLOPs / rate (projections, selected
 *       attention pairs, indexer pairs)   msa_prefill_{fixed,per_request,per_token,rate}
 *
 * Holdout along context (every 4th distinct past length) and along batch / tokens (every 4th distinct
 * value): fitted on rows in neither, scored on rows in either; ci95 from a seeded bootstrap of the fit rows.
 * Pure: rows in, FamilyFit out.
 */
import { decodeTokensRead, prefillPairs, type ReaderSpec } from '../core/laws/attention.ts';
import { floorPlusWork } from '../core/laws/floor-rate.ts';
import {
  indexKeyBytes,
  type MsaShape,
  mhcBytesPerToken,
  msaDecodeUs,
  msaDecodeWork,
  msaKvHeads,
  msaPrefillUs,
  msaPrefillWork,
  prefillFormUs,
} from '../core/laws/sparse.ts';
import { nnlsRelative, nnlsRelativeRows, relativeSystem } from '../core/numeric/lsq.ts';
import { resampleEstimates } from '../core/numeric/resample.ts';
import { SET_NAMES, type Units } from '../core/schemas/registry.ts';
import type { SparseRow } from '../measurements/schema.ts';
import { ciFromEstimates, fitError, holdoutValues, measuredEntry } from './common.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** One fitted law: which rows, its design (work per term), the coefficient names and how a β becomes a value. */
interface LawSpec {
  what: string;
  filter: string;
  rows: (r: SparseRow) => boolean;
  /** Work per term of a row (non-negative). */
  design: (r: SparseRow) => number[];
  /** Latency the law predicts per call (µs) from a row's measured latency. */
  target: (r: SparseRow) => number;
  /** Registry name, units and the map from β_j to the stored value (1/β for a rate). */
  terms: Array<{ name: string; units: Units; rate: boolean }>;
  /** Models the law is scoped to (a model's own measured form), undefined = every model. */
  models?: readonly string[];
  /** Axis of the second holdout (batch or tokens). */
  along: (r: SparseRow) => number;
  alongName: string;
}

/**
 * Catalog models a DeepSeek-V4 prefill form is scoped to: the tables are DeepSeek-V4-Flash shapes (64 heads,
 * index_topk 512), so V4-Pro (128 heads) falls back to the general prefill path with a note.
 */
export const DSV4_FLASH_MODELS = ['deepseek-v4-flash', 'deepseek-v4-flash-nvfp4'] as const;

/** The reader a row's kernel reads through: its window plus the compressed stream, capped at top-k. */
export function rowReader(r: SparseRow): ReaderSpec {
  return { window: r.window, ratio: r.compress_ratio, cap: r.index_topk > 0 ? r.index_topk : Infinity };
}

/** Bytes of one entry the row's kernel reads: latent fp8 entries, or fp8 index keys with their scale. */
export function entryBytes(r: SparseRow): number {
  return r.op === 'indexer' ? indexKeyBytes(r.head_dim) : r.head_dim;
}

const decodeBytes = (r: SparseRow) =>
  r.batch * decodeTokensRead(r.past_tokens + r.query_tokens, rowReader(r)) * entryBytes(r);
const prefillBytes = (r: SparseRow) =>
  r.batch * prefillPairs(r.query_tokens, r.past_tokens, rowReader(r)) * entryBytes(r);

function decodeLaw(op: 'sparse_attn' | 'indexer', prefix: string): LawSpec {
  return {
    what: `${prefix} decode`,
    filter: `op ${op}, query_tokens = 1`,
    rows: (r) => r.op === op && r.query_tokens === 1,
    design: (r) => [1, decodeBytes(r)],
    target: (r) => r.latency_us,
    terms: [
      { name: `${prefix}_decode_floor`, units: 'us_per_layer', rate: false },
      { name: `${prefix}_decode_rate`, units: 'bytes_per_us', rate: true },
    ],
    along: (r) => r.batch,
    alongName: 'batch',
  };
}

function prefillLaw(op: 'sparse_attn' | 'indexer', prefix: string): LawSpec {
  return {
    what: `${prefix} prefill form`,
    filter: `op ${op}, query_tokens > 1`,
    rows: (r) => r.op === op && r.query_tokens > 1,
    design: (r) => [1, r.batch, r.batch * r.query_tokens, prefillBytes(r)],
    target: (r) => r.latency_us,
    terms: [
      { name: `${prefix}_prefill_fixed`, units: 'us_per_layer', rate: false },
      { name: `${prefix}_prefill_per_request`, units: 'us_per_request', rate: false },
      { name: `${prefix}_prefill_per_token`, units: 'us_per_token', rate: false },
      { name: `${prefix}_prefill_rate`, units: 'bytes_per_us', rate: true },
    ],
    along: (r) => r.batch * r.query_tokens,
    alongName: 'tokens',
    models: DSV4_FLASH_MODELS,
  };
}

function mhcLaw(half: 'pre' | 'post'): LawSpec {
  return {
    what: `mHC ${half}`,
    filter: `op mhc_${half}, latency / sites`,
    rows: (r) => r.op === `mhc_${half}`,
    design: (r) => [1, r.query_tokens * mhcBytesPerToken(half, r.hc_mult, r.hidden)],
    target: (r) => r.latency_us / r.sites,
    terms: [
      { name: `mhc_${half}_floor`, units: 'us_per_layer', rate: false },
      { name: `mhc_${half}_rate`, units: 'bytes_per_us', rate: true },
    ],
    along: (r) => r.query_tokens,
    alongName: 'tokens',
  };
}

/** Catalog models the MSA module laws are scoped to: the tables build MiniMax-M3's own module. */
export const MSA_MODELS = ['minimax-m3'] as const;

/** The MSA shape a module row times (heads per GPU; KV and index heads by the collector's emulation). */
export function msaRowShape(r: SparseRow): MsaShape {
  const kv = msaKvHeads(r.heads);
  return {
    heads: r.heads,
    kv_heads: kv,
    head_dim: r.head_dim,
    hidden: r.hidden,
    index_heads: kv,
    index_dim: r.head_dim,
    cap_tokens: r.index_topk,
  };
}

/** A decode row's work: bf16 linears (2 B per weight) and bf16 KV (2 B per value), context = cached + 1. */
const msaDecodeRowWork = (r: SparseRow) => msaDecodeWork(msaRowShape(r), r.batch, r.past_tokens + 1, 2, 2);

/** A prefill row's work: selected pairs through the (16 + 1)-block cap, index pairs over every causal key. */
function msaPrefillRowWork(r: SparseRow) {
  const s = msaRowShape(r);
  const sel = prefillPairs(r.query_tokens, r.past_tokens, { window: 0, ratio: 1, cap: s.cap_tokens });
  const all = prefillPairs(r.query_tokens, r.past_tokens, { window: Infinity, ratio: 0, cap: Infinity });
  return msaPrefillWork(s, r.batch, r.batch * r.query_tokens, r.batch * sel, r.batch * all);
}

function msaLaw(phase: 'decode' | 'prefill'): LawSpec {
  const decode = phase === 'decode';
  return {
    what: `msa ${decode ? 'decode' : 'prefill form'}`,
    filter: `op msa, query_tokens ${decode ? '= 1' : '> 1'} (bf16 linears, bf16 KV)`,
    rows: (r) => r.op === 'msa' && (r.query_tokens === 1) === decode,
    design: decode
      ? (r) => {
          const w = msaDecodeRowWork(r);
          return [1, w.requests, w.flops, w.bytes, w.index_bytes];
        }
      : (r) => {
          const w = msaPrefillRowWork(r);
          return [1, w.requests, w.tokens, w.proj_flops, w.attn_flops, w.index_flops];
        },
    target: (r) => r.latency_us,
    terms: decode
      ? [
          { name: 'msa_decode_floor', units: 'us_per_layer', rate: false },
          { name: 'msa_decode_per_request', units: 'us_per_request', rate: false },
          { name: 'msa_decode_flop_rate', units: 'flops_per_us', rate: true },
          { name: 'msa_decode_rate', units: 'bytes_per_us', rate: true },
          { name: 'msa_decode_index_rate', units: 'bytes_per_us', rate: true },
        ]
      : [
          { name: 'msa_prefill_fixed', units: 'us_per_layer', rate: false },
          { name: 'msa_prefill_per_request', units: 'us_per_request', rate: false },
          { name: 'msa_prefill_per_token', units: 'us_per_token', rate: false },
          { name: 'msa_prefill_flop_rate', units: 'flops_per_us', rate: true },
          { name: 'msa_prefill_attn_rate', units: 'flops_per_us', rate: true },
          { name: 'msa_prefill_index_rate', units: 'flops_per_us', rate: true },
        ],
    along: decode ? (r) => r.batch : (r) => r.batch * r.query_tokens,
    alongName: decode ? 'batch' : 'tokens',
    models: MSA_MODELS,
  };
}

/** The laws this family fits, in registry order. */
export const SPARSE_LAWS: readonly LawSpec[] = [
  decodeLaw('sparse_attn', 'sparse'),
  prefillLaw('sparse_attn', 'sparse'),
  decodeLaw('indexer', 'indexer'),
  prefillLaw('indexer', 'indexer'),
  mhcLaw('pre'),
  mhcLaw('post'),
  msaLaw('decode'),
  msaLaw('prefill'),
];

/** A law's prediction for one row from its coefficients β (the pure laws, not the design dot product). */
export function predictRow(spec: LawSpec, beta: readonly number[], r: SparseRow): number {
  const x = spec.design(r);
  if (x.length === 6) {
    const [fixed_us, per_request_us, per_token_us, bp, ba, bi] = beta as [
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const law = {
      fixed_us,
      per_request_us,
      per_token_us,
      proj_flops_per_us: 1 / bp,
      attn_flops_per_us: 1 / ba,
      index_flops_per_us: 1 / bi,
    };
    const work = { requests: x[1]!, tokens: x[2]!, proj_flops: x[3]!, attn_flops: x[4]!, index_flops: x[5]! };
    return msaPrefillUs(law, work);
  }
  if (x.length === 5) {
    const [floor_us, per_request_us, bf, bb, bi] = beta as [number, number, number, number, number];
    const law = { floor_us, per_request_us, flops_per_us: 1 / bf, bytes_per_us: 1 / bb, index_bytes_per_us: 1 / bi };
    return msaDecodeUs(law, { requests: x[1]!, flops: x[2]!, bytes: x[3]!, index_bytes: x[4]! });
  }
  if (x.length === 2) return floorPlusWork(beta[0]!, x[1]!, 1 / beta[1]!);
  const form = { fixed_us: beta[0]!, per_request_us: beta[1]!, per_token_us: beta[2]!, bytes_per_us: 1 / beta[3]! };
  return prefillFormUs(form, x[1]!, x[2]!, x[3]!);
}

/** Result of one law: β, its train / holdout rows' predictions, and the series a figure needs. */
export interface SparseLawFit {
  what: string;
  beta: number[];
  names: string[];
  points: Array<{ measured_us: number; predicted_us: number; holdout: boolean }>;
}

export interface SparseFit extends FamilyFit {
  laws: SparseLawFit[];
}

/** Fit one law (module comment); pushes its coefficients into `out`. */
function fitLaw(spec: LawSpec, all: readonly SparseRow[], ctx: FitContext, out: SparseFit): void {
  const rows = all.filter(spec.rows);
  const ctxHold = holdoutValues(rows.map((r) => r.past_tokens));
  const alongHold = holdoutValues(rows.map(spec.along));
  const isHold = (r: SparseRow) => ctxHold.has(r.past_tokens) || alongHold.has(spec.along(r));
  const train = rows.filter((r) => !isHold(r));
  const hold = rows.filter(isHold);
  if (train.length < 2 * spec.terms.length) {
    out.warnings.push(`sparse: ${spec.what}: ${train.length} fit rows, too few; not fitted`);
    return;
  }
  const X = train.map(spec.design);
  const y = train.map(spec.target);
  const sys = relativeSystem(X, y);
  const beta = nnlsRelative(sys, y);
  if (spec.terms.some((t, j) => t.rate && !(beta[j]! > 0))) {
    out.refusals.push(`sparse: ${spec.what}: the fit pins the rate term at 0 (no byte dependence in the rows)`);
    return;
  }
  const boot = resampleEstimates(train.length, ctx.bootstrap.resamples, ctx.bootstrap.seed, (idx) =>
    nnlsRelativeRows(sys, idx),
  );
  const pred = (rs: readonly SparseRow[]) => rs.map((r) => predictRow(spec, beta, r));
  const trainErr = fitError(pred(train), y);
  const holdErr = hold.length ? fitError(pred(hold), hold.map(spec.target)) : undefined;
  const split = (a: readonly SparseRow[]) => (a.length ? fitError(pred(a), a.map(spec.target)).geo : NaN);
  const notes = [
    `holdout along context (past_tokens ${[...ctxHold].join(', ')}): geo ${split(hold.filter((r) => ctxHold.has(r.past_tokens)))}`,
    `holdout along ${spec.alongName} (${[...alongHold].join(', ')}): geo ${split(hold.filter((r) => alongHold.has(spec.along(r))))}`,
  ];
  spec.terms.forEach((t, j) => {
    const value = t.rate ? 1 / beta[j]! : beta[j]!;
    const est = boot.map((b) => (t.rate ? 1 / b[j]! : b[j]!));
    const ci = ciFromEstimates(est);
    const entry = measuredEntry(
      {
        value,
        units: t.units,
        family: 'sparse',
        ctx,
        used: { filter: spec.filter, rows_used: train.length },
        ci95: [Math.min(ci[0], value), Math.max(ci[1], value)],
        ci_method: 'bootstrap',
        train: trainErr,
        ...(holdErr
          ? { holdout: { ...holdErr, split: `past_tokens and ${spec.alongName}, every 4th distinct value` } }
          : {}),
        notes: [`law: ${spec.what} (src/core/laws/sparse.ts)`, ...notes],
      },
      'sparse',
    );
    if (spec.models) entry.scope = { ...entry.scope, model: [...spec.models] };
    if (entry.value === 0) {
      // A term the non-negative fit pins at 0 is written as not charged, so the form stays complete.
      entry.method = 'not_charged';
      entry.fitted = false;
      entry.rationale = `${spec.what}: the non-negative least-squares fit pins this term at 0 (${train.length} rows); priced as 0`;
    }
    out.coefficients.push({ set: SET_NAMES.attention, name: t.name, entry });
  });
  out.laws.push({
    what: spec.what,
    beta,
    names: spec.terms.map((t) => t.name),
    points: rows.map((r) => ({
      measured_us: spec.target(r),
      predicted_us: predictRow(spec, beta, r),
      holdout: isHold(r),
    })),
  });
}

/**
 * Fit every sparse law present in the rows.
 * @returns coefficients in SPARSE_LAWS order; a law with too few rows is skipped with a warning
 */
export function fitSparse(rows: readonly SparseRow[], ctx: FitContext): SparseFit {
  const out: SparseFit = { ...emptyFamilyFit('sparse'), laws: [] };
  for (const spec of SPARSE_LAWS) fitLaw(spec, rows, ctx, out);
  return out;
}
