/**
 * Non-negative linear least squares on relative error, for laws that are sums of non-negative terms
 * (floor + work / rate; a prefill form's fixed + per-request + per-token + bytes / rate). Pure, exact.
 *
 * minimise Σ_i ((x_i · β − y_i) / y_i)² subject to β ≥ 0, by solving the normal equations on every
 * subset of free coefficients (the others pinned at 0) and keeping the best feasible one: exact NNLS
 * for the ≤ 6 coefficients these laws have.
 */

/** Solve the square system A·x = b by Gaussian elimination with partial pivoting; undefined when singular. */
export function solveLinear(A: number[][], b: number[]): number[] | undefined {
  const n = b.length;
  const M = A.map((row, i) => [...row, b[i]!]);
  for (let c = 0; c < n; c++) {
    let p = c;
    for (let r = c + 1; r < n; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[p]![c]!)) p = r;
    const piv = M[p]![c]!;
    if (!(Math.abs(piv) > 1e-300)) return undefined;
    [M[c], M[p]] = [M[p]!, M[c]!];
    for (let r = 0; r < n; r++) {
      if (r === c) continue;
      const f = M[r]![c]! / piv;
      for (let k = c; k <= n; k++) M[r]![k]! -= f * M[c]![k]!;
    }
  }
  return M.map((row, i) => row[n]! / row[i]!);
}

/**
 * solveLinear on the subsystem of G (p×p, row-major) and h over the `nf` indices `free`, with the
 * same arithmetic (partial pivoting, the same eliminations in the same order) in the reused buffer
 * `M` (room for nf × (nf + 1)); the solution goes to `out`. Returns false when solveLinear would
 * return undefined (a pivot ≤ 1e-300) or a component is negative, NaN or infinite (nnlsRelative skips it).
 */
function solveSubset(
  G: Float64Array,
  h: Float64Array,
  p: number,
  free: Int32Array,
  nf: number,
  M: Float64Array,
  out: Float64Array,
): boolean {
  const w = nf + 1;
  for (let i = 0; i < nf; i++) {
    for (let j = 0; j < nf; j++) M[i * w + j] = G[free[i]! * p + free[j]!]!;
    M[i * w + nf] = h[free[i]!]!;
  }
  for (let c = 0; c < nf; c++) {
    let q = c;
    for (let r = c + 1; r < nf; r++) if (Math.abs(M[r * w + c]!) > Math.abs(M[q * w + c]!)) q = r;
    const piv = M[q * w + c]!;
    if (!(Math.abs(piv) > 1e-300)) return false;
    if (q !== c)
      for (let j = 0; j < w; j++) {
        const t = M[c * w + j]!;
        M[c * w + j] = M[q * w + j]!;
        M[q * w + j] = t;
      }
    for (let r = 0; r < nf; r++) {
      if (r === c) continue;
      const f = M[r * w + c]! / piv;
      for (let j = c; j < w; j++) M[r * w + j] = M[r * w + j]! - f * M[c * w + j]!;
    }
  }
  for (let i = 0; i < nf; i++) {
    const v = M[i * w + nf]! / M[i * w + i]!;
    if (!(v >= 0) || !Number.isFinite(v)) return false;
    out[i] = v;
  }
  return true;
}

/**
 * One relative least-squares system's per-row terms: for row i (weight w = 1/y_i), the products
 * ((x_a·x_b)·w)·w of the upper triangle a ≤ b, then x_a·w, `stride` numbers a row. The normal
 * equations of any subset of rows are sums of these in row order: the same numbers, in the same
 * order, as accumulating them from X and y, so each bootstrap resample only adds.
 */
export interface RelativeSystem {
  p: number;
  n: number;
  stride: number;
  terms: Float64Array;
}

/**
 * The per-row terms of the scaled system (X_i / y_i) β ≈ 1 (nnlsRelative), computed once.
 * @throws Error when p is not 1 to 6
 */
