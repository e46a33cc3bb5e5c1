/**
 * Source hygiene of the pricer: every KNOWN DIVERGENCE in docs/pricer.md is marked in the code (pricer,
 * laws, and the catalog's config→graph deriver) and
 * vice versa. Dead exports anywhere are found by knip (`npm run lint`, part of `npm test`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}
const pricerFiles = [
  ...tsFiles(path.join(REPO_ROOT, 'src', 'pricer')),
  ...tsFiles(path.join(REPO_ROOT, 'src', 'core', 'laws')),
  // The config→graph deriver decides what the pricer sees (e.g. a V copy priced where V = K), so its
  // departures are divergences of the price too.
  ...tsFiles(path.join(REPO_ROOT, 'src', 'core', 'catalog')),
];

describe('KNOWN DIVERGENCE markers', () => {
  const doc = readFileSync(path.join(REPO_ROOT, 'docs', 'pricer.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## KNOWN DIVERGENCEs'), doc.indexOf('\nNot modelled:'));
  const listed = new Set([...section.matchAll(/^(\d+)\. \*\*/gm)].map((m) => Number(m[1])));
  // A retired divergence keeps its number ("32. (retired, …"): it counts for the numbering, not for the markers.
  const retired = new Set([...section.matchAll(/^(\d+)\. \(retired/gm)].map((m) => Number(m[1])));
  const code = pricerFiles.map((f) => readFileSync(f, 'utf8')).join('\n');
  const marked = new Set([...code.matchAll(/KNOWN DIVERGENCE (\d+)/g)].map((m) => Number(m[1])));
  it('the doc lists 1..n without gaps (retired numbers included)', () => {
    const all = [...listed, ...retired].sort((a, b) => a - b);
    expect(all).toEqual([...Array(all.length).keys()].map((i) => i + 1));
  });
  it('every listed divergence is marked in src/pricer, src/core/laws or src/core/catalog and every marker is listed', () => {
    expect([...marked].sort((a, b) => a - b)).toEqual([...listed].sort((a, b) => a - b));
  });
  it('no unnumbered marker', () => {
    expect(code.match(/KNOWN DIVERGENCE(?! \d| n`)/g)).toBeNull();
  });
});
