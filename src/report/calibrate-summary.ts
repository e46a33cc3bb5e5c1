/**
 * The one-screen summary of `stepcal calibrate` (coefficients with ci95 and fit errors, held-out
 * accuracy per regime) and the matching report section. Pure.
 */
import { groupBy } from '../core/numeric/stats.ts';
import type { MeasurementCheck } from '../measurements/check.ts';
import { fmtSigExp } from '../core/render/format.ts';
import type { CoefficientSet, NamedEntry } from '../core/schemas/registry.ts';
import { htmlTable, markdownTable, type Table, textTable } from '../core/render/table.ts';
import {
  COMPOSITION_LABEL,
  engineSmOutcomes,
  goalVerdict,
  otherCompositions,
  smScaleText,
  type ExtraSection,
} from './validation.ts';
import { REGIMES, type Composition, type ValidationResult } from '../validate/types.ts';
import { largeStepFactorText } from './tiers.ts';

/** 4 significant digits, exponent form (3 decimals) for |x| ≥ 1e6 or < 1e-3. For the report. */
const sig = (x: number): string => fmtSigExp(x, 4, { expAbove: 1e6, expBelow: 1e-3, expDigits: 3 });

/** 3 significant digits, exponent without "+" for |x| ≥ 1e5 or < 1e-3 (`0.958`, `71.3`, `1.60e6`). For the terminal. */
export const sig3 = (x: number): string =>
  fmtSigExp(x, 3, { expAbove: 1e5, expBelow: 1e-3, expDigits: 2, compact: true });

/** Terminal abbreviations of the registry units (the report keeps the registry spelling). */
const UNIT_ABBR: Record<string, string> = {
  dimensionless: '1',
  tokens: 'tok',
  us_per_transfer: 'µs',
  bytes_per_us: 'B/µs',
  flops_per_us: 'FLOP/µs',
  us_per_request: 'µs/req',
  us_per_token: 'µs/tok',
  us_per_layer: 'µs/layer',
  us_per_step: 'µs/step',
  us_per_hop: 'µs/hop',
  us_per_load: 'µs/load',
  bytes_per_rank: 'B/rank',
  sm_count: 'SMs',
};

const COLLECTIVE_RE = /^collective_(floor|peak_rate|transition_rate)_(.+?)_(fp16|int8|bf16|fp8)_(\d+)rank_(.+)$/;

/** One collective (op, dtype) condensed over its widths. */
interface CollectiveGroup {
  key: string;
  /** Widths whose floor was measured (fitted on rows). */
  measured: number[];
  /** Widths whose floor is not measured (width extrapolations: method assumed), with their methods. */
  other: number[];
  methods: Set<string>;
  floors: number[];
  peaks: number[];
}

function collectiveGroups(sets: readonly CoefficientSet[]): CollectiveGroup[] {
  const coll = new Map<string, CollectiveGroup>();
  for (const s of sets) {
    for (const { name, entry: e } of s.coefficients) {
      const m = COLLECTIVE_RE.exec(name);
      if (!m) continue;
      const k = `${m[2]} ${m[3]}`;
      let c = coll.get(k);
      if (!c) {
        c = { key: k, measured: [], other: [], methods: new Set(), floors: [], peaks: [] };
        coll.set(k, c);
      }
      if (m[1] === 'floor') {
        (e.method === 'measured' ? c.measured : c.other).push(Number(m[4]));
        c.methods.add(e.method);
        c.floors.push(e.value);
      }
      if (m[1] === 'peak_rate') c.peaks.push(e.value);
    }
  }
  for (const c of coll.values()) for (const xs of [c.measured, c.other]) xs.sort((a, b) => a - b);
  return [...coll.values()].sort((a, b) => a.key.localeCompare(b.key));
}

/** `2/4/8 +16 extrapolated` style width label; `extrap` names the non-measured widths. */
function widthLabel(c: CollectiveGroup, extrap: string): string {
  const m = c.measured.join('/');
  const o = c.other.length ? `+${c.other.join('/')} ${extrap}` : '';
  return [m, o].filter(Boolean).join(' ');
}

