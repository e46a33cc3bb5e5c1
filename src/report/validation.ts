/**
 * The held-out accuracy report: markdown and a self-contained HTML page (inline SVG, inline CSS, no
 * script, no network). Pure: result in, strings out (writing is in ./write.ts).
 *
 * Every table carries its unit in each column header. Metric conventions are printed in the report
 * (nearest-rank percentiles; see src/validate/metrics.ts).
 */
import { groupBy } from '../core/numeric/stats.ts';
import { RESOURCES } from '../pricer/types.ts';
import { apeCdf } from '../validate/metrics.ts';
import {
  COMPOSITION_NAME,
  COMPOSITIONS,
  REGIMES,
  type Composition,
  type EngineSmOutcome,
  type HostFitEngine,
  type Regime,
  type RegimeMetrics,
  type RowResult,
  type ValidationResult,
} from '../validate/types.ts';
import { fmtDec } from '../core/render/format.ts';
import { chart, esc, PALETTE, stackedBars, type Series } from '../core/render/svg.ts';
import { htmlTable, markdownTable, type Table } from '../core/render/table.ts';
import {
  mibText,
  TIER_OUTLIER_TITLE,
  TIER_PROTOCOL,
  tierCharts,
  tierOutlierTable,
  tierPicksLine,
  tierTable,
} from './tiers.ts';

/** The headline rule as stated in every report (implemented by headlineChoice, src/validate/run.ts). */
export const HEADLINE_RULE =
  'Headline composition: the one of NoOverlap, CMOverlap and Overlap with the lowest held-out pooled MAPE (ties → the earlier in that order; `--composition` forces it). NoOverlap and CMOverlap each use the variant with or without the engine compute-efficiency term s that `--engine-sm` selects (auto: lower mean over regimes of that composition’s held-out MAPE).';

/** Accuracy goal of issue 7, per regime. */
export const GOAL = { median_ape_pct: 10, p90_ape_pct: 25 } as const;

export const COMPOSITION_LABEL: Record<Composition, string> = COMPOSITION_NAME;

/** CDF line dash per composition (solid NoOverlap, dash-dot CMOverlap, dashed Overlap). */
const COMPOSITION_DASH: Record<Composition, string | undefined> = {
  no_overlap: undefined,
  cm_overlap: '8 2 2 2',
  overlap: '4 3',
};

/** The compositions other than `c`, in COMPOSITIONS order. */
export function otherCompositions(c: Composition): Composition[] {
  return COMPOSITIONS.filter((x) => x !== c);
}

const REGIME_COLOR: Record<Regime, string> = {
  prefill: PALETTE[0]!,
  decode: PALETTE[1]!,
  mixed: PALETTE[4]!,
  static_batch: PALETTE[2]!,
};

const f1 = (x: number | undefined) => fmtDec(x, 1);
const f3 = (x: number) => fmtDec(x, 3);

/** Goal verdict of one regime's metrics. */
export function goalVerdict(m: RegimeMetrics): string {
  const dm = m.median_ape_pct - GOAL.median_ape_pct;
  const dp = m.p90_ape_pct - GOAL.p90_ape_pct;
  if (dm <= 0 && dp <= 0) return 'met';
  const parts: string[] = [];
  if (dm > 0) parts.push(`median short by ${dm.toFixed(1)} pp`);
  if (dp > 0) parts.push(`p90 short by ${dp.toFixed(1)} pp`);
  return parts.join(', ');
}

/** Per-regime table for one composition (+ pooled row, labelled as such). */
export function regimeTable(v: ValidationResult, c: Composition): Table {
  const rows: string[][] = [];
  for (const g of REGIMES) {
    const m = v.regimes_by_composition[c][g];
    if (!m) continue;
    rows.push([
      g,
      String(m.n),
      f1(m.mape_pct),
      f1(m.median_ape_pct),
      f1(m.p90_ape_pct),
      f1(m.bias_pct),
      f3(m.geo_mean_ratio),
      f1(m.shape_mape_pct),
      String(m.shape_n ?? 0),
      goalVerdict(m),
    ]);
  }
  const o = v.overall_by_composition[c];
  rows.push([
    'pooled (all regimes)',
    String(o.n),
    f1(o.mape_pct),
    f1(o.median_ape_pct),
    f1(o.p90_ape_pct),
    f1(o.bias_pct),
    f3(o.geo_mean_ratio),
    f1(o.shape_mape_pct),
    String(o.shape_n ?? 0),
    '(see regimes)',
  ]);
  return {
    header: [
      'regime',
      'n (rows)',
      'MAPE (%)',
      'median APE (%)',
      'p90 APE (%)',
      'bias (%)',
      'geo mean pred/meas (×)',
      'shape MAPE (%)',
      'shape n (points)',
      'goal: median ≤ 10 %, p90 ≤ 25 %',
    ],
    rows,
  };
}

