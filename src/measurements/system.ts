/**
 * AIConfigurator system descriptor (`aic-core/src/aiconfigurator_core/systems/<sku>.yaml`, copies in
 * ../shared/datasets/aiconfigurator/systems) → a stepcal chip file (`catalog/chips/<chip>.yaml`, schema in
 * src/core/catalog/chip.ts).
 *
 * Datasheet facts (SI units upstream → datasheet units here): mem_bw B/s → hbm_tb_per_s (÷1e12),
 * mem_capacity B → hbm_gib (÷2³⁰), *_tc_flops FLOP/s → peak_tflops (÷1e12), intra_node_bw B/s →
 * nvlink_gb_per_s_per_dir (÷1e9), inter_node_bw → nic_gb_per_s_per_dir, num_gpus_per_node, sm_version.
 * Fields the descriptor itself marks "nonofficial correction based on observations" go to `priors` only:
 * mem_bw_empirical_scaling_factor → priors.hbm_derate, mem_empirical_constant_latency s → priors.hbm_constant_latency_us,
 * p2p_latency s → priors.p2p_latency_us. nccl_mem / other_mem (memory reservations) have no place in the chip
 * schema and are listed in the header comment.
 * Facts the descriptor lacks (sm_count, l2_mib, tf32) come from `extra` (CLI flags) or the existing catalog
 * file of the same chip; without them the import fails naming the field.
 */
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { InputError } from '../core/errors.ts';
import { chipFromObject, type ChipFile } from '../core/catalog/chip.ts';

export interface SystemImportExtra {
  sm_count?: number;
  l2_mib?: number;
  /** Existing catalog entry to take missing facts from. */
  existing?: ChipFile;
  /** Source lines to add (facts given by the caller: flags, stated defaults). */
  sources?: string[];
}

function num(
  obj: Record<string, unknown> | undefined,
  key: string,
  file: string,
  section: string,
  required = true,
): number | undefined {
  const v = obj?.[key];
  if (v === undefined || v === null) {
    if (!required) return undefined;
    throw new InputError({ file, column: `${section}.${key}` }, 'missing field; expected a number');
  }
  const n = typeof v === 'number' ? v : Number(v);
  if (!Number.isFinite(n) || n < 0)
    throw new InputError(
      { file, column: `${section}.${key}` },
      `expected a non-negative number, got ${JSON.stringify(v)}`,
    );
  return n;
}

/** The peer link, rack and NIC facts of a descriptor's `node:` section (datasheet units). */
export interface Topology {
  /** GPU-to-GPU link inside a node, GB/s per direction (NVLink, or PCIe on a part without NVLink). */
  link_gb_per_s_per_dir: number;
  peer_link: 'nvlink' | 'pcie';
  rack_gpus?: number;
  rack_nvlink_gb_per_s_per_dir?: number;
  /** The network a group crossing its NVLink domain uses, GB/s per GPU per direction. */
  nic_gb_per_s_per_dir: number;
  /** One line per fact that needs saying where it came from. */
  sources: string[];
}

/**
 * Topology from the descriptor's facts (seed "Collectives"; issue 15 item 4). Pure.
 * - Rack-scale systems (`num_gpus_per_rack` present with `inter_rack_bw`: GB200/GB300 NVL72): the whole
 *   rack is one NVLink domain; `inter_node_bw` is then the in-rack NVLink figure (NVSwitch between trays),
 *   so the NIC rate is `inter_rack_bw`, never `inter_node_bw`.
 * - Otherwise `inter_node_bw` is the NIC and the rack fields come from an existing catalog entry, if any.
 * - PCIe-only parts: `intra_node_bw` equal to `pcie_bw`, or at most PCIE_X16_GB_PER_S (PCIe 5.0 x16).
 */
