/**
 * I/O edge of the pricer: load a chip, a model graph and a registry by name and build a pricer.
 * The pricer itself (pricer.ts) does no I/O.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../core/errors.ts';
import { loadChip, REPO_ROOT, type Chip } from '../core/catalog/chip.ts';
import { loadModel, maxPositionEmbeddings, type ModelGraph } from '../core/catalog/model.ts';
import { resolveCoefficients, type ResolvedCoefficients } from '../registry/load.ts';
import { loadUsableRegistry } from '../registry/validate.ts';
import { engineForChip, type EngineProfile } from '../core/schemas/engine.ts';
import { loadEngineProfile, UNCALIBRATED_ENGINE_NOTE } from '../registry/engine.ts';
import { defaultDeployment } from './deployment.ts';
import { engineProfiledPricer, largeStepLine, withEngineProfile, type EngineHostOutcome } from './engine.ts';
import { createPricer, type StepPricer } from './pricer.ts';
import type { Batch, Deployment, PriceOptions, StepPrice } from './types.ts';

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
  /** The engine profile the pricer prices with (absent = uncalibrated: the registry's host terms). */
  engine?: EngineProfile;
  /**
   * Price one step with the engine profile and say what it did (host, large-step extra, threshold):
   * `withEngineProfile` on the profile-free pricer; absent without a profile. The price equals `pricer.price`'s.
   */
  priceWithEngine?: (batch: Batch, opts?: PriceOptions) => { price: StepPrice; engine: EngineHostOutcome };
}

/** The line a price prints about the engine: the profile's host terms, or `UNCALIBRATED_ENGINE_NOTE`. */
export function engineLine(engine: EngineProfile | undefined): string {
  if (!engine) return UNCALIBRATED_ENGINE_NOTE;
  return `engine profile ${engine.name} (registry/engines/${engine.name}.yaml): its host terms replace the registry's, SM time × s (${engine.sm_scale.note ?? `s = ${engine.sm_scale.value}`}); ${largeStepLine(engine)}; fitted for ${engine.composition}, the estimate to read`;
}

/**
 * Build a pricer from names.
 * @param model catalog model name or graph path
 * @param chip catalog chip name or YAML path
 * @param deployment partial deployment (defaults: `defaultDeployment`)
 * @param registryFile registry YAML; default `registry/<chip>.yaml`
 * @param engine engine profile name (registry/engines/<name>.yaml); absent = uncalibrated engine
 * @throws UserError for an unknown model/chip (listing the known ones), a missing registry file
 *   (saying how to create it), a registry with schema or physics errors (assertRegistryUsable: file,
 *   set, entry, field) or a missing coefficient.
 */
export function setupPricer(
  model: string,
  chip: string,
  deployment: Partial<Deployment> = {},
  registryFile?: string,
  engine?: string,
): PricerSetup {
  const c = loadChip(chip);
  const m = loadModel(model);
  const d = defaultDeployment(deployment);
  const file = registryFile ?? defaultRegistryPath(c.name);
  if (!existsSync(file)) {
    throw new UserError(
      registryFile !== undefined
        ? `no registry file ${registryFile} (--registry)`
        : `no registry file ${path.relative(process.cwd(), file) || file} for chip ${c.name}; create it with \`stepcal fit all --chip ${c.name}\` or pass --registry <file>`,
    );
  }
  const sets = loadUsableRegistry(file, c.name);
  const registry = resolveCoefficients(sets, { hardware: c.name, model: m.name, tp: d.tp, ep: d.ep });
  const profile = engine !== undefined ? engineForChip(loadEngineProfile(engine), c.name) : undefined;
  const inner = createPricer(c, m, d, registry, profile ? { sm_scale: profile.sm_scale.value } : {});
  const decodeTokens = 1 + (d.speculative?.num_spec_tokens ?? 0);
  return {
    chip: c,
    model: m,
    deployment: d,
    registry,
    registry_file: file,
    pricer: profile ? engineProfiledPricer(inner, profile, d.tp, decodeTokens) : inner,
    max_positions: maxPositionEmbeddings(model),
    ...(profile
      ? {
          engine: profile,
          priceWithEngine: (batch: Batch, opts?: PriceOptions) =>
            withEngineProfile(inner.price(batch, opts), batch, inner.info, d.tp, profile, decodeTokens),
        }
      : {}),
  };
}
