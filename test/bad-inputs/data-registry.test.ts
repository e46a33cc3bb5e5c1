/**
 * Bad-input corpus, file schemas, evidence gates, held-out units and pricer limits (issue 12 items 1,
 * 2, 3, 8). Registry variants are edits of registry/h200.yaml written into the case's temp folder as
 * `h200.yaml`; nothing in the repository may change. The comment on each group says what main did.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { parseCoefficientSets, stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import type { CoefficientEntry, CoefficientSet } from '../../src/core/schemas/registry.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

const H200 = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
const fresh = (): CoefficientSet[] => parseCoefficientSets(H200, 'h200.yaml');
/** Each set of h200's registry as JSON and as the writer's YAML, to tell which sets an edit left alone. */
const SETS = fresh().map((set) => ({ json: JSON.stringify(set), yaml: stringifyCoefficientSets([set]) }));
/**
 * `stringifyCoefficientSets(sets)`, byte for byte (the writer joins one YAML document per set with
 * `---`), with each set an edit left as it was taken from its text written once above: the YAML writer
 * is most of each case's set-up (the collectives set alone is 160 kB), and an edit changes one set.
 */
function writeSets(sets: readonly CoefficientSet[]): string {
  return sets
    .map((set, i) => (SETS[i]?.json === JSON.stringify(set) ? SETS[i].yaml : stringifyCoefficientSets([set])))
    .join('---\n');
}
const entry = (sets: CoefficientSet[], name: string): CoefficientEntry =>
  sets.flatMap((s) => s.coefficients).find((c) => c.name === name)!.entry;
/** Write an edited copy of h200's registry to `<tmp>/<file>`. */
const variant =
  (edit: (s: CoefficientSet[]) => void, file = 'h200.yaml') =>
  (tmp: string) => {
    const s = fresh();
    edit(s);
    writeFileSync(path.join(tmp, file), writeSets(s));
  };
const price = (tmp: string, ...batch: string[]) => [
  'price',
  '--model',
  'llama-2-7b',
  '--chip',
  'h200',
  '--registry',
  path.join(tmp, 'h200.yaml'),
  ...batch.flatMap((b) => ['--batch', b]),
];
const priceCase = (name: string, edit: (s: CoefficientSet[]) => void, message: string | RegExp): BadInputCase => ({
  name,
  setup: variant(edit),
  args: (tmp) => price(tmp, 'decode:8@1024'),
  code: 1,
  message,
});
const set = (e: CoefficientEntry, v: unknown) => ((e as unknown as { value: unknown }).value = v);

// On main every one of these priced with exit 0 (a NaN priced as "NaN µs", a string loaded as a string).
const SCHEMA: BadInputCase[] = [
  priceCase(
    'registry value "0.8" (a string)',
    (s) => set(entry(s, 'gemm_eps_max_bf16'), '0.8'),
    'set cost-model-primitives: entry gemm_eps_max_bf16 [hardware=h200]: field value: must be a finite number, got "0.8"',
  ),
  priceCase(
    'registry value NaN',
    (s) => set(entry(s, 'hbm_derate'), NaN),
    'entry hbm_derate [hardware=h200]: field value: must be a finite number, got NaN',
  ),
  priceCase(
    'eps_max 1.5 (out of range)',
    (s) => Object.assign(entry(s, 'gemm_eps_max_bf16'), { value: 1.5, ci95: [1.4, 1.6] }),
    'entry gemm_eps_max_bf16 [hardware=h200]: field value: eps_max 1.5 is outside (0, 1.05]',
  ),
  priceCase(
    'two sets with the same name',
    (s) => (s[1]!.name = s[0]!.name),
    'set cost-model-primitives: field name: duplicate set name',
  ),
  priceCase(
    'an entry scoped to h100 inside the h200 file',
    (s) => (entry(s, 'hbm_derate').scope = { hardware: ['h100'] }),
    "entry hbm_derate [hardware=h100]: field scope.hardware: scoped to h100 inside h200's registry",
  ),
  priceCase(
    'an unknown entry key',
    (s) => Object.assign(entry(s, 'hbm_derate'), { valu: 1 }),
    /entry hbm_derate .*Unrecognized key.*valu/,
  ),
  priceCase(
    'an unknown unit',
    (s) => Object.assign(entry(s, 'hbm_derate'), { units: 'percent' }),
    /entry hbm_derate \[hardware=h200\]: field units:/,
  ),
  {
    name: 'registry validate: a 12 ms collective floor (written by a µs-labelled-ms fit on main, and passed)',
    setup: variant((s) =>
      Object.assign(entry(s, 'collective_floor_all_reduce_fp16_8rank_h200'), { value: 12000, ci95: [11000, 13000] }),
    ),
    args: (tmp) => ['registry', 'validate', path.join(tmp, 'h200.yaml')],
    code: 1,
    message: 'collective floor 12000 µs is outside [0.5 µs, 10 ms]',
    stream: 'stdout',
  },
  {
    name: 'registry validate: two sets with the same name in a chip file',
    setup: variant((s) => (s[2]!.name = s[1]!.name)),
    args: (tmp) => ['registry', 'validate', path.join(tmp, 'h200.yaml')],
    code: 1,
    message: 'duplicate set name: a set named cost-model-attention appears earlier in the file',
    stream: 'stdout',
  },
];