/** Coefficient table: every non-collective entry, and one line per collective (op, dtype) summarising its widths. */
export function coefficientTable(sets: readonly CoefficientSet[]): Table {
  const rows: string[][] = [];
  for (const s of sets) {
    for (const { name, entry: e } of s.coefficients) {
      if (COLLECTIVE_RE.test(name)) continue;
      const ev = e.evidence;
      const n = ev?.train_error?.n ?? ev?.inputs?.[0]?.rows_used;
      rows.push([
        name,
        sig(e.value),
        e.units,
        e.ci95 ? `[${sig(e.ci95[0])}, ${sig(e.ci95[1])}]` : '–',
        n === undefined ? '–' : String(n),
        ev?.train_error ? sig(ev.train_error.geo) : '–',
        ev?.holdout_error ? sig(ev.holdout_error.geo) : '–',
        e.method,
      ]);
    }
  }
  const range = (xs: number[]) => (xs.length ? `${sig(Math.min(...xs))}–${sig(Math.max(...xs))}` : '–');
  for (const c of collectiveGroups(sets)) {
    rows.push([
      `collective ${c.key} ×${widthLabel(c, 'extrapolated (method assumed)')}`,
      range(c.floors),
      'us (floor)',
      `peak ${range(c.peaks)} B/us`,
      '–',
      '–',
      '–',
      [...c.methods].sort().join(' + '),
    ]);
  }
  return {
    header: ['coefficient', 'value', 'units', 'ci95', 'n (rows)', 'train geo (×)', 'holdout geo (×)', 'method'],
    rows,
  };
}

const GEMM_RE = /^gemm_(eps_max|m_half|n_half|k_half)_(.+)$/;
const HOST_RE = /^host_/;

/**
 * The terminal's GEMM table: one row per dtype with eps_max and its ci95, the half-saturation sizes
 * m½ (tokens), n½ and k½ (elements), the rows each fit used (eps_max/m½ fit, n½/k½ fit) and their holdout
 * geometric errors. The ci95 of m½, n½ and k½ are in the report.
 */
export function gemmTextTable(sets: readonly CoefficientSet[]): Table {
  const by = new Map<string, Partial<Record<string, NamedEntry['entry']>>>();
  for (const s of sets)
    for (const { name, entry } of s.coefficients) {
      const m = GEMM_RE.exec(name);
      if (!m) continue;
      let d = by.get(m[2]!);
      if (!d) {
        d = {};
        by.set(m[2]!, d);
      }
      d[m[1]!] = entry;
    }
  const v = (e: NamedEntry['entry'] | undefined) => (e ? sig3(e.value) : '–');
  const n = (e: NamedEntry['entry'] | undefined) =>
    String(e?.evidence?.train_error?.n ?? e?.evidence?.inputs?.[0]?.rows_used ?? '–');
  const g = (e: NamedEntry['entry'] | undefined) =>
    e?.evidence?.holdout_error ? sig3(e.evidence.holdout_error.geo) : '–';
  return {
    header: ['gemm', 'eps_max', 'ci95', 'm½ tok', 'n½', 'k½', 'rows eps/nk', 'holdout geo× eps/nk'],
    rows: [...by].map(([dtype, d]) => [
      dtype,
      v(d.eps_max),
      d.eps_max?.ci95 ? `[${sig3(d.eps_max.ci95[0])}, ${sig3(d.eps_max.ci95[1])}]` : '–',
      v(d.m_half),
      v(d.n_half),
      v(d.k_half),
      `${n(d.eps_max)}/${n(d.n_half)}`,
      `${g(d.eps_max)}/${g(d.n_half)}`,
    ]),
  };
}

