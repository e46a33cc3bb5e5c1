/**
 * The fit report: fits/<chip>/README.md, the per-family SVGs and the one-screen summary, drawn from
 * `fitAll`'s typed result (src/fit/index.ts) by the per-family modules src/report/fit-<family>.ts;
 * and the (path, text) pairs a fit writes (registry + report). Pure: the command layer
 * (src/cli/fit-outputs.ts) does the writing.
 */
import path from 'node:path';
import { type Chip, REPO_ROOT } from '../core/catalog/chip.ts';
import { blisPublished } from '../fit/blis.ts';
import { fmt } from '../fit/common.ts';
import type { FitAllResult, FitFamilyResult } from '../fit/index.ts';
import type { MoeExpertsFit } from '../fit/moe-experts.ts';
import type { FittedCoefficient } from '../fit/types.ts';
import { decodeSection, prefillSection } from './fit-attention.ts';
import { collectiveSection } from './fit-collective.ts';
import type { FitFigure, FitSection } from './fit-common.ts';
import { gemmSection } from './fit-gemm.ts';
import { hbmSection } from './fit-hbm.ts';
import { hostSection } from './fit-host.ts';
import { moeSection } from './fit-moe.ts';
import { moeExpertsSection } from './fit-moe-experts.ts';
import { recurrentSection } from './fit-recurrent.ts';
import { sparseSection } from './fit-sparse.ts';
import type { SparseFit } from '../fit/sparse.ts';
import { mlaSection } from './fit-mla.ts';
import type { MlaFit } from '../fit/mla.ts';
import type { CoefficientEntry, CoefficientSet, Evidence } from '../core/schemas/registry.ts';

/** A fit run drawn: README text, figures (sorted by name) and summary lines. */
export interface FitReport {
  readme: string;
  figures: FitFigure[];
  summary: string[];
}

const EMPTY: FitSection = { md: '', summary: [], figures: [] };

/** The report section of one family's result (empty for a family that had no measurements). */
export function familySection(f: FitFamilyResult, chip: Chip): FitSection {
  if ('ramps' in f) return gemmSection(f, chip);
  if ('results' in f) return decodeSection(f, chip);
  if ('laws' in f) return sparseSection(f as SparseFit, chip);
  if ('mla' in f) return mlaSection(f as MlaFit, chip);
  if (!('result' in f) && !('data' in f)) return EMPTY;
  switch (f.family) {
    case 'hbm':
      return hbmSection(f as Parameters<typeof hbmSection>[0], chip);
    case 'attention_prefill':
      return prefillSection(f as Parameters<typeof prefillSection>[0], chip);
    case 'collective':
      return collectiveSection(f as Parameters<typeof collectiveSection>[0], chip);
    case 'moe':
      return moeSection(f as Parameters<typeof moeSection>[0], chip);
    case 'moe_experts': {
      const s = moeExpertsSection((f as MoeExpertsFit).data);
      return { md: s.md, summary: moeExpertsSummary(f as MoeExpertsFit), figures: s.figures };
    }
    case 'recurrent':
      return recurrentSection(f as Parameters<typeof recurrentSection>[0], chip);
    case 'host':
      return hostSection(f as Parameters<typeof hostSection>[0], chip);
    default:
      return EMPTY;
  }
}

/** Summary lines of the MoE expert-time fit (its README section and figures: src/report/fit-moe-experts.ts). */
function moeExpertsSummary(f: MoeExpertsFit): string[] {
  return [...f.data.fits, ...f.data.kernel_fits].map(
    (r) =>
      `moe_experts ${r.set}: floor ${fmt(r.coefficients.floor_us)} us, eps_max ${fmt(r.coefficients.eps_max)}, m_half ${fmt(r.coefficients.m_half)} tok/expert, route ${fmt(r.coefficients.route_bytes_per_us)} B/us, ${fmt(r.coefficients.expert_us)} us per touched expert, pair ${fmt(r.coefficients.pair_bytes_per_us)} B/us, token ${fmt(r.coefficients.token_bytes_per_us ?? Infinity)} B/us, re-read ${fmt(r.coefficients.reread ?? 0)}; train geo ${fmt(r.train.geo)}, holdout tokens ${r.holdout_tokens ? fmt(r.holdout_tokens.geo) : 'n/a'}, shape ${r.holdout_shape ? fmt(r.holdout_shape.geo) : 'n/a'}${r.sum_vs_max ? `; sum ${fmt(r.sum_vs_max.sum_geo)} vs max ${fmt(r.sum_vs_max.max_geo)}` : ''}`,
  );
}

