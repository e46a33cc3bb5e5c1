/**
 * The one-screen summary of `stepcal calibrate` (coefficients with ci95 and fit errors, held-out
 * accuracy per regime) and the matching report section. Pure.
 */
import type { CoefficientSet } from '../registry/types.ts';
import { COMPOSITION_LABEL, goalVerdict, htmlTable, mdTable, type ExtraSection, type Table } from './validation.ts';
import { REGIMES, type ValidationResult } from '../validate/types.ts';

/** Row counts found by the measurement check. */
export interface MeasurementCheck {
  file: string;
  family: string;
  lane: string;
  rows: number;
  /** 'ok' or what is wrong (sha256 mismatch against provenance, missing provenance). */
  status: string;
}

const sig = (x: number) => {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  return a !== 0 && (a >= 1e6 || a < 1e-3) ? x.toExponential(3) : String(Number(x.toPrecision(4)));
};

const COLLECTIVE_RE = /^collective_(floor|peak_rate|transition_rate)_(.+?)_(fp16|int8|bf16|fp8)_(\d+)rank_(.+)$/;

/** Coefficient table: every non-collective entry, and one line per collective (op, dtype) summarising its widths. */
export function coefficientTable(sets: readonly CoefficientSet[]): Table {
  const rows: string[][] = [];
  const coll = new Map<string, { ranks: number[]; floors: number[]; peaks: number[] }>();
  for (const s of sets) {
    for (const { name, entry: e } of s.coefficients) {
      const m = COLLECTIVE_RE.exec(name);
      if (m) {
        const k = `${m[2]} ${m[3]}`;
        let c = coll.get(k);
        if (!c) coll.set(k, (c = { ranks: [], floors: [], peaks: [] }));
        if (m[1] === 'floor') (c.ranks.push(Number(m[4])), c.floors.push(e.value));
        if (m[1] === 'peak_rate') c.peaks.push(e.value);
        continue;
      }
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
  for (const [k, c] of [...coll].sort()) {
    const r = [...new Set(c.ranks)].sort((a, b) => a - b);
    const range = (xs: number[]) => (xs.length ? `${sig(Math.min(...xs))}–${sig(Math.max(...xs))}` : '–');
    rows.push([`collective ${k} ×${r.join('/')}`, range(c.floors), 'us (floor)', `peak ${range(c.peaks)} B/us`, '–', '–', '–', 'registry']);
  }
  return { header: ['coefficient', 'value', 'units', 'ci95', 'n (rows)', 'train geo (×)', 'holdout geo (×)', 'method'], rows };
}

/** Held-out accuracy table: one row per regime for the headline composition. */
export function heldOutTable(v: ValidationResult): Table {
  const rows: string[][] = [];
  for (const g of REGIMES) {
    const m = v.regimes[g];
    const o = v.regimes_by_composition[v.headline === 'overlap' ? 'no_overlap' : 'overlap'][g];
    if (!m) continue;
    rows.push([g, String(m.n), m.mape_pct.toFixed(1), m.median_ape_pct.toFixed(1), m.p90_ape_pct.toFixed(1), m.bias_pct.toFixed(1), o ? o.mape_pct.toFixed(1) : '–', goalVerdict(m)]);
  }
  const other = COMPOSITION_LABEL[v.headline === 'overlap' ? 'no_overlap' : 'overlap'];
  return { header: ['regime', 'n (rows)', 'MAPE (%)', 'median APE (%)', 'p90 APE (%)', 'bias (%)', `${other} MAPE (%)`, 'goal (median ≤ 10 %, p90 ≤ 25 %)'], rows };
}

/** Fixed-width text rendering of a table for the terminal. */
export function textTable(t: Table): string[] {
  const w = t.header.map((h, i) => Math.max(h.length, ...t.rows.map((r) => (r[i] ?? '').length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(w[i]!) : x.padStart(w[i]!))).join('  ').trimEnd();
  return [line(t.header), ...t.rows.map(line)];
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

/** One-screen summary lines. */
export function calibrateSummaryLines(o: CalibrateOutcome): string[] {
  const L: string[] = [];
  const byFam = new Map<string, number>();
  for (const c of o.checks) byFam.set(c.family, (byFam.get(c.family) ?? 0) + c.rows);
  L.push(`stepcal calibrate ${o.chip}: measurements ${[...byFam].map(([f, n]) => `${f} ${n}`).join(', ')} rows`);
  const bad = o.checks.filter((c) => c.status !== 'ok');
  for (const b of bad) L.push(`  check: ${b.file}: ${b.status}`);
  const n = o.sets.reduce((a, s) => a + s.coefficients.length, 0);
  L.push(`registry: ${o.registry_file} (${n} coefficients in ${o.sets.length} sets; gates passed)`);
  L.push(...textTable(coefficientTable(o.sets)).map((l) => '  ' + l));
  for (const w of o.fit_warnings) L.push(`  warning: ${w}`);
  const v = o.validation;
  if (!v) {
    L.push(`held-out accuracy: ${o.validation_note ?? 'not measured'}`);
  } else {
    const scored = v.rows.filter((r) => !r.used_for_host_fit && r.excluded === undefined).length;
    L.push(
      `held-out accuracy (${v.pinned.inputs.map((i) => i.file).join(', ')}; ${scored} scored rows of ${v.rows.length}; ` +
        `host: ${v.host_fit ? `per-engine fit --fit-host ${v.host_fit.rule} on ${v.host_fit.training_rows.length} rows, not scored` : 'registry'}; headline ${COMPOSITION_LABEL[v.headline]}):`,
    );
    L.push(...textTable(heldOutTable(v)).map((l) => '  ' + l));
    if (v.host_fit) {
      for (const f of v.host_fit.fits.filter((x) => x.composition === v.headline)) {
        L.push(`  host fit ${f.engine}: ${f.terms.map((t) => `${t.name} ${t.identified ? t.value_us.toFixed(0) : 'n/i'}`).join(', ')}${f.sm_scale ? `, s ${f.sm_scale.value.toFixed(3)}` : ''}`);
      }
    }
    const es = v.engine_sm;
    if (es) {
      const side = (x: typeof es.with) => REGIMES.filter((g) => x.regimes[g]).map((g) => `${g} ${x.regimes[g]!.median_ape_pct.toFixed(1)}/${x.regimes[g]!.p90_ape_pct.toFixed(1)}/${x.regimes[g]!.bias_pct.toFixed(1)}`).join('; ');
      L.push(`  engine compute-efficiency s (${es.scales.map((x) => `${x.engine} ${x.value.toFixed(3)}`).join(', ')}): headline NoOverlap ${es.used ? 'WITH' : 'WITHOUT'} s — ${es.reason}`);
      L.push(`    NoOverlap median/p90/bias % without s: ${side(es.without)}`);
      L.push(`    NoOverlap median/p90/bias % with s:    ${side(es.with)}`);
    }
    const r = o.validation_registry_host;
    if (r) {
      L.push(`  with the registry's host terms instead: ` + REGIMES.filter((g) => r.regimes[g]).map((g) => `${g} MAPE ${r.regimes[g]!.mape_pct.toFixed(1)}% bias ${r.regimes[g]!.bias_pct.toFixed(1)}%`).join('; '));
    }
  }
  if (o.report_files.length) L.push(`report: ${o.report_files.join(', ')}`);
  return L;
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
    ...o.fit_warnings.map((w) => `Warning: ${w}`),
    ...(o.validation ? [] : [`Held-out accuracy: ${o.validation_note ?? 'not measured'}`]),
    ...(o.validation_registry_host
      ? [
          `With the registry's host terms instead of the per-engine fit: ${REGIMES.filter((g) => o.validation_registry_host!.regimes[g])
            .map((g) => `${g} MAPE ${o.validation_registry_host!.regimes[g]!.mape_pct.toFixed(1)} %, bias ${o.validation_registry_host!.regimes[g]!.bias_pct.toFixed(1)} %`)
            .join('; ')}.`,
        ]
      : []),
  ];
  return {
    title: 'Calibration',
    md: [...notes.map((n) => `- ${n}`), '', '### Measurements checked', '', mdTable(checks), '### Coefficients', '', mdTable(coef)].join('\n'),
    html: '<ul>' + notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('') + '</ul><h3>Measurements checked</h3>' + htmlTable(checks) + '<h3>Coefficients</h3>' + htmlTable(coef),
  };
}

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/`/g, '');
}
