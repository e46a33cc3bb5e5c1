import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { setupPricer } from '../../src/pricer/setup.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-kernel-set-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const committed = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');

/** The committed h200 registry with the CUTLASS ep > 1 set's eps_max block copied under another kernel's name. */
function withStrayEntry(): string {
  const lines = committed.split('\n');
  const at = lines.indexOf('  - moe_expert_eps_max_fp8_block_cutlass_epn:');
  let end = at + 1;
  while (!lines[end]!.startsWith('  - ')) end++;
  const block = lines.slice(at, end);
  block[0] = '  - moe_expert_eps_max_fp8_block_triton_epn:';
  return [...lines.slice(0, end), ...block, ...lines.slice(end)].join('\n');
}

describe('expert kernel sets are used only whole (src/pricer/plan.ts expertKernelSetOf)', () => {
  it('a stray eps_max of a kernel set with no floor leaves the price and the kernel choice as committed', () => {
    const file = path.join(tmp, 'h200.yaml');
    writeFileSync(file, withStrayEntry());
    const batch = decodeBatch(32, 1024);
    const price = (reg?: string) => {
      const s = setupPricer('qwen3-235b-a22b-fp8', 'h200', { tp: 8, ep: 8 }, reg);
      return { sm_us: s.pricer.price(batch).resources_us.sm, ramps: s.pricer.info.formats.map((f) => f.ramp) };
    };
    const base = price();
    const stray = price(file);
    expect(stray.sm_us).toBe(base.sm_us);
    // The CUTLASS set is the lane's kernel at ep > 1 in both; the stray triton_epn entry is not picked.
    expect(base.ramps).toContain('moe_expert_fp8_block_cutlass_epn');
    expect(stray.ramps).toEqual(base.ramps);
  });
});
