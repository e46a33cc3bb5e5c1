/**
 * The MoE expert-time law and its fitter (issue 13 item 1): a layer worked by hand, recovery of known
 * coefficients within their ci95, the series screen, the holdouts, and the seed footnote's sum-vs-max
 * comparison on every shipped chip with fused-MoE tables.
 */
import { mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { l2Bytes, loadChip, REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { groupRoutedModels } from '../../src/core/catalog/group-routing.ts';
import { UserError } from '../../src/core/errors.ts';
import {
  expertLayerMaxUs,
  expertLayerUs,
  expertRereadPasses,
  expertWork,
  l2MissFraction,
  type ExpertCoefficients,
} from '../../src/core/laws/moe-experts.ts';
import { patternSearch } from '../../src/core/numeric/minimize.ts';
import { seededRandom } from '../../src/core/numeric/stats.ts';
import { parseCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { readText } from '../../src/core/io/fs.ts';
import { applyGates } from '../../src/fit/index.ts';
import {
  expertError,
  expertSeries,
  fitExpertLogL1,
  fitExpertSum,
  seriesNormal,
  solveNonNegative,
  sumNormals,
} from '../../src/fit/moe-experts-law.ts';
import { fitMoeExperts } from '../../src/fit/moe-experts.ts';
import type { FitContext } from '../../src/fit/types.ts';
import type { MoeRow } from '../../src/measurements/schema.ts';
import { listMeasurementFiles, readMeasurements } from '../../src/measurements/store.ts';

/** The expert law's eight coefficients, in the order the recovery tests check them. */
const LAW_COEFS = [
  'floor_us',
  'eps_max',
  'm_half',
  'route_bytes_per_us',
  'expert_us',
  'pair_bytes_per_us',
  'reread',
  'token_bytes_per_us',
] as const;
import { moeExpertsSection, sumVsMaxVerdict } from '../../src/report/fit-moe-experts.ts';

const H200 = loadChip('h200');
const ctx = (derate: number, chip = H200): FitContext => ({
  chip,
  inputs: [{ file: `measurements/${chip.name}/moe.vllm-0.24.0.csv.gz`, sha256: 'c'.repeat(64), lane: 'vllm-0.24.0' }],
  bootstrap: { resamples: 200, seed: 7 },
  prior: new Map([['hbm_derate', derate]]),
});

describe('expert law: the weight re-read past the first m-tile, by hand', () => {
  // Mixtral-8x7B's layer at tp 1 in bf16, 2,048 tokens, balanced routing: P = 2,048·2 = 4,096 pairs on D = 8 experts,
  // m = 512 tokens per expert = 4 tiles of 128: 3 passes past the first. One expert is 3·4096·14336·2 B = 352,321,536 B;
  // with 50 MiB = 52,428,800 B of L2 the part that misses is 1 − 52,428,800/352,321,536 = 0.851190476.
  //   reread_bytes = 8 · 352,321,536 · 3 · 0.851190476 = 7,197,425,664 B
  //   reread_us    = 0.5 · 7,197,425,664 / (4.8e6 · 0.86) = 871.781 µs
  const shape = {
    tokens: 2048,
    hidden: 4096,
    inter: 14336,
    topk: 2,
    experts: 8,
    tp: 1,
    ep: 1,
    routing: 'balanced' as const,
  };
  const rates = { peak_flops_per_us: 0.989e9, hbm_bytes_per_us: 4.8e6, hbm_derate: 0.86, bytes_per_element: 2 };
  const c: ExpertCoefficients = {
    floor_us: 30,
    eps_max: 0.7,
    m_half: 0,
    route_bytes_per_us: Infinity,
    expert_us: 0,
    pair_bytes_per_us: Infinity,
    reread: 0.5,
  };
  it('passes, L2 miss and bytes', () => {
    expect(expertRereadPasses(128)).toBe(0);
    expect(expertRereadPasses(128.0000000001)).toBe(0); // a rounding excess does not start a tile
    expect(expertRereadPasses(129)).toBe(1);
    expect(expertRereadPasses(512)).toBe(3);
    expect(l2MissFraction(352_321_536, 52_428_800)).toBeCloseTo(0.851190476, 9);
    expect(l2MissFraction(5_505_024, 52_428_800)).toBe(0); // DeepSeek-V3's fp8 expert at tp 8 fits
    expect(l2MissFraction(352_321_536, undefined)).toBe(0);
    expect(expertWork(shape, 2, 52_428_800).reread_bytes).toBeCloseTo(7_197_425_664, 0);
    expect(expertWork(shape, 2).reread_bytes).toBe(0); // no L2 size: nothing re-read
  });
  it('charged as a read, added to the sum and to the read side of the max', () => {
    const l2 = { ...rates, l2_bytes: 52_428_800 };
    expect(expertLayerUs(shape, c, l2) - expertLayerUs(shape, { ...c, reread: 0 }, l2)).toBeCloseTo(871.781, 3);
    expect(expertLayerUs(shape, c, rates)).toBe(expertLayerUs(shape, { ...c, reread: 0 }, rates));
    // Arithmetic 6·4096·14336·4096 / (0.989e9·0.7) = 2,085.1 µs exceeds read 8·352,321,536/(4.8e6·0.86) = 682.8 µs plus the
    // re-read 871.8 µs, so the max is floor + arithmetic either way.
    expect(expertLayerMaxUs(shape, c, l2)).toBeCloseTo(expertLayerMaxUs(shape, { ...c, reread: 0 }, l2), 9);
  });
});

describe('expert law: one layer by hand', () => {
  // DeepSeek-V3's MoE layer at tp 8 on h200 in fp8_block, one token:
  //   L = 256/1 = 256 local experts, I' = 2048/8 = 256, D = 256·(1 − (248/256)^1) = 8 touched, P = 1·8·256/256 = 8 pairs
  //   W = 2·3·7168·256 = 11,010,048 FLOPs per pair; weight bytes = 8·3·7168·256·1 B = 44,040,192 B
  //   read  = 44,040,192 / (4.8e6 · 0.8) = 11.468800 µs
  //   arith = 11,010,048 · (8 + 8·9) / (1.979e9 · 0.5) = 880,803,840 / 989.5e6 = 0.890150 µs
  //   route = 1·8·7168·2 B / 4e6 B/µs = 114,688 / 4e6 = 0.028672 µs
  //   touch = D · expert_us = 8 · 0.5 = 4 µs
  //   pair  = P·H·2 B / pair_rate = 8·7168·2 / 5e6 = 114,688 / 5e6 = 0.0229376 µs
  //   sum   = 30 + 4 + 11.468800 + 0.890150 + 0.028672 + 0.0229376 = 46.4105596 µs
  //   max   = 30 + 4 + 11.468800 + 0.028672 + 0.0229376 = 45.5204096 µs  (read 11.47 > arith 0.89)
  const shape = { tokens: 1, hidden: 7168, inter: 2048, topk: 8, experts: 256, tp: 8, ep: 1 };
  const c: ExpertCoefficients = {
    floor_us: 30,
    eps_max: 0.5,
    m_half: 9,
    route_bytes_per_us: 4e6,
    expert_us: 0.5,
    pair_bytes_per_us: 5e6,
  };
  const rates = { peak_flops_per_us: 1.979e9, hbm_bytes_per_us: 4.8e6, hbm_derate: 0.8, bytes_per_element: 1 };
  it('work terms', () => {
    const w = expertWork(shape, 1);
    expect(w.touched).toBeCloseTo(8, 12);
    expect(w.pairs).toBe(8);
    expect(w.flops_per_pair).toBe(11_010_048);
    expect(w.weight_bytes).toBeCloseTo(44_040_192, 3);
    expect(w.route_bytes).toBe(114_688);
    expect(w.pair_bytes).toBe(114_688); // at ep 1 every routed copy is the rank's own pair: P·H·2 = T·k·H·2
  });
  it('sum and max', () => {
    expect(expertLayerUs(shape, c, rates)).toBeCloseTo(46.4105596, 5);
    expect(expertLayerMaxUs(shape, c, rates)).toBeCloseTo(45.5204096, 5);
    // Without the touch and pair terms the law is the seed's plus route: 42.387622 µs.
    expect(expertLayerUs(shape, { ...c, expert_us: 0, pair_bytes_per_us: Infinity }, rates)).toBeCloseTo(42.387622, 5);
  });
  it('ep shards the experts: ep 8 keeps 32 local experts, so one token touches 8·32/256 = 1 of them on average', () => {
    const w = expertWork({ ...shape, tp: 1, ep: 8 }, 1);
    expect(w.pairs).toBe(1);
    expect(w.touched).toBeCloseTo(32 * (1 - 248 / 256), 12); // = 1
    // The route still moves all T·k = 8 routed copies; the rank's own pairs are 1 row of H: 7168·2 B.
    expect(w.route_bytes).toBe(114_688);
    expect(w.pair_bytes).toBe(14_336);
  });
  it("balanced routing (the tables' balanced rows) touches distinct experts until all are: D = min(L, max(1, ⌈P⌉))", () => {
    // ep 8: L = 32 local experts. 4 tokens: P = 4·8·32/256 = 4 pairs on 4 distinct experts; the law expects
    // 32·(1 − (248/256)^4) = 32·(1 − 0.880738) = 3.8164 (collisions). 64 tokens: P = 64 > L, all 32 touched
    // (the law: 32·(1 − (248/256)^64) = 32·(1 − 0.131084) = 27.805).
    const at = (tokens: number, routing?: 'balanced') => expertWork({ ...shape, tokens, tp: 1, ep: 8, routing }, 1);
    expect(at(4, 'balanced').touched).toBe(4);
    expect(at(4).touched).toBeCloseTo(3.8164, 3);
    expect(at(64, 'balanced').touched).toBe(32);
    expect(at(64).touched).toBeCloseTo(27.805, 2);
    // A fraction of a pair (ep 256: L = 1, P = 8/256 at one token) still runs its one expert.
    expect(expertWork({ ...shape, tp: 1, ep: 256, routing: 'balanced' }, 1).touched).toBe(1);
    expect(at(4, 'balanced').tokens_per_expert).toBe(1);
  });
});

/** Synthetic table from known coefficients: 6 shapes × tp/ep × 15 token counts, ±3% seeded noise. */
function synthetic(
  c: ExpertCoefficients,
  derate: number,
  dtype = 'fp8_block',
  kernel_source = 'k',
  modes: ReadonlyArray<readonly [number, number]> = [
    [1, 1],
    [4, 1],
    [1, 8],
  ],
): MoeRow[] {
  const rand = seededRandom(11);
  const rates = {
    peak_flops_per_us: 1.979e9,
    hbm_bytes_per_us: H200.hbm_bytes_per_us,
    hbm_derate: derate,
    bytes_per_element: 1,
    l2_bytes: l2Bytes(H200.l2_mib),
  };
  const rows: MoeRow[] = [];
  const shapes = [
    [7168, 2048, 8, 384], // Kimi-K2 (DeepSeek-V3's 256-expert geometry routes by groups: its balanced series are left out, below)
    [4096, 1536, 8, 128],
    [2048, 768, 8, 128],
    [6144, 2560, 8, 160],
    [4096, 14336, 2, 8],
    [5120, 8192, 1, 128],
  ] as const;
  for (const [hidden, inter, topk, experts] of shapes)
    for (const [tp, ep] of modes)
      for (const tokens of [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]) {
        // The tables' balanced rows: the collector's balanced routing, the D the fit uses on them.
        const t = expertLayerUs({ tokens, hidden, inter, topk, experts, tp, ep, routing: 'balanced' }, c, rates);
        const base = {
          chip: 'h200',
          lane: 'vllm-0.24.0',
          kernel_source,
          tokens,
          hidden,
          inter,
          topk,
          experts,
          tp,
          ep,
          dtype,
          distribution: 'balanced',
        };
        rows.push({ ...base, latency_us: t * (1 + 0.06 * (rand() - 0.5)) });
      }
  return rows;
}

/** A model folder in `dir` with a graph.yaml (what knownModels lists) and this config.json. */
function putModel(dir: string, name: string, config: unknown): void {
  mkdirSync(path.join(dir, name));
  writeFileSync(path.join(dir, name, 'graph.yaml'), '');
  writeFileSync(path.join(dir, name, 'config.json'), JSON.stringify(config));
}

describe('balanced series of a geometry routed by groups are left out (core/catalog/group-routing.ts)', () => {
  it('the shipped catalog: DeepSeek-V3, R1 and V3.2 route by groups (n_group 8, topk_group 4); Kimi-K2 (n_group 1) does not', () => {
    const g = groupRoutedModels();
    expect(g.map((m) => m.model)).toEqual(['deepseek-r1', 'deepseek-v3', 'deepseek-v3.2', 'deepseek-v3.2-nvfp4']);
    for (const m of g)
      expect([m.hidden, m.inter, m.experts, m.topk, m.n_group, m.topk_group]).toEqual([7168, 2048, 256, 8, 8, 4]);
  });
  it('a config in text_config counts; topk_group = n_group (no limit) and a dense config do not', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'stepcal-groups-'));
    const moe = { hidden_size: 1024, moe_intermediate_size: 256, n_routed_experts: 64, num_experts_per_tok: 4 };
    putModel(dir, 'nested', { text_config: { ...moe, n_group: 4, topk_group: 2 } });
    putModel(dir, 'unlimited', { ...moe, n_group: 4, topk_group: 4 });
    putModel(dir, 'dense', { hidden_size: 1024 });
    mkdirSync(path.join(dir, 'no-config'));
    writeFileSync(path.join(dir, 'no-config', 'graph.yaml'), '');
    expect(groupRoutedModels(dir)).toEqual([
      expect.objectContaining({
        model: 'nested',
        hidden: 1024,
        inter: 256,
        experts: 64,
        topk: 4,
        n_group: 4,
        topk_group: 2,
      }),
    ]);
    expect(groupRoutedModels(dir)[0]!.config_sha256).toMatch(/^[0-9a-f]{64}$/);
  });
  it('bad configs are refused naming the file: not an object, a malformed routing field, sizes missing, not a file', () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['null', null, /config\.json: expected a JSON object, got null/],
      ['list', [], /expected a JSON object, got \[\]/],
      ['text-group', { n_group: '8', topk_group: 4 }, /config\.json: n_group must be a positive integer, got "8"/],
      [
        'no-sizes',
        { n_group: 8, topk_group: 4, hidden_size: 7168 },
        /routes by groups \(n_group 8, topk_group 4\) but has no moe_intermediate_size, n_routed_experts, num_experts_per_tok/,
      ],
    ];
    for (const [name, config, want] of cases) {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'stepcal-groups-bad-'));
      putModel(dir, name, config);
      expect(() => groupRoutedModels(dir), name).toThrow(UserError);
      expect(() => groupRoutedModels(dir), name).toThrow(want);
      expect(() => groupRoutedModels(dir), name).toThrow(path.join(dir, name, 'config.json'));
    }
    const dir = mkdtempSync(path.join(os.tmpdir(), 'stepcal-groups-dir-'));
    mkdirSync(path.join(dir, 'm', 'config.json'), { recursive: true });
    writeFileSync(path.join(dir, 'm', 'graph.yaml'), '');
    expect(() => groupRoutedModels(dir)).toThrow(/m\/config\.json: cannot read it \(not a file\)/);
  });
  it('expertSeries: the balanced series of the geometry go to group_routed, its power-law series stay', () => {
    const rates = {
      peak_flops_per_us: 1.979e9,
      hbm_bytes_per_us: H200.hbm_bytes_per_us,
      hbm_derate: 0.86,
      bytes_per_element: 1,
    };
    const row = (distribution: string, experts: number, tokens: number): MoeRow => ({
      chip: 'h200',
      lane: 'vllm-0.24.0',
      kernel_source: 'k',
      tokens,
      hidden: 7168,
      inter: 2048,
      topk: 8,
      experts,
      tp: 1,
      ep: 8,
      dtype: 'fp8_block',
      distribution,
      latency_us: 100 + tokens,
    });
    const rows = [256, 384].flatMap((e) =>
      ['balanced', 'power_law_1.01'].flatMap((d) => [16, 64, 256].map((t) => row(d, e, t))),
    );
    const grouped = new Map([
      ['h7168/i2048/e256/top8', { why: 'deepseek-v3; n_group 8, topk_group 4', n_group: 8, topk_group: 4 }],
    ]);
    const bal = expertSeries(rows, 'fp8_block', 'balanced', rates, grouped);
    expect(bal.group_routed.map((s) => s.geometry)).toEqual(['h7168/i2048/e256/top8']);
    expect(bal.series.map((s) => s.geometry)).toEqual(['h7168/i2048/e384/top8']);
    const skew = expertSeries(rows, 'fp8_block', 'power_law_1.01', rates, grouped);
    expect(skew.group_routed).toEqual([]);
    expect(skew.series.map((s) => s.geometry).sort()).toEqual(['h7168/i2048/e256/top8', 'h7168/i2048/e384/top8']);
  });
  it('the shipped h200 fp8_block fit leaves out the DeepSeek-V3 balanced series and says so in the evidence', () => {
    const reg = parseCoefficientSets(readText(path.join(REPO_ROOT, 'registry', 'h200.yaml')), 'h200.yaml');
    const e = reg.flatMap((s) => s.coefficients).find((c) => c.name === 'moe_expert_floor_fp8_block')!.entry;
    expect(e.evidence!.inputs![0]!.filter).toMatch(/; (\d+) balanced series of group-routed geometries left out/);
    // Scored with the law fitted without them and their routing emulated: within the 1.15 (1.090 at session 15;
    // with balanced routing they scored 1.78).
    const check = (e.evidence!.notes ?? [])
      .map((n) => /left-out group-routed rows scored .*: geo ([\d.]+), bias ([\d.]+) over (\d+)/.exec(n))
      .find((m) => m);
    expect(check, 'the cross-geometry check note').toBeTruthy();
    expect(Number(check![1])).toBeLessThan(1.15);
    expect(Number(check![3])).toBe(351);
  });
});