/** Host terms on a line per method (`host (assumed): admission_per_request 40000 µs/req, ...`), for wrapping. */
export function hostTextLines(sets: readonly CoefficientSet[]): string[] {
  const host = sets.flatMap((s) => s.coefficients).filter((c) => HOST_RE.test(c.name));
  const item = ({ name, entry: e }: NamedEntry) =>
    `${name.replace(HOST_RE, '')} ${sig3(e.value)} ${UNIT_ABBR[e.units] ?? e.units}${e.ci95 ? ` [${sig3(e.ci95[0])}, ${sig3(e.ci95[1])}]` : ''}`;
  return [...groupBy(host, (c) => c.entry.method)].map(
    ([method, items]) => `host (${method}): ${items.map(item).join(', ')}`,
  );
}

/**
 * The terminal's lines for the remaining coefficients, one fitted law per line (wrapped by
 * `wrapLine`): entries of one family fitted together (same inputs and train error) share a line,
 * labelled by their names' common part (`moe_expert_*_fp8`) with rows and train/holdout geometric
 * error, then each entry's rest of name, value (3 significant digits) and abbreviated unit; a lone
 * entry also gets its ci95; an entry not `measured` names its method. Values with ci95 for every entry
 * are in the report. GEMM, host and collective entries have their own renderings (`gemmTextTable`,
 * `hostTextLines`, `collectiveTextTable`).
 */
export function lawLines(sets: readonly CoefficientSet[]): string[] {
  const groups = new Map<string, NamedEntry[]>();
  for (const s of sets) {
    for (const c of s.coefficients) {
      if (COLLECTIVE_RE.test(c.name) || GEMM_RE.test(c.name) || HOST_RE.test(c.name)) continue;
      const ev = c.entry.evidence;
      const key = ev
        ? [
            ev.family,
            ...(ev.inputs ?? []).map((i) => `${i.file} ${i.filter ?? ''}`),
            ev.train_error?.geo,
            ev.train_error?.n,
          ].join('|')
        : c.name;
      groups.set(key, [...(groups.get(key) ?? []), c]);
    }
  }
  return [...groups.values()].map(lawLine);
}

/** One law's line (lawLines). */
function lawLine(entries: readonly NamedEntry[]): string {
  const names = entries.map((c) => c.name.split('_'));
  const pre = entries.length > 1 ? commonWords(names) : 0;
  const suf =
    entries.length > 1
      ? commonWords(
          names.map((w) => [...w].reverse()),
          pre,
        )
      : 0;
  const label =
    entries.length > 1
      ? [...names[0]!.slice(0, pre), '*', ...names[0]!.slice(names[0]!.length - suf)].join('_')
      : entries[0]!.name;
  const ev = entries[0]!.entry.evidence;
  const n = ev?.train_error?.n ?? ev?.inputs?.[0]?.rows_used;
  const geo =
    ev?.train_error || ev?.holdout_error
      ? `geo× ${ev.train_error ? sig3(ev.train_error.geo) : '–'}/${ev.holdout_error ? sig3(ev.holdout_error.geo) : '–'}`
      : '';
  const stats = [n === undefined ? '' : `n ${n}`, geo].filter(Boolean).join(', ');
  const item = ({ entry: e }: NamedEntry, i: number) => {
    const rest = entries.length > 1 ? `${names[i]!.slice(pre, names[i]!.length - suf).join('_')} ` : '';
    const unit = UNIT_ABBR[e.units] ?? e.units;
    const ci = entries.length === 1 && e.ci95 ? ` [${sig3(e.ci95[0])}, ${sig3(e.ci95[1])}]` : '';
    const how = e.method === 'measured' ? '' : ` (${e.method})`;
    return `${rest}${sig3(e.value)}${unit === '1' ? '' : ` ${unit}`}${ci}${how}`;
  };
  return `  ${label}${stats ? ` (${stats})` : ''}: ${entries.map(item).join(', ')}`;
}

