/**
 * Expert time of one mixture-of-experts layer on one rank (seed "Experts" and its footnote 1;
 * reference §4.6; issue 13 "Fitted expert time").
 *
 *   L  = E / ep                          experts resident on the rank
 *   I' = I / tp                          per-expert intermediate width on the rank (moe_tp shards it)
 *   P  = T · k · L / E                   routed (token, expert) pairs that land on the rank
 *   D  = expertsTouched(T, E, k, L)      distinct local experts the batch touches (core/laws/moe.ts)
 *   m  = P / D                           tokens per touched expert (the grouped GEMM's m)
 *   W  = 2 · mats · H · I'               FLOPs per (token, expert) pair; mats = 3 gated (w1, w3, w2), 2 plain
 *   read  = D · mats · H · I' · bytes_per_element / (HBM · hbm_derate)       µs
 *   arith = P · W / (peak · ε(m)),  ε(m) = eps_max · m / (m + m_half)          µs
 *         = W · (P + D · m_half) / (peak · eps_max)
 *   route = T · k · H · 2 / route_rate  µs: every routed copy of a token's bf16 activations is gathered
 *                                       and scattered back (permute, moe_sum) on the rank that routes it
 *   touch = D · expert_us                µs: a fixed cost per touched expert (its scales, its tile set-up)
 *   pair  = P · H · 2 / pair_rate        µs: every (token, expert) pair on the rank moves one bf16 activation
 *                                       row of H elements through the grouped GEMM (gathered in, written out)
 *   token = T · H · 2 / token_rate       µs: every token entering the layer has its bf16 activation row read and its
 *                                       output row written once, however many experts it picks (the input's
 *                                       quantisation and permutation, the final reduction); one row's bytes are
 *                                       counted and the fitted rate absorbs how often it moves, as for pair
 *   reread = reread · D · mats·H·I'·bytes · (⌈m / 128⌉ − 1) · max(0, 1 − L2 / (mats·H·I'·bytes)) / (HBM · hbm_derate)
 *                                       µs: every m-tile of 128 rows past a touched expert's first streams its
 *                                       weights again, and the part of one expert's weights that does not fit in
 *                                       L2 comes from HBM (EXPERT_TILE_M; l2MissFraction)
 *   t     = floor + touch + read + reread + arith + route + pair + token   (charged as a SUM, seed footnote 1)
 *   t_max = floor + touch + max(read + reread, arith) + route + pair + token  (the alternative the footnote rejects; kept for the comparison)
 *
 * The fitted coefficients per chip and dtype are eps_max, m_half (tokens per expert), floor (µs per
 * layer: routing, launches), route_rate (bytes per µs), expert_us (µs per touched expert), pair_rate
 * (bytes per µs), token_rate (bytes per µs) and reread (dimensionless: HBM passes over the L2-missing weights per
 * extra m-tile). The
 * re-read term (stepcal's, 2026-12-02, docs/fitting.md "Weights re-read past the first m-tile") is the ramp's
 * fall past m ≈ 512 on large experts: without it the law is 0.45–0.8× the measured there. The route, touch and pair terms are stepcal's additions to the seed's law (KNOWN DIVERGENCE 12, docs/pricer.md):
 * without the route term the fused-MoE tables are missed by 1.2–1.6× (geo) at wide ep and tp, where the
 * expert work per rank shrinks but the routed-token traffic does not; without the touch term the
 * per-tensor fp8 CUTLASS experts on h200/h100 are missed by 1.45–1.57× (holdout geo), their time at
 * small batches rising ~10 µs per touched expert whatever its size; without the pair term the time per pair
 * at large tokens per expert on narrow experts (I' ≤ 128) is 3–18× what the ramp charges (rtx-pro-6000
 * fp8), and the law extrapolated past 2,048 tokens is 1.6–1.8× too fast (tokens holdout geo) (docs/fitting.md "MoE expert time"); the token
 * term (session 16) is a cost per token that does not grow with k: without it the law fitted on the other shapes
 * over-prices the many-expert (top-8) shapes and under-prices the top-1/top-2 ones (shape holdout). At ep = 1 the
 * route and pair bytes coincide (P = T·k); at ep > 1 the route counts every routed copy, the pair term
 * only the rank's own.
 * Units: µs, bytes, FLOPs; peaks in FLOPs per µs, HBM in bytes per µs. Pure.
 */
