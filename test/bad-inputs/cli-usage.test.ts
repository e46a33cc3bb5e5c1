/** Bad-input corpus: usage errors of the CLI itself (exit 2). */
import { describe } from 'vitest';
import { runCorpus, type BadInputCase } from './harness.ts';

const CASES: BadInputCase[] = [
  { name: 'unknown command', args: ['frobnicate'], code: 2, message: 'unknown command' },
  {
    name: 'unknown option',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--no-such-flag'],
    code: 2,
    message: 'unknown option',
  },
  { name: 'missing required option', args: ['price'], code: 2, message: "required option '--model <name>'" },
  {
    // Commander checks the mandatory options first; the misspelling is the error to name (src/cli/main.ts).
    name: 'misspelt required option is named, not reported missing',
    args: ['price', '--model', 'llama-2-7b', '--chp', 'h200', '--batch', 'decode:1@10'],
    code: 2,
    message: "unknown option '--chp'\n(Did you mean --chip?)",
  },
  {
    name: 'misspelt option of a nested command',
    args: ['registry', 'diff', '--nope', 'registry/h200.yaml', 'registry/h200.yaml'],
    code: 2,
    message: "unknown option '--nope'",
  },
  {
    name: 'a negative number after a value flag is its value',
    args: ['price', '--model', 'llama-2-7b', '--chip', 'h200', '--tp', '-2', '--batch', 'decode:1@10'],
    code: 2,
    message: '--tp',
  },
  {
    // A positional argument outside its known values is a usage error, like an unknown import format.
    name: 'unknown fit family',
    args: ['fit', 'nosuchfam', '--chip', 'h100'],
    code: 2,
    message: 'unknown family "nosuchfam" (known: gemm,',
  },
];

describe('bad inputs: CLI usage', () => runCorpus(CASES));
