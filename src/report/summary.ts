/** One-screen text summaries of a validation (stdout of `validate` and `calibrate`). Pure. */
import {
  TIER_OUTLIER_TITLE,
  TIER_PROTOCOL,
  tierOutlierTable,
  tierPicksLine,
  tierShortLine,
  tierTable,
} from './tiers.ts';
import { COMPOSITIONS, REGIMES, type ValidationResult } from '../validate/types.ts';
import {
  COMPOSITION_LABEL,
  compositionTable,
  engineSmOutcomes,
  engineSmSentence,
  engineSmTable,
  extrapolationSentence,
  extrapolationTable,
  goalVerdict,
  groupTable,
  HEADLINE_RULE,
  regimeTable,
  resourceShareTable,
  smScaleText,
} from './validation.ts';
import { fmtDec } from '../core/render/format.ts';
import { largeStepFactorText, mibText } from './tiers.ts';
import { type Column, markdownTable, tableLines } from '../core/render/table.ts';

type Metrics = NonNullable<ValidationResult['regimes'][keyof ValidationResult['regimes']]>;

/** Fixed-width columns of the per-composition table (no gap: each width includes its leading spaces). */
const COMPOSITION_COLUMNS: Column[] = [
  { header: 'composition', align: 'left', width: 12 },
  { header: 'regime', align: 'left', width: 13 },
  { header: 'n', width: 5 },
  { header: 'MAPE%', width: 8 },
  { header: 'med%', width: 7 },
  { header: 'p90%', width: 7 },
  { header: 'bias%', width: 8 },
  { header: 'geo×', width: 7 },
  { header: 'shape%', width: 8 },
];

/** The same for the with/without-s comparison (first header is the composition's name). */
const ENGINE_SM_WIDTHS = [13, 13, 5, 7, 7, 8, 8];

/** One composition's rows (regimes present, then pooled) as cells of COMPOSITION_COLUMNS, and the goal verdicts. */
function compositionRows(v: ValidationResult, c: (typeof COMPOSITIONS)[number]): { cells: string[][]; goal: string[] } {
  const rows: Array<[string, Metrics]> = [];
  for (const g of REGIMES) {
    const m = v.regimes_by_composition[c][g];
    if (m) rows.push([g, m]);
  }
  rows.push(['pooled', v.overall_by_composition[c]]);
  const label = (c === v.headline ? '*' : ' ') + COMPOSITION_LABEL[c];
  return {
    cells: rows.map(([g, m]) => [
      label,
      g,
      String(m.n),
      ...[m.mape_pct, m.median_ape_pct, m.p90_ape_pct, m.bias_pct].map((x) => fmtDec(x, 1)),
      fmtDec(m.geo_mean_ratio, 3),
      fmtDec(m.shape_mape_pct, 1),
    ]),
    goal: rows.map(([g, m]) => (g === 'pooled' ? '' : goalVerdict(m))),
  };
}

/** The per-composition table: header, then every composition's rows, each line ending in its goal verdict. */
function compositionTableLines(v: ValidationResult): string[] {
  const parts = COMPOSITIONS.map((c) => compositionRows(v, c));
  const lines = tableLines(
    COMPOSITION_COLUMNS,
    parts.flatMap((p) => p.cells),
    { gap: '', trimEnd: false },
  );
  const goals = ['goal (median ≤ 10 %, p90 ≤ 25 %)', ...parts.flatMap((p) => p.goal)];
  return lines.map((l, i) => `${l}  ${goals[i]}`);
}

/** Per-regime held-out lines for the three compositions, headline marked. */
export function validationSummaryLines(v: ValidationResult): string[] {
  const L: string[] = [];
  const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined).length;
  const excluded = v.rows.filter((r) => r.excluded !== undefined).length;
  const training = v.rows.filter((r) => r.used_for_host_fit).length;
  L.push(
    `held-out rows: ${v.rows.length} priced, ${scored} scored, ${excluded} excluded by flag, ${training} trained the host fit`,
  );
  if (v.tiers?.length) {
    L.push('validation tiers, median / p90 APE % per regime ((b) is the headline; target median ≤ 6, p90 ≤ 15):');
    for (const t of v.tiers) L.push(`  ${tierShortLine(t)}`);
  }
  // Not "headline": with tiers, tier (b) is the headline; this line names the composition table's own pick.
  const proto = v.host_fit ? `host terms fitted by --fit-host ${v.host_fit.rule}` : "the registry's host terms";
  L.push(
    `compositions with ${proto} (apart from the tiers), * = ${COMPOSITION_LABEL[v.headline]}: ${v.headline_reason}`,
  );
  L.push(...compositionTableLines(v));
  if (v.host_fit) {
    for (const f of v.host_fit.fits.filter((x) => x.composition === v.headline)) {
      L.push(
        `host fit (${v.host_fit.rule}) ${f.engine}: ` +
          f.terms
            .map(
              (t) =>
                `${t.name} ${!t.identified ? 'n/i' : t.name.endsWith('_us') ? t.value_us.toFixed(1) : largeStepFactorText(t.value_us, f.large_step_message_bytes)}`,
            )
            .join(', ') +
          (f.sm_scale ? `, s ${smScaleText(f.sm_scale)}` : '') +
          ` (n ${f.n_train})`,
      );
    }
    for (const n of v.host_fit.notes) L.push(`note: ${n}`);
  }
  for (const es of engineSmOutcomes(v)) {
    const name = COMPOSITION_LABEL[es.composition ?? 'no_overlap'];
    L.push(
      `engine compute-efficiency term s (${name}, held-out): ${es.scales.map((x) => `${x.engine} s ${smScaleText(x)}`).join(', ')}; headline ${es.used ? 'with' : 'without'} s — ${es.reason}`,
    );
    const headers = [`  ${name}`, 'regime', 'n', 'med%', 'p90%', 'bias%', 'MAPE%'];
    const columns: Column[] = headers.map((header, i) => ({
      header,
      width: ENGINE_SM_WIDTHS[i]!,
      align: i < 2 ? 'left' : 'right',
    }));
    const rows: string[][] = [];
    for (const [label, side] of [
      ['without s', es.without],
      ['with s', es.with],
    ] as const) {
      for (const g of REGIMES) {
        const m = side.regimes[g];
        if (m)
          rows.push([
            `  ${label}`,
            g,
            String(m.n),
            ...[m.median_ape_pct, m.p90_ape_pct, m.bias_pct, m.mape_pct].map((x) => fmtDec(x, 1)),
          ]);
      }
    }
    L.push(...tableLines(columns, rows, { gap: '', trimEnd: false }));
  }
  if (v.extrapolation?.length) {
    L.push(
      `extrapolated rows by reason (all priced / scored): ` +
        v.extrapolation.map((e) => `${e.reason}: ${e.rows} / ${e.scored_rows}`).join('; '),
    );
  }
  if (v.double_charge) L.push(`double-charge check: ${v.double_charge.note}`);
  for (const w of v.warnings) L.push(`warning: ${w}`);
  return L;
}

