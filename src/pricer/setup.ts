/**
 * I/O edge of the pricer: load a chip, a model graph and a registry by name and build a pricer.
 * The pricer itself (pricer.ts) does no I/O.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../core/errors.ts';
import { loadChip, REPO_ROOT, type Chip } from '../core/catalog/chip.ts';
import { loadModel, maxPositionEmbeddings, type ModelGraph } from '../core/catalog/model.ts';
import { loadRegistryFile, resolveCoefficients, type ResolvedCoefficients } from '../registry/load.ts';
import { assertRegistryUsable } from '../registry/validate.ts';
import { defaultDeployment } from './deployment.ts';
import { createPricer, type StepPricer } from './pricer.ts';
import type { Deployment } from './types.ts';

/** Default registry file of a chip: `registry/<chip>.yaml`. */
function defaultRegistryPath(chip: string): string {
  return path.join(REPO_ROOT, 'registry', `${chip}.yaml`);
}

export interface PricerSetup {
  chip: Chip;
  model: ModelGraph;
  deployment: Deployment;
  registry: ResolvedCoefficients;
  registry_file: string;
  pricer: StepPricer;
  /** The model's max_position_embeddings (undefined = not stated). */
  max_positions: number | undefined;
}

/**
 * Build a pricer from names.
 * @param model catalog model name or graph path
 * @param chip catalog chip name or YAML path
 * @param deployment partial deployment (defaults: `defaultDeployment`)
 * @param registryFile registry YAML; default `registry/<chip>.yaml`
 * @throws UserError for an unknown model/chip (listing the known ones), a missing registry file
 *   (saying how to create it), a registry with schema or physics errors (assertRegistryUsable: file,
 *   set, entry, field) or a missing coefficient.
 */
export function setupPricer(
  model: string,
  chip: string,
  deployment: Partial<Deployment> = {},
  registryFile?: string,
): PricerSetup {
  const c = loadChip(chip);
  const m = loadModel(model);
  const d = defaultDeployment(deployment);
  const file = registryFile ?? defaultRegistryPath(c.name);
  if (!existsSync(file)) {
    throw new UserError(
      `no registry file ${path.relative(process.cwd(), file) || file} for chip ${c.name}; create it with \`stepcal fit all --chip ${c.name}\` or pass --registry <file>`,
    );
  }
  const sets = loadRegistryFile(file);
  assertRegistryUsable(sets, file, c.name);
  const registry = resolveCoefficients(sets, { hardware: c.name, model: m.name, tp: d.tp, ep: d.ep });
  return {
    chip: c,
    model: m,
    deployment: d,
    registry,
    registry_file: file,
    pricer: createPricer(c, m, d, registry),
    max_positions: maxPositionEmbeddings(model),
  };
}
