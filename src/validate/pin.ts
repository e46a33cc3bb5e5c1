/** The stepcal version for pins, read from package.json (the single source; src/cli/main.ts repeats it for --version). */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../core/catalog/chip.ts';

let cached: string | undefined;
export function stepcalVersion(): string {
  if (cached === undefined) {
    try {
      cached = String(
        (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version?: string }).version ??
          'unknown',
      );
    } catch {
      cached = 'unknown';
    }
  }
  return cached;
}