function topologyOf(node: Record<string, unknown>, file: string, ex: ChipFile | undefined): Topology {
  const intra = r(num(node, 'intra_node_bw', file, 'node')! / 1e9);
  const inter = r(num(node, 'inter_node_bw', file, 'node')! / 1e9);
  const pcie = num(node, 'pcie_bw', file, 'node', false);
  const rackGpus = num(node, 'num_gpus_per_rack', file, 'node', false);
  const interRack = num(node, 'inter_rack_bw', file, 'node', false);
  const peer_link = (pcie !== undefined && intra === r(pcie / 1e9)) || intra <= PCIE_X16_GB_PER_S ? 'pcie' : 'nvlink';
  const sources: string[] = [];
  if (peer_link === 'pcie')
    sources.push(
      `peer link PCIe: node.intra_node_bw ${intra} GB/s${pcie !== undefined ? ' equals node.pcie_bw' : ''}; collectives cross PCIe`,
    );
  if (rackGpus !== undefined && interRack !== undefined && peer_link === 'nvlink') {
    const nic = r(interRack / 1e9);
    sources.push(
      `rack: node.num_gpus_per_rack ${rackGpus} GPUs in one NVLink domain at node.inter_node_bw ${inter} GB/s; NIC node.inter_rack_bw ${nic} GB/s (cross-rack)`,
    );
    return {
      link_gb_per_s_per_dir: intra,
      peer_link,
      rack_gpus: rackGpus,
      rack_nvlink_gb_per_s_per_dir: inter,
      nic_gb_per_s_per_dir: nic,
      sources,
    };
  }
  return {
    link_gb_per_s_per_dir: intra,
    peer_link,
    ...(ex?.rack_gpus ? { rack_gpus: ex.rack_gpus } : {}),
    ...(ex?.rack_nvlink_gb_per_s_per_dir ? { rack_nvlink_gb_per_s_per_dir: ex.rack_nvlink_gb_per_s_per_dir } : {}),
    nic_gb_per_s_per_dir: inter,
    sources,
  };
}

/** PCIe 5.0 x16 per direction, GB/s: a peer link at or below this is PCIe, not NVLink. */
const PCIE_X16_GB_PER_S = 64;

/** Round to `d` significant decimals without float noise (989000000000000/1e12 → 989). */
function r(x: number, d = 6): number {
  return Number(x.toFixed(d));
}

/**
 * Convert descriptor YAML text to a chip file object and its YAML text. Pure.
 * @throws InputError naming the field for missing / non-numeric values; UserError (via chipFromObject)
 *   when the result fails the chip schema.
 */
