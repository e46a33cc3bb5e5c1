/**
 * HBM derate: achieved / datasheet bandwidth on memory-bound reads (reference §4.4: the pricer
 * charges bytes / (datasheet · hbm_derate)).
 *
 * Rows (docs/fitting.md): bf16 GEMMs with m ≤ 16 whose weight matrix (n·k·2 bytes) is at least
 * 2 × L2 (weight streaming, not cache-resident), achieved = weight bytes / latency; and full-
 * attention decode rows whose KV bytes are at least 2 × L2, achieved = KV bytes / latency.
 * Law: t = t0 + bytes / (datasheet · derate), minimising mean |ln(pred/meas)| on the GEMM weight
 * reads (the bytes hbm_derate prices); holdout: the decode-attention KV reads (the other source),
 * with their own per-call cost refitted and the derate fixed. The raw ratio bytes/latency/datasheet
 * is reported too; it includes the per-call cost and so understates the streaming rate.
 */
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { AttentionDecodeRow, GemmRow } from '../measurements/schema.ts';
import { chart, type Series } from '../core/render/svg.ts';
import { decodeKvBytes, cacheResidentBytes } from './attention.ts';
import { bootstrapFloorRate, fitFloorRate, logL1, type WorkPoint } from './attention.ts';
import { fitError, fmt, measuredEntry, patternSearch, reduceRepeats, thin } from './common.ts';
import { median } from '../core/numeric/stats.ts';
import { emptyFamilyFit, type FamilyFit, type FitContext } from './types.ts';

/** Largest m counted as a pure weight read. */
export const HBM_MAX_M = 16;

interface Read {
  source: 'gemm' | 'attention_decode';
  bytes: number;
  latency_us: number;
}

/** Qualifying memory-bound reads of a chip. */
export function memoryBoundReads(gemm: readonly GemmRow[], decode: readonly AttentionDecodeRow[], l2_mib: number | undefined): Read[] {
  const min = 2 * cacheResidentBytes(l2_mib);
  const out: Read[] = [];
  for (const r of reduceRepeats(gemm, (r) => `${r.dtype}|${r.m}|${r.n}|${r.k}|${r.kernel_source}`)) {
    if (r.dtype !== 'bf16' || r.m > HBM_MAX_M) continue;
    const bytes = r.n * r.k * 2;
    if (bytes >= min) out.push({ source: 'gemm', bytes, latency_us: r.latency_us });
  }
  // Decode repeats (same kernel and configuration) are reduced by their median too, like the GEMM
  // rows (docs/fitting.md "Repeats"); the shipped decode tables have none, so this changes nothing there.
  const decodeKey = (r: AttentionDecodeRow) => `${r.kernel_source}|${r.batch}|${r.context_tokens}|${r.n_q}|${r.n_kv}|${r.head_dim}|${r.window}|${r.kv_dtype}`;
  for (const r of reduceRepeats(decode, decodeKey)) {
    if (r.window !== 0) continue;
    const bytes = decodeKvBytes(r);
    if (bytes >= min) out.push({ source: 'attention_decode', bytes, latency_us: r.latency_us });
  }
  return out;
}

