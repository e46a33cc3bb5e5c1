/**
 * `stepcal window <file>` — steps per second over a benchmark's selected step intervals, and the
 * token rates derived from it (seed ch02 §2.5.3–2.5.5). `--steps-per-s` converts a known rate
 * without a file.
 */
import type { Command } from 'commander';
import { UserError } from '../../core/errors.ts';
import { readText } from '../../core/io/fs.ts';
import { parseNonNegative, parsePositive, parsePositiveInt } from '../../analytics/args.ts';
import { parseWindowCsv, selectWindow } from '../../analytics/window.ts';
import { ratesReport, tokenRates, windowReport, type RateInputs } from '../../report/window.ts';

interface Opts {
  concurrency?: number;
  requests?: number;
  draftLength: number;
  cp: number;
  tau?: number;
  stepsPerS?: number;
  json?: boolean;
}

export function register(program: Command): void {
  program
    .command('window')
    .description(
      'Steps/s over selected benchmark intervals (pairs first, then drop pairs ending at a flagged step) and token rates (chapter 2 §2.5.3–2.5.5)',
    )
    .argument('[file]', 'CSV: ts_ms | ts_s | ts_us, flag (0/1), optional running')
    .option('--concurrency <n>', 'only rows whose running count equals n are endpoints', parsePositiveInt)
    .option('--requests <r>', 'requests per step for token rates (default: --concurrency)', parsePositiveInt)
    .option('--draft-length <d>', 'draft tokens per request per step (nextn)', parseNonNegative, 0)
    .option('--cp <w>', 'context-parallel width (devices per rank)', parsePositiveInt, 1)
    .option('--tau <τ>', 'observed useful tokens per request per step, for the useful rate', parseNonNegative)
    .option('--steps-per-s <rate>', 'skip the file: convert this step rate', parsePositive)
    .option('--json', 'print JSON instead of text')
    .action((file: string | undefined, opts: Opts) => {
      const rates: RateInputs = { draft_length: opts.draftLength, cp: opts.cp };
      const requests = opts.requests ?? opts.concurrency;
      if (requests !== undefined) rates.requests = requests;
      if (opts.tau !== undefined) rates.tau = opts.tau;
      if (opts.stepsPerS !== undefined) {
        if (file) throw new UserError('give either a file or --steps-per-s, not both');
        if (opts.json)
          process.stdout.write(
            JSON.stringify({ steps_per_s: opts.stepsPerS, ...rates, ...tokenRates(opts.stepsPerS, rates) }, null, 2) +
              '\n',
          );
        else process.stdout.write(`steps/s (given) = ${opts.stepsPerS}\n${ratesReport(opts.stepsPerS, rates)}`);
        return;
      }
      if (!file) throw new UserError('give a CSV of step timestamps, or --steps-per-s');
      const rows = parseWindowCsv(readText(file), file);
      let w: ReturnType<typeof selectWindow>;
      try {
        w = selectWindow(rows, opts.concurrency);
      } catch (err) {
        throw new UserError(`${file}: ${(err as Error).message}`);
      }
      if (opts.json) {
        const t = w.steps_per_s === null ? {} : tokenRates(w.steps_per_s, rates);
        process.stdout.write(`${JSON.stringify({ file, ...w, ...rates, ...t }, null, 2)}\n`);
        return;
      }
      process.stdout.write(windowReport(w));
      if (w.steps_per_s !== null) process.stdout.write(ratesReport(w.steps_per_s, rates));
      else process.stdout.write('token rates: no result (no step rate)\n');
    });
}