/**
 * The three compositions side by side per regime (held-out): MAPE, median and p90 APE, bias (all %),
 * and which has the lowest MAPE (ties → the earlier of NoOverlap, CMOverlap, Overlap).
 */
export function compositionTable(v: ValidationResult): Table {
  const rows: string[][] = [];
  for (const g of [...REGIMES, 'pooled' as const]) {
    const ms = COMPOSITIONS.map((c) => (g === 'pooled' ? v.overall_by_composition[c] : v.regimes_by_composition[c][g]));
    if (ms.some((m) => !m)) continue;
    const m = ms as RegimeMetrics[];
    let best = 0;
    m.forEach((x, i) => {
      if (x.mape_pct < m[best]!.mape_pct) best = i;
    });
    rows.push([
      g === 'pooled' ? 'pooled (all regimes)' : g,
      String(m[0]!.n),
      ...m.map((x) => f1(x.mape_pct)),
      ...m.map((x) => f1(x.median_ape_pct)),
      ...m.map((x) => f1(x.p90_ape_pct)),
      ...m.map((x) => f1(x.bias_pct)),
      COMPOSITION_LABEL[COMPOSITIONS[best]!],
    ]);
  }
  const L = COMPOSITIONS.map((c) => COMPOSITION_LABEL[c]);
  return {
    header: [
      'regime',
      'n (rows)',
      ...L.map((l) => `${l} MAPE (%)`),
      ...L.map((l) => `${l} median APE (%)`),
      ...L.map((l) => `${l} p90 APE (%)`),
      ...L.map((l) => `${l} bias (%)`),
      'lowest MAPE',
    ],
    rows,
  };
}

export function groupTable(v: ValidationResult): Table {
  const h = v.headline;
  return {
    header: [
      'model',
      'chip',
      'tp (GPUs)',
      'kind',
      'engine',
      'regime',
      'n (rows)',
      `MAPE ${COMPOSITION_LABEL[h]} (%)`,
      'median APE (%)',
      'p90 APE (%)',
      'bias (%)',
      'geo mean pred/meas (×)',
      'shape MAPE (%)',
      ...otherCompositions(h).map((c) => `MAPE ${COMPOSITION_LABEL[c]} (%)`),
    ],
    rows: v.groups.map((g) => {
      const m = g.metrics[h];
      return [
        g.key.model,
        g.key.chip,
        String(g.key.tp),
        g.key.kind,
        g.key.engine,
        g.key.regime,
        String(m.n),
        f1(m.mape_pct),
        f1(m.median_ape_pct),
        f1(m.p90_ape_pct),
        f1(m.bias_pct),
        f3(m.geo_mean_ratio),
        f1(m.shape_mape_pct),
        ...otherCompositions(h).map((c) => f1(g.metrics[c].mape_pct)),
      ];
    }),
  };
}

/** Mean share of each resource in the headline prediction (scored rows), per regime: where the time goes. */
export function resourceShareTable(v: ValidationResult): Table {
  const rows: string[][] = [];
  const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined);
  for (const g of REGIMES) {
    const rs = scored.filter((r) => r.regime === g);
    if (!rs.length) continue;
    const tot = rs.reduce((a, r) => a + r.measured_us, 0);
    const cells = RESOURCES.map((res) => f1((100 * rs.reduce((a, r) => a + r.resources_us[res], 0)) / tot));
    const pred = rs.reduce((a, r) => a + r.predicted_us[v.headline], 0);
    rows.push([g, String(rs.length), ...cells, f1((100 * pred) / tot)]);
  }
  return {
    header: [
      'regime',
      'n (rows)',
      ...RESOURCES.map((r) => `${r} (% of measured)`),
      `${COMPOSITION_LABEL[v.headline]} total (% of measured)`,
    ],
    rows,
  };
}

/**
 * Every row: measured, the three predictions, the headline ratio, host, bottleneck, status, and the
 * numbers of its extrapolation reasons (the rows of `extrapolationTable`).
 */
