/**
 * Regenerate the shipped measurements under `measurements/<chip>/` from the read-only datasets in
 * `../shared/datasets` (relative to the repository root), and rewrite `measurements/README.md`.
 *
 *   node bin/run-ts.mjs scripts/curate.ts            # everything
 *   node bin/run-ts.mjs scripts/curate.ts aic        # AIConfigurator tables only
 *   node bin/run-ts.mjs scripts/curate.ts splitwise  # Splitwise step files only
 *   node bin/run-ts.mjs scripts/curate.ts gb200      # GB200 base set only (verbatim Parquet, aiconfigurator-modern)
 *
 * Selection (issue 2): per SKU the vLLM lane for gemm / attention / moe, NCCL + vLLM custom all-reduce
 * for collectives, and the TRT-LLM GEMM lane for h200 as well. GB200 (issue 15) is read from the verbatim
 * Parquet base set in `../shared/datasets/aiconfigurator-modern/gb200` with the onboarding's lane rule
 * (src/measurements/upstream-folder.ts: newest vLLM lane per table, newest NCCL lane). Output is deterministic (gzip level 9,
 * mtime 0), so rerunning on the same inputs reproduces the same bytes.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { chipFromSku, loadChip, REPO_ROOT } from '../src/core/catalog/chip.ts';
import { note } from '../src/core/io/progress.ts';
import { AIC_COMMIT, AIC_REPOSITORY, importAicFiles, type ImportSummary } from '../src/measurements/import.ts';
import { listMeasurementFiles, listStepFiles, readProvenance } from '../src/measurements/store.ts';
import { sha256File, writeFileAtomic } from '../src/core/io/fs.ts';
import { mapSparseTable, SPARSE_TABLES, type SparseTable } from '../src/measurements/sparse-import.ts';
import { parquetTable } from '../src/measurements/table.ts';
import { checkUnits } from '../src/measurements/units.ts';
import { writeMeasurements } from '../src/measurements/store.ts';
import type { ExpertA2aRow, Family, FamilyRow, MlaRow, Provenance, SparseRow } from '../src/measurements/schema.ts';
import { mapDeepepTable } from '../src/measurements/deepep-import.ts';
import { MNNVL_KERNEL, mapTrtllmA2aTable } from '../src/measurements/trtllm-a2a-import.ts';
import { collapseMlaRepeats, mapMlaTableByFramework, type MlaTable } from '../src/measurements/mla-import.ts';

const SHARED = path.resolve(REPO_ROOT, '..', 'shared', 'datasets');
const AIC = path.join(SHARED, 'aiconfigurator');
const AIC_MODERN_GB200 = path.join(SHARED, 'aiconfigurator-modern', 'gb200');
const SPLITWISE = path.join(SHARED, 'splitwise', 'perf_model.csv');
const OUT = path.join(REPO_ROOT, 'measurements');

const SKUS = ['h200_sxm', 'h100_sxm', 'b200_sxm', 'a100_sxm', 'l40s'];
/** table → lane-folder prefix to take. */
const SELECTION: Array<[string, string]> = [
  ['gemm_perf', 'vllm-'],
  ['context_attention_perf', 'vllm-'],
  ['generation_attention_perf', 'vllm-'],
  ['moe_perf', 'vllm-'],
  ['nccl_perf', 'nccl-'],
  ['custom_allreduce_perf', 'vllm-'],
];
const EXTRA: Record<string, Array<[string, string]>> = { h200_sxm: [['gemm_perf', 'trtllm-']] };

