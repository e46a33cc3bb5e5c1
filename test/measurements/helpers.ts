/** Shared helpers for the measurement tests: paths to ../shared, temp dirs, CSV slices. */
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';

export const SHARED = path.resolve(REPO_ROOT, '..', 'shared', 'datasets');
export const AIC = path.join(SHARED, 'aiconfigurator');
export const SPLITWISE_CSV = path.join(SHARED, 'splitwise', 'perf_model.csv');
export const MEASUREMENTS = path.join(REPO_ROOT, 'measurements');
export const FIXTURES = path.join(REPO_ROOT, 'test', 'measurements', 'fixtures');

/** Path of a table in the shared AIC copy. */
export function aicPath(sku: string, table: string, lane: string): string {
  return path.join(AIC, sku, table, lane, `${table}.csv`);
}

export function tmpDir(tag = 'stepcal-meas-'): string {
  return mkdtempSync(path.join(os.tmpdir(), tag));
}

/** Header + the data lines for which `keep(line, index)` holds, of a shared CSV. */
export function csvSlice(
  file: string,
  keep: (line: string, i: number) => boolean,
): { header: string; lines: string[] } {
  const all = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
  const header = all[0]!;
  const lines = all.slice(1).filter((l, i) => keep(l, i));
  return { header, lines };
}

/** Write `<dir>/<table>.csv` from a header and lines; returns the path. */
export function writeTable(dir: string, table: string, header: string, lines: string[]): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${table}.csv`);
  writeFileSync(file, `${[header, ...lines].join('\n')}\n`);
  return file;
}

/** Replace column `col` (by header name) in a CSV line. */
export function setCell(header: string, line: string, col: string, value: string): string {
  const i = header.split(',').indexOf(col);
  if (i < 0) throw new Error(`no column ${col}`);
  const cells = line.split(',');
  cells[i] = value;
  return cells.join(',');
}

export function getCell(header: string, line: string, col: string): string {
  return line.split(',')[header.split(',').indexOf(col)]!;
}
