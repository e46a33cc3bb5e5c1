/**
 * Capture what the in-process CLI writes to stdout and stderr. Pair with
 * `afterEach(() => vi.restoreAllMocks())` in the test file.
 */
import { vi } from 'vitest';

export function capture(): { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => {
    out += String(s);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => {
    err += String(s);
    return true;
  });
  return { out: () => out, err: () => err };
}
