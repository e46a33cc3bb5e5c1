/**
 * A reader for the block-style YAML subset that `stringifyCoefficientSets` writes (the `yaml` package's
 * `stringify` with `lineWidth: 0` and no aliases): documents split by `---` lines, block mappings and
 * block sequences indented by spaces, plain and one-line double-quoted scalars, `[]` and `{}`. It gives
 * what `yaml`'s `parseAllDocuments(text).map((d) => d.toJS())` gives (YAML 1.2 core schema) for every
 * text inside the subset, and `undefined` for any text outside it (a comment, a tab, a single-quoted,
 * block, multi-line or flow scalar, an anchor, a tag, a duplicate key, a plain scalar the core schema
 * reads as anything but a string, decimal number, boolean or null...), so the caller falls back to the
 * full parser, which also reports the errors. Why: the full parser spends ~2.5 µs per byte building
 * a syntax tree; a 330 kB registry took ~0.6 s of a `validate` run that reads two (issue 17). Pure.
 * test/core/block-yaml.test.ts checks it against `yaml` on every shipped registry and on random
 * documents.
 */

/** Thrown inside the reader when the text leaves the subset; never escapes `parseBlockYaml`. */
class OutsideSubset extends Error {}

const outside = (): never => {
  throw new OutsideSubset();
};

/** Plain scalars the core schema resolves to something this reader does not produce exactly: bail out. */
const SPECIAL_PLAIN = /^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)|0o[0-7]+|0x[0-9a-fA-F]+)$/;
const NULL_PLAIN = /^(?:~|null|Null|NULL)$/;
const TRUE_PLAIN = /^(?:true|True|TRUE)$/;
const FALSE_PLAIN = /^(?:false|False|FALSE)$/;
const INT_PLAIN = /^[-+]?[0-9]+$/;
const FLOAT_PLAIN = /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$/;
/** A one-line double-quoted scalar whose escapes are JSON's (each means the same in YAML). */
const JSON_QUOTED = /^"(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"$/;
/**
 * True when `text` holds a character this reader leaves to the full parser wherever it appears: a tab,
 * CR, BOM, another line break (U+0085, U+2028, U+2029) or any other C0/C1 control but LF.
 */
