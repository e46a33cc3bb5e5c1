/**
 * Splitwise `perf_model.csv` (../shared/datasets/splitwise) → held-out step rows (issue 7 format).
 *
 * Source columns: model, hardware, prompt_size, batch_size, token_size, peak_power, average_power,
 * prompt_time, token_time, e2e_time (all times in ms), tensor_parallel. Each configuration is a static
 * batch of `batch_size` requests of `prompt_size` prompt tokens generating `token_size` tokens.
 *
 * Each (deduplicated) configuration becomes three rows:
 * - prompt_time → `kind=step` prefill: prefill_requests = batch, prefill_tokens = batch·prompt;
 * - token_time  → `kind=step` decode at the mean context prompt + output/2: decode_requests = batch,
 *   decode_context_tokens = round(batch·(prompt + output/2)) (whole tokens: a count);
 * - e2e_time    → `kind=static_batch` with batch, prompt_tokens, output_tokens.
 * Times: ms × 1000 → µs. Repeats of a configuration are collapsed to their median per column.
 *
 * Flags (column `flags`, `;`-separated), never silent drops:
 * - `admitted_fewer`: in a batch sweep, prompt_time FALLS while the batch grows: the engine admitted fewer
 *   requests than asked (at tp 2, 70B weights leave too little KV memory for 64 × 640 tokens). In the file
 *   this is exactly the batch-64 tp-2 Llama-2-70B rows (prompt_time 794 ms vs 6633 ms at batch 32 on A100,
 *   token_time falling, and e2e 17× prompt + 127·token).
 * - `stopped_early`: e2e is more than 10 % BELOW prompt_time + (output−1)·token_time: fewer tokens were
 *   generated than `token_size` asked for (EOS); seen on batch-1 rows with output ≥ 512 (e.g. A100 tp 4,
 *   output 8192: e2e 26.3 s against 367 s implied). The decode row's context (prompt + output/2) is then too large too.
 * - `e2e_inconsistent`: e2e is more than 10 % ABOVE that sum (requests served in waves or preempted).
 * - `power_capped`: hardware `h100-80gb-pcap` (a power-capped H100; its token/e2e times equal the uncapped ones).
 */
import path from 'node:path';
import { stringify as stringifyYaml } from 'yaml';
import { InputError } from '../core/errors.ts';
import { readText, sha256, writeFilesAtomic } from '../core/io/fs.ts';
import { provenanceRelativePath } from '../core/io/paths.ts';
import type { Provenance, StepRow } from './schema.ts';
import { FAMILY_COLUMNS } from './schema.ts';
import { rowsToCsv } from './store.ts';
import { Columns, csvTable, intCell, latencyCell, textCell } from './table.ts';
import { groupBy, median } from '../core/numeric/stats.ts';

/** Splitwise model names → shipped stepcal model names. */
export const SPLITWISE_MODELS: Record<string, string> = {
  'llama2-70b': 'llama-2-70b',
  'bloom-176b': 'bloom-176b',
};
/** Splitwise hardware → stepcal chip, plus flags. */
export const SPLITWISE_HARDWARE: Record<string, { chip: string; flags: string[] }> = {
  'a100-80gb': { chip: 'a100', flags: [] },
  'h100-80gb': { chip: 'h100', flags: [] },
  'h100-80gb-pcap': { chip: 'h100', flags: ['power_capped'] },
};
/** Splitwise served the models in fp16 (Splitwise paper, §5 setup). */
export const SPLITWISE_WEIGHT_DTYPE = 'fp16';
/** Relative tolerance of the e2e ≈ prompt + (output−1)·token consistency check. */
export const E2E_TOLERANCE = 0.1;

const COLS = [
  'model',
  'hardware',
  'prompt_size',
  'batch_size',
  'token_size',
  'prompt_time',
  'token_time',
  'e2e_time',
  'tensor_parallel',
];

/** One Splitwise configuration after collapsing repeats (times in µs). */
export interface SplitwiseConfig {
  model: string;
  hardware: string;
  chip: string;
  tp: number;
  prompt: number;
  batch: number;
  output: number;
  prompt_us: number;
  token_us: number;
  e2e_us: number;
  /** How many source rows were collapsed into this one. */
  repeats: number;
  flags: string[];
}

/**
 * Parse and collapse a Splitwise perf_model table. Pure (text in, configs out).
 * @throws InputError naming file/row/column for a missing column, a bad number, a non-positive time,
 *   or an unknown model or hardware.
 */