describe('fitMoeExperts recovers known coefficients', () => {
  const truth: ExpertCoefficients = {
    floor_us: 32,
    eps_max: 0.45,
    m_half: 12,
    route_bytes_per_us: 2e6,
    expert_us: 1.5,
    pair_bytes_per_us: 1.5e6,
    // (4096, 14336) fp8 experts (176 MB each, past h200's 50 MiB L2) at tp 1 run m up to 4,096: 31 passes re-read, the
    // first (m = 256 at 1,024 tokens) below the tokens holdout's cut (2,048).
    reread: 0.8,
    // The tokens' own rows: the shapes route each token to 8, 2 or 1 experts, so it is told apart from the route term.
    token_bytes_per_us: 1e6,
  };
  const fit = fitMoeExperts(synthetic(truth, 0.86), ctx(0.86));
  const f = fit.data.fits.find((x) => x.dtype === 'fp8_block')!;
  it('each within its ci95 and within 10% of the truth', () => {
    expect(f).toBeDefined();
    for (const k of LAW_COEFS) {
      const v = f.coefficients[k]!;
      const t = truth[k]!;
      expect(f.ci95[k][0], k).toBeLessThanOrEqual(t);
      expect(f.ci95[k][1], k).toBeGreaterThanOrEqual(t);
      expect(Math.abs(v / t - 1), k).toBeLessThan(0.1);
    }
    expect(f.train.geo).toBeLessThan(1.03);
    expect(f.holdout_tokens!.geo).toBeLessThan(1.05);
    expect(f.holdout_shape!.geo).toBeLessThan(1.05);
    expect(f.distribution).toBe('balanced');
  });
  it('writes eight entries per dtype that pass the gates, and the sum beats the max on data made by the sum', () => {
    expect(fit.coefficients.map((c) => c.name)).toEqual([
      'moe_expert_floor_fp8_block',
      'moe_expert_eps_max_fp8_block',
      'moe_expert_m_half_fp8_block',
      'moe_expert_route_rate_fp8_block',
      'moe_expert_per_expert_fp8_block',
      'moe_expert_pair_rate_fp8_block',
      'moe_expert_reread_fp8_block',
      'moe_expert_token_rate_fp8_block',
    ]);
    expect(applyGates(H200, fit.coefficients)).toEqual([]);
    expect(f.sum_vs_max!.sum_better).toBe(true);
    expect(fit.coefficients[0]!.entry.evidence!.family).toBe('moe_experts');
  });
  it('rows of one k: the token column is the route column over k, so the token term is pinned free and the route carries both', () => {
    // Only the top-8 shapes: X = T·H·2 = R / 8 on every row, so 1/route_rate + 1/(8·token_rate) is one unknown:
    // 1 / (1/2e6 + 1/(8·1e6)) = 1 / (5e-7 + 1.25e-7) = 1.6e6 B/µs.
    const rows = synthetic(truth, 0.86).filter((r) => r.topk === 8);
    const g = fitMoeExperts(rows, ctx(0.86));
    const one = g.data.fits.find((x) => x.dtype === 'fp8_block')!;
    expect(one.coefficients.token_bytes_per_us).toBe(Infinity);
    expect(one.pinned).toContain('token_rate (not written: free)');
    expect(Math.abs(one.coefficients.route_bytes_per_us / 1.6e6 - 1)).toBeLessThan(0.1);
    expect(g.coefficients.map((c) => c.name)).not.toContain('moe_expert_token_rate_fp8_block');
  });
  it('falls back to power_law_1.01 rows when a table has no balanced routing (a100) and says so', () => {
    const rows = synthetic(truth, 0.86).map((r) => ({ ...r, distribution: 'power_law_1.01' }));
    const g = fitMoeExperts(rows, ctx(0.86)).data.fits[0]!;
    expect(g.distribution).toBe('power_law_1.01');
    expect(String(fitMoeExperts(rows, ctx(0.86)).coefficients[0]!.entry.sources![0]!.cite)).toContain(
      'distribution power_law_1.01',
    );
  });
  it('the report section names every dtype, the panel and a figure', () => {
    const s = moeExpertsSection(fit.data);
    expect(s.md).toContain('| fp8_block | balanced |');
    expect(s.md).toContain('Sum or max?');
    expect(s.figures.map((x) => x.name)).toEqual(['moe_experts_fp8_block.svg', 'moe_experts_residuals.svg']);
    // Data made by the law itself: both holdouts within the goal, and the residual plot's rows near 1.
    expect(s.md).toContain('| fp8_block | ');
    expect(s.md).toContain('Met on every dtype.');
    expect(f.bias_by_tokens.map((r) => r.tokens)).toEqual([
      1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
    ]);
    for (const r of f.bias_by_tokens) {
      expect(Math.abs(Math.log(r.all_rows)), `${r.tokens}`).toBeLessThan(0.03);
      expect(Math.abs(Math.log(r.below_cut!)), `${r.tokens}`).toBeLessThan(0.05);
    }
    expect(s.figures[0]!.svg.startsWith('<svg')).toBe(true);
  });
});

