/**
 * The validation tiers in every report (issue 16; src/validate/tiers.ts, docs/validation.md "Tiers"):
 * one table of every tier per regime, with tier (b) (cross-deployment) as the headline and its gap to
 * issue 16's target, and one line per tier saying how often its folds picked each composition. Pure.
 */
import { fmtDec } from '../core/render/format.ts';
import { chart, PALETTE, type Series } from '../core/render/svg.ts';
import type { Table } from '../core/render/table.ts';
import {
  COMPOSITION_NAME,
  COMPOSITIONS,
  HEADLINE_TIER,
  REGIMES,
  TIER_OUTLIER_APE_PCT,
  type RegimeMetrics,
  type TierSummary,
  type ValidationResult,
} from '../validate/types.ts';

/** Issue 16's target for tier (b), every regime: median APE ≤ 6 %, p90 ≤ 15 %. */
export const TIER_GOAL = { median_ape_pct: 6, p90_ape_pct: 15 } as const;

const f1 = (x: number | undefined) => fmtDec(x, 1);

function verdict(m: RegimeMetrics): string {
  const dm = m.median_ape_pct - TIER_GOAL.median_ape_pct;
  const dp = m.p90_ape_pct - TIER_GOAL.p90_ape_pct;
  if (dm <= 0 && dp <= 0) return 'met';
  return [dm > 0 ? `median +${dm.toFixed(1)} pp` : '', dp > 0 ? `p90 +${dp.toFixed(1)} pp` : '']
    .filter(Boolean)
    .join(', ');
}

/** Every tier per regime (+ pooled): n, median, p90, MAPE, bias, and the target verdict. */
export function tierTable(v: ValidationResult): Table | null {
  if (!v.tiers?.length) return null;
  const rows: string[][] = [];
  for (const t of v.tiers) {
    const name = t.tier === HEADLINE_TIER ? `**${t.title}** (headline)` : t.title;
    for (const g of REGIMES) {
      const m = t.regimes[g];
      if (!m) continue;
      rows.push([
        name,
        g,
        String(m.n),
        f1(m.median_ape_pct),
        f1(m.p90_ape_pct),
        f1(m.mape_pct),
        f1(m.bias_pct),
        verdict(m),
      ]);
    }
    const o = t.overall;
    rows.push([
      name,
      'pooled',
      String(o.n),
      f1(o.median_ape_pct),
      f1(o.p90_ape_pct),
      f1(o.mape_pct),
      f1(o.bias_pct),
      '',
    ]);
  }
  return {
    header: [
      'tier',
      'regime',
      'n (rows)',
      'median APE (%)',
      'p90 APE (%)',
      'MAPE (%)',
      'bias (%)',
      `target: median ≤ ${TIER_GOAL.median_ape_pct} %, p90 ≤ ${TIER_GOAL.p90_ape_pct} %`,
    ],
    rows,
  };
}

const ms = (us: number) => fmtDec(us / 1000, 1);

/** The sentence above the outlier table. */
/** A collective-message threshold in MiB, e.g. `64 MiB` (`0 B` = every step). */
export function mibText(bytes: number): string {
  return bytes === 0 ? '0 B' : `${fmtDec(bytes / (1024 * 1024), 0)} MiB`;
}

/**
 * The large-step factor as a short label: dimensionless, × the step's priced NVLink µs, with its
 * threshold (`2.72× NVLink at ≥ 64 MiB`; `?` when the fit has none).
 */
export function largeStepFactorText(factor: number, large_step_message_bytes: number | undefined): string {
  return `${factor.toFixed(2)}× NVLink at ≥ ${large_step_message_bytes === undefined ? '?' : mibText(large_step_message_bytes)}`;
}

export const TIER_OUTLIER_TITLE = `Tier (b) rows priced more than ${TIER_OUTLIER_APE_PCT} % off (ms; SM, HBM, NVLink and NIC are the registry's terms at s = 1, host, the large-step NVLink extra (large_step_nvlink_factor × NVLink on steps whose collective message is at least the fold's threshold) and s those of the fold that scored the row):`;

