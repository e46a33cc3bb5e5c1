/**
 * Loading an engine profile runs the gates `fit engine` runs (negative terms, unordered ci95, s out of
 * range, a large-step factor without its threshold) and refuses with file and field; a profile
 * written before the large-step term says to re-fit; `registry validate` checks engine profiles too.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { engineProfileGates, loadEngineProfile } from '../../src/registry/engine.ts';
import { runCli as cli } from '../helpers/cli.ts';

const SHIPPED = path.join(REPO_ROOT, 'registry', 'engines', 'splitwise.yaml');
const dir = mkdtempSync(path.join(tmpdir(), 'stepcal-engine-load-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The fields of a profile document the tests edit. */
interface Doc {
  name: string;
  terms: Record<string, { value: number; ci95: number[]; identified: boolean }>;
  large_step_message_bytes?: number;
  sm_scale: { value: number };
}

/** The shipped profile, edited by `edit`, written as `<name>.yaml` in a temporary directory. */
function variant(name: string, edit: (doc: Doc) => void): string {
  const doc = parse(readFileSync(SHIPPED, 'utf8')) as Doc;
  edit(doc);
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(file, stringify(doc));
  return file;
}

const PRICE = ['price', '--model', 'llama-2-70b', '--chip', 'h100', '--tp', '8', '--batch', 'prefill:1x4096'];

describe('engine profile load gates', () => {
  it('the shipped profile passes every gate', () => {
    expect(engineProfileGates(loadEngineProfile('splitwise'))).toEqual([]);
  });

  it('refuses a negative term at load, naming the file and the field, and price exits 1', async () => {
    const file = variant('neg', (d) => {
      d.name = 'neg';
      d.terms.large_step_nvlink_factor!.value = -5;
    });
    expect(() => loadEngineProfile(file)).toThrow(
      /neg\.yaml: engine profile refused .*\n {2}field terms\.large_step_nvlink_factor\.value: -5 × \(priced NVLink µs\): expected >= 0/,
    );
    const r = await cli([...PRICE, '--engine', file, '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/neg\.yaml: engine profile refused/);
    expect(r.stderr).toMatch(/field terms\.large_step_nvlink_factor\.value/);
  });

  it('refuses a negative µs term and an unordered ci95, every failing field listed', () => {
    const file = variant('two', (d) => {
      d.terms.per_kernel_us!.value = -1;
      d.terms.per_request_step_us!.ci95 = [400, 200];
    });
    let msg = '';
    try {
      loadEngineProfile(file);
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toMatch(/field terms\.per_kernel_us\.value: -1 µs: expected >= 0/);
    expect(msg).toMatch(/field terms\.per_request_step_us\.ci95: \[400, 200\] is not an interval/);
  });

  it('refuses a nonzero large-step factor without large_step_message_bytes', () => {
    const file = variant('nothr', (d) => {
      delete d.large_step_message_bytes;
    });
    expect(() => loadEngineProfile(file)).toThrow(
      /nothr\.yaml: .*\n {2}field large_step_message_bytes: absent, but terms\.large_step_nvlink_factor\.value is 2\.717: a nonzero factor needs its threshold/,
    );
    // factor 0 without a threshold is a profile whose large-step term applies to no step: accepted
    const zero = variant('zero', (d) => {
      delete d.large_step_message_bytes;
      d.terms.large_step_nvlink_factor = { value: 0, ci95: [0, 0], identified: false };
    });
    expect(loadEngineProfile(zero).terms.large_step_nvlink_factor.value).toBe(0);
  });

  it('says what to do with a profile written before the large-step term', () => {
    const file = variant('old', (d) => {
      delete d.terms.large_step_nvlink_factor;
      delete d.large_step_message_bytes;
    });
    expect(() => loadEngineProfile(file)).toThrow(
      /old\.yaml: field terms\.large_step_nvlink_factor: absent: the profile was written before the large-step collective term; re-fit it with `stepcal fit engine --engine splitwise --steps <files\.\.\.>`/,
    );
  });

  it('registry validate checks engine profiles: the shipped one clean, a bad one exit 1 with file and field', async () => {
    const ok = await cli(['registry', 'validate', SHIPPED]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/1 file\(s\): 0 error\(s\), 0 warning\(s\)/);
    const file = variant('badscale', (d) => {
      d.sm_scale.value = 0;
    });
    const bad = await cli(['registry', 'validate', file]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/badscale\.yaml: field sm_scale\.value: 0 outside \[0\.25, 4\]/);
  });
});
