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
import type { Problem } from './validate.ts';

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
 * Load, schema-check and gate an engine profile by name (or by a path ending in .yaml): the same gates
 * `stepcal fit engine` runs before it writes one (`engineProfileGates`), so a hand-edited profile with
 * a negative term, an unordered ci95, an s outside [0.25, 4] or a large-step factor without its
 * threshold is refused here, not priced.
 * @throws UserError when the file is missing (saying how to fit it), fails the schema, or fails a gate
 *   (`file: field terms.x.value: message`, every failing field named)
 */
export function loadEngineProfile(nameOrFile: string): EngineProfile {
  const file = nameOrFile.endsWith('.yaml') ? nameOrFile : engineProfilePath(nameOrFile);
  const shown = path.relative(process.cwd(), file) || file;
  if (!existsSync(file)) {
    throw new UserError(
      `no engine profile ${shown}; fit one with \`stepcal fit engine --engine ${path.basename(file, '.yaml')} --steps <files...>\``,
    );
  }
  const p = parseEngineProfile(readText(file), shown);
  const failed = engineProfileProblems(p);
  if (failed.length)
    throw new UserError(
      `${shown}: engine profile refused (the gates of \`stepcal fit engine\`):\n  ${failed.map((f) => `field ${f.field}: ${f.message}`).join('\n  ')}`,
    );
  return p;
}

/**
 * `registry validate` of one engine profile file (`kind: EngineProfile`): its schema problem, or every
 * failed gate, each naming the file and field (empty = passes).
 */
export function validateEngineProfileFile(file: string): Problem[] {
  const shown = path.relative(process.cwd(), file) || file;
  let p: EngineProfile;
  try {
    p = parseEngineProfile(readText(file), shown);
  } catch (err) {
    if (!(err instanceof UserError)) throw err;
    const message = err.message.startsWith(`${shown}: `) ? err.message.slice(shown.length + 2) : err.message;
    return [{ file: shown, check: 'schema', severity: 'error', message }];
  }
  return engineProfileProblems(p).map((f) => ({
    file: shown,
    field: f.field,
    check: 'physics',
    severity: 'error',
    message: f.message,
  }));
}

/** One failed gate: the profile field (dotted path) and what is wrong with it. */
interface ProfileProblem {
  field: string;
  message: string;
}

/** `value unit` of a term: µs for the host terms, × priced NVLink µs for the dimensionless factor. */
function termValueText(name: string, value: number): string {
  return name.endsWith('_us') ? `${value} µs` : `${value} × (priced NVLink µs)`;
}

/** The term gates: every term finite and ≥ 0 with an ordered ci95; a nonzero large-step factor has its threshold. */
function termProblems(p: EngineProfile): ProfileProblem[] {
  const out: ProfileProblem[] = [];
  for (const [name, t] of Object.entries(p.terms)) {
    if (!(t.value >= 0))
      out.push({
        field: `terms.${name}.value`,
        message: `${termValueText(name, t.value)}: expected >= 0 (a host cost cannot be negative)`,
      });
    if (!(t.ci95[0] <= t.ci95[1]))
      out.push({ field: `terms.${name}.ci95`, message: `[${t.ci95.join(', ')}] is not an interval (low > high)` });
  }
  const factor = p.terms.large_step_nvlink_factor.value;
  if (factor !== 0 && p.large_step_message_bytes === undefined)
    out.push({
      field: 'large_step_message_bytes',
      message: `absent, but terms.large_step_nvlink_factor.value is ${factor}: a nonzero factor needs its threshold (bytes of a step's collective message); re-fit with \`stepcal fit engine\``,
    });
  return out;
}

/** Every gate of `engineProfileGates`, as field + message. */
function engineProfileProblems(p: EngineProfile): ProfileProblem[] {
  const out = termProblems(p);
  const scales: Array<[string, EngineProfile['sm_scale']]> = [
    ['sm_scale', p.sm_scale],
    ...Object.entries(p.sm_scale_by_chip ?? {}).map(([c, t]): [string, EngineProfile['sm_scale']] => [
      `sm_scale_by_chip.${c}`,
      t,
    ]),
  ];
  for (const [name, s] of scales) {
    if (!(s.value >= SM_SCALE_RANGE[0] && s.value <= SM_SCALE_RANGE[1]))
      out.push({ field: `${name}.value`, message: `${s.value} outside [${SM_SCALE_RANGE.join(', ')}]` });
    if (!(s.ci95[0] <= s.ci95[1]))
      out.push({ field: `${name}.ci95`, message: `[${s.ci95.join(', ')}] is not an interval (low > high)` });
  }
  for (const [regime, m] of Object.entries(p.fit.holdout.regimes)) {
    if (m.median_ape_pct > ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT)
      out.push({
        field: `fit.holdout.regimes.${regime}.median_ape_pct`,
        message: `${m.median_ape_pct.toFixed(1)} % > ${ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT} %`,
      });
  }
  if (p.fit.holdout.n === 0)
    out.push({ field: 'fit.holdout.n', message: "0: no holdout rows, the profile's accuracy is not measured" });
  return out;
}

/**
 * Gates of an engine profile, as failure messages (empty = passes): every host term finite and ≥ 0
 * with an ordered ci95, a nonzero `large_step_nvlink_factor` with its `large_step_message_bytes`, s
 * (pooled and per chip) inside [0.25, 4] with an ordered ci95, and the holdout median APE of every
 * regime within `ENGINE_HOLDOUT_MEDIAN_APE_MAX_PCT`. `fit engine` runs them before writing,
 * `loadEngineProfile` on every load.
 */
export function engineProfileGates(p: EngineProfile): string[] {
  return engineProfileProblems(p).map((f) => `${p.name}: ${f.field}: ${f.message}`);
}
