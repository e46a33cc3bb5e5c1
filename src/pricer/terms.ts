/**
 * The per-step resource terms of one layer kind (seed "One layer"; reference §4.3–4.7), generated as one
 * straight-line function per layer kind of a deployment (issue 17 "Pricer", issue 14 "every graph < 2
 * µs"): every construction-time constant of the kind's KindPlan (plan.ts) written in as a literal, its
 * GEMM groups, attention, recurrent and collective entries unrolled, the terms a kind lacks left out.
 * Each term calls its law in src/core/laws; the layer is composed by compose.ts (composeLayers, or
 * composeHead for the output head). Times are µs for ONE layer of the kind.
 *
 * DECISION (docs/performance.md, session 6): generated, not interpreted. One shared set of term
 * functions priced every graph, so in a process pricing many graphs (the bench, validate across
 * deployments, serve) their property loads saw every KindPlan shape and went polymorphic, and each step
 * looped over entry arrays and loaded each constant from its object. A function per kind has its own
 * type feedback (monomorphic by construction), no constant loads, and is small enough for V8 to inline
 * the laws it calls, so no double is boxed (no allocation per call).
 *
 * Bit-identity: the generated code performs the same operations in the same order as the interpreted
 * terms did (test/pricer/golden-prices.test.ts; a JS number literal written by `String(x)` reads back as
 * the same double).
 *
 * A kind's function reads the step's inputs from `inp` (IN_* slots, filled by step.ts) and the
 * per-reader sums from `dec`, `pre` and `preRaw` (walk.ts BatchWalk), adds its `count` layers into
 * `acc`, and leaves one layer's times in `lays` at its offset (LAY_*) for the per-kind breakdown and
 * the terms log. `kindSource` gives the code as text (one statement per term).
 */
import { decodeAttentionUs, type DecodeLaw } from '../core/laws/attention.ts';
import { collectiveUs } from '../core/laws/collective.ts';
import { floorPlusUnits } from '../core/laws/floor-rate.ts';
import { rampUs } from '../core/laws/gemm.ts';
import { mlaWaveDecodeUs } from '../core/laws/mla.ts';
import { expertsTouched } from '../core/laws/moe.ts';
import { expertRereadPasses } from '../core/laws/moe-experts.ts';
import { prefillFormUs, type PrefillForm } from '../core/laws/sparse.ts';
import { composeHead, composeLayers } from './compose.ts';
import type { AttnPlan, CollPlan, KindPlan, RecPlan } from './plan.ts';

/** Slots of a layer's times (`lay`, a Float64Array of LAY_LEN): µs per layer, and the largest oversized message. */
export const LAY_SM = 0;
export const LAY_HBM = 1;
export const LAY_NVLINK = 2;
export const LAY_NIC = 3;
export const LAY_EXPERT_SM = 4;
export const LAY_EXPERT_HBM = 5;
/** Largest collective message of the layer beyond the fitted tables, bytes (0 = none). */
export const LAY_BIG = 6;
export const LAY_LEN = 7;

/** Largest message in the NCCL tables the collective coefficients are fitted on (reference §1.5: 256 B–512 MiB). */
export const COLLECTIVE_MAX_FITTED_BYTES = 512 * 1024 * 1024;

/** Slots of the step inputs a kind function reads (`inp`, a Float64Array of IN_LEN). */
export const IN_TOK = 0; // the pass's tokens on this rank (the head: the rows it samples)
export const IN_DEC_TOK = 1; // decode tokens of the pass
export const IN_DEC_ROWS = 2; // decode rows of the step (nReq − nPrefill)
export const IN_N_PREFILL = 3; // prefill rows of the step
export const IN_PRE_TOK = 4; // prefill tokens of the step
export const IN_PRE_SEQS = 5; // prefill sequences of the pass (recurrent mixers' fresh states)
export const IN_ANY_DECODE = 6; // 1 when the pass has a decode row, else 0
export const IN_ALL_TOK = 7; // the head: every token of the pass (its final norm runs on all)
/** Output: the largest collective message beyond the fitted tables so far, bytes (0 = none). */
export const IN_BIG = 8;
/** The longest decode row's context after the step (keys it attends); set only where a kind prices decode in waves (StepPlan.needsDecodeMax), else 0. */
export const IN_DEC_MAX = 9;
export const IN_LEN = 10;

