/**
 * A writer for the block-style YAML subset the registry is stored in: what the `yaml` package's
 * `stringify(value, { lineWidth: 0, aliasDuplicateObjects: false })` writes, byte for byte, for a
 * value made of plain objects, arrays, finite numbers, booleans, null and one-line printable strings
 * (keys: plain words). Anything else (a multi-line string, a control character or surrogate, a key
 * that needs quoting, a sequence directly inside a sequence, a class instance, a non-finite number, a
 * string starting with a document marker) gives `undefined`, and the caller writes with the `yaml`
 * package as before. Why (issue 17): the package builds a node tree per document; on h200's 373 kB
 * registry `stringifyCoefficientSets` took ≈ 0.45 s of every `fit all` (3 % of its CPU).
 * The rules are the package's (yaml 2.x, src/stringify/stringifyString.ts `plainString` and
 * `quotedString`, stringifyNumber.ts, the core schema's tag tests); test/core/block-yaml-writer.test.ts
 * compares both on every shipped registry and on random documents. Pure.
 */

/** Thrown inside the writer when the value leaves the subset; never escapes `writeBlockYaml`. */
class OutsideSubset extends Error {}
const outside = (): never => {
  throw new OutsideSubset();
};

/** A plain scalar the package refuses (plainString: indicators, ': ', ' #', trailing ' ' or ':' ...). */
const NOT_PLAIN = /^[\n\t ,[\]{}#&*!|>'"%@`]|^[?-]$|^[?-][ \t]|[\n:][ \t]|[ \t]\n|[\n\t ]#|[\n\t :]$/;
/** The core schema's tests (null, bool, int, octal, hex, .nan/.inf, exponent and plain floats): a plain scalar matching one would not read back as a string. */
const CORE_TAGS = [
  /^(?:~|[Nn]ull|NULL)?$/,
  /^(?:[Tt]rue|TRUE|[Ff]alse|FALSE)$/,
  /^0o[0-7]+$/,
  /^[-+]?[0-9]+$/,
  /^0x[0-9a-fA-F]+$/,
  /^(?:[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$/,
  /^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+$/,
  /^[-+]?(?:\.[0-9]+|[0-9]+\.[0-9]*)$/,
];
/** Keys written plain: a word that no core tag reads as anything but a string. */
const KEY = /^[A-Za-z_][A-Za-z0-9_.\-/]*$/;

/**
 * True when `s` holds a character this writer leaves to the package: any C0 control (tab and line
 * feed included), DEL and C1 controls, a surrogate (paired or not), U+2028, U+2029 or a BOM.
 */
function awkward(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || (c >= 0xd800 && c <= 0xdfff) || c === 0x2028 || c === 0x2029)
      return true;
    if (c === 0xfeff) return true;
  }
  return false;
}

/** One string as the package writes it in block context (plain, else double- or single-quoted). */
function stringScalar(s: string): string {
  if (awkward(s) || /^(?:%|---|\.\.\.)/.test(s)) outside();
  if (!NOT_PLAIN.test(s) && !CORE_TAGS.some((t) => t.test(s))) return s;
  const hasDouble = s.includes('"');
  // quotedString: single quotes only when the text has a double quote and no single quote
  if (hasDouble && !s.includes("'")) return `'${s}'`;
  return JSON.stringify(s);
}

/** A leaf value as the package writes it, or undefined for a mapping or sequence. */
function leaf(v: unknown): string | undefined {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'string':
      return stringScalar(v);
    case 'number':
      if (!Number.isFinite(v)) outside();
      return Object.is(v, -0) ? '-0' : JSON.stringify(v);
    case 'boolean':
      return v ? 'true' : 'false';
    case 'object':
      if (Array.isArray(v)) return v.length ? undefined : '[]';
      if (Object.getPrototypeOf(v) !== Object.prototype) outside();
      return entries(v as Record<string, unknown>).length ? undefined : '{}';
    default:
      return outside();
  }
}

/** An object's [key, value] pairs the package writes (undefined values are left out). */
function entries(o: Record<string, unknown>): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const k of Object.keys(o)) {
    const v = o[k];
    if (v === undefined) continue;
    if (!KEY.test(k) || CORE_TAGS.some((t) => t.test(k))) outside();
    out.push([k, v]);
  }
  return out;
}

/** A mapping's lines at `indent` spaces; `first` is written before the first key instead of the indent. */
function mapping(o: Record<string, unknown>, indent: string, first: string, out: string[]): void {
  let pad = first;
  for (const [k, v] of entries(o)) {
    const s = leaf(v);
    if (s !== undefined) out.push(`${pad}${k}: ${s}\n`);
    else {
      out.push(`${pad}${k}:\n`);
      if (Array.isArray(v)) sequence(v, `${indent}  `, out);
      else mapping(v as Record<string, unknown>, `${indent}  `, `${indent}  `, out);
    }
    pad = indent;
  }
}

/** A sequence's lines at `indent` spaces (`- item`; a mapping item continues two columns right of the dash). */
function sequence(a: readonly unknown[], indent: string, out: string[]): void {
  for (const v of a) {
    const s = leaf(v);
    if (s !== undefined) out.push(`${indent}- ${s}\n`);
    else if (Array.isArray(v)) outside();
    else mapping(v as Record<string, unknown>, `${indent}  `, `${indent}- `, out);
  }
}

/**
 * `value` (a plain object: one YAML document) as the `yaml` package's `stringify` with `lineWidth: 0`
 * and `aliasDuplicateObjects: false` writes it, or undefined when it lies outside the subset (module
 * comment). Never throws.
 */
export function writeBlockYaml(value: Record<string, unknown>): string | undefined {
  const out: string[] = [];
  try {
    const s = leaf(value);
    if (s !== undefined) return `${s}\n`;
    mapping(value, '', '', out);
    return out.join('');
  } catch (err) {
    if (err instanceof OutsideSubset) return undefined;
    throw err;
  }
}
