/**
 * Importer for NVIDIA AIConfigurator per-operator timing tables (`ai-dynamo/aiconfigurator`,
 * `aic-core/src/aiconfigurator_core/systems/data/<sku>/<op_category>/<framework>/<version>/<table>.parquet`,
 * or the CSV copies in `../shared/datasets/aiconfigurator/<sku>/<table>/<framework>-<version>/<table>.csv`).
 *
 * Units and conventions (checked in ../shared/datasets/aiconfigurator/README.md, "Units"):
 * - `latency` is milliseconds per call → `latency_us` = latency × 1000.
 * - collective `message_size` is an ELEMENT count → `message_bytes` = message_size × width
 *   (nccl `half` 2 B, `int8` 1 B; custom all-reduce `bfloat16` 2 B).
 * - decode attention: `step` = tokens already cached, attended length `context_tokens` = step + 1.
 * - prefill attention: `new_tokens` = isl, `prefix_tokens` = step (always 0 upstream).
 * - attention head counts are per GPU (post-TP); a100 tables have no `window_size` (→ window 0).
 *
 * Pure functions only: the caller reads the file (see table.ts) and writes the result (store.ts).
 */
import path from 'node:path';
import { InputError, UserError } from '../core/errors.ts';
import { plainCell } from '../core/render/csv.ts';
import type { Chip } from '../core/catalog/chip.ts';
import type { GemmDtype, StorageDtype } from '../core/catalog/dtypes.ts';
import { Columns, type RawTable } from './table.ts';
import { type CellTable, CsvChunk, cellsOf, intAt, latencyAt, numberAt } from './cell-table.ts';
import { isMlaTable, type MlaTable, mapMlaTableByFramework, mlaImportFilter } from './mla-import.ts';
import { mapRecurrent } from './recurrent.ts';
import type { CollectiveBackend, CollectiveOp, Family, FamilyRow } from './schema.ts';
import { FAMILY_COLUMNS } from './schema.ts';
import { objectSink, RowColumns, type RowList, type RowSink, readerOf } from './row-columns.ts';
import { TupleIndex } from './tuple-index.ts';
import { checkUnits, FLOOR_MAX_US, FLOOR_MIN_US } from './units.ts';

/** Upstream table names this importer understands, and the stepcal family each maps to. */
export const AIC_TABLES = {
  gemm_perf: 'gemm',
  context_attention_perf: 'attention_prefill',
  generation_attention_perf: 'attention_decode',
  moe_perf: 'moe',
  nccl_perf: 'collective',
  custom_allreduce_perf: 'collective',
  gdn_perf: 'recurrent',
  kda_perf: 'recurrent',
  mamba2_perf: 'recurrent',
  mla_generation_module_perf: 'mla',
  mla_context_module_perf: 'mla',
  generation_mla_perf: 'mla',
  context_mla_perf: 'mla',
} as const satisfies Record<string, Family>;
export type AicTable = keyof typeof AIC_TABLES;

/** Upstream op_category folder of each table (for provenance paths). */
export const AIC_OP_CATEGORY: Record<AicTable, string> = {
  gemm_perf: 'gemm',
  context_attention_perf: 'attention',
  generation_attention_perf: 'attention',
  moe_perf: 'moe',
  nccl_perf: 'comm',
  custom_allreduce_perf: 'comm',
  gdn_perf: 'linear_attention',
  kda_perf: 'kda',
  mamba2_perf: 'linear_attention',
  mla_generation_module_perf: 'mla',
  mla_context_module_perf: 'mla',
  generation_mla_perf: 'mla',
  context_mla_perf: 'mla',
};

/** The table name of a file from its base name (`gemm_perf.csv`, `.parquet`, `.csv.gz`), or undefined. */
export function aicTableFromName(file: string): AicTable | undefined {
  const base = path.basename(file).replace(/\.(csv(\.gz)?|parquet)$/, '');
  return base in AIC_TABLES ? (base as AicTable) : undefined;
}

/**
 * The table name of a file from its base name (`gemm_perf.csv`, `gemm_perf.parquet`, `gemm_perf.csv.gz`).
 * @throws UserError when it is not one of AIC_TABLES.
 */
export function aicTableFromPath(file: string): AicTable {
  const t = aicTableFromName(file);
  if (t) return t;
  const base = path.basename(file).replace(/\.(csv(\.gz)?|parquet)$/, '');
  throw new UserError(
    `${file}: cannot infer the measurement family from the table name "${base}" ` +
      `(expected one of ${Object.keys(AIC_TABLES).join(', ')})`,
  );
}

/**
 * The table a file holds, from its header (and, for attention, the first row's op_name), for files whose
 * name does not say it (`good.csv`). Each upstream table has a column no other has: `gemm_dtype`,
 * `moe_dtype`, `nccl_dtype`, `allreduce_dtype`; the two attention tables share their columns and differ in
 * op_name (`context_attention` / `generation_attention`). Pure.
 * @returns undefined when the header matches no table.
 */
export function aicTableFromHeader(table: CellTable): AicTable | undefined {
  const h = new Set(table.header);
  if (h.has('gemm_dtype')) return 'gemm_perf';
  if (h.has('moe_dtype')) return 'moe_perf';
  if (h.has('nccl_dtype')) return 'nccl_perf';
  if (h.has('allreduce_dtype')) return 'custom_allreduce_perf';
  if (h.has('attn_dtype') && h.has('kv_cache_dtype')) {
    const j = table.header.indexOf('op_name');
    const op = j >= 0 && table.length ? table.text(0, j) : '';
    if (op === 'context_attention') return 'context_attention_perf';
    if (op === 'generation_attention') return 'generation_attention_perf';
  }
  return undefined;
}

