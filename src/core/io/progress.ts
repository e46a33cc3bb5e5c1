/**
 * Progress for long stages. Always written to stderr (stdout carries results only), and silent when
 * stderr is not a terminal or `STEPCAL_QUIET=1`, so piped output and tests stay clean.
 */
export interface Progress {
  tick(label?: string): void;
  done(): void;
}

export function progress(title: string, total: number): Progress {
  const enabled = process.stderr.isTTY === true && process.env.STEPCAL_QUIET !== '1';
  let n = 0;
  const t0 = Date.now();
  return {
    tick(label?: string) {
      n++;
      if (!enabled) return;
      const elapsed_s = (Date.now() - t0) / 1000;
      const eta_s = n > 0 ? (elapsed_s / n) * (total - n) : 0;
      process.stderr.write(`\r${title}: ${n}/${total}${label ? ' ' + label : ''} (eta ${eta_s.toFixed(0)} s)\x1b[K`);
    },
    done() {
      if (enabled) process.stderr.write(`\r${title}: done in ${((Date.now() - t0) / 1000).toFixed(1)} s\x1b[K\n`);
    },
  };
}

/** A one-line status message on stderr (never stdout). Silent under STEPCAL_QUIET=1. */
export function note(message: string): void {
  if (process.env.STEPCAL_QUIET !== '1') process.stderr.write(message + '\n');
}
