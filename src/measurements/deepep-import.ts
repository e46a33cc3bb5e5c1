/**
 * The DeepEP expert-parallel all-to-all tables (issue 13 item 3), from
 * `../shared/datasets/aiconfigurator-modern/<sku>/comm/sglang/0.5.12/wideep_deepep_{ll,normal}_perf.parquet`
 * (verbatim ai-dynamo/aiconfigurator, Apache-2.0; the dataset README "DeepEP"). Each row becomes one
 * dispatch and one combine point of one rank: the bytes it sends and its kernel time, µs.
 *
 * Message bytes are **per rank** (the collector's own payload bytes, README "DeepEP"):
 * - low-latency (`ll`) dispatch sends FP8 with per-128 scales: T·k·(H + H/128·4 + 16) bytes;
 * - combine (both modes) sends BF16: T·k·H·2 bytes;
 * - normal dispatch: T·k·(H + H/128·4) bytes, the FP8 payload DeepEP takes with SM90 features (every chip
 *   with DeepEP rows is SM90 or newer; no column records it, docs/fitting.md says so).
 * T = `num_token` (tokens per rank before routing), k = `num_topk`, H = `hidden_size` (elements).
 *
 * Units: the tables are µs and their column names say so (`*_us`); every other aiconfigurator table is ms.
 * A table whose time columns are not `_us`, or whose times are ms in a `_us` column, is refused naming the
 * file, row and column: for `ll` the row's `*_bandwidth_gbps` (the collector's bytes / its time) must agree
 * with bytes / time within 2× (a ms slip is 1000× off); for `normal` no DeepEP kernel runs under 1 µs (the
 * fastest shipped call is 24 µs), so a smaller time is refused. Pure apart from reading the given table.
 */
import { InputError } from '../core/errors.ts';
import { type DeepepMode, deepepMessageBytes } from '../core/laws/expert-alltoall.ts';
import type { ExpertA2aRow } from './schema.ts';
import { intCell, latencyCell, numCell, textCell, type RawTable } from './table.ts';

/** What the fit reads of one measured all-to-all call on one rank. Units: bytes, µs. */
export type A2aPoint = Omit<ExpertA2aRow, 'chip' | 'lane' | 'kernel_source' | 'nodes'>;

/** Shortest DeepEP kernel time believed in µs (module comment). */
export const DEEPEP_MIN_US = 1;

function col(t: RawTable, name: string): number {
  const j = t.header.indexOf(name);
  if (j >= 0) return j;
  const ms = t.header.find((h) => h === name.replace(/_us$/, '_ms'));
  const why = ms ? `found "${ms}": DeepEP times are µs (the dataset README), a ms table is refused` : 'missing column';
  throw new InputError({ file: t.file, row: 0, column: name }, `${why} "${name}"`);
}

const TIME_COLUMNS = {
  ll: { dispatch: 'dispatch_avg_t_us', combine: 'combine_avg_t_us' },
  normal: { dispatch: 'dispatch_transmit_us', combine: 'combine_transmit_us' },
} as const;

function checkUnit(t: RawTable, r: number, p: ExpertA2aRow, column: string): void {
  if (p.mode === 'normal') {
    if (p.latency_us < DEEPEP_MIN_US)
      throw new InputError(
        { file: t.file, row: r + 1, column },
        `${p.latency_us} µs is below any DeepEP kernel (${DEEPEP_MIN_US} µs): a ms value in a µs column?`,
      );
    return;
  }
  const bwCol = column.replace('avg_t_us', 'bandwidth_gbps');
  const gbps = numCell(t, r, col(t, bwCol), bwCol);
  const implied = p.message_bytes / p.latency_us / 1e3;
  if (!(implied / gbps < 2 && gbps / implied < 2))
    throw new InputError(
      { file: t.file, row: r + 1, column },
      `${p.latency_us} µs and ${p.message_bytes} B give ${implied.toPrecision(3)} GB/s but ${bwCol} says ${gbps}: not µs`,
    );
}

/**
 * Map one DeepEP table to dispatch and combine rows (one node: `node_num` is 1 in every shipped table).
 * @param chip stepcal chip name
 * @param ranks EP width of the job (8 on h200/h100/b200, 4 on gb200: the dataset README)
 * @throws InputError naming file, row and column for a missing column, a bad cell or a time not in µs
 */
export function mapDeepepTable(mode: DeepepMode, t: RawTable, chip: string, ranks: number): ExpertA2aRow[] {
  const [tok, k, e, h] = ['num_token', 'num_topk', 'num_experts', 'hidden_size'].map((c) => col(t, c)) as number[];
  const sms = mode === 'normal' ? col(t, 'dispatch_sms') : -1;
  const [fw, ver, ks, nodes] = ['framework', 'version', 'kernel_source', 'node_num'].map((c) => t.header.indexOf(c));
  const out: ExpertA2aRow[] = [];
  for (let r = 0; r < t.rows.length; r++) {
    const base = {
      chip,
      lane: fw! >= 0 && ver! >= 0 ? `${textCell(t, r, fw!).toLowerCase()}-${textCell(t, r, ver!)}` : 'sglang-0.5.12',
      kernel_source: ks! >= 0 ? textCell(t, r, ks!) : 'deepep',
      mode,
      ranks,
      nodes: nodes! >= 0 ? intCell(t, r, nodes!, 'node_num', 1) : 1,
      tokens_per_rank: intCell(t, r, tok!, 'num_token', 1),
      topk: intCell(t, r, k!, 'num_topk', 1),
      experts: intCell(t, r, e!, 'num_experts', 1),
      hidden: intCell(t, r, h!, 'hidden_size', 1),
      sms: sms >= 0 ? intCell(t, r, sms, 'dispatch_sms', 1) : 0,
    };
    for (const phase of ['dispatch', 'combine'] as const) {
      const column = TIME_COLUMNS[mode][phase];
      const message_bytes = deepepMessageBytes(mode, phase, {
        tokens: base.tokens_per_rank,
        topk: base.topk,
        hidden: base.hidden,
        experts: base.experts,
        ranks,
      });
      const p = { ...base, phase, message_bytes, latency_us: latencyCell(t, r, col(t, column), column) };
      checkUnit(t, r, p, column);
      out.push(p);
    }
  }
  return out;
}
