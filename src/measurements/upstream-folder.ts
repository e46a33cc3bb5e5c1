/**
 * One complete upstream chip folder (ai-dynamo/aiconfigurator
 * `aic-core/src/aiconfigurator_core/systems/data/<sku>/<op_category>/<framework>/<version>/<table>.parquet`,
 * or the shared CSV copies `<sku>/<table>/<framework>-<version>/<table>.csv`) → which file of each
 * table stepcal imports (one lane per table), and every other file with a counted reason (issue 15
 * item 2). Reads only directory listings, `reuse.yaml` pointers and Parquet footers (row counts); the
 * importer reads the chosen tables.
 *
 * Lane choice (issue 15 item 1): per table, the newest vLLM version folder that holds the table
 * (NCCL tables: the newest NCCL version), versions in PEP 440 order; a `--lane` override wins. Where
 * no vLLM lane holds a table, the newest SGLang, then TRT-LLM, lane is taken and the choice says so.
 * The four MLA tables (mla-import.ts MLA_TABLES) follow the same rule; the SGLang WideEP MLA tables are
 * counted `unfitted_table` with why (MLA_NOT_READ).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { UserError } from '../core/errors.ts';
import { AIC_TABLES, type AicTable } from './aiconfigurator.ts';
import { MLA_NOT_READ } from './mla-import.ts';

/** One table file found, with the lane its folder names. */
export interface LaneFile {
  file: string;
  table: AicTable;
  /** `<framework>-<version>` as the importer labels rows (`vllm-0.24.0`, `nccl-2.29.2`). */
  lane: string;
  framework: string;
  version: string;
  /** Data rows (Parquet footer or CSV line count). */
  rows: number;
}

/** A file read for information only or skipped, with why. */
export interface SkippedFile {
  file: string;
  /**
   * `refused_table`: a chosen table of an optional family that its import refused (conflicting repeats,
   * a units slip, a bad cell); onboarding leaves that table out and says why (src/registry/onboard.ts).
   */
  kind: 'other_lane' | 'reuse_pointer' | 'unfitted_table' | 'metadata' | 'not_a_table' | 'refused_table';
  reason: string;
  rows?: number;
}

/** The lanes of one table and the one chosen. */
export interface TableLanes {
  table: AicTable;
  lanes: LaneFile[];
  chosen: LaneFile;
  why: string;
}

export interface FolderScan {
  dir: string;
  tables: TableLanes[];
  skipped: SkippedFile[];
  /** Counts per skip kind (the report's "read or skipped" line). */
  counts: Record<SkippedFile['kind'], number>;
}

/** Framework preference when no override is given: vLLM first (stepcal's pricing follows vLLM's scheduler). */
const FRAMEWORK_ORDER = ['vllm', 'sglang', 'trtllm'];

/**
 * PEP 440 order of two version strings (`0.5.6.post2 < 0.5.9 < 0.5.10`, `1.3.0rc5 < 1.3.0rc20 < 1.3.0`,
 * `0.1.dev19262` before `0.1`): negative when a < b. Unparseable tails compare as text. Pure.
 */
