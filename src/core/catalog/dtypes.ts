/**
 * Data types and their storage widths: the one definition the pricer, the fitters and src/analytics share.
 *
 * Source: element widths are the formats' definitions; block-scaled formats add their scale bytes
 * (NVIDIA NVFP4: one FP8 E4M3 scale per 16 values → 0.5625 B per value; OCP MX v1.0 MXFP4 / MXFP8: one
 * E8M0 scale per 32 values → 0.53125 / 1.03125 B per value; fp8_block: one fp32 scale per 128×128 weight
 * block, 4 / 16384 B per value, left out).
 */

/** Compute formats a GEMM can run in. `fp8_block` is fp8 with 128-block scales (DeepGEMM-style). */
export const GEMM_DTYPES = ['bf16', 'fp8', 'fp8_block', 'nvfp4'] as const;
export type GemmDtype = (typeof GEMM_DTYPES)[number];

/**
 * Grouped four-bit experts whose fused-MoE kernels are weight-only (values dequantised to bf16 in the
 * kernel, arithmetic at the bf16 rate; vLLM Marlin MoE), with the fused-MoE table's spelling of their rows
 * (aiconfigurator `moe_dtype`). Their expert law is fitted from those rows against the bf16 peak.
 */
export const WEIGHT_ONLY_EXPERT_ROWS = { mxfp4: 'w4a16_mxfp4', int4: 'int4_wo' } as const;
/** A dtype the expert law is fitted and priced for: a GEMM format, or a weight-only four-bit one. */
export type ExpertDtype = GemmDtype | keyof typeof WEIGHT_ONLY_EXPERT_ROWS;
export const EXPERT_DTYPES: readonly ExpertDtype[] = [...GEMM_DTYPES, 'mxfp4', 'int4'];

/** The format whose peak an expert dtype's arithmetic runs at (bf16 for the weight-only four-bit kernels). */
export function expertComputeDtype(d: ExpertDtype): GemmDtype {
  return d === 'mxfp4' || d === 'int4' ? 'bf16' : d;
}

/** Weight / activation / cache storage formats stepcal understands. */
export const STORAGE_DTYPES = [
  'fp32',
  'tf32',
  'bf16',
  'fp16',
  'fp8',
  'fp8_block',
  'int8',
  'mxfp8',
  'nvfp4',
  'mxfp4',
  'int4',
] as const;
export type StorageDtype = (typeof STORAGE_DTYPES)[number];

/**
 * Bytes per value of a block-scaled format: (block · value_bits / 8 + scale_bytes) / block
 * (chapter §2.2.2: 32 one-byte values + one 2-byte scale = 34 B, 1.0625 B/value; MXFP8 is 8-bit
 * values with one 1-byte scale per 32, so 512 values take 528 B).
 * @throws Error on a non-positive block or negative sizes
 */
export function blockScaledBytesPerValue(value_bits: number, block_values: number, scale_bytes: number): number {
  if (!(block_values > 0 && value_bits > 0 && scale_bytes >= 0))
    throw new Error('need value_bits > 0, block_values > 0, scale_bytes ≥ 0');
  return ((block_values * value_bits) / 8 + scale_bytes) / block_values;
}

/** Bytes per value including block scales, for the block-scaled formats stepcal names. */
export const SCALED_FORMAT_BYTES_PER_VALUE = Object.freeze({
  nvfp4: blockScaledBytesPerValue(4, 16, 1), // one FP8 (E4M3) scale per 16 values
  mxfp4: blockScaledBytesPerValue(4, 32, 1), // one E8M0 scale per 32 values (OCP MX)
  mxfp8: blockScaledBytesPerValue(8, 32, 1), // one E8M0 scale per 32 values (OCP MX)
}) satisfies Readonly<Record<string, number>>;

/**
 * Bytes per stored value of a dtype, block scales included (nvfp4 0.5625, mxfp4 0.53125, mxfp8
 * 1.03125; int4 0.5: its group scales depend on the checkpoint's group size and are not counted).
 */
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
    case 'mxfp8':
    case 'nvfp4':
    case 'mxfp4':
      return SCALED_FORMAT_BYTES_PER_VALUE[dtype];
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
    mxfp8: 'mxfp8',
    int8: 'int8',
    nvfp4: 'nvfp4',
    mxfp4: 'mxfp4',
    int4: 'int4',
  };
  const d = table[s];
  if (!d) throw new Error(`unknown dtype "${name}" (known: ${Object.keys(table).join(', ')})`);
  return d;
}
