/** `extrapolated` and its notes: memory capacity, the GEMM ramp's fitted m range, collective widths. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { knownChips, loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { GEMM_DTYPES } from '../../src/core/catalog/dtypes.ts';
import { memoryBoundThresholdM } from '../../src/fit/gemm.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { gemmFittedRange } from '../../src/pricer/fitted-range.ts';
import { computeBoundMinM } from '../../src/core/laws/gemm.ts';
import { nvlinkDomainGpus, ringSpan } from '../../src/core/laws/placement.ts';
import { bytesPerElement } from '../../src/core/catalog/dtypes.ts';
import { peakFlopsPerUs } from '../../src/core/catalog/chip.ts';
import { loadRegistryFile, resolveCoefficients } from '../../src/registry/load.ts';
import { BLIS_H200, makePricer, syntheticSets } from './helpers.ts';

const h200 = loadRegistryFile(BLIS_H200);
const GiB = 2 ** 30;
const memNotes = (notes: readonly string[]) => notes.filter((n) => n.startsWith('memory:'));

describe('memory capacity (weights + embedding + KV per rank vs HBM GiB)', () => {
  const p = makePricer('llama-3.1-8b', 'h200', {}, h200);
  it('llama-3.1-8b decode:256@4096 on h200 needs 143.0 GiB > 141 GiB: flagged, prices unchanged', () => {
    // weights 32·436,207,616 + lm_head 1,050,673,152 + embedding 1,050,673,152 B; KV 256 · 4,097 · 131,072 B
    const bytes = 32 * 436_207_616 + 2 * 1_050_673_152 + 256 * 4097 * 131_072;
    expect(bytes / GiB).toBeCloseTo(142.99, 2);
    const r = p.price(decodeBatch(256, 4096));
    expect(r.extrapolated).toBe(true);
    expect(memNotes(r.extrapolation_notes)).toEqual([
      "memory: weights 15.0 GiB + KV cache 128.0 GiB for this batch = 143.0 GiB per rank exceed h200's 141 GiB of HBM",
    ]);
  });
  it('a step over capacity priced again returns the same frozen notes; another context formats its own', () => {
    const a = p.price(decodeBatch(256, 4096)).extrapolation_notes;
    const other = p.price(decodeBatch(256, 5000)).extrapolation_notes;
    expect(p.price(decodeBatch(256, 4096)).extrapolation_notes).toBe(
      p.price(decodeBatch(256, 4096)).extrapolation_notes,
    );
    expect(p.price(decodeBatch(256, 4096)).extrapolation_notes).toStrictEqual(a);
    expect(Object.isFrozen(a)).toBe(true);
    // KV 256 · 5,001 · 131,072 B = 156.3 GiB
    expect(memNotes(other)).toEqual([
      "memory: weights 15.0 GiB + KV cache 156.3 GiB for this batch = 171.2 GiB per rank exceed h200's 141 GiB of HBM",
    ]);
  });
  it('200 requests (115.0 GiB) fit: no memory note', () => {
    expect(memNotes(p.price(decodeBatch(200, 4096)).extrapolation_notes)).toEqual([]);
  });
  it('a window bounds the resident KV: mistral-7b at 100k context keeps 4,096 tokens per layer; llama-3.1-8b does not', () => {
    expect(
      memNotes(makePricer('mistral-7b', 'h200', {}, h200).price(decodeBatch(32, 100_000)).extrapolation_notes),
    ).toEqual([]);
    expect(
      memNotes(makePricer('llama-3.1-8b', 'h200', {}, h200).price(decodeBatch(32, 100_000)).extrapolation_notes),
    ).toHaveLength(1);
  });
  it('weights alone over HBM (deepseek-v3 at tp 1) are flagged once, even for an empty batch', () => {
    const ds = makePricer('deepseek-v3', 'h200', { tp: 1 });
    for (const b of [{ requests: [] }, decodeBatch(8, 1000)]) {
      const m = memNotes(ds.price(b).extrapolation_notes);
      expect(m).toHaveLength(1);
      expect(m[0]).toMatch(/^memory: weights \d+\.\d GiB per rank exceed h200's 141 GiB of HBM before any KV cache$/);
    }
  });
  it('the embedding table is resident weight, split by tp; a tied one is the lm_head', () => {
    expect(makePricer('llama-3.1-8b', 'h200', { tp: 2 }).info.embedding_bytes_per_rank).toBe((128_256 * 4096 * 2) / 2);
    expect(makePricer('bloom-176b', 'h200', { tp: 8 }).info.embedding_bytes_per_rank).toBe(0);
  });
});

describe('GEMM ramp below its fitted m range (flagged, not re-priced)', () => {
  it('the range the fitter states in evidence is used (a100: m ≥ 153)', () => {
    const reg = resolveCoefficients(loadRegistryFile(path.join(REPO_ROOT, 'registry', 'a100.yaml')), {
      hardware: 'a100',
    });
    expect(gemmFittedRange(reg, 'bf16', loadChip('a100'))!.min_m).toBe(153);
  });
  it('without stated evidence: the ridge peak·bytes/(2·HBM), the fitter’s own row filter, on every chip and format', () => {
    for (const c of knownChips()) {
      const chip = loadChip(c);
      for (const d of GEMM_DTYPES) {
        const peak = peakFlopsPerUs(chip, d);
        if (peak === undefined) continue;
        expect(computeBoundMinM(peak, bytesPerElement(d), chip.hbm_bytes_per_us)).toBeCloseTo(
          memoryBoundThresholdM(chip, d),
          9,
        );
      }
    }
    const reg = resolveCoefficients(h200, { hardware: 'h200' });
    expect(gemmFittedRange(reg, 'bf16', loadChip('h200'))!.min_m).toBeCloseTo((989.5e6 * 2) / (2 * 4.8e6), 9);
  });
  it('a step below the edge is flagged, one at or above it is not, and the price follows the same law', () => {
    const p = makePricer('llama-3.1-8b', 'h200', {}, h200);
    const ramp = (n: readonly string[]) => n.filter((x) => x.startsWith('GEMM ramp below'));
    expect(ramp(p.price(prefillBatch(1, 206)).extrapolation_notes)).toHaveLength(1);
    expect(ramp(p.price(prefillBatch(1, 207)).extrapolation_notes)).toEqual([]);
    expect(p.price(prefillBatch(1, 512)).extrapolated).toBe(false);
  });
});

describe('notes', () => {
  it('collective widths say which are measured and which assumed', () => {
    const r = makePricer('llama-3.1-70b', 'h200', { tp: 32 }, h200).price(prefillBatch(1, 512));
    expect(r.extrapolation_notes).toContain(
      'all_reduce over 32 ranks priced with the 16-rank h200 coefficients (measured widths: 2, 4, 8; assumed (not measured) widths: 16)',
    );
    // an exact width whose coefficients are assumed is flagged too
    const r16 = makePricer('llama-3.1-70b', 'h200', { tp: 16 }, h200).price(prefillBatch(1, 512));
    expect(r16.extrapolation_notes).toEqual([
      'all_reduce over 16 ranks priced with assumed (not measured) 16-rank h200 coefficients (measured widths: 2, 4, 8; assumed (not measured) widths: 16)',
    ]);
    expect(makePricer('llama-3.1-70b', 'h200', { tp: 8 }, h200).price(prefillBatch(1, 512)).extrapolated).toBe(false);
  });
  it('a note met by several layer kinds is reported once (deepseek-v3, no MLA decode rate)', () => {
    const sets = syntheticSets('h200').map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => !c.name.startsWith('attention_decode_rate_mla')),
    }));
    const r = makePricer('deepseek-v3', 'h200', { tp: 8 }, sets).price(decodeBatch(4, 1000), { per_kind: true });
    expect(r.extrapolation_notes.filter((n) => n.includes('attention_decode_rate_mla'))).toHaveLength(1);
    expect(new Set(r.extrapolation_notes).size).toBe(r.extrapolation_notes.length);
  });
  it('when only construction-time notes apply, every call returns the same frozen array', () => {
    const p = makePricer('llama-3.1-70b', 'h200', { tp: 32 }, h200);
    const a = p.price(decodeBatch(8, 1000)).extrapolation_notes;
    const b = p.price(decodeBatch(16, 2000)).extrapolation_notes;
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
  });
});

describe('NVLink domain', () => {
  it('one domain rule for crossing and span: GB200 NVL72 is 72 GPUs, so a tp-16 ring has span 1 (4-GPU trays would give more)', () => {
    const gb200 = loadChip('gb200');
    const ratio = gb200.nvlink_bytes_per_us / gb200.nic_bytes_per_us;
    expect(nvlinkDomainGpus(gb200)).toBe(72);
    expect(nvlinkDomainGpus(loadChip('h200'))).toBe(8);
    expect(ringSpan(16, nvlinkDomainGpus(gb200), ratio)).toBe(1);
    expect(ringSpan(16, gb200.gpus_per_node, ratio)).toBeGreaterThan(1);
  });
  it('GB200 NVL72: a tp-16 group prices on NVLink, none on the NIC', () => {
    const gb = makePricer('llama-3.1-70b', 'gb200', { tp: 16 }).price(decodeBatch(8, 1000));
    expect(gb.resources_us.nic).toBe(0);
    expect(gb.resources_us.nvlink).toBeGreaterThan(0);
  });
});
