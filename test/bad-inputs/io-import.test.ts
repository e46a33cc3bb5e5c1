/**
 * Bad-input corpus, import group (issue 12 item 4: import never loses data). Each case: exit code,
 * a fragment of the one-line message, and the repository unchanged (harness). Inputs are slices of
 * the shared AIConfigurator tables written into the case's temp folder.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

const AIC = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'aiconfigurator');
const SPLITWISE = path.resolve(REPO_ROOT, '..', 'shared', 'datasets', 'splitwise', 'perf_model.csv');
const NCCL8 = path.join(REPO_ROOT, 'test', 'measurements', 'fixtures', 'all_reduce_perf.8ranks.txt');
const aic = (sku: string, table: string, lane: string) => path.join(AIC, sku, table, lane, `${table}.csv`);
const H200_GEMM = aic('h200_sxm', 'gemm_perf', 'vllm-0.24.0');
const A100_GEMM = aic('a100_sxm', 'gemm_perf', 'vllm-0.14.0');

/** Header and the first `n` data lines of a shared CSV. */
function head(file: string, n: number): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .slice(0, n + 1);
}

/** Write `<tmp>/<sub>/gemm_perf.csv` from lines; returns its path. */
function table(tmp: string, lines: string[], sub = 'in', name = 'gemm_perf'): string {
  mkdirSync(path.join(tmp, sub), { recursive: true });
  const f = path.join(tmp, sub, `${name}.csv`);
  writeFileSync(f, `${lines.join('\n')}\n`);
  return f;
}

/** nccl-tests stdout with the #wrong count of the first data line's out-of-place half set to `wrong` (and optionally the in-place one). */
function ncclWithWrong(tmp: string, outOfPlace: string, inPlace = '0'): string {
  const text = readFileSync(NCCL8, 'utf8').replace(
    /(419\.49\s+)0(\s+1120\.3\s+239\.61\s+419\.32\s+)0/,
    `$1${outOfPlace}$2${inPlace}`,
  );
  const f = path.join(tmp, 'all_reduce_perf.txt');
  writeFileSync(f, text);
  return f;
}

