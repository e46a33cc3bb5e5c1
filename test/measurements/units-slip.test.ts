/**
 * The units-slip check's lower bounds against every shipped table: real data always passes, the same
 * table read ×1000 too slow (µs labelled ms) always fails, naming the file, row and column.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { checkUnitsSlip } from '../../src/measurements/aiconfigurator.ts';
import { listMeasurementFiles, readMeasurements } from '../../src/measurements/store.ts';
import { MEASUREMENTS } from './helpers.ts';

const CHIPS = ['a100', 'b200', 'h100', 'h200', 'l40s'];
const stored = CHIPS.flatMap((chip) =>
  listMeasurementFiles(path.join(MEASUREMENTS, chip))
    .filter((f) => f.family === 'gemm' || f.family === 'attention_decode')
    .map((f) => ({ chip, ...f })),
);

describe('units-slip lower bound on the shipped tables', () => {
  it('covers a gemm and a decode table for every chip', () => {
    expect(stored.filter((f) => f.family === 'gemm').length).toBe(6); // h200 has vllm + trtllm
    expect(stored.filter((f) => f.family === 'attention_decode').length).toBe(5);
  });

  it.each(stored.map((f) => [`${f.chip} ${path.basename(f.file)}`, f] as const))('%s: passes as stored, fails ×1000 slower', (_n, f) => {
    const chip = loadChip(f.chip);
    const rows = readMeasurements(path.dirname(f.file), f.family, { lane: f.lane }) as Array<{ latency_us: number }>;
    expect(() => checkUnitsSlip(f.family, rows, chip, f.file)).not.toThrow();
    const slow = rows.map((r) => ({ ...r, latency_us: r.latency_us * 1000 }));
    expect(() => checkUnitsSlip(f.family, slow, chip, f.file)).toThrow(/row \d+ column "latency": the fastest of \d+ .*check units \(ms vs µs vs s\?\)/);
    // and ×1000 faster trips the upper bound
    const fast = rows.map((r) => ({ ...r, latency_us: r.latency_us / 1000 }));
    expect(() => checkUnitsSlip(f.family, fast, chip, f.file)).toThrow(/check units \(ms vs µs vs s\?\)/);
  });
});
