/**
 * The host fit's least squares (src/validate/hostfit.ts) against ml-matrix doing the same job, on a
 * fold's size: 365 training rows × 4 identified host columns (tier (b) over both Splitwise chips), 37 targets
 * (one per trial of a fold's s search, which share the design). Issue 11 asked for ml-matrix here;
 * issue 17's validate goal (≤ 2 s) made a fold's solves a hot path, and a library slower than our
 * code must not sit on one unless a benchmark says so. Prints µs per fold for each and whether β is
 * identical.
 * - solve: ml-matrix `QrDecomposition(A).solve(columnVector(y))` per target, vs `solveLeastSquares`
 *   (ml-matrix's factors once, then its Householder operations per target in plain arrays);
 * - identified columns: the residual of each candidate column on the admitted ones by ml-matrix's QR
 *   (what hostfit did before), vs `identifiedColumns` (twice-orthogonalised Gram–Schmidt); the design
 *   holds one column collinear with the constant, which both must refuse.
 */
import { Matrix, QrDecomposition } from 'ml-matrix';
import { seededRandom } from '../src/core/numeric/stats.ts';
import { identifiedColumns, solveLeastSquares } from '../src/validate/hostfit.ts';

const ROWS = 365;
const TARGETS = 37;

function timeUs(f: () => unknown, reps: number): number {
  for (let i = 0; i < Math.min(reps, 20); i++) f();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) f();
  return ((performance.now() - t0) * 1000) / reps;
}

/**
 * Identified columns as hostfit computed them before (main 7290c25): a column is admitted when its
 * least-squares residual on the admitted columns, by ml-matrix's QR, keeps more than 1e-9 of its norm.
 */
function identifiedByQr(X: number[][]): boolean[] {
  const ok: boolean[] = [];
  const admitted: number[] = [];
  for (let c = 0; c < (X[0]?.length ?? 0); c++) {
    const v = X.map((r) => r[c]!);
    const norm0 = v.every(Number.isFinite) ? Math.hypot(...v) : 0;
    let kept = norm0 > 0;
    if (kept && admitted.length) {
      const A = new Matrix(X.map((r) => admitted.map((k) => r[k]!)));
      const y = Matrix.columnVector(v);
      kept = Matrix.sub(y, A.mmul(new QrDecomposition(A).solve(y))).norm() > 1e-9 * norm0;
    }
    if (kept) admitted.push(c);
    ok.push(kept);
  }
  return ok;
}

export default async function bench(): Promise<void> {
  const rand = seededRandom(11);
  // Five candidate columns, the fourth a multiple of the first (refused); the solve gets the other four.
  const Xid = Array.from({ length: ROWS }, () => [1, 1 + 60 * rand(), 900 * rand(), 80, 80 * (1 + rand())]);
  const X = Xid.map((r) => [r[0]!, r[1]!, r[2]!, r[4]!]);
  const ys = Array.from({ length: TARGETS }, () => X.map((r) => 30 + 0.5 * r[1]! + 0.02 * r[2]! + 5 * rand()));
  const lib = () => {
    const qr = new QrDecomposition(new Matrix(X));
    return ys.map((y) => qr.solve(Matrix.columnVector(y)).getColumn(0));
  };
  const ours = () => {
    const cache = new Map();
    return ys.map((y) => solveLeastSquares(() => X, y, cache));
  };
  const same = JSON.stringify(lib()) === JSON.stringify(ours());
  const tl = timeUs(lib, 200);
  const to = timeUs(ours, 200);
  process.stdout.write(
    `  solve (${ROWS}×4, ${TARGETS} targets)   ml-matrix ${tl.toFixed(0).padStart(6)} µs  ours ${to.toFixed(0).padStart(6)} µs  ` +
      `ours ${(tl / to).toFixed(1)}× faster; ${same ? 'identical β' : 'β DIFFER'}\n`,
  );
  const sameId = JSON.stringify(identifiedByQr(Xid)) === JSON.stringify(identifiedColumns(Xid));
  const ql = timeUs(() => identifiedByQr(Xid), 200);
  const qo = timeUs(() => identifiedColumns(Xid), 200);
  process.stdout.write(
    `  identified columns (${ROWS}×5)   ml-matrix QR ${ql.toFixed(0).padStart(6)} µs  ours ${qo.toFixed(0).padStart(6)} µs  ` +
      `ours ${(ql / qo).toFixed(1)}× faster; ${sameId ? 'same columns' : 'columns DIFFER'} (${identifiedColumns(Xid).join(', ')})\n`,
  );
}