/** How many leading words every list shares, leaving at least one word beyond `reserved` in each. */
function commonWords(lists: readonly string[][], reserved = 0): number {
  const most = Math.min(...lists.map((l) => l.length)) - reserved - 1;
  let k = 0;
  while (k < most && lists.every((l) => l[k] === lists[0]![k])) k++;
  return k;
}

/**
 * Collectives per (op, dtype): widths (measured, then `+N extrap.` for widths that are not measured —
 * width extrapolations, method assumed), floor range (µs), peak-rate range (GB/s = bytes/µs ÷ 1000), methods.
 */
export function collectiveTextTable(sets: readonly CoefficientSet[]): Table {
  const range = (xs: number[]) => (xs.length ? `${sig3(Math.min(...xs))}–${sig3(Math.max(...xs))}` : '–');
  return {
    header: ['collective', 'ranks', 'floor µs', 'peak GB/s', 'method'],
    rows: collectiveGroups(sets).map((c) => [
      c.key,
      widthLabel(c, 'extrap.'),
      range(c.floors),
      range(c.peaks.map((b) => b / 1e3)),
      [...c.methods].sort().join('+'),
    ]),
  };
}

/** Held-out accuracy table: one row per regime for the headline composition, the other two compositions' MAPE beside it. */
export function heldOutTable(v: ValidationResult): Table {
  const rows: string[][] = [];
  const others = otherCompositions(v.headline);
  for (const g of REGIMES) {
    const m = v.regimes[g];
    if (!m) continue;
    const o = others.map((c) => v.regimes_by_composition[c][g]);
    rows.push([
      g,
      String(m.n),
      m.mape_pct.toFixed(1),
      m.median_ape_pct.toFixed(1),
      m.p90_ape_pct.toFixed(1),
      m.bias_pct.toFixed(1),
      ...o.map((x) => (x ? x.mape_pct.toFixed(1) : '–')),
      goalVerdict(m),
    ]);
  }
  return {
    header: [
      'regime',
      'n (rows)',
      'MAPE (%)',
      'median APE (%)',
      'p90 APE (%)',
      'bias (%)',
      ...others.map((c) => `${COMPOSITION_LABEL[c]} MAPE (%)`),
      'goal (median ≤ 10 %, p90 ≤ 25 %)',
    ],
    rows,
  };
}

/** Short composition names for the terminal table (≤ 100 columns). */
const SHORT: Record<Composition, string> = { no_overlap: 'NoOv', cm_overlap: 'CMOv', overlap: 'Ov' };

/** The goal verdict in a few characters: `met`, or how far above the goal each percentile is (`med +9.1 p90 +2.1`). */
function shortVerdict(m: { median_ape_pct: number; p90_ape_pct: number }): string {
  const full = goalVerdict(m as never);
  if (full === 'met') return 'met';
  const dm = /median short by ([0-9.]+)/.exec(full)?.[1];
  const dp = /p90 short by ([0-9.]+)/.exec(full)?.[1];
  return `${[dm ? `med +${dm}` : '', dp ? `p90 +${dp}` : ''].filter(Boolean).join(' ')} pp`;
}

/** The terminal's held-out table (≤ 100 columns). */
export function compactHeldOutTable(v: ValidationResult): Table {
  const t = heldOutTable(v);
  const others = otherCompositions(v.headline);
  return {
    header: [
      'regime',
      'n',
      'MAPE%',
      'med%',
      'p90%',
      'bias%',
      ...others.map((c) => `${SHORT[c]} MAPE%`),
      'goal med≤10 p90≤25',
    ],
    rows: t.rows.map((r) => {
      const m = v.regimes[r[0] as (typeof REGIMES)[number]]!;
      return [...r.slice(0, 6 + others.length), shortVerdict(m)];
    }),
  };
}

/** Terminal width the summary keeps to. */
export const SUMMARY_WIDTH = 100;

/**
 * Wrap one line to `width` columns, breaking after ", " or "; " where it can (so `7 µs/step` stays
 * whole) and between words otherwise; continuation lines get the line's indent plus two spaces. A word
 * longer than the width is left whole.
 */
