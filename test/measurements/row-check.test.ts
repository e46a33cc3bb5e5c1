/**
 * The compiled row check (src/measurements/row-check.ts) accepts exactly the rows the family's zod
 * schema accepts and returns them in zod's output form: every family compiles (so no table silently
 * falls back to per-row zod), boundary values on each side of every check agree with `safeParse`,
 * and a shipped table reads to the same rows (key order included) as zod gives.
 */
import { describe, expect, it } from 'vitest';
import { FAMILIES, FAMILY_ROW_SCHEMAS, type Family } from '../../src/core/schemas/measurements.ts';
import { compileRowCheck } from '../../src/measurements/row-check.ts';
import { FAMILY_COLUMNS } from '../../src/measurements/schema.ts';
import { parseCanonicalCsv, readMeasurements, rowsToCsv } from '../../src/measurements/store.ts';
import { REPO_ROOT } from '../../src/core/io/paths.ts';
import path from 'node:path';

const families = FAMILIES.filter((f) => f !== 'step');

interface FieldDef {
  type: string;
  entries?: Record<string, string>;
}

/** A valid row of `family`: numbers 4 (or 1.5 for latencies), strings per column. */
function baseRow(family: Family): Record<string, string | number> {
  const row: Record<string, string | number> = {};
  for (const c of FAMILY_COLUMNS[family] as readonly string[]) {
    const shape = (FAMILY_ROW_SCHEMAS[family] as unknown as { shape: Record<string, { _zod: { def: FieldDef } }> })
      .shape;
    const field = shape[c]!._zod.def;
    if (field.type === 'number') row[c] = c.endsWith('_us') ? 1.5 : 4;
    else if (field.type === 'enum') row[c] = Object.values(field.entries ?? {})[0]!;
    else if (c === 'distribution') row[c] = 'power_law_1.2';
    else row[c] = 'x';
  }
  return row;
}

/** Values either side of each check a column may carry. */
const PROBES: Array<string | number> = [
  -1,
  0,
  0.5,
  1,
  1.5,
  2,
  3,
  2 ** 53,
  NaN,
  Infinity,
  '',
  'x',
  'balanced',
  'power_law_',
  'power_law_1.5',
  'all_reduce',
  'nccl',
];

describe('compiled row check', () => {
  it('compiles for every stored family', () => {
    for (const f of families)
      expect(compileRowCheck(FAMILY_ROW_SCHEMAS[f], FAMILY_COLUMNS[f] as readonly string[]), f).toBeDefined();
  });

  it('agrees with safeParse on every probe of every column, output included', () => {
    let accepted = 0;
    let refused = 0;
    for (const f of families) {
      const schema = FAMILY_ROW_SCHEMAS[f];
      const check = compileRowCheck(schema, FAMILY_COLUMNS[f] as readonly string[])!;
      for (const c of FAMILY_COLUMNS[f] as readonly string[])
        for (const probe of PROBES) {
          const row = { ...baseRow(f), [c]: probe };
          const z = schema.safeParse(row);
          const fast = check({ ...row });
          expect(fast !== undefined, `${f}.${c} = ${String(probe)}`).toBe(z.success);
          if (z.success) {
            expect(JSON.stringify(fast)).toBe(JSON.stringify(z.data));
            accepted++;
          } else refused++;
        }
    }
    // Both sides of the checks were reached.
    expect(accepted).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });

  it('refuses what the MoE refinement refuses (topk above the expert count)', () => {
    const check = compileRowCheck(FAMILY_ROW_SCHEMAS.moe, FAMILY_COLUMNS.moe)!;
    expect(check({ ...baseRow('moe'), topk: 8, experts: 8 })).toBeDefined();
    expect(check({ ...baseRow('moe'), topk: 9, experts: 8 })).toBeUndefined();
    expect(FAMILY_ROW_SCHEMAS.moe.safeParse({ ...baseRow('moe'), topk: 9, experts: 8 }).success).toBe(false);
  });

  it('reads a shipped table to the rows zod gives, in the same key order', () => {
    const dir = path.join(REPO_ROOT, 'measurements', 'h200');
    for (const f of ['collective', 'recurrent', 'sparse'] as const) {
      const rows = readMeasurements(dir, f);
      const viaZod = rows.map((r) => FAMILY_ROW_SCHEMAS[f].parse({ ...r }));
      expect(JSON.stringify(rows)).toBe(JSON.stringify(viaZod));
      // And through the text path once more (the same rows back).
      const again = parseCanonicalCsv(f, rowsToCsv(f, rows), `${f}.csv`);
      expect(JSON.stringify(again)).toBe(JSON.stringify(viaZod));
    }
  });

  it('a canonical table refuses a hex, octal or binary latency cell with file, row and column (Number() reads 0x10 as 16)', () => {
    const rows = readMeasurements(path.join(REPO_ROOT, 'measurements', 'h200'), 'collective').slice(0, 3);
    const text = rowsToCsv('collective', rows);
    const lines = text.split('\n');
    const header = lines[0]!.split(',');
    const j = header.indexOf('latency_us');
    for (const v of ['0x10', '0b1', '0o7']) {
      const cells = lines[2]!.split(',');
      cells[j] = v;
      const bad = [lines[0], lines[1], cells.join(','), ...lines.slice(3)].join('\n');
      expect(() => parseCanonicalCsv('collective', bad, 'c.csv'), v).toThrow(
        `c.csv row 2 column "latency_us": expected a finite number (decimal), got "${v}"`,
      );
    }
  });
});
