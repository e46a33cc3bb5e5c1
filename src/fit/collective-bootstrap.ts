/**
 * The collective bootstrap's r_t search, shared across the resamples of one curve (issue 17: the
 * collective fit's cost). Each resample's r_t is the one `fitTransitionRate(pts, t0, r_peak, idx)`
 * finds, bit for bit: the same candidates (bracket ends, log grid, the drawn points' kinks), sorted
 * with repeats dropped; the same grid-then-golden-section search (gridGoldenMin's steps written out);
 * every objective value the same sum of the same terms in idx order. What is shared:
 *
 * - every candidate's per-point terms, taken once per curve and laid out point-major, so one pass
 *   over idx adds each drawn point's row to every candidate's sum (each sum still runs in idx order);
 * - the golden-section points: a search's points follow from its starting bracket and the outcome of
 *   each comparison, so the searches of one curve form a tree (most resamples start from a few
 *   brackets and walk the same first steps); each node keeps the terms of the points evaluated there,
 *   so a point's |ln ratio| at that L is taken once per curve instead of once per resample.
 *
 * Units: message_bytes bytes, latency µs, L = ln(r_t) with r_t in bytes per µs. No I/O, no clock.
 */
import { collectiveUs } from '../core/laws/collective.ts';

/** A curve point as the search reads it (collective-curve.ts CurvePoint). */
interface Point {
  message_bytes: number;
  latency_us: number;
}

/** Lower end of the r_t search bracket, as a fraction of r_peak. */
export const R_T_BRACKET_LOW = 1e-4;
/** Grid points of the r_t bracket (ln units), besides its two ends. */
const R_T_GRID = 48;

/**
 * The r_t search's candidates in ln units (fitTransitionRate): the bracket [ln(r_peak·1e-4), ln r_peak],
 * its ends then the 47 inner points of a 48-step grid in `grid`, and each point's kink
 * ln(b/(m − t0)) (NaN when outside the open bracket or the point is at or below t0).
 */
export function candidateGrid(
  t0_us: number,
  r_peak: number,
  pts: ReadonlyArray<Point>,
): { loL: number; hiL: number; grid: number[]; kink: Float64Array } {
  const hiL = Math.log(r_peak);
  const loL = Math.log(r_peak * R_T_BRACKET_LOW);
  const grid = [loL, hiL];
  for (let i = 1; i < R_T_GRID; i++) grid.push(loL + ((hiL - loL) * i) / R_T_GRID);
  const kink = Float64Array.from(pts, (p) => {
    if (!(p.latency_us > t0_us)) return NaN;
    const L = Math.log(p.message_bytes / (p.latency_us - t0_us));
    return L > loL && L < hiL ? L : NaN;
  });
  return { loL, hiL, grid, kink };
}

/** gridGoldenMin's defaults, as fitTransitionRate calls it. */
const GOLDEN_ITERATIONS = 60;
const GOLDEN_TOL = 1e-10;
const PHI = (Math.sqrt(5) - 1) / 2;
/** Tree nodes per storage chunk (each chunk holds NODE_CHUNK rows of the curve's point count). */
const NODE_CHUNK = 256;
/** Slots of the golden-section state in ResampleRateSearch.gs: bracket a, b; points c, d; f(c), f(d). */
const A = 0;
const B = 1;
const C = 2;
const D = 3;
const FC = 4;
const FD = 5;

/** |ln(t(b)/meas)| of the law at r_t with t0 and r_peak fixed, as collectiveObjective takes it. */
const term = (bytes: number, meas_us: number, t0_us: number, r_t: number, r_peak: number) =>
  Math.abs(Math.log(collectiveUs(bytes, t0_us, r_t, r_peak) / meas_us));

/**
 * One curve's bootstrap search state: candidates, the golden-section tree and per-resample scratch.
 * `rate(idx)` fits one resample.
 */
