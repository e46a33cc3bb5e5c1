/** Expert-parallel all-to-all in the pricer (issue 13 item 3): DeepEP's fitted curves replace the NCCL alltoall for ep > 1. */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { makePricer } from './helpers.ts';

const shipped = (chip: string) => loadRegistryFile(path.join(REPO_ROOT, 'registry', `${chip}.yaml`));
const value = (chip: string, name: string) =>
  shipped(chip)
    .flatMap((s) => s.coefficients)
    .find((c) => c.name === name)!.entry.value;

describe('deepseek-v3 MoE dispatch + combine at ep 8 on h200 (DeepEP low-latency, decode)', () => {
  it('one request decoding: 58 MoE layers × (dispatch + combine), worked by hand', () => {
    // tp 1, ep 8: no all-reduce, so NVLink carries only the 58 MoE layers' dispatch and combine (3 of the 61 layers
    // are dense; the MTP layer runs only as a drafter). A decode-only step runs DeepEP's low-latency mode.
    // One token per rank, top-8 of 256 experts, hidden 7168:
    //   dispatch b = 1 · 8 · (7168 + 7168/128 · 4 + 16) = 8 · 7408 = 59,264 B
    //   combine  b = 1 · 8 · 7168 · 2                     = 114,688 B
    // With the shipped h200 fit (t0 10.16 µs; r_t 282,700 / 251,700 B/µs; r_peak ≥ r_t, so the affine branch binds):
    //   dispatch 10.16 + 59,264 / 282,700 = 10.16 + 0.2096 = 10.370 µs
    //   combine  10.16 + 114,688 / 251,700 = 10.16 + 0.4557 = 10.616 µs
    //   one layer 20.99 µs; 58 layers 1,217.1 µs.
    const t0d = value('h200', 'expert_alltoall_floor_ll_dispatch_8rank_h200');
    const rtd = value('h200', 'expert_alltoall_transition_rate_ll_dispatch_8rank_h200');
    const t0c = value('h200', 'expert_alltoall_floor_ll_combine_8rank_h200');
    const rtc = value('h200', 'expert_alltoall_transition_rate_ll_combine_8rank_h200');
    const layer = t0d + 59_264 / rtd + (t0c + 114_688 / rtc);
    expect(layer).toBeCloseTo(20.99, 1);
    const p = makePricer('deepseek-v3', 'h200', { tp: 1, ep: 8 }, shipped('h200'));
    const r = p.price(decodeBatch(1, 4096));
    expect(r.resources_us.nvlink).toBeCloseTo(58 * layer, 6);
    expect(r.resources_us.nvlink).toBeCloseTo(1217.1, 0);
    expect(r.resources_us.nic).toBe(0);
  });

  it('without the DeepEP entries the same step is charged on the NCCL alltoall curve (noted)', () => {
    const reg = shipped('h200').map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => !c.name.startsWith('expert_alltoall_')),
    }));
    const p = makePricer('deepseek-v3', 'h200', { tp: 1, ep: 8 }, reg);
    const r = p.price(decodeBatch(1, 4096));
    expect(r.resources_us.nvlink).not.toBeCloseTo(1217.1, 0);
    const notes = [...p.info.assumptions, ...r.extrapolation_notes].join('\n');
    expect(notes).toMatch(/no DeepEP ll dispatch curve/);
  });

  it('ep 16 on h200 crosses the 8-GPU node: the 8-rank curve on the NIC, scaled by the all-to-all span (noted)', () => {
    const p = makePricer('deepseek-v3', 'h200', { tp: 1, ep: 16 }, shipped('h200'));
    const r = p.price(decodeBatch(1, 4096));
    expect(r.resources_us.nvlink).toBe(0);
    expect(r.resources_us.nic).toBeGreaterThan(58 * 20.99);
    const notes = [...p.info.assumptions, ...r.extrapolation_notes].join('\n');
    expect(notes).toMatch(/DeepEP ll dispatch over 16 ranks priced with the 8-rank h200 coefficients/);
  });

  it('a step with prefill runs the normal mode: a 16-token prefill costs the normal curves over ranks touched', () => {
    // Normal mode: one copy per destination rank, E[ranks] = 8 · (1 − Π_{i<8} (224−i)/(256−i)) = 5.294652
    // per token: dispatch 5.294652 · (7168 + 224) = 39,138.1 B; combine 5.294652 · 14,336 = 75,904.2 B; × 16 tokens.
    const get = (param: string, phase: string) => value('h200', `expert_alltoall_${param}_normal_${phase}_8rank_h200`);
    const layer =
      get('floor', 'dispatch') +
      (16 * 39_138.1) / get('transition_rate', 'dispatch') +
      get('floor', 'combine') +
      (16 * 75_904.2) / get('transition_rate', 'combine');
    const p = makePricer('deepseek-v3', 'h200', { tp: 1, ep: 8 }, shipped('h200'));
    expect(p.price(prefillBatch(1, 16)).resources_us.nvlink).toBeCloseTo(58 * layer, 1);
  });
});