/** HBM family fitter: `hbm_derate` (dimensionless) in cost-model-primitives. */
export function fitHbm(gemm: readonly GemmRow[], decode: readonly AttentionDecodeRow[], ctx: FitContext): FamilyFit {
  const fit: FamilyFit = emptyFamilyFit('hbm');
  const bw = ctx.chip.hbm_bytes_per_us;
  const reads = memoryBoundReads(gemm, decode, ctx.chip.l2_mib);
  if (reads.length < 3) {
    fit.warnings.push(`hbm: only ${reads.length} memory-bound reads beyond 2×L2; hbm_derate not measured`);
    return fit;
  }
  const ratio = (r: Read) => r.bytes / r.latency_us / bw;
  const g = reads.filter((r) => r.source === 'gemm');
  const a = reads.filter((r) => r.source === 'attention_decode');
  // Stored: the streaming slope of GEMM weight reads (what hbm_derate prices); decode KV reads are
  // the holdout. Falls back to the KV reads when a chip has fewer than 3 qualifying GEMM reads.
  const primary = g.length >= 3 ? g : a;
  const wp = (rs: readonly Read[]): WorkPoint[] => rs.map((r) => ({ work: r.bytes, latency_us: r.latency_us, group: r.source, kernel_source: '' }));
  const pf = fitFloorRate(wp(primary));
  const derate = pf.rate / bw;
  const boot = bootstrapFloorRate(wp(primary), pf, ctx.bootstrap);
  const ci: [number, number] = [boot.ci_rate[0] / bw, boot.ci_rate[1] / bw];
  const gOnly = g.length >= 3 ? { derate: fitFloorRate(wp(g)).rate / bw } : undefined;
  const aOnly = a.length >= 3 ? { derate: fitFloorRate(wp(a)).rate / bw } : undefined;
  const predict = (rs: readonly Read[], d: number, t0: number) => rs.map((r) => t0 + r.bytes / (bw * d));
  const train = fitError(predict(primary, derate, pf.floor_us), primary.map((r) => r.latency_us));
  let holdout: (ReturnType<typeof fitError> & { split: string }) | undefined;
  let holdoutT0 = NaN;
  const other = primary === g ? a : [];
  if (other.length) {
    // Only the derate crosses: the attention per-call cost is refitted with the derate fixed.
    const t0 = patternSearch((x) => logL1(wp(other), Math.exp(x[0]!), pf.rate), [Math.log(10)], [0.5], { minStep: 1e-4, maxEvals: 200 });
    holdoutT0 = Math.exp(t0.x[0]!);
    holdout = { ...fitError(predict(other, derate, holdoutT0), other.map((r) => r.latency_us)), split: 'derate from GEMM weight reads, evaluated on decode-attention KV reads (their per-call cost refitted)' };
  }
  const full = { t0_us: { [primary === g ? 'gemm' : 'attention_decode']: pf.floor_us } as Record<string, number> };
  const prior = ctx.chip.priors?.hbm_derate ?? 0.8;
  const gMed = g.length ? median(g.map(ratio)) : NaN;
  const aMed = a.length ? median(a.map(ratio)) : NaN;
  const notes = [
    `law t = t0 + bytes/(datasheet·derate) on ${primary === g ? 'GEMM weight' : 'decode KV'} reads, log objective; t0 ${fmt(pf.floor_us)} us`,
    `GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, ≥ 2×L2): n ${g.length}, derate alone ${fmt(gOnly?.derate ?? NaN)}, raw median bytes/latency/datasheet ${fmt(gMed)}`,
    `decode-attention KV reads (full, ≥ 2×L2): n ${a.length}, derate alone ${fmt(aOnly?.derate ?? NaN)}, raw median ${fmt(aMed)}`,
    `prior (AIC mem_bw_empirical_scaling_factor, BLIS vendor_spec): ${prior}; measured/prior ${fmt(derate / prior, 3)}`,
    ...boot.notes.filter((n) => n.startsWith('rate ')).map((n) => n.replace(/^rate /, 'derate (as rate) ')),
  ];
  const entry = measuredEntry({
    value: derate,
    units: 'dimensionless',
    family: 'hbm',
    ctx: { ...ctx, inputs: ctx.inputs.filter((i) => /^(gemm|attention_decode)\./.test(i.file.split('/').pop()!)) },
    used: { filter: primary === g ? `bf16 GEMM m ≤ ${HBM_MAX_M} with weights ≥ 2×L2 (holdout: full decode attention with KV ≥ 2×L2)` : 'full decode attention with KV ≥ 2×L2', rows_used: primary.length },
    ci95: ci,
    ci_method: 'bootstrap',
    train,
    ...(holdout ? { holdout } : {}),
    notes,
  }, '');
  fit.coefficients.push({ set: SET_NAMES.primitives, name: 'hbm_derate', entry });
  fit.summary.push(`hbm_derate: ${fmt(derate)} [${fmt(ci[0])}, ${fmt(ci[1])}] (prior ${prior}); n ${reads.length} (gemm ${g.length}, decode ${a.length}); geo train ${train.geo} / holdout ${holdout?.geo ?? '—'}`);
  fit.report_md = [
    '## HBM derate',
    '',
    `hbm_derate ${fmt(derate)} [${fmt(ci[0])}, ${fmt(ci[1])}] of the datasheet ${fmt(bw / 1e6)} TB/s, against the 0.8-style prior ${prior} in the system descriptor (measured/prior ${fmt(derate / prior, 3)}).`,
    '',
    '| source | n | derate (slope of t0 + bytes/(bw·derate)) | raw median bytes/latency/datasheet |',
    '|---|---|---|---|',
    `| GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, weights ≥ 2×L2) | ${g.length} | ${fmt(gOnly?.derate ?? NaN)} | ${fmt(gMed)} |`,
    `| decode-attention KV reads (full, KV ≥ 2×L2) | ${a.length} | ${fmt(aOnly?.derate ?? NaN)} | ${fmt(aMed)} |`,
    `| stored (${primary === g ? 'GEMM weight reads' : 'decode KV reads'}) | ${primary.length} | ${fmt(derate)} | — |`,
    '',
    `Train geo ${train.geo} (MAPE ${train.mape_pct}%) for t = bytes/(datasheet·derate); holdout (${holdout?.split ?? 'none'}) ${holdout ? `${holdout.geo} (MAPE ${holdout.mape_pct}%)` : '—'}. The per-call cost t0 is fitted per source so the derate is the streaming slope; the raw ratios (figure) include t0 and sit below it.`,
    '',
    '![hbm](hbm.svg) ![residuals](hbm_residuals.svg)',
    '',
    `Residuals (hbm_residuals.svg): ln(predicted/measured) against bytes read, for the fit rows (${primary === g ? 'GEMM weight reads' : 'decode KV reads'}, t0 ${fmt(pf.floor_us)} us)${other.length ? ` and the holdout decode KV reads (derate fixed, t0 refitted ${fmt(holdoutT0)} us)` : ''}.`,
    '',
  ].join('\n');
  fit.figures.push({
    name: 'hbm.svg',
    svg: chart(
      [
        { label: 'GEMM weight reads', points: g.map((r) => [r.bytes, ratio(r)]), style: 'scatter', color: '#1f77b4', radius: 2 },
        { label: 'decode KV reads', points: a.filter((_, i) => i % Math.max(1, Math.ceil(a.length / 1500)) === 0).map((r) => [r.bytes, ratio(r)]), style: 'scatter', color: '#ff7f0e', radius: 1.5 },
      ],
      { title: `${ctx.chip.name}: achieved / datasheet HBM bandwidth`, x_label: 'bytes read', y_label: 'achieved / datasheet', x_log: true, h_lines: [{ y: derate, label: `derate ${fmt(derate)}` }, { y: prior, label: `prior ${prior}` }] },
    ),
  });
  fit.figures.push({ name: 'hbm_residuals.svg', svg: residualFigure(ctx.chip.name, primary, pf.floor_us, other, holdoutT0, bw, derate, primary === g) });
  return fit;
}

