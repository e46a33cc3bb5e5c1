/**
 * The MLA family's tables (issue 13 item 2), from `../shared/datasets/aiconfigurator-modern/<sku>/mla/`
 * (Parquet, verbatim ai-dynamo/aiconfigurator, Apache-2.0). Each row becomes one canonical `mla` row (µs;
 * counts): the whole vLLM 0.24.0 module (`mla_{context,generation}_module_perf`: q/kv down- and
 * up-projections, RoPE, cache write, attention, o_proj) or the attention kernel alone
 * (`{context,generation}_mla_perf`, no projections).
 *
 * The `step` conventions differ by table (the dataset README, "Generation `step` conventions"); every row is
 * stored as past + query = the attended length:
 * - module generation (vLLM 0.24.0): `step` is the total length including the new token → past = step − 1;
 * - vLLM 0.14.0 kernel generation: the collector built seq_lens = step → past = step − 1;
 * - SGLang / TRT-LLM kernel generation: `step` tokens cached, attended step + 1 → past = step;
 * - context (both): `isl` new tokens per request, `step` = cached prefix (0 for MLA).
 * `num_heads` is per GPU in both. Module rows keep `gemm_type` (the linear layers' format); kernel rows have
 * none. The SGLang WideEP MLA tables are not read: they are labelled fp8 but ran bf16, eager, with the
 * q/kv-a projection replaced by `randn` (README "Quirks"), so they time neither served format.
 * Pure apart from reading the given table.
 */
import { InputError } from '../core/errors.ts';
import type { MlaOp } from '../core/schemas/measurements.ts';
import type { MlaRow } from './schema.ts';
import { columnIndex, intCell, latencyCell, msToUs, type RawTable } from './table.ts';

/** How a table's generation `step` maps to past tokens: attended = step (past = step − 1) or step + 1. */
export type StepConvention = 'attended' | 'cached';

/** The upstream MLA tables, with the op each becomes. */
export const MLA_TABLES = {
  mla_generation_module_perf: { op: 'decode_module' },
  mla_context_module_perf: { op: 'prefill_module' },
  generation_mla_perf: { op: 'decode_kernel' },
  context_mla_perf: { op: 'prefill_kernel' },
} as const satisfies Record<string, { op: MlaOp }>;
export type MlaTable = keyof typeof MLA_TABLES;

const text = (t: RawTable, r: number, j: number) => String(t.rows[r]![j] ?? '');

/** The latent-cache dtype a cell names: bf16 or fp8. @throws InputError for any other value */
function kvDtype(t: RawTable, r: number, j: number): string {
  const v = text(t, r, j);
  if (v === 'bfloat16' || v === 'bf16') return 'bf16';
  if (v === 'fp8') return 'fp8';
  throw new InputError({ file: t.file, row: r + 1, column: 'kv_cache_dtype' }, `expected bfloat16 or fp8, got "${v}"`);
}

/**
 * Map one upstream MLA table to canonical rows.
 * @param steps the generation table's `step` convention (module comment); context tables ignore it
 * @throws InputError naming file, row and column for a missing column or a bad cell
 */
export function mapMlaTable(table: MlaTable, t: RawTable, chip: string, steps: StepConvention): MlaRow[] {
  const op = MLA_TABLES[table].op;
  const module = op.endsWith('_module');
  const decode = op.startsWith('decode');
  const [fw, ver, ks, kv, heads, batch, isl, step, lat] = [
    'framework',
    'version',
    'kernel_source',
    'kv_cache_dtype',
    'num_heads',
    'batch_size',
    'isl',
    'step',
    'latency',
  ].map((c) => columnIndex(t, c)) as number[];
  const gemm = module ? columnIndex(t, 'gemm_type') : -1;
  return t.rows.map((_, r) => {
    const s = intCell(t, r, step!, 'step', decode && steps === 'attended' ? 1 : 0);
    return {
      chip,
      lane: `${text(t, r, fw!).toLowerCase()}-${text(t, r, ver!)}`,
      kernel_source: text(t, r, ks!),
      op,
      gemm_dtype: module ? text(t, r, gemm) : '',
      kv_dtype: kvDtype(t, r, kv!),
      heads: intCell(t, r, heads!, 'num_heads', 1),
      batch: intCell(t, r, batch!, 'batch_size', 1),
      query_tokens: decode ? 1 : intCell(t, r, isl!, 'isl', 1),
      past_tokens: decode && steps === 'attended' ? s - 1 : s,
      latency_us: msToUs(latencyCell(t, r, lat!, 'latency')),
    };
  });
}

/**
 * Upstream MLA tables stepcal does not read, with why (the folder scan counts them as `unfitted_table`
 * with this reason; scripts/curate.ts curateMla leaves them out for the same one).
 */
const WIDEEP_NOT_READ =
  'SGLang WideEP MLA: labelled fp8 but ran bf16, eager, with the q/kv-a projection replaced by randn (aiconfigurator-modern README "Quirks"); it times neither served format, so stepcal does not read it';