/** Numeric-aware version compare ("0.24.0" > "0.14.0", "1.3.0rc20" > "1.3.0rc5"). */
function cmpVersion(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

/** Newest `<prefix><version>` folder holding `<table>.csv` under `<sku>/<table>/`. */
function pick(sku: string, table: string, prefix: string): string | undefined {
  const dir = path.join(AIC, sku, table);
  if (!existsSync(dir)) return undefined;
  const lanes = readdirSync(dir)
    .filter((d) => d.startsWith(prefix) && existsSync(path.join(dir, d, `${table}.csv`)))
    .sort((a, b) => cmpVersion(b.slice(prefix.length), a.slice(prefix.length)));
  return lanes[0] ? path.join(dir, lanes[0], `${table}.csv`) : undefined;
}

/** Known quirks to carry into provenance (dataset README, "Quirks found"). */
function quirks(sku: string, table: string): string[] {
  const n: string[] = [
    'converted upstream from Parquet to CSV unchanged (../shared/datasets/aiconfigurator/README.md)',
  ];
  if (table === 'nccl_perf')
    n.push(
      'upstream framework column says TRTLLM (collector hard-codes it); rows are nccl-tests results, lane is the NCCL version',
    );
  if (sku === 'l40s' && table === 'custom_allreduce_perf')
    n.push(
      'upstream folder vllm/0.22.0 is a byte-identical copy of the 0.14.0 table (version column 0.14.0); lane follows the rows',
    );
  if (sku === 'b200_sxm' && table === 'moe_perf')
    n.push(
      '972 Kimi-K3 w4a16_mxfp4 Marlin rows were collected with a vLLM preview build; their lane column keeps that version',
    );
  if (sku === 'a100_sxm' && (table === 'context_attention_perf' || table === 'generation_attention_perf'))
    n.push('a100 tables have no window_size column; window = 0 (full attention)');
  if (table === 'context_attention_perf' || table === 'generation_attention_perf')
    n.push(
      'kernel dispatch changes within the table (e.g. triton fallbacks for head_dim 192 + fp8 KV on b200/l40s): fit per kernel_source or exclude fallbacks',
    );
  return n;
}

async function curateAic(): Promise<void> {
  for (const sku of SKUS) {
    const chip = chipFromSku(sku);
    const chipInfo = loadChip(chip);
    const files = [...SELECTION, ...(EXTRA[sku] ?? [])]
      .map(([table, prefix]) => pick(sku, table, prefix))
      .filter((f): f is string => f !== undefined);
    note(`curate: ${chip}: ${files.length} tables`);
    const sums: ImportSummary[] = await importAicFiles(
      files,
      {
        chip,
        chipInfo,
        outDir: path.join(OUT, chip),
        sourceRepository: AIC_REPOSITORY,
        sourceCommit: AIC_COMMIT,
        licence: 'Apache-2.0',
        notes: (imp) => quirks(sku, imp.table),
      },
      (f) => note(`  read ${path.relative(AIC, f)}`),
    );
    for (const s of sums) {
      note(
        `  wrote ${path.relative(REPO_ROOT, s.file)}: ${s.rows_in} → ${s.rows_out} rows${s.duplicate_configs ? ` (${s.duplicate_configs} repeated configs collapsed)` : ''}`,
      );
    }
  }
}

/** Known GB200 quirks (../shared/datasets/aiconfigurator-modern/README.md and systems/gb200.yaml). */
function gb200Notes(table: string): string[] {
  const n = [
    'read verbatim from upstream Parquet (../shared/datasets/aiconfigurator-modern/gb200); the rows are GB200 measurements (device "NVIDIA GB200"), not B200 copies',
  ];
  if (table === 'nccl_perf' || table === 'custom_allreduce_perf')
    n.push('GB200 comm tables cover 2 and 4 GPUs only (one compute tray); wider groups are not measured');
  if (table === 'nccl_perf')
    n.push(
      'systems/gb200.yaml says nccl_version 2.23, stale: the rows and their folder are NCCL 2.29.2; the lane follows the rows',
      'upstream framework column says TRTLLM (collector hard-codes it); rows are nccl-tests results, lane is the NCCL version',
    );
  return n;
}

async function curateGb200(): Promise<void> {
  if (!existsSync(AIC_MODERN_GB200)) return note(`curate: gb200: ${AIC_MODERN_GB200} not found, skipped`);
  const { scanUpstreamFolder } = await import('../src/measurements/upstream-folder.ts');
  const scan = await scanUpstreamFolder(AIC_MODERN_GB200);
  const files = scan.tables.map((t) => t.chosen.file);
  note(`curate: gb200: ${files.length} tables (${scan.tables.map((t) => `${t.table} ${t.chosen.lane}`).join(', ')})`);
  const sums = await importAicFiles(files, {
    chip: 'gb200',
    chipInfo: loadChip('gb200'),
    outDir: path.join(OUT, 'gb200'),
    sourceRepository: AIC_REPOSITORY,
    sourceCommit: AIC_COMMIT,
    licence: 'Apache-2.0',
    notes: (imp) => gb200Notes(imp.table),
  });
  for (const s of sums) note(`  wrote ${path.relative(REPO_ROOT, s.file)}: ${s.rows_in} → ${s.rows_out} rows`);
}

async function curateSplitwise(): Promise<void> {
  const { importSplitwise } = await import('../src/measurements/splitwise.ts');
  const res = importSplitwise(SPLITWISE, {
    outRoot: OUT,
    sourceRepository: 'Splitwise (Patel et al., ISCA 2024) perf_model.csv',
  });
  note(`curate: splitwise: ${res.rows_in} source rows, ${res.repeated_configs} repeated configurations collapsed`);
  for (const s of res.summaries)
    note(
      `  wrote ${path.relative(REPO_ROOT, s.file)}: ${s.configs} configs → ${s.rows_out} rows; flagged ${JSON.stringify(s.flagged)}`,
    );
}

/** Rewrite measurements/README.md from what is on disk (row counts read from provenance). */
function writeReadme(): void {
  const lines: string[] = [];
  const chips = existsSync(OUT)
    ? readdirSync(OUT, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => d.name)
        .sort()
    : [];
  for (const chip of chips) {
    const dir = path.join(OUT, chip);
    for (const f of listMeasurementFiles(dir)) {
      const p = readProvenance(f.file);
      lines.push(
        `| ${chip}/${path.basename(f.file)} | ${p.family} | ${p.lane} | ${p.rows_in} | ${p.rows_out} | ${p.duplicate_configs ?? 0} | \`${p.source_path}\` |`,
      );
    }
    for (const f of listStepFiles(dir)) {
      const p = readProvenance(f);
      lines.push(
        `| ${chip}/${path.basename(f)} | step | ${p.lane} | ${p.rows_in} | ${p.rows_out} | ${p.duplicate_configs ?? 0} | \`${p.source_path}\` |`,
      );
    }
  }
  const text = `# Shipped measurements

Normalized per-operator timings (and held-out step timings) that \`stepcal calibrate\` fits and validates against.
Generated by \`node bin/run-ts.mjs scripts/curate.ts\` from \`../shared/datasets\`; do not edit by hand.
Each data file has a \`*.provenance.yaml\` beside it with the source repository, path and commit, licence,
sha256 of every input, the filters applied, rows in/out, unit conversions, repeated configurations collapsed,
lanes found and per-dtype coverage.

## Sources and licence

* **Per-operator tables**: NVIDIA AIConfigurator, \`${AIC_REPOSITORY}\` at commit \`${AIC_COMMIT}\`,
  \`aic-core/src/aiconfigurator_core/systems/data/<sku>/<op_category>/<framework>/<version>/<table>.parquet\`
  (read here from the CSV copies in \`../shared/datasets/aiconfigurator\`; gb200 from the verbatim Parquet in
  \`../shared/datasets/aiconfigurator-modern/gb200\`; rtx-pro-6000 by \`stepcal onboard\` from the complete upstream
  folder \`../shared/datasets/aiconfigurator-upstream-folder/rtx_pro_6000_server\`, docs/onboarding.md). Licence
  **Apache-2.0** (copyright NVIDIA CORPORATION & AFFILIATES); redistributed with attribution, converted from Parquet
  and normalized.
* **Held-out step timings** (\`*.steps.csv\`): Splitwise \`perf_model.csv\` (\`../shared/datasets/splitwise\`); see
  the provenance files and docs/measurements.md for the mapping and the flags.

## Layout and units

\`<chip>/<family>.<lane>.csv.gz\` with header = \`FAMILY_COLUMNS[family]\` in \`src/measurements/schema.ts\`.
Internal units: time in **µs** (\`latency_us\` = upstream ms × 1000), sizes in **bytes** (collective
\`message_bytes\` = upstream element count × dtype width: half/bf16 2 B, int8 1 B), work in FLOPs.
Decode attention \`context_tokens\` = upstream \`step + 1\`; prefill \`new_tokens\` = \`isl\`, \`prefix_tokens\` = \`step\`.
Head counts are per GPU. \`lane\` = \`<framework>-<version>\` of each row (NCCL rows: \`nccl-<NCCL version>\`);
the file is named after the lane most of its rows carry.

Selection: the vLLM lane for gemm, attention and moe (vLLM 0.24.0; a100 only has 0.14.0), NCCL and vLLM custom
all-reduce for collectives, plus the TRT-LLM 1.3.0rc20 GEMM lane for h200. GB200's comm tables cover 2 and 4 GPUs
only, and its descriptor's nccl_version (2.23) is stale: the rows are NCCL 2.29.2. Recurrent mixers (\`recurrent\`,
issue 14) imported one table at a time (\`stepcal import aiconfigurator\`) from \`../shared/datasets/aiconfigurator-modern/\`
(same commit): GDN (vLLM 0.24.0), KDA (vLLM Kimi-K3 preview 0.1.dev19262) and Mamba2 (TRT-LLM 1.3.0rc20; b200 also
1.3.0rc15, the only lane with \`mamba_chunk_scan_combined\` rows) for h200, h100, b200, gb200 and l40s; the a100 GDN
table (old SGLang harness) is refused by the importer.

## Files

| file | family | lane | rows in | rows out | repeated configs collapsed | upstream path |
|---|---|---|---:|---:|---:|---|
${lines.join('\n')}

## Regenerate

\`\`\`
node bin/run-ts.mjs scripts/curate.ts
\`\`\`

or import one table at a time: \`node bin/stepcal.mjs import aiconfigurator <table.csv|.parquet> --chip <chip>\`.
`;
  writeFileAtomic(path.join(OUT, 'README.md'), text);
}

const MODERN = path.join(SHARED, 'aiconfigurator-modern');
/** Chips whose sparse family is fitted (issue 14): the vLLM 0.24.0 lane of the modern tables. */
const SPARSE_SKUS = ['h200_sxm', 'b200_sxm', 'h100_sxm', 'gb200'];

/** The verbatim aiconfigurator-modern tables one curated file is read from: inputs with sha256 and upstream paths. */
class ModernSources {
  readonly inputs: Array<{ file: string; sha256: string; rows: number }> = [];
  readonly paths: string[] = [];
  /** Record `rel` (a path under ../shared/datasets/aiconfigurator-modern) with the rows read from it. */
  add(rel: string, rows: number): void {
    const file = path.join(MODERN, rel);
    this.inputs.push({ file: path.relative(REPO_ROOT, file), sha256: sha256File(file), rows });
    this.paths.push(`aic-core/src/aiconfigurator_core/systems/data/${rel}`);
  }
}

/**
 * Units-check and write one curated aiconfigurator-modern file with its provenance (the repository, commit
 * and licence every modern table shares; `rest` gives filters, row counts, units and notes, in that order).
 */
function writeModern<F extends Family>(
  chip: string,
  family: F,
  lane: string,
  rows: FamilyRow[F][],
  src: ModernSources,
  rest: Omit<
    Provenance,
    | 'family'
    | 'chip'
    | 'lane'
    | 'source_repository'
    | 'source_path'
    | 'source_commit'
    | 'licence'
    | 'inputs'
    | 'output_sha256'
  >,
): void {
  checkUnits(family, rows, loadChip(chip), `measurements/${chip}/${family}.${lane}.csv.gz`);
  const out = writeMeasurements(path.join(OUT, chip), family, lane, rows, {
    family,
    chip,
    lane,
    source_repository: AIC_REPOSITORY,
    source_path: src.paths.join('; '),
    source_commit: AIC_COMMIT,
    licence: 'Apache-2.0',
    inputs: src.inputs,
    ...rest,
  });
  note(`  wrote ${path.relative(REPO_ROOT, out)}: ${rows.length} rows`);
}

/** The sparse family (issue 14): DeepSeek-V4 sparse FlashMLA, its block-index scorer and mHC, one file per chip. */
async function curateSparse(): Promise<void> {
  for (const sku of SPARSE_SKUS) {
    const chip = chipFromSku(sku);
    const rows: SparseRow[] = [];
    const src = new ModernSources();
    let rowsIn = 0;
    for (const table of Object.keys(SPARSE_TABLES) as SparseTable[]) {
      const rel = path.join(sku, SPARSE_TABLES[table].category, 'vllm', '0.24.0', `${table}.parquet`);
      const raw = await parquetTable(path.join(MODERN, rel));
      rows.push(...mapSparseTable(table, raw, chip));
      rowsIn += raw.rows.length;
      src.add(rel, raw.rows.length);
    }
    writeModern(chip, 'sparse', 'vllm-0.24.0', rows, src, {
      filters: [
        'dsv4_hca_attn_module_perf → op sparse_attn (DeepSeek-V4-Flash HCA sparse FlashMLA; window 128, head_dim 512, compress_ratio from the row, no top-k)',
        'dsv4_paged_mqa_logits_module_perf → op indexer (block-index scorer; head_dim = index_head_dim 128)',
        'mhc_module_perf → op mhc_pre / mhc_post (latency covers num_sites calls)',
        'heads = local_num_heads; query_tokens = isl; past_tokens = step (attended = step + isl)',
        'msa_{context,generation}_module_perf → op msa (the whole MiniMax-M3 MSA module; kept: gemm_type bfloat16 and kv_cache_dtype bfloat16 only, the checkpoint’s lane; heads = num_heads; head_dim 128, hidden 6144, index_topk = (16 + 1) × 128 = 2176 selected tokens, compress_ratio 1, window 0)',
      ],
      rows_in: rowsIn,
      rows_out: rows.length,
      units: { latency_us: 'latency [ms] × 1000' },
      duplicate_configs: 0,
      notes: [
        'verbatim Parquet from ../shared/datasets/aiconfigurator-modern (README.md, VALUES.md); model facts from ../shared/datasets/model-configs/deepseek-ai--DeepSeek-V4-Flash/config.json and (MSA) MiniMaxAI--MiniMax-M3/config.json',
      ],
    });
  }
}

/**
 * The MLA family (issue 13 item 2), one file per chip: the vLLM 0.24.0 module tables and the attention-kernel
 * tables (vLLM 0.14.0 on Hopper, A100 and L40S; SGLang 0.5.14 on Blackwell, where vLLM has none), each table
 * read with the generation `step` convention its `framework` column names (mla-import.ts mapMlaTableByFramework,
 * the one onboarding uses).
 */
const MLA_SOURCES: Record<string, Array<{ dir: string; tables: MlaTable[] }>> = {
  h200_sxm: [
    { dir: 'vllm/0.24.0', tables: ['mla_generation_module_perf', 'mla_context_module_perf'] },
    { dir: 'vllm/0.14.0', tables: ['generation_mla_perf', 'context_mla_perf'] },
  ],
  h100_sxm: [
    { dir: 'vllm/0.24.0', tables: ['mla_generation_module_perf', 'mla_context_module_perf'] },
    { dir: 'vllm/0.14.0', tables: ['generation_mla_perf', 'context_mla_perf'] },
  ],
  b200_sxm: [
    { dir: 'vllm/0.24.0', tables: ['mla_generation_module_perf', 'mla_context_module_perf'] },
    { dir: 'sglang/0.5.14', tables: ['generation_mla_perf', 'context_mla_perf'] },
  ],
  gb200: [
    { dir: 'vllm/0.24.0', tables: ['mla_generation_module_perf', 'mla_context_module_perf'] },
    { dir: 'sglang/0.5.14', tables: ['generation_mla_perf', 'context_mla_perf'] },
  ],
  a100_sxm: [{ dir: 'vllm/0.14.0', tables: ['generation_mla_perf', 'context_mla_perf'] }],
  l40s: [
    { dir: 'vllm/0.24.0', tables: ['mla_generation_module_perf', 'mla_context_module_perf'] },
    { dir: 'vllm/0.14.0', tables: ['generation_mla_perf', 'context_mla_perf'] },
  ],
};

async function curateMla(): Promise<void> {
  for (const [sku, sources] of Object.entries(MLA_SOURCES)) {
    const chip = chipFromSku(sku);
    const all: MlaRow[] = [];
    const read = new ModernSources();
    for (const src of sources)
      for (const table of src.tables) {
        const rel = path.join(sku, 'mla', src.dir, `${table}.parquet`);
        const mapped = mapMlaTableByFramework(table, await parquetTable(path.join(MODERN, rel)), chip);
        all.push(...mapped);
        read.add(rel, mapped.length);
      }
    const lane = sources[0]!.dir.replace('/', '-');
    const { rows, collapsed } = collapseMlaRepeats(all);
    writeModern(chip, 'mla', lane, rows, read, {
      filters: [
        'mla_generation_module_perf → op decode_module (whole vLLM module incl. projections); past_tokens = step − 1 (step = total length)',
        'mla_context_module_perf → op prefill_module; query_tokens = isl, past_tokens = step (0)',
        'generation_mla_perf → op decode_kernel (attention kernel only); vLLM 0.14.0: past_tokens = step − 1 (seq_lens = step); SGLang: past_tokens = step (attended step + 1)',
        'context_mla_perf → op prefill_kernel; query_tokens = isl, past_tokens = step (0)',
        'kv_cache_dtype bfloat16 → bf16; heads = num_heads (per GPU); gemm_dtype = gemm_type (module rows only)',
        'not read: the SGLang WideEP MLA tables (labelled fp8, ran bf16, eager, q/kv-a projection replaced by randn)',
      ],
      rows_in: all.length,
      rows_out: rows.length,
      units: { latency_us: 'latency [ms] × 1000' },
      duplicate_configs: collapsed,
      notes: [
        'verbatim Parquet from ../shared/datasets/aiconfigurator-modern (README.md, VALUES.md); MLA dims fixed to DeepSeek-V3 (kv_lora_rank 512 + qk_rope_head_dim 64 = 576 latent elements per token)',
        ...(collapsed
          ? [
              `${collapsed} repeated keys collapsed to their mean latency (the kernel tables' 128- and 64-native head chains at one local head count agree to ~0.35 %; the gb200 SGLang kernel tables keep every key twice)`,
            ]
          : []),
      ],
    });
  }
}

/**
 * The expert_alltoall family (issue 13 item 3), one file per chip: SGLang 0.5.12's DeepEP low-latency and normal
 * tables, one full-node job each (8 ranks; 4 on gb200, one tray). Bytes per rank from deepep-import.ts.
 */
const DEEPEP_RANKS: Record<string, number> = { h200_sxm: 8, h100_sxm: 8, b200_sxm: 8, gb200: 4 };

async function curateExpertA2a(): Promise<void> {
  for (const [sku, ranks] of Object.entries(DEEPEP_RANKS)) {
    const chip = chipFromSku(sku);
    const rows: ExpertA2aRow[] = [];
    const src = new ModernSources();
    for (const mode of ['ll', 'normal'] as const) {
      const rel = path.join(sku, 'comm', 'sglang', '0.5.12', `wideep_deepep_${mode}_perf.parquet`);
      const mapped = mapDeepepTable(mode, await parquetTable(path.join(MODERN, rel)), chip, ranks);
      rows.push(...mapped);
      src.add(rel, mapped.length / 2);
    }
    writeModern(chip, 'expert_alltoall', 'sglang-0.5.12', rows, src, {
      filters: [
        'each upstream row → one dispatch and one combine row (mode ll: *_avg_t_us; normal: *_transmit_us, every SM budget kept)',
        'message_bytes per rank: ll dispatch T·k·(H + H/128·4 + 16), ll combine T·k·H·2; normal: T·E[ranks touched]·(H + H/128·4) dispatch, ·H·2 combine',
        `ranks = ${ranks} (one full-node job, node_num 1)`,
      ],
      rows_in: rows.length / 2,
      rows_out: rows.length,
      units: { latency_us: 'µs as stored (DeepEP *_us columns)' },
      notes: ['verbatim Parquet from ../shared/datasets/aiconfigurator-modern (README.md "DeepEP", VALUES.md)'],
    });
  }
}

/**
 * gb200's rack-wide all-to-all (issue 13 item 3): TRT-LLM's NVLinkTwoSided dispatch and combine over the NVL72
 * rack, ep 2–64, as mode `mnnvl` (src/measurements/trtllm-a2a-import.ts). The table's folder is 1.3.0rc10, its
 * `version` column 1.2.0rc6 (the dataset README quirk): the lane follows the column.
 */
async function curateMnnvlA2a(): Promise<void> {
  const rel = path.join('gb200', 'comm', 'trtllm', '1.3.0rc10', 'trtllm_alltoall_perf.parquet');
  const raw = await parquetTable(path.join(MODERN, rel));
  const rows = mapTrtllmA2aTable(raw, 'gb200');
  const src = new ModernSources();
  src.add(rel, raw.rows.length);
  const lanes = [...new Set(rows.map((r) => r.lane))];
  if (lanes.length !== 1) throw new Error(`trtllm_alltoall_perf: expected one version, got ${lanes.join(', ')}`);
  writeModern('gb200', 'expert_alltoall', lanes[0]!, rows, src, {
    filters: [
      `kernel_source ${MNNVL_KERNEL} only (NVLinkOneSided, nvfp4 only at ep ≤ 32, left out); op_name alltoall_dispatch and alltoall_combine (alltoall_prepare and alltoall_combine_low_precision left out)`,
      'mode mnnvl; message_bytes per rank T·(min(k, R) − 1)·H·bytes (dispatch: bfloat16 2, fp8 1, nvfp4 0.5625; combine BF16 2); kernel_source carries the payload dtype',
      'nodes = 1: every rank in one NVLink domain (the NVL72 rack), up to 64 ranks',
    ],
    rows_in: raw.rows.length,
    rows_out: rows.length,
    units: { latency_us: 'ms × 1000 (upstream `latency` is ms: the dataset README "Units")' },
    notes: ['verbatim Parquet from ../shared/datasets/aiconfigurator-modern (README.md "TRT-LLM NVLink all-to-all")'],
  });
}

const what = process.argv[2] ?? 'all';
if (what === 'all' || what === 'expert_alltoall') await curateExpertA2a();
if (what === 'all' || what === 'expert_alltoall') await curateMnnvlA2a();
if (what === 'all' || what === 'mla') await curateMla();
if (what === 'all' || what === 'sparse') await curateSparse();
if (what === 'all' || what === 'aic') await curateAic();
if (what === 'all' || what === 'aic' || what === 'gb200') await curateGb200();
if (what === 'all' || what === 'splitwise') await curateSplitwise();
writeReadme();
