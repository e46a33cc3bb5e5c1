/**
 * Importer for AIConfigurator's recurrent-mixer kernel tables (`linear_attention/gdn_perf`,
 * `kda/kda_perf`, `linear_attention/mamba2_perf`; ../shared/datasets/aiconfigurator-modern/README.md
 * "Linear attention / SSM"). One row per kernel call of one layer on one GPU; `latency` in ms → µs.
 *
 * Geometry, per the README:
 * - GDN (Qwen3.5) and KDA (Kimi-K3): `num_k_heads` / `num_v_heads` TP-local, head dims 128; the conv runs
 *   over packed q, k, v: 2·K·d_k + V·d_v channels; the fp32 state is [B, V, d_v, d_k].
 * - Mamba2 (Nemotron-H, TRT-LLM): `nheads` model-global (the grid is tp 1), `head_dim` 64, `d_state`,
 *   `n_groups`; conv channels nheads·head_dim + 2·n_groups·d_state; state [B, nheads, head_dim, d_state].
 *   Stored as v_heads = nheads, head_v_dim = head_dim, k_heads = n_groups, head_k_dim = d_state.
 * The a100 GDN table (SGLang 0.5.10, old harness: K-only conv, bf16 state, global heads) is refused: it
 * is not comparable with the fixed-harness rows and has no column saying which harness wrote it.
 * Pure: the caller reads the file and stores the rows.
 */
import { InputError } from '../core/errors.ts';
import { Columns, intCell, latencyCell, type RawTable, textCell } from './table.ts';
import type { RecurrentRow } from './schema.ts';

/** The recurrent tables and the mixer each holds. */
export const RECURRENT_TABLES = { gdn_perf: 'gdn', kda_perf: 'kda', mamba2_perf: 'mamba2' } as const;
export type RecurrentTable = keyof typeof RECURRENT_TABLES;

const BASE = ['framework', 'version', 'op_name', 'kernel_source', 'phase', 'batch_size', 'seq_len', 'num_tokens'];
const GDN_COLS = [...BASE, 'num_k_heads', 'head_k_dim', 'num_v_heads', 'head_v_dim', 'latency'];
const MAMBA_COLS = [...BASE, 'd_state', 'nheads', 'head_dim', 'n_groups', 'latency'];
const PHASES = new Set(['context', 'generation', 'verify']);

/** k_heads, v_heads, head_k_dim, head_v_dim and conv channels of row r. */
type Geometry = Pick<RecurrentRow, 'k_heads' | 'v_heads' | 'head_k_dim' | 'head_v_dim' | 'conv_channels'>;

function geometryOf(t: RawTable, c: Columns, r: number, mamba: boolean): Geometry {
  const int = (col: string) => intCell(t, r, c.req(col), col, 1);
  if (mamba) {
    const [nh, hd, ds, ng] = [int('nheads'), int('head_dim'), int('d_state'), int('n_groups')];
    return { k_heads: ng, v_heads: nh, head_k_dim: ds, head_v_dim: hd, conv_channels: nh * hd + 2 * ng * ds };
  }
  const [kh, dk, vh, dv] = [int('num_k_heads'), int('head_k_dim'), int('num_v_heads'), int('head_v_dim')];
  return { k_heads: kh, v_heads: vh, head_k_dim: dk, head_v_dim: dv, conv_channels: 2 * kh * dk + vh * dv };
}

/**
 * Map a recurrent table to canonical rows.
 * @throws InputError naming file, row and column for a missing column, an op_name or phase that is not
 *   the table's, a non-positive count, or the old a100 SGLang GDN harness (framework sglang, version 0.5.10).
 */
export function mapRecurrent(t: RawTable, chip: string, table: RecurrentTable): RecurrentRow[] {
  const mixer = RECURRENT_TABLES[table];
  const mamba = mixer === 'mamba2';
  const c = new Columns(t, mamba ? MAMBA_COLS : GDN_COLS);
  const [fw, ver, op, ks, ph, b, s, n, lat] = [
    'framework',
    'version',
    'op_name',
    'kernel_source',
    'phase',
    'batch_size',
    'seq_len',
    'num_tokens',
    'latency',
  ].map((x) => c.req(x)) as number[];
  const out: RecurrentRow[] = new Array(t.rows.length);
  for (let r = 0; r < t.rows.length; r++) {
    const at = (column: string) => ({ file: t.file, row: r + 1, column });
    if (textCell(t, r, op!) !== mixer)
      throw new InputError(at('op_name'), `expected op_name "${mixer}" in ${table}, got "${textCell(t, r, op!)}"`);
    const phase = textCell(t, r, ph!);
    if (!PHASES.has(phase)) throw new InputError(at('phase'), `expected context, generation or verify, got "${phase}"`);
    const framework = textCell(t, r, fw!).toLowerCase();
    const version = textCell(t, r, ver!);
    if (mixer === 'gdn' && framework === 'sglang' && version === '0.5.10')
      throw new InputError(
        at('version'),
        'SGLang 0.5.10 GDN rows come from the old harness (key-only conv, bf16 state, global heads; README quirks): not comparable, refused',
      );
    out[r] = {
      chip,
      lane: `${framework}-${version.split('+')[0]}`,
      kernel_source: textCell(t, r, ks!),
      mixer,
      phase: phase as RecurrentRow['phase'],
      batch: intCell(t, r, b!, 'batch_size', 1),
      seq_len: intCell(t, r, s!, 'seq_len', 1),
      tokens: intCell(t, r, n!, 'num_tokens', 1),
      ...geometryOf(t, c, r, mamba),
      latency_us: latencyCell(t, r, lat!, 'latency') * 1000,
    };
  }
  return out;
}
