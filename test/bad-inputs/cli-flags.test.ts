/**
 * Bad-input corpus, flag values and message order (fixB review). The README's rule: a bad flag value,
 * and a `--chip`/`--model`/`--engine` name outside `[a-z0-9._-]+`, is usage (exit 2); a well-formed
 * name with no file behind it is a data error (exit 1), as `--model nosuch` is ("unknown model").
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { runCli } from '../helpers/cli.ts';
import { runCorpus, type BadInputCase } from './harness.ts';

const PRICE = ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--batch', 'decode:8@1024'];
const SERVE = ['serve', '--model', 'llama-2-7b', '--chip', 'h200', '--concurrency', '2', '--requests', '4'];
const STEPS = path.join(REPO_ROOT, 'measurements', 'h100', 'splitwise.steps.csv');

const CASES: BadInputCase[] = [
  {
    name: 'serve --engine-profile splitwise (a fitted profile, given with --engine)',
    args: [...SERVE, '--engine-profile', 'splitwise'],
    code: 2,
    message:
      'expected a built-in profile (uncalibrated), got "splitwise"; a fitted profile registry/engines/splitwise.yaml is given with --engine splitwise',
  },
  {
    name: 'price --engine Bad (outside [a-z0-9._-]+, as --model Bad)',
    args: [...PRICE, '--engine', 'Bad'],
    code: 2,
    message: `--engine "Bad": expected a name of lower-case letters`,
  },
  {
    name: 'price --model Bad',
    args: [...PRICE.slice(0, 1), '--model', 'Bad', ...PRICE.slice(3)],
    code: 2,
    message: '--model "Bad"',
  },
  {
    name: 'price --engine nosuch (well-formed, no file: data error like --model nosuch)',
    args: [...PRICE, '--engine', 'nosuch'],
    code: 1,
    message: 'no engine profile registry/engines/nosuch.yaml',
  },
  {
    name: 'price --model nosuch',
    args: [...PRICE.slice(0, 1), '--model', 'nosuch', ...PRICE.slice(3)],
    code: 1,
    message: 'unknown model "nosuch"',
  },
  {
    // the error is the first and only line: no "pricing 456 rows on no chip" before it
    name: 'fit engine --engine tp2 with no tp2 rows',
    args: ['fit', 'engine', '--engine', 'tp2', '--steps', STEPS, '--check'],
    code: 1,
    message: /^stepcal: no step rows of engine tp2 in the given files \(engines: splitwise\)\n$/,
  },
];

describe('bad inputs: flag values and message order', () => {
  runCorpus(CASES);
});

describe('serve --help', () => {
  it('shows the --isl/--osl defaults as typed (1024, 256), not as the parsed object', async () => {
    const r = await runCli(['serve', '--help']);
    expect(r.code).toBe(0);
    const help = r.stdout.replace(/\s+/g, ' ');
    expect(help).toContain('--isl <dist> prompt tokens: N | fixed:N | uniform:LO-HI | exp:MEAN (default: 1024)');
    expect(help).toContain('--osl <dist> output tokens: N | fixed:N | uniform:LO-HI | exp:MEAN (default: 256)');
    expect(help).not.toContain('"kind"');
    expect(help).toContain('a fitted profile (registry/engines/<name>.yaml) is --engine');
  });
});
