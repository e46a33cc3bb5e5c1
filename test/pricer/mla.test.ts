/** MLA decode in the pricer (issue 13 item 2): the fitted law replaces the full-attention fallback. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { mlaDecodeUsPerKey } from '../../src/core/laws/mla.ts';
import { decodeBatch } from '../../src/pricer/batch.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { makePricer } from './helpers.ts';

const shipped = (chip: string) => loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
const value = (chip: string, name: string) =>
  shipped(chip)
    .flatMap((s) => s.coefficients)
    .find((c) => c.name === name)!.entry.value;

describe('deepseek-v3 MLA decode on the fitted law', () => {
  it('h200 tp 8, fp8 cache: 4096 more keys for one request cost 61 layers × 4096 × (576 B / rate + 16 heads · head_token) of HBM', () => {
    // deepseek-v3 serves fp8_block, so the cache follows the weights at 1 byte: the `_fp8kv` law.
    // 61 MLA layers (3 dense + 58 MoE; the MTP layer runs only as a drafter); 128 heads / tp 8 = 16 local heads;
    // latent entry 576 × 1 B. The floor does not depend on the context, so it cancels in the difference.
    const rate = value('h200', 'mla_decode_rate_fp8kv');
    const ht = value('h200', 'mla_decode_head_token_fp8kv');
    const perKey = 576 / rate + 16 * ht;
    expect(mlaDecodeUsPerKey({ floor_us: 0, bytes_per_us: rate, head_token_us: ht }, 16, 576)).toBeCloseTo(perKey, 15);
    const p = makePricer('deepseek-v3', 'h200', { tp: 8 }, shipped('h200'));
    const hbm = (ctx: number) => p.price(decodeBatch(1, ctx)).resources_us.hbm;
    expect(hbm(8192) - hbm(4096)).toBeCloseTo(61 * 4096 * perKey, 6);
  });
  it('no full-attention fallback note on any chip whose registry has the MLA fit', () => {
    for (const chip of ['h200', 'h100', 'b200', 'gb200', 'a100', 'l40s']) {
      const p = makePricer('deepseek-v3', chip, { tp: 8 }, shipped(chip));
      const notes = [...p.info.assumptions, ...p.price(decodeBatch(4, 4096)).extrapolation_notes].join('\n');
      expect(notes, chip).not.toMatch(/mla decode priced with the full-attention rate/);
    }
  });
});