/** GEMM dtype spellings upstream → stepcal. */
const GEMM_DTYPE_MAP: Record<string, GemmDtype> = {
  bfloat16: 'bf16',
  bf16: 'bf16',
  fp8: 'fp8',
  fp8_block: 'fp8_block',
  nvfp4: 'nvfp4',
};
/** KV-cache / attention dtype spellings → stepcal storage dtype. */
const ATTN_DTYPE_MAP: Record<string, StorageDtype> = {
  bfloat16: 'bf16',
  bf16: 'bf16',
  float16: 'fp16',
  fp16: 'fp16',
  fp8: 'fp8',
  int8: 'int8',
  nvfp4: 'nvfp4',
};
/** MoE quantisation schemes seen upstream (bfloat16 → bf16; the rest are scheme names kept as is). */
const MOE_DTYPE_MAP: Record<string, string> = {
  bfloat16: 'bf16',
  bf16: 'bf16',
  fp8: 'fp8',
  fp8_block: 'fp8_block',
  nvfp4: 'nvfp4',
  int4_wo: 'int4_wo',
  w4a16_mxfp4: 'w4a16_mxfp4',
  w4a8_mxfp4_mxfp8: 'w4a8_mxfp4_mxfp8',
  w4a8_nvfp4_fp8: 'w4a8_nvfp4_fp8',
  mxfp4: 'mxfp4',
  int8_wo: 'int8_wo',
};
/** Collective element dtypes → (stepcal name, bytes per element). */
const COLL_DTYPE_MAP: Record<string, { dtype: string; bytes: number }> = {
  half: { dtype: 'fp16', bytes: 2 },
  float16: { dtype: 'fp16', bytes: 2 },
  fp16: { dtype: 'fp16', bytes: 2 },
  bfloat16: { dtype: 'bf16', bytes: 2 },
  bf16: { dtype: 'bf16', bytes: 2 },
  int8: { dtype: 'int8', bytes: 1 },
  float: { dtype: 'fp32', bytes: 4 },
  float32: { dtype: 'fp32', bytes: 4 },
  fp8: { dtype: 'fp8', bytes: 1 },
};
const COLL_OPS: ReadonlySet<string> = new Set<CollectiveOp>(['all_reduce', 'all_gather', 'reduce_scatter', 'alltoall']);
/** A custom all-reduce table's one op. */
const ALL_REDUCE_ONLY: ReadonlySet<string> = new Set<CollectiveOp>(['all_reduce']);
const BACKEND_MAP: Record<string, CollectiveBackend> = {
  nccl: 'nccl',
  vllm_graph: 'custom_graph',
  vllm_eager: 'custom_eager',
  vllm_custom_graph: 'custom_graph',
  vllm_custom_eager: 'custom_eager',
  // SGLang's custom all-reduce is the same one-shot/two-shot kernel family as vLLM's, captured or eager.
  sglang_graph: 'custom_graph',
  sglang_eager: 'custom_eager',
};
/**
 * TRT-LLM custom all-reduce tables carry `implementation` instead of `backend`: TRT-LLM's own
 * kernel, kept apart (`custom_trtllm`) so it is never taken for vLLM's custom all-reduce.
 */
const IMPLEMENTATION_MAP: Record<string, CollectiveBackend> = { trtllm: 'custom_trtllm' };

function mapped<T>(table: CellTable, r: number, j: number, col: string, map: Record<string, T>, what: string): T {
  const s = table.text(r, j);
  const v = map[s] ?? map[s.toLowerCase()];
  if (v === undefined) {
    throw new InputError(
      { file: table.file, row: r + 1, column: col },
      `unknown ${what} "${s}" (expected one of ${Object.keys(map).join(', ')})`,
    );
  }
  return v;
}

/** Memoised lane label `<framework lowercased>-<version>` (nccl tables: `nccl-<version>`). */
function laneMaker(table: CellTable, fw: number, ver: number, fixedFramework?: string): (r: number) => string {
  const cache = new Map<string, string>();
  // The cells of the row before and its lane: a run of rows of one lane costs two text reads each.
  let lastFw: string | undefined;
  let lastVer: string | undefined;
  let lastLane = '';
  return (r) => {
    const rawFw = fixedFramework ?? table.text(r, fw);
    const v = table.text(r, ver);
    if (rawFw === lastFw && v === lastVer) return lastLane;
    const f = fixedFramework ?? rawFw.toLowerCase();
    if (!f || !v) {
      throw new InputError(
        { file: table.file, row: r + 1, column: !f ? 'framework' : 'version' },
        'expected a non-empty framework and version (they form the lane)',
      );
    }
    const key = `${f}\u0000${v}`;
    let lane = cache.get(key);
    if (lane === undefined) {
      lane = `${f}-${v}`;
      cache.set(key, lane);
    }
    lastFw = rawFw;
    lastVer = v;
    lastLane = lane;
    return lane;
  };
}

/** Check every row's op_name equals `expected`. */
function checkOp(table: CellTable, r: number, j: number, expected: ReadonlySet<string>): string {
  const op = table.text(r, j);
  if (!expected.has(op)) {
    throw new InputError(
      { file: table.file, row: r + 1, column: 'op_name' },
      `unknown op "${op}" for this table (expected ${[...expected].join(' or ')})`,
    );
  }
  return op;
}

/** Tables mapped as row objects (recurrent.ts, mla-import.ts) rather than into a RowSink. */
type ObjectTable = 'gdn_perf' | 'kda_perf' | 'mamba2_perf' | MlaTable;
const isRecurrent = (t: AicTable): t is 'gdn_perf' | 'kda_perf' | 'mamba2_perf' =>
  t === 'gdn_perf' || t === 'kda_perf' || t === 'mamba2_perf';

/** Output columns of each table's rows: its family's stored columns (schema.ts), the order its mapper sets them in (`o.int`, `o.num`, `o.text` column c). */
const OUT_KEYS: Record<Exclude<AicTable, ObjectTable>, readonly string[]> = {
  gemm_perf: FAMILY_COLUMNS.gemm,
  context_attention_perf: FAMILY_COLUMNS.attention_prefill,
  generation_attention_perf: FAMILY_COLUMNS.attention_decode,
  moe_perf: FAMILY_COLUMNS.moe,
  nccl_perf: FAMILY_COLUMNS.collective,
  custom_allreduce_perf: FAMILY_COLUMNS.collective,
};

/** Map a raw upstream table to canonical rows (no dedupe, no units-slip check). */
export function mapAicRows<T extends AicTable>(
  tableName: T,
  table: RawTable,
  chip: string,
): FamilyRow[(typeof AIC_TABLES)[T]][] {
  if (isRecurrent(tableName)) return mapRecurrent(table, chip, tableName) as never;
  if (isMlaTable(tableName)) return mapMlaTableByFramework(tableName, table, chip) as never;
  const rows: FamilyRow[(typeof AIC_TABLES)[T]][] = [];
  mapAicInto(tableName, cellsOf(table), chip, (keys) => objectSink(keys, rows));
  return rows;
}

