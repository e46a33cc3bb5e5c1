/**
 * Known answers: seed ch02 §2.5.4 (endpoints 0, 4, 10 flagged, 15 ms), experiment 5 (§2.6), and
 * §2.5.5 (200 steps/s, 16 requests, 5 draft tokens, cp 1).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  fullAcceptanceTokensPerS,
  parseWindowCsv,
  selectWindow,
  usefulTokensPerS,
  type Endpoint,
} from '../../src/analytics/window.ts';
import { windowReport } from '../../src/report/window.ts';
import { runCli } from '../helpers/cli.ts';

const FIX = path.join(import.meta.dirname, '..', 'fixtures', 'analytics');
const eps = (ms: number[], flagged: number[] = []): Endpoint[] =>
  ms.map((t) => ({ ts_us: t * 1000, flagged: flagged.includes(t) }));

describe('observation window (chapter Listing 2.11)', () => {
  it('0, 4, 10 (flagged), 15 ms → 2 / (0.004 + 0.005) ≈ 222.2 intervals/s', () => {
    const w = selectWindow(eps([0, 4, 10, 15], [10]));
    expect(w.pairs.map((p) => [p.interval_us, p.selected])).toEqual([
      [4000, true],
      [6000, false],
      [5000, true],
    ]);
    expect(w.selected).toBe(2);
    expect(w.selected_sum_us).toBe(9000);
    expect(w.steps_per_s).toBeCloseTo(2 / 0.009, 9);
    expect(w.steps_per_s!.toFixed(1)).toBe('222.2');
    expect(w.max_interval_us).toBe(5000);
  });

  it('does not remove the flagged endpoint before pairing (that would give 2/0.015 ≈ 133.3)', () => {
    const rows = eps([0, 4, 10, 15], [10]);
    // The wrong method, written out here only to show the two answers differ.
    const kept = rows.filter((r) => !r.flagged);
    const wrong = (kept.length - 1) / ((kept[kept.length - 1]!.ts_us - kept[0]!.ts_us) / 1e6);
    expect(wrong.toFixed(1)).toBe('133.3');
    expect(selectWindow(rows).steps_per_s).not.toBeCloseTo(wrong, 1);
  });

  it('flagging 15 as well keeps only 0 → 4 (250 intervals/s)', () => {
    const w = selectWindow(eps([0, 4, 10, 15], [10, 15]));
    expect(w.pairs.filter((p) => p.selected).map((p) => [p.from_us, p.to_us])).toEqual([[0, 4000]]);
    expect(w.steps_per_s).toBe(250);
  });

  it('flagging 4 as well selects nothing: no result, never a zero rate', () => {
    const w = selectWindow(eps([0, 4, 10, 15], [4, 10, 15]));
    expect(w.selected).toBe(0);
    expect(w.steps_per_s).toBeNull();
    expect(w.max_interval_us).toBeNull();
    expect(w.no_result_reason).toMatch(/flagged/);
    const text = windowReport(w);
    expect(text).toMatch(/no result/);
    expect(text).not.toMatch(/= 0 intervals\/s/);
    expect(selectWindow(eps([3])).steps_per_s).toBeNull();
  });

  it('a flagged first endpoint is harmless: the pair starting at a flagged endpoint is kept', () => {
    expect(selectWindow(eps([0, 4, 10], [0])).selected).toBe(2);
  });

  it('rows at another running count are not endpoints; their time still lies between endpoints', () => {
    const rows = parseWindowCsv(readFileSync(path.join(FIX, 'ch02-window-running.csv'), 'utf8'), 'w.csv');
    const w = selectWindow(rows, 16);
    expect(w.endpoints).toBe(4);
    expect(w.not_at_concurrency).toBe(2);
    expect(w.pairs.map((p) => p.interval_us)).toEqual([4000, 6000, 5000]);
    expect(w.steps_per_s).toBeCloseTo(2 / 0.009, 9);
    // Without the filter, the 2 ms and 7 ms rows become endpoints and the answer changes.
    expect(selectWindow(rows).selected).toBe(4);
    expect(() => selectWindow(eps([0, 4]), 16)).toThrow(/running count/);
  });

  it('token rates: 200 steps/s × 16 × (1 + 5) / 1 = 19,200 full-acceptance; τ = 3 → 9,600 useful', () => {
    expect(fullAcceptanceTokensPerS(200, 16, 5, 1)).toBe(19_200);
    expect(usefulTokensPerS(200, 16, 3, 1)).toBe(9_600);
    // cp divides the per-GPU figure (rank-0 throughput over its cp devices)
    expect(fullAcceptanceTokensPerS(200, 16, 5, 2)).toBe(9_600);
  });

  it('property: steps/s = selected / summed duration, and lies between 1/max and 1/min selected interval', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 1000 }), fc.boolean()), { minLength: 1, maxLength: 40 }),
        (xs) => {
          let t = 0;
          const rows: Endpoint[] = [{ ts_us: 0, flagged: false }];
          for (const [d, f] of xs) {
            t += d;
            rows.push({ ts_us: t, flagged: f });
          }
          const w = selectWindow(rows);
          const sel = w.pairs.filter((p) => p.selected).map((p) => p.interval_us);
          if (sel.length === 0) return w.steps_per_s === null;
          const r = w.steps_per_s!;
          return (
            Math.abs(r - (sel.length * 1e6) / sel.reduce((a, b) => a + b, 0)) < 1e-9 * r &&
            r <= 1e6 / Math.min(...sel) + 1e-9 &&
            r >= 1e6 / Math.max(...sel) - 1e-9
          );
        },
      ),
    );
  });

  it('bad CSV names file, row and column; decreasing timestamps are refused', () => {
    expect(() => parseWindowCsv('ts_ms,flag\n0,0\n4,yes\n', 'w.csv')).toThrow(/w\.csv row 2 column "flag"/);
    expect(() => parseWindowCsv('time,flag\n0,0\n', 'w.csv')).toThrow(
      /w\.csv row 0: expected exactly one timestamp column/,
    );
    expect(() => parseWindowCsv('ts_ms,running\n0,1.5\n', 'w.csv')).toThrow(/row 1 column "running"/);
    expect(parseWindowCsv('ts_s,flag\n0.004,true\n', 'w.csv')).toEqual([{ ts_us: 4000, flagged: true, row: 1 }]);
    expect(() => selectWindow(parseWindowCsv('ts_ms\n5\n3\n', 'w.csv'))).toThrow(/row 2 is earlier than row 1/);
  });
});

describe('stepcal window (CLI)', () => {
  it('prints 222.2 intervals/s for the chapter endpoints and names the token-rate accounting', async () => {
    const r = await runCli(['window', path.join(FIX, 'ch02-window.csv')]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('= 222.2 intervals/s');
    const s = await runCli(['window', '--steps-per-s', '200', '--requests', '16', '--draft-length', '5', '--tau', '3']);
    expect(s.stdout).toMatch(/full-acceptance tokens\/s per GPU = .* = 19,200/);
    expect(s.stdout).toMatch(/useful tokens\/s per GPU = .* = 9,600/);
  });

  it('says "no result" (JSON null) when nothing is selected', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'window-'));
    const f = path.join(dir, 'w.csv');
    writeFileSync(f, 'ts_ms,flag\n0,0\n4,1\n10,1\n15,1\n');
    const r = await runCli(['window', f, '--requests', '16']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/no result/);
    const j = JSON.parse((await runCli(['window', f, '--json', '--requests', '16'])).stdout);
    expect(j.steps_per_s).toBeNull();
    expect(j.full_acceptance_tokens_per_s_per_gpu).toBeUndefined();
  });
});
