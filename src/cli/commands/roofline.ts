/**
 * `stepcal roofline` — sweep the chapter's step law T(R,N) = h + max(M(R)/W, F(N)/P) and useful
 * throughput U/T (seed ch02 §2.1–2.3). Prints the table, writes `<out-dir>/roofline.csv` and
 * `<out-dir>/roofline.svg`. Parameters: chapter defaults < YAML file (`--config`) < flags.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { UserError } from '../../core/errors.ts';
import { readText, writeFilesAtomic } from '../../core/io/fs.ts';
import { parseList, parseNonNegative, parsePositive } from '../../analytics/args.ts';
import {
  CHAPTER_PARAMS,
  CHAPTER_SWEEP_R,
  broadcastSpecs,
  checkParams,
  crossover,
  ridgeIntensity,
  sweep,
  type RooflineParams,
} from '../../analytics/roofline.ts';
import { asList, parseRooflineConfig, type RooflineConfig } from '../../core/schemas/roofline.ts';
import { crossoverLine, paramsLine, rooflineCsv, rooflineSvg, rooflineTable } from '../../report/roofline.ts';

interface Opts {
  config?: string;
  sharedBytes?: number;
  bytesPerRequest?: number;
  opsPerPosition?: number;
  memBytesPerS?: number;
  computeOpsPerS?: number;
  overheadUs?: number;
  contextScale?: number;
  requests?: number[];
  positions?: number[];
  positionsPerRequest?: number;
  usefulTokens?: number[];
  outDir: string;
  files: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('roofline')
    .description('Sweep the step law T(R,N) = h + max(M(R)/W, F(N)/P) and useful throughput U/T (chapter 2 §2.1–2.3)')
    .option(
      '--config <file.yaml>',
      'YAML with any of the parameter names below (snake_case) and requests/positions/useful_tokens lists',
    )
    .option('--shared-bytes <bytes>', 'bytes read once per step (default 4e6)', parseNonNegative)
    .option('--bytes-per-request <bytes>', 'context bytes per request per step (default 1e5)', parseNonNegative)
    .option('--ops-per-position <ops>', 'operations per evaluated position (default 2e6)', parseNonNegative)
    .option('--mem-bytes-per-s <B/s>', 'memory bandwidth W (default 1e11)', parsePositive)
    .option('--compute-ops-per-s <ops/s>', 'arithmetic rate P (default 1e12)', parsePositive)
    .option('--overhead-us <us>', 'serial overhead h (default 20)', parseNonNegative)
    .option('--context-scale <x>', 'multiplier on per-request context traffic (default 1)', parseNonNegative)
    .option('--requests <list>', 'R values, comma-separated (default 1,4,8,16,32,40,64,128)', parseList)
    .option('--positions <list>', 'N values, paired with R (a single value broadcasts); default N = k·R', parseList)
    .option('--positions-per-request <k>', 'N = k·R when --positions is absent (default 1)', parsePositive)
    .option('--useful-tokens <list>', 'U values, paired with R; default U = R', parseList)
    .option('--out-dir <dir>', 'where roofline.csv and roofline.svg go', 'results')
    .option('--no-files', 'print only; write no CSV/SVG')
    .option('--json', 'print JSON instead of the table')
    .action((opts: Opts) => {
      const cfg: RooflineConfig = opts.config ? parseRooflineConfig(readText(opts.config), opts.config) : {};
      const p: RooflineParams = {
        shared_bytes: opts.sharedBytes ?? cfg.shared_bytes ?? CHAPTER_PARAMS.shared_bytes,
        bytes_per_request: opts.bytesPerRequest ?? cfg.bytes_per_request ?? CHAPTER_PARAMS.bytes_per_request,
        ops_per_position: opts.opsPerPosition ?? cfg.ops_per_position ?? CHAPTER_PARAMS.ops_per_position,
        mem_bytes_per_s: opts.memBytesPerS ?? cfg.mem_bytes_per_s ?? CHAPTER_PARAMS.mem_bytes_per_s,
        compute_ops_per_s: opts.computeOpsPerS ?? cfg.compute_ops_per_s ?? CHAPTER_PARAMS.compute_ops_per_s,
        overhead_us: opts.overheadUs ?? cfg.overhead_us ?? CHAPTER_PARAMS.overhead_us,
        context_scale: opts.contextScale ?? cfg.context_scale ?? CHAPTER_PARAMS.context_scale,
      };
      try {
        checkParams(p);
      } catch (err) {
        throw new UserError((err as Error).message);
      }
      const k = opts.positionsPerRequest ?? cfg.positions_per_request ?? 1;
      const requests = opts.requests ?? asList(cfg.requests) ?? [...CHAPTER_SWEEP_R];
      const positions = opts.positions ?? asList(cfg.positions);
      const useful = opts.usefulTokens ?? asList(cfg.useful_tokens);
      let specs: ReturnType<typeof broadcastSpecs>;
      try {
        specs = broadcastSpecs(requests, positions, useful, k);
      } catch (err) {
        throw new UserError((err as Error).message);
      }
      const points = sweep(p, specs);
      const cross = crossover(p, k);
      const ridge = ridgeIntensity(p);
      const files: string[] = [];
      if (opts.files) {
        const csv = path.join(opts.outDir, 'roofline.csv');
        const svg = path.join(opts.outDir, 'roofline.svg');
        writeFilesAtomic([
          { file: csv, data: rooflineCsv(points) },
          { file: svg, data: rooflineSvg(points, 'Step law T = h + max(M/W, F/P)') },
        ]);
        files.push(csv, svg);
      }
      if (opts.json) {
        process.stdout.write(
          `${JSON.stringify(
            { params: p, positions_per_request: k, points, ridge_ops_per_byte: ridge, crossover: cross ?? null, files },
            null,
            2,
          )}\n`,
        );
        return;
      }
      const out: string[] = [];
      out.push(
        'Step law T(R,N) = h + max(M(R)/W, F(N)/P); times in µs; useful throughput = U/T (chapter 2 eq. 2.1, 2.2)',
      );
      out.push(`params: ${paramsLine(p)}${opts.config ? ` (from ${opts.config} and flags)` : ''}`);
      out.push('');
      process.stdout.write(`${out.join('\n')}\n${rooflineTable(points)}\n`);
      process.stdout.write(crossoverLine(cross, ridge, k));
      process.stdout.write('bound excludes the serial overhead h; the max assumes perfect overlap (chapter §2.1.1)\n');
      for (const f of files) process.stdout.write(`wrote ${f}\n`);
    });
}
