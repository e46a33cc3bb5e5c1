/**
 * Engine profiles in the registry (issue 16): `registry/engines/<name>.yaml`, one `EngineProfile`
 * document (schema: src/core/schemas/engine.ts). Loading by name and the gates a profile must pass
 * before it is written (as `registry/<chip>.yaml` passes src/registry/validate.ts). No writing here:
 * the cli layer writes through core/io.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from '../core/catalog/chip.ts';
import { UserError } from '../core/errors.ts';
import { readText } from '../core/io/fs.ts';
import { parseEngineProfile, type EngineProfile } from '../core/schemas/engine.ts';

/** The line every price says when no engine profile is given. */
export const UNCALIBRATED_ENGINE_NOTE = 'uncalibrated engine: registry host terms';

/** Engine compute-efficiency term s a profile may carry (the CMOverlap search bounds, src/validate/hostfit.ts). */
const SM_SCALE_RANGE: readonly [number, number] = [0.25, 4];

/**
 * Evidence gate on the profile's own holdout: median APE ≤ 10 % in every regime (issue 7's goal for the
 * median). A profile that cannot price held-out rows of the deployments it was fitted on is refused.
 */
export const ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT = 10;

/** `registry/engines/<name>.yaml`. @throws UserError for a name outside [a-z0-9._-]+ */
export function engineProfilePath(name: string): string {
  if (!/^[a-z0-9._-]+$/.test(name) || name.startsWith('.'))
    throw new UserError(`engine name "${name}": expected [a-z0-9._-]+ (a file name under registry/engines/)`);
  return path.join(REPO_ROOT, 'registry', 'engines', `${name}.yaml`);
}

/**
 * Load and schema-check an engine profile by name (or by a path ending in .yaml).
 * @throws UserError when the file is missing (saying how to fit it) or fails the schema (file and field named)
 */
export function loadEngineProfile(nameOrFile: string): EngineProfile {
  const file = nameOrFile.endsWith('.yaml') ? nameOrFile : engineProfilePath(nameOrFile);
  if (!existsSync(file)) {
    throw new UserError(
      `no engine profile ${path.relative(process.cwd(), file) || file}; fit one with \`stepcal fit engine --engine ${path.basename(file, '.yaml')} --steps <files...>\``,
    );
  }
  return parseEngineProfile(readText(file), path.relative(process.cwd(), file) || file);
}

/**
 * Gates of an engine profile, as failure messages (empty = passes): every host term finite and ≥ 0
 * with a ci95 that holds it, s inside [0.25, 4], and the holdout median APE of every regime within
 * `ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT`.
 */
export function engineProfileGates(p: EngineProfile): string[] {
  const out: string[] = [];
  for (const [name, t] of Object.entries(p.terms)) {
    if (!(t.value >= 0)) out.push(`${p.name}: ${name} = ${t.value} µs: a host cost cannot be negative`);
    if (!(t.ci95[0] <= t.ci95[1])) out.push(`${p.name}: ${name} ci95 [${t.ci95.join(', ')}] is not an interval`);
  }
  const scales: Array<[string, number]> = [
    ['sm_scale', p.sm_scale.value],
    ...Object.entries(p.sm_scale_by_chip ?? {}).map(([c, t]): [string, number] => [`sm_scale_by_chip.${c}`, t.value]),
  ];
  for (const [name, s] of scales)
    if (!(s >= SM_SCALE_RANGE[0] && s <= SM_SCALE_RANGE[1]))
      out.push(`${p.name}: ${name} ${s} outside [${SM_SCALE_RANGE.join(', ')}]`);
  for (const [regime, m] of Object.entries(p.fit.holdout.regimes)) {
    if (m.median_ape_pct > ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT)
      out.push(
        `${p.name}: holdout ${regime} median APE ${m.median_ape_pct.toFixed(1)} % > ${ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT} %`,
      );
  }
  if (p.fit.holdout.n === 0) out.push(`${p.name}: no holdout rows: the profile's accuracy is not measured`);
  return out;
}
