import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { loadUsableRegistry } from '../../src/registry/validate.ts';

const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-usable-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const committed = readFileSync(path.join(REPO_ROOT, 'registry', 'h200.yaml'), 'utf8');
/** h200's registry with hbm_derate set to `v` (the committed 0.8576 otherwise). */
const withDerate = (v: string) => committed.replace(/(- hbm_derate:\n\s+value: )0\.8576\n/, `$1${v}\n`);

describe('loadUsableRegistry: the usability check memoised on the file text', () => {
  it('an edited file is checked afresh: a bad hbm_derate is refused after a clean load of the same path', () => {
    const file = path.join(tmp, 'h200.yaml');
    expect(withDerate('1.7')).not.toBe(committed);
    writeFileSync(file, committed);
    const sets = loadUsableRegistry(file, 'h200');
    expect(sets.reduce((n, s) => n + s.coefficients.length, 0)).toBeGreaterThan(200);
    writeFileSync(file, withDerate('1.7'));
    expect(() => loadUsableRegistry(file, 'h200')).toThrow(
      /not usable for h200: 2 error\(s\)[\s\S]*hbm_derate 1\.7 is outside \(0, 1\]/,
    );
    // A refusal stores nothing: asked again, the same file is refused again.
    expect(() => loadUsableRegistry(file, 'h200')).toThrow(/hbm_derate 1\.7/);
    writeFileSync(file, committed);
    expect(loadUsableRegistry(file, 'h200')).toEqual(sets);
  });

  it('each call returns its own copy: mutating one does not reach the next', () => {
    const file = path.join(tmp, 'copy.yaml');
    writeFileSync(file, committed);
    const a = loadUsableRegistry(file, 'h200');
    a[0]!.coefficients.length = 0;
    expect(loadUsableRegistry(file, 'h200')[0]!.coefficients.length).toBeGreaterThan(0);
  });
});
