/**
 * An unknown --chip is named the same way by every command that reads one (core/catalog/chip.ts loadChip):
 * `unknown chip "nope" (known: …)`, exit 1, before anything looks for the chip's files.
 */
import { describe, expect, it } from 'vitest';
import { knownChips } from '../../src/core/catalog/chip.ts';
import { runCli } from '../helpers/cli.ts';

const MESSAGE = `stepcal: unknown chip "nope" (known: ${knownChips().join(', ')})\n`;

describe('unknown --chip', () => {
  it('price names it and lists the chips', async () => {
    const r = await runCli(['price', '--model', 'llama-3.1-8b', '--chip', 'nope', '--batch', 'decode:1@1']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: MESSAGE });
  });

  it('validate says the same (not "no held-out step files for chip nope")', async () => {
    for (const extra of [[], ['--requests', 'missing.csv']]) {
      const r = await runCli(['validate', '--chip', 'nope', '--no-report', ...extra]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 1, stderr: MESSAGE });
    }
  });
});
