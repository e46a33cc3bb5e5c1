/**
 * HBM derate: achieved / datasheet bandwidth on memory-bound reads (reference §4.4: the pricer
 * charges bytes / (datasheet · hbm_derate)).
 *
 * Rows (docs/fitting.md): bf16 GEMMs with m ≤ 16 whose weight matrix (n·k·2 bytes) is at least
 * 2 × L2 (weight streaming, not cache-resident), achieved = weight bytes / latency; and full-
 * attention decode rows whose KV bytes are at least 2 × L2, achieved = KV bytes / latency.
 * Value = median of achieved/datasheet over both sources pooled (the median minimises the mean
 * |ln(pred/meas)| of bytes/(bw·derate) among constant ratios). Holdout: the derate from GEMM rows
 * only, evaluated on the attention rows (the other source).
 */
import { SET_NAMES } from '../registry/types.ts';
import type { AttentionDecodeRow, GemmRow } from '../measurements/schema.ts';
import { chart } from '../report/svg.ts';
import { decodeKvBytes, cacheResidentBytes } from './attention.ts';
import { ciFromEstimates, fitError, fmt, measuredEntry, reduceRepeats } from './common.ts';
import { median, seededRandom } from './stats.ts';
import type { FamilyFit, FitContext } from './types.ts';

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
  for (const r of decode) {
    if (r.window !== 0) continue;
    const bytes = decodeKvBytes(r);
    if (bytes >= min) out.push({ source: 'attention_decode', bytes, latency_us: r.latency_us });
  }
  return out;
}

/** HBM family fitter: `hbm_derate` (dimensionless) in cost-model-primitives. */
export function fitHbm(gemm: readonly GemmRow[], decode: readonly AttentionDecodeRow[], ctx: FitContext): FamilyFit {
  const fit: FamilyFit = { family: 'hbm', coefficients: [], summary: [], report_md: '', figures: [], refusals: [], warnings: [] };
  const bw = ctx.chip.hbm_bytes_per_us;
  const reads = memoryBoundReads(gemm, decode, ctx.chip.l2_mib);
  if (reads.length < 3) {
    fit.warnings.push(`hbm: only ${reads.length} memory-bound reads beyond 2×L2; hbm_derate not measured`);
    return fit;
  }
  const ratio = (r: Read) => r.bytes / r.latency_us / bw;
  const ratios = reads.map(ratio);
  const derate = median(ratios);
  const rand = seededRandom(ctx.bootstrap.seed);
  const est: number[] = [];
  for (let b = 0; b < ctx.bootstrap.resamples; b++) {
    const s: number[] = new Array(ratios.length);
    for (let i = 0; i < ratios.length; i++) s[i] = ratios[Math.floor(rand() * ratios.length)]!;
    est.push(median(s));
  }
  const ci = ciFromEstimates(est);
  const g = reads.filter((r) => r.source === 'gemm');
  const a = reads.filter((r) => r.source === 'attention_decode');
  const gDerate = g.length ? median(g.map(ratio)) : NaN;
  const aDerate = a.length ? median(a.map(ratio)) : NaN;
  const pred = (rs: Read[], d: number) => rs.map((r) => r.bytes / (bw * d));
  const train = fitError(pred(reads, derate), reads.map((r) => r.latency_us));
  const holdout = g.length && a.length ? { ...fitError(pred(a, gDerate), a.map((r) => r.latency_us)), split: 'derate from GEMM weight reads, evaluated on decode-attention KV reads' } : undefined;
  const prior = ctx.chip.priors?.hbm_derate ?? 0.8;
  const notes = [
    `GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, ≥ 2×L2): n ${g.length}, median derate ${fmt(gDerate)}`,
    `decode-attention KV reads (full, ≥ 2×L2): n ${a.length}, median derate ${fmt(aDerate)}`,
    `prior (AIC mem_bw_empirical_scaling_factor, BLIS vendor_spec): ${prior}; measured/prior ${fmt(derate / prior, 3)}`,
  ];
  const entry = measuredEntry({
    value: derate,
    units: 'dimensionless',
    family: 'hbm',
    ctx: { ...ctx, inputs: ctx.inputs.filter((i) => /\/(gemm|attention_decode)\./.test('/' + i.file.split('/').pop())) },
    used: { filter: `bf16 GEMM m ≤ ${HBM_MAX_M} with weights ≥ 2×L2; full decode attention with KV ≥ 2×L2`, rows_used: reads.length },
    ci95: ci,
    ci_method: 'bootstrap',
    train,
    ...(holdout ? { holdout } : {}),
    notes,
    fitted: false,
  }, '');
  fit.coefficients.push({ set: SET_NAMES.primitives, name: 'hbm_derate', entry });
  fit.summary.push(`hbm_derate: ${fmt(derate)} [${fmt(ci[0])}, ${fmt(ci[1])}] (prior ${prior}); n ${reads.length} (gemm ${g.length}, decode ${a.length}); geo train ${train.geo} / holdout ${holdout?.geo ?? '—'}`);
  fit.report_md = [
    '## HBM derate',
    '',
    `hbm_derate ${fmt(derate)} [${fmt(ci[0])}, ${fmt(ci[1])}] of the datasheet ${fmt(bw / 1e6)} TB/s, against the 0.8-style prior ${prior} in the system descriptor (measured/prior ${fmt(derate / prior, 3)}).`,
    '',
    '| source | n | median achieved / datasheet |',
    '|---|---|---|',
    `| GEMM weight reads (bf16, m ≤ ${HBM_MAX_M}, weights ≥ 2×L2) | ${g.length} | ${fmt(gDerate)} |`,
    `| decode-attention KV reads (full, KV ≥ 2×L2) | ${a.length} | ${fmt(aDerate)} |`,
    `| pooled (stored) | ${reads.length} | ${fmt(derate)} |`,
    '',
    `Train geo ${train.geo} (MAPE ${train.mape_pct}%) for t = bytes/(datasheet·derate); holdout (${holdout?.split ?? 'none'}) ${holdout ? `${holdout.geo} (MAPE ${holdout.mape_pct}%)` : '—'}. Fixed per-call costs are not modelled here, so small reads sit below the line.`,
    '',
    '![hbm](hbm.svg)',
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
  return fit;
}
