/**
 * Bad-input corpus, exits and paths group (issue 12 item 7): names that would leave their folder,
 * the one numeric-flag rule (every malformed numeric flag exits 2 naming the flag), file-system
 * refusals and hostile YAML as user errors (exit 1, one line, no stack), and no command → usage.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { exitCodeFor } from '../../src/cli/main.ts';
import { capture } from '../helpers/capture.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

const PRICE = ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--batch', 'decode:8@1024'];
const SWEEP = ['sweep', '--model', 'llama-2-7b', '--chip', 'h200'];

/** The billion-laughs file: 9^6 expansions of one string through nested aliases. */
const LAUGHS =
  'kind: CoefficientSet\nname: lol\na: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' +
  ['b', 'c', 'd', 'e', 'f'].map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcde'[i]}`).join(',')}]`).join('\n') +
  '\ncoefficients: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n';
/** An alias in the second document to an anchor of the first (YAML documents do not share anchors). */
const CROSS_DOC_ALIAS =
  'kind: CoefficientSet\nname: a\nx: &v 0.8\ncoefficients: []\n---\nkind: CoefficientSet\nname: b\ncoefficients:\n  - gemm_bf16_eps_max: {value: *v, units: "1"}\n';

const write = (t: string, name: string, text: string) => writeFileSync(path.join(t, name), text);