export function parseSplitwise(
  text: string,
  file: string,
): { configs: SplitwiseConfig[]; rows_in: number; repeated_configs: number } {
  const t = csvTable(text, file);
  const c = new Columns(t, COLS);
  const [mi, hi, pi, bi, oi, pti, tti, eti, tpi] = COLS.map((x) => c.req(x)) as number[];
  const groups = new Map<
    string,
    {
      base: Omit<SplitwiseConfig, 'prompt_us' | 'token_us' | 'e2e_us' | 'repeats' | 'flags'>;
      p: number[];
      t: number[];
      e: number[];
      flags: string[];
    }
  >();
  for (let r = 0; r < t.rows.length; r++) {
    const rawModel = textCell(t, r, mi!);
    const model = SPLITWISE_MODELS[rawModel];
    if (!model)
      throw new InputError(
        { file, row: r + 1, column: 'model' },
        `unknown model "${rawModel}" (known: ${Object.keys(SPLITWISE_MODELS).join(', ')})`,
      );
    const hardware = textCell(t, r, hi!);
    const hw = SPLITWISE_HARDWARE[hardware];
    if (!hw)
      throw new InputError(
        { file, row: r + 1, column: 'hardware' },
        `unknown hardware "${hardware}" (known: ${Object.keys(SPLITWISE_HARDWARE).join(', ')})`,
      );
    const base = {
      model,
      hardware,
      chip: hw.chip,
      tp: intCell(t, r, tpi!, 'tensor_parallel', 1),
      prompt: intCell(t, r, pi!, 'prompt_size', 1),
      batch: intCell(t, r, bi!, 'batch_size', 1),
      output: intCell(t, r, oi!, 'token_size', 1),
    };
    const p = latencyCell(t, r, pti!, 'prompt_time') * 1000;
    const tok = latencyCell(t, r, tti!, 'token_time') * 1000;
    const e = latencyCell(t, r, eti!, 'e2e_time') * 1000;
    const key = [hardware, model, base.tp, base.prompt, base.batch, base.output].join('|');
    const g = groups.get(key);
    if (g) {
      g.p.push(p);
      g.t.push(tok);
      g.e.push(e);
    } else groups.set(key, { base, p: [p], t: [tok], e: [e], flags: [...hw.flags] });
  }
  const configs: SplitwiseConfig[] = [];
  let repeated = 0;
  for (const g of groups.values()) {
    if (g.p.length > 1) repeated++;
    configs.push({
      ...g.base,
      prompt_us: median(g.p),
      token_us: median(g.t),
      e2e_us: median(g.e),
      repeats: g.p.length,
      flags: g.flags,
    });
  }
  flagConfigs(configs);
  return { configs, rows_in: t.rows.length, repeated_configs: repeated };
}

/** Apply the `admitted_fewer` and `e2e_inconsistent` rules (see module doc). Mutates `flags`. */
export function flagConfigs(configs: SplitwiseConfig[]): void {
  const sweeps = groupBy(configs, (c) => [c.hardware, c.model, c.tp, c.prompt, c.output].join('|'));
  for (const s of sweeps.values()) {
    s.sort((a, b) => a.batch - b.batch);
    let maxPrompt = 0;
    for (const c of s) {
      if (c.prompt_us < maxPrompt && !c.flags.includes('admitted_fewer')) c.flags.push('admitted_fewer');
      maxPrompt = Math.max(maxPrompt, c.prompt_us);
    }
  }
  for (const c of configs) {
    const implied = c.prompt_us + (c.output - 1) * c.token_us;
    const ratio = c.e2e_us / implied;
    if (ratio < 1 - E2E_TOLERANCE) c.flags.push('stopped_early');
    else if (ratio > 1 + E2E_TOLERANCE) c.flags.push('e2e_inconsistent');
  }
}

/** Expand configurations into the three step rows each (prefill step, decode step, static batch). */
export function splitwiseStepRows(configs: readonly SplitwiseConfig[], source: string): StepRow[] {
  const out: StepRow[] = [];
  for (const c of configs) {
    const group = (regime: string) =>
      [
        c.model,
        c.hardware === 'h100-80gb-pcap' ? `${c.chip}-pcap` : c.chip,
        `tp${c.tp}`,
        `p${c.prompt}`,
        `o${c.output}`,
        regime,
      ].join('|');
    const common = {
      model: c.model,
      chip: c.chip,
      tp: c.tp,
      weight_dtype: SPLITWISE_WEIGHT_DTYPE,
      kv_dtype: '',
      cudagraph_mode: '',
      engine: 'splitwise',
      prefill_requests: 0,
      prefill_tokens: 0,
      prefill_context_tokens: 0,
      decode_requests: 0,
      decode_context_tokens: 0,
      batch: 0,
      prompt_tokens: 0,
      output_tokens: 0,
      source,
      flags: c.flags.join(';'),
    };
    out.push({
      ...common,
      kind: 'step',
      prefill_requests: c.batch,
      prefill_tokens: c.batch * c.prompt,
      measured_us: c.prompt_us,
      group: group('prefill'),
    });
    out.push({
      ...common,
      kind: 'step',
      decode_requests: c.batch,
      // A count (the schema's integer): batch · output / 2 is a half when both are odd, so rounded to
      // the nearest token (half up); exact, so unchanged, on every shipped row.
      decode_context_tokens: Math.round(c.batch * (c.prompt + c.output / 2)),
      measured_us: c.token_us,
      group: group('decode'),
    });
    out.push({
      ...common,
      kind: 'static_batch',
      batch: c.batch,
      prompt_tokens: c.prompt,
      output_tokens: c.output,
      measured_us: c.e2e_us,
      group: group('static_batch'),
    });
  }
  return out;
}