describe('per-kernel sets: the lane\'s kernel per ep mode, fitted on its own rows (docs/pricer.md "Expert kernels")', () => {
  // h200 fp8_block as the tables have it: Triton at ep 1 (tp 1, 4), FlashInfer CUTLASS at ep 8, no configuration on both.
  const triton: ExpertCoefficients = {
    floor_us: 20,
    eps_max: 0.3,
    m_half: 6,
    route_bytes_per_us: 2e6,
    expert_us: 0.5,
    pair_bytes_per_us: 3e6,
    reread: 0.5,
    token_bytes_per_us: 5e5,
  };
  const cutlass: ExpertCoefficients = {
    floor_us: 45,
    eps_max: 0.6,
    m_half: 20,
    route_bytes_per_us: 1.5e6,
    expert_us: 2,
    pair_bytes_per_us: 1e6,
    reread: 1.2,
    token_bytes_per_us: 1.2e6,
  };
  const T = 'vllm_fp8moe_triton_tritonexperts';
  const C = 'vllm_fp8moe_flashinfer_cutlass_flashinferexperts';
  const rows = [
    ...synthetic(triton, 0.86, 'fp8_block', T, [
      [1, 1],
      [4, 1],
    ]),
    ...synthetic(cutlass, 0.86, 'fp8_block', C, [
      [1, 8],
      [1, 4],
    ]),
  ];
  const fit = fitMoeExperts(rows, ctx(0.86));
  const set = (name: string) => fit.data.kernel_fits.find((f) => f.set === name)!;
  it('names each set by dtype, kernel tag and the one ep mode it runs at; the pooled set stays', () => {
    expect(fit.data.fits.map((f) => f.set)).toEqual(['fp8_block']);
    expect(fit.data.kernel_fits.map((f) => f.set)).toEqual(['fp8_block_triton_ep1', 'fp8_block_cutlass_epn']);
    expect(set('fp8_block_triton_ep1').kernels).toEqual([T]);
    expect(set('fp8_block_cutlass_epn').points.every((p) => p.ep > 1)).toBe(true);
    const names = fit.coefficients.map((c) => c.name);
    expect(names).toContain('moe_expert_eps_max_fp8_block');
    expect(names).toContain('moe_expert_eps_max_fp8_block_triton_ep1');
    expect(names).toContain('moe_expert_pair_rate_fp8_block_cutlass_epn');
    // At ep 1 the pair bytes are the route bytes (P = T·k): one unknown, written as the route rate only.
    expect(names).not.toContain('moe_expert_pair_rate_fp8_block_triton_ep1');
    expect(applyGates(H200, fit.coefficients)).toEqual([]);
  });
  it('recovers each kernel within its ci95; at ep 1 the route rate carries route and pair: 1/(1/2e6 + 1/3e6) = 1.2e6 B/µs', () => {
    const ep1 = { ...triton, route_bytes_per_us: 1 / (1 / 2e6 + 1 / 3e6), pair_bytes_per_us: Infinity };
    expect(ep1.route_bytes_per_us).toBeCloseTo(1.2e6, 0);
    for (const [name, truth] of [
      ['fp8_block_triton_ep1', ep1],
      ['fp8_block_cutlass_epn', cutlass],
    ] as const) {
      const f = set(name);
      for (const k of LAW_COEFS) {
        const t = truth[k]!;
        if (!Number.isFinite(t)) {
          expect(f.coefficients[k], `${name} ${k}`).toBe(Infinity);
          continue;
        }
        expect(f.ci95[k][0], `${name} ${k}`).toBeLessThanOrEqual(t);
        expect(f.ci95[k][1], `${name} ${k}`).toBeGreaterThanOrEqual(t);
        expect(Math.abs(f.coefficients[k]! / t - 1), `${name} ${k}`).toBeLessThan(0.1);
      }
      expect(f.holdout_shape!.geo, name).toBeLessThan(1.05);
      expect(f.holdout_tokens!.geo, name).toBeLessThan(1.05);
    }
    // Pooled over two kernels with different rates the one law misses both; each kernel's own law does not.
    expect(fit.data.fits[0]!.train.geo).toBeGreaterThan(set('fp8_block_triton_ep1').train.geo + 0.05);
  });
  it('a kernel that serves the whole grid at every ep is one set; a kernel of a few appended shapes is not fitted', () => {
    const M = 'vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic';
    const few = synthetic(cutlass, 0.86, 'fp8_block', C).filter((r) => r.hidden === 7168);
    const g = fitMoeExperts([...synthetic(triton, 0.86, 'fp8_block', M), ...few], ctx(0.86));
    expect(g.data.kernel_fits.map((f) => f.set)).toEqual(['fp8_block_trtllm']);
    expect(g.data.kernel_fits[0]!.kernels).toEqual([M]);
  });
  it('one kernel per dtype: no kernel set, nothing noted', () => {
    const g = fitMoeExperts(synthetic(triton, 0.86, 'fp8_block', T), ctx(0.86));
    expect(g.data.kernel_fits).toEqual([]);
    expect(g.data.not_fitted).toEqual([]);
  });
});