export function rowTable(v: ValidationResult): Table {
  const ids = new Map((v.extrapolation ?? []).map((e, i) => [e.reason, i + 1]));
  return {
    header: [
      'file:row',
      'model',
      'tp (GPUs)',
      'regime',
      'batch (requests)',
      'measured (µs)',
      ...COMPOSITIONS.map((c) => `${COMPOSITION_LABEL[c]} (µs)`),
      `ratio ${COMPOSITION_LABEL[v.headline]} (pred/meas)`,
      'host (µs)',
      'bottleneck',
      'status',
      'extrapolation (reason #)',
    ],
    rows: v.rows.map((r) => [
      `${r.file}:${r.row}`,
      r.model,
      String(r.tp),
      r.regime,
      String(r.batch),
      r.measured_us.toFixed(0),
      ...COMPOSITIONS.map((c) => r.predicted_us[c].toFixed(0)),
      r.ratio[v.headline].toFixed(3),
      r.host_us.toFixed(0),
      r.bottleneck,
      r.used_for_host_fit ? 'host-fit training (not scored)' : r.excluded ? `excluded: ${r.excluded}` : 'scored',
      (r.extrapolation_reasons ?? []).map((x) => String(ids.get(x) ?? '?')).join(', ') || '–',
    ]),
  };
}

/**
 * Rows per extrapolation reason (the pricer's notes grouped): every priced row, the scored rows, and
 * the scored rows per regime. Null when no row is extrapolated.
 */
export function extrapolationTable(v: ValidationResult): Table | null {
  const ex = v.extrapolation ?? [];
  if (!ex.length) return null;
  const regimes = REGIMES.filter((g) => ex.some((e) => e.scored_by_regime[g]));
  return {
    header: ['#', 'reason', 'rows (all priced)', 'scored rows', ...regimes.map((g) => `scored ${g} (rows)`)],
    rows: ex.map((e, i) => [
      String(i + 1),
      e.reason,
      String(e.rows),
      String(e.scored_rows),
      ...regimes.map((g) => String(e.scored_by_regime[g] ?? 0)),
    ]),
  };
}

/** One sentence stating how many rows are priced, scored and carry no extrapolation reason. */
export function extrapolationSentence(v: ValidationResult): string {
  const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined);
  const clean = scored.filter((r) => !(r.extrapolation_reasons ?? []).length).length;
  return (
    `${v.rows.length} rows priced, ${scored.length} scored; ${clean} scored rows priced with no term outside its fitted domain. ` +
    'A row counts once under each reason it carries; the reasons are the pricer\'s extrapolation notes without their per-step figures (docs/pricer.md "Extrapolation flags"), so a reason that marks nearly every decode row (the GEMM ramp below its fitted m range) stays distinguishable from rare ones.'
  );
}

/** The engine compute-efficiency outcomes present, NoOverlap first. */
export function engineSmOutcomes(v: ValidationResult): EngineSmOutcome[] {
  return [v.engine_sm, v.engine_sm_cm_overlap].filter((x): x is EngineSmOutcome => x !== undefined);
}

/**
 * Held-out metrics of one composition without and with the engine compute-efficiency term s, per
 * regime (same training rows, same scored rows). Default: NoOverlap's; null without --fit-host.
 */
export function engineSmTable(v: ValidationResult, es: EngineSmOutcome | undefined = v.engine_sm): Table | null {
  if (!es) return null;
  const rows: string[][] = [];
  for (const g of [...REGIMES, 'pooled' as const]) {
    const a = g === 'pooled' ? es.without.overall : es.without.regimes[g];
    const b = g === 'pooled' ? es.with.overall : es.with.regimes[g];
    if (!a || !b) continue;
    rows.push([
      g === 'pooled' ? 'pooled (all regimes)' : g,
      String(a.n),
      f1(a.mape_pct),
      f1(b.mape_pct),
      f1(a.median_ape_pct),
      f1(b.median_ape_pct),
      f1(a.p90_ape_pct),
      f1(b.p90_ape_pct),
      f1(a.bias_pct),
      f1(b.bias_pct),
      g === 'pooled' ? '(see regimes)' : goalVerdict(b),
    ]);
  }
  return {
    header: [
      'regime',
      'n (rows)',
      'MAPE without s (%)',
      'MAPE with s (%)',
      'median APE without s (%)',
      'median APE with s (%)',
      'p90 APE without s (%)',
      'p90 APE with s (%)',
      'bias without s (%)',
      'bias with s (%)',
      'goal with s',
    ],
    rows,
  };
}