export interface SplitwiseSummary {
  file: string;
  chip: string;
  rows_out: number;
  configs: number;
  flagged: Record<string, number>;
}

/**
 * Stage `<outRoot or outDir>/<chip>/splitwise.steps.csv` (+ `.steps.provenance.yaml`) for every chip in
 * the file (or only `chip`). Nothing is written; pass `files` to writeFilesAtomic.
 */
export function stageSplitwise(
  input: string,
  opts: { chip?: string; outDir?: string; outRoot?: string; sourceRepository?: string; name?: string },
): {
  files: Array<{ file: string; data: string }>;
  summaries: SplitwiseSummary[];
  rows_in: number;
  repeated_configs: number;
} {
  const bytes = readText(input);
  const { configs, rows_in, repeated_configs } = parseSplitwise(bytes, input);
  const chips = [...new Set(configs.map((c) => c.chip))]
    .sort()
    .filter((c) => opts.chip === undefined || c === opts.chip);
  if (chips.length === 0)
    throw new InputError(
      { file: input },
      `no rows for chip "${opts.chip}" (chips in file: ${[...new Set(configs.map((c) => c.chip))].join(', ')})`,
    );
  const files: Array<{ file: string; data: string }> = [];
  const summaries: SplitwiseSummary[] = [];
  const src = provenanceRelativePath(input);
  const inputSha = sha256(bytes);
  for (const chip of chips) {
    const cs = configs.filter((c) => c.chip === chip);
    const rows = splitwiseStepRows(cs, src);
    const dir = opts.outDir ?? path.join(opts.outRoot ?? 'measurements', chip);
    const file = path.join(dir, `${opts.name ?? 'splitwise'}.steps.csv`);
    const data = rowsToCsv('step', rows);
    const flagged: Record<string, number> = {};
    for (const r of rows) for (const f of r.flags ? r.flags.split(';') : []) flagged[f] = (flagged[f] ?? 0) + 1;
    const srcRows = cs.reduce((s, c) => s + c.repeats, 0);
    const prov: Provenance = {
      family: 'step',
      chip,
      lane: 'splitwise',
      source_repository: opts.sourceRepository ?? 'Splitwise perf_model.csv',
      source_path: 'perf_model.csv',
      source_commit: 'unknown',
      licence: 'see ../shared/datasets/splitwise (not stated in the copy)',
      inputs: [{ file: src, sha256: inputSha, rows: rows_in }],
      filters: [
        `kept hardware mapping to chip ${chip} (${[...new Set(cs.map((c) => c.hardware))].join(', ')})`,
        `collapsed repeats to the per-column median: ${srcRows} source rows → ${cs.length} configurations (${cs.filter((c) => c.repeats > 1).length} repeated)`,
        'each configuration → 3 rows: prefill step (prompt_time), decode step at context prompt + output/2 (token_time), static batch (e2e_time)',
        'flags (kept, not dropped): admitted_fewer = prompt_time falls while batch grows in a sweep; stopped_early / e2e_inconsistent = e2e/(prompt + (output−1)·token) below 0.9 / above 1.1; power_capped = h100-80gb-pcap',
      ],
      rows_in: srcRows,
      rows_out: rows.length,
      units: { measured_us: 'prompt_time / token_time / e2e_time [ms] × 1000' },
      duplicate_configs: cs.filter((c) => c.repeats > 1).length,
      notes: [
        `flagged rows: ${
          Object.entries(flagged)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') || 'none'
        }`,
        `header = FAMILY_COLUMNS.step: ${(FAMILY_COLUMNS.step as readonly string[]).join(',')}`,
      ],
      output_sha256: sha256(data),
    };
    files.push(
      { file, data },
      { file: path.join(dir, `${opts.name ?? 'splitwise'}.steps.provenance.yaml`), data: stringifyProv(prov) },
    );
    summaries.push({ file, chip, rows_out: rows.length, configs: cs.length, flagged });
  }
  return { files, summaries, rows_in, repeated_configs };
}

function stringifyProv(p: Provenance): string {
  return stringifyYaml(p, { lineWidth: 0 });
}

/** Stage and write atomically. */
export function importSplitwise(
  input: string,
  opts: Parameters<typeof stageSplitwise>[1],
): ReturnType<typeof stageSplitwise> {
  const res = stageSplitwise(input, opts);
  writeFilesAtomic(res.files);
  return res;
}
