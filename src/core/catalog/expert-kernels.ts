/**
 * The fused-MoE kernels of the aiconfigurator tables (`kernel_source`, the kernel vLLM dispatched; README
 * "Column dictionary") named by a short tag, and the ep modes the lane's dispatch splits on (issue 13;
 * docs/pricer.md "Expert kernels").
 *
 * Source: the tables themselves. vLLM 0.24.0 on h200/h100 runs block-scaled fp8 experts on
 * `vllm_fp8moe_triton_tritonexperts` at ep 1 and on `vllm_fp8moe_flashinfer_cutlass_flashinferexperts` at
 * ep > 1 (no configuration measured on both); on b200/gb200 one FlashInfer TRT-LLM kernel serves the whole
 * base grid of a dtype and the other kernels only a few appended model shapes.
 */

/**
 * Kernel tags, in the order the pricer looks them up. A tag names the kernel family, not one build:
 * `trtllm_modular` is FlashInfer's modular TRT-LLM path, `trtllm` its monolithic one.
 */
export const EXPERT_KERNEL_TAGS = ['triton', 'cutlass', 'trtllm', 'trtllm_modular', 'marlin', 'oai_triton'] as const;
export type ExpertKernelTag = (typeof EXPERT_KERNEL_TAGS)[number];

/**
 * The tag of a table's `kernel_source`, or undefined for a kernel stepcal does not know (the fitter then
 * fits that dtype's kernels pooled only). Matched on the backend words of vLLM's label
 * (`vllm_<method>_<backend>_<experts class>`); a100's vLLM 0.14.0 `vllm_fused_moe` is the Triton kernel.
 */
export function expertKernelTag(kernel_source: string): ExpertKernelTag | undefined {
  const k = kernel_source.toLowerCase();
  if (k.includes('marlin')) return 'marlin';
  if (k.includes('oaitriton')) return 'oai_triton';
  if (k.includes('flashinfer_trtllm')) return k.includes('modular') ? 'trtllm_modular' : 'trtllm';
  if (k.includes('flashinfer_cutlass')) return 'cutlass';
  if (k.includes('triton') || k === 'vllm_fused_moe') return 'triton';
  return undefined;
}

/** The ep modes the dispatch splits on: `ep1` (experts not sharded), `epn` (ep > 1). */
export const EXPERT_EP_MODES = ['ep1', 'epn'] as const;
export type ExpertEpMode = (typeof EXPERT_EP_MODES)[number];

/** The ep mode of an expert-parallel width. */
export const expertEpMode = (ep: number): ExpertEpMode => (ep > 1 ? 'epn' : 'ep1');

/**
 * The registry suffix of a kernel set: `<dtype>_<tag>` where the kernel is the lane's choice at every ep,
 * `<dtype>_<tag>_<mode>` where it is the choice at one mode only (fitted on that mode's rows).
 */
export const expertKernelSet = (dtype: string, tag: ExpertKernelTag, mode?: ExpertEpMode): string =>
  mode ? `${dtype}_${tag}_${mode}` : `${dtype}_${tag}`;
