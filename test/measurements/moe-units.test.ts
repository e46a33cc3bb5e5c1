/**
 * The fused-MoE units check (issue 13 "Units"): every shipped table passes; the same table ×1000 slower
 * (ms read as µs) or ÷1000 faster is refused naming file, row and column; and through the importer a
 * ×1000 table writes nothing.
 */
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { runImport } from '../../src/measurements/pipeline.ts';
import { checkMoeUnits, moeMinWeightBytes } from '../../src/measurements/moe-units.ts';
import type { MoeRow } from '../../src/measurements/schema.ts';
import { readMeasurements } from '../../src/measurements/store.ts';
import { aicPath, csvSlice, tmpDir, writeTable } from './helpers.ts';
import { MEASUREMENTS } from './helpers.ts';

describe('least expert bytes a layer reads', () => {
  it('DeepSeek-V3 at tp 8, fp8_block: one expert, 3 · 7168 · 256 · 1 B = 5,505,024 B; ep > 1 is not judged', () => {
    const r = {
      chip: 'h200',
      lane: 'l',
      kernel_source: 'k',
      tokens: 1,
      hidden: 7168,
      inter: 2048,
      topk: 8,
      experts: 256,
      tp: 8,
      ep: 1,
      dtype: 'fp8_block',
      distribution: 'balanced',
      latency_us: 55,
    };
    expect(moeMinWeightBytes(r)).toBe(5_505_024);
    expect(moeMinWeightBytes({ ...r, ep: 8 })).toBeUndefined();
    expect(moeMinWeightBytes({ ...r, dtype: 'mystery' })).toBeUndefined();
  });
});

describe('shipped fused-MoE tables', () => {
  it.each(['a100', 'b200', 'h100', 'h200', 'l40s'])(
    '%s: passes as stored, fails ×1000 slower and ÷1000 faster',
    (chip) => {
      const c = loadChip(chip);
      const rows = readMeasurements(path.join(MEASUREMENTS, chip), 'moe') as MoeRow[];
      expect(() => checkMoeUnits(rows, c, 'moe.csv')).not.toThrow();
      expect(() =>
        checkMoeUnits(
          rows.map((r) => ({ ...r, latency_us: r.latency_us * 1000 })),
          c,
          'moe.csv',
        ),
      ).toThrow(/^moe\.csv row \d+ column "latency": the fastest of \d+ MoE layers .*check units \(ms vs µs vs s\?\)$/);
      expect(() =>
        checkMoeUnits(
          rows.map((r) => ({ ...r, latency_us: r.latency_us / 1000 })),
          c,
          'moe.csv',
        ),
      ).toThrow(/^moe\.csv row \d+ column "latency": MoE layer reading .*check units/);
    },
  );
});

describe('through the importer', () => {
  it('a moe_perf table in µs labelled ms (×1000) is refused with file, row and column; nothing written', async () => {
    const MOE = aicPath('h200_sxm', 'moe_perf', 'vllm-0.24.0');
    // 200 rows with one expert above 4× L2 (hidden ≥ 4096, inter ≥ 14336, moe_tp_size and moe_ep_size 1, bf16: 0-based columns 7, 8, 11, 12, 5).
    let kept = 0;
    const t = csvSlice(MOE, (l) => {
      const c = l.split(',');
      const ok =
        Number(c[7]) >= 4096 &&
        Number(c[8]) >= 14336 &&
        c[11] === '1' &&
        c[12] === '1' &&
        c[5] === 'bfloat16' &&
        kept < 200;
      if (ok) kept++;
      return ok;
    });
    const lat = t.header.split(',').indexOf('latency');
    const lines = t.lines.map((l) => {
      const c = l.split(',');
      c[lat] = String(Number(c[lat]) * 1000);
      return c.join(',');
    });
    const dir = tmpDir();
    const out = path.join(dir, 'out');
    const bad = writeTable(path.join(dir, 'bad'), 'moe_perf', t.header, lines);
    await expect(runImport('aiconfigurator', [bad], { chip: 'h200', out })).rejects.toThrow(
      /moe_perf\.csv row \d+ column "latency": .*check units \(ms vs µs vs s\?\)/,
    );
    expect(readdirSync(dir)).not.toContain('out');
  });
});
