import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Command } from 'commander';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { buildProgram } from '../../src/cli/main.ts';
import { COMMANDS } from '../../src/cli/commands/index.ts';
import { copyFileSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { provenanceRelativePath } from '../../src/core/io/paths.ts';
import { keptFrom } from '../../src/measurements/store.ts';
import { aicPath, csvSlice, SPLITWISE_CSV, tmpDir } from './helpers.ts';
import { runCli as cli } from '../helpers/cli.ts';

function writeCsv(file: string, header: string, lines: string[]): string {
  writeFileSync(file, `${[header, ...lines].join('\n')}\n`);
  return file;
}

describe('stepcal import (CLI)', () => {
  it('--json prints what was written on stdout only', async () => {
    const out = tmpDir();
    const r = await cli([
      'import',
      'aiconfigurator',
      aicPath('a100_sxm', 'context_attention_perf', 'vllm-0.14.0'),
      '--chip',
      'a100',
      '--out',
      out,
      '--json',
    ]);
    expect(r.code).toBe(0);
    const j = JSON.parse(r.stdout);
    expect(j.written).toEqual([
      expect.objectContaining({
        file: path.join(out, 'attention_prefill.vllm-0.14.0.csv.gz'),
        family: 'attention_prefill',
        lane: 'vllm-0.14.0',
        rows_in: 5457,
        rows_out: 5049,
        duplicate_configs: 408,
      }),
    ]);
  });

  it('prints a table of files and row counts', async () => {
    const out = tmpDir();
    const r = await cli(['import', 'splitwise', SPLITWISE_CSV, '--chip', 'a100', '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('file\tfamily\tlane\trows_in\trows_out\trepeated_configs');
    expect(r.stdout).toContain(`${path.join(out, 'splitwise.steps.csv')}\tstep\tsplitwise\t1260\t228\t228`);
  });

  it('exit 1 with the message on stderr for bad input; exit 2 for a usage error', async () => {
    const bad = await cli(['import', 'aiconfigurator', SPLITWISE_CSV, '--chip', 'h200', '--out', tmpDir()]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toBe('');
    expect(bad.stderr).toMatch(
      /^stepcal: .*perf_model\.csv: cannot infer the measurement family from the table name "perf_model"/,
    );
    expect(bad.stderr).not.toMatch(/\n\s+at /); // no stack without --debug
    expect((await cli(['import', 'bogus', 'x'])).code).toBe(2);
    expect((await cli(['import'])).code).toBe(2);
  });

  it('malformed numeric flags are usage errors (exit 2) naming the flag, before anything is read', async () => {
    const out = tmpDir();
    for (const args of [
      ['--ranks', 'abc'],
      ['--ranks', '0'],
      ['--nodes', '1.5'],
    ]) {
      const r = await cli(['import', 'nccl-tests', 'missing.txt', '--chip', 'h100', '--out', out, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(
        new RegExp(
          `option '${args[0]} <n>' argument '${args[1]!.replace('.', '\\.')}' is invalid\\. expected (a positive integer|a finite number|an integer ≥ 1)`,
        ),
      );
    }
    const l2 = await cli(['import', 'system', 'x.yaml', '--l2-mib', 'big']);
    expect(l2.code).toBe(2);
    const cal = await cli(['calibrate', '--chip', 'h100', '--resamples', '100']);
    expect(cal.code).toBe(2);
    expect(cal.stderr).toContain('--resamples: expected an integer ≥ 200, got "100"');
    expect((await cli(['calibrate', '--chip', 'h100', '--resamples', 'lots'])).code).toBe(2);
  });

  it('aiconfigurator infers the family from the header when the file name does not say it (good.csv with gemm columns)', async () => {
    const dir = tmpDir();
    const gemm = csvSlice(aicPath('h200_sxm', 'gemm_perf', 'vllm-0.24.0'), (_, i) => i < 20);
    const good = writeCsv(path.join(dir, 'good.csv'), gemm.header, gemm.lines);
    const r = await cli(['import', 'aiconfigurator', good, '--chip', 'h200', '--out', path.join(dir, 'out'), '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).written).toEqual([
      expect.objectContaining({ family: 'gemm', lane: 'vllm-0.24.0', rows_in: 20 }),
    ]);
    // the two attention tables share columns: op_name tells them apart
    const dec = csvSlice(aicPath('h200_sxm', 'generation_attention_perf', 'vllm-0.24.0'), (_, i) => i < 5);
    const d = writeCsv(path.join(dir, 'mine.csv'), dec.header, dec.lines);
    const rd = await cli(['import', 'aiconfigurator', d, '--chip', 'h200', '--out', path.join(dir, 'out2'), '--json']);
    expect(JSON.parse(rd.stdout).written[0].family).toBe('attention_decode');
    // a header that tells nothing is still refused, naming the file and what was looked for
    const odd = writeCsv(path.join(dir, 'odd.csv'), 'a,b,latency', ['1,2,3']);
    const ro = await cli(['import', 'aiconfigurator', odd, '--chip', 'h200', '--out', path.join(dir, 'out3')]);
    expect(ro.code).toBe(1);
    expect(ro.stderr).toMatch(
      /odd\.csv: cannot infer the measurement family from the table name "odd" .* nor from the header \(a, b, latency\): no gemm_dtype/,
    );
  });
});

const fullProgram = await buildProgram(); // every command module loaded

describe('help text of every command', () => {
  const all: Command[] = [];
  const walk = (c: Command) => {
    all.push(c);
    c.commands.forEach(walk);
  };
  walk(fullProgram);

  it('every option has a description; defaults are shown once and never as an absolute path', () => {
    expect(all.length).toBeGreaterThan(20);
    const bare: string[] = [];
    const bad: string[] = [];
    for (const c of all) {
      for (const o of c.options) if (!o.description?.trim()) bare.push(`${c.name()} ${o.flags}`);
      const help = c.helpInformation();
      if (help.includes(REPO_ROOT)) bad.push(`${c.name()}: absolute path`);
      if (/\(default: [^)]*\)\s*\(default:/.test(help)) bad.push(`${c.name()}: default shown twice`);
    }
    expect(bare).toEqual([]);
    expect(bad).toEqual([]);
  });
});

describe('lazy command loading (start-up)', () => {
  it('the top-level help drawn from the COMMANDS table equals the help of the loaded commands', async () => {
    const lazy = await buildProgram(['node', 'stepcal', '--help']);
    expect(lazy.helpInformation()).toBe(fullProgram.helpInformation());
    expect(lazy.commands.map((c) => c.name())).toEqual(COMMANDS.map((c) => c.name));
  });

  it('a command loads only its own module; `help <command>` loads that one', async () => {
    const fit = await buildProgram(['node', 'stepcal', '--debug', 'fit', 'all', '--chip', 'h200', '--check']);
    expect(fit.commands.map((c) => c.name())).toEqual(['fit']);
    expect(fit.commands[0]!.helpInformation()).toBe(
      fullProgram.commands.find((c) => c.name() === 'fit')!.helpInformation(),
    );
    const help = await buildProgram(['node', 'stepcal', 'help', 'registry']);
    expect(help.commands.map((c) => c.name())).toEqual(['registry']);
  });

  it('an unknown command is refused with a suggestion from the stubs (exit 2)', async () => {
    const r = await cli(['fitt', 'all']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command 'fitt'[\s\S]*Did you mean fit\?/);
  });
});

describe('import --force over a curated file keeps what it does not produce (a temp copy of measurements/h200)', () => {
  const table = aicPath('h200_sxm', 'gemm_perf', 'vllm-0.24.0');
  const committed = path.join(REPO_ROOT, 'measurements', 'h200', 'gemm.vllm-0.24.0.provenance.yaml');

  it('same bytes in: the provenance is the committed one byte for byte (notes kept, ../shared path), however the input is spelled', async () => {
    const out = tmpDir();
    for (const name of ['gemm.vllm-0.24.0.csv.gz', 'gemm.vllm-0.24.0.provenance.yaml'])
      copyFileSync(path.join(REPO_ROOT, 'measurements', 'h200', name), path.join(out, name));
    const want = readFileSync(committed, 'utf8');
    expect(want).toContain('notes:\n  - converted upstream from Parquet to CSV');
    // As typed from the checkout, and as the real absolute path (../shared is often a link).
    for (const spelling of [path.relative(process.cwd(), table), realpathSync(table)]) {
      const r = await cli(['import', 'aiconfigurator', spelling, '--chip', 'h200', '--force', '--out', out]);
      expect(r.code).toBe(0);
      expect(readFileSync(path.join(out, 'gemm.vllm-0.24.0.provenance.yaml'), 'utf8')).toBe(want);
    }
  });

  it('keptFrom: notes the import leaves out come from the replaced file; notes it produces replace them', () => {
    const dir = tmpDir();
    const file = path.join(dir, 'x.provenance.yaml');
    const a = 'a'.repeat(64);
    const inputs = [{ file: 'x.csv', sha256: a, rows: 1 }];
    writeFileSync(
      file,
      `family: gemm\ninputs:\n  - file: x.csv\n    sha256: ${a}\n    rows: 1\nnotes:\n  - a curator note\n`,
    );
    expect(keptFrom(file, { family: 'gemm', inputs }).notes).toEqual(['a curator note']);
    expect(keptFrom(file, { family: 'gemm', inputs, notes: ['new'] }).notes).toEqual(['new']);
    // Other bytes in (another sha256, or no inputs recorded): the curator's note is not about them.
    expect(
      keptFrom(file, { family: 'gemm', inputs: [{ ...inputs[0]!, sha256: 'b'.repeat(64) }] }).notes,
    ).toBeUndefined();
    expect(keptFrom(file, { family: 'gemm' }).notes).toBeUndefined();
    expect(keptFrom(path.join(dir, 'absent.yaml'), { family: 'gemm', inputs }).notes).toBeUndefined();
    writeFileSync(file, 'notes: [unclosed\n');
    expect(keptFrom(file, { family: 'gemm', inputs }).notes).toBeUndefined();
  });

  it('provenanceRelativePath: a file under ../shared records ../shared/… through links and from any spelling', () => {
    const want = '../shared/datasets/aiconfigurator/h200_sxm/gemm_perf/vllm-0.24.0/gemm_perf.csv';
    expect(provenanceRelativePath(table)).toBe(want);
    expect(provenanceRelativePath(realpathSync(table))).toBe(want);
    expect(provenanceRelativePath(path.relative(process.cwd(), table))).toBe(want);
    expect(provenanceRelativePath(path.join(REPO_ROOT, 'measurements', 'h200'))).toBe('measurements/h200');
  });
});