describe("deepseek-v3 at ep 8 on gb200: past DeepEP's 4-rank tray, TRT-LLM's rack-wide MNNVL curves", () => {
  it('one request decoding: 58 MoE layers × (dispatch + combine) on the 8-rank mnnvl curves, worked by hand', () => {
    // gb200's DeepEP rows are one 4-GPU tray; its TRT-LLM NVLinkTwoSided rows span the NVL72 rack at 2–64 ranks.
    // One token per rank, top-8 over 8 ranks: 1 · (min(8, 8) − 1) = 7 copies of 7168 elements:
    //   dispatch b = 7 · 7168 · 1 (FP8 payload) = 50,176 B;  combine b = 7 · 7168 · 2 = 100,352 B
    // With the shipped gb200 fit (t0 12.54 / 13.76 µs; r_t 552,000 / 515,900 B/µs; r_peak ≥ r_t, affine binds):
    //   dispatch 12.54 + 50,176 / 552,000 = 12.631 µs;  combine 13.76 + 100,352 / 515,900 = 13.955 µs
    //   one layer 26.585 µs; 58 layers 1,541.9 µs, all on NVLink (8 ranks inside the 72-GPU domain).
    const get = (param: string, phase: string) => value('gb200', `expert_alltoall_${param}_mnnvl_${phase}_8rank_gb200`);
    const layer =
      get('floor', 'dispatch') +
      50_176 / get('transition_rate', 'dispatch') +
      get('floor', 'combine') +
      100_352 / get('transition_rate', 'combine');
    expect(layer).toBeCloseTo(26.585, 2);
    const p = makePricer('deepseek-v3', 'gb200', { tp: 1, ep: 8 }, shipped('gb200'));
    const r = p.price(decodeBatch(1, 4096));
    expect(r.resources_us.nvlink).toBeCloseTo(58 * layer, 6);
    expect(r.resources_us.nvlink).toBeCloseTo(1541.9, 0);
    expect(r.resources_us.nic).toBe(0);
    const notes = [...p.info.assumptions, ...r.extrapolation_notes].join('\n');
    expect(notes).not.toMatch(/DeepEP ll dispatch over 8 ranks priced with the 4-rank/);
  });

  it('ep 4 stays on DeepEP (its measured tray width): the mnnvl curves are used only past it', () => {
    const reg = shipped('gb200');
    const noRack = reg.map((s) => ({
      ...s,
      coefficients: s.coefficients.filter((c) => !c.name.includes('_mnnvl_')),
    }));
    const step = (sets: typeof reg) =>
      makePricer('deepseek-v3', 'gb200', { tp: 1, ep: 4 }, sets).price(decodeBatch(1, 4096)).resources_us.nvlink;
    expect(step(reg)).toBe(step(noRack));
  });
});

describe('every MoE graph prices at ep 8 on every chip with a registry', () => {
  const models = readdirSync(path.join(REPO_ROOT, 'catalog', 'models')).filter((m) =>
    readFileSync(path.join(REPO_ROOT, 'catalog', 'models', m, 'graph.yaml'), 'utf8').includes('GroupedGEMM'),
  );
  const chips = readdirSync(path.join(REPO_ROOT, 'registry'))
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => f.replace(/\.yaml$/, ''));
  it('DeepEP curves where the registry has them, the NCCL alltoall curve (noted) elsewhere', () => {
    expect(models.length).toBeGreaterThan(30);
    const deepep = new Set(['h200', 'h100', 'b200', 'gb200', 'b300']);
    for (const chip of chips) {
      const reg = shipped(chip);
      for (const model of models) {
        const p = makePricer(model, chip, { tp: 1, ep: 8 }, reg);
        const d = p.price(decodeBatch(1, 1024));
        const f = p.price(prefillBatch(1, 512));
        expect(d.resources_us.nvlink + d.resources_us.nic, `${model} ${chip}`).toBeGreaterThan(0);
        expect(f.resources_us.nvlink + f.resources_us.nic, `${model} ${chip}`).toBeGreaterThan(0);
        const notes = [...p.info.assumptions, ...d.extrapolation_notes, ...f.extrapolation_notes].join('\n');
        expect(/no DeepEP (ll|normal) (dispatch|combine) curve/.test(notes), `${model} ${chip}`).toBe(
          !deepep.has(chip),
        );
      }
    }
  });
});