import { expertsTouched } from './moe.ts';

/** One MoE layer's shape on one rank, in the fused-MoE tables' terms (model-level sizes). */
export interface ExpertLayerShape {
  /** Tokens entering the layer on this rank, before top-k routing. */
  tokens: number;
  /** Model hidden size H (elements). */
  hidden: number;
  /** Per-expert FFN intermediate size I, model-level (elements). */
  inter: number;
  /** Experts each token picks (k). */
  topk: number;
  /** Model-level routed expert count E. */
  experts: number;
  /** MoE tensor-parallel width (shards I). */
  tp: number;
  /** Expert-parallel width (shards E). */
  ep: number;
  /** Gated FFN (three matrices) — default true; false for two. */
  gated?: boolean;
  /**
   * How tokens pick experts: 'law' (default) the routing law's expected distinct experts (random top-k,
   * collisions counted; core/laws/moe.ts expertsTouched), 'balanced' the fused-MoE collector's balanced
   * routing, which spreads the rank's P pairs over distinct experts until all L are touched:
   * D = min(L, max(1, ⌈P⌉)) (balancedTouched). The fit uses 'balanced' on the tables' balanced rows; the
   * pricer prices real traffic with the law.
   */
  routing?: 'law' | 'balanced';
}

/**
 * (hidden, inter, experts, topk), model-level: the geometry key of a MoE layer, `h<H>/i<I>/e<E>/top<k>` (the shape
 * the fit's shape holdout leaves out, and the key of the geometries whose balanced rows it leaves out).
 */
export const expertGeometryKey = (s: Pick<ExpertLayerShape, 'hidden' | 'inter' | 'experts' | 'topk'>): string =>
  `h${s.hidden}/i${s.inter}/e${s.experts}/top${s.topk}`;

/**
 * Distinct local experts the collector's balanced routing touches on the rank: its P pairs land on distinct
 * experts until all L are touched, D = min(L, max(1, ⌈P⌉)) for P > 0 (a rank with a fraction of a pair on
 * average runs one expert), 0 without tokens. P = T·k·L/E is a product of ratios, so ⌈P − 10⁻⁹⌉: a
 * rounding excess of P above an integer (8.000000000000002) does not count one more expert.
 */
export function balancedTouched(pairs: number, local_experts: number): number {
  if (!(pairs > 0)) return 0;
  return Math.min(local_experts, Math.max(1, Math.ceil(pairs - 1e-9)));
}

/**
 * Rows of one m-tile of the grouped GEMM (tokens per tile): an a-priori 128 (the CUTLASS / TRT-LLM / Triton
 * large-batch tile), not fitted; 64 and 256 give the same verdict (docs/fitting.md).
 */
export const EXPERT_TILE_M = 128;

/**
 * Extra passes over a touched expert's weights: m-tiles past the first, max(0, ⌈m / EXPERT_TILE_M⌉ − 1) for m
 * tokens per touched expert (m = P / D; 10⁻⁹ absorbs a rounding excess of P / D above a whole tile).
 */
export function expertRereadPasses(tokens_per_expert: number): number {
  return Math.max(0, Math.ceil(tokens_per_expert / EXPERT_TILE_M - 1e-9) - 1);
}

/** Fraction of one expert's weights (bytes) that does not fit in L2 (bytes): max(0, 1 − L2 / bytes); 0 without an L2 size. */
export function l2MissFraction(expert_bytes: number, l2_bytes: number | undefined): number {
  if (!(expert_bytes > 0) || l2_bytes === undefined) return 0;
  return Math.max(0, 1 - l2_bytes / expert_bytes);
}

