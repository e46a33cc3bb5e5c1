/**
 * Parser for nccl-tests stdout (github.com/NVIDIA/nccl-tests, `all_reduce_perf` etc.).
 *
 * The standard table, one line per message size:
 *   size(B) count(elements) type redop root | time(us) algbw(GB/s) busbw(GB/s) #wrong | (same, in-place)
 * (older builds have no `root` column). Conventions, from nccl-tests doc/PERFORMANCE.md:
 * - algbw = size / time (GB/s = 1e9 B/s);
 * - busbw = algbw × factor, factor = 2(n−1)/n for all_reduce, (n−1)/n for all_gather, reduce_scatter
 *   and alltoall (n = ranks);
 * - `size` is the per-rank buffer for all_reduce and the whole buffer across ranks for all_gather,
 *   reduce_scatter and alltoall — the convention CollectiveRow.message_bytes uses.
 *
 * Each line yields two rows (kernel_source `out_of_place` and `in_place`). A bus bandwidth above the
 * link rate (NVLink per direction within a node, NIC across nodes) cannot come from a ring/tree over
 * that link: it marks an in-network reduction (NVLS / SHARP), so the row is kept and its kernel_source
 * gets `;in_network` rather than being rejected.
 */
import { InputError, UserError } from '../core/errors.ts';
import type { Chip } from '../core/catalog/chip.ts';
import { checkUnits } from './units.ts';
import type { CollectiveOp, CollectiveRow } from './schema.ts';

/** busbw/algbw factor for `op` over `n` ranks (nccl-tests doc/PERFORMANCE.md). */
export function busFactor(op: CollectiveOp, n: number): number {
  if (n < 1) throw new UserError(`ranks must be ≥ 1, got ${n}`);
  return op === 'all_reduce' ? (2 * (n - 1)) / n : (n - 1) / n;
}

/** algbw in GB/s from bytes and µs: bytes / µs / 1e3. */
export function algbwGBs(bytes: number, time_us: number): number {
  return bytes / time_us / 1e3;
}

const TYPE_MAP: Record<string, { dtype: string }> = {
  float: { dtype: 'fp32' },
  half: { dtype: 'fp16' },
  bfloat16: { dtype: 'bf16' },
  double: { dtype: 'fp64' },
  int8: { dtype: 'int8' },
  uint8: { dtype: 'uint8' },
  int32: { dtype: 'int32' },
  uint32: { dtype: 'uint32' },
  int64: { dtype: 'int64' },
  uint64: { dtype: 'uint64' },
  f8e4m3: { dtype: 'fp8' },
  f8e5m2: { dtype: 'fp8_e5m2' },
};

const OP_NAMES: Record<string, CollectiveOp> = {
  all_reduce: 'all_reduce',
  allreduce: 'all_reduce',
  all_gather: 'all_gather',
  allgather: 'all_gather',
  reduce_scatter: 'reduce_scatter',
  reducescatter: 'reduce_scatter',
  alltoall: 'alltoall',
  all_to_all: 'alltoall',
};

/** Find the collective in a text (e.g. "Collective test starting: all_reduce_perf") or a file name. */
export function opFromText(s: string): CollectiveOp | undefined {
  const m = /(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all)/i.exec(s);
  return m ? OP_NAMES[m[1]!.toLowerCase()] : undefined;
}

export interface NcclTestsOptions {
  chip: string;
  /** Overrides the rank count found in the header. */
  ranks?: number;
  /** Overrides the collective found in the text / file name. */
  op?: CollectiveOp;
  /** Lane label (default `nccl-tests-<version>` from an "NCCL version" line, or `nccl-tests-unknown`). */
  lane?: string;
  /** Chip datasheet for the in-network flag (NVLink / NIC rate); flagging is skipped without it. */
  chipInfo?: Chip;
  /** Nodes (default: distinct hosts in the `# Rank` lines, else ceil(ranks / gpus_per_node), else 1). */
  nodes?: number;
}

export interface NcclTestsLine {
  size_bytes: number;
  count: number;
  type: string;
  redop: string;
  time_us: [number, number];
  algbw_printed: [number, number];
  busbw_printed: [number, number];
  /** Re-derived from size and printed time. */
  algbw_GBs: [number, number];
  busbw_GBs: [number, number];
  in_network: [boolean, boolean];
}

export interface NcclTestsResult {
  op: CollectiveOp;
  ranks: number;
  nodes: number;
  lane: string;
  lines: NcclTestsLine[];
  rows: CollectiveRow[];
  /** Rows flagged in-network (busbw above the link rate). */
  in_network_rows: number;
  /**
   * Rows left out because nccl-tests' `#wrong` column (data-check errors) was not 0: the collective
   * produced wrong results, so its time is not a measurement of a correct collective.
   */
  wrong_rows: number;
  /** 1-based text lines of those rows (one entry per left-out row). */
  wrong_lines: number[];
  /** The link rate used for the flag, GB/s per direction (undefined without a chip). */
  link_GBs?: number;
}

