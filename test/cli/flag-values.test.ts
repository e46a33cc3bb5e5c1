/**
 * A flag value outside its list, or a missing required combination of flags, is a usage error (exit 2,
 * README "Exit codes"), not a data error: one line naming the flag, the valid values and what was given.
 * Deployment choices are checked once, in deploymentFromFlags, so `serve --deployment` overrides exit alike.
 */
import { describe, expect, it } from 'vitest';
import { CUDAGRAPH_MODES } from '../../src/pricer/types.ts';
import { KV_DTYPES, WEIGHT_DTYPES } from '../../src/pricer/deployment.ts';
import { runCli } from '../helpers/cli.ts';

const PRICE = ['price', '--model', 'llama-3.1-8b', '--chip', 'h100', '--batch', 'decode:32@1024'];
const SERVE = ['serve', '--model', 'llama-3.1-8b', '--chip', 'h100'];

const CASES: { name: string; args: string[]; message: string }[] = [
  {
    name: 'price --cudagraph-mode XX',
    args: [...PRICE, '--cudagraph-mode', 'XX'],
    message: `--cudagraph-mode: expected one of ${CUDAGRAPH_MODES.join(', ')}, got "XX"`,
  },
  {
    name: 'price --weight-dtype fp3',
    args: [...PRICE, '--weight-dtype', 'fp3'],
    message: `--weight-dtype: expected one of ${WEIGHT_DTYPES.join(', ')}, got "fp3"`,
  },
  {
    name: 'price --kv-dtype fp3',
    args: [...PRICE, '--kv-dtype', 'fp3'],
    message: `--kv-dtype: expected one of ${KV_DTYPES.join(', ')}, got "fp3"`,
  },
  {
    name: 'sweep --kv-dtype fp3 (the shared deployment flags)',
    args: ['sweep', '--model', 'llama-3.1-8b', '--chip', 'h100', '--kv-dtype', 'fp3'],
    message: '--kv-dtype: expected one of auto, bf16',
  },
  {
    name: 'serve --deployment weight_dtype=fp3 (an override reaches the same check)',
    args: [...SERVE, '--sweep-concurrency', '1,2', '--deployment', 'weight_dtype=fp3'],
    message: '--deployment weight-dtype: expected one of auto, bf16',
  },
  {
    name: 'validate --composition bogus',
    args: ['validate', '--chip', 'h100', '--composition', 'bogus'],
    message: "option '--composition <c>' argument 'bogus' is invalid. expected one of no_overlap, cm_overlap, overlap",
  },
  {
    name: 'registry export --format csv',
    args: ['registry', 'export', 'registry/h200.yaml', '--format', 'csv'],
    message: 'expected one of blis, got "csv"',
  },
  {
    name: 'registry import --format csv',
    args: ['registry', 'import', 'x.yaml', '--chip', 'h200', '--format', 'csv'],
    message: 'expected one of blis, got "csv"',
  },
  {
    name: 'serve --gpu-memory-utilization 1.5',
    args: [...SERVE, '--gpu-memory-utilization', '1.5'],
    message: "option '--gpu-memory-utilization <f>' argument '1.5' is invalid. expected a number > 0 and ≤ 1",
  },
  {
    name: 'price --batch decode:32@0 (a decode against nothing cached)',
    args: ['price', '--model', 'llama-3.1-8b', '--chip', 'h100', '--batch', 'decode:32@0'],
    message: 'bad batch spec "decode:32@0": context must be ≥ 1 for decode',
  },
  {
    // A bad value inside --deployment is named by its key there, not as a flag the user did not pass.
    name: 'serve --deployment kv_dtype=bogus',
    args: [
      'serve',
      '--model',
      'llama-3.1-8b',
      '--chip',
      'h100',
      '--sweep-concurrency',
      '1,4',
      '--deployment',
      'tp=8,kv_dtype=bogus',
    ],
    message: 'stepcal: --deployment kv-dtype: expected one of auto, bf16',
  },
  {
    name: 'flops --step-us without --chip',
    args: ['flops', '--model', 'llama-3.1-8b', '--batch', 'decode:32@1024', '--step-us', '10000'],
    message: 'MFU needs --chip (or --peak-tflops) together with --step-us',
  },
];

describe('a flag value outside its list is a usage error (exit 2, one line listing the valid values)', () => {
  for (const c of CASES)
    it(c.name, async () => {
      const r = await runCli(c.args);
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n')[0]).toContain(c.message);
      expect(r.stderr).not.toMatch(/\n\s+at /); // no stack
    });

  it('the choices still accept their other spellings (case, fp8 variants)', async () => {
    const ok = await runCli([
      ...PRICE,
      '--cudagraph-mode',
      'piecewise',
      '--weight-dtype',
      'FP8',
      '--kv-dtype',
      'fp8_inc',
      '--json',
    ]);
    expect(ok.code).toBe(0);
    const j = JSON.parse(ok.stdout);
    expect(j.deployment.cudagraph_mode).toBe('PIECEWISE');
    expect(j.info.kv_bytes_per_element).toBe(1);
  });
});