/** An s as printed: its value, `1 (held: why)` when held at 1, the note appended when at a bound. */
export function smScaleText(x: NonNullable<HostFitEngine['sm_scale']>): string {
  const held = x.value === 1 && (!x.identified || x.note !== undefined);
  if (held) return `1 (${x.note ?? 'not identified'})`;
  return x.value.toFixed(3) + (x.note ? ` (${x.note})` : '');
}

/** How s enters each composition, for the sentences. */
const SM_LAW: Partial<Record<Composition, string>> = {
  no_overlap: 'NoOverlap: measured = s · T_SM + T_HBM + T_NVLink + T_NIC + host, linear least squares',
  cm_overlap: `CMOverlap: measured = Σ_layers (max(s · T_SM, T_HBM) + T_NVLink + T_NIC + experts) + head + host, s by a bounded 1-D search in [0.25, 4] with the host terms solved by weighted least squares at each trial`,
};

/** One sentence naming the fitted s per engine and which variant the headline uses and why. */
export function engineSmSentence(v: ValidationResult, es: EngineSmOutcome | undefined = v.engine_sm): string | null {
  if (!es) return null;
  const c = es.composition ?? 'no_overlap';
  const sc = es.scales.map((x) => `${x.engine} s = ${smScaleText(x)}`).join(', ');
  return `Engine compute-efficiency term (${SM_LAW[c] ?? COMPOSITION_LABEL[c]}; fitted on the host-fit training rows; --engine-sm ${es.mode}): ${sc}. Headline ${COMPOSITION_LABEL[c]} ${es.used ? 'uses' : 'does not use'} s — ${es.reason}.`;
}

export function hostFitSection(v: ValidationResult): { tables: Table[]; notes: string[] } {
  const hf = v.host_fit;
  if (!hf) return { tables: [], notes: ['Host terms: the registry’s (no `--fit-host`).'] };
  const terms: Table = {
    header: [
      'engine',
      'composition',
      'n train (rows)',
      'per_step_us (µs/step)',
      'per_request_step_us (µs/request/step)',
      'per_step_tp_gt1_us (µs/step)',
      'per_kernel_us (µs/kernel)',
      'per_step_per_rank_us (µs/step/rank)',
      'large_step_nvlink_factor (× priced NVLink, steps ≥ threshold)',
      'large-step threshold (collective message)',
      's (× priced SM)',
      'train RMS (µs)',
      'train RMS (% of measured)',
      'not identified',
    ],
    rows: hf.fits.map((f) => {
      const t = (n: string) => f.terms.find((x) => x.name === n)!;
      const cell = (n: string) => (t(n).identified ? t(n).value_us.toFixed(2) : 'n/i');
      const sCell = f.sm_scale
        ? f.sm_scale.value === 1 && (!f.sm_scale.identified || f.sm_scale.note)
          ? '1 (held)'
          : f.sm_scale.value.toFixed(3) + (f.sm_scale.note ? ' (bound)' : '')
        : '– (not fitted)';
      return [
        f.engine,
        COMPOSITION_LABEL[f.composition],
        String(f.n_train),
        cell('per_step_us'),
        cell('per_request_step_us'),
        cell('per_step_tp_gt1_us'),
        cell('per_kernel_us'),
        cell('per_step_per_rank_us'),
        cell('large_step_nvlink_factor'),
        f.large_step_message_bytes === undefined ? '–' : mibText(f.large_step_message_bytes),
        sCell,
        f.train_rms_us.toFixed(0),
        f1(f.train_rms_rel_pct),
        f.terms
          .filter((x) => !x.identified)
          .map((x) => x.name)
          .join(', ') || '–',
      ];
    }),
  };
  const train: Table = {
    header: ['training row (file:row)', 'engine', 'group'],
    rows: hf.training_rows.map((t) => [`${t.file}:${t.row}`, t.engine, t.group]),
  };
  const notes = [
    `Host terms fitted with \`--fit-host ${hf.rule}\` on ${hf.training_rows.length} training rows (least squares weighted ${hf.weighting === 'absolute' ? 'in absolute µs' : 'by 1/measured, i.e. on relative error'}), excluded from every error below. n/i = not identified by the training rows (held at 0).`,
    ...engineSmOutcomes(v).map((es) => engineSmSentence(v, es)!),
    ...hf.notes,
    ...new Set(hf.fits.flatMap((f) => f.notes.filter((n) => !hf.notes.includes(n)))),
  ];
  return { tables: [terms, train], notes };
}