/** Points per series in the residual figure (deterministic thinning in bytes order keeps it small). */
export const HBM_RESIDUAL_POINTS = 500;

/**
 * ln(predicted/measured) against bytes for the fit rows (their t0) and, when present, the holdout
 * decode KV reads (same derate, their refitted t0). Positive = the law predicts slower than measured.
 */
function residualFigure(chip: string, fitRows: readonly Read[], fitT0: number, holdRows: readonly Read[], holdT0: number, bw: number, derate: number, fitIsGemm: boolean): string {
  const res = (rs: readonly Read[], t0: number): Array<[number, number]> =>
    thin([...rs].sort((x, y) => x.bytes - y.bytes || x.latency_us - y.latency_us), HBM_RESIDUAL_POINTS).map((r) => [r.bytes, Math.log((t0 + r.bytes / (bw * derate)) / r.latency_us)]);
  const series: Series[] = [
    { label: fitIsGemm ? 'fit: GEMM weight reads' : 'fit: decode KV reads', points: res(fitRows, fitT0), style: 'scatter', color: '#1f77b4', radius: 1.5 },
  ];
  if (holdRows.length) series.push({ label: 'holdout: decode KV reads', points: res(holdRows, holdT0), style: 'scatter', color: '#ff7f0e', radius: 1.5 });
  return chart(series, {
    title: `${chip}: HBM derate ${fmt(derate)} residuals`,
    x_label: 'bytes read',
    y_label: 'ln(predicted / measured)',
    x_log: true,
    h_lines: [{ y: 0, label: 'zero' }],
  });
}
