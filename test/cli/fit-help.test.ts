/**
 * `fit --help` lists every <family> the command accepts (engine too) and shows --resamples' default as
 * the number it parses to, as `calibrate --help` does.
 */
import { describe, expect, it } from 'vitest';
import { FIT_FAMILIES } from '../../src/fit/families.ts';
import { runCli } from '../helpers/cli.ts';

const flat = (s: string) => s.replace(/\s+/g, ' ');

describe('fit --help', () => {
  it('names all and engine beside the families in its description', async () => {
    const r = await runCli(['fit', '--help']);
    expect(r.code).toBe(0);
    expect(flat(r.stdout)).toContain(`<family> is one of ${FIT_FAMILIES.join(', ')}, all or engine`);
  });

  it('shows --resamples (default: 200) as calibrate does, not "200"', async () => {
    const fit = flat((await runCli(['fit', '--help'])).stdout);
    const calibrate = flat((await runCli(['calibrate', '--help'])).stdout);
    expect(fit).toContain('--resamples <n> bootstrap resamples (≥ 200) (default: 200)');
    expect(calibrate).toContain('--resamples <n> bootstrap resamples (≥ 200) (default: 200)');
  });
});
