/**
 * `stepcal price`: price one step of a batch and print the per-resource breakdown (src/pricer). This
 * module holds the flags only (shared with `sweep` and `serve`); the run is price-run.ts, loaded when
 * the command runs, so `stepcal price --help` and the other commands' help load no pricer (issue 17).
 */
import { InvalidArgumentError, type Command } from 'commander';
import { UsageError, UserError } from '../../core/errors.ts';
import { badChoice, parseFlagChoice, parseFlagNumber } from '../../core/flags.ts';
import { isKnownKvDtype, KV_DTYPES, WEIGHT_DTYPES } from '../../pricer/deployment.ts';
import { parseBatchSpec } from '../../pricer/batch.ts';
import { CUDAGRAPH_MODES, type Deployment } from '../../pricer/types.ts';
import type { PriceFlags } from './price-run.ts';

/** Shared deployment flags of `price` and `sweep`. */
export function addDeploymentOptions(cmd: Command): Command {
  return cmd
    .requiredOption('--model <name>', 'catalog model (catalog/models)')
    .requiredOption('--chip <name>', 'catalog chip (catalog/chips)')
    .option('--tp <n>', 'tensor-parallel width', '1')
    .option('--ep <n>', 'expert-parallel width', '1')
    .option('--registry <file>', 'coefficient registry (default registry/<chip>.yaml)')
    .option(
      '--engine <name>',
      'engine profile (registry/engines/<name>.yaml, `stepcal fit engine`): its host terms and s; default: uncalibrated engine, registry host terms',
    )
    .option('--weight-dtype <d>', 'served weight dtype or quantization (auto = checkpoint)', 'auto')
    .option('--kv-dtype <d>', "KV-cache dtype (default auto: the checkpoint's declared one, else follows the weights)")
    .option('--cudagraph-mode <m>', `CUDA-graph mode (${CUDAGRAPH_MODES.join(', ')})`, 'FULL_AND_PIECEWISE')
    .option('--max-capture-size <n>', 'largest captured batch, tokens', '512')
    .option('--decode-threshold <n>', 'rows scheduling more tokens than this are prefills', '1')
    .option('--spec-tokens <n>', 'speculative tokens per step (drafter = the graph speculator)', '0');
}

/**
 * Deployment from parsed flags (camelCase keys, as commander gives them), also `serve --deployment` overrides, which
 * reach it as flags: `nameOf(flag, key)` names the source of a value in a message (the flag itself by default; serve
 * names a value its override gave as `--deployment <key>`).
 * @throws UsageError (exit 2) for a malformed number or a choice outside its list (the list in the message)
 */
export function deploymentFromFlags(
  o: Record<string, string | undefined>,
  nameOf: (flag: string, key: string) => string = (flag) => flag,
): Partial<Deployment> {
  const n = (key: string) => nameOf(`--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`, key);
  const int = (key: string, fallback: string, min = 1) =>
    parseFlagNumber(n(key), o[key] ?? fallback, { integer: true, min });
  const mode = parseFlagChoice(n('cudagraphMode'), o.cudagraphMode ?? 'FULL_AND_PIECEWISE', CUDAGRAPH_MODES, (s) =>
    s.toUpperCase(),
  );
  const weightDtype = o.weightDtype ?? 'auto';
  parseFlagChoice(n('weightDtype'), weightDtype, WEIGHT_DTYPES, (s) => s.toLowerCase());
  if (o.kvDtype && !isKnownKvDtype(o.kvDtype)) throw badChoice(n('kvDtype'), o.kvDtype, KV_DTYPES);
  const d: Partial<Deployment> = {
    tp: int('tp', '1'),
    ep: int('ep', '1'),
    weight_dtype: weightDtype,
    cudagraph_mode: mode,
    max_capture_size: int('maxCaptureSize', '512'),
    decode_threshold: int('decodeThreshold', '1', 0),
  };
  if (o.kvDtype) d.kv_dtype = o.kvDtype;
  const spec = int('specTokens', '0', 0);
  if (spec > 0) d.speculative = { num_spec_tokens: spec };
  return d;
}

/** `--batch` collector: a malformed or empty spec is a usage error (exit 2), caught when parsed. */
function collectBatch(v: string, acc: string[]): string[] {
  try {
    parseBatchSpec(v);
  } catch (e) {
    if (e instanceof UserError) throw new InvalidArgumentError(e.message);
    throw e;
  }
  return [...acc, v];
}

export function register(program: Command): void {
  addDeploymentOptions(
    program
      .command('price')
      .description('price one step of a batch: NoOverlap, CMOverlap, Overlap, bottleneck and per-resource µs'),
  )
    .option(
      '--batch <spec>',
      'decode:N@CTX | decode:NxT@CTX | prefill:NxTOKENS[@CTX] (repeatable; N, T ≥ 1; decode CTX ≥ 1)',
      collectBatch,
      [] as string[],
    )
    .option('--per-kind', 'add the per-layer-kind breakdown')
    .option('--json', 'print JSON')
    .option(
      '--allow-over-capacity',
      'price a batch over the model context limit or the HBM capacity, with a note, instead of refusing it',
    )
    // The run itself (setup, pricing, output) lives in price-run.ts, loaded only when the command runs:
    // it pulls in the registry, YAML and schema modules, which `stepcal price --help` never needs.
    .action(async (o: PriceFlags) => {
      if (!o.batch.length) throw new UsageError('give at least one --batch (e.g. --batch decode:32@1024)');
      const deployment = deploymentFromFlags(o);
      (await import('./price-run.ts')).runPrice(o, deployment);
    });
}
