/**
 * Weighted normal equations of a small least-squares system with the loops over its columns unrolled
 * into locals: one function per width, compiled once with `new Function` (issue 17). The generic
 * double loop over q ≤ 4 columns in typed arrays costs V8 a bounds check, a load and a store per term
 * (~60–90 ns a point for q = 3, measured in CPU time); locals cost ~12–16. Every accumulator sums the
 * same products in the same (point) order as the plain loop it replaces, so the results are the same
 * bits. Pure. (Tried and dropped: the same for nnlsRelative's 14–27 row-term sums, lsq.ts: slower than
 * its loop, the locals spill.)
 */

/**
 * Writes A[a·q + b] = Σ_n (w_n·x_{u,a'})·x_{u,b'} and rhs[a] = Σ_n (w_n·x_{u,a'})·t_u, u = use[n],
 * a' = cols[a], summed over n in order from 0; `x` row-major with `k` columns.
 */
export type WeightedNormalSums = (
  x: Float64Array,
  t: Float64Array,
  k: number,
  use: ArrayLike<number>,
  w: Float64Array,
  cols: Int32Array,
  A: Float64Array,
  rhs: Float64Array,
) => void;

const WEIGHTED = new Map<string, WeightedNormalSums>();

/**
 * The unrolled sums of `q` columns with each point's weight read as `w[<weight>]` (`n`: by position in
 * `use`; `u`: by point), compiled once per (q, weight).
 */
function compiled(q: number, weight: 'n' | 'u', name: string): WeightedNormalSums {
  if (!Number.isInteger(q) || q < 1 || q > 8) throw new Error(`${name}: ${q} columns (expected 1 to 8)`);
  const key = `${weight}${q}`;
  let f = WEIGHTED.get(key);
  if (!f) {
    const ix = [...Array(q).keys()];
    const ab = ix.flatMap((a) => ix.map((b) => [a, b] as const));
    const body = [
      ix.map((a) => `const c${a} = cols[${a}];`).join(' '),
      `let ${[...ix.map((a) => `r${a} = 0`), ...ab.map(([a, b]) => `a${a}_${b} = 0`)].join(', ')};`,
      'for (let n = 0; n < use.length; n++) {',
      `  const u = use[n]; const row = u * k; const wn = w[${weight}]; const tn = t[u]; let wa;`,
      `  ${ix.map((a) => `const x${a} = x[row + c${a}];`).join(' ')}`,
      ...ix.map((a) => `  wa = wn * x${a}; r${a} += wa * tn; ${ix.map((b) => `a${a}_${b} += wa * x${b};`).join(' ')}`),
      '}',
      ix.map((a) => `rhs[${a}] = r${a};`).join(' '),
      ab.map(([a, b]) => `A[${a * q + b}] = a${a}_${b};`).join(' '),
    ].join('\n');
    f = new Function('x', 't', 'k', 'use', 'w', 'cols', 'A', 'rhs', body) as WeightedNormalSums;
    WEIGHTED.set(key, f);
  }
  return f;
}

/**
 * The weighted normal equations of `q` active columns (WeightedNormalSums), compiled once per q.
 * @throws Error when q is not an integer in 1…8
 */
export function weightedNormalSums(q: number): WeightedNormalSums {
  return compiled(q, 'n', 'weightedNormalSums');
}

/**
 * WeightedNormalSums with the weights indexed by point, not by position in `use`: w_u for u = use[n]
 * (a resample's repeats share their point's weight, taken once per point).
 */
export type PointWeightedNormalSums = WeightedNormalSums;

/**
 * The weighted normal equations of `q` active columns with per-point weights (PointWeightedNormalSums):
 * A[a·q + b] = Σ_n (w_u·x_{u,a'})·x_{u,b'}, rhs[a] = Σ_n (w_u·x_{u,a'})·t_u, u = use[n], summed over n in
 * order from 0, compiled once per q; the same sums as weightedNormalSums given w'[n] = w[use[n]].
 * @throws Error when q is not an integer in 1…8
 */
export function pointWeightedNormalSums(q: number): PointWeightedNormalSums {
  return compiled(q, 'u', 'pointWeightedNormalSums');
}
