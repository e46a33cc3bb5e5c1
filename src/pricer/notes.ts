/**
 * Extrapolation notes of a step (issue "extrapolated"): the construction-time notes (width snapping,
 * fallbacks, weights past HBM), GEMM ramps priced below their fitted m range, the batch's KV cache past
 * HBM, and collective messages beyond the fitted tables. Built at construction into frozen shared
 * sets; per step only a memory or message note allocates. Pure: no I/O.
 */
import type { Chip } from '../core/catalog/chip.ts';
import type { ReaderSpec } from '../core/laws/attention.ts';
import type { ResolvedCoefficients } from '../registry/load.ts';
import type { ComputeFormat } from './deployment.ts';
import { gemmFittedRange } from './fitted-range.ts';
import { COLLECTIVE_MAX_FITTED_BYTES } from './terms.ts';

/** What a step's notes need, resolved at construction. */
export interface NotesPlan {
  /** noteSets[k]: the construction-time notes plus the notes of the k widest-edged ramps; frozen, shared by every call. */
  noteSets: ReadonlyArray<readonly string[]>;
  /** Fitted lower m edge of each ramp, widest first. */
  rampMinM: Float64Array;
  /** Drafter passes 2..k run at m = requests (num_spec_tokens > 1). */
  drafterRunsAtRequests: boolean;
  kvFullPerToken: number;
  /** Per resident window: the reader whose allRead sums Σ_rows min(ctx, W), and its KV bytes per token. */
  winReader: Int32Array;
  winBytesPerToken: Float64Array;
  weightBytesPerRank: number;
  hbmCapacityBytes: number;
  weightsOverflow: boolean;
  chipName: string;
  hbmGib: number;
  /** The last step's memory / message notes and their inputs (`stepNotes`); one per pricer. */
  memo: NotesMemo;
}

/**
 * The last notes array `stepNotes` built and what it was built from: the shared set's index k, the
 * KV bytes and the oversized message. The text is a function of exactly these (weights and capacity
 * are the deployment's), so equal inputs give the same, frozen array without formatting it again
 * (a batch over capacity formatted its note on every call: 0.7-0.8 kB per step for GLM-5 on b200).
 */
class NotesMemo {
  k = -1;
  // NaN, not 0: a double from the first store, so the field never changes representation (see notesPlanOf).
  kvBytes = Number.NaN;
  big = Number.NaN;
  notes: readonly string[] = [];
}

const gib = (b: number) => (b / 2 ** 30).toFixed(1);

/** The shared note sets: sorted by fitted edge, widest first, so the ramps a step of m tokens is below are a prefix. */
function rampNoteSets(
  reg: ResolvedCoefficients,
  chip: Chip,
  ramps: Iterable<ComputeFormat['ramp']>,
  base: readonly string[],
) {
  const edges = [...ramps]
    .map((r) => ({ r, range: gemmFittedRange(reg, r, chip) }))
    .filter(
      (x): x is { r: ComputeFormat['ramp']; range: NonNullable<ReturnType<typeof gemmFittedRange>> } =>
        x.range !== undefined,
    )
    .sort((a, b) => b.range.min_m - a.range.min_m);
  const below = edges.map(
    (x) =>
      `GEMM ramp below its fitted m range: the ${x.r} ramp at fewer than ${+x.range.min_m.toFixed(1)} tokens per step (${x.range.source})`,
  );
  // noteSets[k]: the base notes, then the notes of the k widest-edged ramps (k = 0 … edges.length).
  const noteSets = Array.from({ length: edges.length + 1 }, (_, k) => Object.freeze([...base, ...below.slice(0, k)]));
  return { noteSets, rampMinM: Float64Array.from(edges.map((x) => x.range.min_m)) };
}

/**
 * Resolve the notes plan. Adds the weights-past-HBM note to `staticNotes` when the weights alone overflow.
 * @param kvByWindow Σ_layers KV bytes per resident token by window (Infinity = whole context), target + drafter
 * @param readers the walk's readers (a windowed cache's reader has ratio 0 and its window)
 */
