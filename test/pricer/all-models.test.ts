/** Every shipped model prices on every shipped chip, bf16 and fp8 where the chip has fp8. */
import { describe, expect, it } from 'vitest';
import { knownChips, loadChip } from '../../src/core/catalog/chip.ts';
import { knownModels } from '../../src/core/catalog/model.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { RESOURCES } from '../../src/pricer/types.ts';
import { makePricer } from './helpers.ts';

const models = knownModels();
const chips = knownChips();

describe('catalog coverage', () => {
  it('ships the required models and chips', () => {
    for (const m of [
      'llama-2-7b',
      'llama-2-70b',
      'llama-3.1-8b',
      'llama-3.1-70b',
      'codellama-34b',
      'mistral-7b',
      'mixtral-8x7b',
      'qwen2-7b',
      'qwen2-72b',
      'qwen3-32b',
      'deepseek-v3',
      'gpt-oss-120b',
      'bloom-176b',
    ])
      expect(models).toContain(m);
    for (const c of ['h100', 'h200', 'b200', 'a100', 'l40s']) expect(chips).toContain(c);
  });
  for (const chip of chips) {
    it(`every model on ${chip}`, () => {
      const dtypes = loadChip(chip).peak_tflops.fp8 ? ['auto', 'fp8'] : ['auto'];
      const batch = { requests: [...decodeBatch(16, 3000).requests, ...prefillBatch(1, 1024, 512).requests] };
      for (const m of models) {
        for (const w of dtypes) {
          const tp =
            m === 'deepseek-v3' || m.includes('70b') || m.includes('72b') || m.includes('120b') || m.includes('176b')
              ? 8
              : 1;
          const r = makePricer(m, chip, { tp, weight_dtype: w }).price(batch);
          for (const res of RESOURCES)
            expect(Number.isFinite(r.resources_us[res]), `${m} ${chip} ${w} ${res}`).toBe(true);
          expect(r.no_overlap_us).toBeGreaterThan(0);
          expect(r.overlap_us).toBeLessThanOrEqual(r.no_overlap_us);
        }
      }
    });
  }
});