export class ResampleRateSearch {
  private readonly n: number;
  private readonly t0: number;
  private readonly rPeak: number;
  private readonly bytes: Float64Array;
  private readonly meas: Float64Array;
  /** Every candidate L, ascending (equal values kept; each resample drops its repeats). */
  private readonly candL: Float64Array;
  /** The point whose kink each candidate is, −1 for the bracket ends and grid (always candidates). */
  private readonly owner: Int32Array;
  /** Terms point-major: candTerms[i·M + c] is point i's term at candidate c. */
  private readonly candTerms: Float64Array;
  private readonly sums: Float64Array;
  private readonly seen: Uint8Array;
  private readonly used: Int32Array;
  private nUsed = 0;
  /** Golden-section tree: roots by starting bracket (candidate indices), two children per node, term rows. */
  private readonly roots = new Map<number, number>();
  private readonly children: number[] = [];
  private readonly chunks: Float64Array[] = [];
  private readonly gs = new Float64Array(6);

  constructor(pts: ReadonlyArray<Point>, t0_us: number, r_peak: number) {
    const n = pts.length;
    this.n = n;
    this.t0 = t0_us;
    this.rPeak = r_peak;
    this.bytes = Float64Array.from(pts, (p) => p.message_bytes);
    this.meas = Float64Array.from(pts, (p) => p.latency_us);
    const { grid, kink } = candidateGrid(t0_us, r_peak, pts);
    const cands: { L: number; owner: number }[] = grid.map((L) => ({ L, owner: -1 }));
    for (let i = 0; i < n; i++) if (!Number.isNaN(kink[i]!)) cands.push({ L: kink[i]!, owner: i });
    cands.sort((a, b) => a.L - b.L);
    const m = cands.length;
    this.candL = Float64Array.from(cands, (c) => c.L);
    this.owner = Int32Array.from(cands, (c) => c.owner);
    this.candTerms = new Float64Array(n * m);
    for (let c = 0; c < m; c++) {
      const r_t = Math.exp(this.candL[c]!);
      for (let i = 0; i < n; i++) this.candTerms[i * m + c] = term(this.bytes[i]!, this.meas[i]!, t0_us, r_t, r_peak);
    }
    this.sums = new Float64Array(m);
    this.seen = new Uint8Array(n);
    this.used = new Int32Array(n);
  }

  /**
   * r_t of the resample `idx` (indices into the curve's points), as fitTransitionRate gives it, or
   * undefined when no drawn message is above `smallBytes` (no rate identified).
   */
  rate(idx: ArrayLike<number>, smallBytes: number): number | undefined {
    if (!this.draw(idx, smallBytes)) return undefined;
    this.sumCandidates(idx);
    const { k, a, b } = this.bestCandidate();
    let bestX = this.candL[k]!;
    let bestF = this.sums[k]! / idx.length;
    this.golden(idx, a, b);
    const g = this.gs;
    if (g[FC]! < bestF) {
      bestF = g[FC]!;
      bestX = g[C]!;
    }
    if (g[FD]! < bestF) bestX = g[D]!;
    return Math.min(Math.exp(bestX), this.rPeak);
  }

  /** Mark the drawn points (first-seen order in `used`); whether any is above `smallBytes`. */
  private draw(idx: ArrayLike<number>, smallBytes: number): boolean {
    this.seen.fill(0);
    let any = false;
    let m = 0;
    for (let j = 0; j < idx.length; j++) {
      const i = idx[j]!;
      if (this.bytes[i]! > smallBytes) any = true;
      if (this.seen[i]) continue;
      this.seen[i] = 1;
      this.used[m++] = i;
    }
    this.nUsed = m;
    return any;
  }

  /** Every candidate's sum of terms over idx, each added in idx order (one pass per drawn point's row). */
  private sumCandidates(idx: ArrayLike<number>): void {
    const m = this.candL.length;
    const sums = this.sums;
    const t = this.candTerms;
    sums.fill(0);
    for (let j = 0; j < idx.length; j++) {
      const row = idx[j]! * m;
      for (let c = 0; c < m; c++) sums[c] = sums[c]! + t[row + c]!;
    }
  }

