import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { sha256File } from '../../src/core/io/fs.ts';
import { parseCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import { SET_NAMES } from '../../src/core/schemas/registry.ts';
import { planFitOutputs } from '../../src/cli/commands/fit.ts';
import { checkFamilyEntries } from '../../src/cli/fit-outputs.ts';
import { fitAll } from '../../src/fit/index.ts';
import type { FitAllResult } from '../../src/fit/index.ts';
import { fitOutputFiles } from '../../src/report/fit.ts';
import { runCli as cliInProcess } from '../helpers/cli.ts';
import { runCli } from '../registry/cli.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-fit-out-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const fake = { chip: 'h200', registry_text: 'r' } as unknown as FitAllResult;
const report = { readme: 'md', figures: [{ name: 'a.svg', svg: '<svg/>' }] };
const files = (o: Parameters<typeof fitOutputFiles>[1]) =>
  fitOutputFiles(fake, o, report).map((f) => path.relative(REPO_ROOT, f.file));

describe('stepcal fit output plan (--registry-out, --fits-out)', () => {
  it('fit all writes the committed registry and fits/<chip>/ by default, or --fits-out', () => {
    const p = planFitOutputs('h200', 'all', {});
    expect(p.write).toBe(true);
    expect(files(p.out)).toEqual(['registry/h200.yaml', 'fits/h200/README.md', 'fits/h200/a.svg']);
    const q = planFitOutputs('h200', 'all', { fitsOut: '/tmp/x' });
    expect(fitOutputFiles(fake, q.out, report).map((f) => f.file)).toEqual([
      path.join(REPO_ROOT, 'registry/h200.yaml'),
      '/tmp/x/README.md',
      '/tmp/x/a.svg',
    ]);
  });

  it('a redirected registry writes no report unless --fits-out is given (family-only or all)', () => {
    for (const family of ['gemm', 'all']) {
      const p = planFitOutputs('h200', family, { registryOut: '/tmp/r.yaml' });
      expect(p.write).toBe(true);
      expect(fitOutputFiles(fake, p.out, report).map((f) => f.file)).toEqual(['/tmp/r.yaml']);
      expect(p.notes.join('\n')).toContain('no fit report written');
      const q = planFitOutputs('h200', family, { registryOut: '/tmp/r.yaml', fitsOut: '/tmp/f' });
      expect(fitOutputFiles(fake, q.out, report).map((f) => f.file)).toEqual([
        '/tmp/r.yaml',
        '/tmp/f/README.md',
        '/tmp/f/a.svg',
      ]);
    }
  });

  it('a family-only fit without --registry-out writes nothing', () => {
    const p = planFitOutputs('h200', 'host', { fitsOut: '/tmp/f' });
    expect(p.write).toBe(false);
    expect(p.notes.join('\n')).toContain('partial fit');
  });

  // The first two runs are in-process (what they write is the point); the --check run is the spawned
  // case: its exit code through a real process.
  it('CLI: fit host --registry-out leaves the committed fits/h200/ untouched; --fits-out writes the report there', async () => {
    const committed = path.join(REPO_ROOT, 'fits', 'h200');
    const snap = () =>
      readdirSync(committed)
        .filter((f) => f === 'README.md' || f.endsWith('.svg'))
        .map((f) => `${f}:${sha256File(path.join(committed, f))}:${statSync(path.join(committed, f)).mtimeMs}`)
        .sort();
    const before = snap();
    const reg = path.join(tmp, 'h200.host.yaml');
    const a = await cliInProcess(['fit', 'host', '--chip', 'h200', '--registry-out', reg]);
    expect(a.code, a.stderr).toBe(0);
    expect(readFileSync(reg, 'utf8')).toContain('host_launch_per_kernel');
    expect(a.stderr).toContain('no fit report written');
    expect(snap()).toEqual(before);

    const fitsOut = path.join(tmp, 'fits');
    const b = await cliInProcess(['fit', 'host', '--chip', 'h200', '--registry-out', reg, '--fits-out', fitsOut]);
    expect(b.code, b.stderr).toBe(0);
    expect(existsSync(path.join(fitsOut, 'README.md'))).toBe(true);
    expect(readFileSync(path.join(fitsOut, 'README.md'), 'utf8')).toContain('# Fitted coefficients: h200');
    expect(snap()).toEqual(before);
    // --check against the scratch outputs is clean (same files, same bytes).
    const c = runCli(['fit', 'host', '--chip', 'h200', '--registry-out', reg, '--fits-out', fitsOut, '--check']);
    expect(c.status, c.stderr).toBe(0);
  });

  // A family-only --check compares the entries the family fits, not the whole registry: before, every
  // entry of the other families read "removed" and fits/<chip>/README.md "differs", exit 1.
  it('CLI: fit host --check compares only the entries host fits with the committed registry', async () => {
    const a = await cliInProcess(['fit', 'host', '--chip', 'h200', '--check']);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stderr).toMatch(/the 7 entries of host and the families it is fitted from match registry\/h200\.yaml/);
    expect(a.stderr).not.toContain('removed');
  });

  it('checkFamilyEntries names a changed entry of the family and ignores entries it does not fit', async () => {
    const result = await fitAll('h200', { families: ['host'], workers: 1 });
    const text = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
    const reg = path.join(tmp, 'h200.planted.yaml');
    // host_launch_per_kernel 3.2 → 3.3 (a host entry); gemm's eps_max_bf16 is left as committed.
    const planted = text.replace(/(- host_launch_per_kernel:\n\s+value: )3\.2\n/, '$13.3\n');
    expect(planted).not.toBe(text);
    writeFileSync(reg, planted);
    expect(checkFamilyEntries(result, { registryOut: reg })).toEqual([
      'cost-model-host-overheads/host_launch_per_kernel: changed',
    ]);
    writeFileSync(reg, text);
    expect(checkFamilyEntries(result, { registryOut: reg })).toEqual([]);
    expect(checkFamilyEntries(result, { registryOut: path.join(tmp, 'absent.yaml') })).toEqual([
      `${path.join(tmp, 'absent.yaml')}: missing`,
    ]);
  });

  it('checkFamilyEntries names an entry of a fitted family that the run no longer produces as removed', async () => {
    const result = await fitAll('h200', { families: ['host'], workers: 1 });
    const text = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
    const lines = text.split('\n');
    const at = lines.indexOf('  - host_completion:');
    let end = at + 1;
    while (!lines[end]!.startsWith('  - ')) end++;
    // A stale host entry (family host) and nothing else changed: the check must name it.
    const stale = ['  - host_stale_term:', ...lines.slice(at + 1, end)];
    const reg = path.join(tmp, 'h200.stale.yaml');
    writeFileSync(reg, [...lines.slice(0, end), ...stale, ...lines.slice(end)].join('\n'));
    expect(checkFamilyEntries(result, { registryOut: reg })).toEqual([
      'cost-model-host-overheads/host_stale_term: removed',
    ]);
  });

  it('CLI: a family-only fit refuses to write over a registry holding other families, and leaves it as it was', async () => {
    const reg = path.join(tmp, 'h200.full.yaml');
    const text = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
    writeFileSync(reg, text);
    // The entries of every set but the host set's (the 7 carried BLIS host values): what a host-only fit would drop.
    const others = parseCoefficientSets(text, 'h200.yaml')
      .filter((s) => s.name !== SET_NAMES.host)
      .reduce((n, s) => n + s.coefficients.length, 0);
    const a = await cliInProcess(['fit', 'host', '--chip', 'h200', '--registry-out', reg]);
    expect(a.code).toBe(1);
    expect(a.stderr).toMatch(
      new RegExp(`holds ${others} entries host does not fit .*would drop them, so nothing was written`),
    );
    expect(a.stderr).toContain('registry update --chip h200');
    expect(readFileSync(reg, 'utf8')).toBe(text);
  });
});
