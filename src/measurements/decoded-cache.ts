/**
 * A cache of decoded measurement tables (issue 17, `fit all` ≤ 1.9 s): the rows `parseCanonicalCsv`
 * gives for a stored file, kept as typed columns in `.cache/measurements/` (git-ignored) under a key
 * made of the file's sha256 and a hash of the decoding code, and a marker per (file, chip datasheet,
 * units-check code) that the units check passed. Reading a table from it is gunzip + CSV parse + units
 * check replaced by one file read and one object literal per row.
 *
 * Never required for correctness: a missing, unreadable or malformed entry is decoded from the file
 * as before (and stored again); any change to the file's bytes, to the decoding or units-check
 * modules (followed through their relative imports), or to the chip's datasheet is a different key.
 * A table whose rows are not all the same keys with number or string values, each column of one type,
 * is not stored (it is decoded every time). `STEPCAL_NO_MEASUREMENT_CACHE=1` turns the cache off.
 * A cache folder that cannot be written is ignored.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { REPO_ROOT } from '../core/catalog/chip.ts';

/** Where entries are kept (beside the tests' `.cache/refit/`). */
export const DECODED_CACHE_DIR = path.join(REPO_ROOT, '.cache', 'measurements');
const MAGIC = 'stepcal-decoded-1\n';

/** One column's stored form: int32 or float64 values, or string ids into `dict`. */
interface ColumnHead {
  kind: 'i32' | 'f64' | 'text';
  dict?: string[];
}
interface EntryHead {
  keys: string[];
  rows: number;
  cols: ColumnHead[];
}

const codeKeys = new Map<string, string>();
/**
 * sha256 of the source of `entry` and every module it imports relatively, transitively (in dist/ the
 * built .js, from source the .ts): any edit to how a table is decoded or checked changes the key.
 */
function codeKey(entry: string): string {
  let key = codeKeys.get(entry);
  if (key !== undefined) return key;
  const hash = createHash('sha256').update(MAGIC);
  const seen = new Set<string>();
  const todo = [fileURLToPath(new URL(entry + path.extname(fileURLToPath(import.meta.url)), import.meta.url))];
  while (todo.length) {
    const file = todo.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const text = readFileSync(file, 'utf8');
    hash.update(`${path.basename(file)}\0${text}\0`);
    for (const m of text.matchAll(/(?:\bfrom|\bimport\(?)\s*['"](\.{1,2}\/[^'"]+)['"]/g))
      todo.push(path.resolve(path.dirname(file), m[1]!));
  }
  key = hash.digest('hex').slice(0, 16);
  codeKeys.set(entry, key);
  return key;
}

const enabled = () => process.env.STEPCAL_NO_MEASUREMENT_CACHE !== '1';

/**
 * The decoded rows of the table with content hash `sha256` (of every file read, in order): from the
 * cache when stored, else `decode()` (then stored when its rows fit the cache's form).
 * @throws whatever `decode` throws (a bad row's InputError); the cache itself never throws.
 */
export function cachedRows<R>(sha256: string, decode: () => R[]): R[] {
  if (!enabled()) return decode();
  const file = path.join(DECODED_CACHE_DIR, `${keyOf(sha256)}-${codeKey('./store')}.rows`);
  const hit = readEntry<R>(file);
  if (hit) return hit;
  const rows = decode();
  const bytes = encodeRows(rows as unknown as ReadonlyArray<Record<string, unknown>>);
  if (bytes) writeEntry(file, Buffer.concat([bytes, digestOf(bytes)]));
  return rows;
}

/** The entry names' prefix for a table key (every file's hash counts, however many the key joins). */
export const keyOf = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 32);

/** Length of the sha256 trailer each `.rows` entry ends with (of the bytes before it). */
const DIGEST_BYTES = 32;
const digestOf = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest();

/**
 * Run `check` (a units check that throws on a bad table) unless it already passed for this table
 * (`sha256`), this chip datasheet (`chipJson`) and this units-check code; remember a pass.
 */
export function cachedCheck(sha256: string, chipJson: string, check: () => void): void {
  if (!enabled()) {
    check();
    return;
  }
  const chipKey = createHash('sha256').update(chipJson).digest('hex').slice(0, 16);
  const file = path.join(DECODED_CACHE_DIR, `${keyOf(sha256)}-${chipKey}-${codeKey('./units')}.units-ok`);
  if (existsSync(file)) return;
  check();
  writeEntry(file, Buffer.from('ok\n'));
}

function writeEntry(file: string, bytes: Uint8Array): void {
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
  } catch {
    // a read-only or full cache folder: the next run decodes again
  }
}