/**
 * Map a table (or one chunk of it) into the sink `sinkFor` gives for the table's output columns:
 * rows in input order, each checked cell by cell (an InputError names file, row and column).
 * Recurrent and MLA tables are mapped as row objects (recurrent.ts; mla-import.ts, with the step
 * convention the table's framework names) and pushed into `rows` instead.
 */
export function mapAicInto(
  tableName: AicTable,
  table: CellTable,
  chip: string,
  sinkFor: (keys: readonly string[]) => RowSink,
  rows?: RowColumns<object>,
  stored?: (lines: Buffer) => void,
): void {
  if (isRecurrent(tableName) || isMlaTable(tableName)) {
    if (!rows) throw new UserError(`table ${tableName}: map it with mapAicRows`);
    const raw = table.toRawTable();
    const out = isMlaTable(tableName)
      ? mapMlaTableByFramework(tableName, raw, chip)
      : mapRecurrent(raw, chip, tableName);
    for (const r of out) rows.push(r);
    return;
  }
  const map = MAPPERS[tableName];
  if (!map) throw new UserError(`unsupported table ${String(tableName)}`);
  map(table, chip, sinkFor(OUT_KEYS[tableName]), stored);
}

/** The mapper of each non-recurrent table (defined below). */
const MAPPERS: Record<
  keyof typeof OUT_KEYS,
  (t: CellTable, chip: string, o: RowSink, stored?: (lines: Buffer) => void) => void
> = {
  gemm_perf: (t, chip, o, stored) => mapGemm(t, chip, o, stored),
  context_attention_perf: (t, chip, o) => mapPrefill(t, chip, o),
  generation_attention_perf: (t, chip, o) => mapDecode(t, chip, o),
  moe_perf: (t, chip, o) => mapMoe(t, chip, o),
  nccl_perf: (t, chip, o) => mapNccl(t, chip, o),
  custom_allreduce_perf: (t, chip, o) => mapCustomAllreduce(t, chip, o),
};

const GEMM_COLS = ['framework', 'version', 'op_name', 'kernel_source', 'gemm_dtype', 'm', 'n', 'k', 'latency'];
/** The op a GEMM table's rows name. */
const GEMM_OPS: ReadonlySet<string> = new Set(['gemm']);
/** Column indices of GEMM_COLS, in its order. */
type GemmIdx = [
  fw: number,
  ver: number,
  op: number,
  ks: number,
  dt: number,
  m: number,
  n: number,
  k: number,
  lat: number,
];
function mapGemm(t: CellTable, chip: string, o: RowSink, stored?: (lines: Buffer) => void): void {
  const c = new Columns(t, GEMM_COLS);
  const idx = GEMM_COLS.map((x) => c.req(x)) as GemmIdx;
  const [fw, ver, op, ks, dt, m, n, k, lat] = idx;
  if (o.bulk && t instanceof CsvChunk && gemmBulk(t, chip, o.bulk, idx, stored)) return;
  const lane = laneMaker(t, fw, ver);
  for (let r = 0; r < t.length; r++) {
    checkOp(t, r, op, GEMM_OPS);
    o.text(0, chip); // chip
    o.text(1, lane(r)); // lane
    o.text(2, t.text(r, ks)); // kernel_source
    o.text(3, mapped(t, r, dt, 'gemm_dtype', GEMM_DTYPE_MAP, 'GEMM dtype')); // dtype
    o.int(4, intAt(t, r, m, 'm', 1)); // m
    o.int(5, intAt(t, r, n, 'n', 1)); // n
    o.int(6, intAt(t, r, k, 'k', 1)); // k
    o.num(7, latencyAt(t, r, lat, 'latency') * 1000); // latency_us
    o.end();
  }
}

/**
 * mapGemm of a whole CSV chunk at once, when its text cells (framework, version, op, kernel, dtype) are
 * each one value throughout and every m, n, k and latency is valid: the same rows, written column by
 * column (`RowSink.bulk`). `stored`, when given, receives the chunk's lines of the stored file when they
 * can be taken from the input's bytes (`storedGemmLines`). @returns false, having written nothing,
 * otherwise: the row-by-row mapper then maps the chunk and throws its errors in its order.
 * @throws InputError (row 1) for an op, lane or dtype that one value throughout gets wrong: the row
 * mapper's first error.
 */
function gemmBulk(
  t: CsvChunk,
  chip: string,
  bulk: NonNullable<RowSink['bulk']>,
  idx: Readonly<GemmIdx>,
  stored?: (lines: Buffer) => void,
): boolean {
  const [fw, ver, op, ks, dt, m, n, k, lat] = idx;
  const same = t.sameTexts([fw, ver, op, ks, dt]);
  if (same.includes(undefined)) return false;
  // Each text column holds one value throughout: row 0's checks are every row's, and throw the row
  // mapper's first error (its order: op, lane, dtype).
  checkOp(t, 0, op, GEMM_OPS);
  const lane = laneMaker(t, fw, ver)(0);
  const d = mapped(t, 0, dt, 'gemm_dtype', GEMM_DTYPE_MAP, 'GEMM dtype');
  const [ms, ns, kk, lats] = bulkScratch(t.length);
  if (!t.ints(m, 1, ms) || !t.ints(n, 1, ns) || !t.ints(k, 1, kk) || !t.latencies(lat, 1000, lats)) return false;
  const texts = [chip, lane, same[3]!, d];
  bulk(t.length, [...texts, ms, ns, kk, lats]);
  const lines = stored && storedGemmLines(t, texts, [m, n, k], lats);
  if (lines) stored!(lines);
  return true;
}

/**
 * The stored gemm file's lines (FAMILY_COLUMNS.gemm: chip, lane, kernel_source, dtype, m, n, k,
 * latency_us) of a chunk `gemmBulk` mapped, built from the input's bytes: the four texts (one value each
 * throughout, so one prefix), then the input's m, n, k cells as they are when they are adjacent and each
 * is `String` of the int32 stored (`CsvChunk.spanLines`: plain digits, no leading zero), then
 * `String(latency_us)`. The same bytes `RowColumns.csvLines` writes from the stored columns (a property
 * test), with no per-cell dispatch and no integer formatting. Undefined when a text needs quoting or
 * a cell is not in that form (then csvLines writes the lines).
 */
