/**
 * Noise is not a refusal (issue 15 item 3): collective floors must not fall as ranks grow (seed
 * "Collectives": a wider group never synchronises faster), but a measured floor is a minimum of a
 * few noisy latencies. An inversion within the measured repeat noise is repaired by isotonic
 * regression (pool-adjacent-violators, equal weights: the pooled floors take their mean), recorded
 * in each repaired entry's evidence; only an inversion beyond noise refuses, and then only the
 * wider curve (the one whose floor fell).
 *
 * Repeat noise of one floor (a ratio, dimensionless): (second-smallest − smallest) / smallest of the
 * latencies at messages ≤ 4 KiB (`CurveFit.t0_ci95`), the spread of the repeats that define it. The
 * tolerance of an inversion between two widths is the larger of their two noises. Pure.
 */
import type { CurveFit } from './collective-curve.ts';

/** What isotonic repair needs of a curve. */
export interface FloorCurve {
  op: string;
  dtype: string;
  ranks: number;
  backend: string;
  fit: CurveFit;
}

/** One repaired or refused inversion. */
export interface FloorRepair {
  op: string;
  dtype: string;
  /** Widths pooled (repaired) or the wider width refused. */
  ranks: number[];
  /** Relative inversion (floor(narrow) − floor(wide)) / floor(narrow). */
  inversion: number;
  /** The larger measured repeat noise of the two floors (the tolerance). */
  tolerance: number;
  status: 'repaired' | 'refused';
  /** Floors before and after, µs, by width. */
  before_us: number[];
  after_us: number[];
  note: string;
}

/** Measured repeat noise of a floor (module comment); 0 with a single small message. */
export function floorNoise(fit: Pick<CurveFit, 't0_us' | 't0_ci95'>): number {
  return fit.t0_us > 0 ? (fit.t0_ci95[1] - fit.t0_ci95[0]) / fit.t0_us : 0;
}

const pct = (x: number) => `${(100 * x).toFixed(2)}%`;

/**
 * Repair or refuse floor inversions within each (op, dtype) of `curves`, in place on `fit.t0_us`
 * (and `t0_ci95`, widened to contain the pooled value). @returns one record per inversion and the
 * curves refused (to leave out of the registry).
 */
export function repairFloorInversions<C extends FloorCurve>(
  curves: readonly C[],
): { repairs: FloorRepair[]; refused: C[] } {
  const repairs: FloorRepair[] = [];
  const refused: C[] = [];
  const groups = new Map<string, C[]>();
  for (const c of curves) groups.set(`${c.op}|${c.dtype}`, [...(groups.get(`${c.op}|${c.dtype}`) ?? []), c]);
  for (const list of groups.values()) {
    let s = [...list].sort((a, b) => a.ranks - b.ranks);
    // Refuse beyond-noise inversions first (the wider curve), then pool what remains.
    for (let i = 1; i < s.length; i++) {
      const a = s[i - 1]!;
      const b = s[i]!;
      const inv = (a.fit.t0_us - b.fit.t0_us) / a.fit.t0_us;
      const tol = Math.max(floorNoise(a.fit), floorNoise(b.fit));
      if (inv > tol) {
        refused.push(b);
        repairs.push(record(a, b, inv, tol, 'refused', [a.fit.t0_us, b.fit.t0_us], [a.fit.t0_us, b.fit.t0_us]));
        s = s.filter((x) => x !== b);
        i--;
      }
    }
    repairs.push(...pool(s));
  }
  return { repairs, refused };
}

/** Pool-adjacent-violators over floors sorted by width; each pooled block takes its mean. */
function pool<C extends FloorCurve>(s: C[]): FloorRepair[] {
  const blocks: Array<{ members: C[]; mean: number }> = [];
  for (const c of s) {
    blocks.push({ members: [c], mean: c.fit.t0_us });
    while (blocks.length > 1 && blocks[blocks.length - 2]!.mean > blocks[blocks.length - 1]!.mean) {
      const b = blocks.pop()!;
      const a = blocks.pop()!;
      const members = [...a.members, ...b.members];
      blocks.push({ members, mean: members.reduce((t, m) => t + m.fit.t0_us, 0) / members.length });
    }
  }
  const out: FloorRepair[] = [];
  for (const b of blocks) {
    if (b.members.length < 2) continue;
    const m = b.members;
    const before = m.map((c) => c.fit.t0_us);
    const inv = Math.max(...before.slice(0, -1).map((x, i) => (x - before[i + 1]!) / x));
    const tol = Math.max(...m.map((c) => floorNoise(c.fit)));
    for (const c of m) {
      c.fit.t0_us = b.mean;
      c.fit.t0_ci95 = [Math.min(c.fit.t0_ci95[0], b.mean), Math.max(c.fit.t0_ci95[1], b.mean)];
    }
    out.push(
      record(
        m[0]!,
        m[m.length - 1]!,
        inv,
        tol,
        'repaired',
        before,
        m.map(() => b.mean),
        m,
      ),
    );
  }
  return out;
}

function record<C extends FloorCurve>(
  a: C,
  b: C,
  inversion: number,
  tolerance: number,
  status: FloorRepair['status'],
  before_us: number[],
  after_us: number[],
  members: readonly C[] = [a, b],
): FloorRepair {
  const widths = members.map((c) => c.ranks);
  const f = (x: number) => +x.toPrecision(4);
  const note =
    status === 'repaired'
      ? `${a.op} ${a.dtype} floors at ${widths.join('/')} ranks (${before_us.map(f).join(' / ')} µs) fell by ${pct(inversion)} as ranks grew, within the measured repeat noise ${pct(tolerance)}: pooled by isotonic regression to ${f(after_us[0]!)} µs`
      : `${a.op} ${a.dtype} ${b.ranks}-rank floor ${f(b.fit.t0_us)} µs is ${pct(inversion)} below the ${a.ranks}-rank floor ${f(a.fit.t0_us)} µs (${a.ranks}-rank ${a.backend} > ${b.ranks}-rank ${b.backend}), beyond the measured repeat noise ${pct(tolerance)}: the ${b.ranks}-rank curve is refused`;
  return { op: a.op, dtype: a.dtype, ranks: widths, inversion, tolerance, status, before_us, after_us, note };
}
