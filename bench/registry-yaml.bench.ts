/**
 * Registry YAML reading (issue 17 validate; brief: our own code replaces a library on a hot path only
 * with a benchmark): src/core/schemas/block-yaml.ts's subset reader beside the `yaml` package's
 * `parseAllDocuments(...).map(toJS)` on every shipped chip registry, with the values compared; then
 * writing them back: src/core/schemas/block-yaml-writer.ts beside the package's `stringify` (the options
 * `stringifyCoefficientSets` uses), with the bytes compared.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { REPO_ROOT } from '../src/core/catalog/chip.ts';
import { parseBlockYaml } from '../src/core/schemas/block-yaml.ts';
import { writeBlockYaml } from '../src/core/schemas/block-yaml-writer.ts';

/** Median ms of `runs` calls of `f` (after one warm-up call). */
function medianMs(f: () => unknown, runs = 5): number {
  f();
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    f();
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return t.sort((a, b) => a - b)[Math.floor(runs / 2)]!;
}

export default async function bench(): Promise<void> {
  const dir = path.join(REPO_ROOT, 'registry');
  const texts = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => readFileSync(path.join(dir, f), 'utf8'));
  const bytes = texts.reduce((a, t) => a + t.length, 0);
  const full = () => texts.map((t) => parseAllDocuments(t).map((d) => d.toJS()));
  const subset = () => texts.map((t) => parseBlockYaml(t));
  const same = isDeepStrictEqual(full(), subset());
  const [a, b] = [medianMs(full, 3), medianMs(subset)];
  process.stdout.write(
    `registry YAML, ${texts.length} chip registries (${(bytes / 1e6).toFixed(2)} MB): yaml package ${a.toFixed(0)} ms, ` +
      `block-yaml ${b.toFixed(1)} ms (${(a / b).toFixed(0)}× faster); same values: ${same ? 'yes' : 'NO'}\n`,
  );
  const docs = subset().flat() as Record<string, unknown>[];
  const pkg = () => docs.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false }));
  const ours = () => docs.map((d) => writeBlockYaml(d));
  const sameBytes = isDeepStrictEqual(pkg(), ours());
  const [w, o] = [medianMs(pkg, 3), medianMs(ours)];
  process.stdout.write(
    `  writing the same ${docs.length} documents: yaml package ${w.toFixed(0)} ms, block-yaml-writer ${o.toFixed(1)} ms ` +
      `(${(w / o).toFixed(0)}× faster); same bytes: ${sameBytes ? 'yes' : 'NO'}\n`,
  );
}
