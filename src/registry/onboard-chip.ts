/**
 * The chip facts an onboarding uses (issue 15 item 1): the catalog entry when one exists (SM count,
 * L2, peaks, rack and NIC facts with their sources), else an entry built from the system descriptor
 * plus stated defaults, each defaulted fact listed. The descriptor is still read when a catalog entry
 * exists, to show where the two differ; the catalog is replaced only on request (`--update-catalog`).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { type Chip, type ChipFile, chipFromObject, DEFAULT_L2_MIB } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { readText } from '../core/io/fs.ts';
import { displayPath } from '../core/io/paths.ts';
import { AIC_COMMIT, AIC_REPOSITORY } from '../measurements/import.ts';
import { systemToChip } from '../measurements/system.ts';

/**
 * SM count assumed for a part with no catalog entry and no `--sm-count` (H100 SXM's 132). No fit or
 * pricing law reads it (it is a reported fact), so a wrong default misprices nothing; it is listed as
 * defaulted so the datasheet value can be filled in.
 */
export const DEFAULT_SM_COUNT = 132;

/** One fact that differs between the catalog entry and the descriptor. */
export interface FactDiff {
  fact: string;
  catalog: string;
  descriptor: string;
}

export interface ResolvedChip {
  chip: Chip;
  /** YAML of the entry used (written to the onboarding's own catalog folder). */
  yaml: string;
  source: 'catalog' | 'descriptor';
  catalogFile: string;
  /** Facts the descriptor does not give that took a stated default (empty when the catalog was read). */
  defaulted: string[];
  /** Catalog vs descriptor, when both exist. */
  diff: FactDiff[];
  /** The descriptor-derived entry (catalog-only facts kept), what `--update-catalog` writes. */
  updated?: { chip: ChipFile; yaml: string };
  systemFile?: string;
}

/** The descriptor beside an upstream chip folder: `<data>/../systems/<folder name>.yaml`, if present. */
export function defaultSystemFile(dataDir: string): string | undefined {
  const f = path.join(path.dirname(path.resolve(dataDir)), 'systems', `${path.basename(path.resolve(dataDir))}.yaml`);
  return existsSync(f) ? f : undefined;
}

const FACTS = [
  'sm_version',
  'peak_tflops.bf16',
  'peak_tflops.fp8',
  'peak_tflops.nvfp4',
  'peak_tflops.tf32',
  'peak_tflops.int8',
  'hbm_tb_per_s',
  'hbm_gib',
  'nvlink_gb_per_s_per_dir',
  'peer_link',
  'sm_count',
  'gpus_per_node',
  'rack_gpus',
  'rack_nvlink_gb_per_s_per_dir',
  'nic_gb_per_s_per_dir',
  'l2_mib',
] as const;

function fact(c: ChipFile, f: string): string {
  const v = f.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], c);
  return v === undefined ? '(absent)' : String(v);
}

/** Facts that differ between two chip entries (pure). */
export function chipFactDiff(catalog: ChipFile, descriptor: ChipFile): FactDiff[] {
  return FACTS.filter((f) => fact(catalog, f) !== fact(descriptor, f)).map((f) => ({
    fact: f,
    catalog: fact(catalog, f),
    descriptor: fact(descriptor, f),
  }));
}

/**
 * Resolve the chip (module comment).
 * @throws UserError when neither a catalog entry nor a descriptor exists; InputError for a bad descriptor.
 */