export function buildNotesPlan(
  reg: ResolvedCoefficients,
  chip: Chip,
  ramps: Iterable<ComputeFormat['ramp']>,
  staticNotes: Set<string>,
  weightBytesPerRank: number,
  kvByWindow: ReadonlyMap<number, number>,
  readers: readonly ReaderSpec[],
  drafterRunsAtRequests: boolean,
): NotesPlan {
  const hbmCapacityBytes = chip.hbm_gib * 2 ** 30;
  const weightsOverflow = weightBytesPerRank > hbmCapacityBytes;
  if (weightsOverflow)
    staticNotes.add(
      `memory: weights ${gib(weightBytesPerRank)} GiB per rank exceed ${chip.name}'s ${chip.hbm_gib} GiB of HBM before any KV cache`,
    );
  // A windowed layer keeps Σ_rows min(ctx, W) tokens: exactly what the walk sums into allRead for
  // its reader (window W, no compressed stream), so the capacity check adds nothing per request.
  const kvWindows = [...kvByWindow.keys()].filter((w) => w !== Infinity);
  const { noteSets, rampMinM } = rampNoteSets(reg, chip, ramps, [...staticNotes]);
  const plan = notesPlanOf(noteSets, rampMinM, drafterRunsAtRequests, chip.name);
  plan.kvFullPerToken = kvByWindow.get(Infinity) ?? 0;
  plan.winReader = Int32Array.from(kvWindows.map((w) => readers.findIndex((r) => r.window === w && r.ratio === 0)));
  plan.winBytesPerToken = Float64Array.from(kvWindows.map((w) => kvByWindow.get(w)!));
  plan.weightBytesPerRank = weightBytesPerRank;
  plan.hbmCapacityBytes = hbmCapacityBytes;
  plan.weightsOverflow = weightsOverflow;
  plan.hbmGib = chip.hbm_gib;
  return plan;
}

/**
 * A NotesPlan with its numbers still to set, from one object literal whose number fields start as doubles
 * (issue 17; docs/performance.md "Session 10"). `stepNotes` reads this plan on every call, and it is
 * shared code: built by a spread with fields that started as small integers in some pricers and as
 * doubles in others, the plans of a process pricing many graphs had many hidden classes (each double
 * stored over a small integer deprecates the map), stepNotes' loads went megamorphic for good, and every
 * later call of every pricer paid for it (llama decode 1: 231 → 355 ns after 36 other pricers ran).
 * A field that starts as a double keeps one representation whatever is stored, so every plan has one class.
 */
function notesPlanOf(
  noteSets: ReadonlyArray<readonly string[]>,
  rampMinM: Float64Array,
  drafterRunsAtRequests: boolean,
  chipName: string,
): NotesPlan {
  return {
    noteSets,
    rampMinM,
    drafterRunsAtRequests,
    kvFullPerToken: Number.NaN,
    winReader: new Int32Array(0),
    winBytesPerToken: new Float64Array(0),
    weightBytesPerRank: Number.NaN,
    hbmCapacityBytes: Number.NaN,
    weightsOverflow: false,
    chipName,
    hbmGib: Number.NaN,
    memo: new NotesMemo(),
  };
}

/**
 * Notes of a walked step: the shared frozen set for its GEMM m, plus (in a new frozen array, only when
 * one applies, reused while the step's KV bytes and message stay those of the last such step) memory
 * capacity and an oversized collective message.
 * @param tok step tokens; nReq rows; ctxSumAll Σ context after the step over rows; allRead the walk's
 *   per-reader tokens read over every row; big largest out-of-table collective message, bytes (0 = none)
 */
export function stepNotes(
  np: NotesPlan,
  tok: number,
  nReq: number,
  ctxSumAll: number,
  allRead: Float64Array,
  big: number,
): readonly string[] {
  // The GEMM ramps run at m = tok (and at m = requests in drafter passes 2..k).
  const mMin = np.drafterRunsAtRequests && nReq < tok ? nReq : tok;
  const nRamps = np.rampMinM.length;
  let k = 0;
  if (mMin > 0) while (k < nRamps && mMin < np.rampMinM[k]!) k++;
  const shared = np.noteSets[k]!;
  let kvBytes = np.kvFullPerToken * ctxSumAll;
  for (let w = 0; w < np.winReader.length; w++) kvBytes += np.winBytesPerToken[w]! * allRead[np.winReader[w]!]!;
  const total = np.weightBytesPerRank + kvBytes;
  const full = !np.weightsOverflow && total > np.hbmCapacityBytes;
  if (!full && !(big > 0)) return shared;
  const m = np.memo;
  if (m.k === k && m.kvBytes === kvBytes && m.big === big) return m.notes;
  const out = [...shared];
  if (full) {
    out.push(
      `memory: weights ${gib(np.weightBytesPerRank)} GiB + KV cache ${gib(kvBytes)} GiB for this batch = ${gib(total)} GiB per rank exceed ${np.chipName}'s ${np.hbmGib} GiB of HBM`,
    );
  }
  if (big > 0)
    out.push(
      `a collective message of ${big} bytes exceeds the largest fitted size (${COLLECTIVE_MAX_FITTED_BYTES} bytes)`,
    );
  m.k = k;
  m.kvBytes = kvBytes;
  m.big = big;
  m.notes = Object.freeze(out);
  return m.notes;
}