const CASES: BadInputCase[] = [
  { name: 'no command at all', args: [], code: 2, message: 'stepcal: no command given' },
  { name: 'only --debug', args: ['--debug'], code: 2, message: 'no command given' },
  {
    name: 'price --chip ../registry/h200 (a path, not a name)',
    args: ['price', '--model', 'llama-2-7b', '--chip', '../registry/h200', '--batch', 'decode:1@8'],
    code: 2,
    message: '--chip "../registry/h200": expected a name',
  },
  {
    name: 'price --model ../../etc',
    args: ['price', '--model', '../../etc', '--chip', 'h200', '--batch', 'decode:1@8'],
    code: 2,
    message: '--model "../../etc"',
  },
  { name: 'calibrate --chip ../h200', args: ['calibrate', '--chip', '../h200'], code: 2, message: '--chip "../h200"' },
  {
    name: 'fit all --chip with upper case and a slash',
    args: ['fit', 'all', '--chip', 'H200/x'],
    code: 2,
    message: '--chip "H200/x"',
  },
  { name: 'validate --chip ..', args: ['validate', '--chip', '..'], code: 2, message: '--chip "..": expected a name' },
  {
    name: 'registry copy --from ../x',
    args: ['registry', 'copy', '--from', '../x', '--to', 'b300', '--dry-run'],
    code: 2,
    message: '--from "../x"',
  },
  { name: 'price --tp 0', args: [...PRICE, '--tp', '0'], code: 2, message: '--tp: expected an integer ≥ 1, got "0"' },
  // A missing required input is a usage error like a missing required option (exit 2), not a data error.
  {
    name: 'price without --batch',
    args: ['price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--tp', '8'],
    code: 2,
    message: 'give at least one --batch',
  },
  {
    name: 'import aiconfigurator without --chip (none inferable from the path)',
    args: ['import', 'aiconfigurator', 'README.md', '--out', 'out'],
    code: 2,
    message: '--chip is required',
  },
  {
    name: 'price --tp two (same exit and wording as --tp 0)',
    args: [...PRICE, '--tp', 'two'],
    code: 2,
    message: '--tp: expected an integer ≥ 1, got "two"',
  },
  {
    name: 'price --ep 1.5',
    args: [...PRICE, '--ep', '1.5'],
    code: 2,
    message: '--ep: expected an integer ≥ 1, got "1.5"',
  },
  {
    name: 'price --spec-tokens -1',
    args: [...PRICE, '--spec-tokens', '-1'],
    code: 2,
    message: '--spec-tokens: expected an integer ≥ 0',
  },
  {
    name: 'sweep --context 0',
    args: [...SWEEP, '--context', '0'],
    code: 2,
    message: '--context: expected an integer ≥ 2, got "0"',
  },
  {
    // The sweep decodes against --context − 1 cached tokens: at 1 none is cached (price refuses decode:N@0 alike).
    name: 'sweep --context 1',
    args: [...SWEEP, '--context', '1'],
    code: 2,
    message: '--context: expected an integer ≥ 2, got "1"',
  },
  {
    name: 'sweep --batches 1,x,4',
    args: [...SWEEP, '--batches', '1,x,4'],
    code: 2,
    message: '--batches: expected an integer ≥ 1, got "x" in "1,x,4"',
  },
  {
    name: 'fit all --resamples 100 (same as calibrate)',
    args: ['fit', 'all', '--chip', 'h200', '--resamples', '100'],
    code: 2,
    message: '--resamples: expected an integer ≥ 200, got "100"',
  },
  {
    name: 'calibrate --resamples 100',
    args: ['calibrate', '--chip', 'h200', '--resamples', '100'],
    code: 2,
    message: '--resamples: expected an integer ≥ 200, got "100"',
  },
  {
    name: 'calibrate --fit-host fraction=2 (a usage error like --resamples)',
    args: ['calibrate', '--chip', 'h200', '--fit-host', 'fraction=2'],
    code: 2,
    message: '--fit-host: expected "batch=1" or "fraction=F"',
  },
  {
    name: 'validate --fit-host fraction=2',
    args: ['validate', '--chip', 'h100', '--fit-host', 'fraction=2', '--no-report'],
    code: 2,
    message: '--fit-host',
  },
  {
    name: 'registry extrapolate --widths 16,one',
    args: ['registry', 'extrapolate', 'widths', '--chip', 'h200', '--widths', '16,one'],
    code: 2,
    message: '--widths: expected an integer ≥ 2, got "one"',
  },
  {
    name: 'registry path that is a folder (price)',
    setup: (t) => mkdirSync(path.join(t, 'reg.yaml')),
    args: (t) => [...PRICE, '--registry', path.join(t, 'reg.yaml')],
    code: 1,
    message: /^stepcal: \S+\/reg\.yaml: it is a folder, expected a file\n$/,
  },
  // A folder where a file belongs, and a missing input: every reader (io/fs.ts readText) names the
  // file on one line, exit 1; a missing input is "file not found", never "cannot write".
  {
    name: 'registry import of an exported folder (a folder where a file belongs)',
    setup: (t) => mkdirSync(path.join(t, 'exp', 'h200'), { recursive: true }),
    args: (t) => ['registry', 'import', '--format', 'blis', '--chip', 'h200', path.join(t, 'exp')],
    code: 1,
    message: /^stepcal: \S+\/exp: it is a folder, expected a file\n$/,
  },
  ...(
    [
      ['serve --trace', (f: string) => ['serve', '--model', 'llama-3.1-8b', '--chip', 'h100', '--trace', f]],
      ['trace', (f: string) => ['trace', f]],
      ['window', (f: string) => ['window', f]],
      ['roofline --config', (f: string) => ['roofline', '--config', f]],
    ] as const
  ).map(
    ([name, args]): BadInputCase => ({
      name: `${name} of a missing file`,
      args: (t) => args(path.join(t, 'nope.csv')),
      code: 1,
      message: /^stepcal: \S+\/nope\.csv: file not found\n$/,
    }),
  ),
  {
    name: 'registry validate of a missing file and a folder: each one problem saying why, the other files still checked',
    setup: (t) => mkdirSync(path.join(t, 'fold.yaml')),
    args: (t) => ['registry', 'validate', path.join(t, 'nope.yaml'), path.join(t, 'fold.yaml'), 'registry/h100.yaml'],
    code: 1,
    message: /nope\.yaml: file not found\n.*fold\.yaml: it is a folder, expected a file\n3 file\(s\): 2 error\(s\)/s,
    stream: 'stdout',
  },
  {
    name: 'registry copy --out into a folder',
    setup: (t) => mkdirSync(path.join(t, 'b300.yaml')),
    args: (t) => ['registry', 'copy', '--from', 'b200', '--to', 'b300', '--out', path.join(t, 'b300.yaml')],
    code: 1,
    message: /b300\.yaml: it is a folder, expected a file/,
  },
  {
    name: 'sweep --out is a folder',
    setup: (t) => mkdirSync(path.join(t, 'plot.svg')),
    args: (t) => [...SWEEP, '--out', path.join(t, 'plot.svg')],
    code: 1,
    message: 'it is a folder, expected a file',
  },
  {
    name: 'sweep --out under a file',
    setup: (t) => write(t, 'file', 'x'),
    args: (t) => [...SWEEP, '--out', path.join(t, 'file', 'plot.svg')],
    code: 1,
    message: /cannot write .*file\/plot\.svg: a parent of it is a file, not a folder/,
  },
  {
    name: 'sweep --out in a read-only file system (/proc)',
    args: [...SWEEP, '--out', '/proc/stepcal-sweep.svg'],
    code: 1,
    message: 'cannot write /proc/stepcal-sweep.svg',
  },
  {
    name: 'YAML alias across documents (price)',
    setup: (t) => write(t, 'alias.yaml', CROSS_DOC_ALIAS),
    args: (t) => [...PRICE, '--registry', path.join(t, 'alias.yaml')],
    code: 1,
    message: /alias\.yaml: YAML error: Unresolved alias/,
  },
  {
    name: 'YAML alias across documents (registry validate names the file)',
    setup: (t) => write(t, 'alias.yaml', CROSS_DOC_ALIAS),
    args: (t) => ['registry', 'validate', path.join(t, 'alias.yaml')],
    code: 1,
    message: /alias\.yaml: YAML error in document 2: Unresolved alias/,
    stream: 'stdout',
  },
  {
    name: 'billion laughs (price)',
    setup: (t) => write(t, 'lol.yaml', LAUGHS),
    args: (t) => [...PRICE, '--registry', path.join(t, 'lol.yaml')],
    code: 1,
    message: /lol\.yaml: YAML error: Excessive alias count/,
  },
  {
    name: 'billion laughs (registry validate names the file, as price does)',
    setup: (t) => write(t, 'lol.yaml', LAUGHS),
    args: (t) => ['registry', 'validate', path.join(t, 'lol.yaml')],
    code: 1,
    message: /^\S+\/lol\.yaml: YAML error in document 1: Excessive alias count/,
    stream: 'stdout',
  },
  {
    name: 'an empty registry file (price says what registry validate says)',
    setup: (t) => write(t, 'empty.yaml', ''),
    args: (t) => [...PRICE, '--registry', path.join(t, 'empty.yaml')],
    code: 1,
    message: /^stepcal: \S+\/empty\.yaml: empty registry: no CoefficientSet documents\n$/,
  },
  {
    name: 'a registry of sets without coefficients (price)',
    setup: (t) => write(t, 'none.yaml', 'kind: CoefficientSet\nname: x\ncoefficients: []\n'),
    args: (t) => [...PRICE, '--registry', path.join(t, 'none.yaml')],
    code: 1,
    message: /^stepcal: \S+\/none\.yaml: empty registry: 1 set\(s\) but no coefficients\n$/,
  },
  {
    name: 'billion laughs (registry diff)',
    setup: (t) => write(t, 'lol.yaml', LAUGHS),
    args: (t) => ['registry', 'diff', path.join(t, 'lol.yaml'), path.join(t, 'lol.yaml')],
    code: 1,
    message: 'Excessive alias count',
  },
];

