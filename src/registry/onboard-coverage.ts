/**
 * The onboarding coverage report (issue 15 item 1): per fitting family, what the registry holds
 * (measured / extrapolated / assumed / missing), the lanes found and the lane chosen for each table
 * that feeds it, and what pricing will refuse, or price only by extrapolation, because of what is
 * missing. Pure over the folder scan, the import summaries and the written registry.
 */
import { isPcieOnly, type Chip } from '../core/catalog/chip.ts';
import { nvlinkDomainGpus } from '../core/laws/placement.ts';
import { familyOf, parseCollectiveName } from '../core/schemas/names.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';
import { AIC_TABLES, type AicTable } from '../measurements/aiconfigurator.ts';
import type { FolderScan, SkippedFile } from '../measurements/upstream-folder.ts';

/** Fitting families and the measurement families each needs (host has no upstream table). */
export const FAMILY_NEEDS: Record<string, string[]> = {
  gemm: ['gemm'],
  hbm: ['gemm', 'attention_decode'],
  attention_decode: ['attention_decode'],
  attention_prefill: ['attention_prefill', 'gemm'],
  collective: ['collective'],
  moe: ['moe'],
  recurrent: ['recurrent'],
  /** Optional: the four upstream MLA tables (module and kernel; mla-import.ts). */
  mla: ['mla'],
  host: [],
};

export type FamilyStatus = 'measured' | 'extrapolated' | 'assumed' | 'missing';

export interface FamilyCoverage {
  family: string;
  status: FamilyStatus;
  entries: Record<string, number>;
  tables: Array<{ table: AicTable; lanes_found: string[]; lane_chosen: string; why: string; rows: number }>;
  /** Entries refused at onboarding (left out of the registry), with why. */
  refused: string[];
}

export interface PricingLimits {
  /** Requests pricing refuses (the pricer throws naming the missing coefficient). */
  refuses: string[];
  /** Requests priced only from extrapolated or snapped coefficients (noted on every such price). */
  extrapolates: string[];
  topology: string;
}

const COLLECTIVE_OPS = ['all_reduce', 'all_gather', 'reduce_scatter', 'alltoall'] as const;
const NEEDED_BY: Record<(typeof COLLECTIVE_OPS)[number], string> = {
  all_reduce: 'tp > 1 (every dense layer all-reduces)',
  all_gather: 'tp > 1 with sequence-parallel all-gathers',
  reduce_scatter: 'tp > 1 with sequence-parallel reduce-scatters',
  alltoall: 'ep > 1 (expert-parallel MoE dispatch and combine)',
};

/** Per-family coverage of the written registry (module comment). */
export function familyCoverage(
  sets: readonly CoefficientSet[],
  scan: FolderScan | undefined,
  refused: ReadonlyArray<{ family: string; message: string }>,
): FamilyCoverage[] {
  const all = sets.flatMap((s) => s.coefficients);
  return Object.entries(FAMILY_NEEDS).map(([family, needs]) => {
    const mine = all.filter((c) => familyOf(c.name, c.entry) === family);
    const entries: Record<string, number> = {};
    for (const c of mine) {
      const k = c.entry.evidence?.extrapolation ? 'extrapolated' : c.entry.method;
      entries[k] = (entries[k] ?? 0) + 1;
    }
    const status: FamilyStatus = !mine.length
      ? 'missing'
      : entries.extrapolated
        ? 'extrapolated'
        : (entries.measured ?? 0) > 0
          ? 'measured'
          : 'assumed';
    const tables = (scan?.tables ?? [])
      .filter((t) => needs.includes(AIC_TABLES[t.table]))
      .map((t) => ({
        table: t.table,
        lanes_found: t.lanes.map((l) => l.lane),
        lane_chosen: t.chosen.lane,
        why: t.why,
        rows: t.chosen.rows,
      }));
    return {
      family,
      status,
      entries,
      tables,
      refused: refused.filter((r) => r.family === family).map((r) => r.message),
    };
  });
}

const GEMM_DTYPES = ['bf16', 'fp8', 'fp8_block', 'nvfp4'] as const;

function refusedOrMissing(fams: readonly FamilyCoverage[], name: string): string {
  const r = fams.flatMap((f) => f.refused).find((m) => m.startsWith(`${name}:`));
  return r ? `refused at onboarding: ${r.slice(name.length + 2)}` : 'not measured';
}

/** Measured and assumed widths per collective op in a registry. */
function widthsByOp(sets: readonly CoefficientSet[]): Map<string, { measured: number[]; assumed: number[] }> {
  const out = new Map<string, { measured: number[]; assumed: number[] }>();
  for (const s of sets)
    for (const c of s.coefficients) {
      const p = parseCollectiveName(c.name);
      if (p?.param !== 'floor' || p.dtype !== 'fp16') continue;
      const w = out.get(p.op) ?? { measured: [], assumed: [] };
      (c.entry.method === 'measured' && !c.entry.evidence?.extrapolation ? w.measured : w.assumed).push(p.ranks);
      out.set(p.op, w);
    }
  for (const w of out.values()) {
    w.measured.sort((a, b) => a - b);
    w.assumed.sort((a, b) => a - b);
  }
  return out;
}