function storedGemmLines(
  t: CsvChunk,
  texts: readonly string[],
  [m, n, k]: readonly number[],
  lats: Float64Array,
): Buffer | undefined {
  if (n !== m! + 1 || k !== n + 1) return undefined;
  const cells = texts.map(plainCell);
  if (cells.some((c) => c === undefined)) return undefined;
  return t.spanLines(Buffer.from(`${cells.join(',')},`, 'utf8'), m!, k + 1, lats);
}

/** `gemmBulk`'s m, n, k and latency arrays, reused from chunk to chunk (`RowSink.bulk` copies them). */
let scratch: [Int32Array, Int32Array, Int32Array, Float64Array] | undefined;
function bulkScratch(rows: number): [Int32Array, Int32Array, Int32Array, Float64Array] {
  if (!scratch || scratch[3].length < rows) {
    const n = Math.max(rows, 2 * (scratch?.[3].length ?? 0));
    scratch = [new Int32Array(n), new Int32Array(n), new Int32Array(n), new Float64Array(n)];
  }
  const [m, n, k, lat] = scratch;
  return [m.subarray(0, rows), n.subarray(0, rows), k.subarray(0, rows), lat.subarray(0, rows)];
}

const ATTN_COLS = [
  'framework',
  'version',
  'op_name',
  'kernel_source',
  'batch_size',
  'isl',
  'num_heads',
  'num_key_value_heads',
  'head_dim',
  'attn_dtype',
  'kv_cache_dtype',
  'step',
  'latency',
];
function attnIdx(t: CellTable) {
  const c = new Columns(t, [...ATTN_COLS, 'window_size (optional)']);
  const [fw, ver, op, ks, b, isl, nq, nkv, hd, adt, kvdt, step, lat] = ATTN_COLS.map((x) => c.req(x)) as number[];
  return {
    fw: fw!,
    ver: ver!,
    op: op!,
    ks: ks!,
    b: b!,
    isl: isl!,
    nq: nq!,
    nkv: nkv!,
    hd: hd!,
    adt: adt!,
    kvdt: kvdt!,
    step: step!,
    lat: lat!,
    win: c.opt('window_size'),
    beam: c.opt('beam_width'),
  };
}

/**
 * `beam_width` (TRT-LLM/vLLM attention collectors) changes what a row means when it is not 1 (beam
 * search multiplies the queries per request); stepcal prices greedy decoding only, so any other
 * value is an error naming the row. Absent or 1: nothing to do.
 */
function checkBeam(t: CellTable, r: number, j: number): void {
  if (j < 0) return;
  const v = numberAt(t, r, j, 'beam_width');
  if (v !== 1)
    throw new InputError(
      { file: t.file, row: r + 1, column: 'beam_width' },
      `expected beam_width 1 (stepcal prices greedy decoding; a beam multiplies the queries per request), got ${v}`,
    );
}

function mapPrefill(t: CellTable, chip: string, o: RowSink): void {
  const x = attnIdx(t);
  const lane = laneMaker(t, x.fw, x.ver);
  const ops = new Set(['context_attention']);
  for (let r = 0; r < t.length; r++) {
    checkOp(t, r, x.op, ops);
    checkBeam(t, r, x.beam);
    o.text(0, chip); // chip
    o.text(1, lane(r)); // lane
    o.text(2, t.text(r, x.ks)); // kernel_source
    o.int(3, intAt(t, r, x.b, 'batch_size', 1)); // batch
    o.int(4, intAt(t, r, x.isl, 'isl', 1)); // new_tokens
    o.int(5, intAt(t, r, x.step, 'step', 0)); // prefix_tokens
    o.int(6, intAt(t, r, x.nq, 'num_heads', 1)); // n_q
    o.int(7, intAt(t, r, x.nkv, 'num_key_value_heads', 1)); // n_kv
    o.int(8, intAt(t, r, x.hd, 'head_dim', 1)); // head_dim
    o.int(9, x.win >= 0 ? intAt(t, r, x.win, 'window_size', 0) : 0); // window
    o.text(10, mapped(t, r, x.adt, 'attn_dtype', ATTN_DTYPE_MAP, 'attention dtype')); // dtype
    o.text(11, mapped(t, r, x.kvdt, 'kv_cache_dtype', ATTN_DTYPE_MAP, 'KV-cache dtype')); // kv_dtype
    o.num(12, latencyAt(t, r, x.lat, 'latency') * 1000); // latency_us
    o.end();
  }
}

function mapDecode(t: CellTable, chip: string, o: RowSink): void {
  const x = attnIdx(t);
  const lane = laneMaker(t, x.fw, x.ver);
  const ops = new Set(['generation_attention']);
  for (let r = 0; r < t.length; r++) {
    checkOp(t, r, x.op, ops);
    checkBeam(t, r, x.beam);
    if (numberAt(t, r, x.isl, 'isl') !== 1) {
      throw new InputError(
        { file: t.file, row: r + 1, column: 'isl' },
        `expected isl = 1 for generation attention, got ${t.text(r, x.isl)}`,
      );
    }
    mapped(t, r, x.adt, 'attn_dtype', ATTN_DTYPE_MAP, 'attention dtype');
    o.text(0, chip); // chip
    o.text(1, lane(r)); // lane
    o.text(2, t.text(r, x.ks)); // kernel_source
    o.int(3, intAt(t, r, x.b, 'batch_size', 1)); // batch
    o.int(4, intAt(t, r, x.step, 'step', 0) + 1); // context_tokens
    o.int(5, intAt(t, r, x.nq, 'num_heads', 1)); // n_q
    o.int(6, intAt(t, r, x.nkv, 'num_key_value_heads', 1)); // n_kv
    o.int(7, intAt(t, r, x.hd, 'head_dim', 1)); // head_dim
    o.int(8, x.win >= 0 ? intAt(t, r, x.win, 'window_size', 0) : 0); // window
    o.text(9, mapped(t, r, x.kvdt, 'kv_cache_dtype', ATTN_DTYPE_MAP, 'KV-cache dtype')); // kv_dtype
    o.num(10, latencyAt(t, r, x.lat, 'latency') * 1000); // latency_us
    o.end();
  }
}