describe('bad inputs: exit codes and paths', () => runCorpus(CASES));

describe('exit codes of what escapes a command', () => {
  afterEach(() => vi.restoreAllMocks());
  it('an internal error exits 3 with "please report" and the stack', () => {
    const c = capture();
    const code = exitCodeFor(new TypeError('undefined is not a function'), false);
    vi.restoreAllMocks();
    expect(code).toBe(3);
    expect(c.err()).toContain('please report');
    expect(c.err()).toMatch(/TypeError: undefined is not a function\n\s+at /);
  });

  it('a file-system refusal that escaped a command is a user error (exit 1), with the stack only under --debug', () => {
    const err = Object.assign(new Error("EACCES: permission denied, open '/ro/x'"), { code: 'EACCES', path: '/ro/x' });
    for (const debug of [false, true]) {
      const c = capture();
      const code = exitCodeFor(err, debug);
      vi.restoreAllMocks();
      expect(code).toBe(1);
      expect(c.err().split('\n')[0]).toBe('stepcal: cannot write /ro/x: permission denied (is the folder read-only?)');
      expect(/\n\s+at /.test(c.err())).toBe(debug);
      // The message is printed once: --debug adds the stack frames, not the stack's copy of the message.
      expect(c.err().split('permission denied').length - 1).toBe(1);
    }
  });
});