/**
 * What MLA pricing lacks: the whole family (no MLA table fitted), or one half of it — no decode law
 * (`mla_decode_rate*` or `mla_decode_wave_us*`: decode at the full-attention rate) or no prefill law
 * (`mla_prefill_work_scale`: prefill at the general prefill-attention work scale).
 */
function mlaLimits(status: FamilyStatus | undefined, names: ReadonlySet<string>): string[] {
  if (status === 'missing')
    return [
      'MLA models (DeepSeek-class): no mla_* coefficients (no MLA table fitted); MLA attention priced with the full-attention rate, noted on every price',
    ];
  if (status === undefined) return [];
  const has = (prefix: string) => [...names].some((n) => n.startsWith(prefix));
  const out: string[] = [];
  if (!has('mla_decode_rate') && !has('mla_decode_wave_us'))
    out.push(
      'MLA decode: no mla_decode law fitted (no decode table kept); MLA decode priced with the full-attention rate, noted on every price',
    );
  if (!names.has('mla_prefill_work_scale'))
    out.push(
      'MLA prefill: no mla_prefill law fitted (no prefill table kept); MLA prefill at the general prefill-attention work scale',
    );
  return out;
}

/** What pricing refuses or extrapolates on this registry (module comment). */
export function pricingLimits(
  chip: Chip,
  sets: readonly CoefficientSet[],
  fams: readonly FamilyCoverage[],
): PricingLimits {
  const refuses: string[] = [];
  const extrapolates: string[] = [];
  const status = new Map(fams.map((f) => [f.family, f.status]));
  if (status.get('moe') === 'missing') refuses.push('MoE models: no moe_* coefficients (no MoE table)');
  if (status.get('attention_prefill') === 'missing') refuses.push('prefill steps: no attention_prefill_* coefficients');
  const names = new Set(sets.flatMap((s) => s.coefficients.map((c) => c.name)));
  extrapolates.push(...mlaLimits(status.get('mla'), names));
  for (const dt of GEMM_DTYPES)
    if (!names.has(`gemm_eps_max_${dt}`))
      refuses.push(
        `models whose linear layers run in ${dt}: no gemm_eps_max_${dt} (${refusedOrMissing(fams, `gemm_eps_max_${dt}`)})`,
      );
  const widths = widthsByOp(sets);
  for (const op of COLLECTIVE_OPS) {
    const w = widths.get(op);
    if (!w || (!w.measured.length && !w.assumed.length)) {
      refuses.push(`${NEEDED_BY[op]}: no ${op} collective measured (no comm table with ${op} rows)`);
      continue;
    }
    const top = Math.max(...w.measured, 0);
    const assumedAbove = w.assumed.filter((x) => x > top);
    if (top > 0)
      extrapolates.push(
        `${op} over more than ${top} ranks: measured only to ${top} ranks; priced from ${assumedAbove.length ? `assumed ${assumedAbove.join('/')}-rank width extrapolation(s), and beyond them ` : ''}the widest curve, with a note on every price`,
      );
  }
  for (const f of fams)
    if (f.status === 'extrapolated')
      extrapolates.push(`${f.family}: some entries extrapolated (flagged in evidence.extrapolation)`);
  const d = nvlinkDomainGpus(chip);
  const topology = isPcieOnly(chip)
    ? `PCIe-only part: collectives within ${chip.gpus_per_node} GPUs cross PCIe (${chip.nvlink_gb_per_s_per_dir} GB/s per direction); larger groups use the NIC (${chip.nic_gb_per_s_per_dir} GB/s)`
    : chip.rack_is_one_domain
      ? `rack-scale: groups within ${d} GPUs stay on NVLink (${chip.rack_nvlink_gb_per_s_per_dir} GB/s); cross-rack traffic at the NIC rate ${chip.nic_gb_per_s_per_dir} GB/s`
      : `NVLink within ${d} GPUs (${chip.nvlink_gb_per_s_per_dir} GB/s); cross-node at the NIC rate ${chip.nic_gb_per_s_per_dir} GB/s`;
  return { refuses, extrapolates, topology };
}

/** Counted reasons for every file read for information or skipped (issue 15 item 2). */
export function skipSummary(skipped: readonly SkippedFile[]): Array<{ kind: string; files: number; rows: number }> {
  const by = new Map<string, { files: number; rows: number }>();
  for (const s of skipped) {
    const b = by.get(s.kind) ?? { files: 0, rows: 0 };
    b.files++;
    b.rows += Math.max(0, s.rows ?? 0);
    by.set(s.kind, b);
  }
  return [...by.entries()].sort().map(([kind, b]) => ({ kind, ...b }));
}