const MOE_COLS = [
  'framework',
  'version',
  'op_name',
  'kernel_source',
  'moe_dtype',
  'num_tokens',
  'hidden_size',
  'inter_size',
  'topk',
  'num_experts',
  'moe_tp_size',
  'moe_ep_size',
  'distribution',
  'latency',
];
function mapMoe(t: CellTable, chip: string, o: RowSink): void {
  const c = new Columns(t, MOE_COLS);
  const [fw, ver, op, ks, dt, tok, hid, inter, topk, ne, tp, ep, dist, lat] = MOE_COLS.map((x) => c.req(x)) as number[];
  const lane = laneMaker(t, fw!, ver!);
  const ops = new Set(['moe']);
  for (let r = 0; r < t.length; r++) {
    checkOp(t, r, op!, ops);
    const distribution = t.text(r, dist!);
    if (distribution !== 'balanced' && !/^power_law_[0-9.]+$/.test(distribution)) {
      throw new InputError(
        { file: t.file, row: r + 1, column: 'distribution' },
        `expected "balanced" or "power_law_<alpha>", got "${distribution}"`,
      );
    }
    o.text(0, chip); // chip
    o.text(1, lane(r)); // lane
    o.text(2, t.text(r, ks!)); // kernel_source
    o.int(3, intAt(t, r, tok!, 'num_tokens', 1)); // tokens
    o.int(4, intAt(t, r, hid!, 'hidden_size', 1)); // hidden
    o.int(5, intAt(t, r, inter!, 'inter_size', 1)); // inter
    o.int(6, intAt(t, r, topk!, 'topk', 1)); // topk
    o.int(7, intAt(t, r, ne!, 'num_experts', 1)); // experts
    o.int(8, intAt(t, r, tp!, 'moe_tp_size', 1)); // tp
    o.int(9, intAt(t, r, ep!, 'moe_ep_size', 1)); // ep
    o.text(10, mapped(t, r, dt!, 'moe_dtype', MOE_DTYPE_MAP, 'MoE dtype')); // dtype
    o.text(11, distribution); // distribution
    o.num(12, latencyAt(t, r, lat!, 'latency') * 1000); // latency_us
    o.end();
  }
}

const NCCL_COLS = ['version', 'op_name', 'kernel_source', 'nccl_dtype', 'num_gpus', 'message_size', 'latency'];
function mapNccl(t: CellTable, chip: string, o: RowSink): void {
  const c = new Columns(t, NCCL_COLS);
  const [ver, op, ks, dt, ng, ms, lat] = NCCL_COLS.map((x) => c.req(x)) as number[];
  // The collector hard-codes framework=TRTLLM; the rows are nccl-tests results and `version` is NCCL's.
  const lane = laneMaker(t, -1, ver!, 'nccl');
  const cols = { ks: ks!, op: op!, dt: dt!, ng: ng!, ms: ms!, lat: lat! };
  const dtype = { col: 'nccl_dtype', what: 'collective dtype' };
  collectiveRows(t, chip, o, lane, cols, COLL_OPS, dtype, { j: ks!, col: 'kernel_source', map: BACKEND_MAP });
}

/** Column indices of a comm table's collective fields (`CollectiveRow` order of `collectiveRows`). */
interface CollectiveCols {
  ks: number;
  op: number;
  dt: number;
  ng: number;
  ms: number;
  lat: number;
}

/**
 * Every row of a comm table as a CollectiveRow (one node; message_bytes = message_size elements × the
 * dtype's bytes; latency ms → µs), the nccl-tests and custom all-reduce tables alike. `dtype` names the
 * dtype column, `be` the backend column and its map. Cells are read and checked in column order, so
 * the first bad cell of a row is the one named.
 * @throws InputError naming file, row and column of a bad cell.
 */
function collectiveRows(
  t: CellTable,
  chip: string,
  o: RowSink,
  lane: (r: number) => string,
  c: CollectiveCols,
  ops: ReadonlySet<string>,
  dtype: { col: string; what: string },
  be: { j: number; col: string; map: Record<string, CollectiveBackend> },
): void {
  for (let r = 0; r < t.length; r++) {
    const d = mapped(t, r, c.dt, dtype.col, COLL_DTYPE_MAP, dtype.what);
    o.text(0, chip); // chip
    o.text(1, lane(r)); // lane
    o.text(2, t.text(r, c.ks)); // kernel_source
    o.text(3, checkOp(t, r, c.op, ops) as CollectiveOp); // op
    o.text(4, d.dtype); // dtype
    o.int(5, intAt(t, r, c.ng, 'num_gpus', 1)); // ranks
    o.int(6, 1); // nodes
    o.int(7, intAt(t, r, c.ms, 'message_size', 1) * d.bytes); // message_bytes
    o.text(8, mapped(t, r, be.j, be.col, be.map, 'collective backend')); // backend
    o.num(9, latencyAt(t, r, c.lat, 'latency') * 1000); // latency_us
    o.end();
  }
}

const CUSTOM_AR_COLS = [
  'framework',
  'version',
  'op_name',
  'kernel_source',
  'allreduce_dtype',
  'num_gpus',
  'message_size',
  'latency',
];
/** The backend column of a custom all-reduce table: `backend` (vLLM, SGLang) or `implementation` (TRT-LLM). */
function backendColumn(t: CellTable, c: Columns): { j: number; col: string; map: Record<string, CollectiveBackend> } {
  const be = c.opt('backend');
  if (be >= 0) return { j: be, col: 'backend', map: BACKEND_MAP };
  const impl = c.opt('implementation');
  if (impl >= 0) return { j: impl, col: 'implementation', map: IMPLEMENTATION_MAP };
  throw new InputError(
    { file: t.file, row: 0, column: 'backend' },
    `missing column; a custom all-reduce table needs "backend" (vLLM, SGLang) or "implementation" (TRT-LLM) (found ${t.header.join(', ')})`,
  );
}
function mapCustomAllreduce(t: CellTable, chip: string, o: RowSink): void {
  const c = new Columns(t, [...CUSTOM_AR_COLS, 'backend | implementation']);
  const [fw, ver, op, ks, dt, ng, ms, lat] = CUSTOM_AR_COLS.map((x) => c.req(x)) as number[];
  const be = backendColumn(t, c);
  const lane = laneMaker(t, fw!, ver!);
  const cols = { ks: ks!, op: op!, dt: dt!, ng: ng!, ms: ms!, lat: lat! };
  collectiveRows(t, chip, o, lane, cols, ALL_REDUCE_ONLY, { col: 'allreduce_dtype', what: 'all-reduce dtype' }, be);
}