/** Draw a fit run: every family's section, the README around them, the summary and the figures. */
export function renderFitReport(result: FitAllResult): FitReport {
  const chip = result.chip_facts;
  const sections = result.families.map((f) => familySection(f, chip));
  const summary = [
    `${chip.name}: ${result.coefficients.length} coefficients in ${result.sets.length} sets (lanes: gemm ${result.lanes.gemm ?? '—'}, attention ${result.lanes.attention ?? '—'})`,
    ...sections.flatMap((s) => s.summary),
    ...result.warnings.map((w) => `warning: ${w}`),
    ...result.refusals.map((r) => `REFUSED: ${r}`),
  ];
  const figures = sections.flatMap((s) => s.figures).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { readme: fitReadme(result, sections), figures, summary };
}

/** fits/<chip>/README.md: refusals, the coefficient table beside BLIS, warnings, then each family's section. */
function fitReadme(result: FitAllResult, sections: readonly FitSection[]): string {
  const { chip_facts: chip, lanes, refusals, warnings } = result;
  const lines: string[] = [
    `# Fitted coefficients: ${chip.name}`,
    '',
    `Generated by \`stepcal fit all --chip ${chip.name}\` from \`measurements/${chip.name}/\` (gemm lane ${lanes.gemm ?? '—'}, attention lane ${lanes.attention ?? '—'}). Regenerate and check with \`--check\`. Values: 4 significant digits; errors: geo = exp(mean |ln(pred/meas)|), MAPE in percent. Methods and decisions: docs/fitting.md.`,
    '',
  ];
  if (refusals.length) lines.push('**Refused (nothing written):**', '', ...refusals.map((r) => `- ${r}`), '');
  lines.push(
    '## Coefficients beside BLIS',
    '',
    'BLIS values: registry @ b4d8e2b8 (reference §1.5), fitted on vLLM **0.25.0** tables for Hopper; ours on the lane named above (vLLM 0.24.0 for most chips, 0.14.0 for a100). BLIS publishes H100/H200 values only. BLIS fp16 collective rates are very likely element counts read as bytes, so a byte-correct fit lands near 2× them.',
    '',
    '| coefficient | units | ours | ci95 | n | train geo | holdout geo | BLIS | ours / BLIS | note |',
    '|---|---|---|---|---|---|---|---|---|---|',
  );
  lines.push(...result.coefficients.map((c) => blisRow(c, chip.name)));
  lines.push(
    '',
    "Why values differ from BLIS: (1) lane and version (vLLM 0.24.0 here vs 0.25.0 there); (2) the GEMM ramp here excludes memory-bound rows (m below the roofline knee), which BLIS fits, so our m_half is smaller; (3) decode attention: our rate comes from KV working sets of at least 2 × L2 (BLIS fits every row, including cache-resident ones, which lowers its rate); (4) prefill work_scale is relative to each registry's own bf16 ramp.",
    '',
  );
  if (warnings.length) lines.push('## Warnings', '', ...warnings.map((w) => `- ${w}`), '');
  for (const s of sections) if (s.md.trim()) lines.push(s.md.trimEnd(), '');
  return `${lines
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}

/** One row of the README's coefficient table: ours beside BLIS's published value. */
function blisRow({ name, entry: e }: FittedCoefficient, chip: string): string {
  const b = blisPublished(name, chip);
  const ev = e.evidence;
  const n = ev?.inputs?.[0]?.rows_used ?? ev?.train_error?.n;
  return `| ${name} | ${e.units} | ${fmt(e.value)} | ${e.ci95 ? `[${fmt(e.ci95[0])}, ${fmt(e.ci95[1])}]` : '—'} | ${n ?? '—'} | ${ev?.train_error?.geo ?? '—'} | ${ev?.holdout_error?.geo ?? '—'} | ${b ? fmt(b.value) : '—'} | ${b?.value ? fmt(e.value / b.value, 3) : '—'} | ${b?.note ?? (e.method !== 'measured' ? e.method : '')} |`;
}

/**
 * Where a fit writes. `registryOut` defaults to `<root>/registry/<chip>.yaml`; `fitsDir` to
 * `<root>/fits/<chip>`, and `fitsDir: null` means "no fit report" (registry only). The CLI passes
 * null when `--registry-out` redirects the registry without `--fits-out`, so a scratch fit never
 * rewrites the committed `fits/<chip>/` (docs/fitting.md).
 */
export interface FitOutputOptions {
  registryOut?: string;
  fitsDir?: string | null;
  repoRoot?: string;
}

/** Default paths for a chip (registry file and fit-report directory). */
export function outputPaths(
  chip: string,
  opts: { registryOut?: string; fitsDir?: string; repoRoot?: string } = {},
): { registry: string; fitsDir: string } {
  const root = opts.repoRoot ?? REPO_ROOT;
  return {
    registry: opts.registryOut ?? path.join(root, 'registry', `${chip}.yaml`),
    fitsDir: opts.fitsDir ?? path.join(root, 'fits', chip),
  };
}

/**
 * The files a fit writes, as (path, text) pairs: the registry, then (unless `fitsDir` is null) the
 * README and every figure of `report` (default: `renderFitReport(result)`).
 */
export function fitOutputFiles(
  result: Pick<FitAllResult, 'chip' | 'registry_text'> & Partial<FitAllResult>,
  opts: FitOutputOptions = {},
  report: Pick<FitReport, 'readme' | 'figures'> = renderFitReport(result as FitAllResult),
): Array<{ file: string; data: string }> {
  const p = outputPaths(result.chip, { ...opts, fitsDir: opts.fitsDir ?? undefined });
  const fitsDir = opts.fitsDir === null ? null : p.fitsDir;
  return [
    { file: p.registry, data: result.registry_text },
    ...(fitsDir === null
      ? []
      : [
          { file: path.join(fitsDir, 'README.md'), data: report.readme },
          ...report.figures.map((f) => ({ file: path.join(fitsDir, f.name), data: f.svg })),
        ]),
  ];
}

/**
 * The fit report of an onboarding run (registry/onboard.ts takes it as `fitOutputs`: the registry
 * stage cannot import the report layer): the files under `repoRoot` and the summary lines.
 */
export function fitReportOutputs(
  result: FitAllResult,
  opts: { repoRoot: string },
): { files: Array<{ file: string; data: string }>; summary: string[] } {
  const report = renderFitReport(result);
  return { files: fitOutputFiles(result, { repoRoot: opts.repoRoot }, report), summary: report.summary };
}

/** One coefficient as `fit --json` and `calibrate --json` print it (value in its registry units). */
export interface CoefficientSummary {
  set: string;
  name: string;
  value: CoefficientEntry['value'];
  units: CoefficientEntry['units'];
  ci95: CoefficientEntry['ci95'];
  method?: CoefficientEntry['method'];
  train_error: Evidence['train_error'] | undefined;
  holdout_error: Evidence['holdout_error'] | undefined;
}

/**
 * Every coefficient of `sets` in registry order, for the commands' `--json` output; `method` is
 * included when asked (calibrate prints it, `fit --json` does not). Key order is the output's.
 */
export function coefficientSummaries(
  sets: readonly CoefficientSet[],
  opts: { method?: boolean } = {},
): CoefficientSummary[] {
  return sets.flatMap((s) =>
    s.coefficients.map((c) => ({
      set: s.name,
      name: c.name,
      value: c.entry.value,
      units: c.entry.units,
      ci95: c.entry.ci95,
      ...(opts.method ? { method: c.entry.method } : {}),
      train_error: c.entry.evidence?.train_error,
      holdout_error: c.entry.evidence?.holdout_error,
    })),
  );
}