/** The report's charts (SVG strings), by file name. */
export function validationCharts(v: ValidationResult): Array<{ name: string; title: string; svg: string }> {
  const out: Array<{ name: string; title: string; svg: string }> = [];
  const h = v.headline;
  const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined);
  const notScored = v.rows.filter((r) => r.used_for_host_fit || r.excluded !== undefined);
  const series: Series[] = REGIMES.filter((g) => scored.some((r) => r.regime === g)).map((g) => ({
    label: `${g} (${scored.filter((r) => r.regime === g).length})`,
    style: 'scatter',
    color: REGIME_COLOR[g],
    radius: 3,
    points: scored
      .filter((r) => r.regime === g)
      .map((r) => [r.measured_us / 1000, r.predicted_us[h] / 1000] as [number, number]),
  }));
  if (notScored.length) {
    series.push({
      label: `not scored (${notScored.length})`,
      style: 'scatter',
      color: '#bbbbbb',
      radius: 2,
      points: notScored.map((r) => [r.measured_us / 1000, r.predicted_us[h] / 1000]),
    });
  }
  out.push({
    name: 'validation-pred-vs-meas.svg',
    title: 'Predicted vs measured',
    svg: chart(series, {
      title: `${v.chip}: ${COMPOSITION_LABEL[h]} predicted vs measured (y = x dashed)`,
      x_label: 'measured (ms)',
      y_label: `predicted ${COMPOSITION_LABEL[h]} (ms)`,
      x_log: true,
      y_log: true,
      diagonal: true,
    }),
  });

  const cdf: Series[] = [];
  for (const c of COMPOSITIONS) {
    for (const g of REGIMES) {
      const rs = scored.filter((r) => r.regime === g);
      if (!rs.length) continue;
      cdf.push({
        label: `${g} ${COMPOSITION_LABEL[c]}`,
        style: 'line',
        color: REGIME_COLOR[g],
        ...(COMPOSITION_DASH[c] ? { dash: COMPOSITION_DASH[c] } : {}),
        points: apeCdf(rs.map((r) => Math.abs(r.ratio[c] - 1) * 100)).map(([x, y]) => [Math.max(x, 0.01), y]),
      });
    }
  }
  out.push({
    name: 'validation-ape-cdf.svg',
    title: 'CDF of APE',
    svg: chart(cdf, {
      title: `${v.chip}: CDF of APE per regime (solid NoOverlap, dash-dot CMOverlap, dashed Overlap)`,
      x_label: 'APE (%)',
      y_label: 'fraction of rows',
      x_log: true,
      y_range: [0, 1],
      h_lines: [
        { y: 0.5, label: 'median' },
        { y: 0.9, label: 'p90' },
      ],
    }),
  });

  // Error vs batch: groups with ≥ 2 scored rows, one chart per regime, at most 10 groups each.
  for (const g of REGIMES) {
    const groups = [
      ...groupBy(
        scored.filter((r) => r.regime === g),
        (r) => r.group,
      ),
    ].filter(([, rs]) => new Set(rs.map((r) => r.batch)).size >= 2);
    if (!groups.length) continue;
    groups.sort((a, b) => b[1].length - a[1].length || (a[0] < b[0] ? -1 : 1));
    const shown = groups.slice(0, 10);
    const s: Series[] = shown.map(([key, rs]) => ({
      label: shortGroup(key, v.chip),
      style: 'line',
      points: [...rs]
        .sort((a, b) => a.batch - b.batch)
        .map((r) => [r.batch, (r.ratio[h] - 1) * 100] as [number, number]),
    }));
    out.push({
      name: `validation-error-vs-batch-${g}.svg`,
      title: `Error vs batch (${g})`,
      svg: chart(s, {
        title: `${v.chip} ${g}: ${COMPOSITION_LABEL[h]} error vs batch${groups.length > 10 ? ` (10 of ${groups.length} groups)` : ''}`,
        x_label: 'batch (requests)',
        y_label: 'error (pred/meas − 1, %)',
        x_log: true,
        h_lines: [{ y: 0, label: 'exact' }],
      }),
    });
  }

  const picks = selectedSteps(v);
  if (picks.length) {
    out.push({
      name: 'validation-resources.svg',
      title: 'Per-resource time of selected steps',
      svg: stackedBars(
        picks.map((r) => ({
          label: `${r.regime} ${r.model} tp${r.tp} batch ${r.batch} (${(r.measured_us / 1000).toFixed(1)} ms)`,
          segments: Object.fromEntries(RESOURCES.map((res) => [res, (100 * r.resources_us[res]) / r.measured_us])),
          marker: 100,
        })),
        {
          title: `${v.chip}: priced time per resource as % of the measured step (sum = NoOverlap; tick = measured)`,
          unit: '%',
          keys: RESOURCES,
          width: 1000,
          label_width: 330,
          marker_label: 'measured = 100 %',
        },
      ),
    });
  }
  out.push(...tierCharts(v));
  return out;
}