function awkward(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if ((c < 0x20 && c !== 0x0a) || (c >= 0x7f && c <= 0x9f) || c === 0xfeff || c === 0x2028 || c === 0x2029)
      return true;
  }
  return false;
}
/** A mapping key this reader accepts: a plain word the core schema keeps a string. */
const KEY = /^[A-Za-z_][A-Za-z0-9_.\-/]*$/;
/** First characters that make a scalar anything but plain (YAML indicators). */
const INDICATOR = /^[[\]{}&*!|>'"%@`#,?:-]/;

/** One scalar token (the rest of a line), resolved as the core schema would. */
function scalar(s: string): unknown {
  if (s === '[]') return [];
  if (s === '{}') return {};
  if (s.startsWith('"')) {
    if (!JSON_QUOTED.test(s)) outside();
    return JSON.parse(s) as string;
  }
  if (s.endsWith(' ') || s.endsWith(':') || s.includes(': ') || s.includes(' #')) outside();
  if (INDICATOR.test(s) && !/^-[0-9.]/.test(s)) outside();
  if (NULL_PLAIN.test(s)) return null;
  if (TRUE_PLAIN.test(s)) return true;
  if (FALSE_PLAIN.test(s)) return false;
  if (SPECIAL_PLAIN.test(s)) outside();
  if (INT_PLAIN.test(s)) return s.replace(/^[-+]/, '').length > 15 ? outside() : Number(s);
  if (FLOAT_PLAIN.test(s)) return Number(s);
  return s;
}

/** The lines of one document and a cursor; each line is split into its indent and its content. */
class Lines {
  i = 0;
  constructor(
    private readonly indents: number[],
    private readonly contents: string[],
  ) {}
  get done(): boolean {
    return this.i >= this.contents.length;
  }
  indent(): number {
    return this.done ? -1 : this.indents[this.i]!;
  }
  content(): string {
    return this.contents[this.i]!;
  }
  /** Replace the current line (a sequence item opening a mapping continues at `indent`). */
  rewrite(indent: number, content: string): void {
    this.indents[this.i] = indent;
    this.contents[this.i] = content;
  }
}

const isItem = (c: string): boolean => c === '-' || c.startsWith('- ');

/** The node whose first line is the current one, at indent `n`. */
function node(L: Lines, n: number): unknown {
  return isItem(L.content()) ? sequence(L, n) : mapping(L, n);
}

/** The value after `key:` with nothing on its line: a nested node, a sequence at the key's indent, or null. */
function nested(L: Lines, n: number): unknown {
  if (L.done) return null;
  const m = L.indent();
  if (m > n) return node(L, m);
  if (m === n && isItem(L.content())) return sequence(L, n);
  return null;
}

/** A scalar on the current line; a deeper line after it would continue it (multi-line plain): bail out. */
function lineScalar(L: Lines, s: string, n: number): unknown {
  L.i++;
  if (L.indent() > n) outside();
  return scalar(s);
}

function mapping(L: Lines, n: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  while (L.indent() === n && !isItem(L.content())) {
    const c = L.content();
    const colon = c.indexOf(':');
    if (colon <= 0) outside();
    const key = c.slice(0, colon);
    if (!KEY.test(key) || key === '__proto__' || NULL_PLAIN.test(key) || TRUE_PLAIN.test(key) || FALSE_PLAIN.test(key))
      outside();
    if (Object.hasOwn(out, key)) outside();
    const rest = c.slice(colon + 1);
    if (rest === '') {
      L.i++;
      out[key] = nested(L, n);
    } else if (rest.startsWith(' ') && rest.length > 1 && rest[1] !== ' ') {
      out[key] = lineScalar(L, rest.slice(1), n);
    } else outside();
  }
  if (L.indent() > n) outside();
  return out;
}

function sequence(L: Lines, n: number): unknown[] {
  const out: unknown[] = [];
  while (L.indent() === n && isItem(L.content())) {
    const c = L.content();
    if (c === '-') {
      L.i++;
      out.push(L.indent() > n ? node(L, L.indent()) : null);
      continue;
    }
    const rest = c.slice(2);
    if (rest.startsWith(' ') || isItem(rest)) outside();
    const colon = rest.indexOf(':');
    if (colon > 0 && KEY.test(rest.slice(0, colon)) && (rest.length === colon + 1 || rest[colon + 1] === ' ')) {
      // "- key: value": a mapping whose lines sit two columns right of the dash
      L.rewrite(n + 2, rest);
      out.push(mapping(L, n + 2));
    } else out.push(lineScalar(L, rest, n));
  }
  if (L.indent() > n) outside();
  return out;
}

/** One document's lines (no `---`) → its value. */
function documentValue(lines: string[]): unknown {
  if (lines.length === 0) outside();
  const indents: number[] = [];
  const contents: string[] = [];
  for (const line of lines) {
    const content = line.trimStart();
    if (content === '' || content.startsWith('#') || content.endsWith(' ')) outside();
    indents.push(line.length - content.length);
    contents.push(content);
  }
  const L = new Lines(indents, contents);
  if (L.indent() !== 0) outside();
  const v = node(L, 0);
  if (!L.done) outside();
  return v;
}

/**
 * The JS value of every document of `text` when it lies inside the subset (module comment), else
 * undefined. Never throws.
 */
export function parseBlockYaml(text: string): unknown[] | undefined {
  if (!text.endsWith('\n') || awkward(text)) return undefined;
  const docs: unknown[] = [];
  let cur: string[] = [];
  try {
    const lines = text.split('\n');
    lines.pop();
    for (const line of lines) {
      if (line === '---') {
        docs.push(documentValue(cur));
        cur = [];
      } else if (line.startsWith('---') || line.startsWith('...')) return undefined;
      else cur.push(line);
    }
    docs.push(documentValue(cur));
    return docs;
  } catch (err) {
    if (err instanceof OutsideSubset) return undefined;
    throw err;
  }
}
