/**
 * Golden prices (issue 17 "results bit-identical"): every StepPrice total of a handful of deployments and
 * batches, recorded at 3c3a644 (before the columnar batch, the allocation-free terms and the uniform-decode
 * walk) and compared with toBe, so any change that moves a price by one ulp fails here and must say why.
 * The coefficients are the fixtures only (BLIS H200, and syntheticSets: the same values re-scoped per chip),
 * so a refit of the shipped registries does not move them. Both batch forms (Batch and ColumnBatch) and
 * both entries (price, priceInto) must give these numbers. How they were recorded: `price(batch)` on each
 * case, its fields printed with JSON.stringify (shortest round-trip form of each double).
 * Batches: decode 256 @ 4095 cached; mixed = those 256 decodes + 2 prefill chunks of 2,048 on 1,024 cached;
 * new = 64 decodes @ 8,191 + 1 prefill chunk of 2,048 on 4,096 (the issue-14 bench batch).
 */
import { describe, expect, it } from 'vitest';
import { columnsOf, decodeBatch, prefillBatch } from '../../src/pricer/batch.ts';
import { emptyStepPrice } from '../../src/pricer/compose.ts';
import type { Batch, StepPrice } from '../../src/pricer/types.ts';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { BLIS_H200, makePricer, syntheticSets } from './helpers.ts';

const decode = decodeBatch(256, 4095);
const BATCHES: Record<string, Batch> = {
  'decode 256 @ 4095': decode,
  mixed: { requests: [...decode.requests, ...prefillBatch(2, 2048, 1024).requests] },
  new: { requests: [...decodeBatch(64, 8191).requests, ...prefillBatch(1, 2048, 4096).requests] },
};

type Golden = [
  model: string,
  chip: string,
  tp: number,
  spec: number,
  sets: 'blis' | 'syn',
  batch: string,
  totals: [overlap: number, cm_overlap: number, no_overlap: number],
  bottleneck: string,
  resources: [sm: number, hbm: number, nvlink: number, nic: number, host: number],
  notes: number,
];