const CASES: BadInputCase[] = [
  {
    name: 'default --out would replace the curated h200 GEMM table with a 20-row slice',
    setup: (t) => void table(t, head(H200_GEMM, 20)),
    args: (t) => ['import', 'aiconfigurator', path.join(t, 'in', 'gemm_perf.csv'), '--chip', 'h200'],
    code: 1,
    message:
      /refusing to overwrite an existing curated file: .*measurements\/h200\/gemm\.vllm-0\.24\.0\.csv\.gz \(\d+ rows/,
  },
  {
    name: 'a second import into the same --out folder without --force',
    setup: (t) => {
      table(t, head(H200_GEMM, 20));
      mkdirSync(path.join(t, 'out'));
      writeFileSync(path.join(t, 'out', 'gemm.vllm-0.24.0.csv.gz'), 'earlier import');
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: 'Pass --force to replace',
  },
  {
    name: 'splitwise default output would replace the curated held-out steps',
    args: ['import', 'splitwise', SPLITWISE],
    code: 1,
    message: /refusing to overwrite .*splitwise\.steps\.csv/,
  },
  {
    // --out alone refuses a multi-chip file, so the way out names --chip as well
    name: 'splitwise refusal over two chips suggests --chip with --out',
    args: ['import', 'splitwise', SPLITWISE],
    code: 1,
    message: 'or --chip <chip> --out <dir> to write one chip elsewhere',
  },
  {
    name: 'system descriptor would replace the catalog chip file',
    args: ['import', 'system', path.join(AIC, 'systems', 'h200_sxm.yaml')],
    code: 1,
    message: /refusing to overwrite .*catalog\/chips\/h200\.yaml/,
  },
  {
    name: 'nccl-tests into a folder that already holds that lane',
    setup: (t) => {
      mkdirSync(path.join(t, 'out'));
      writeFileSync(path.join(t, 'out', 'collective.nccl-tests-unknown.csv.gz'), 'x');
    },
    args: (t) => ['import', 'nccl-tests', NCCL8, '--chip', 'h100', '--out', path.join(t, 'out')],
    code: 1,
    message: 'refusing to overwrite',
  },
  {
    name: 'two latency columns (the last used to win silently)',
    setup: (t) => {
      const [h, ...rows] = head(H200_GEMM, 5);
      table(t, [`${h},latency`, ...rows.map((r) => `${r},9.9`)]);
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /row 0 \(header\) column "latency": duplicated column: "latency" is both column 10 and column 11/,
  },
  {
    name: 'two m columns',
    setup: (t) => {
      const [h, ...rows] = head(H200_GEMM, 5);
      table(t, [h!.replace(',n,', ',m,'), ...rows]);
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: 'duplicated column: "m"',
  },
  {
    name: 'an A100 table imported as h200 (device column)',
    setup: (t) => void table(t, head(A100_GEMM, 20)),
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /row 1 column "device": device "NVIDIA A100-SXM4-80GB" names chip a100, not --chip h200/,
  },
  {
    name: 'one H100 row inside an h200 table',
    setup: (t) => {
      const lines = head(H200_GEMM, 20);
      lines[7] = lines[7]!.replace('NVIDIA H200', 'NVIDIA H100 80GB HBM3');
      table(t, lines);
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /row 7 column "device": .*names chip h100/,
  },
  {
    name: 'repeats of one configuration 3× apart',
    setup: (t) => {
      const lines = head(H200_GEMM, 10);
      const cells = lines[3]!.split(',');
      cells[cells.length - 1] = String(Number(cells[cells.length - 1]) * 3);
      table(t, [...lines, cells.join(',')]);
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message:
      /row 11 column "latency": conflicting repeats: 2 rows of one configuration .*3\.00× apart, above the 1\.5× bound/,
  },
  {
    name: 'repeats 3× apart across two input files',
    setup: (t) => {
      const lines = head(H200_GEMM, 10);
      table(t, lines, 'a');
      const cells = lines[2]!.split(',');
      cells[cells.length - 1] = String(Number(cells[cells.length - 1]) * 3);
      table(t, [lines[0]!, cells.join(',')], 'b');
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'a', 'gemm_perf.csv'),
      path.join(t, 'b', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: 'conflicting repeats',
  },
  {
    name: 'the same file given twice',
    setup: (t) => void table(t, head(H200_GEMM, 20)),
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: 'are the same file (sha256',
  },
  {
    name: 'the same bytes under two paths',
    setup: (t) => {
      const f = table(t, head(H200_GEMM, 20));
      mkdirSync(path.join(t, 'copy'));
      copyFileSync(f, path.join(t, 'copy', 'gemm_perf.csv'));
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      path.join(t, 'copy', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /copy\/gemm_perf\.csv and .*in\/gemm_perf\.csv are the same file/,
  },
  {
    name: 'the same nccl-tests output given twice',
    args: (t) => ['import', 'nccl-tests', NCCL8, NCCL8, '--chip', 'h100', '--out', path.join(t, 'out')],
    code: 1,
    message: 'are the same file',
  },
  {
    name: 'nccl-tests line with #wrong ≠ 0 is left out, with a count (import succeeds)',
    setup: (t) => void ncclWithWrong(t, '3'),
    args: (t) => [
      'import',
      'nccl-tests',
      path.join(t, 'all_reduce_perf.txt'),
      '--chip',
      'h100',
      '--out',
      path.join(t, 'out'),
    ],
    code: 0,
    message: /left out 1 row\(s\) whose #wrong count is not 0 \(lines 17\)/,
  },
  {
    name: 'nccl-tests with every row #wrong ≠ 0',
    setup: (t) => void ncclWithWrong(t, '3', '12'),
    args: (t) => [
      'import',
      'nccl-tests',
      path.join(t, 'all_reduce_perf.txt'),
      '--chip',
      'h100',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /line 17: every data line has a non-zero #wrong count \(2 rows failed/,
  },
  {
    name: 'import --chip ../../../x (a path, not a name)',
    setup: (t) => void table(t, head(H200_GEMM, 5)),
    args: (t) => ['import', 'aiconfigurator', path.join(t, 'in', 'gemm_perf.csv'), '--chip', '../../../x'],
    code: 2,
    message: '--chip "../../../x": expected a name of lower-case letters',
  },
  {
    name: 'import --chip ..',
    setup: (t) => void table(t, head(H200_GEMM, 5)),
    args: (t) => ['import', 'aiconfigurator', path.join(t, 'in', 'gemm_perf.csv'), '--chip', '..'],
    code: 2,
    message: '--chip "..": expected a name',
  },
  {
    name: 'import system --chip with a slash',
    args: ['import', 'system', path.join(AIC, 'systems', 'h200_sxm.yaml'), '--chip', 'x/y'],
    code: 2,
    message: '--chip "x/y"',
  },
  {
    name: 'import --out is an existing file, not a folder',
    setup: (t) => {
      table(t, head(H200_GEMM, 5));
      writeFileSync(path.join(t, 'out'), 'a file');
    },
    args: (t) => [
      'import',
      'aiconfigurator',
      path.join(t, 'in', 'gemm_perf.csv'),
      '--chip',
      'h200',
      '--out',
      path.join(t, 'out'),
    ],
    code: 1,
    message: /cannot write .*out: it is a file, expected a folder/,
  },
];

describe('bad inputs: import never loses data', () => runCorpus(CASES));
