/**
 * Chip datasheet facts, loaded from `catalog/chips/<name>.yaml`.
 *
 * Files hold datasheet units (TFLOP/s, TB/s, GB/s, GiB), named with their unit. `Chip` converts
 * once to stepcal's internal units: FLOPs per µs and bytes per µs.
 * 1 TFLOP/s = 1e6 FLOP/µs; 1 TB/s = 1e6 B/µs; 1 GB/s = 1e3 B/µs.
 */
import { pathInside, REPO_ROOT } from '../io/paths.ts';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UserError } from '../errors.ts';
import { textMemo } from '../text-memo.ts';
import { readText } from '../io/fs.ts';
import type { GemmDtype } from './dtypes.ts';

/** Repository root (defined in core/io/paths.ts). */
export { REPO_ROOT };
export const CHIPS_DIR = path.join(REPO_ROOT, 'catalog', 'chips');

const positive = z.number().finite().positive();

export const ChipFileSchema = z
  .object({
    name: z.string().regex(/^[a-z0-9_-]+$/),
    provenance: z.enum(['vendor_spec', 'derived']),
    sm_version: z.number().int().optional(),
    peak_tflops: z
      .object({
        bf16: positive,
        fp8: positive.optional(),
        nvfp4: positive.optional(),
        tf32: positive.optional(),
        int8: positive.optional(),
      })
      .strict(),
    hbm_tb_per_s: positive,
    hbm_gib: positive,
    nvlink_gb_per_s_per_dir: positive,
    /** The GPU-to-GPU link inside a node: absent = NVLink; `pcie` = a part without NVLink (the rate above is PCIe's). */
    peer_link: z.enum(['nvlink', 'pcie']).optional(),
    sm_count: z.number().int().positive(),
    gpus_per_node: z.number().int().positive(),
    rack_gpus: z.number().int().positive().optional(),
    rack_nvlink_gb_per_s_per_dir: positive.optional(),
    nic_gb_per_s_per_dir: positive,
    l2_mib: positive.optional(),
    /** Corrections a vendor tool marks as unofficial (kept apart from datasheet facts). */
    priors: z
      .object({
        hbm_derate: z.number().positive().max(1).optional(),
        hbm_constant_latency_us: z.number().nonnegative().optional(),
        p2p_latency_us: z.number().nonnegative().optional(),
      })
      .strict()
      .optional(),
    sources: z.array(z.string()).min(1),
  })
  .strict();
export type ChipFile = z.infer<typeof ChipFileSchema>;

/** A chip with derived internal-unit rates. */
export interface Chip extends ChipFile {
  /** HBM bandwidth, bytes per µs (datasheet, no derate). */
  hbm_bytes_per_us: number;
  /** NVLink per GPU per direction, bytes per µs. */
  nvlink_bytes_per_us: number;
  /** Network fabric per GPU per direction, bytes per µs. */
  nic_bytes_per_us: number;
  /** True when the whole rack is one NVLink domain (GB200 NVL72). */
  rack_is_one_domain: boolean;
}

/** Build a `Chip` from parsed file content. @throws UserError naming `source` when invalid. */
export function chipFromObject(obj: unknown, source: string): Chip {
  const parsed = ChipFileSchema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UserError(`${source}: field "${issue.path.join('.')}": ${issue.message}`);
  }
  const f = parsed.data;
  return {
    ...f,
    hbm_bytes_per_us: f.hbm_tb_per_s * 1e6,
    nvlink_bytes_per_us: f.nvlink_gb_per_s_per_dir * 1e3,
    nic_bytes_per_us: f.nic_gb_per_s_per_dir * 1e3,
    rack_is_one_domain: (f.rack_gpus ?? 0) > 0 && (f.rack_nvlink_gb_per_s_per_dir ?? 0) > 0,
  };
}

/** PCIe 5.0 x16 per direction, GB/s: a peer link at or below this is PCIe, not NVLink. */
export const PCIE_MAX_GB_PER_S_PER_DIR = 64;

/**
 * A part whose GPUs talk over PCIe (no NVLink): `peer_link: pcie` in its catalog entry, or a link
 * rate at or below PCIe 5.0 x16 (l40s states only its rate). Collectives on it cross PCIe.
 */
export function isPcieOnly(chip: Pick<ChipFile, 'peer_link' | 'nvlink_gb_per_s_per_dir'>): boolean {
  return chip.peer_link === 'pcie' || chip.nvlink_gb_per_s_per_dir <= PCIE_MAX_GB_PER_S_PER_DIR;
}

/** Names of the shipped chips (file stems in catalog/chips). */
export function knownChips(dir = CHIPS_DIR): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => f.slice(0, -5))
    .sort();
}

/**
 * Load a chip by name (`h200`) or by path to a YAML file.
 * @throws UserError listing the known chips when the name is unknown.
 */
export function loadChip(nameOrPath: string, dir = CHIPS_DIR): Chip {
  const file = nameOrPath.endsWith('.yaml') ? nameOrPath : pathInside('chip', nameOrPath, dir, '.yaml');
  if (!existsSync(file)) {
    throw new UserError(`unknown chip "${nameOrPath}" (known: ${knownChips(dir).join(', ')})`);
  }
  return chipOfText(readText(file), file);
}

/** `chipFromObject(parseYaml(text), file)`, memoised per process (core/text-memo.ts; at most 32 chips). */
const chipOfText = textMemo(32, (text: string, file: string): Chip => chipFromObject(parseYaml(text), file));

/**
 * Dense peak of a GEMM compute dtype in FLOPs per µs, or undefined when the chip has no native
 * peak for it. fp8_block uses the fp8 peak.
 */
export function peakFlopsPerUs(chip: Chip, dtype: GemmDtype): number | undefined {
  const t =
    dtype === 'bf16'
      ? chip.peak_tflops.bf16
      : dtype === 'fp8' || dtype === 'fp8_block'
        ? chip.peak_tflops.fp8
        : chip.peak_tflops.nvfp4;
  return t === undefined ? undefined : t * 1e6;
}

/** Map an AIConfigurator SKU directory name to a stepcal chip name (h200_sxm → h200). */
export function chipFromSku(sku: string): string {
  const map: Record<string, string> = {
    h200_sxm: 'h200',
    h100_sxm: 'h100',
    b200_sxm: 'b200',
    b300_sxm: 'b300',
    a100_sxm: 'a100',
    gb200: 'gb200',
    gb300: 'gb300',
    l40s: 'l40s',
  };
  return map[sku] ?? sku.replace(/_sxm$/, '');
}

/** L2 assumed for a chip file that states none, MiB (H100/H200 datasheet size, the common case). */
export const DEFAULT_L2_MIB = 50;

/** L2 cache size of a chip in bytes (`l2_mib`, or DEFAULT_L2_MIB when the file gives none). */
export function l2Bytes(l2_mib: number | undefined): number {
  return (l2_mib ?? DEFAULT_L2_MIB) * 1024 * 1024;
}