export function resolveChip(o: {
  chip: string;
  catalogDir: string;
  systemFile?: string;
  sm_count?: number;
  l2_mib?: number;
}): ResolvedChip {
  const catalogFile = path.join(o.catalogDir, `${o.chip}.yaml`);
  const have = existsSync(catalogFile);
  if (o.systemFile !== undefined && !existsSync(o.systemFile))
    throw new UserError(`--system ${o.systemFile}: no such file`);
  if (!have && !o.systemFile)
    throw new UserError(
      `onboard ${o.chip}: no catalog entry (${catalogFile}) and no system descriptor (pass --system, or keep systems/<folder>.yaml beside the data folder)`,
    );
  const existingText = have ? readText(catalogFile) : undefined;
  const existingObj = existingText ? (parseYaml(existingText) as ChipFile) : undefined;
  if (existingObj) chipFromObject(existingObj, catalogFile);
  const existing = existingObj;

  const upstreamRef = `${AIC_REPOSITORY}@${AIC_COMMIT.slice(0, 8)} systems/${path.basename(o.systemFile ?? '')} (onboarded)`;
  const defaulted: string[] = [];
  const sm = o.sm_count ?? existing?.sm_count ?? DEFAULT_SM_COUNT;
  const l2 = o.l2_mib ?? existing?.l2_mib ?? DEFAULT_L2_MIB;
  if (o.sm_count === undefined && existing?.sm_count === undefined)
    defaulted.push(`sm_count ${DEFAULT_SM_COUNT} (DEFAULT_SM_COUNT: H100 SXM's count; read by no fit or pricing law)`);
  if (o.l2_mib === undefined && existing?.l2_mib === undefined)
    defaulted.push(
      `l2_mib ${DEFAULT_L2_MIB} (DEFAULT_L2_MIB: H100/H200 size; sets which decode rows count as cache-resident)`,
    );
  const given = [
    ...(o.sm_count !== undefined ? [`sm_count ${o.sm_count}`] : []),
    ...(o.l2_mib !== undefined ? [`l2_mib ${o.l2_mib}`] : []),
  ];
  const sources = [
    ...(defaulted.length ? [`defaulted (not in the descriptor): ${defaulted.join('; ')}`] : []),
    ...(given.length ? [`${given.join(', ')}: given on the command line (not in the descriptor)`] : []),
  ];
  const sys = o.systemFile
    ? systemToChip(readText(o.systemFile), o.systemFile, o.chip, upstreamRef, {
        sm_count: sm,
        l2_mib: l2,
        sources,
        ...(existing ? { existing } : {}),
      })
    : undefined;

  const updated = sys ? { chip: sys.chip, yaml: withDefaultsYaml(sys.yaml, defaulted) } : undefined;
  if (existing && existingText) {
    const used =
      o.sm_count !== undefined || o.l2_mib !== undefined ? { ...existing, sm_count: sm, l2_mib: l2 } : existing;
    return {
      chip: chipFromObject(used, catalogFile),
      yaml:
        used === existing
          ? existingText
          : `${existingText.trimEnd()}\n# sm_count / l2_mib overridden by flags: ${sm}, ${l2}\n`,
      source: 'catalog',
      catalogFile,
      defaulted: [],
      diff: sys ? chipFactDiff(existing, sys.chip) : [],
      ...(updated ? { updated } : {}),
      ...(o.systemFile ? { systemFile: o.systemFile } : {}),
    };
  }
  const built = updated!;
  return {
    chip: chipFromObject(built.chip, o.systemFile!),
    yaml: built.yaml,
    source: 'descriptor',
    catalogFile,
    defaulted,
    diff: [],
    updated: built,
    systemFile: o.systemFile!,
  };
}

/** The converted YAML with the stated defaults as a header comment (they are also in `sources`). */
function withDefaultsYaml(yaml: string, defaulted: readonly string[]): string {
  if (!defaulted.length) return yaml;
  return `# Defaulted facts (the descriptor does not give them; replace with datasheet values):\n${defaulted.map((d) => `#   ${d}`).join('\n')}\n${yaml}`;
}

/** The catalog diff as lines for stderr and the report. */
export function formatChipDiff(r: ResolvedChip): string[] {
  if (r.source === 'descriptor')
    return [
      `catalog: no entry for ${r.chip.name}; built from ${displayPath(r.systemFile ?? '')}`,
      ...r.defaulted.map((d) => `catalog: defaulted ${d}`),
    ];
  if (!r.diff.length)
    return [
      `catalog: read ${displayPath(r.catalogFile)}${r.systemFile ? ' (the descriptor agrees on every fact)' : ''}`,
    ];
  return [
    `catalog: read ${displayPath(r.catalogFile)}; the descriptor differs on ${r.diff.length} fact(s) (the catalog is used; --update-catalog writes the descriptor's):`,
    ...r.diff.map((d) => `  ${d.fact}: catalog ${d.catalog}, descriptor ${d.descriptor}`),
  ];
}