/** Rates of the chip and format the layer runs on. */
export interface ExpertRates {
  /** Dense peak of the compute format, FLOPs per µs (datasheet). */
  peak_flops_per_us: number;
  /** Datasheet HBM bandwidth, bytes per µs. */
  hbm_bytes_per_us: number;
  /** Fraction of the datasheet HBM bandwidth reached (registry `hbm_derate`). */
  hbm_derate: number;
  /** Weight bytes per element of the format (bf16 2, fp8 1, nvfp4 0.5). */
  bytes_per_element: number;
  /** L2 cache of the chip, bytes (catalog `l2_mib`); absent: no weight re-read is charged. */
  l2_bytes?: number;
}

/** Fitted coefficients of the expert law for one (chip, dtype). */
export interface ExpertCoefficients {
  /** Asymptotic fraction of the dense peak the grouped GEMM reaches (dimensionless). */
  eps_max: number;
  /** Tokens per expert at which half of eps_max is reached (tokens). */
  m_half: number;
  /** Fixed cost per layer, µs. */
  floor_us: number;
  /** Rate at which routed token activations (T·k·H·2 bytes) are moved, bytes per µs; Infinity = free. */
  route_bytes_per_us: number;
  /** Fixed cost per touched expert, µs (0 = none). */
  expert_us: number;
  /** Rate at which the rank's pairs' activation rows (P·H·2 bytes) pass the grouped GEMM, bytes per µs; Infinity = free. */
  pair_bytes_per_us: number;
  /** HBM passes over a touched expert's L2-missing weights per m-tile past its first (dimensionless); absent or 0 = none. */
  reread?: number;
  /** Rate at which the tokens' own activation rows (T·H·2 bytes) are read and written, bytes per µs; absent or Infinity = free. */
  token_bytes_per_us?: number;
}

/** The shape-only quantities of the law (no coefficients). */
export interface ExpertWork {
  /** Distinct local experts touched D (count, expected value). */
  touched: number;
  /** Routed (token, expert) pairs on the rank P. */
  pairs: number;
  /** Tokens per touched expert m = P / D (0 when none touched). */
  tokens_per_expert: number;
  /** FLOPs per (token, expert) pair W = 2 · mats · H · I'. */
  flops_per_pair: number;
  /** Weight bytes read, D · mats · H · I' · bytes_per_element. */
  weight_bytes: number;
  /** Routed activation bytes T · k · H · 2 (bf16 activations, every routed copy). */
  route_bytes: number;
  /** Activation bytes of the rank's pairs P · H · 2 (one bf16 row of H per local (token, expert) pair). */
  pair_bytes: number;
  /** Activation bytes of the tokens entering the layer T · H · 2 (one bf16 row of H per token, whatever its k). */
  token_bytes: number;
  /**
   * Weight bytes streamed again past each touched expert's first m-tile, from HBM:
   * weight_bytes · expertRereadPasses(m) · l2MissFraction(one expert's bytes, L2) (0 without an L2 size).
   */
  reread_bytes: number;
}

/**
 * The work of one layer on one rank (see the module doc).
 * @throws Error when ep does not divide E or a size is not positive (a caller's bug, not data).
 */
