/**
 * The one seeded resampling loop behind every bootstrap in stepcal (fitters and validation).
 *
 * Each resample draws `size` indices uniformly with replacement from 0…n−1 with the mulberry32
 * stream of `seed` (`seededRandom`), always consuming exactly `size` draws per resample in
 * index order, so a given (n, size, resamples, seed) gives the same index sequence on every
 * platform and in every caller. Pure apart from calling `estimate`.
 */

/** Deterministic PRNG (mulberry32). Same seed → same sequence on every platform. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Run `resamples` seeded resamples and collect the estimates that succeeded.
 *
 * @param n population size (indices drawn from 0…n−1)
 * @param resamples number of resamples (each one is drawn whether or not its estimate is kept)
 * @param seed PRNG seed (mulberry32)
 * @param estimate called once per resample with the drawn indices (a buffer reused across resamples:
 *   read it, do not keep it); return `undefined` to skip the resample (e.g. a degenerate draw)
 * @param size indices per resample (default n; smaller gives an m-out-of-n bootstrap)
 * @returns the kept estimates in resample order
 */
export function resampleEstimates<T>(
  n: number,
  resamples: number,
  seed: number,
  estimate: (idx: Uint32Array) => T | undefined,
  size = n,
): T[] {
  const idx = new Uint32Array(size);
  const out: T[] = [];
  let state = seed >>> 0;
  for (let b = 0; b < resamples; b++) {
    state = drawIndices(state, n, idx);
    const v = estimate(idx);
    if (v !== undefined) out.push(v);
  }
  return out;
}

/**
 * Fill `idx` with indices Math.floor(u · n), u the next idx.length values of the mulberry32 stream at
 * `state` (seededRandom's arithmetic written out: the closure's call returned each u as a heap number,
 * 16 bytes per draw, ≈ 63 MB per h200 fit); returns the stream's state after them.
 */
function drawIndices(state: number, n: number, idx: Uint32Array): number {
  let a = state;
  for (let i = 0; i < idx.length; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    idx[i] = Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  }
  return a;
}