/** Legend label of a group: its parts without the chip and the regime (`llama-2-70b tp2 p512 o128`). */
export function shortGroup(key: string, chip = ''): string {
  const parts = key
    .split('|')
    .filter((p) => p !== chip && !['prefill', 'decode', 'mixed', 'static_batch', 'step'].includes(p));
  const s = parts.join(' ');
  return s.length > 26 ? `${s.slice(0, 25)}…` : s;
}

/** Selected steps for the stacked bar: per regime, the lowest and highest batch of its largest group. */
export function selectedSteps(v: ValidationResult): RowResult[] {
  const out: RowResult[] = [];
  const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined);
  for (const g of REGIMES) {
    const groups = [
      ...groupBy(
        scored.filter((r) => r.regime === g),
        (r) => r.group,
      ).values(),
    ].sort((a, b) => b.length - a.length);
    const big = groups[0];
    if (!big) continue;
    const sorted = [...big].sort((a, b) => a.batch - b.batch);
    out.push(sorted[0]!);
    if (sorted.length > 1) out.push(sorted[sorted.length - 1]!);
  }
  return out;
}

/** Extra sections a caller (calibrate) adds: markdown and HTML renderings of the same content. */
export interface ExtraSection {
  title: string;
  md: string;
  html: string;
}

export interface ReportInputs {
  /** Fitter figures to inline (fits/<chip>/*.svg), by name. */
  fitFigures?: Array<{ name: string; svg: string }>;
  /** Sections printed before the validation (e.g. calibrate's coefficient summary). */
  before?: ExtraSection[];
  /** A plain statement printed when there is no held-out data (then `v` is null). */
  noValidation?: string;
}

function conventions(): string[] {
  return [
    'APE = |pred/meas − 1| · 100; MAPE = mean APE; median and p90 APE are nearest-rank percentiles (sorted[ceil(p·n) − 1]).',
    'bias = mean (pred/meas − 1) · 100, signed (negative = predicted too fast); geo mean = exp(mean ln(pred/meas)).',
    'shape (reference §5.2, robust anchor of issue 16): within a group of ≥ 2 rows, each row’s pred/meas divided by the group’s median pred/meas, minus 1; every row counted; shape MAPE = mean |·| · 100.',
    'Every metric is reported per regime; the pooled row is never the only figure (opposite errors can cancel).',
    HEADLINE_RULE,
  ];
}

function pinLines(v: ValidationResult): string[] {
  return [
    `registry sha256: ${v.pinned.registry_sha256}`,
    `stepcal version: ${v.pinned.stepcal_version}`,
    `flags: ${v.pinned.flags.join(' ') || '(none)'}`,
    ...v.pinned.inputs.map((i) => `input: ${i.file} sha256 ${i.sha256}`),
  ];
}