describe('the sum-vs-max search rejects a losing poll early without changing its result', () => {
  // fitExpertLogL1 stops summing |ln(pred/meas)| once a poll's partial mean reaches the search's best (the
  // terms are ≥ 0, so it cannot be kept). If a partial mean were ever kept, the reported geo would be below
  // the error of the returned coefficients: recomputed here in full over every point, both compositions.
  it.each(['sum', 'max'] as const)('%s: the reported geo is the full error of the returned coefficients', (compose) => {
    const truth: ExpertCoefficients = {
      floor_us: 30,
      eps_max: 0.4,
      m_half: 8,
      route_bytes_per_us: 3e6,
      expert_us: 0.3,
      pair_bytes_per_us: 8e5,
    };
    const rates = {
      peak_flops_per_us: 1.979e9,
      hbm_bytes_per_us: H200.hbm_bytes_per_us,
      hbm_derate: 0.86,
      bytes_per_element: 1,
      l2_bytes: l2Bytes(H200.l2_mib),
    };
    // Four (tp, ep) modes: 6 shapes × 4 × 15 token counts = 360 points, more than one 256-point chunk between checks.
    const modes = [
      [1, 1],
      [4, 1],
      [1, 8],
      [2, 2],
    ] as const;
    const { series } = expertSeries(synthetic(truth, 0.86, 'fp8_block', 'k', modes), 'fp8_block', 'balanced', rates);
    const points = series.flatMap((x) => x.points);
    expect(points.length).toBe(360);
    const start = fitExpertSum(series)!;
    // A start 40 % off in every coefficient, so the search moves (and rejects) many polls.
    const off: ExpertCoefficients = { ...start };
    for (const k of LAW_COEFS) off[k] = Math.min(start[k]!, 1e12) * 1.4;
    const r = fitExpertLogL1(points, compose, off);
    const full = expertError(points, r.c, compose).geo;
    expect(Math.abs(r.geo / full - 1)).toBeLessThan(1e-12);
    expect(r.geo).toBeLessThan(expertError(points, off, compose).geo); // it did improve on the start
    // The same search on a plain objective (every |ln(pred/meas)| summed, nothing stopped early): the
    // coefficients and value bit for bit, so neither the bound nor the early stop changed a decision.
    const plain = (x: readonly number[]) => {
      const [fl, inv, mh, invR, ex, invQ, rr, invX] = x.map((v, k) => Math.exp([1, 3, 5, 7].includes(k) ? -v : v));
      let s = 0;
      for (const p of points) {
        const f = p.f;
        const ar = (f[1] + f[2] * mh!) * inv!;
        const rd = p.read_us + f[6] * rr!;
        const fixed = fl! + f[3] * invR! + f[4] * ex! + f[5] * invQ! + f[7] * invX!;
        s += Math.abs(Math.log((fixed + (compose === 'sum' ? rd + ar : Math.max(rd, ar))) / p.latency_us));
      }
      return s / points.length;
    };
    const x0 = [
      off.floor_us,
      off.eps_max,
      off.m_half,
      Math.min(off.route_bytes_per_us, 1e12),
      off.expert_us,
      Math.min(off.pair_bytes_per_us, 1e12),
      off.reread ?? 0,
      Math.min(off.token_bytes_per_us ?? Infinity, 1e12),
    ].map((v) => Math.log(Math.max(v, 1e-3)));
    const ref = patternSearch(plain, x0, new Array(8).fill(0.5), { minStep: 0.02, maxEvals: 160 });
    expect(r.geo).toBe(Math.exp(ref.value));
    expect(r.c.floor_us).toBe(Math.exp(ref.x[0]!));
    expect(r.c.eps_max).toBe(Math.exp(ref.x[1]!));
    expect(r.c.token_bytes_per_us).toBe(Math.exp(ref.x[7]!));
  });
});

