/**
 * BLIS's published collective coefficients for H100 and H200 (registry @ b4d8e2b8), transcribed from
 * reference §1.5 "cost-model-collectives" for comparison tables only (never used as fit input).
 *
 * Units as published: floor µs, rates "bytes"/µs. [CHECK] in the reference: every fp16 peak and
 * transition rate there is very likely in ELEMENTS per µs (element counts read as bytes), so the
 * byte-correct value is 2× the published number; int8 rates are 1 B per element and match 1:1.
 * fp16 all_reduce there is vLLM custom all-reduce under CUDA graph; everything else NCCL 2.29.2.
 */

/** [floor_us, peak, transition] as published. */
export type BlisTriple = [number, number, number];

/** chip → op → dtype → ranks → triple (measured widths 2/4/8 only; the 16-rank rows are assumed). */
export const BLIS_COLLECTIVES: Record<string, Record<string, Record<string, Record<number, BlisTriple>>>> = {
  h100: {
    all_reduce: {
      fp16: { 2: [4.18, 166770, 128000], 4: [4.52, 118380, 89750], 8: [4.61, 133910, 97000] },
      int8: { 2: [6.38, 309614.1, 231000], 4: [9.44, 230689.0, 194250], 8: [15.49, 200514.3, 171750] },
    },
    all_gather: {
      fp16: { 2: [5.14, 258468.9, 191250], 4: [7.07, 211790.1, 164000], 8: [10.14, 191534.4, 145500] },
      int8: { 2: [5.28, 515978.9, 384500], 4: [7.05, 423586.8, 332000], 8: [10.4, 383852.1, 293750] },
    },
    reduce_scatter: {
      fp16: { 2: [5.14, 249035.6, 185250], 4: [6.99, 206517.4, 169000], 8: [10.24, 191827.3, 176000] },
      int8: { 2: [5.04, 465746.7, 348000], 4: [7.14, 399386.2, 319500], 8: [10.24, 374954.4, 297500] },
    },
    alltoall: {
      fp16: { 2: [6.47, 279949.8, 224500], 4: [6.48, 192145.9, 160750], 8: [7.44, 180107.3, 143000] },
      int8: { 2: [6.24, 559899.6, 448500], 4: [6.69, 385243.1, 322250], 8: [7.14, 359866.8, 285000] },
    },
  },
  h200: {
    all_reduce: {
      fp16: { 2: [4.38, 165100, 130000], 4: [4.43, 118660, 95750], 8: [4.71, 134260, 104250] },
      int8: { 2: [6.2, 308211.7, 241000], 4: [9.48, 230302.0, 202000], 8: [16.65, 201446.5, 174000] },
    },
    all_gather: {
      fp16: { 2: [5.08, 257645.3, 197000], 4: [7.13, 211087.3, 171250], 8: [10.3, 192431.0, 148500] },
      int8: { 2: [5.17, 516177.4, 394250], 4: [6.97, 422304.0, 342500], 8: [10.36, 385616.6, 296000] },
    },
    reduce_scatter: {
      fp16: { 2: [5.16, 247750.7, 193250], 4: [7.11, 207425.4, 176500], 8: [10.24, 192654.7, 177750] },
      int8: { 2: [5.01, 469420.0, 362500], 4: [7.18, 402959.4, 335750], 8: [10.49, 376942.0, 345500] },
    },
    alltoall: {
      fp16: { 2: [6.35, 297702.6, 226750], 4: [6.64, 212642.4, 167250], 8: [7.39, 177782.4, 143750] },
      int8: { 2: [6.39, 595319.4, 461000], 4: [6.49, 424072.0, 333750], 8: [9.08, 356376.8, 291750] },
    },
  },
};

/** Older NCCL-only fp16 all_reduce entries (@1dd3dc75), the golden curve's published fit. */
export const BLIS_NCCL_ALLREDUCE_FP16_OLD: Record<string, Record<number, BlisTriple>> = {
  h100: { 4: [9.31, 116725.8, 100750], 8: [15.59, 127156.7, 91250] },
  h200: { 8: [15.98, 131566, 92500] },
};
