/**
 * The MLA attention-kernel tables' own laws (issue 13 item 2; docs/fitting.md "MLA"): the timing-spike screen
 * of the eager kernel rows and the wave law of the decode kernel (core/laws/mla.ts MlaWaveDecode), fitted by
 * src/fit/mla.ts wherever a chip has kernel rows (the registry's law on a chip without a module table, a100;
 * the comparison elsewhere).
 *
 * Wave law: t = max(floor, W · (wave_us + k · (key_us + hb · key_head_us))), W = ceil(B · ceil(H / block) ·
 * splits / SMs), k = keys one request attends (past + 1), hb = min(H, block). Given block and splits it is
 * linear in (wave_us, key_us, key_head_us) above the floor: non-negative least squares on relative error
 * (core/numeric/lsq.ts) alternated with the floor, the relative-error mean of the rows under it, until the
 * rows under the floor stop changing. block and splits are chosen on a grid by training error; the one-head
 * rows are their own law (vLLM runs a non-grouped kernel at one KV group: 4.8× slower per key on a100).
 * Pure: rows in, laws and scores out.
 */
import {
  type MlaWaveDecode,
  mlaDecodeWaves,
  mlaHeadsInBlock,
  mlaWaveDecodeUs,
  mlaWaveProgramsPerRow,
  mlaWaveUsPerKey,
} from '../core/laws/mla.ts';
import { nnlsRelativeRows, type RelativeSystem, relativeSystem } from '../core/numeric/lsq.ts';
import type { MlaRow } from '../measurements/schema.ts';

/**
 * A kernel row is a timing spike when a row of the same op, cache dtype, heads and linear format with at least
 * its batch, query and past tokens measured less than this fraction of it: more work cannot run faster, so the
 * slower row timed something besides the kernel (a100's eager vLLM 0.14.0 rows: launches of 1.0–2.1 ms beside
 * neighbours of 290 µs). The module tables (CUDA-graph replays) have ≤ 2 such rows in 8,568 and are not screened.
 */
export const SPIKE_RATIO = 0.7;

/** The rows with no spike (SPIKE_RATIO), in order, and the screened rows, in order. */
export function screenSpikes(rows: readonly MlaRow[]): { kept: MlaRow[]; screened: MlaRow[] } {
  const groups = new Map<string, number[]>();
  rows.forEach((r, i) => {
    const k = `${r.op}|${r.kv_dtype}|${r.gemm_dtype}|${r.heads}`;
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  });
  const spike = new Uint8Array(rows.length);
  for (const g of groups.values()) markSpikes(rows, g, spike);
  return { kept: rows.filter((_, i) => !spike[i]), screened: rows.filter((_, i) => spike[i]) };
}

/**
 * Mark in `spike` the rows of one group (indices `g`) that a faster row dominates: the group sorted by latency,
 * each row checked against the rows under SPIKE_RATIO of its latency only (a prefix of that order).
 */
function markSpikes(rows: readonly MlaRow[], g: number[], spike: Uint8Array): void {
  const order = [...g].sort((a, b) => rows[a]!.latency_us - rows[b]!.latency_us);
  const n = order.length;
  const lat = Float64Array.from(order, (i) => rows[i]!.latency_us);
  const B = Float64Array.from(order, (i) => rows[i]!.batch);
  const Q = Float64Array.from(order, (i) => rows[i]!.query_tokens);
  const P = Float64Array.from(order, (i) => rows[i]!.past_tokens);
  let cut = 0;
  for (let t = 0; t < n; t++) {
    const limit = SPIKE_RATIO * lat[t]!;
    while (cut < n && lat[cut]! < limit) cut++;
    for (let o = 0; o < cut; o++)
      if (B[o]! >= B[t]! && Q[o]! >= Q[t]! && P[o]! >= P[t]!) {
        spike[order[t]!] = 1;
        break;
      }
  }
}

/** Head blocks and splits the wave law is chosen from (the grid's extremes bracket vLLM's 16 and 4). */
export const WAVE_BLOCKS = [1, 2, 4, 8, 16, 32, 64, 128];
export const WAVE_SPLITS = [1, 2, 4, 8];

/** One grid point's design over a class's rows: W, W·k and (heads ≥ 2) W·k·hb, with its relative system. */
interface WaveDesign {
  block: number;
  splits: number;
  cols: number;
  X: Float64Array;
  sys: RelativeSystem;
}

function waveDesign(rows: readonly MlaRow[], block: number, splits: number, slots: number, cols: number): WaveDesign {
  const X = new Float64Array(rows.length * cols);
  const Xr: number[][] = [];
  const grid = { block_heads: block, splits };
  rows.forEach((r, i) => {
    // The law's own wave count and heads per program (core/laws/mla.ts), at this grid point.
    const W = mlaDecodeWaves(r.batch, mlaWaveProgramsPerRow(grid, r.heads), slots);
    const k = r.past_tokens + r.query_tokens;
    const x = cols === 3 ? [W, W * k, W * k * mlaHeadsInBlock(grid, r.heads)] : [W, W * k];
    X.set(x, i * cols);
    Xr.push(x);
  });
  return {
    block,
    splits,
    cols,
    X,
    sys: relativeSystem(
      Xr,
      rows.map((r) => r.latency_us),
    ),
  };
}