describe('bounds and screen', () => {
  it('eps_max never exceeds 1: data faster than the peak pins it at the bound', () => {
    const truth: ExpertCoefficients = {
      floor_us: 20,
      eps_max: 1.6,
      m_half: 0,
      route_bytes_per_us: Infinity,
      expert_us: 0,
      pair_bytes_per_us: Infinity,
    };
    const rates = {
      peak_flops_per_us: 1.979e9,
      hbm_bytes_per_us: H200.hbm_bytes_per_us,
      hbm_derate: 0.86,
      bytes_per_element: 1,
    };
    const { series } = expertSeries(synthetic(truth, 0.86), 'fp8_block', 'balanced', rates);
    const x = solveNonNegative(sumNormals(series.map(seriesNormal)))!;
    expect(x[1]).toBe(1); // c1 = 1/eps_max at its lower bound
    expect(x.every((v) => v >= 0)).toBe(true);
  });
  it('a series that runs much faster with more tokens is screened out', () => {
    const rows = synthetic(
      { floor_us: 30, eps_max: 0.4, m_half: 8, route_bytes_per_us: 3e6, expert_us: 0, pair_bytes_per_us: Infinity },
      0.86,
    );
    const bad = rows.map((r) =>
      r.hidden === 2048 && r.tp === 1 && r.ep === 1 && r.tokens === 4096 ? { ...r, latency_us: r.latency_us * 0.3 } : r,
    );
    const rates = {
      peak_flops_per_us: 1.979e9,
      hbm_bytes_per_us: H200.hbm_bytes_per_us,
      hbm_derate: 0.86,
      bytes_per_element: 1,
    };
    const s = expertSeries(bad, 'fp8_block', 'balanced', rates);
    expect(s.screened.map((x) => x.key)).toEqual(['k|2048|768|128|8|1|1']);
    expect(s.series).toHaveLength(17);
  });
});