export function relativeSystem(X: readonly (readonly number[])[], y: readonly number[]): RelativeSystem {
  const p = X[0]?.length ?? 0;
  if (p < 1 || p > 6) throw new Error(`nnlsRelative: ${p} coefficients (expected 1 to 6)`);
  const stride = (p * (p + 1)) / 2 + p;
  const terms = new Float64Array(y.length * stride);
  for (let i = 0; i < y.length; i++) {
    const w = 1 / y[i]!;
    const xi = X[i]!;
    let o = i * stride;
    for (let a = 0; a < p; a++) for (let b = a; b < p; b++) terms[o++] = xi[a]! * xi[b]! * w * w;
    for (let a = 0; a < p; a++) terms[o++] = xi[a]! * w;
  }
  return { p, n: y.length, stride, terms };
}

/**
 * β ≥ 0 minimising the summed squared relative error of X·β against y (nnlsRelativeRows over `idx`).
 * @param X design rows (one per measurement, p ≤ 6 columns, non-negative work counts), or their
 *   `relativeSystem` (then `y` is unused: pass the same y)
 * @param y measured values (> 0)
 * @param idx optional row indices to use (a bootstrap resample); default every row
 * @returns the coefficients, length p (0 for a pinned one)
 * @throws Error when p > 6 or no subset gives a finite solution
 */
export function nnlsRelative(
  X: readonly (readonly number[])[] | RelativeSystem,
  y: readonly number[],
  idx?: ArrayLike<number>,
): number[] {
  const sys = 'terms' in X ? X : relativeSystem(X, y);
  return nnlsRelativeRows(sys, idx ?? Array.from({ length: sys.n }, (_, i) => i));
}

/**
 * Into `acc` (length sys.stride): the sums over `rows` (in order) of each row's terms, acc[k] = Σ_t
 * terms[rows[t]·stride + k], bit for bit the sums of the plain loop over rows and terms: each k's sum adds the same
 * numbers in the same order from 0. The terms are summed eight (then four, then the rest) at a time in
 * locals, one pass over the rows per block (issue 17: the loop that loads and stores acc[k] per term was most of a bootstrap fit).
 */
export function sumRelativeTerms(sys: RelativeSystem, rows: ArrayLike<number>, acc: Float64Array): void {
  const { stride } = sys;
  let k0 = 0;
  for (; k0 + 8 <= stride; k0 += 8) sumEight(sys, rows, k0, acc);
  if (k0 + 4 <= stride) {
    sumFour(sys, rows, k0, acc);
    k0 += 4;
  }
  if (k0 < stride) sumTail(sys, rows, k0, acc);
}

/** sumRelativeTerms for terms k0 … k0 + 7, in locals. */
function sumEight(sys: RelativeSystem, rows: ArrayLike<number>, k0: number, acc: Float64Array): void {
  const { stride, terms } = sys;
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  let a3 = 0;
  let a4 = 0;
  let a5 = 0;
  let a6 = 0;
  let a7 = 0;
  for (let t = 0; t < rows.length; t++) {
    const o = rows[t]! * stride + k0;
    a0 += terms[o]!;
    a1 += terms[o + 1]!;
    a2 += terms[o + 2]!;
    a3 += terms[o + 3]!;
    a4 += terms[o + 4]!;
    a5 += terms[o + 5]!;
    a6 += terms[o + 6]!;
    a7 += terms[o + 7]!;
  }
  acc[k0] = a0;
  acc[k0 + 1] = a1;
  acc[k0 + 2] = a2;
  acc[k0 + 3] = a3;
  acc[k0 + 4] = a4;
  acc[k0 + 5] = a5;
  acc[k0 + 6] = a6;
  acc[k0 + 7] = a7;
}

/** sumRelativeTerms for terms k0 … k0 + 3, in locals. */
function sumFour(sys: RelativeSystem, rows: ArrayLike<number>, k0: number, acc: Float64Array): void {
  const { stride, terms } = sys;
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  let a3 = 0;
  for (let t = 0; t < rows.length; t++) {
    const o = rows[t]! * stride + k0;
    a0 += terms[o]!;
    a1 += terms[o + 1]!;
    a2 += terms[o + 2]!;
    a3 += terms[o + 3]!;
  }
  acc[k0] = a0;
  acc[k0 + 1] = a1;
  acc[k0 + 2] = a2;
  acc[k0 + 3] = a3;
}

