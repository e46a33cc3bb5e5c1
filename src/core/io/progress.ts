/**
 * Progress for long stages, drawn by `cli-progress` on stderr (stdout carries results only).
 *
 * Shown only when it helps: stderr is a terminal, `STEPCAL_QUIET` is not `1`, the code is not running
 * under vitest (`VITEST` set), the stage has at least `MIN_PROGRESS_ITEMS` items, and it is still
 * running `PROGRESS_DELAY_MS` after it started (a quick import or validation prints nothing). The bar
 * is cleared when done and replaced by one `<title>: done in N s` line. Piped output and tests stay
 * clean.
 */
import { createRequire } from 'node:module';
import type cliProgressTypes from 'cli-progress';

/**
 * cli-progress, loaded on the first bar actually drawn (a CommonJS module, so `require` works
 * synchronously): every command imports this file through core/io/staging.ts, and most never draw
 * a bar, so loading it at start-up cost every `stepcal` run its parse time (issue 17 start-up).
 */
function cliProgress(): typeof cliProgressTypes {
  return createRequire(import.meta.url)('cli-progress') as typeof cliProgressTypes;
}

/** Fewer items than this never get a bar (a bar for one item says nothing). */
export const MIN_PROGRESS_ITEMS = 2;
/** A stage that finishes within this many milliseconds draws nothing. */
export const PROGRESS_DELAY_MS = 500;

export interface Progress {
  /** One item done; `label` names it (shown after the bar). */
  tick(label?: string): void;
  /** The stage is over: clear the bar and, if it was shown, print the elapsed time. */
  done(): void;
}

/** Whether progress may be drawn at all in this process (terminal stderr, not quiet, not a test run). */
export function progressEnabled(): boolean {
  return process.stderr.isTTY === true && process.env.STEPCAL_QUIET !== '1' && process.env.VITEST === undefined;
}

/**
 * A progress bar for `total` items titled `title`.
 * @param total number of `tick` calls expected (items, files, rows)
 */
export function progress(title: string, total: number): Progress {
  const enabled = progressEnabled() && total >= MIN_PROGRESS_ITEMS;
  const t0 = Date.now();
  let n = 0;
  let bar: cliProgressTypes.SingleBar | undefined;
  return {
    tick(label?: string) {
      n++;
      if (!enabled) return;
      if (!bar && Date.now() - t0 >= PROGRESS_DELAY_MS) {
        const cp = cliProgress();
        bar = new cp.SingleBar(
          {
            stream: process.stderr,
            format: `${title} [{bar}] {value}/{total} | eta {eta}s | {label}`,
            clearOnComplete: true,
            hideCursor: true,
          },
          cp.Presets.shades_classic,
        );
        bar.start(total, n - 1, { label: '' });
      }
      bar?.update(n, { label: label ?? '' });
    },
    done() {
      if (!bar) return;
      bar.stop();
      process.stderr.write(`${title}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
    },
  };
}

/** A one-line status message on stderr (never stdout). Silent under STEPCAL_QUIET=1. */
export function note(message: string): void {
  if (process.env.STEPCAL_QUIET !== '1') process.stderr.write(`${message}\n`);
}