export function wrapLine(line: string, width = SUMMARY_WIDTH): string[] {
  if (line.length <= width) return [line];
  const lead = line.slice(0, line.length - line.trimStart().length);
  const indent = `${lead}  `;
  const out: string[] = [];
  let cur = lead;
  const fresh = () => cur.trim() === '';
  const push = (piece: string, sep: string) => {
    const cand = fresh() ? cur + piece : cur + sep + piece;
    if (cand.length <= width || fresh()) cur = cand;
    else {
      out.push(cur);
      cur = indent + piece;
    }
  };
  for (const chunk of line.trim().split(/(?<=[,;]) /)) {
    const room = width - (fresh() ? cur.length : cur.length + 1);
    if (chunk.length <= room || chunk.length <= width - indent.length) push(chunk, ' ');
    else for (const [i, word] of chunk.split(' ').entries()) push(word, i === 0 && fresh() ? '' : ' ');
  }
  if (!fresh()) out.push(cur);
  return out;
}

export interface CalibrateOutcome {
  chip: string;
  checks: MeasurementCheck[];
  sets: CoefficientSet[];
  fit_refusals: string[];
  fit_warnings: string[];
  registry_file: string;
  /** Held-out validation with per-engine host terms fitted (`--fit-host`), or null. */
  validation: ValidationResult | null;
  /** Same rows with the registry's host terms, for comparison; null when not run or failed. */
  validation_registry_host: ValidationResult | null;
  /** Why there is no validation (no held-out files, or the error). */
  validation_note?: string;
  report_files: string[];
}

/** Every warning of a calibration (fit, then validation), each once, in first-seen order. For stderr. */
export function calibrateWarnings(o: CalibrateOutcome): string[] {
  return [...new Set([...o.fit_warnings, ...(o.validation?.warnings ?? [])])];
}

/**
 * One-screen summary lines (≤ SUMMARY_WIDTH columns each; about 40–50 lines). Warnings are not in it:
 * the caller prints `calibrateWarnings` on stderr, and the summary says how many there were.
 */