/**
 * Units check of an upstream table (issue 12 item 2): src/measurements/units.ts `checkUnits`, per
 * dtype and op, reporting the upstream `latency` column. Kept under this name for the importer's callers.
 * @throws InputError containing "check units (ms vs µs vs s?)".
 */
export function checkUnitsSlip(
  family: Family,
  rows: RowList<unknown>,
  chip: Chip,
  file: string,
  latencyColumn = 'latency',
): void {
  checkUnits(family, rows, chip, file, { latencyColumn });
}

/** Result of collapsing repeated configurations. */
export interface Collapsed<R, L extends RowList<R> = R[]> {
  /** Kept rows: the input list itself when nothing repeats, else a new list of the input's kind. */
  rows: L;
  /** Configurations that appeared more than once. */
  duplicate_configs: number;
  /** Rows removed by collapsing (rows_in − rows_out). */
  rows_removed: number;
  /**
   * The repeated configuration whose latencies disagree most: max/min of its latencies, and the
   * 0-based input index of its slowest/fastest extreme that came last. Undefined without repeats.
   */
  worst_spread?: { ratio: number; index: number; min_us: number; max_us: number; repeats: number };
}

/**
 * Largest max/min latency ratio of one repeated configuration an import accepts (issue 12 item 4).
 * Repeats that disagree more measure different things (a mislabelled column, a throttled run), and
 * a median of them would be silently wrong. Source: the only shipped table with repeats (a100
 * context attention, 408 repeated configurations) spreads at most 1.24×; the issue's bad case is 3×.
 */
export const REPEAT_SPREAD_MAX = 1.5;

/** The columns that make a configuration (every column but the latency): what collapseDuplicates keys on. */
export function repeatKey(family: Family): string[] {
  return (FAMILY_COLUMNS[family] as readonly string[]).filter((c) => c !== 'latency_us' && c !== 'measured_us');
}

/**
 * Collapse rows that share every column but `latency_us` to one row with the median latency
 * (for a pair, the mean). Keeps first-occurrence order. Pure. An array in gives an array out; a
 * RowColumns (streaming import) gives a RowColumns, so no row object outlives its check.
 */
export function collapseDuplicates<F extends Family>(
  family: F,
  rows: ReadonlyArray<FamilyRow[F]>,
): Collapsed<FamilyRow[F], FamilyRow[F][]>;
export function collapseDuplicates<F extends Family>(
  family: F,
  rows: RowColumns<FamilyRow[F]>,
): Collapsed<FamilyRow[F], RowColumns<FamilyRow[F]>>;
export function collapseDuplicates<F extends Family>(
  family: F,
  rows: RowList<FamilyRow[F]>,
): Collapsed<FamilyRow[F], RowList<FamilyRow[F]>> {
  const keyCols = repeatKey(family);
  // A sweep written in nested-loop order has strictly increasing keys: no two rows share one (no index).
  if (strictlyIncreasing(rows, keyCols)) return { rows, duplicate_configs: 0, rows_removed: 0 };
  const latCol = (FAMILY_COLUMNS[family] as readonly string[]).includes('latency_us') ? 'latency_us' : 'measured_us';
  const index = new TupleIndex(keyCols, rows, rows.length);
  const latency = readerOf(rows, latCol) as (i: number) => number;
  /** Input index of each kept row (first occurrence), in order: the identity until the first repeat. */
  let keep: Int32Array | undefined;
  let kept = 0;
  /** Latencies of kept rows seen more than once (kept index → all latencies). */
  const repeats = new Map<number, number[]>();
  /** Input index of the last repeat of each kept row. */
  const lastAt = new Map<number, number>();
  for (let i = 0; i < rows.length; i++) {
    const at = index.add(i);
    if (index.added) {
      if (keep) keep[kept] = i;
      kept++;
      continue;
    }
    if (!keep) {
      keep = new Int32Array(rows.length);
      for (let j = 0; j < kept; j++) keep[j] = j;
    }
    lastAt.set(at, i);
    const list = repeats.get(at);
    if (list) list.push(latency(i));
    else repeats.set(at, [latency(keep[at]!), latency(i)]);
  }
  if (repeats.size === 0) return { rows, duplicate_configs: 0, rows_removed: 0 };
  let worst: Collapsed<FamilyRow[F]>['worst_spread'];
  const median = new Map<number, number>();
  for (const [at, lats] of repeats) {
    const s = lats.sort((a, b) => a - b);
    const ratio = s[s.length - 1]! / s[0]!;
    if (!worst || ratio > worst.ratio)
      worst = { ratio, index: lastAt.get(at)!, min_us: s[0]!, max_us: s[s.length - 1]!, repeats: s.length };
    const mid = s.length >> 1;
    median.set(at, s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2);
  }
  const out = rows instanceof RowColumns ? new RowColumns<FamilyRow[F]>() : ([] as FamilyRow[F][]);
  for (let j = 0; j < kept; j++) {
    const row = rows.at(keep![j]!)!;
    const med = median.get(j);
    out.push(med === undefined ? row : { ...row, [latCol]: med });
  }
  return {
    rows: out,
    duplicate_configs: repeats.size,
    rows_removed: rows.length - out.length,
    ...(worst ? { worst_spread: worst } : {}),
  };
}

/**
 * Whether the rows of a RowColumns are in strictly increasing order of the tuple `keyCols`, compared
 * column by column on its typed arrays (numbers by value, text by dictionary id: a total order on each
 * column either way), so that no two rows share a tuple. False for an array of rows, a column some row
 * lacks or holds other values in, NaN, or the first pair out of order (the caller then hashes).
 */
function strictlyIncreasing(rows: RowList<unknown>, keyCols: readonly string[]): boolean {
  if (!(rows instanceof RowColumns)) return false;
  const arrays = keyCols.map((c) => rows.keyArray(c));
  if (arrays.some((a) => a === undefined)) return false;
  // A column holding one value throughout (chip, lane, kernel, dtype of one table) is equal in every pair,
  // so it cannot decide one: left out, the comparison reads the few columns that vary (fewer loads, and
  // one array type for m, n, k instead of a mix of byte ids and int32s).
  const cols = (arrays as ReadonlyArray<Int32Array | Uint8Array | Float64Array>).filter(
    (a) => !oneValue(a, rows.length),
  );
  for (let i = 1; i < rows.length; i++) {
    let c = 0;
    for (; c < cols.length; c++) {
      const a = cols[c]![i - 1]!;
      const b = cols[c]![i]!;
      if (a === b) continue;
      if (!(a < b)) return false;
      break;
    }
    if (c === cols.length) return false;
  }
  return true;
}