/** The typed form of `rows`, or undefined when they do not fit it (mixed keys, a non-number non-string value). */
export function encodeRows(rows: ReadonlyArray<Record<string, unknown>>): Uint8Array | undefined {
  const keys = rows.length ? Object.keys(rows[0]!) : [];
  const cols: ColumnHead[] = [];
  const parts: Uint8Array[] = [];
  for (const key of keys) {
    const col = encodeColumn(rows, key);
    if (!col) return undefined;
    cols.push(col.head);
    parts.push(col.bytes);
  }
  for (const row of rows) {
    const own = Object.keys(row);
    if (own.length !== keys.length || own.some((k, i) => k !== keys[i])) return undefined;
  }
  const head: EntryHead = { keys, rows: rows.length, cols };
  const json = Buffer.from(JSON.stringify(head), 'utf8');
  const pre = Buffer.alloc(align8(MAGIC.length + 4 + json.length));
  pre.write(MAGIC, 0, 'latin1');
  pre.writeUInt32LE(json.length, MAGIC.length);
  json.copy(pre, MAGIC.length + 4);
  return Buffer.concat([pre, ...parts.map((p) => padded(p))]);
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;
const padded = (b: Uint8Array) => (b.length % 8 ? Buffer.concat([b, Buffer.alloc(align8(b.length) - b.length)]) : b);
const isInt32 = (v: number) => (v | 0) === v && !Object.is(v, -0);

/** One column as int32s, float64s or dictionary ids (uint16 up to 65,535 strings, else uint32). */
function encodeColumn(
  rows: ReadonlyArray<Record<string, unknown>>,
  key: string,
): { head: ColumnHead; bytes: Uint8Array } | undefined {
  const n = rows.length;
  const first = rows[0]![key];
  if (typeof first === 'number') {
    let ints = true;
    for (let i = 0; i < n; i++) {
      const v = rows[i]![key];
      if (typeof v !== 'number') return undefined;
      if (ints && !isInt32(v)) ints = false;
    }
    const out = ints ? new Int32Array(n) : new Float64Array(n);
    for (let i = 0; i < n; i++) out[i] = rows[i]![key] as number;
    return { head: { kind: ints ? 'i32' : 'f64' }, bytes: new Uint8Array(out.buffer) };
  }
  if (typeof first !== 'string') return undefined;
  const ids = new Map<string, number>();
  const idOf = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    const v = rows[i]![key];
    if (typeof v !== 'string') return undefined;
    let id = ids.get(v);
    if (id === undefined) {
      id = ids.size;
      ids.set(v, id);
    }
    idOf[i] = id;
  }
  const narrow = ids.size <= 0xffff ? Uint16Array.from(idOf) : idOf;
  return { head: { kind: 'text', dict: [...ids.keys()] }, bytes: new Uint8Array(narrow.buffer) };
}

/** The rows stored in `file`, or undefined when it is absent or not a well-formed entry. */
function readEntry<R>(file: string): R[] | undefined {
  let buf: Buffer;
  try {
    buf = readFileSync(file);
  } catch {
    return undefined;
  }
  // A flipped bit anywhere (a bad disk, an edit) fails the trailer: the table is decoded again.
  if (buf.length < DIGEST_BYTES) return undefined;
  const body = buf.subarray(0, buf.length - DIGEST_BYTES);
  if (!digestOf(body).equals(buf.subarray(buf.length - DIGEST_BYTES))) return undefined;
  try {
    return decodeRows<R>(body);
  } catch {
    return undefined;
  }
}

/** Rows from an entry's bytes (`encodeRows`' form). @throws on a malformed entry. */
export function decodeRows<R>(stored: Uint8Array): R[] {
  // Typed views need 8-byte-aligned offsets: copy a pooled (small) buffer to its own ArrayBuffer.
  const buf = stored.byteOffset % 8 ? Uint8Array.from(stored) : stored;
  if (Buffer.from(buf.buffer, buf.byteOffset, MAGIC.length).toString('latin1') !== MAGIC)
    throw new Error('not an entry');
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const jsonLength = view.getUint32(MAGIC.length, true);
  const at = buf.byteOffset + MAGIC.length + 4;
  const head = JSON.parse(Buffer.from(buf.buffer, at, jsonLength).toString('utf8')) as EntryHead;
  const n = head.rows;
  let pos = buf.byteOffset + align8(MAGIC.length + 4 + jsonLength);
  const columns: Array<Int32Array | Float64Array | Uint16Array | Uint32Array> = [];
  for (const col of head.cols) {
    const arr =
      col.kind === 'i32'
        ? new Int32Array(buf.buffer, pos, n)
        : col.kind === 'f64'
          ? new Float64Array(buf.buffer, pos, n)
          : col.dict!.length <= 0xffff
            ? new Uint16Array(buf.buffer, pos, n)
            : new Uint32Array(buf.buffer, pos, n);
    pos += align8(arr.byteLength);
    columns.push(arr);
  }
  if (pos > buf.byteOffset + buf.byteLength) throw new Error('truncated entry');
  return rowMaker(head)(
    columns,
    head.cols.map((c) => c.dict ?? []),
    n,
  ) as R[];
}

type RowMaker = (
  columns: ReadonlyArray<ArrayLike<number>>,
  dicts: ReadonlyArray<readonly string[]>,
  n: number,
) => unknown[];
const makers = new Map<string, RowMaker>();
/** A function building every row as one object literal with the entry's keys in order (compiled once per key list). */
function rowMaker(head: EntryHead): RowMaker {
  const sig = JSON.stringify(head.keys.map((k, i) => [k, head.cols[i]!.kind === 'text']));
  let make = makers.get(sig);
  if (!make) {
    const locals = head.keys.map((_, c) => `const c${c} = columns[${c}], d${c} = dicts[${c}];`).join('\n');
    const fields = head.keys
      .map((k, c) => `${JSON.stringify(k)}: ${head.cols[c]!.kind === 'text' ? `d${c}[c${c}[i]]` : `c${c}[i]`}`)
      .join(', ');
    make = new Function(
      'columns',
      'dicts',
      'n',
      `${locals}\nconst out = new Array(n);\nfor (let i = 0; i < n; i++) out[i] = { ${fields} };\nreturn out;`,
    ) as RowMaker;
    makers.set(sig, make);
  }
  return make;
}
