/**
 * Regenerate the reduced onboarding fixture `test/fixtures/onboard/` (issue 15: the onboarding test runs
 * on a reduced copy of the complete upstream folder so CI stays fast) from
 * `../shared/datasets/aiconfigurator-upstream-folder/` (RTX PRO 6000 Blackwell Server, Apache-2.0,
 * NVIDIA / ai-dynamo/aiconfigurator@095f58a5).
 *
 *   node bin/run-ts.mjs scripts/onboard-fixture.ts
 *
 * Same layout (`<op>/<framework>/<version>/<table>.csv`), Parquet converted to CSV unchanged. Every
 * fitted table of the chosen lanes is cut to about ROWS rows by a fixed stride (every n-th row, so each
 * sweep keeps its spread); the other lanes' comm tables (SGLang `backend`, TRT-LLM `implementation`)
 * are kept whole; one reuse pointer, one collection_meta.yaml and one unfitted table (first 50 rows)
 * keep each skip reason exercised; the MLA tables go to `test/fixtures/onboard-mla/` (below). Deterministic:
 * rerunning writes the same bytes.
 */
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../src/core/catalog/chip.ts';
import { parquetTable, type RawTable } from '../src/measurements/table.ts';

const SRC = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'aiconfigurator-upstream-folder');
const SKU = 'rtx_pro_6000_server';
const OUT = path.join(REPO_ROOT, 'test', 'fixtures', 'onboard');
/** Target rows per reduced table. */
const ROWS: Record<string, number> = {
  gemm_perf: 900,
  generation_attention_perf: 600,
  context_attention_perf: 400,
  moe_perf: 600,
};

const REDUCED = [
  'gemm/vllm/0.24.0/gemm_perf',
  'attention/vllm/0.24.0/generation_attention_perf',
  'attention/vllm/0.24.0/context_attention_perf',
  'moe/vllm/0.24.0/moe_perf',
];
const WHOLE = [
  'comm/nccl/2.29.2/nccl_perf',
  'comm/vllm/0.24.0/custom_allreduce_perf',
  'comm/sglang/0.5.14/custom_allreduce_perf',
  'comm/trtllm/1.3.0rc20/custom_allreduce_perf',
];
const COPY = ['gemm/vllm/0.22.0/reuse.yaml', 'gemm/vllm/0.24.0/collection_meta.yaml'];
const UNFITTED = 'mla_bmm/sglang/0.5.14/mla_bmm_perf';

function csv(t: RawTable, rows: ReadonlyArray<RawTable['rows'][number]>): string {
  const cell = (c: unknown) => (typeof c === 'bigint' ? c.toString() : c === null || c === undefined ? '' : String(c));
  return `${[t.header.join(','), ...rows.map((r) => r.map(cell).join(','))].join('\n')}\n`;
}

async function write(rel: string, pick: (t: RawTable) => RawTable['rows']): Promise<void> {
  const t = await parquetTable(path.join(SRC, SKU, `${rel}.parquet`));
  const out = path.join(OUT, SKU, `${rel}.csv`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, csv(t, pick(t)));
}

rmSync(OUT, { recursive: true, force: true });
for (const rel of REDUCED) {
  const n = ROWS[path.basename(rel)]!;
  await write(rel, (t) => t.rows.filter((_, i) => i % Math.max(1, Math.floor(t.rows.length / n)) === 0));
}
for (const rel of WHOLE) await write(rel, (t) => t.rows);
await write(UNFITTED, (t) => t.rows.slice(0, 50));
for (const rel of COPY) {
  mkdirSync(path.dirname(path.join(OUT, SKU, rel)), { recursive: true });
  copyFileSync(path.join(SRC, SKU, rel), path.join(OUT, SKU, rel));
}
// The MLA tables (test/onboard/mla-folder.test.ts), apart so the fixture above stays a folder without MLA:
// the module tables of the vLLM lane, the kernel tables of the SGLang lane (no vLLM lane holds them) and one
// TRT-LLM module table (another lane here; the chosen one, and refused, where no vLLM lane holds it).
const OUT_MLA = path.join(REPO_ROOT, 'test', 'fixtures', 'onboard-mla', SKU);
const MLA_ROWS: Record<string, number> = {
  'mla/vllm/0.24.0/mla_generation_module_perf': 300,
  'mla/vllm/0.24.0/mla_context_module_perf': 200,
  'mla/sglang/0.5.14/generation_mla_perf': 300,
  'mla/sglang/0.5.14/context_mla_perf': 200,
  'mla/trtllm/1.3.0rc20/mla_generation_module_perf': 60,
};
rmSync(path.dirname(OUT_MLA), { recursive: true, force: true });
for (const [rel, n] of Object.entries(MLA_ROWS)) {
  const t = await parquetTable(path.join(SRC, SKU, `${rel}.parquet`));
  const out = path.join(OUT_MLA, `${rel}.csv`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(
    out,
    csv(
      t,
      t.rows.filter((_, i) => i % Math.max(1, Math.floor(t.rows.length / n)) === 0),
    ),
  );
}
mkdirSync(path.join(OUT, 'systems'), { recursive: true });
copyFileSync(path.join(SRC, 'systems', `${SKU}.yaml`), path.join(OUT, 'systems', `${SKU}.yaml`));
