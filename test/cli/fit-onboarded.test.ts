/**
 * `stepcal fit` on a chip whose registry `stepcal onboard` wrote (fits/<chip>/onboard.md: rtx-pro-6000)
 * refuses the entries onboard left out, and says which command checks and regenerates that registry
 * (docs/onboarding.md) instead of only "2 refusal(s); nothing written".
 */
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.ts';

describe('fit refusal on an onboarded chip', () => {
  it('fit gemm --chip rtx-pro-6000 --check exits 1 pointing to stepcal onboard --replace-registry', async () => {
    const r = await runCli(['fit', 'gemm', '--chip', 'rtx-pro-6000', '--check']);
    expect(r.code).toBe(1);
    const last = r.stderr.trimEnd().split('\n').at(-1)!;
    expect(last).toMatch(/^stepcal: fit rtx-pro-6000: 2 refusal\(s\); nothing written\. /);
    expect(last).toContain(
      'registry/rtx-pro-6000.yaml was written by `stepcal onboard` (fits/rtx-pro-6000/onboard.md)',
    );
    expect(last).toContain('`stepcal onboard --chip rtx-pro-6000 --data <upstream chip folder> --replace-registry`');
    expect(last).toContain('docs/onboarding.md');
  });
});