/** A compiled kind: adds its layers into `acc` and leaves one layer's times in `lays` at its offset. */
export type KindFn = (
  inp: Float64Array,
  dec: Float64Array,
  pre: Float64Array,
  preRaw: Float64Array,
  acc: Float64Array,
  lays: Float64Array,
) => void;

/** What a kind's code may price: the head prices neither attention term, a decode-only variant no prefill term. */
export interface KindVariant {
  /** The kind's attention prefill terms (the kinds with prefill-only nodes, used exactly when the step has a prefill row). */
  prefill: boolean;
  /** The output head: no attention terms, composed with composeHead after its final norm over IN_ALL_TOK. */
  head: boolean;
}

/** The laws the generated code calls, by the names it uses. */
const LAWS = {
  rampUs,
  decodeAttentionUs,
  mlaWaveDecodeUs,
  floorPlusUnits,
  prefillFormUs,
  collectiveUs,
  expertsTouched,
  expertRereadPasses,
  composeLayers,
  composeHead,
};

/**
 * A decode law with every field stored as a double, so every such object of every pricer has one hidden
 * class (a field first stored as a small integer would get another), and the inlined law's loads stay
 * monomorphic across pricers. Same values.
 */
function doubleLaw(l: DecodeLaw): DecodeLaw {
  const o = { floor_us: 0.5, rate: 0.5, item_us: 0.5, p_half: 0.5 };
  o.floor_us = l.floor_us;
  o.rate = l.rate;
  o.item_us = l.item_us;
  o.p_half = l.p_half;
  return o;
}

/** `doubleLaw` for a measured prefill form. */
function doubleForm(f: PrefillForm): PrefillForm {
  const o = { fixed_us: 0.5, per_request_us: 0.5, per_token_us: 0.5, bytes_per_us: 0.5 };
  o.fixed_us = f.fixed_us;
  o.per_request_us = f.per_request_us;
  o.per_token_us = f.per_token_us;
  o.bytes_per_us = f.bytes_per_us;
  return o;
}

/**
 * The constants of the code being generated: numbers go to C (a Float64Array, read as `C[i]`), law and
 * form objects to K (`K[i]`). The code's text then depends only on the kinds' structure (which terms,
 * how many entries, which readers), so pricers of one structure share one compiled script.
 */
class Consts {
  readonly nums: number[] = [];
  readonly objs: Array<DecodeLaw | PrefillForm> = [];
  /** `C[i]` holding x. */
  c(x: number): string {
    this.nums.push(x);
    return `C[${this.nums.length - 1}]`;
  }
  /** `K[i]` holding o. */
  k(o: DecodeLaw | PrefillForm): string {
    this.objs.push(o);
    return `K[${this.objs.length - 1}]`;
  }
}

/** Dense GEMMs: sm = Σ_groups rampUs(A, tok, m_½), from 0 in group order. */
function gemmCode(kp: KindPlan, k: Consts): string[] {
  const out = ['let sm = 0;'];
  for (let g = 0; g < kp.gemmA.length; g++) out.push(`sm += rampUs(${k.c(kp.gemmA[g]!)}, tok, ${k.c(kp.gemmMh[g]!)});`);
  return out;
}

/** Decode attention on HBM (the node's decode law over the tokens its reader reads), when the pass has a decode row. */
function decodeAttnCode(attn: readonly AttnPlan[], k: Consts): string[] {
  if (attn.length === 0) return [];
  const out = [`if (inp[${IN_ANY_DECODE}] !== 0) {`];
  for (const a of attn) {
    const w = a.decWave;
    const t = w
      ? `mlaWaveDecodeUs(${k.c(w.floor_us)}, ${k.c(w.wave_us)}, ${k.c(w.us_per_key)}, ${k.c(w.programs_per_row)}, ${k.c(w.slots)}, decRows, dec[${a.reader}], inp[${IN_DEC_MAX}])`
      : `decodeAttentionUs(${k.k(doubleLaw(a.decLaw))}, decRows * ${k.c(a.decHeads)}, dec[${a.reader}])`;
    out.push(`  hbm += ${t} + decTok * ${k.c(a.decUsPerDecodeToken)};`);
  }
  out.push('}');
  return out;
}