export function expertWork(s: ExpertLayerShape, bytes_per_element: number, l2_bytes?: number): ExpertWork {
  if (!(s.hidden > 0 && s.inter > 0 && s.topk > 0 && s.experts > 0 && s.tp >= 1 && s.ep >= 1)) {
    throw new Error(
      `expertWork: sizes must be positive (hidden ${s.hidden}, inter ${s.inter}, topk ${s.topk}, experts ${s.experts}, tp ${s.tp}, ep ${s.ep})`,
    );
  }
  const local = s.experts / s.ep;
  const mats = s.gated === false ? 2 : 3;
  const interLocal = s.inter / s.tp;
  const pairs = Math.max(0, s.tokens) * s.topk * (local / s.experts);
  const touched =
    s.routing === 'balanced' ? balancedTouched(pairs, local) : expertsTouched(s.tokens, s.experts, s.topk, local);
  const expertBytes = mats * s.hidden * interLocal * bytes_per_element;
  const m = touched > 0 ? pairs / touched : 0;
  return {
    touched,
    pairs,
    tokens_per_expert: m,
    flops_per_pair: 2 * mats * s.hidden * interLocal,
    weight_bytes: touched * expertBytes,
    reread_bytes: touched * expertBytes * expertRereadPasses(m) * l2MissFraction(expertBytes, l2_bytes),
    route_bytes: Math.max(0, s.tokens) * s.topk * s.hidden * 2,
    pair_bytes: pairs * s.hidden * 2,
    token_bytes: Math.max(0, s.tokens) * s.hidden * 2,
  };
}

/** The eight terms of the law, µs. */
export interface ExpertTerms {
  floor_us: number;
  /** Fixed cost of the touched experts, D · expert_us. */
  touch_us: number;
  read_us: number;
  /** Weights streamed again past the first m-tile, reread · reread_bytes / (HBM · hbm_derate). */
  reread_us: number;
  arith_us: number;
  route_us: number;
  /** The rank's pairs' activation rows, P·H·2 / pair_rate. */
  pair_us: number;
  /** The tokens' own activation rows, T·H·2 / token_rate (0 without a token rate). */
  token_us: number;
}

/** The weight read of the touched experts at the derated HBM rate, µs: weight_bytes / (HBM · hbm_derate). */
export function expertReadUs(w: ExpertWork, r: ExpertRates): number {
  return w.weight_bytes / (r.hbm_bytes_per_us * r.hbm_derate);
}

/**
 * The law's terms for one layer: floor, fixed cost per touched expert, weight read at the derated HBM rate, grouped-GEMM
 * arithmetic on the ramp ε(m) over tokens per expert, routed-activation traffic, the rank's pairs' activation rows, the tokens'
 * own rows. A batch that touches nothing costs only the floor.
 */
export function expertTerms(w: ExpertWork, c: ExpertCoefficients, r: ExpertRates): ExpertTerms {
  const read_us = expertReadUs(w, r);
  const arith_us =
    w.touched > 0 ? (w.flops_per_pair * (w.pairs + w.touched * c.m_half)) / (r.peak_flops_per_us * c.eps_max) : 0;
  return {
    floor_us: c.floor_us,
    touch_us: w.touched * c.expert_us,
    read_us,
    reread_us: c.reread ? (c.reread * w.reread_bytes) / (r.hbm_bytes_per_us * r.hbm_derate) : 0,
    arith_us,
    route_us: w.route_bytes / c.route_bytes_per_us,
    pair_us: w.pair_bytes / c.pair_bytes_per_us,
    token_us: c.token_bytes_per_us ? w.token_bytes / c.token_bytes_per_us : 0,
  };
}

/** Expert time of one layer charged as the seed does: floor + touch + read + re-read + arithmetic + route + pair + token (µs). */
export function expertLayerUs(s: ExpertLayerShape, c: ExpertCoefficients, r: ExpertRates): number {
  const t = expertTerms(expertWork(s, r.bytes_per_element, r.l2_bytes), c, r);
  return t.floor_us + t.touch_us + t.read_us + t.reread_us + t.arith_us + t.route_us + t.pair_us + t.token_us;
}

/**
 * The rejected alternative: floor + touch + max(read + re-read, arithmetic) + route + pair + token (µs). Used only for the
 * sum-vs-max comparison.
 */
export function expertLayerMaxUs(s: ExpertLayerShape, c: ExpertCoefficients, r: ExpertRates): number {
  const t = expertTerms(expertWork(s, r.bytes_per_element, r.l2_bytes), c, r);
  return t.floor_us + t.touch_us + Math.max(t.read_us + t.reread_us, t.arith_us) + t.route_us + t.pair_us + t.token_us;
}
