/**
 * `help <command>` for a command that does not exist is a usage error (exit 2) naming the commands that do;
 * commander alone prints the parent's help and exits 0, as if the help asked for had been shown.
 */
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands/index.ts';
import { runCli } from '../helpers/cli.ts';

describe('help <unknown command>', () => {
  it('help bogus exits 2 naming every command, and prints no help', async () => {
    const r = await runCli(['help', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `stepcal: help: unknown command "bogus" (known: ${COMMANDS.map((c) => c.name).join(', ')})\n`,
    );
  });

  it('registry help bogus exits 2 naming the registry subcommands', async () => {
    const r = await runCli(['registry', 'help', 'bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^stepcal: help: unknown command "bogus" \(known: validate, diff, update, export, import/);
  });

  it('help of a known command, of a subcommand and the bare help still exit 0 with the help', async () => {
    for (const args of [['help', 'price'], ['registry', 'help', 'update'], ['help']]) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout + r.stderr).toMatch(/^Usage: stepcal/);
    }
  });

  it('help follows a command path: help registry update is the update help; help registry bogus and help help', async () => {
    const up = await runCli(['help', 'registry', 'update']);
    expect(up.code).toBe(0);
    expect(up.stdout + up.stderr).toMatch(/^Usage: stepcal registry update/);
    const bad = await runCli(['help', 'registry', 'bogus']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^stepcal: help: unknown command "bogus" \(known: validate, diff, update/);
    const hh = await runCli(['help', 'help']);
    expect(hh.code).toBe(0);
    expect(hh.stdout + hh.stderr).toMatch(/^Usage: stepcal/);
  });

  it('a flag value "help" is not a help topic', async () => {
    const r = await runCli(['price', '--model', 'help', '--chip', 'h100']);
    expect(r.stderr).toContain('give at least one --batch');
  });
});
