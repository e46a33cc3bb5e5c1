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
];

describe('bad inputs: CLI usage', () => runCorpus(CASES));
