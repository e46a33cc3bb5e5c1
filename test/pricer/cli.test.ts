/** Smoke tests of `stepcal price` and `stepcal sweep` wiring (the library is tested elsewhere). */
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.ts';
import { BLIS_H200 } from './helpers.ts';

function capture() {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => ((err += String(s)), true));
  return { out: () => out, err: () => err };
}
afterEach(() => vi.restoreAllMocks());

describe('stepcal price / sweep', () => {
  it('price --json gives the §4.8.1-style breakdown', async () => {
    const c = capture();
    const code = await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--tp', '1', '--batch', 'decode:32@1023', '--registry', BLIS_H200, '--json']);
    expect(code).toBe(0);
    const j = JSON.parse(c.out());
    expect(j.price.bottleneck).toBe('hbm');
    expect(j.price.resources_us.host).toBeCloseTo(832.6, 6);
    expect(j.price.no_overlap_us).toBeCloseTo(9010.3 + (32 * 16384) / 3.84e6, 1);
    // the third estimate sits between the seed's two
    expect(j.price.compute_memory_overlap_us).toBeGreaterThanOrEqual(j.price.overlap_us);
    expect(j.price.compute_memory_overlap_us).toBeLessThanOrEqual(j.price.no_overlap_us);
  });
  it('price prints a table with units and the per-kind breakdown', async () => {
    const c = capture();
    const code = await main(['node', 'stepcal', 'price', '--model', 'mixtral-8x7b', '--chip', 'h200', '--tp', '2', '--batch', 'decode:8@1024', '--batch', 'prefill:1x512', '--registry', BLIS_H200, '--per-kind']);
    expect(code).toBe(0);
    expect(c.out()).toMatch(/time_us/);
    expect(c.out()).toMatch(/gqa_moe\s+32/);
    const v = (label: string) => Number(new RegExp(`^${label} +([0-9.]+)`, 'm').exec(c.out())![1]);
    expect(c.out()).toMatch(/^CMOverlap +[0-9.]+ +\(stepcal extension/m);
    expect(v('Overlap')).toBeLessThanOrEqual(v('CMOverlap'));
    expect(v('CMOverlap')).toBeLessThanOrEqual(v('NoOverlap'));
  });
  it('unknown model and missing registry are user errors (exit 1) that say what is known / what to do', async () => {
    let c = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'nope', '--chip', 'h200', '--batch', 'decode:1@1'])).toBe(1);
    expect(c.err()).toMatch(/known: .*llama-3.1-8b/);
    vi.restoreAllMocks();
    c = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'l40s', '--batch', 'decode:1@1', '--registry', '/nonexistent.yaml'])).toBe(1);
    expect(c.err()).toMatch(/no registry file|cannot read/);
  });
  it('price says "1 request" and prints the registry relative to the repository root', async () => {
    const c = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--batch', 'decode:1@1024', '--registry', BLIS_H200])).toBe(0);
    expect(c.out()).toMatch(/batch decode:1@1024 \(1 request\)\nregistry test\/fixtures\/registry\/blis-h200\.yaml\n/);
    vi.restoreAllMocks();
    const j = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--batch', 'decode:2@1024', '--registry', BLIS_H200, '--json'])).toBe(0);
    expect(JSON.parse(j.out()).registry).toBe('test/fixtures/registry/blis-h200.yaml');
  });
  it('a batch spec that schedules nothing is a usage error (exit 2); an impossible tp a user error (exit 1)', async () => {
    let c = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--batch', 'decode:0@1024', '--registry', BLIS_H200])).toBe(2);
    expect(c.err()).toMatch(/request count N must be at least 1/);
    vi.restoreAllMocks();
    c = capture();
    expect(await main(['node', 'stepcal', 'price', '--model', 'llama-3.1-8b', '--chip', 'h200', '--tp', '3', '--batch', 'decode:1@1024', '--registry', BLIS_H200])).toBe(1);
    expect(c.err()).toMatch(/valid tp: 1, 2, 4, 8, 16, 32/);
  });
  it('sweep --help states the default SVG path', async () => {
    const c = capture();
    expect(await main(['node', 'stepcal', 'sweep', '--help'])).toBe(0);
    expect(c.out().replace(/\s+/g, ' ')).toMatch(/default: fits\/<chip>\/sweep-<model>\.svg under the repository root/);
  });
  it('sweep writes an SVG and prints one row per batch size', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sweep-'));
    const out = path.join(dir, 's.svg');
    const c = capture();
    const code = await main(['node', 'stepcal', 'sweep', '--model', 'deepseek-v3', '--chip', 'h200', '--tp', '8', '--registry', BLIS_H200, '--batches', '1,4,256', '--out', out, '--json']);
    expect(code).toBe(0);
    const j = JSON.parse(c.out());
    expect(j.rows.map((r: { batch: number }) => r.batch)).toEqual([1, 4, 256]);
    expect(j.rows[0].price.bottleneck).toBe('host');
    expect(j.rows[2].price.bottleneck).toBe('hbm');
    expect(readFileSync(out, 'utf8')).toMatch(/^<svg[\s\S]*NoOverlap[\s\S]*CMOverlap[\s\S]*<\/svg>\n$/);
    expect(j.rows[2].price.compute_memory_overlap_us).toBeLessThanOrEqual(j.rows[2].price.no_overlap_us);
    vi.restoreAllMocks();
    const t = capture();
    expect(await main(['node', 'stepcal', 'sweep', '--model', 'llama-3.1-8b', '--chip', 'h200', '--registry', BLIS_H200, '--batches', '1,8', '--out', out])).toBe(0);
    expect(t.out()).toMatch(/NoOverlap_us CMOverlap_us Overlap_us/);
  });
});