/** Whether a[0…n−1] all equal a[0] (false for NaN, which equals nothing). */
function oneValue(a: Int32Array | Uint8Array | Float64Array, n: number): boolean {
  const v = a[0];
  for (let i = 0; i < n; i++) if (a[i] !== v) return false;
  return true;
}

/**
 * Refuse repeats that disagree by more than REPEAT_SPREAD_MAX. @returns a provenance line stating the
 * worst spread. @throws InputError at the input row of the worst repeat (`rowOf` maps its index).
 */
export function checkRepeatSpread(
  c: Pick<Collapsed<unknown>, 'worst_spread' | 'duplicate_configs'>,
  file: string,
  rowOf: (index: number) => number | undefined,
  latencyColumn = 'latency',
): string {
  const w = c.worst_spread;
  if (!w) return 'no repeated configurations';
  const where = rowOf(w.index);
  const fmt = (v: number) => Number(v.toPrecision(4));
  if (w.ratio > REPEAT_SPREAD_MAX) {
    throw new InputError(
      { file, ...(where !== undefined ? { row: where } : {}), column: latencyColumn },
      `conflicting repeats: ${w.repeats} rows of one configuration range ${fmt(w.min_us)}–${fmt(w.max_us)} µs (${w.ratio.toFixed(2)}× apart, above the ${REPEAT_SPREAD_MAX}× bound); ` +
        'they do not measure the same thing (a mislabelled column, a throttled run?), so no median is taken; fix or drop them',
    );
  }
  return `repeats agree: worst spread ${w.ratio.toFixed(3)}× (max/min) over ${c.duplicate_configs} repeated configurations (bound ${REPEAT_SPREAD_MAX}×)`;
}

/**
 * The repeat verdict of an MLA table, never a refusal: repeats are collapsed to their median whatever their
 * spread (the tables repeat in pairs, whose median is the mean scripts/curate.ts curateMla takes). The kernel
 * tables repeat every local head count (the 128- and 64-native head chains, ~0.35 % apart at the median), and
 * their pairs that disagree are eager timing spikes (up to 17× on the curated h200 table) that
 * src/fit/mla-kernel.ts screens, not mislabelled columns. @returns a line for the import summary, or
 * undefined without repeats
 */
function mlaRepeatSpread(c: Pick<Collapsed<unknown>, 'worst_spread' | 'duplicate_configs'>): string | undefined {
  const w = c.worst_spread;
  if (!w) return undefined;
  return `MLA repeats collapsed whatever their spread: worst ${w.ratio.toFixed(3)}× over ${c.duplicate_configs} repeated configurations${w.ratio > REPEAT_SPREAD_MAX ? ` (above the ${REPEAT_SPREAD_MAX}× bound other tables are refused at: a timing spike the MLA fit screens)` : ''}`;
}

/** Which column holds each family's dtype for coverage reporting. */
const COVERAGE_DTYPE: Partial<Record<Family, string>> = {
  gemm: 'dtype',
  attention_decode: 'kv_dtype',
  attention_prefill: 'kv_dtype',
  collective: 'dtype',
  moe: 'dtype',
};

/** Per-dtype coverage of a ragged sweep: rows, distinct shapes, and the union of shapes over all dtypes. */
export interface Coverage {
  [dtype: string]: { rows: number; shapes: number; of_shapes: number };
}

/**
 * Coverage per dtype (issue 2: a ragged sweep is not an error; report it, never invent rows).
 * A "shape" is every column except chip, lane, kernel_source, the dtype column and the latency.
 * `distinctOn`: columns the rows are known to be distinct on (collapseDuplicates' key, for rows it
 * returned); when every one of them outside (dtype, shape) holds one value throughout, each row is its
 * own (dtype, shape) pair and no index of the pairs is built.
 */
export function coverageByDtype<F extends Family>(
  family: F,
  rows: RowList<FamilyRow[F]>,
  distinctOn?: readonly string[],
): Coverage {
  const dcol = COVERAGE_DTYPE[family];
  if (!dcol) return {};
  const shapeCols = (FAMILY_COLUMNS[family] as readonly string[]).filter(
    (c) => !['chip', 'lane', 'kernel_source', 'latency_us', dcol].includes(c),
  );
  const rest = distinctOn?.filter((c) => c !== dcol && !shapeCols.includes(c));
  const distinct = rows.length > 0 && rest !== undefined && rest.every((c) => constantColumn(rows, c));
  const { per, pairs } = distinct
    ? { per: rowsPerDtype(rows, dcol), pairs: rows.length }
    : countPairs(rows, dcol, shapeCols);
  // With one dtype a (dtype, shape) pair is a shape: the union is the pairs (no second pass).
  let ofShapes = pairs;
  if (per.size > 1) {
    const all = new TupleIndex(shapeCols, rows);
    for (let i = 0; i < rows.length; i++) all.add(i);
    ofShapes = all.size;
  }
  const out: Coverage = {};
  for (const [d, e] of [...per.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    out[d] = { rows: e.rows, shapes: e.shapes, of_shapes: ofShapes };
  }
  return out;
}

/** Rows per dtype, each row its own shape (coverageByDtype of distinct pairs). */
function rowsPerDtype(rows: RowList<unknown>, dcol: string): Map<string, { rows: number; shapes: number }> {
  const per = new Map<string, { rows: number; shapes: number }>();
  const dtype = readerOf(rows, dcol);
  for (let i = 0; i < rows.length; ) {
    const v = dtype(i);
    let j = i + 1;
    while (j < rows.length && dtype(j) === v) j++;
    const d = String(v);
    const e = per.get(d) ?? { rows: 0, shapes: 0 };
    e.rows += j - i;
    e.shapes += j - i;
    per.set(d, e);
    i = j;
  }
  return per;
}

/**
 * Rows and distinct (dtype, shape) pairs per dtype, and the pairs in all, through one index (8–16 bytes
 * per distinct tuple; at 2M rows that is the import's peak).
 */
function countPairs(
  rows: RowList<unknown>,
  dcol: string,
  shapeCols: readonly string[],
): { per: Map<string, { rows: number; shapes: number }>; pairs: number } {
  const per = new Map<string, { rows: number; shapes: number }>();
  const pairs = new TupleIndex([dcol, ...shapeCols], rows as RowList<object>, rows.length);
  const dtype = readerOf(rows, dcol);
  let last: unknown;
  let e = { rows: 0, shapes: 0 };
  for (let i = 0; i < rows.length; i++) {
    const v = dtype(i);
    if (i === 0 || v !== last) {
      const d = String(v);
      const known = per.get(d);
      e = known ?? { rows: 0, shapes: 0 };
      if (!known) per.set(d, e);
      last = v;
    }
    e.rows++;
    pairs.add(i);
    if (pairs.added) e.shapes++;
  }
  return { per, pairs: pairs.size };
}

/** Whether column `c` holds one value (===) in every row. */
function constantColumn(rows: RowList<unknown>, c: string): boolean {
  const keys = rows instanceof RowColumns ? rows.keyArray(c) : undefined;
  const read = keys ? (i: number) => keys[i] : rows instanceof RowColumns ? rows.keyReader(c) : readerOf(rows, c);
  const first = read(0);
  for (let i = 1; i < rows.length; i++) if (read(i) !== first) return false;
  return true;
}

/** The lane most rows carry (ties → alphabetical first); names the stored file. */
export function majorityLane(rows: RowList<{ lane: string }>): { lane: string; counts: Record<string, number> } {
  const counts: Record<string, number> = {};
  const read = readerOf(rows, 'lane') as (i: number) => string;
  // Count runs of one lane (rows come grouped by lane): one property update per run, not per row.
  for (let i = 0; i < rows.length; ) {
    const lane = read(i);
    let j = i + 1;
    while (j < rows.length && read(j) === lane) j++;
    counts[lane] = (counts[lane] ?? 0) + (j - i);
    i = j;
  }
  const lane = Object.entries(counts).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]?.[0] ?? '';
  return { lane, counts };
}