/** The markdown report. Charts are referenced as SVG files written beside it. */
export function validationMarkdown(chip: string, v: ValidationResult | null, inp: ReportInputs = {}): string {
  const L: string[] = [`# stepcal accuracy report: ${chip}`, ''];
  for (const s of inp.before ?? []) L.push(`## ${s.title}`, '', s.md, '');
  if (!v) {
    L.push('## Held-out validation', '', inp.noValidation ?? 'No held-out step timings for this chip.', '');
  } else {
    L.push('## Pinned evaluation', '', ...pinLines(v).map((l) => `- ${l}`), '');
    L.push('## Conventions', '', ...conventions().map((l) => `- ${l}`), '');
    const tt = tierTable(v);
    if (tt) {
      L.push('## Validation tiers', '', TIER_PROTOCOL, '', markdownTable(tt));
      L.push(...v.tiers!.map((t) => `- ${tierPicksLine(t)}`), '');
      const ot = tierOutlierTable(v);
      if (ot) L.push(TIER_OUTLIER_TITLE, '', markdownTable(ot));
    }
    L.push('## Headline', '', `Headline composition: **${COMPOSITION_LABEL[v.headline]}**. ${v.headline_reason}.`, '');
    L.push(
      `### Per regime, ${COMPOSITION_LABEL[v.headline]} (headline)`,
      '',
      markdownTable(regimeTable(v, v.headline)),
    );
    L.push('### The three compositions side by side (held-out)', '', markdownTable(compositionTable(v)));
    for (const es of engineSmOutcomes(v)) {
      L.push(
        `### ${COMPOSITION_LABEL[es.composition ?? 'no_overlap']} without vs with the engine compute-efficiency term s (held-out)`,
        '',
        engineSmSentence(v, es)!,
        '',
        markdownTable(engineSmTable(v, es)!),
      );
    }
    const exT = extrapolationTable(v);
    if (exT) L.push('### Extrapolated rows by reason', '', extrapolationSentence(v), '', markdownTable(exT));
    L.push(
      '### Where the priced time goes (scored rows, share of measured time)',
      '',
      markdownTable(resourceShareTable(v)),
    );
    if (v.double_charge)
      L.push(
        '### Decode double-charge check',
        '',
        `${v.double_charge.suspicious ? '**Suspicious**: ' : ''}${v.double_charge.note} (${v.double_charge.checked_rows} rows; max SM/HBM = ${v.double_charge.max_sm_over_hbm.toFixed(3)}).`,
        '',
      );
    const hf = hostFitSection(v);
    L.push('## Host overheads', '', ...hf.notes.map((n) => `- ${n}`), '');
    for (const t of hf.tables) L.push(markdownTable(t));
    L.push('## Per group', '', markdownTable(groupTable(v)));
    if (v.flagged?.length) {
      L.push('## Rows excluded by a flag (priced, not scored)', '', markdownTable(flaggedTable(v)));
    }
    if (v.warnings.length) L.push('## Warnings', '', ...v.warnings.map((w) => `- ${w}`), '');
    L.push('## Charts', '');
    for (const c of validationCharts(v)) L.push(`### ${c.title}`, '', `![${c.title}](${c.name})`, '');
  }
  if (inp.fitFigures?.length) {
    L.push('## Fit plots', '');
    for (const f of inp.fitFigures) L.push(`![${f.name}](${f.name})`, '');
  }
  if (v) L.push('## Every row', '', markdownTable(rowTable(v)));
  return `${L.join('\n')}\n`;
}

export function flaggedTable(v: ValidationResult): Table {
  return {
    header: ['flag', 'regime', 'n (rows)', `MAPE ${COMPOSITION_LABEL[v.headline]} (%)`, 'median APE (%)', 'bias (%)'],
    rows: (v.flagged ?? []).map((f) => [
      f.flag,
      f.regime,
      String(f.metrics.n),
      f1(f.metrics.mape_pct),
      f1(f.metrics.median_ape_pct),
      f1(f.metrics.bias_pct),
    ]),
  };
}

const CSS = `body{font-family:sans-serif;margin:24px;max-width:1240px;color:#222}
table{border-collapse:collapse;margin:8px 0 18px;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.figs{display:flex;flex-wrap:wrap;gap:12px}.figs figure{margin:0}.figs svg{width:600px;height:auto}.figs .wide svg{width:1200px}
figcaption{font-size:12px;color:#555}code{background:#f5f5f5}
.rows{max-height:600px;overflow:auto;display:block}`;

