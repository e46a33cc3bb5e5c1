/**
 * Reader of held-out step-timing files (`*.steps.csv`, format of issue 7; column list in
 * `FAMILY_COLUMNS.step`, src/measurements/schema.ts).
 *
 * The validator parses ANY steps file itself (not only the stored canonical ones), so it is more
 * forgiving about layout and stricter about meaning than the store reader:
 * - columns may come in any order; unknown columns are ignored with a warning (one per column);
 * - `kv_dtype`, `cudagraph_mode`, `group`, `flags`, `prefill_context_tokens` are optional;
 * - a column the row's `kind` needs that is missing or empty is an error naming the file, the
 *   1-based data row and the column (the header is row 0).
 */
import Papa from 'papaparse';
import { InputError } from '../common/errors.ts';
import { readText } from '../common/fs.ts';
import { FAMILY_COLUMNS, type StepRow } from '../measurements/schema.ts';

const KNOWN = new Set<string>(FAMILY_COLUMNS.step);
/** Needed by every row. */
const ALWAYS = ['model', 'chip', 'tp', 'weight_dtype', 'engine', 'kind', 'measured_us', 'source'] as const;
/** Needed by kind=step (prefill_context_tokens defaults to 0). */
const STEP_NEEDS = ['prefill_requests', 'prefill_tokens', 'decode_requests', 'decode_context_tokens'] as const;
/** Needed by kind=static_batch. */
const STATIC_NEEDS = ['batch', 'prompt_tokens', 'output_tokens'] as const;
const NUMERIC = new Set([
  'tp',
  'prefill_requests',
  'prefill_tokens',
  'prefill_context_tokens',
  'decode_requests',
  'decode_context_tokens',
  'batch',
  'prompt_tokens',
  'output_tokens',
  'measured_us',
]);

/** One parsed step row with where it came from. */
export interface LocatedStepRow extends StepRow {
  file: string;
  /** 1-based data row (header = 0). */
  row: number;
}

/**
 * Parse steps-file text.
 * @returns the rows and warnings (unknown columns).
 * @throws InputError naming file, row and column: missing/empty required cell, non-numeric or
 *   negative count, non-positive measured_us, unknown kind, a step with no request, a static batch
 *   with batch < 1 or output_tokens < 1.
 */
export function parseStepsCsv(text: string, file: string): { rows: LocatedStepRow[]; warnings: string[] } {
  const parsed = Papa.parse<string[]>(text, { skipEmptyLines: 'greedy' });
  const data = parsed.data;
  if (data.length < 2) throw new InputError({ file }, 'empty file: expected a header row and at least one data row');
  const header = data[0]!.map((h) => h.trim());
  const warnings: string[] = [];
  for (const h of header) if (!KNOWN.has(h)) warnings.push(`${file}: unknown column "${h}" ignored`);
  const col = new Map<string, number>();
  header.forEach((h, i) => col.set(h, i));
  const rows: LocatedStepRow[] = [];
  for (let r = 1; r < data.length; r++) {
    const line = data[r]!;
    const cell = (name: string): string | undefined => {
      const j = col.get(name);
      if (j === undefined) return undefined;
      return (line[j] ?? '').trim();
    };
    const need = (name: string): string => {
      const v = cell(name);
      if (v === undefined) throw new InputError({ file, row: r, column: name }, 'missing column (required by this row)');
      if (v === '') throw new InputError({ file, row: r, column: name }, 'empty cell; a value is required');
      return v;
    };
    const num = (name: string, required: boolean): number => {
      const v = required ? need(name) : (cell(name) ?? '');
      if (v === '') return 0;
      const x = Number(v);
      if (!Number.isFinite(x)) throw new InputError({ file, row: r, column: name }, `expected a finite number, got "${v}"`);
      if (x < 0) throw new InputError({ file, row: r, column: name }, `expected a non-negative number, got ${v}`);
      return x;
    };
    for (const c of ALWAYS) need(c);
    const kind = need('kind');
    if (kind !== 'step' && kind !== 'static_batch') {
      throw new InputError({ file, row: r, column: 'kind' }, `expected "step" or "static_batch", got "${kind}"`);
    }
    const measured_us = num('measured_us', true);
    if (!(measured_us > 0)) throw new InputError({ file, row: r, column: 'measured_us' }, `expected a positive time in µs, got ${measured_us}`);
    const tp = num('tp', true);
    if (!(tp >= 1 && Number.isInteger(tp))) throw new InputError({ file, row: r, column: 'tp' }, `expected an integer ≥ 1, got ${tp}`);
    const isStep = kind === 'step';
    const out: LocatedStepRow = {
      file,
      row: r,
      model: need('model'),
      chip: need('chip'),
      tp,
      weight_dtype: need('weight_dtype'),
      kv_dtype: cell('kv_dtype') ?? '',
      cudagraph_mode: cell('cudagraph_mode') ?? '',
      engine: need('engine'),
      kind,
      prefill_requests: num('prefill_requests', isStep),
      prefill_tokens: num('prefill_tokens', isStep),
      prefill_context_tokens: num('prefill_context_tokens', false),
      decode_requests: num('decode_requests', isStep),
      decode_context_tokens: num('decode_context_tokens', isStep),
      batch: num('batch', !isStep),
      prompt_tokens: num('prompt_tokens', !isStep),
      output_tokens: num('output_tokens', !isStep),
      measured_us,
      group: cell('group') ?? '',
      source: need('source'),
      flags: cell('flags') ?? '',
    };
    if (isStep) {
      if (out.prefill_requests + out.decode_requests < 1) {
        throw new InputError({ file, row: r, column: 'prefill_requests' }, 'a step needs at least one prefill or decode request');
      }
      if (out.prefill_requests > 0 && out.prefill_tokens < out.prefill_requests) {
        throw new InputError({ file, row: r, column: 'prefill_tokens' }, `expected ≥ prefill_requests (${out.prefill_requests}) new tokens, got ${out.prefill_tokens}`);
      }
    } else {
      if (out.batch < 1) throw new InputError({ file, row: r, column: 'batch' }, `expected ≥ 1, got ${out.batch}`);
      if (out.output_tokens < 1) throw new InputError({ file, row: r, column: 'output_tokens' }, `expected ≥ 1, got ${out.output_tokens}`);
      if (out.prompt_tokens < 1) throw new InputError({ file, row: r, column: 'prompt_tokens' }, `expected ≥ 1, got ${out.prompt_tokens}`);
    }
    rows.push(out);
  }
  return { rows, warnings };
}

/** Read and parse a steps file (`.csv` or `.csv.gz`). */
export function readStepsFile(file: string): { rows: LocatedStepRow[]; warnings: string[] } {
  let text: string;
  try {
    text = readText(file);
  } catch {
    throw new InputError({ file }, 'cannot read file');
  }
  return parseStepsCsv(text, file);
}