// biome-ignore format: one recorded case per line
const GOLDEN: Golden[] = [
  ['llama-3.1-70b', 'h200', 8, 0, 'blis', 'decode 256 @ 4095', [25127.403471135895, 32318.304574253405, 38769.67100520201], 'hbm', [6478.718958874635, 22526.650943209876, 7190.901103117507, 0, 2573.4], 0],
  ['llama-3.1-70b', 'h200', 8, 0, 'blis', 'mixed', [113426.65901966426, 200073.27030656382, 228220.2143037175], 'nvlink', [86745.08674084337, 28154.00880987654, 110187.7187529976, 0, 3133.4], 0],
  ['llama-3.1-70b', 'h200', 8, 0, 'blis', 'new', [57081.15970071943, 106520.235503748, 123272.14180191136], 'nvlink', [49485.90516292034, 16791.5025382716, 53861.334100719425, 0, 3133.4], 0],
  ['deepseek-v3', 'h200', 8, 1, 'syn', 'decode 256 @ 4095', [41647.91750462652, 46597.25231517808, 48245.261574429576], 'hbm', [3011.5120638249214, 36470.01470005309, 4949.334810551559, 0, 3814.4], 1],
  ['deepseek-v3', 'h200', 8, 1, 'syn', 'mixed', [116361.75437393413, 150243.90820017847, 169511.72646169452], 'nvlink', [49970.41876974975, 40932.855912568295, 74794.05177937649, 0, 3814.4], 1],
  ['deepseek-v3', 'h200', 8, 1, 'syn', 'new', [70315.340969442, 98350.78700409758, 108729.23904262597], 'nvlink', [36215.97556595812, 32101.14128961749, 36597.72218705035, 0, 3814.4], 1],
  ['glm-5', 'b200', 8, 0, 'syn', 'decode 256 @ 4095', [62036.94104855662, 67478.9774802113, 68828.84466988871], 'hbm', [2277.4358280258066, 55383.972410208225, 5442.036431654677, 0, 5725.400000000001], 7],
  ['glm-5', 'b200', 8, 0, 'syn', 'mixed', [128354.66852975212, 159083.26112158006, 188167.8181420037], 'nvlink', [42076.0430336, 58515.91577027417, 80758.45933812951, 0, 6817.400000000001], 6],
  ['glm-5', 'b200', 8, 0, 'syn', 'new', [81480.14021156551, 103395.22602317842, 115046.0405978281], 'hbm', [27565.042710847312, 41093.80732582972, 39569.79056115108, 0, 6817.400000000001], 6],
  ['deepseek-v4-flash', 'gb200', 8, 0, 'syn', 'decode 256 @ 4095', [9886.924885161125, 11737.766105890449, 12066.520974418921], 'hbm', [410.0538134901408, 5600.78248946595, 2135.08467146283, 0, 3920.6000000000004], 10],
  ['deepseek-v4-flash', 'gb200', 8, 0, 'syn', 'mixed', [37954.90636113871, 48055.1021291209, 54855.62508577728], 'nvlink', [7784.262222926991, 13034.28344798219, 29815.479414868103, 0, 4221.6], 7],
  ['deepseek-v4-flash', 'gb200', 8, 0, 'syn', 'new', [22303.598035123126, 28032.76229315933, 32215.72650543714], 'nvlink', [5115.4131685646, 8200.949797304189, 14677.763539568346, 0, 4221.6], 7],
  ['qwen3.5-397b-a17b', 'h200', 8, 0, 'syn', 'decode 256 @ 4095', [38943.556922052005, 41922.74483572106, 42805.94973074896], 'hbm', [4749.26030343119, 32280.101513648704, 2979.187913669065, 0, 2797.4], 1],
  ['qwen3.5-397b-a17b', 'h200', 8, 0, 'syn', 'mixed', [78652.71694803532, 96740.2287386516, 104547.56927950474], 'nvlink', [23598.199843426944, 36128.9749037037, 41602.9945323741, 0, 3217.4], 1],
  ['qwen3.5-397b-a17b', 'h200', 8, 0, 'syn', 'new', [53207.34977155165, 61612.03703294563, 66856.81515855485], 'hbm', [12153.32915226654, 31005.485718518525, 20480.600287769787, 0, 3217.4], 1],
  ['gpt-oss-120b', 'h200', 4, 0, 'syn', 'decode 256 @ 4095', [11029.38125735932, 12438.102350483778, 12702.314855072276], 'hbm', [963.3626955549398, 8800.184639935092, 1427.7675195822455, 0, 1511], 1],
  ['gpt-oss-120b', 'h200', 4, 0, 'syn', 'mixed', [33141.92089011508, 39231.80942070419, 43596.48178065572], 'nvlink', [12966.41439220199, 9698.379555555555, 19168.687832898173, 0, 1763], 1],
  ['gpt-oss-120b', 'h200', 4, 0, 'syn', 'new', [19328.672266862086, 23262.870860482195, 26348.532205088013], 'nvlink', [8037.369724090043, 7081.540444444444, 9466.622036553526, 0, 1763], 1],
];

function expectGolden(p: StepPrice, g: Golden): void {
  expect([p.overlap_us, p.compute_memory_overlap_us, p.no_overlap_us]).toStrictEqual(g[6]);
  expect(p.bottleneck).toBe(g[7]);
  const r = p.resources_us;
  expect([r.sm, r.hbm, r.nvlink, r.nic, r.host]).toStrictEqual(g[8]);
  expect(p.extrapolation_notes.length).toBe(g[9]);
}

describe('golden prices (bit for bit, recorded at 3c3a644)', () => {
  const blis = loadRegistryFile(BLIS_H200);
  for (const model of new Set(GOLDEN.map((g) => g[0]))) {
    const cases = GOLDEN.filter((g) => g[0] === model);
    const [, chip, tp, spec, sets] = cases[0]!;
    it(`${model} tp ${tp} on ${chip}${spec ? ` (${spec} speculative)` : ''}: price, priceInto and priceColumnsInto`, () => {
      const d = { tp, speculative: spec ? { num_spec_tokens: spec } : undefined };
      const pricer = makePricer(model, chip, d, sets === 'blis' ? blis : syntheticSets(chip));
      const out = emptyStepPrice();
      for (const g of cases) {
        const batch = BATCHES[g[5]]!;
        expectGolden(pricer.price(batch), g);
        expectGolden(pricer.priceInto(batch, out), g);
        expectGolden(pricer.priceColumnsInto(columnsOf(batch), out), g);
      }
    });
  }
});