export function compareVersions(a: string, b: string): number {
  const ka = versionKey(a);
  const kb = versionKey(b);
  for (let i = 0; i < Math.max(ka.length, kb.length); i++) {
    const d = (ka[i] ?? 0) - (kb[i] ?? 0);
    if (d !== 0) return d;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sort key: release parts padded to 4, then phase (dev 0, a 1, b 2, rc 3, final 4, post 5) and its number. */
function versionKey(v: string): number[] {
  const m = /^(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.?post(\d+))?(?:\.?dev(\d+))?/.exec(v);
  if (!m) return [];
  const rel = m[1]!.split('.').map(Number);
  while (rel.length < 4) rel.push(0);
  const pre = m[2] ? { a: 1, b: 2, rc: 3 }[m[2] as 'a' | 'b' | 'rc'] : undefined;
  if (m[5] !== undefined && !m[2] && !m[4]) return [...rel, 0, Number(m[5])];
  if (pre !== undefined) return [...rel, pre, Number(m[3])];
  if (m[4] !== undefined) return [...rel, 5, Number(m[4])];
  return [...rel, 4, 0];
}

type FooterRows = (ab: ArrayBuffer) => bigint | number;

/** Data rows of a table file without decoding it (Parquet footer `num_rows`; CSV lines − header; -1 for .gz). */
function rowCount(file: string, footerRows: FooterRows): number {
  if (file.endsWith('.gz')) return -1;
  const buf = readFileSync(file);
  if (file.endsWith('.parquet')) {
    try {
      return Number(footerRows(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer));
    } catch (e) {
      // A truncated or foreign file is a data error of that file, not an internal one.
      throw new UserError(
        `${file}: not a readable Parquet file (${(e as Error).message}); re-copy it from the upstream folder`,
      );
    }
  }
  let n = 0;
  for (const b of buf) if (b === 10) n++;
  return Math.max(0, n - 1);
}

/** Where a table file's lane comes from: its folders (upstream or shared layout). */
function laneOfPath(file: string, table: string): { framework: string; version: string } {
  const parts = path.resolve(file).split(path.sep);
  const n = parts.length;
  if (parts[n - 3] === table) {
    const m = /^([a-z]+)-(.+)$/.exec(parts[n - 2] ?? '');
    if (m) return { framework: m[1]!, version: m[2]! };
  }
  const version = parts[n - 2] ?? '';
  const framework = (parts[n - 3] ?? '').toLowerCase();
  if (/^\d/.test(version) && /^[a-z]+$/.test(framework)) return { framework, version };
  return { framework: 'unknown', version: 'unknown' };
}

/** A reuse pointer's text as one reason (`gemm_perf from 0.24.0: <why>`). */
function reuseReason(file: string): string {
  let doc: { reuse?: Array<{ table?: string; from_version?: string; reason?: string }> } | undefined;
  try {
    doc = parseYaml(readFileSync(file, 'utf8')) as typeof doc;
  } catch {
    return 'reuse pointer (unreadable YAML); no rows of its own';
  }
  const items = (doc?.reuse ?? []).map((r) => `${r.table ?? '?'} from version ${r.from_version ?? '?'}`);
  return `reuse pointer: ${items.join(', ') || 'no entries'} (upstream borrows another version's rows; they are counted once, in the lane that holds them)`;
}

function walk(dir: string, out: string[]): void {
  for (const name of readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(p);
  }
}

/**
 * Scan a chip folder (module comment).
 * @param laneOverrides `lane` (every table that has it) or `table=lane`, e.g. `gemm_perf=sglang-0.5.14`.
 * @throws UserError when `dir` is not a folder, or an override names a lane no table has.
 */
export async function scanUpstreamFolder(dir: string, laneOverrides: readonly string[] = []): Promise<FolderScan> {
  let isDir = false;
  try {
    isDir = statSync(dir).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) throw new UserError(`--data ${dir}: not a directory`);
  const { parquetMetadata } = await import('hyparquet');
  const footerRows: FooterRows = (ab) => parquetMetadata(ab).num_rows;
  const files: string[] = [];
  walk(dir, files);
  const found: LaneFile[] = [];
  const skipped: SkippedFile[] = [];
  for (const f of files) {
    const base = path.basename(f);
    const m = /^(.+?)\.(csv|csv\.gz|parquet)$/.exec(base);
    if (base === 'reuse.yaml') skipped.push({ file: f, kind: 'reuse_pointer', reason: reuseReason(f) });
    else if (base === 'collection_meta.yaml')
      skipped.push({ file: f, kind: 'metadata', reason: 'collection metadata (provenance text; no rows)' });
    else if (m && m[1]! in AIC_TABLES) {
      const table = m[1] as AicTable;
      const { framework, version } = laneOfPath(f, table);
      const fw = table === 'nccl_perf' ? 'nccl' : framework;
      found.push({ file: f, table, lane: `${fw}-${version}`, framework: fw, version, rows: rowCount(f, footerRows) });
    } else if (m) {
      const cat = path.basename(path.dirname(path.dirname(path.dirname(f))));
      const why = MLA_NOT_READ[m[1]!] ?? "an op stepcal does not fit yet (not in the importer's tables)";
      skipped.push({
        file: f,
        kind: 'unfitted_table',
        reason: `${cat}/${m[1]}: ${why}`,
        rows: rowCount(f, footerRows),
      });
    } else skipped.push({ file: f, kind: 'not_a_table', reason: 'not an upstream table, pointer or metadata file' });
  }
  const tables = chooseLanes(found, laneOverrides, skipped);
  const counts = { other_lane: 0, reuse_pointer: 0, unfitted_table: 0, metadata: 0, not_a_table: 0, refused_table: 0 };
  for (const s of skipped) counts[s.kind]++;
  return { dir, tables, skipped, counts };
}

/** One lane per table (module comment); the others become `other_lane` skips. */
function chooseLanes(found: readonly LaneFile[], overrides: readonly string[], skipped: SkippedFile[]): TableLanes[] {
  const out: TableLanes[] = [];
  const used = new Set<string>();
  for (const table of Object.keys(AIC_TABLES) as AicTable[]) {
    const lanes = found
      .filter((f) => f.table === table)
      .sort((a, b) => a.framework.localeCompare(b.framework) || compareVersions(b.version, a.version));
    if (!lanes.length) continue;
    const o = overrides.find((x) => x === `${table}=${x.split('=')[1]}`) ?? overrides.find((x) => !x.includes('='));
    const want = o?.includes('=') ? o.split('=')[1]! : o;
    let chosen = want ? lanes.find((l) => l.lane === want) : undefined;
    let why: string;
    if (chosen) {
      why = `--lane ${o}`;
      used.add(o!);
    } else {
      const fws = table === 'nccl_perf' ? ['nccl'] : FRAMEWORK_ORDER;
      const fw = fws.find((f) => lanes.some((l) => l.framework === f && l.rows !== 0));
      chosen = lanes.find((l) => l.framework === fw && l.rows !== 0) ?? lanes[0]!;
      why =
        fw === 'vllm' || fw === 'nccl'
          ? `newest ${fw === 'nccl' ? 'NCCL' : 'vLLM'} lane with data`
          : `no vLLM lane holds ${table}; newest ${chosen.framework} lane taken`;
      if (lanes.length === 1 && chosen.framework === 'unknown') why = 'the only file of this table';
    }
    for (const l of lanes)
      if (l !== chosen)
        skipped.push({
          file: l.file,
          kind: 'other_lane',
          reason: `${table} lane ${l.lane}: not the chosen lane (${chosen.lane}, ${why}); pass --lane ${table}=${l.lane} to use it`,
          rows: l.rows,
        });
    out.push({ table, lanes, chosen, why });
  }
  const unused = overrides.filter((o) => !used.has(o));
  if (unused.length)
    throw new UserError(
      `--lane ${unused.join(', ')}: no table has that lane (lanes found: ${[...new Set(found.map((f) => f.lane))].sort().join(', ')})`,
    );
  return out;
}