/** Chips with a stored fused-MoE table, and their committed hbm_derate. */
const moeChips = readdirSync(path.join(REPO_ROOT, 'measurements'), { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .map((d) => d.name)
  .filter((c) => listMeasurementFiles(path.join(REPO_ROOT, 'measurements', c)).some((f) => f.family === 'moe'))
  .sort();
const derateOf = (chip: string): number => {
  const sets = parseCoefficientSets(readText(path.join(REPO_ROOT, 'registry', `${chip}.yaml`)), chip);
  return sets.flatMap((s) => s.coefficients).find((c) => c.name === 'hbm_derate')!.entry.value;
};

/**
 * Chips where the sum fits clearly better. On rtx-pro-6000 the two compositions are within 0.05% of each other
 * (mean geo 1.161 both, 2026-12-02; its bf16 and fp8 prefer the max; docs/fitting.md "Sum vs max"): there the test
 * asserts only that the max is not better by more than MAX_AHEAD.
 */
const SUM_CLEARLY_BETTER = ['a100', 'b200', 'gb200', 'h100', 'h200', 'l40s'];
/** How far (relative geo) the max may be ahead where the two are indistinguishable. */
const MAX_AHEAD = 0.005;

describe('seed footnote 1 on the shipped tables: does the sum fit the measured expert timings better than the max?', () => {
  it('covers every shipped chip with a fused-MoE table (the five curated, gb200 and the onboarded rtx-pro-6000)', () =>
    expect(moeChips).toEqual(['a100', 'b200', 'gb200', 'h100', 'h200', 'l40s', 'rtx-pro-6000']));
  it.each(moeChips)('%s', (chip) => {
    const c = loadChip(chip);
    const rows = readMeasurements(path.join(REPO_ROOT, 'measurements', chip), 'moe', { required: false });
    const fit = fitMoeExperts(rows, ctx(derateOf(chip), c));
    const v = sumVsMaxVerdict(fit.data)!;
    expect(fit.data.fits.length).toBeGreaterThan(0);
    // Issue 13's 1.15× goal is missed on every chip (docs/fitting.md): the README section says so with its residual plot.
    const md = moeExpertsSection(fit.data).md;
    expect(md).toMatch(/Not met on [1-9]\d* of \d+ sets/);
    expect(md).toContain('![residuals](moe_experts_residuals.svg)');
    const bound = SUM_CLEARLY_BETTER.includes(chip) ? v.max_geo : v.max_geo * (1 + MAX_AHEAD);
    expect(v.sum_geo, `${chip}: sum ${v.sum_geo} vs max ${v.max_geo}`).toBeLessThan(bound);
  });
});