/** Prefill attention on the SM: floor + ramp-scaled pairs · µs per pair, or the model's measured prefill form. */
function prefillAttnCode(attn: readonly AttnPlan[], k: Consts): string[] {
  return attn.map((a) =>
    a.form === undefined
      ? `sm += floorPlusUnits(${k.c(a.preFloor)}, pre[${a.reader}], ${k.c(a.preUsPerPair)})${a.preUsPerToken > 0 ? ` + inp[${IN_PRE_TOK}] * ${k.c(a.preUsPerToken)}` : ''};`
      : `sm += prefillFormUs(${k.k(doubleForm(a.form))}, inp[${IN_N_PREFILL}], inp[${IN_PRE_TOK}], preRaw[${a.reader}] * ${k.c(a.formBytesPerPair)});`,
  );
}

/** Recurrent mixers on the SM: decode floor + per token; prefill floor + per sequence + per token at its rate, or the scan. */
function recurrentCode(rec: readonly RecPlan[], k: Consts): string[] {
  if (rec.length === 0) return [];
  const out = ['const preTok = tok - decTok;'];
  for (const r of rec) {
    out.push(`if (decTok > 0) sm += floorPlusUnits(${k.c(r.decFloor)}, decTok, ${k.c(r.decUsPerToken)});`);
    out.push(
      r.preUsPerToken !== undefined
        ? `if (preTok > 0) sm += ${k.c(r.preFloor)} + floorPlusUnits(inp[${IN_PRE_SEQS}] * ${k.c(r.preUsPerSeq)}, preTok, ${k.c(r.preUsPerToken)});`
        : `if (preTok > 0) sm += rampUs(${k.c(r.preA)}, preTok, ${k.c(r.preMh)});`,
    );
  }
  return out;
}

/**
 * Collectives (seed "Collectives"; reference §4.7): t(b) per launch, every launch paying its own floor,
 * b = tok · bytes per token scaled by the group's span, on NVLink or the NIC; `big` the last message past
 * the fitted tables.
 */
function collectiveCode(colls: readonly CollPlan[], k: Consts): string[] {
  const out = ['let nvl = 0;', 'let nic = 0;', 'let big = 0;'];
  colls.forEach((c, i) => {
    const rt = c.rt === undefined ? 'undefined' : k.c(c.rt);
    out.push(`const b${i} = tok * ${k.c(c.bytesPerToken)};`);
    out.push(`if (b${i} > ${COLLECTIVE_MAX_FITTED_BYTES}) big = b${i};`);
    out.push(`${c.nic ? 'nic' : 'nvl'} += collectiveUs(b${i} * ${k.c(c.span)}, ${k.c(c.t0)}, ${rt}, ${k.c(c.rpeak)});`);
  });
  return out;
}

/**
 * Routed experts (seed "Experts"; reference §4.6): the distinct local experts touched (core/laws/moe.ts;
 * the pricer's last value reused while its inputs repeat, T = [tok, E, k, L, value]: one Math.pow for
 * every kind of one routing), then the fitted law (plan.ts ExpertLawPlan) or the dense ramp, the SM part × s.
 */
function expertCode(kp: KindPlan, s: string, k: Consts): string[] {
  if (!kp.hasMoe) return ['const esm = 0;', 'const ehbm = 0;'];
  const [E, K, L] = [k.c(kp.moeExperts), k.c(kp.moeTopK), k.c(kp.moeLocal)];
  const out = [
    'let touched;',
    `if (T[0] === tok && T[1] === ${E} && T[2] === ${K} && T[3] === ${L}) touched = T[4];`,
    `else { T[0] = tok; T[1] = ${E}; T[2] = ${K}; T[3] = ${L}; T[4] = expertsTouched(tok, ${E}, ${K}, ${L}); touched = T[4]; }`,
  ];
  const law = kp.moeLaw;
  if (law === undefined) {
    out.push(`const esm = rampUs(${k.c(kp.moeA)}, tok, ${k.c(kp.moeMh)}) * ${s};`);
    out.push(`const ehbm = touched * ${k.c(kp.moeUsPerExpert)};`);
  } else {
    out.push(
      `const esm = (${k.c(law.floorUs)} + tok * ${k.c(law.pairsPerToken)} * ${k.c(law.arithUsPerPair)} + touched * ${k.c(law.arithUsPerTouched)}) * ${s};`,
    );
    // Weights re-read past each touched expert's first m-tile (core/laws/moe-experts.ts): emitted only where fitted
    // and the expert outgrows L2, so every other law's code is as before.
    const reread =
      law.rereadUsPerPass > 0
        ? ` + (touched > 0 ? touched * ${k.c(law.rereadUsPerPass)} * expertRereadPasses((tok * ${k.c(law.pairsPerToken)}) / touched) : 0)`
        : '';
    out.push(`const ehbm = touched * ${k.c(law.readUsPerTouched)} + tok * ${k.c(law.routeUsPerToken)}${reread};`);
  }
  return out;
}

