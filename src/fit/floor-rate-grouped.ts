/**
 * Bootstrap resamples of a floor + rate fit (t = floor_us + work / rate, core/laws/floor-rate.ts;
 * objective mean |ln(pred/meas)|, docs/fitting.md) on rows that share few distinct works: the HBM
 * derate's GEMM weight reads (h200: 3,168 reads over 39 distinct weight sizes). Every row of one work
 * has the same prediction p, so its group's Σ |ln p − ln t_i| is
 *   ln p·(c_below − c_above) − S_below + S_above
 * with c and S the drawn rows' counts and Σ ln t below and above ln p, read from prefix sums over the
 * group's latencies sorted once: one log and one binary search per distinct work per objective
 * evaluation instead of a pass over the resample's rows. Reassociated sums: equal to searchLogL1 to
 * rounding, not bit for bit (docs/performance.md, session 9).
 */
import { gssMinimize2 } from '../core/numeric/minimize.ts';
import { BOOTSTRAP_SEARCH, type ResampleFitter } from './attention.ts';
import type { PackedRows } from './attention-decode-law.ts';

/** The source rows sorted by (work group, ln latency), with each group's range and work. */
interface Sorted {
  /** Position of source row j in the sorted order. */
  pos: Uint32Array;
  lnLat: Float64Array;
  /** Group g covers sorted positions [start[g], start[g + 1]). */
  start: Uint32Array;
  work: Float64Array;
}

function sortRows(src: PackedRows): Sorted {
  const n = src.work.length;
  const groupOf = new Map<number, number>();
  const group = new Uint32Array(n);
  for (let j = 0; j < n; j++) {
    let g = groupOf.get(src.work[j]!);
    if (g === undefined) {
      g = groupOf.size;
      groupOf.set(src.work[j]!, g);
    }
    group[j] = g;
  }
  const order = Array.from({ length: n }, (_, j) => j).sort(
    (a, b) => group[a]! - group[b]! || src.lnLat[a]! - src.lnLat[b]! || a - b,
  );
  const pos = new Uint32Array(n);
  const start = new Uint32Array(groupOf.size + 1);
  order.forEach((j, p) => {
    pos[j] = p;
    start[group[j]! + 1] = p + 1;
  });
  return { pos, lnLat: Float64Array.from(order, (j) => src.lnLat[j]!), start, work: Float64Array.from(groupOf.keys()) };
}

/** One resample's drawn rows per sorted position, compacted: ln t, and prefix counts and sums of ln t. */
interface Drawn {
  lnLat: Float64Array;
  /** cum[q] = rows (sum[q] = Σ ln t) over compacted entries before q. */
  cum: Float64Array;
  sum: Float64Array;
  /** Group g covers compacted entries [start[g], start[g + 1]). */
  start: Uint32Array;
  /** Per group, where its previous evaluation's split fell (groupedLogL1 starts the next one there). */
  at: Uint32Array;
}

function draw(s: Sorted, idx: Uint32Array, count: Float64Array, d: Drawn): void {
  count.fill(0);
  for (let i = 0; i < idx.length; i++) count[s.pos[idx[i]!]!]!++;
  let q = 0;
  for (let g = 0; g + 1 < s.start.length; g++) {
    d.start[g] = q;
    for (let p = s.start[g]!; p < s.start[g + 1]!; p++) {
      const c = count[p]!;
      if (c === 0) continue;
      d.lnLat[q] = s.lnLat[p]!;
      d.cum[q + 1] = d.cum[q]! + c;
      d.sum[q + 1] = d.sum[q]! + c * s.lnLat[p]!;
      q++;
    }
  }
  d.start[s.start.length - 1] = q;
  d.at.set(d.start.subarray(0, d.at.length));
}

/** Σ over drawn rows of |ln(floor_us + work·(1/rate)) − ln t|, divided by the rows drawn. */
function groupedLogL1(s: Sorted, d: Drawn, rows: number, floor_us: number, rate: number): number {
  const inv = 1 / rate;
  let t = 0;
  for (let g = 0; g < s.work.length; g++) {
    const a = d.start[g]!;
    const b = d.start[g + 1]!;
    if (a === b) continue;
    const lp = Math.log(floor_us + s.work[g]! * inv);
    // The split: the first entry with ln t ≥ lp (every entry below it has ln t < lp), found by walking
    // from the previous evaluation's split (a search moves lp little between polls): the same index
    // a binary search finds, in ~1 step instead of ~6 mispredicted ones (a NaN lp walks down to a,
    // as the binary search ends there).
    let lo = d.at[g]!;
    while (lo > a && !(d.lnLat[lo - 1]! < lp)) lo--;
    while (lo < b && d.lnLat[lo]! < lp) lo++;
    d.at[g] = lo;
    const below = d.cum[lo]! - d.cum[a]!;
    const above = d.cum[b]! - d.cum[lo]!;
    t += lp * (below - above) - (d.sum[lo]! - d.sum[a]!) + (d.sum[b]! - d.sum[lo]!);
  }
  return t / rows;
}

/**
 * A bootstrapFloorRate resample fitter (src/fit/attention.ts) for rows with repeated works: the same
 * warm generating-set search as its default (BOOTSTRAP_SEARCH, from `at`), on the grouped objective.
 * The sorted source is built on the first call and kept for later calls with the same `src`.
 */
export function groupedWarmFit(): ResampleFitter {
  let sorted: Sorted | undefined;
  let of: PackedRows | undefined;
  let count = new Float64Array(0);
  let d: Drawn | undefined;
  return (src, idx, at) => {
    if (of !== src || !sorted || !d) {
      sorted = sortRows(src);
      of = src;
      const n = src.work.length;
      count = new Float64Array(n);
      d = {
        lnLat: new Float64Array(n),
        cum: new Float64Array(n + 1),
        sum: new Float64Array(n + 1),
        start: new Uint32Array(sorted.start.length),
        at: new Uint32Array(sorted.start.length - 1),
      };
    }
    const [s, dr] = [sorted, d];
    draw(s, idx, count, dr);
    const r = gssMinimize2(
      (lnFloor, lnRate) => groupedLogL1(s, dr, idx.length, Math.exp(lnFloor), Math.exp(lnRate)),
      [Math.log(at[0]), Math.log(at[1])],
      BOOTSTRAP_SEARCH.step0,
      BOOTSTRAP_SEARCH,
    );
    return { floor_us: Math.exp(r.x[0]!), rate: Math.exp(r.x[1]!) };
  };
}