export function calibrateSummaryLines(o: CalibrateOutcome): string[] {
  const L: string[] = [];
  const byFam = new Map<string, number>();
  for (const c of o.checks) byFam.set(c.family, (byFam.get(c.family) ?? 0) + c.rows);
  L.push(`stepcal calibrate ${o.chip}: rows ${[...byFam].map(([f, n]) => `${f} ${n}`).join(', ')}`);
  const bad = o.checks.filter((c) => c.status !== 'ok');
  for (const b of bad) L.push(`  check: ${b.file}: ${b.status}`);
  const n = o.sets.reduce((a, s) => a + s.coefficients.length, 0);
  L.push(`registry: ${o.registry_file} (${n} coefficients in ${o.sets.length} sets; gates passed)`);
  const gemm = gemmTextTable(o.sets);
  if (gemm.rows.length) L.push(...textTable(gemm).map((l) => `  ${l}`));
  L.push(...lawLines(o.sets));
  L.push(...hostTextLines(o.sets).map((l) => `  ${l}`));
  const coll = collectiveTextTable(o.sets);
  if (coll.rows.length) L.push(...textTable(coll).map((l) => `  ${l}`));
  const warnings = calibrateWarnings(o);
  if (warnings.length) L.push(`${warnings.length} warning(s): printed once each on stderr, and in the report`);
  const v = o.validation;
  if (!v) {
    L.push(`held-out accuracy: ${o.validation_note ?? 'not measured'}`);
  } else {
    const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined).length;
    L.push(
      `held-out accuracy (${v.pinned.inputs.map((i) => i.file).join(', ')}; ${scored} scored rows of ${v.rows.length}; ` +
        `host: ${v.host_fit ? `per-engine fit --fit-host ${v.host_fit.rule} on ${v.host_fit.training_rows.length} rows, not scored` : 'registry'}; headline ${COMPOSITION_LABEL[v.headline]}):`,
    );
    L.push(...textTable(compactHeldOutTable(v)).map((l) => `  ${l}`));
    if (v.host_fit) {
      for (const f of v.host_fit.fits.filter((x) => x.composition === v.headline)) {
        L.push(
          `  host fit ${f.engine} (µs terms): ${f.terms.map((t) => `${t.name.replace(/_us$/, '')} ${!t.identified ? 'n/i' : t.name.endsWith('_us') ? t.value_us.toFixed(0) : largeStepFactorText(t.value_us, f.large_step_message_bytes)}`).join(', ')}${f.sm_scale ? `, s ${smScaleText(f.sm_scale)}` : ''}`,
        );
      }
    }
    for (const es of engineSmOutcomes(v)) {
      const side = (x: typeof es.with) =>
        REGIMES.filter((g) => x.regimes[g])
          .map(
            (g) =>
              `${g} ${x.regimes[g]!.median_ape_pct.toFixed(1)}/${x.regimes[g]!.p90_ape_pct.toFixed(1)}/${x.regimes[g]!.bias_pct.toFixed(1)}`,
          )
          .join('; ');
      L.push(
        `  engine compute-efficiency s (${COMPOSITION_LABEL[es.composition ?? 'no_overlap']}): ${es.scales.map((x) => `${x.engine} ${x.value.toFixed(3)}`).join(', ')}; headline ${es.used ? 'WITH' : 'WITHOUT'} s; med/p90/bias %:`,
      );
      L.push(`    without s: ${side(es.without)}`);
      L.push(`    with s:    ${side(es.with)}`);
    }
    const r = o.validation_registry_host;
    if (r) {
      L.push(
        `  with the registry's host terms instead: ` +
          REGIMES.filter((g) => r.regimes[g])
            .map((g) => `${g} MAPE ${r.regimes[g]!.mape_pct.toFixed(1)}% bias ${r.regimes[g]!.bias_pct.toFixed(1)}%`)
            .join('; '),
      );
    }
  }
  if (o.report_files.length) L.push(`report: ${o.report_files.join(', ')}`);
  return L.flatMap((l) => wrapLine(l));
}

/** The calibration section placed at the top of the report. */
export function calibrateSection(o: CalibrateOutcome): ExtraSection {
  const checks: Table = {
    header: ['file', 'family', 'lane', 'rows (count)', 'check'],
    rows: o.checks.map((c) => [c.file, c.family, c.lane, String(c.rows), c.status]),
  };
  const coef = coefficientTable(o.sets);
  const notes = [
    `Registry written: \`${o.registry_file}\`; plausibility gates passed.`,
    ...calibrateWarnings(o).map((w) => `Warning: ${w}`),
    ...(o.validation ? [] : [`Held-out accuracy: ${o.validation_note ?? 'not measured'}`]),
    ...(o.validation_registry_host
      ? [
          `With the registry's host terms instead of the per-engine fit: ${REGIMES.filter(
            (g) => o.validation_registry_host!.regimes[g],
          )
            .map(
              (g) =>
                `${g} MAPE ${o.validation_registry_host!.regimes[g]!.mape_pct.toFixed(1)} %, bias ${o.validation_registry_host!.regimes[g]!.bias_pct.toFixed(1)} %`,
            )
            .join('; ')}.`,
        ]
      : []),
  ];
  return {
    title: 'Calibration',
    md: [
      ...notes.map((n) => `- ${n}`),
      '',
      '### Measurements checked',
      '',
      markdownTable(checks),
      '### Coefficients',
      '',
      markdownTable(coef),
    ].join('\n'),
    html:
      '<ul>' +
      notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('') +
      '</ul><h3>Measurements checked</h3>' +
      htmlTable(checks) +
      '<h3>Coefficients</h3>' +
      htmlTable(coef),
  };
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/`/g, '');
}
