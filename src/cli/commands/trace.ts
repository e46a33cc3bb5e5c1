/**
 * `stepcal trace <file.json|csv>` — per-request queue, prompt span, publish gap, TTFT and token
 * gaps, with TTFT/gap aggregates and whole-trace throughput (seed ch02 §2.4–2.4.1).
 */
import type { Command } from 'commander';
import { readText } from '../../core/io/fs.ts';
import { oneOf } from '../../analytics/args.ts';
import {
  parseTraceCsv,
  readTraceJson,
  summariseTrace,
  type PercentileConvention,
  type TimeUnit,
} from '../../analytics/trace.ts';
import { traceJson, traceReport } from '../../report/trace.ts';

interface Opts {
  /** Undefined when not given: the JSON file's declared unit, else ms. */
  unit?: TimeUnit;
  percentile: PercentileConvention;
  perRequestMean?: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('trace')
    .description(
      'Request timelines: queue, prompt, publish gap, TTFT, token gaps and their aggregates (chapter 2 §2.4)',
    )
    .argument(
      '<file>',
      'JSON array (or {unit, requests: [...]}) of {id, arrival, prompt_start, prompt_end, tokens: [...]}, or CSV with one row per delivery (id,arrival,prompt_start,prompt_end,token_time)',
    )
    .option(
      '--unit <unit>',
      'time unit of the file: ms, us or s (default: the JSON file\'s "unit", else ms; one contradicting the file\'s "unit" is refused)',
      oneOf(['ms', 'us', 's'] as const),
    )
    .option(
      '--percentile <rule>',
      'nearest-rank (sorted[ceil(p·n) − 1]) or type7',
      oneOf(['nearest-rank', 'type7'] as const),
      'nearest-rank',
    )
    .option(
      '--per-request-mean',
      'aggregate gaps as one mean per request (requests with ≥ 2 tokens) instead of pooling them',
    )
    .option('--json', 'print JSON (times in µs) instead of the table')
    .action((file: string, opts: Opts) => {
      const text = readText(file);
      const isCsv = /\.csv(\.gz)?$/i.test(file) || (!/\.json(\.gz)?$/i.test(file) && !/^\s*[[{]/.test(text));
      const { records, unit } = isCsv
        ? { records: parseTraceCsv(text, file, opts.unit ?? 'ms'), unit: opts.unit ?? 'ms' }
        : readTraceJson(text, file, opts.unit);
      const s = summariseTrace(records, {
        percentile: opts.percentile,
        gap_mode: opts.perRequestMean ? 'per-request-mean' : 'pooled',
        unit,
      });
      if (opts.json) process.stdout.write(`${JSON.stringify(traceJson(s, unit), null, 2)}\n`);
      else process.stdout.write(traceReport(s, unit));
    });
}
