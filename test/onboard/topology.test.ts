/**
 * Topology from descriptor facts (issue 15 item 4): rack-scale systems keep in-rack groups on NVLink and
 * price cross-rack at the real NIC rate; PCIe-only parts price collectives over PCIe.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chipFromObject, isPcieOnly, loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { nvlinkDomainGpus } from '../../src/core/laws/placement.ts';
import { systemToChip } from '../../src/measurements/system.ts';

const GB200 = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'aiconfigurator-modern', 'systems', 'gb200.yaml');
const RTX = path.join(REPO_ROOT, 'test', 'fixtures', 'onboard', 'systems', 'rtx_pro_6000_server.yaml');

describe('topology from the system descriptor', () => {
  it.skipIf(!existsSync(GB200))(
    'GB200 NVL72: 72 GPUs on NVLink 900 GB/s in the rack; NIC = inter_rack_bw 100 GB/s, not inter_node_bw',
    () => {
      const { chip } = systemToChip(readFileSync(GB200, 'utf8'), GB200, 'gb200', 'ref', { sm_count: 148, l2_mib: 126 });
      expect(chip).toMatchObject({
        rack_gpus: 72,
        rack_nvlink_gb_per_s_per_dir: 900,
        nic_gb_per_s_per_dir: 100,
        nvlink_gb_per_s_per_dir: 900,
      });
      expect(chip.peer_link).toBeUndefined();
      const c = chipFromObject(chip, 'converted');
      expect(c.rack_is_one_domain).toBe(true);
      expect(nvlinkDomainGpus(c)).toBe(72);
      expect(chip.sources.join(' ')).toMatch(/NIC node\.inter_rack_bw 100 GB\/s \(cross-rack\)/);
      // The catalog entry says the same, with its source.
      expect(loadChip('gb200')).toMatchObject({ rack_gpus: 72, nic_gb_per_s_per_dir: 100 });
    },
  );

  it('RTX PRO 6000 Server: intra_node_bw = pcie_bw 64 GB/s → peer_link pcie; groups of 8 cross PCIe', () => {
    const { chip } = systemToChip(readFileSync(RTX, 'utf8'), RTX, 'rtx-pro-6000', 'ref', {
      sm_count: 188,
      l2_mib: 128,
    });
    expect(chip).toMatchObject({
      peer_link: 'pcie',
      nvlink_gb_per_s_per_dir: 64,
      gpus_per_node: 8,
      nic_gb_per_s_per_dir: 50,
    });
    expect(isPcieOnly(chip)).toBe(true);
    expect(isPcieOnly(loadChip('h200'))).toBe(false);
    expect(isPcieOnly(loadChip('l40s'))).toBe(true);
  });
});
