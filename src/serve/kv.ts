/**
 * KV-cache capacity of one replica, in blocks (vLLM v1 `KVCacheManager` / `determine_available_memory`).
 */
import { UserError } from '../core/errors.ts';
import type { Chip } from '../core/catalog/chip.ts';
import type { PricerInfo } from '../pricer/pricer.ts';

/** vLLM's default `gpu_memory_utilization`. */
export const DEFAULT_GPU_MEMORY_UTILIZATION = 0.9;
/** vLLM's default KV block size, tokens. */
export const DEFAULT_BLOCK_SIZE = 16;

export interface KvCapacity {
  /** HBM per rank the engine may use: hbm_gib · 2^30 · gpu_memory_utilization, bytes. */
  usable_bytes: number;
  /** Resident weights per rank (the pricer's model graph), bytes. */
  weight_bytes: number;
  /** KV bytes per token per rank (the pricer's model graph; windowed layers at full context). */
  kv_bytes_per_token: number;
  block_size: number;
  /** floor((usable − weights) / (block_size · kv_bytes_per_token)). */
  blocks: number;
  /** blocks · block_size. */
  tokens: number;
}

/**
 * KV blocks per replica: what is left of the usable HBM after the weights, in whole blocks. Every rank
 * of a tp group holds its shard of every block, so the per-rank figures give the replica's block count.
 *
 * KNOWN DIVERGENCE 2 (docs/serving.md): vLLM profiles a forward pass and also subtracts the activation
 * peak and CUDA-graph pools; stepcal subtracts only the weights, so its capacity is an upper bound.
 * Windowed layers are charged at full context (vLLM's hybrid allocator frees blocks that slide out),
 * which errs the other way.
 *
 * @param chip datasheet (hbm_gib)
 * @param info the pricer's construction facts (weight and KV bytes per rank)
 * @param override_blocks use this many blocks instead (tests, or a measured engine's figure)
 * @throws UserError when the weights leave no room for one block
 */
export function kvCapacity(
  chip: Pick<Chip, 'name' | 'hbm_gib'>,
  info: Pick<PricerInfo, 'weight_bytes_per_rank' | 'kv_bytes_per_token_per_rank'>,
  opts: { gpu_memory_utilization?: number; block_size?: number; override_blocks?: number } = {},
): KvCapacity {
  const util = opts.gpu_memory_utilization ?? DEFAULT_GPU_MEMORY_UTILIZATION;
  if (!(util > 0 && util <= 1)) throw new UserError(`gpu memory utilization must be in (0, 1], got ${util}`);
  const block_size = opts.block_size ?? DEFAULT_BLOCK_SIZE;
  const usable_bytes = chip.hbm_gib * 2 ** 30 * util;
  const weight_bytes = info.weight_bytes_per_rank;
  const kv = info.kv_bytes_per_token_per_rank;
  let blocks =
    opts.override_blocks ??
    (kv > 0 ? Math.floor((usable_bytes - weight_bytes) / (block_size * kv)) : Number.MAX_SAFE_INTEGER);
  if (opts.override_blocks === undefined && !(blocks >= 1)) {
    const gib = (b: number) => (b / 2 ** 30).toFixed(1);
    throw new UserError(
      `no room for the KV cache: weights ${gib(weight_bytes)} GiB per rank vs ${gib(usable_bytes)} GiB usable on ${chip.name} ` +
        `(${chip.hbm_gib} GiB × gpu memory utilization ${util}); use a wider tp or a smaller weight dtype`,
    );
  }
  blocks = Math.max(0, Math.floor(blocks));
  return { usable_bytes, weight_bytes, kv_bytes_per_token: kv, block_size, blocks, tokens: blocks * block_size };
}