/** sumRelativeTerms for the last one to three terms, k0 … stride − 1, in locals. */
function sumTail(sys: RelativeSystem, rows: ArrayLike<number>, k0: number, acc: Float64Array): void {
  const { stride, terms } = sys;
  const m = stride - k0;
  let a0 = 0;
  let a1 = 0;
  let a2 = 0;
  for (let t = 0; t < rows.length; t++) {
    const o = rows[t]! * stride + k0;
    a0 += terms[o]!;
    if (m > 1) a1 += terms[o + 1]!;
    if (m > 2) a2 += terms[o + 2]!;
  }
  acc[k0] = a0;
  if (m > 1) acc[k0 + 1] = a1;
  if (m > 2) acc[k0 + 2] = a2;
}

/**
 * β ≥ 0 minimising the summed squared relative error over the rows `rows` of a RelativeSystem (every
 * row, or a bootstrap resample; nnlsRelative's solve): the normal equations of the scaled system
 * (X_i / y_i) β ≈ 1 summed by sumRelativeTerms (the upper triangle in (a, b ≥ a) order, then h; a·b = b·a
 * exactly, so the mirror is bit-identical to the full sum), then every subset of free coefficients solved
 * in place in reused buffers (solveSubset: solveLinear's arithmetic, without its arrays); the lowest SSE wins.
 * @returns the coefficients, length p (0 for a pinned one)
 * @throws Error when no subset gives a finite solution
 */
export function nnlsRelativeRows(sys: RelativeSystem, rows: ArrayLike<number>): number[] {
  const { p } = sys;
  // One set of buffers for every call (p ≤ 6, relativeSystem; no call re-enters): a bootstrap solves this
  // thousands of times, and seven typed arrays per solve were most of what the fits allocated here.
  const { acc, G, h, free, M, sol, beta, best } = NNLS_SCRATCH;
  sumRelativeTerms(sys, rows, acc);
  let k = 0;
  for (let a = 0; a < p; a++) for (let b = a; b < p; b++) G[a * p + b] = G[b * p + a] = acc[k++]!;
  for (let a = 0; a < p; a++) h[a] = acc[k + a]!;
  let found = false;
  let bestSse = Infinity;
  for (let mask = 1; mask < 1 << p; mask++) {
    let nf = 0;
    for (let a = 0; a < p; a++) if (mask & (1 << a)) free[nf++] = a;
    if (!solveSubset(G, h, p, free, nf, M, sol)) continue;
    beta.fill(0, 0, p);
    for (let j = 0; j < nf; j++) beta[free[j]!] = sol[j]!;
    // SSE = n − 2 βᵀh + βᵀGβ (the scaled targets are all 1).
    let sse = rows.length;
    for (let a = 0; a < p; a++) {
      sse -= 2 * beta[a]! * h[a]!;
      for (let b = 0; b < p; b++) sse += beta[a]! * G[a * p + b]! * beta[b]!;
    }
    if (!found || sse < bestSse - 1e-12 * Math.abs(bestSse)) {
      bestSse = sse;
      found = true;
      best.set(beta.subarray(0, p));
    }
  }
  if (!found) throw new Error('nnlsRelative: no finite non-negative solution');
  return Array.from(best.subarray(0, p));
}

/** nnlsRelativeRows' buffers, sized for its largest system (6 coefficients: stride 27). */
const NNLS_SCRATCH = {
  acc: new Float64Array(27),
  G: new Float64Array(36),
  h: new Float64Array(6),
  free: new Int32Array(6),
  M: new Float64Array(42),
  sol: new Float64Array(6),
  beta: new Float64Array(6),
  best: new Float64Array(6),
};