/** The self-contained HTML report (inline SVG, inline CSS, no script, no external reference). */
export function validationHtml(chip: string, v: ValidationResult | null, inp: ReportInputs = {}): string {
  const H: string[] = [
    '<!DOCTYPE html>',
    `<html lang="en"><head><meta charset="utf-8"><title>stepcal accuracy report: ${esc(chip)}</title><style>${CSS}</style></head><body>`,
    `<h1>stepcal accuracy report: ${esc(chip)}</h1>`,
  ];
  for (const s of inp.before ?? []) H.push(`<h2>${esc(s.title)}</h2>`, s.html);
  if (!v) {
    H.push(
      '<h2>Held-out validation</h2>',
      `<p>${esc(inp.noValidation ?? 'No held-out step timings for this chip.')}</p>`,
    );
  } else {
    const tt = tierTable(v);
    if (tt)
      H.push(
        '<h2>Validation tiers</h2>',
        `<p>${esc(TIER_PROTOCOL)}</p>`,
        htmlTable(tt).replace(/\*\*([^*]+)\*\*/g, '<b>$1</b>'),
        `<ul>${v.tiers!.map((t) => `<li>${esc(tierPicksLine(t))}</li>`).join('')}</ul>`,
      );
    const ot = tt ? tierOutlierTable(v) : null;
    if (ot) H.push(`<p>${esc(TIER_OUTLIER_TITLE)}</p>`, htmlTable(ot));
    H.push(
      '<h2>Headline</h2>',
      `<p>Headline composition: <b>${COMPOSITION_LABEL[v.headline]}</b>. ${esc(v.headline_reason)}.</p>`,
    );
    H.push(`<h3>Per regime, ${COMPOSITION_LABEL[v.headline]} (headline)</h3>`, htmlTable(regimeTable(v, v.headline)));
    H.push('<h3>The three compositions side by side (held-out)</h3>', htmlTable(compositionTable(v)));
    for (const es of engineSmOutcomes(v)) {
      H.push(
        `<h3>${COMPOSITION_LABEL[es.composition ?? 'no_overlap']} without vs with the engine compute-efficiency term s (held-out)</h3>`,
        `<p>${esc(engineSmSentence(v, es)!)}</p>`,
        htmlTable(engineSmTable(v, es)!),
      );
    }
    const exT = extrapolationTable(v);
    if (exT) H.push('<h3>Extrapolated rows by reason</h3>', `<p>${esc(extrapolationSentence(v))}</p>`, htmlTable(exT));
    H.push('<h2>Charts</h2><div class="figs">');
    for (const [i, c] of validationCharts(v).entries())
      H.push(
        `<figure data-chart="${esc(c.name)}"${c.name.includes('resources') ? ' class="wide"' : ''}>${uniquifyIds(c.svg, `v${i}`)}<figcaption>${esc(c.title)}</figcaption></figure>`,
      );
    H.push('</div>');
    H.push(
      '<h3>Where the priced time goes (scored rows, share of measured time)</h3>',
      htmlTable(resourceShareTable(v)),
    );
    if (v.double_charge)
      H.push(
        '<h3>Decode double-charge check</h3>',
        `<p>${esc(v.double_charge.note)} (${v.double_charge.checked_rows} rows; max SM/HBM = ${v.double_charge.max_sm_over_hbm.toFixed(3)}).</p>`,
      );
    const hf = hostFitSection(v);
    H.push('<h2>Host overheads</h2>', `<ul>${hf.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>`);
    for (const t of hf.tables) H.push(htmlTable(t));
    H.push('<h2>Per group</h2>', htmlTable(groupTable(v)));
    if (v.flagged?.length) H.push('<h2>Rows excluded by a flag (priced, not scored)</h2>', htmlTable(flaggedTable(v)));
    if (v.warnings.length) H.push(`<h2>Warnings</h2><ul>${v.warnings.map((w) => `<li>${esc(w)}</li>`).join('')}</ul>`);
    H.push(
      '<h2>Pinned evaluation</h2><ul>' +
        pinLines(v)
          .map((l) => `<li><code>${esc(l)}</code></li>`)
          .join('') +
        '</ul>',
    );
    H.push(
      '<h2>Conventions</h2><ul>' +
        conventions()
          .map((l) => `<li>${esc(l)}</li>`)
          .join('') +
        '</ul>',
    );
  }
  if (inp.fitFigures?.length) {
    H.push('<h2>Fit plots</h2><div class="figs">');
    for (const [i, f] of inp.fitFigures.entries())
      H.push(
        `<figure data-chart="${esc(f.name)}">${uniquifyIds(stripXmlProlog(f.svg), `f${i}`)}<figcaption>${esc(f.name)}</figcaption></figure>`,
      );
    H.push('</div>');
  }
  if (v) H.push('<h2>Every row</h2>', htmlTable(rowTable(v), 'rows'));
  H.push('</body></html>');
  return `${H.join('\n')}\n`;
}

/**
 * Prefix every `id` of an SVG (and the `url(#id)` / `href="#id"` references to it): inline SVGs share
 * the page's id space, so two charts' `clipPath id="plot"` would otherwise clip to the first one's.
 */
export function uniquifyIds(svg: string, prefix: string): string {
  const ids = new Set([...svg.matchAll(/\bid="([^"]+)"/g)].map((m) => m[1]!));
  let out = svg;
  for (const id of ids) {
    const e = id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out
      .replace(new RegExp(`\\bid="${e}"`, 'g'), `id="${prefix}-${id}"`)
      .replace(new RegExp(`url\\(#${e}\\)`, 'g'), `url(#${prefix}-${id})`)
      .replace(new RegExp(`href="#${e}"`, 'g'), `href="#${prefix}-${id}"`);
  }
  return out;
}

/** Inline SVG must not carry an XML prolog. */
function stripXmlProlog(svg: string): string {
  return svg.replace(/^<\?xml[^>]*>\s*/, '');
}