/**
 * The headline tier's rows priced more than TIER_OUTLIER_APE_PCT off, with each resource term
 * (types.ts `TierOutlier`); null when there are none.
 */
export function tierOutlierTable(v: ValidationResult): Table | null {
  const o = v.tiers?.find((t) => t.tier === HEADLINE_TIER)?.outliers;
  if (!o?.length) return null;
  return {
    header: [
      'model',
      'tp',
      'chip',
      'regime',
      'tokens',
      'batch',
      'context / request',
      'measured',
      'priced',
      'error (%)',
    ].concat(['SM', 'HBM', 'NVLink', 'NIC', 'host', 'large-step NVLink extra', 's']),
    rows: o.map((x) => {
      const r = v.rows[x.row]!;
      const R = x.resources_us;
      return [r.model, String(r.tp), r.chip, r.regime, String(x.tokens), String(r.batch), fmtDec(r.context_tokens, 0)]
        .concat([ms(x.measured_us), ms(x.predicted_us), f1(x.error_pct)])
        .concat([ms(R.sm), ms(R.hbm), ms(R.nvlink), ms(R.nic), ms(x.host_us), ms(x.large_step_us)])
        .concat([fmtDec(x.sm_scale, 3)]);
    }),
  };
}

/** How often the folds of a tier picked each composition (chosen on training rows only), and their s. */
export function tierPicksLine(t: TierSummary): string {
  const fits = t.folds.filter((f) => f.composition !== 'registry');
  if (!fits.length) return `${t.title}: no fit (${t.folds.map((f) => f.label).join('; ')})`;
  const picks = COMPOSITIONS.map((c) => `${COMPOSITION_NAME[c]} ${t.picks[c]}`).join(', ');
  const s = fits.map((f) => f.sm_scale);
  const ls = fits.filter((f) => f.large_step).map((f) => f.large_step!);
  const thresholds = [...new Set(ls.map((x) => x.message_bytes))].sort((a, b) => a - b);
  const large = ls.length
    ? `; large-step threshold ${thresholds.map((k) => `${mibText(k)} ×${ls.filter((x) => x.message_bytes === k).length}`).join(', ')}, factor ${Math.min(...ls.map((x) => x.factor)).toFixed(2)}–${Math.max(...ls.map((x) => x.factor)).toFixed(2)}`
    : '';
  return (
    `${t.title}: ${fits.length} fold(s) picked ${picks} on their training rows; s ${Math.min(...s).toFixed(3)}–${Math.max(...s).toFixed(3)}${large}` +
    `; folds: ${t.folds.map((f) => `${f.label} (${f.train.length} train / ${f.scored.length} scored)`).join('; ')}`
  );
}

/** The protocol sentence every report prints above the tier table. */
export const TIER_PROTOCOL =
  'Each tier scores this chip’s scored rows (no exclusion flag) with an engine profile fitted on rows it never scores: (a) none, (b) every other deployment of the engine (model × tp × chip: the same model on another chip is another deployment), (b′) the engine’s other deployments on this chip only, (c) the other chips’ rows, (d) every k-th row of each group. The composition of (b)–(d) is the one each fold chose on its training rows (lowest training RMS of the relative residual), never on the scored rows.';

/** One line per tier for the text summary: median / p90 per regime and the folds' picks. */
export function tierShortLine(t: TierSummary): string {
  const regimes = REGIMES.filter((g) => t.regimes[g])
    .map((g) => `${g} ${f1(t.regimes[g]!.median_ape_pct)} / ${f1(t.regimes[g]!.p90_ape_pct)}`)
    .join(', ');
  const fits = t.folds.filter((f) => f.composition !== 'registry').length;
  const picks = COMPOSITIONS.filter((c) => t.picks[c] > 0)
    .map((c) => `${COMPOSITION_NAME[c]} ${t.picks[c]}/${fits}`)
    .join(', ');
  return `${t.title.split(':')[0]}: ${regimes}${picks ? `; picks ${picks}` : ''}`;
}