  /**
   * This resample's candidates (bracket ends and grid, drawn points' kinks; equal values once, the
   * first kept): the first with the least sum (k) and its neighbours among them (a, b; k itself at
   * an end), as candidate indices.
   */
  private bestCandidate(): { k: number; a: number; b: number } {
    const L = this.candL;
    let k = -1;
    let a = -1;
    let b = -1;
    let prev = -1;
    for (let c = 0; c < L.length; c++) {
      const o = this.owner[c]!;
      if (o >= 0 && !this.seen[o]) continue;
      if (prev >= 0 && L[c] === L[prev]) continue;
      if (k >= 0 && b < 0) b = c;
      if (k < 0 || this.sums[c]! < this.sums[k]!) {
        k = c;
        a = prev < 0 ? c : prev;
        b = -1;
      }
      prev = c;
    }
    return { k, a, b: b < 0 ? k : b };
  }

  /**
   * gridGoldenMin's golden-section steps between candidates a and b, on the tree; its last two
   * points and their values are left in `gs` (C, FC, D, FD). The search's numbers live in `gs`, a
   * typed array, so no call passes or returns a double (each would be a heap number).
   */
  private golden(idx: ArrayLike<number>, ia: number, ib: number): void {
    const g = this.gs;
    g[A] = this.candL[ia]!;
    g[B] = this.candL[ib]!;
    g[C] = g[B]! - PHI * (g[B]! - g[A]!);
    g[D] = g[A]! + PHI * (g[B]! - g[A]!);
    const key = ia * this.candL.length + ib;
    let node = this.roots.get(key);
    if (node === undefined) {
      node = this.newNode();
      this.roots.set(key, node);
    }
    this.objective(node, C, FC, idx);
    node = this.child(node, 0);
    this.objective(node, D, FD, idx);
    for (let it = 0; it < GOLDEN_ITERATIONS && g[B]! - g[A]! > GOLDEN_TOL; it++) {
      if (g[FC]! <= g[FD]!) {
        g[B] = g[D]!;
        g[D] = g[C]!;
        g[FD] = g[FC]!;
        g[C] = g[B]! - PHI * (g[B]! - g[A]!);
        node = this.child(node, 0);
        this.objective(node, C, FC, idx);
      } else {
        g[A] = g[C]!;
        g[C] = g[D]!;
        g[FC] = g[FD]!;
        g[D] = g[A]! + PHI * (g[B]! - g[A]!);
        node = this.child(node, 1);
        this.objective(node, D, FD, idx);
      }
    }
  }

  /** The tree node after `node` on `branch` (0: fc ≤ fd, 1: otherwise), made on first use. */
  private child(node: number, branch: 0 | 1): number {
    let next = this.children[2 * node + branch]!;
    if (next < 0) {
      next = this.newNode();
      this.children[2 * node + branch] = next;
    }
    return next;
  }

  private newNode(): number {
    const node = this.children.length >> 1; // an int (Smi), as the children array's elements stay
    this.children.push(-1, -1);
    if (node % NODE_CHUNK === 0) this.chunks.push(new Float64Array(NODE_CHUNK * this.n).fill(-1));
    return node;
  }

  /**
   * The mean term over idx at L = gs[at_], the golden point of `node`, into gs[out]: the drawn points'
   * terms not yet taken at this node are taken (−1 marks one not taken; a term is ≥ 0), then summed
   * in idx order.
   */
  private objective(node: number, at_: number, out: number, idx: ArrayLike<number>): void {
    const row = this.chunks[(node / NODE_CHUNK) | 0]!;
    const at = (node % NODE_CHUNK) * this.n;
    const r_t = Math.exp(this.gs[at_]!);
    for (let u = 0; u < this.nUsed; u++) {
      const i = this.used[u]!;
      if (!(row[at + i]! < 0)) continue;
      row[at + i] = term(this.bytes[i]!, this.meas[i]!, this.t0, r_t, this.rPeak);
    }
    let s = 0;
    for (let j = 0; j < idx.length; j++) s += row[at + idx[j]!]!;
    this.gs[out] = s / idx.length;
  }
}