/** The accuracy block for docs (markdown), generated, never typed by hand. */
export function accuracyMarkdown(v: ValidationResult, command: string): string {
  const L: string[] = [];
  L.push(`### ${v.chip}`, '');
  L.push(
    `Generated by \`${command}\` (stepcal ${v.pinned.stepcal_version}, registry sha256 \`${v.pinned.registry_sha256.slice(0, 16)}…\`).`,
    '',
  );
  L.push(
    `Inputs: ${v.pinned.inputs.map((i) => `\`${i.file}\` (sha256 \`${i.sha256.slice(0, 16)}…\`)`).join(', ')}.`,
    '',
  );
  const tt = tierTable(v);
  if (tt) {
    L.push('Validation tiers (the headline is (b), cross-deployment):', '', TIER_PROTOCOL, '', markdownTable(tt));
    L.push(...v.tiers!.map((t) => `- ${tierPicksLine(t)}`), '');
    const ot = tierOutlierTable(v);
    if (ot) L.push(TIER_OUTLIER_TITLE, '', markdownTable(ot));
    L.push(
      'The in-file host fit below (`--fit-host`) is tier (d)’s protocol with the composition chosen on the scored rows; kept for comparison.',
      '',
    );
  }
  L.push(`Headline: **${COMPOSITION_LABEL[v.headline]}**: ${v.headline_reason}.`, '');
  L.push(markdownTable(regimeTable(v, v.headline)));
  L.push(`${HEADLINE_RULE}`, '');
  L.push(
    'The three compositions side by side (held-out; NoOverlap and CMOverlap as the headline uses them):',
    '',
    markdownTable(compositionTable(v)),
  );
  L.push(
    'Where the priced time goes (scored rows; each resource as % of the measured time, headline composition):',
    '',
    markdownTable(resourceShareTable(v)),
  );
  const g = groupTable(v);
  const worst = [...g.rows].sort((a, b) => Number(b[7]) - Number(a[7])).slice(0, 5);
  L.push('Worst groups by MAPE:', '', markdownTable({ header: g.header, rows: worst }));
  if (v.host_fit) {
    for (const f of v.host_fit.fits.filter((x) => x.composition === v.headline)) {
      L.push(
        `Host fit (${v.host_fit.rule}, ${f.n_train} training rows, not scored, least squares ${v.host_fit.weighting === 'absolute' ? 'in µs' : 'on relative error'}) for ${f.engine}: ` +
          f.terms
            .map(
              (t) =>
                `${t.name} = ${t.identified ? termText(t.name, t.value_us, f.large_step_message_bytes) : 'not identified'}`,
            )
            .join(', ') +
          (f.sm_scale ? `, s = ${smScaleText(f.sm_scale)}` : '') +
          '.',
        '',
      );
    }
    L.push(...v.host_fit.notes.map((n) => `- ${n}`), '');
  }
  for (const es of engineSmOutcomes(v)) {
    const name = COMPOSITION_LABEL[es.composition ?? 'no_overlap'];
    L.push(
      engineSmSentence(v, es)!,
      '',
      `${name} without and with the engine compute-efficiency term s (same training and scored rows):`,
      '',
      markdownTable(engineSmTable(v, es)!),
    );
  }
  const exT = extrapolationTable(v);
  if (exT) L.push(`Extrapolated rows by reason: ${extrapolationSentence(v)}`, '', markdownTable(exT));
  if (v.double_charge) L.push(`Decode double-charge check: ${v.double_charge.note}.`, '');
  return `${L.join('\n')}\n`;
}

/** A fitted term's value with its unit: µs terms to 0.1 µs; the large-step factor × NVLink with its threshold. */
function termText(name: string, value: number, large_step_message_bytes: number | undefined): string {
  if (name.endsWith('_us')) return `${value.toFixed(1)} µs`;
  return `${value.toFixed(2)} × priced NVLink on steps with a collective message of ≥ ${large_step_message_bytes === undefined ? '?' : mibText(large_step_message_bytes)}`;
}