/** `registry update` of a temp copy of h200 from an edited refit (h200 has no held-out steps: --no-holdout). */
const update = (
  name: string,
  edit: (s: CoefficientSet[]) => void,
  code: number,
  message: string | RegExp,
  extra: string[] = [],
): BadInputCase => ({
  name,
  setup: (tmp) => {
    writeFileSync(path.join(tmp, 'h200.yaml'), H200);
    variant(edit, 'fitted.yaml')(tmp);
  },
  args: (tmp) => [
    'registry',
    'update',
    '--chip',
    'h200',
    '--from',
    path.join(tmp, 'fitted.yaml'),
    '--registry',
    path.join(tmp, 'h200.yaml'),
    '--measurements-dir',
    tmp,
    '--no-holdout',
    'corpus',
    ...extra,
  ],
  code,
  message,
  ...(code === 0 ? { stream: 'stdout' as const } : {}),
});
// On main each merged: the gate read no evidence (issue 12: 0.895 → 0.45 with disjoint intervals was merged).
const GATES: BadInputCase[] = [
  update(
    'refit halving hbm_derate (0.8576 → 0.45): below its prior band',
    (s) => Object.assign(entry(s, 'hbm_derate'), { value: 0.45, ci95: [0.44, 0.46] }),
    1,
    'hbm_derate: value 0.45 is outside its prior plausibility band (0.5, 1]',
  ),
  update(
    'refit moving hbm_derate outside both ci95 intervals (0.8576 → 0.6)',
    (s) => Object.assign(entry(s, 'hbm_derate'), { value: 0.6, ci95: [0.59, 0.61] }),
    1,
    /refused: 1 coefficient\(s\) moved outside both ci95 intervals.*hbm_derate 0\.8576/,
  ),
  update(
    'the same shift with --accept-shift is written (to the temp registry), the reason recorded',
    (s) => Object.assign(entry(s, 'hbm_derate'), { value: 0.6, ci95: [0.59, 0.61] }),
    0,
    /wrote .*h200\.yaml/,
    ['--accept-shift', 'corpus: deliberate'],
  ),
  update(
    'refit whose HBM holdout geo error is 8.4× (the ×10 GEMM slip)',
    (s) => {
      const e = entry(s, 'hbm_derate');
      e.value = (e.ci95![0] + e.ci95![1]) / 2;
      e.evidence!.holdout_error!.geo = 8.4;
    },
    1,
    'hbm_derate: holdout geo error 8.4',
  ),
  update(
    'refit with a prefill work_scale of 437 (prefill ÷1000)',
    (s) => Object.assign(entry(s, 'attention_prefill_work_scale'), { value: 437, ci95: [400, 480] }),
    1,
    'attention_prefill_work_scale: value 437 is outside its prior plausibility band',
  ),
];

