import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { runImport } from '../../src/measurements/pipeline.ts';
import { algbwGBs, busFactor, parseNcclTests } from '../../src/measurements/nccl-tests.ts';
import { readMeasurements, readProvenance } from '../../src/measurements/store.ts';
import { FIXTURES, tmpDir } from './helpers.ts';

const F8 = path.join(FIXTURES, 'all_reduce_perf.8ranks.txt');
const F16 = path.join(FIXTURES, 'all_reduce_perf.16ranks.txt');
const text = (f: string) => readFileSync(f, 'utf8');

describe('nccl-tests stdout', () => {
  it('bus factors: all_reduce 2(n−1)/n, others (n−1)/n', () => {
    expect(busFactor('all_reduce', 8)).toBe(1.75);
    expect(busFactor('all_gather', 8)).toBe(0.875);
    expect(busFactor('reduce_scatter', 4)).toBe(0.75);
    expect(busFactor('alltoall', 16)).toBe(0.9375);
    expect(busFactor('all_reduce', 1)).toBe(0);
  });

  it('8 ranks, all_reduce float, 268435456 B in 1119.8 µs → algbw 239.71 GB/s, busbw 419.49', () => {
    const r = parseNcclTests(text(F8), F8, { chip: 'h100', chipInfo: loadChip('h100') });
    expect(r.op).toBe('all_reduce');
    expect(r.ranks).toBe(8);
    expect(r.nodes).toBe(1);
    expect(r.lines).toHaveLength(1);
    const l = r.lines[0]!;
    expect(l.size_bytes).toBe(268435456);
    expect(l.time_us[0]).toBe(1119.8);
    expect(l.algbw_printed[0]).toBe(239.71);
    expect(l.busbw_printed[0]).toBe(419.49);
    // re-derived from the printed (0.1 µs-rounded) time: agrees to the time's rounding
    expect(l.algbw_GBs[0]).toBeCloseTo(239.71, 1);
    expect(l.busbw_GBs[0]).toBeCloseTo(419.49, 1);
    expect(Math.abs(l.algbw_GBs[0] - 239.71)).toBeLessThan(0.011);
    expect(l.in_network).toEqual([false, false]); // 419 < 450 GB/s NVLink 4 per direction
    expect(r.rows).toHaveLength(2);
    expect(r.rows[0]).toMatchObject({
      op: 'all_reduce',
      dtype: 'fp32',
      ranks: 8,
      nodes: 1,
      message_bytes: 268435456,
      backend: 'nccl',
      latency_us: 1119.8,
      kernel_source: 'out_of_place',
      lane: 'nccl-tests-unknown',
    });
    expect(r.rows[1]).toMatchObject({ kernel_source: 'in_place', latency_us: 1120.3 });
  });

  it('16 ranks, 1073741824 B in 4508.0 µs → 238.19 and 446.60; flagged in-network across 2 nodes', () => {
    const r = parseNcclTests(text(F16), F16, { chip: 'h100', chipInfo: loadChip('h100') });
    expect(r.ranks).toBe(16);
    expect(r.nodes).toBe(2); // two hosts in the # Rank lines
    expect(r.lines).toHaveLength(1); // the 0-byte line is skipped
    const l = r.lines[0]!;
    expect(l.algbw_GBs[0]).toBeCloseTo(238.19, 2);
    expect(l.busbw_GBs[0]).toBeCloseTo(446.6, 2);
    expect(algbwGBs(1073741824, 4508.0) * busFactor('all_reduce', 16)).toBeCloseTo(446.598, 3);
    // 446.6 GB/s of bus bandwidth over a 50 GB/s NIC: in-network reduction (SHARP/NVLS), kept and flagged
    expect(r.link_GBs).toBe(50);
    expect(l.in_network).toEqual([true, true]);
    expect(r.in_network_rows).toBe(2);
    expect(r.rows[0]!.kernel_source).toBe('out_of_place;in_network');
  });

  it('flags busbw above NVLink within one node (NVLS) rather than rejecting it', () => {
    // 8 ranks on h100 (450 GB/s per direction): 268435456 B in 1000.0 µs → algbw 268.44, busbw 469.76
    const t = text(F8).replace(/1119\.8\s+239\.71\s+419\.49/, '1000.0  268.44  469.76');
    const r = parseNcclTests(t, F8, { chip: 'h100', chipInfo: loadChip('h100') });
    expect(r.lines[0]!.in_network).toEqual([true, false]);
    expect(r.in_network_rows).toBe(1);
  });

  it('a wrong rank count shows as a busbw mismatch naming the line and column', () => {
    expect(() => parseNcclTests(text(F8), F8, { chip: 'h100', ranks: 4 })).toThrow(
      /all_reduce_perf\.8ranks\.txt line 17 column "out-of-place busbw": printed busbw 419\.49 GB\/s but algbw × all_reduce factor for 4 ranks \(1\.5000\) = 359\.58 GB\/s; check --ranks and --op/,
    );
  });

  it('a time in the wrong unit shows as an algbw mismatch', () => {
    const t = text(F8).replace('1119.8  239.71', '1.1198  239.71');
    expect(() => parseNcclTests(t, F8, { chip: 'h100' })).toThrow(
      /column "out-of-place algbw": printed algbw 239\.71 GB\/s but size\/time .* check units/,
    );
  });

  it('malformed lines, unknown types and missing rank info are errors', () => {
    const t = text(F8).replace('     float     sum', '     quad     sum');
    expect(() => parseNcclTests(t, F8, { chip: 'h100' })).toThrow(/line 17 column "type": unknown dtype "quad"/);
    const noRanks = text(F8).replace(/^# +Rank.*$/gm, '#');
    expect(() => parseNcclTests(noRanks, F8, { chip: 'h100' })).toThrow(/cannot tell the number of ranks.*--ranks/);
    expect(parseNcclTests(noRanks, F8, { chip: 'h100', ranks: 8 }).ranks).toBe(8);
    expect(() => parseNcclTests('# nothing here\n', 'x.txt', { chip: 'h100', ranks: 8, op: 'all_reduce' })).toThrow(
      /empty file: no nccl-tests data lines/,
    );
    const short = text(F8).replace(/1119\.8.*$/m, '1119.8 239.71');
    expect(() => parseNcclTests(short, F8, { chip: 'h100' })).toThrow(/line 17: expected an nccl-tests data line/);
  });

  it('stepcal import nccl-tests writes a collective file under its own lane', async () => {
    const out = tmpDir();
    const w = await runImport('nccl-tests', [F8, F16], { chip: 'h100', out, lane: 'nccl-2.21.5' });
    expect(w).toHaveLength(1);
    expect(path.basename(w[0]!.file)).toBe('collective.nccl-2.21.5.csv.gz');
    expect(w[0]!.rows_out).toBe(4);
    const rows = readMeasurements(out, 'collective');
    expect(rows.map((r) => r.ranks)).toEqual([8, 8, 16, 16]);
    expect(readProvenance(w[0]!.file).filters.join(' ')).toMatch(/in_network.*: 2 rows/);
  });
});