/** A class's fitted law and its training error (geo of the law, waveRowUs, over the rows fitted). */
export interface WaveFit {
  law: MlaWaveDecode;
  geo: number;
}

/**
 * max(floor, X·θ) fitted on the rows `idx` of a design (repeats allowed): θ by NNLS on the rows above the
 * floor, the floor as Σ(1/y)/Σ(1/y²) of the rows under it (the relative-error optimum of a constant), from
 * θ on every row and the floor at the rows' 5th-percentile latency, until the rows under the floor repeat
 * (≤ 30 passes). Undefined when too few rows stay above the floor.
 */
function fitMaxFloor(
  d: WaveDesign,
  y: Float64Array,
  idx: ArrayLike<number>,
  sc: FloorScratch,
): MlaWaveDecode | undefined {
  const n = idx.length;
  let theta = nnlsRelativeRows(d.sys, idx);
  const sorted = sc.sorted.subarray(0, n);
  for (let t = 0; t < n; t++) sorted[t] = y[idx[t]!]!;
  sorted.sort();
  let floor = sorted[Math.floor(0.05 * (n - 1))]!;
  const { under, above } = sc;
  for (let pass = 0; pass < 30; pass++) {
    let a = 0;
    let b = 0;
    let m = 0;
    let same = pass > 0;
    for (let t = 0; t < n; t++) {
      const i = idx[t]!;
      let lin = 0;
      for (let j = 0; j < d.cols; j++) lin += d.X[i * d.cols + j]! * theta[j]!;
      const u = lin < floor ? 1 : 0;
      if (u !== under[t]) same = false;
      under[t] = u;
      if (u) {
        a += 1 / y[i]!;
        b += 1 / (y[i]! * y[i]!);
      } else above[m++] = i;
    }
    if (m <= d.cols) return undefined;
    if (same) break;
    if (b > 0) floor = a / b;
    theta = nnlsRelativeRows(d.sys, above.subarray(0, m));
  }
  return {
    floor_us: floor,
    wave_us: theta[0]!,
    key_us: theta[1]!,
    key_head_us: d.cols === 3 ? theta[2]! : 0,
    block_heads: d.block,
    splits: d.splits,
  };
}

/** fitMaxFloor's buffers for a class (its resamples draw as many rows as it has): latencies sorted, rows under the floor, rows above. */
interface FloorScratch {
  sorted: Float64Array;
  under: Uint8Array;
  above: Uint32Array;
}

/** µs the wave law prices one kernel row at on `slots` SMs (core/laws/mla.ts, the pricer's function). */
export function waveRowUs(law: MlaWaveDecode, r: MlaRow, slots: number): number {
  const k = r.past_tokens + r.query_tokens;
  return mlaWaveDecodeUs(
    law.floor_us,
    law.wave_us,
    mlaWaveUsPerKey(law, r.heads),
    mlaWaveProgramsPerRow(law, r.heads),
    slots,
    r.batch,
    r.batch * k,
    k,
  );
}

/** exp(mean |ln(pred / measured)|) of the law over rows `idx`. */
function waveGeo(law: MlaWaveDecode, rows: readonly MlaRow[], idx: ArrayLike<number>, slots: number): number {
  let s = 0;
  for (let t = 0; t < idx.length; t++) {
    const r = rows[idx[t]!]!;
    s += Math.abs(Math.log(waveRowUs(law, r, slots) / r.latency_us));
  }
  return Math.exp(s / idx.length);
}

/** A class's fit over the grid: every (block, splits) design of its rows built once, reused by each resample. */
export interface WaveClass {
  rows: readonly MlaRow[];
  slots: number;
  designs: WaveDesign[];
  y: Float64Array;
  scratch: FloorScratch;
}

/**
 * The designs of one class (heads ≥ 2: the block grid × splits, three columns; one head: splits only, two
 * columns, block 1) over its training rows.
 */
export function waveClass(rows: readonly MlaRow[], slots: number, oneHead: boolean): WaveClass {
  const blocks = oneHead ? [1] : WAVE_BLOCKS;
  const designs = blocks.flatMap((b) => WAVE_SPLITS.map((s) => waveDesign(rows, b, s, slots, oneHead ? 2 : 3)));
  const n = rows.length;
  const scratch = { sorted: new Float64Array(n), under: new Uint8Array(n), above: new Uint32Array(n) };
  return { rows, slots, designs, y: Float64Array.from(rows, (r) => r.latency_us), scratch };
}

/**
 * The best law of a class over the rows `idx` by training geo, among every grid point or (a resample) only
 * those within a factor 2 of `near`'s block and splits. Undefined when no grid point fits.
 */
export function fitWaveClass(c: WaveClass, idx: ArrayLike<number>, near?: MlaWaveDecode): WaveFit | undefined {
  let best: WaveFit | undefined;
  for (const d of c.designs) {
    if (near && (d.block > 2 * near.block_heads || 2 * d.block < near.block_heads)) continue;
    if (near && (d.splits > 2 * near.splits || 2 * d.splits < near.splits)) continue;
    const law = fitMaxFloor(d, c.y, idx, c.scratch);
    if (!law) continue;
    const geo = waveGeo(law, c.rows, idx, c.slots);
    if (!best || geo < best.geo) best = { law, geo };
  }
  return best;
}