const STEPS = path.join(REPO_ROOT, 'measurements', 'h100', 'splitwise.steps.csv');
/** The h100 held-out steps with `f` applied to each data line. */
const steps = (f: (cells: string[]) => void) => (tmp: string) => {
  const [header, ...lines] = readFileSync(STEPS, 'utf8').trim().split('\n');
  const out = lines.map((l) => {
    const c = l.split(',');
    f(c);
    return c.join(',');
  });
  writeFileSync(path.join(tmp, 's.steps.csv'), `${[header, ...out].join('\n')}\n`);
};
const MEASURED = readFileSync(STEPS, 'utf8').split('\n')[0]!.split(',').indexOf('measured_us');
/** The h100 held-out steps with data row `row` (1-based) edited by `f`. */
const stepsRow = (row: number, f: (cells: string[]) => void) => {
  let n = 0;
  return steps((c) => {
    if (++n === row) f(c);
  });
};
const KIND = readFileSync(STEPS, 'utf8').split('\n')[0]!.split(',').indexOf('kind');
const validate = (tmp: string) => [
  'validate',
  '--chip',
  'h100',
  '--steps',
  path.join(tmp, 's.steps.csv'),
  '--no-report',
];
const HELD_OUT: BadInputCase[] = [
  // main: a 50,000 % error with no hint
  {
    name: 'held-out steps in ms (÷1000 in measured_us)',
    setup: steps((c) => (c[MEASURED] = String(Number(c[MEASURED]) / 1000))),
    args: validate,
    code: 1,
    message:
      /column "measured_us": the priced step time is a median .*× the measured one.*likely ×1000 too fast.*units\?/,
  },
  {
    name: 'held-out steps in s (÷10⁶)',
    setup: steps((c) => (c[MEASURED] = String(Number(c[MEASURED]) / 1e6))),
    args: validate,
    code: 1,
    message: /likely ×10⁶ too fast.*units\?/,
  },
  // main: exit 0, the pooled MAPE 42.6 % → 392 %, no hint (the file's median stays in range)
  {
    name: 'one held-out row in ms (83.8 for 83,827 µs)',
    setup: stepsRow(1, (c) => (c[MEASURED] = '83.8')),
    args: validate,
    code: 1,
    message:
      /s\.steps\.csv row 1 column "measured_us": measured 83\.8 µs is 1\/\d+(\.\d+)? of this row's priced work .*ms instead of µs\?/,
  },
  // main: exit 0, read as 16 µs
  {
    name: 'held-out measured_us in hex (0x10)',
    setup: stepsRow(3, (c) => (c[MEASURED] = '0x10')),
    args: validate,
    code: 1,
    message: 's.steps.csv row 3 column "measured_us": expected a finite number (decimal), got "0x10"',
  },
  {
    name: 'held-out step with an empty kind (the one strict steps reader)',
    setup: steps((c) => (c[KIND] = '')),
    args: validate,
    code: 1,
    message: 's.steps.csv row 1 column "kind": empty cell',
  },
];

// On main each priced with exit 0 (llama-2-7b at 8192 tokens with no note; a 10⁹-token prefill at about 20 years).
const LIMITS: BadInputCase[] = [
  {
    name: 'context over max_position_embeddings (llama-2-7b at 8192)',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--batch', 'decode:1@8192'],
    code: 1,
    message: "a request reaches 8193 tokens, over llama-2-7b's max_position_embeddings 4096",
  },
  {
    name: 'a 10⁹-token prefill',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--batch', 'prefill:1x1000000000'],
    code: 1,
    message: 'max_position_embeddings 4096; capacity: weights',
  },
  {
    name: 'a batch over HBM (llama-2-70b tp 1, 512 × 4000 tokens)',
    args: ['price', '--model', 'llama-2-70b', '--chip', 'h200', '--batch', 'decode:512@4000'],
    code: 1,
    message: "per rank exceed h200's 141 GiB of HBM; this batch cannot run as given (pass --allow-over-capacity",
  },
  {
    name: '--allow-over-capacity prices it with a note',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--batch', 'decode:1@8192', '--allow-over-capacity'],
    code: 0,
    message: 'over capacity (--allow-over-capacity): context: a request reaches 8193 tokens',
    stream: 'stdout',
  },
  {
    name: 'a copied registry (b300) lists its copied coefficients in the notes',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'b300', '--batch', 'decode:8@1024'],
    code: 0,
    message: 'hbm_derate: copied from b200 (not measured on this chip)',
    stream: 'stdout',
  },
];

describe('the corpus set-up', () => {
  it('writes an edited registry byte for byte as the registry writer does', () => {
    const sets = fresh();
    expect(writeSets(sets)).toBe(H200); // the committed file is the writer's output
    set(entry(sets, 'hbm_derate'), NaN);
    sets[2]!.name = sets[1]!.name;
    const text = writeSets(sets);
    expect(text).not.toBe(H200);
    expect(text).toBe(stringifyCoefficientSets(sets));
  });
});
describe('bad inputs: registry schema on every load', () => runCorpus(SCHEMA));
describe('bad inputs: gates that read evidence', () => runCorpus(GATES));
describe('bad inputs: held-out steps', () => runCorpus(HELD_OUT));
describe('bad inputs: limits in the pricer', () => runCorpus(LIMITS));