export function systemToChip(
  text: string,
  file: string,
  chip: string,
  upstreamRef: string,
  extra: SystemImportExtra = {},
): { chip: ChipFile; yaml: string; priorsFrom: string[] } {
  let doc: Record<string, unknown>;
  try {
    doc = parseYaml(text) as Record<string, unknown>;
  } catch (err) {
    throw new InputError({ file }, `not valid YAML: ${(err as Error).message}`);
  }
  if (!doc || typeof doc !== 'object') throw new InputError({ file }, 'empty file: expected gpu: and node: sections');
  const gpu = doc.gpu as Record<string, unknown> | undefined;
  const node = doc.node as Record<string, unknown> | undefined;
  if (!gpu) throw new InputError({ file, column: 'gpu' }, 'missing section gpu:');
  if (!node) throw new InputError({ file, column: 'node' }, 'missing section node:');
  const misc = doc.misc as Record<string, unknown> | undefined;
  const ex = extra.existing;
  const peak: ChipFile['peak_tflops'] = { bf16: r(num(gpu, 'bfloat16_tc_flops', file, 'gpu')! / 1e12) };
  const fp8 = num(gpu, 'fp8_tc_flops', file, 'gpu', false);
  if (fp8) peak.fp8 = r(fp8 / 1e12);
  const fp4 = num(gpu, 'fp4_tc_flops', file, 'gpu', false) ?? num(gpu, 'nvfp4_tc_flops', file, 'gpu', false);
  if (fp4) peak.nvfp4 = r(fp4 / 1e12);
  const tf32 = num(gpu, 'tf32_tc_flops', file, 'gpu', false);
  if (tf32) peak.tf32 = r(tf32 / 1e12);
  else if (ex?.peak_tflops.tf32) peak.tf32 = ex.peak_tflops.tf32;
  const int8 = num(gpu, 'int8_tc_flops', file, 'gpu', false);
  if (int8) peak.int8 = r(int8 / 1e12);
  const sm_count = extra.sm_count ?? ex?.sm_count;
  if (sm_count === undefined)
    throw new InputError(
      { file, column: 'gpu.sm_count' },
      'the descriptor has no SM count and no catalog entry exists; pass --sm-count',
    );
  const l2 = extra.l2_mib ?? ex?.l2_mib;
  const priorsFrom: string[] = [];
  const priors: NonNullable<ChipFile['priors']> = {};
  const derate = num(gpu, 'mem_bw_empirical_scaling_factor', file, 'gpu', false);
  if (derate !== undefined) {
    priors.hbm_derate = derate;
    priorsFrom.push('gpu.mem_bw_empirical_scaling_factor → priors.hbm_derate');
  }
  const lat = num(gpu, 'mem_empirical_constant_latency', file, 'gpu', false);
  if (lat !== undefined) {
    priors.hbm_constant_latency_us = r(lat * 1e6);
    priorsFrom.push('gpu.mem_empirical_constant_latency [s] × 1e6 → priors.hbm_constant_latency_us');
  }
  const p2p = num(node, 'p2p_latency', file, 'node', false);
  if (p2p !== undefined) {
    priors.p2p_latency_us = r(p2p * 1e6);
    priorsFrom.push('node.p2p_latency [s] × 1e6 → priors.p2p_latency_us');
  }
  const topo = topologyOf(node, file, ex);
  const out: ChipFile = {
    name: chip,
    provenance: 'vendor_spec',
    ...(gpu.sm_version !== undefined ? { sm_version: num(gpu, 'sm_version', file, 'gpu')! } : {}),
    peak_tflops: peak,
    hbm_tb_per_s: r(num(gpu, 'mem_bw', file, 'gpu')! / 1e12),
    hbm_gib: r(num(gpu, 'mem_capacity', file, 'gpu')! / 2 ** 30, 2),
    nvlink_gb_per_s_per_dir: topo.link_gb_per_s_per_dir,
    ...(topo.peer_link === 'pcie' ? { peer_link: 'pcie' as const } : {}),
    sm_count,
    gpus_per_node: num(node, 'num_gpus_per_node', file, 'node')!,
    ...(topo.rack_gpus ? { rack_gpus: topo.rack_gpus } : {}),
    ...(topo.rack_nvlink_gb_per_s_per_dir ? { rack_nvlink_gb_per_s_per_dir: topo.rack_nvlink_gb_per_s_per_dir } : {}),
    nic_gb_per_s_per_dir: topo.nic_gb_per_s_per_dir,
    ...(l2 !== undefined ? { l2_mib: l2 } : {}),
    ...(Object.keys(priors).length ? { priors } : {}),
    sources: [
      upstreamRef,
      ...topo.sources,
      ...(extra.sources ?? []),
      ...(ex && (extra.sm_count === undefined || extra.l2_mib === undefined)
        ? [
            `sm_count${l2 !== undefined ? ', l2_mib' : ''}${ex.peak_tflops.tf32 && !tf32 ? ', tf32' : ''} kept from the previous catalog entry (not in the descriptor)`,
          ]
        : []),
    ],
  };
  chipFromObject(out, `${file} (converted)`);
  const ignored = ['nccl_mem', 'other_mem'].filter((k) => misc && k in misc);
  const header = [
    `# ${chip}: converted by \`stepcal import system\` from ${upstreamRef}.`,
    '# Datasheet facts are at the top level; `priors` holds the corrections the descriptor marks as',
    '# "nonofficial correction based on observations" (AIC priors, not measurements).',
    ...(ignored.length
      ? [`# Not carried (no chip-schema field; memory reservations): misc.${ignored.join(', misc.')}.`]
      : []),
  ].join('\n');
  return { chip: out, yaml: `${header}\n${stringifyYaml(out, { lineWidth: 0 })}`, priorsFrom };
}
