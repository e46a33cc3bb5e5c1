/**
 * CSV writer benchmark (issue 11 item 6: a library slower than our code must not land on a hot path;
 * issue 17 "Import"): 200,000 canonical GEMM rows written by src/core/render/csv.ts `writeCsv` (cells
 * that need no quoting joined directly, other rows by papaparse) and by papaparse's `unparse` alone.
 * Goal: writeCsv no slower than papaparse, and byte-identical. Prints both; never fails.
 */
import Papa from 'papaparse';
import { writeCsv } from '../src/core/render/csv.ts';
import { FAMILY_COLUMNS } from '../src/measurements/schema.ts';

const ROWS = 200_000;

function bestMs(fn: () => string, reps = 5): { ms: number; text: string } {
  let ms = Infinity;
  let text = '';
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    text = fn();
    ms = Math.min(ms, performance.now() - t0);
  }
  return { ms, text };
}

export default async function bench(): Promise<void> {
  const cols = FAMILY_COLUMNS.gemm as readonly string[];
  const rows = Array.from({ length: ROWS }, (_, i) => ({
    chip: 'h200',
    lane: 'vllm-0.24.0',
    kernel_source: 'default',
    dtype: i % 2 ? 'bf16' : 'fp8',
    m: 1 + (i % 977),
    n: 128 * (1 + (i % 61)),
    k: 96 * (1 + (i % 83)),
    latency_us: 5 + i / 7,
  })) as Array<Record<string, unknown>>;
  const ours = bestMs(() => writeCsv(cols, rows));
  const papa = bestMs(
    () => `${Papa.unparse({ fields: [...cols], data: rows.map((r) => cols.map((c) => r[c])) }, { newline: '\n' })}\n`,
  );
  const same = ours.text === papa.text;
  process.stdout.write(
    `CSV write, ${ROWS.toLocaleString('en')} GEMM rows: writeCsv ${ours.ms.toFixed(0)} ms, papaparse unparse ${papa.ms.toFixed(0)} ms ` +
      `(ratio ${(ours.ms / papa.ms).toFixed(2)}; goal ≤ 1.00: ${ours.ms <= papa.ms ? 'met' : 'NOT met'}); byte-identical: ${same ? 'yes' : 'NO'}\n`,
  );
}