/** Unit conversions applied per table (recorded in provenance). */
export function aicUnitConversions(table: AicTable): Record<string, string> {
  const u: Record<string, string> = { latency_us: 'latency [ms] × 1000' };
  if (table === 'nccl_perf') u.message_bytes = 'message_size [elements] × bytes per element (half 2, int8 1)';
  if (table === 'custom_allreduce_perf') u.message_bytes = 'message_size [bf16 elements] × 2';
  if (table === 'generation_attention_perf') u.context_tokens = 'step + 1 (tokens cached + the new token)';
  if (table === 'context_attention_perf') {
    u.new_tokens = 'isl';
    u.prefix_tokens = 'step';
  }
  if (table === 'mla_generation_module_perf' || table === 'generation_mla_perf')
    u.past_tokens =
      'vLLM: step − 1 (attended = step); SGLang / TRT-LLM kernel: step (attended = step + 1) (src/measurements/mla-import.ts)';
  if (table === 'mla_context_module_perf' || table === 'context_mla_perf') {
    u.query_tokens = 'isl';
    u.past_tokens = 'step';
  }
  return u;
}

/** One normalized upstream table, ready to store. */
export interface AicImport {
  table: AicTable;
  family: Family;
  file: string;
  chip: string;
  /** Lane naming the stored file (majority of rows). */
  lane: string;
  lanes: Record<string, number>;
  /** Canonical rows after collapsing repeats (an array, or the streaming import's RowColumns). */
  rows: RowList<unknown>;
  rows_in: number;
  duplicate_configs: number;
  rows_removed: number;
  coverage: Coverage;
  filters: string[];
  units: Record<string, string>;
  /** The repeat check's verdict (`checkRepeatSpread`), for the import summary (not provenance, which stays as curated). */
  repeat_spread: string;
}

/**
 * Normalize one upstream table: map columns and units, check for a units slip against `chipInfo`
 * (when given), collapse repeated configurations to their median, and report coverage per dtype.
 * @throws InputError for any bad row (see mapAicRows / checkUnitsSlip).
 */
export function normalizeAicTable(table: AicTable, raw: RawTable, chip: string, chipInfo?: Chip): AicImport {
  return normalizeMappedRows(table, mapAicRows(table, raw, chip) as unknown[], raw.file, chip, chipInfo);
}

/**
 * The part of normalizeAicTable after mapping, for rows mapped chunk by chunk (streaming import):
 * units-slip check, repeats collapsed to their median (and refused above REPEAT_SPREAD_MAX), lane
 * and coverage. `mappedRows` are in input order (index i is file row i + 1).
 */
export function normalizeMappedRows(
  table: AicTable,
  mappedRows: RowList<unknown>,
  file: string,
  chip: string,
  chipInfo?: Chip,
): AicImport {
  const family = AIC_TABLES[table];
  const raw = { file, rows: mappedRows };
  if (chipInfo) checkUnitsSlip(family, mappedRows, chipInfo, raw.file);
  const col = collapseDuplicates(family, mappedRows as RowList<FamilyRow[Family]> as never) as Collapsed<
    unknown,
    RowList<unknown>
  >;
  const spread = isMlaTable(table) ? mlaRepeatSpread(col) : checkRepeatSpread(col, raw.file, (i) => i + 1);
  const { lane, counts } = majorityLane(col.rows as RowList<{ lane: string }>);
  const filters = [
    `mapped ${table} columns to stepcal ${family} (dtype spellings normalized, kernel_source kept)`,
    chipInfo
      ? `units check against catalog/chips/${chipInfo.name}.yaml (best rate per dtype/op within its datasheet band, fastest call in [${FLOOR_MIN_US} µs, ${FLOOR_MAX_US / 1000} ms]; docs/measurements.md "Units check"): passed`
      : 'units-slip check skipped (no chip datasheet)',
    col.duplicate_configs > 0
      ? `collapsed ${col.duplicate_configs} repeated configurations (${col.rows_removed} rows removed) to their median latency`
      : 'no repeated configurations',
    ...(isMlaTable(table) ? [mlaImportFilter(table, Object.keys(counts)), ...(spread ? [spread] : [])] : []),
  ];
  return {
    table,
    family,
    file: raw.file,
    chip,
    lane,
    lanes: counts,
    rows: col.rows,
    rows_in: raw.rows.length,
    duplicate_configs: col.duplicate_configs,
    rows_removed: col.rows_removed,
    coverage: coverageByDtype(family, col.rows as never, repeatKey(family)),
    filters,
    units: aicUnitConversions(table),
    repeat_spread: spread ?? 'no repeated configurations',
  };
}
