/**
 * `registry update --only`: the families it accepts and the ones its help lists are one list (FIT_FAMILIES,
 * what a refit's entries carry), and a family outside it is a usage error named in one short line, before
 * any registry is read or merged.
 */
import { describe, expect, it } from 'vitest';
import { FIT_FAMILIES } from '../../src/fit/families.ts';
import { runCli } from '../helpers/cli.ts';

const UPDATE = ['registry', 'update', '--chip', 'h100', '--from', 'registry/h100.yaml', '--dry-run'];

describe('registry update --only', () => {
  it('an unknown family exits 2 naming it and the known ones', async () => {
    for (const only of ['bogus', 'gemm,bogus']) {
      const r = await runCli([...UPDATE, '--only', only]);
      expect(r.code).toBe(2);
      const first = r.stderr.split('\n')[0]!;
      expect(first).toContain(`unknown family bogus (known: ${FIT_FAMILIES.join(', ')})`);
      expect(first.length).toBeLessThan(400);
      expect(r.stdout).toBe('');
    }
  });

  it('an empty list exits 2', async () => {
    const r = await runCli([...UPDATE, '--only', ',']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('no family given (known: gemm,');
  });

  it('the help lists every family it accepts (mla, sparse, moe_experts … too)', async () => {
    const r = await runCli(['registry', 'update', '--help']);
    expect(r.code).toBe(0);
    const help = r.stdout.replace(/\s+/g, ' ');
    expect(help).toContain(`comma-separated families to merge (${FIT_FAMILIES.join(', ')})`);
    expect(FIT_FAMILIES).toContain('mla');
  });
});