/** Allowed |printed − derived| for a bandwidth printed with 2 decimals from a time printed with `timeDecimals`. */
function bwTolerance(printed: number, time: number, timeDecimals: number): number {
  const halfUnit = 0.5 * 10 ** -timeDecimals;
  return Math.abs(printed) * (halfUnit / time) * 1.01 + 0.0051;
}

function decimals(tok: string): number {
  const i = tok.indexOf('.');
  return i < 0 ? 0 : tok.length - i - 1;
}

/**
 * Parse nccl-tests stdout. Pure.
 * @throws InputError naming the line (`line N`, 1-based line of the text; not a table row) and column for a malformed data line,
 *   a non-positive time, or a printed bandwidth that disagrees with size/time and the bus factor
 *   (usually a wrong rank count or collective); UserError when ranks or op cannot be determined.
 */
export function parseNcclTests(text: string, file: string, opts: NcclTestsOptions): NcclTestsResult {
  const lines = text.split(/\r?\n/);
  let ranksHeader: number | undefined;
  const rankLines = new Set<string>();
  const hosts = new Set<string>();
  let opText: CollectiveOp | undefined;
  let version: string | undefined;
  let nGpusPerProc: number | undefined;
  let nThread: number | undefined;
  for (const line of lines) {
    if (!line.startsWith('#')) {
      const v = /NCCL version\s+([0-9][0-9.]*[0-9])/i.exec(line);
      if (v && !version) version = v[1];
      continue;
    }
    const nr = /\bnranks\s*[:=]?\s*(\d+)/i.exec(line);
    if (nr) ranksHeader = Number(nr[1]);
    const rk = /^#\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)/.exec(line);
    if (rk) {
      rankLines.add(rk[1]!);
      hosts.add(rk[2]!);
    }
    const ng = /\bnGpus\s+(\d+)/.exec(line);
    if (ng) nGpusPerProc = Number(ng[1]);
    const nt = /\bnThread\s+(\d+)/.exec(line);
    if (nt) nThread = Number(nt[1]);
    const ct = /Collective test starting:\s*(\S+)/.exec(line);
    if (ct) opText = opFromText(ct[1]!);
    const v = /NCCL version\s+([0-9][0-9.]*[0-9])/i.exec(line);
    if (v && !version) version = v[1];
  }
  const ranks = opts.ranks ?? ranksHeader ?? (rankLines.size > 0 ? rankLines.size : undefined);
  if (ranks === undefined) {
    throw new UserError(
      `${file}: cannot tell the number of ranks (no "nranks" or "# Rank" lines${nGpusPerProc ? `; nGpus ${nGpusPerProc} × nThread ${nThread ?? 1} per process is not the total` : ''}); pass --ranks`,
    );
  }
  const op = opts.op ?? opText ?? opFromText(file.split('/').pop() ?? '');
  if (!op)
    throw new UserError(
      `${file}: cannot tell which collective this is (no "Collective test starting" line, file name has no op); pass --op`,
    );
  const gpn = opts.chipInfo?.gpus_per_node;
  const nodes = opts.nodes ?? (hosts.size > 0 ? hosts.size : gpn ? Math.ceil(ranks / gpn) : 1);
  // Default lane keeps nccl-tests imports apart from the curated AIConfigurator NCCL tables (`nccl-<version>`).
  const lane = opts.lane ?? `nccl-tests-${version ?? 'unknown'}`;
  const link_GBs = opts.chipInfo
    ? nodes > 1
      ? opts.chipInfo.rack_is_one_domain && ranks <= (opts.chipInfo.rack_gpus ?? 0)
        ? opts.chipInfo.rack_nvlink_gb_per_s_per_dir
        : opts.chipInfo.nic_gb_per_s_per_dir
      : opts.chipInfo.nvlink_gb_per_s_per_dir
    : undefined;
  const factor = busFactor(op, ranks);
  const out: NcclTestsLine[] = [];
  const rows: CollectiveRow[] = [];
  let flagged = 0;
  const wrongLines: number[] = [];
  for (let li = 0; li < lines.length; li++) {
    const line = lines[li]!.trim();
    if (line === '' || line.startsWith('#') || !/^\d/.test(line)) continue;
    const tok = line.split(/\s+/);
    // size count type redop [root] t a b wrong t a b wrong
    let k: number;
    if (tok.length >= 13) k = 5;
    else if (tok.length >= 11 && tok.length <= 12) k = 4;
    else
      throw new InputError(
        { file, line: li + 1 },
        `expected an nccl-tests data line "size count type redop root time algbw busbw #wrong time algbw busbw #wrong", got ${tok.length} fields`,
      );
    const num = (i: number, col: string, positive = false): number => {
      const v = Number(tok[i]);
      if (!Number.isFinite(v) || (positive && !(v > 0))) {
        throw new InputError(
          { file, line: li + 1, column: col },
          `expected a ${positive ? 'positive ' : ''}finite number, got "${tok[i] ?? ''}"`,
        );
      }
      return v;
    };
    const size = num(0, 'size');
    if (size === 0) continue; // nccl-tests prints 0-byte lines when minBytes is 0; nothing to time
    const count = num(1, 'count');
    const typeTok = tok[2]!;
    const type = TYPE_MAP[typeTok];
    if (!type)
      throw new InputError(
        { file, line: li + 1, column: 'type' },
        `unknown dtype "${typeTok}" (expected one of ${Object.keys(TYPE_MAP).join(', ')})`,
      );
    const stride = tok.length - k >= 8 ? 4 : 3; // with or without #wrong
    const rec: NcclTestsLine = {
      size_bytes: size,
      count,
      type: type.dtype,
      redop: tok[3]!,
      time_us: [0, 0],
      algbw_printed: [0, 0],
      busbw_printed: [0, 0],
      algbw_GBs: [0, 0],
      busbw_GBs: [0, 0],
      in_network: [false, false],
    };
    for (let p = 0; p < 2; p++) {
      const base = k + p * stride;
      const where = p === 0 ? 'out-of-place' : 'in-place';
      const t = num(base, `${where} time`, true);
      const ab = num(base + 1, `${where} algbw`);
      const bb = num(base + 2, `${where} busbw`);
      const algbw = algbwGBs(size, t);
      const busbw = algbw * factor;
      const d = decimals(tok[base]!);
      if (Math.abs(algbw - ab) > bwTolerance(ab, t, d)) {
        throw new InputError(
          { file, line: li + 1, column: `${where} algbw` },
          `printed algbw ${ab} GB/s but size/time = ${size} B / ${t} µs = ${algbw.toFixed(2)} GB/s; check units (time must be µs, size bytes)`,
        );
      }
      if (Math.abs(busbw - bb) > bwTolerance(bb, t, d)) {
        throw new InputError(
          { file, line: li + 1, column: `${where} busbw` },
          `printed busbw ${bb} GB/s but algbw × ${op} factor for ${ranks} ranks (${factor.toFixed(4)}) = ${busbw.toFixed(2)} GB/s; check --ranks and --op`,
        );
      }
      const inNet = link_GBs !== undefined && busbw > link_GBs;
      // `#wrong` is a count of data-check errors ("N/A" when checking was off): a non-zero count is a failed run.
      const wrong = stride === 4 ? Number(tok[base + 3]) : 0;
      if (Number.isFinite(wrong) && wrong !== 0) {
        wrongLines.push(li + 1);
        rec.time_us[p] = t;
        continue;
      }
      rec.time_us[p] = t;
      rec.algbw_printed[p] = ab;
      rec.busbw_printed[p] = bb;
      rec.algbw_GBs[p] = algbw;
      rec.busbw_GBs[p] = busbw;
      rec.in_network[p] = inNet;
      if (inNet) flagged++;
      rows.push({
        chip: opts.chip,
        lane,
        kernel_source: (p === 0 ? 'out_of_place' : 'in_place') + (inNet ? ';in_network' : ''),
        op,
        dtype: type.dtype,
        ranks,
        nodes,
        message_bytes: size,
        backend: 'nccl',
        latency_us: t,
      });
    }
    out.push(rec);
  }
  if (out.length === 0)
    throw new InputError(
      { file },
      'empty file: no nccl-tests data lines (expected lines starting with the message size)',
    );
  if (rows.length === 0) {
    throw new InputError(
      { file, line: wrongLines[0]! },
      `every data line has a non-zero #wrong count (${wrongLines.length} rows failed nccl-tests' data check); nothing to import`,
    );
  }
  // Units check (src/measurements/units.ts): bus bandwidth within the link band, floors in [0.5 µs, 10 ms].
  if (opts.chipInfo) checkUnits('collective', rows, opts.chipInfo, file, { latencyColumn: 'time' });
  return {
    op,
    ranks,
    nodes,
    lane,
    lines: out,
    rows,
    in_network_rows: flagged,
    wrong_rows: wrongLines.length,
    wrong_lines: wrongLines,
    ...(link_GBs !== undefined ? { link_GBs } : {}),
  };
}