/**
 * The body of one kind's function: its terms in the order the step composes them (GEMMs, weights and
 * norms, decode attention, prefill attention, recurrent mixers, collectives, SM × s, experts), then its
 * composition and its layer times into `lays` at `slot`. One statement per term.
 */
function kindSource(kp: KindPlan, v: KindVariant, smScale: number, slot: number, k: Consts): string {
  const attn = v.head ? [] : kp.attn;
  const s = k.c(smScale);
  const lines = [
    `// ${v.head ? 'head' : `${kp.count} × ${kp.id}`}${v.prefill ? ', with prefill' : ''}`,
    `const tok = inp[${IN_TOK}];`,
    `const decTok = inp[${IN_DEC_TOK}];`,
    `const decRows = inp[${IN_DEC_ROWS}];`,
    ...gemmCode(kp, k),
    `let hbm = ${k.c(kp.weightUs)} + ${k.c(kp.fixedHbmUs)} + tok * ${k.c(kp.eltUsPerToken)};`,
    ...decodeAttnCode(attn, k),
    ...(v.prefill ? prefillAttnCode(attn, k) : []),
    ...recurrentCode(kp.rec, k),
    ...collectiveCode(kp.colls, k),
    `sm = sm * ${s};`,
    ...expertCode(kp, s, k),
    ...(v.head
      ? [`hbm = hbm + (inp[${IN_ALL_TOK}] - tok) * ${k.c(kp.eltUsPerToken)};`, 'composeHead(acc, sm, hbm);']
      : [
          `composeLayers(acc, ${k.c(kp.count)}, sm, hbm, nvl, nic, esm, ehbm);`,
          `if (big > inp[${IN_BIG}]) inp[${IN_BIG}] = big;`,
        ]),
    ...[LAY_SM, LAY_HBM, LAY_NVLINK, LAY_NIC, LAY_EXPERT_SM, LAY_EXPERT_HBM, LAY_BIG].map(
      (o, i) => `lays[${slot + o}] = ${['sm', 'hbm', 'nvl', 'nic', 'esm', 'ehbm', 'big'][i]};`,
    ),
  ];
  return lines.join('\n');
}

/** One kind to compile: its plan, its variant and its offset in `lays`. */
export interface KindJob {
  kp: KindPlan;
  v: KindVariant;
  slot: number;
}

type Factory = (
  laws: typeof LAWS,
  K: ReadonlyArray<DecodeLaw | PrefillForm>,
  T: Float64Array,
  C: Float64Array,
) => KindFn[];

/** Compiled scripts by their text (bounded: cleared when full), so pricers of one structure parse it once. */
const SCRIPTS = new Map<string, Factory>();
const MAX_SCRIPTS = 512;

/**
 * Compile kinds into their functions, in order, through one generated script (all of a pricer's kinds
 * in one parse; each function keeps its own type feedback). `smScale`: the engine's s on every SM time;
 * `touched`: the pricer's touched-experts memo (5 slots) the kinds share.
 */
export function compileKinds(jobs: readonly KindJob[], smScale: number, touched: Float64Array): KindFn[] {
  const k = new Consts();
  const fns = jobs.map(
    (j, i) => `function kind${i}(inp, dec, pre, preRaw, acc, lays) {\n${kindSource(j.kp, j.v, smScale, j.slot, k)}\n}`,
  );
  const text = `const { ${Object.keys(LAWS).join(', ')} } = LAWS;\nreturn [\n${fns.join(',\n')}\n];`;
  let factory = SCRIPTS.get(text);
  if (factory === undefined) {
    if (SCRIPTS.size >= MAX_SCRIPTS) SCRIPTS.clear();
    // The kinds' code: its text is built above from fixed statements and slot indices only (no data).
    factory = new Function('LAWS', 'K', 'T', 'C', text) as Factory;
    SCRIPTS.set(text, factory);
  }
  return factory(LAWS, k.objs, touched, Float64Array.from(k.nums));
}