export const MLA_NOT_READ: Readonly<Record<string, string>> = {
  wideep_context_mla_perf: WIDEEP_NOT_READ,
  wideep_generation_mla_perf: WIDEEP_NOT_READ,
};

/** Whether a table name is one of MLA_TABLES. */
export function isMlaTable(name: string): name is MlaTable {
  return name in MLA_TABLES;
}

/**
 * The generation `step` convention of an upstream MLA table by the framework that collected it (the
 * dataset README, "Generation `step` conventions"): vLLM → `attended` (the 0.24.0 module tables: step is
 * the total length; the 0.14.0 kernel tables built seq_lens = step); SGLang and TRT-LLM kernel tables →
 * `cached` (attended step + 1). A TRT-LLM (or any non-vLLM) *module* table is not documented — neither
 * its `step` convention nor what its module times — so it is refused rather than guessed.
 * @param framework the table's `framework` cell, any case (`VLLM`, `SGLang`, `TRTLLM`)
 * @returns undefined with `why` when the table cannot be read with a known convention
 */
export function mlaStepConvention(
  table: MlaTable,
  framework: string,
): { steps: StepConvention } | { steps?: undefined; why: string } {
  const fw = framework.toLowerCase();
  const module = MLA_TABLES[table].op.endsWith('_module');
  if (fw === 'vllm') return { steps: 'attended' };
  if (fw !== 'sglang' && fw !== 'trtllm')
    return { why: `framework "${framework}" has no documented MLA step convention (vLLM, SGLang or TRT-LLM)` };
  if (!module) return { steps: 'cached' };
  return {
    why: `a ${framework} MLA module table: the dataset README documents the module tables for vLLM only (the vLLM DeepseekV2MLAAttention forward${MLA_TABLES[table].op === 'decode_module' ? '; generation step = total length' : ''}); this framework's ${MLA_TABLES[table].op === 'decode_module' ? 'step convention and ' : ''}module content are not documented, so the table is refused rather than guessed`,
  };
}

/**
 * Map an upstream MLA table with the step convention its `framework` column names (mlaStepConvention);
 * every row must name one framework (one table, one collector).
 * @throws InputError naming file, row and column `framework` for a mixed or undocumented framework, or
 *   whatever mapMlaTable throws for a bad cell
 */
export function mapMlaTableByFramework(table: MlaTable, t: RawTable, chip: string): MlaRow[] {
  if (!t.rows.length) return [];
  const j = columnIndex(t, 'framework');
  const fw = text(t, 0, j);
  for (let r = 1; r < t.rows.length; r++)
    if (text(t, r, j).toLowerCase() !== fw.toLowerCase())
      throw new InputError(
        { file: t.file, row: r + 1, column: 'framework' },
        `expected one framework per MLA table (row 1 says "${fw}", this row "${text(t, r, j)}"): the step convention is per framework`,
      );
  const c = mlaStepConvention(table, fw);
  if (!c.steps) throw new InputError({ file: t.file, row: 1, column: 'framework' }, `${table}: ${c.why}`);
  return mapMlaTable(table, t, chip, c.steps);
}

/**
 * The provenance line of one imported MLA table: its op and, per lane, the `step` convention applied
 * (mlaStepConvention). Pure.
 */
export function mlaImportFilter(table: MlaTable, lanes: readonly string[]): string {
  const op = MLA_TABLES[table].op;
  if (!op.startsWith('decode'))
    return `${table} → op ${op}; query_tokens = isl, past_tokens = step (the cached prefix)`;
  const per = lanes.map((l) => {
    const c = mlaStepConvention(table, l.split('-')[0] ?? '');
    return `${l}: ${c.steps === 'attended' ? 'past_tokens = step − 1 (attended = step)' : 'past_tokens = step (attended = step + 1)'}`;
  });
  return `${table} → op ${op}; ${per.join('; ')}; kv_cache_dtype bfloat16 → bf16; heads = num_heads (per GPU)`;
}

/**
 * Collapse rows that repeat one key (the gb200 SGLang kernel tables keep every key twice, README "Quirks")
 * to one row at their mean latency, in first-seen order.
 * @returns the rows and how many repeats were collapsed
 */
export function collapseMlaRepeats(rows: readonly MlaRow[]): { rows: MlaRow[]; collapsed: number } {
  const groups = new Map<string, { row: MlaRow; sum: number; n: number }>();
  for (const r of rows) {
    const k = `${r.lane}|${r.kernel_source}|${r.op}|${r.gemm_dtype}|${r.kv_dtype}|${r.heads}|${r.batch}|${r.query_tokens}|${r.past_tokens}`;
    const g = groups.get(k);
    if (g) {
      g.sum += r.latency_us;
      g.n += 1;
    } else groups.set(k, { row: r, sum: r.latency_us, n: 1 });
  }
  const out = [...groups.values()].map((g) => ({ ...g.row, latency_us: Number((g.sum / g.n).toPrecision(12)) }));
  return { rows: out, collapsed: rows.length - out.length };
}