const REGIME_COLORS = [PALETTE[0]!, PALETTE[1]!, PALETTE[4]!, PALETTE[2]!];

/** Scatter series per regime of the rows `idx` (indices into v.rows) with y from `y`. */
function byRegime(
  v: ValidationResult,
  idx: readonly number[],
  x: (i: number) => number,
  y: (i: number) => number,
): Series[] {
  return REGIMES.map((g, k) => {
    const rs = idx.filter((i) => v.rows[i]!.regime === g);
    return {
      label: `${g} (${rs.length})`,
      style: 'scatter' as const,
      color: REGIME_COLORS[k]!,
      radius: 3,
      points: rs.map((i) => [x(i), y(i)] as [number, number]),
    };
  }).filter((s) => s.points.length > 0);
}

/**
 * The tier figures (issue 16): predicted vs measured (log-log, y = x) per tier; tier (b)'s signed
 * error vs batch, context and tp; the decode-attention rate each decode step implies vs KV heads per
 * GPU, beside the priced rate.
 */
export function tierCharts(v: ValidationResult): Array<{ name: string; title: string; svg: string }> {
  const out: Array<{ name: string; title: string; svg: string }> = [];
  for (const t of v.tiers ?? []) {
    const idx = t.predicted_us.flatMap((p, i) => (p === null ? [] : [i]));
    const title = `${v.chip}, tier ${t.title.split(':')[0]}: predicted vs measured (y = x dashed)`;
    out.push({
      name: `validation-tier-${t.tier}.svg`,
      title: `Tier ${t.title.split(':')[0]}: predicted vs measured`,
      svg: chart(
        byRegime(
          v,
          idx,
          (i) => v.rows[i]!.measured_us / 1000,
          (i) => t.predicted_us[i]! / 1000,
        ),
        { title, x_label: 'measured (ms)', y_label: 'predicted (ms)', x_log: true, y_log: true, diagonal: true },
      ),
    });
  }
  const b = v.tiers?.find((t) => t.tier === HEADLINE_TIER);
  if (b) {
    const idx = b.predicted_us.flatMap((p, i) => (p === null ? [] : [i]));
    const err = (i: number) => (b.predicted_us[i]! / v.rows[i]!.measured_us - 1) * 100;
    const axes: Array<[string, string, (i: number) => number, boolean]> = [
      ['batch', 'batch (requests)', (i) => v.rows[i]!.batch, true],
      ['context', 'context per request (tokens)', (i) => v.rows[i]!.context_tokens, true],
      ['tp', 'tp (GPUs)', (i) => v.rows[i]!.tp, false],
    ];
    for (const [key, xl, x, log] of axes)
      out.push({
        name: `validation-tier-b-residual-${key}.svg`,
        title: `Tier (b) error vs ${key}`,
        svg: chart(byRegime(v, idx, x, err), {
          title: `${v.chip}, tier (b): signed error vs ${key}`,
          x_label: xl,
          y_label: 'pred/meas − 1 (%)',
          x_log: log,
          h_lines: [{ y: 0, label: '0' }],
        }),
      });
  }
  const d = v.decode_rates ?? [];
  if (d.length)
    out.push({
      name: 'validation-decode-rate-vs-kv-heads.svg',
      title: 'Implied decode-attention rate vs KV heads per GPU',
      svg: chart(
        [
          {
            label: `implied (${d.length})`,
            style: 'scatter',
            color: PALETTE[1]!,
            radius: 3,
            points: d.map((r) => [r.kv_heads_per_gpu, r.implied_tb_per_s] as [number, number]),
          },
          {
            label: 'priced',
            style: 'scatter',
            color: PALETTE[0]!,
            radius: 2,
            points: d.map((r) => [r.kv_heads_per_gpu * 1.08, r.priced_tb_per_s] as [number, number]),
          },
        ],
        {
          title: `${v.chip}: decode-attention rate per step (tier (b) prices the rest)`,
          x_label: 'KV heads per GPU',
          y_label: 'rate (TB/s)',
          x_log: true,
          y_log: true,
        },
      ),
    });
  return out;
}
