/**
 * Data types and their storage widths.
 *
 * Source: element widths are the formats' definitions; block-scaled formats add their scale bytes
 * (nvfp4: one fp8 scale per 16 values; mxfp4: one 8-bit scale per 32 values; fp8_block: one fp32
 * scale per 128x128 weight block, negligible).
 */

/** Compute formats a GEMM can run in. `fp8_block` is fp8 with 128-block scales (DeepGEMM-style). */
export const GEMM_DTYPES = ['bf16', 'fp8', 'fp8_block', 'nvfp4'] as const;
export type GemmDtype = (typeof GEMM_DTYPES)[number];

/** Weight / activation / cache storage formats stepcal understands. */
export const STORAGE_DTYPES = [
  'fp32',
  'tf32',
  'bf16',
  'fp16',
  'fp8',
  'fp8_block',
  'int8',
  'nvfp4',
  'mxfp4',
  'int4',
] as const;
export type StorageDtype = (typeof STORAGE_DTYPES)[number];

/** Bytes per element of a storage dtype, without block scales. */
export function bytesPerElement(dtype: StorageDtype): number {
  switch (dtype) {
    case 'fp32':
    case 'tf32':
      return 4;
    case 'bf16':
    case 'fp16':
      return 2;
    case 'fp8':
    case 'fp8_block':
    case 'int8':
      return 1;
    case 'nvfp4':
    case 'mxfp4':
    case 'int4':
      return 0.5;
  }
}

/**
 * Map the spellings found in vendor tables to stepcal dtypes.
 * @throws Error (the caller wraps it with file/row/column) when the name is unknown.
 */
export function parseDtype(name: string): StorageDtype {
  const s = name.trim().toLowerCase();
  const table: Record<string, StorageDtype> = {
    bfloat16: 'bf16',
    bf16: 'bf16',
    half: 'fp16',
    float16: 'fp16',
    fp16: 'fp16',
    float32: 'fp32',
    fp32: 'fp32',
    float: 'fp32',
    tf32: 'tf32',
    fp8: 'fp8',
    fp8_e4m3: 'fp8',
    float8_e4m3fn: 'fp8',
    fp8_block: 'fp8_block',
    int8: 'int8',
    nvfp4: 'nvfp4',
    mxfp4: 'mxfp4',
    int4: 'int4',
  };
  const d = table[s];
  if (!d) throw new Error(`unknown dtype "${name}" (known: ${Object.keys(table).join(', ')})`);
  return d;
}
