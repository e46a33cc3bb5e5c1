/** `stepcal price`: price one step of a batch and print the per-resource breakdown (src/pricer). */
import path from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { UsageError, UserError } from '../../common/errors.ts';
import { REPO_ROOT } from '../../catalog/chip.ts';
import { parseBatchSpec, parseBatchSpecs } from '../../pricer/batch.ts';
import { setupPricer } from '../../pricer/setup.ts';
import { CUDAGRAPH_MODES, RESOURCES, type CudagraphMode, type Deployment, type StepPrice } from '../../pricer/types.ts';

/** Shared deployment flags of `price` and `sweep`. */
export function addDeploymentOptions(cmd: Command): Command {
  return cmd
    .requiredOption('--model <name>', 'catalog model (catalog/models)')
    .requiredOption('--chip <name>', 'catalog chip (catalog/chips)')
    .option('--tp <n>', 'tensor-parallel width', '1')
    .option('--ep <n>', 'expert-parallel width', '1')
    .option('--registry <file>', 'coefficient registry (default registry/<chip>.yaml)')
    .option('--weight-dtype <d>', 'served weight dtype or quantization (auto = checkpoint)', 'auto')
    .option('--kv-dtype <d>', 'KV-cache dtype (default: follows the weights)')
    .option('--cudagraph-mode <m>', `CUDA-graph mode (${CUDAGRAPH_MODES.join(', ')})`, 'FULL_AND_PIECEWISE')
    .option('--max-capture-size <n>', 'largest captured batch, tokens', '512')
    .option('--decode-threshold <n>', 'rows scheduling more tokens than this are prefills', '1')
    .option('--spec-tokens <n>', 'speculative tokens per step (drafter = the graph speculator)', '0');
}

function int(v: string, flag: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`${flag} must be a non-negative integer, got "${v}"`);
  return n;
}

/** Deployment from parsed flags. */
export function deploymentFromFlags(o: Record<string, string | undefined>): Partial<Deployment> {
  const mode = (o.cudagraphMode ?? 'FULL_AND_PIECEWISE').toUpperCase();
  if (!(CUDAGRAPH_MODES as readonly string[]).includes(mode)) throw new UserError(`unknown --cudagraph-mode "${o.cudagraphMode}" (known: ${CUDAGRAPH_MODES.join(', ')})`);
  const d: Partial<Deployment> = {
    tp: int(o.tp ?? '1', '--tp'),
    ep: int(o.ep ?? '1', '--ep'),
    weight_dtype: o.weightDtype ?? 'auto',
    cudagraph_mode: mode as CudagraphMode,
    max_capture_size: int(o.maxCaptureSize ?? '512', '--max-capture-size'),
    decode_threshold: int(o.decodeThreshold ?? '1', '--decode-threshold'),
  };
  if (o.kvDtype) d.kv_dtype = o.kvDtype;
  const spec = int(o.specTokens ?? '0', '--spec-tokens');
  if (spec > 0) d.speculative = { num_spec_tokens: spec };
  return d;
}

const f1 = (v: number) => v.toFixed(1);

/** A path as printed: relative to the repository root when inside it, else as given. */
export function displayPath(file: string): string {
  const rel = path.relative(REPO_ROOT, path.resolve(file));
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : file;
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

/** Text table of a step price. */
export function formatStepPrice(p: StepPrice): string {
  const lines: string[] = [];
  lines.push('resource   time_us');
  for (const r of RESOURCES) lines.push(`${r.padEnd(10)} ${f1(p.resources_us[r]).padStart(10)}${r === p.bottleneck ? '  <- bottleneck' : ''}`);
  lines.push(`${'NoOverlap'.padEnd(10)} ${f1(p.no_overlap_us).padStart(10)}   (use this one; seed "Which estimate to use")`);
  lines.push(`${'CMOverlap'.padEnd(10)} ${f1(p.compute_memory_overlap_us).padStart(10)}   (stepcal extension: SM and HBM overlap per layer; collectives and host serial)`);
  lines.push(`${'Overlap'.padEnd(10)} ${f1(p.overlap_us).padStart(10)}`);
  if (p.per_kind) {
    lines.push('', 'layer kind             count     sm_us    hbm_us nvlink_us    nic_us experts_us');
    for (const k of p.per_kind) {
      lines.push(
        `${k.kind.padEnd(20)} ${String(k.count).padStart(6)} ${f1(k.resources_us.sm).padStart(9)} ${f1(k.resources_us.hbm).padStart(9)} ${f1(k.resources_us.nvlink).padStart(9)} ${f1(k.resources_us.nic).padStart(9)} ${f1(k.experts_us).padStart(10)}`,
      );
    }
  }
  if (p.extrapolated) lines.push('', 'EXTRAPOLATED:', ...p.extrapolation_notes.map((n) => `  - ${n}`));
  return lines.join('\n') + '\n';
}

export function register(program: Command): void {
  addDeploymentOptions(program.command('price').description('price one step of a batch: NoOverlap, CMOverlap, Overlap, bottleneck and per-resource µs'))
    .option('--batch <spec>', 'decode:N@CTX | decode:NxT@CTX | prefill:NxTOKENS[@CTX] (repeatable; N, T ≥ 1)', collectBatch, [] as string[])
    .option('--per-kind', 'add the per-layer-kind breakdown')
    .option('--json', 'print JSON')
    .action((o: Record<string, string | undefined> & { batch: string[]; perKind?: boolean; json?: boolean }) => {
      if (!o.batch.length) throw new UserError('give at least one --batch (e.g. --batch decode:32@1024)');
      const s = setupPricer(o.model!, o.chip!, deploymentFromFlags(o), o.registry);
      const batch = parseBatchSpecs(o.batch);
      const p = s.pricer.price(batch, { per_kind: Boolean(o.perKind) });
      if (o.json) {
        process.stdout.write(JSON.stringify({ model: s.model.name, chip: s.chip.name, deployment: s.deployment, registry: displayPath(s.registry_file), batch: o.batch, info: s.pricer.info, price: p }, null, 2) + '\n');
        return;
      }
      const d = s.deployment;
      process.stdout.write(
        `${s.model.name} on ${s.chip.name}, tp ${d.tp}, ep ${d.ep}, weights ${s.pricer.info.served_dtype}, ${d.cudagraph_mode}; batch ${o.batch.join(' + ')} (${batch.requests.length} ${batch.requests.length === 1 ? 'request' : 'requests'})\n` +
          `registry ${displayPath(s.registry_file)}\n\n` +
          formatStepPrice(p),
      );
      if (s.pricer.info.assumptions.length) process.stdout.write('\nassumptions:\n' + s.pricer.info.assumptions.map((a) => `  - ${a}`).join('\n') + '\n');
    });
}
