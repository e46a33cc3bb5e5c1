/**
 * The block-YAML subset reader (src/core/schemas/block-yaml.ts) against the `yaml` package it stands in
 * for: every shipped registry reads the same through both; random documents written the way the
 * registry writer writes them read the same or are left to the full parser (undefined), never
 * differently; texts outside the subset (comments, anchors, quoting styles, numbers the core schema
 * reads specially, duplicate keys) are left to the full parser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { parseBlockYaml } from '../../src/core/schemas/block-yaml.ts';
import { parseCoefficientSets, stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';

const full = (text: string) => parseAllDocuments(text).map((d) => d.toJS());
/** How the registry writer stringifies (registry-yaml.ts `stringifyCoefficientSets`). */
const write = (v: unknown) => stringify(v, { lineWidth: 0, aliasDuplicateObjects: false });

describe('parseBlockYaml', () => {
  const dir = path.join(REPO_ROOT, 'registry');
  const files = [
    ...readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => path.join(dir, f)),
    ...readdirSync(path.join(dir, 'engines')).map((f) => path.join(dir, 'engines', f)),
  ];

  it.each(files.map((f) => [path.relative(REPO_ROOT, f), f]))('%s reads as the full parser reads it', (_, f) => {
    const text = readFileSync(f, 'utf8');
    const fast = parseBlockYaml(text);
    expect(fast).toBeDefined();
    expect(fast).toStrictEqual(full(text));
  });

  it('a registry round-trips through the writer and the subset reader to the same sets', () => {
    const text = readFileSync(path.join(dir, 'h100.yaml'), 'utf8');
    const sets = parseCoefficientSets(text, 'h100.yaml');
    expect(stringifyCoefficientSets(sets)).toBe(text);
    expect(parseBlockYaml(stringifyCoefficientSets(sets))).toStrictEqual(full(text));
  });

  it('hand-worked values: numbers, booleans, null, quoted strings, nested sequences of mappings', () => {
    const text =
      'kind: X\nn: 12\nf: -0.5e-3\nt: true\nF: False\nz: null\nq: "a \\"b\\": c # d"\ns: 2026-11-29\n' +
      'list:\n  - a\n  - k: 1\n    j:\n      - 2\n  -\n    m: x\ne: []\no: {}\nempty:\n---\nkind: Y\n';
    const want = [
      {
        kind: 'X',
        n: 12,
        f: -0.0005,
        t: true,
        F: false,
        z: null,
        q: 'a "b": c # d',
        s: '2026-11-29',
        list: ['a', { k: 1, j: [2] }, { m: 'x' }],
        e: [],
        o: {},
        empty: null,
      },
      { kind: 'Y' },
    ];
    expect(full(text)).toStrictEqual(want);
    expect(parseBlockYaml(text)).toStrictEqual(want);
  });

  it.each([
    ['a comment', 'a: 1 # one\n'],
    ['a comment line', '# head\na: 1\n'],
    ['an anchor and alias', 'a: &x 1\nb: *x\n'],
    ['a tag', 'a: !!str 1\n'],
    ['single quotes', "a: 'it''s'\n"],
    ['a block scalar', 'a: |\n  line\n'],
    ['a multi-line plain scalar', 'a: one\n  two\n'],
    ['a flow sequence', 'a: [1, 2]\n'],
    ['a hexadecimal integer', 'a: 0x1F\n'],
    ['an octal integer', 'a: 0o17\n'],
    ['infinity', 'a: .inf\n'],
    ['a duplicate key', 'a: 1\na: 2\n'],
    ['a tab', 'a:\t1\n'],
    ['CRLF line ends', 'a: 1\r\n'],
    ['no final newline', 'a: 1'],
    ['a YAML-only escape', 'a: "\\x41"\n'],
    ['a key the core schema reads as a boolean', 'true: 1\n'],
    ['a 16-digit integer', 'a: 1234567890123456\n'],
    ['a blank line', 'a: 1\n\nb: 2\n'],
    ['a directive end with content', '--- a: 1\n'],
  ])('leaves %s to the full parser', (_, text) => {
    expect(parseBlockYaml(text)).toBeUndefined();
  });

  it('random documents written as the registry writer writes them read the same, or are left to the full parser', () => {
    const key = fc.stringMatching(/^[a-z_][a-z0-9_]{0,6}$/);
    const leaf = fc.oneof(
      fc.string({ maxLength: 12 }),
      fc.constantFrom('1e5', '0x10', 'true', 'null', '~', ' lead', 'trail ', 'a: b', 'a #b', '- x', '"q"', "'s'", '12'),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
    );
    const { tree } = fc.letrec((tie) => ({
      tree: fc.oneof({ depthSize: 'small' }, leaf, tie('list'), tie('map')),
      list: fc.array(tie('tree'), { maxLength: 4 }),
      map: fc.dictionary(key, tie('tree'), { maxKeys: 4 }),
    }));
    let read = 0;
    fc.assert(
      fc.property(
        fc.array(fc.dictionary(key, tree, { minKeys: 1, maxKeys: 5 }), { minLength: 1, maxLength: 3 }),
        (docs) => {
          const text = docs.map(write).join('---\n');
          const fast = parseBlockYaml(text);
          if (fast !== undefined) {
            read++;
            expect(fast).toStrictEqual(full(text));
          }
        },
      ),
      { numRuns: 400, seed: 17 },
    );
    // a quarter of such documents lie inside the subset (seed 17: 104 of 400), so the property is not vacuous
    expect(read).toBeGreaterThan(80);
  });
});
