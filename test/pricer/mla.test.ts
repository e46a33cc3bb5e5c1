/** MLA decode in the pricer (issue 13 item 2): the fitted law replaces the full-attention fallback. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { mlaDecodeUsPerKey } from '../../src/core/laws/mla.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
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
  it('a100 tp 8 (kernel tables only): 4096 more keys cost one wave per 27 requests of 4 programs on 108 SMs', () => {
    // a100's registry has no module law: the decode kernel's wave law (core/laws/mla.ts). 16 local heads in one
    // 16-head block × 4 splits = 4 programs per request; 108 SMs hold 27 requests' programs in one wave, 28 take two.
    // Per key per wave: key_us + 16 · key_head_us. The fp8 cache (deepseek-v3's default) is priced on the bf16-cache
    // law (the tables have no fp8 cache), so the cost is per key, not per byte.
    const v = (n: string) => value('a100', n);
    expect(v('mla_decode_block_heads')).toBe(16);
    expect(v('mla_decode_splits')).toBe(4);
    const perKey = v('mla_decode_key_us') + 16 * v('mla_decode_key_head_us');
    const p = makePricer('deepseek-v3', 'a100', { tp: 8 }, shipped('a100'));
    const hbm = (n: number, ctx: number) => p.price(decodeBatch(n, ctx)).resources_us.hbm;
    expect(hbm(1, 8192) - hbm(1, 4096)).toBeCloseTo(61 * 4096 * perKey, 6);
    expect(hbm(27, 8192) - hbm(27, 4096)).toBeCloseTo(61 * 4096 * perKey, 6);
    expect(hbm(28, 8192) - hbm(28, 4096)).toBeCloseTo(61 * 2 * 4096 * perKey, 6);
    expect(p.info.assumptions.join(' ')).not.toMatch(/full-attention rate/);
  });
  it('a100: adding a shorter decode request never lowers the step, on every batch form (Batch, columns, live)', () => {
    // One request at 65,536 keys alone, then with one at 4,096 beside it: one wave either way (8 programs on 108
    // SMs), as long as its longest program, so the attention term stays and the rest of the step only grows.
    const p = makePricer('deepseek-v3', 'a100', { tp: 8 }, shipped('a100'));
    const req = (computed: number) => ({ scheduled_tokens: 1, computed_tokens: computed, prompt_tokens: computed });
    const alone = p.price({ requests: [req(65535)] }).resources_us.hbm;
    const both = p.price({ requests: [req(65535), req(4095)] }).resources_us.hbm;
    expect(both).toBeGreaterThanOrEqual(alone);
    // The same numbers from a ColumnBatch and a LiveBatch of the same rows.
    const cols = { n: 2, scheduled: Float64Array.from([1, 1]), computed: Float64Array.from([65535, 4095]) };
    const out = p.price({ requests: [] });
    expect(p.priceColumnsInto(cols, out).resources_us.hbm).toBe(both);
    const live = p.liveBatch();
    live.add(1, 65535);
    live.add(1, 4095);
    expect(p.priceLiveInto(live, out).resources_us.hbm).toBe(both);
  });
  it('a100 registry with part of the wave law is refused, naming what is missing', () => {
    const drop = (name: string) =>
      shipped('a100').map((s) => ({ ...s, coefficients: s.coefficients.filter((c) => c.name !== name) }));
    expect(() => makePricer('deepseek-v3', 'a100', { tp: 8 }, drop('mla_decode_key_us'))).toThrow(
      /mla_decode_wave_us is present but mla_decode_key_us is missing/,
    );
    expect(() => makePricer('deepseek-v3', 'a100', { tp: 8 }, drop('mla_decode_splits'))).toThrow(
      /mla_decode_splits is missing/,
    );
  });
  it('a100 prefill charges the kernel law µs per (prefill token × local head) on top of the pairs', () => {
    // Without mla_prefill_head_token the same registry prices 61 layers × 2048 tokens × 16 heads × head_token less.
    const ht = value('a100', 'mla_prefill_head_token');
    const without = shipped('a100').map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => c.name !== 'mla_prefill_head_token'),
    }));
    const sm = (reg: typeof without) =>
      makePricer('deepseek-v3', 'a100', { tp: 8 }, reg).price(prefillBatch(1, 2048)).resources_us.sm;
    expect(ht).toBeGreaterThan(0);
    expect(sm(shipped('a100')) - sm(without)).toBeCloseTo(61 * 2048 * 16 * ht, 6);
  });
  it('a kernel-only registry whose decode took the linear form still charges the kernel prefill term', () => {
    // a100 with its wave entries swapped for a linear kernel decode law (rate, head_token: what kernelDecode
    // writes where that form trains better): no module projection term, so the registry is still kernel-only.
    const h200 = shipped('h200').flatMap((s) => s.coefficients);
    const linear = ['mla_decode_rate', 'mla_decode_head_token'].map((n) => h200.find((c) => c.name === n)!);
    const swapped = (keepHeadToken: boolean) =>
      shipped('a100').map((s) => ({
        ...s,
        coefficients: [
          ...s.coefficients.filter(
            (c) =>
              !/^mla_decode_(wave_us|key_us|key_head_us|block_heads|splits)/.test(c.name) &&
              (keepHeadToken || c.name !== 'mla_prefill_head_token'),
          ),
          ...(s.coefficients.some((c) => c.name === 'mla_decode_floor') ? linear : []),
        ],
      }));
    const sm = (keep: boolean) =>
      makePricer('deepseek-v3', 'a100', { tp: 8 }, swapped(keep)).price(prefillBatch(1, 2048)).resources_us.sm;
    expect(sm(true) - sm(false)).toBeCloseTo(61 * 2048 * 16 * value('a100', 'mla_prefill_head_token'), 6);
  });
  it('no full-attention fallback note on any chip whose registry has the MLA fit', () => {
    for (const chip of ['h200', 'h100', 'b200', 'gb200', 'a100', 'l40s']) {
      const p = makePricer('deepseek-v3', chip, { tp: 8 }, shipped(chip));
      const notes = [...p.info.assumptions, ...p.price(decodeBatch(4, 4096)).extrapolation_notes].join('\n');
      expect(notes, chip).not.toMatch(/mla decode priced with the full-attention rate/);
    }
  });
});
