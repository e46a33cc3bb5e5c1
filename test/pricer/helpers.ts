/** Test helpers: fixture registries (reference §1.5 values) re-scoped to any chip. */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadChip } from '../../src/core/catalog/chip.ts';
import { loadModel } from '../../src/core/catalog/model.ts';
import { loadRegistryFile, resolveCoefficients, type ResolvedCoefficients } from '../../src/registry/load.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import { defaultDeployment } from '../../src/pricer/deployment.ts';
import { createPricer, type PricerOptions } from '../../src/pricer/pricer.ts';
import type { Deployment } from '../../src/pricer/types.ts';
import { boundedColumns, type WalkPlan } from '../../src/pricer/walk.ts';
import type { ReaderSpec } from '../../src/core/laws/attention.ts';

export const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'registry');
export const BLIS_H200 = path.join(FIXTURES, 'blis-h200.yaml');
export const BLIS_H100 = path.join(FIXTURES, 'blis-h100.yaml');

const h200Sets = loadRegistryFile(BLIS_H200);

/**
 * The H200 fixture re-scoped to `chip` (names and scopes), with an nvfp4 ramp copied from fp8 where
 * the chip has a four-bit peak. Synthetic: for "prices without error" tests only.
 */
export function syntheticSets(chip: string): CoefficientSet[] {
  const key = chip.replace(/-/g, '_');
  const sets = h200Sets.map((s) => ({
    ...s,
    coefficients: s.coefficients.map((c) => ({
      name: c.name.replace(/_h200$/, `_${key}`),
      entry: { ...c.entry, scope: { hardware: [chip] } },
    })),
  }));
  const prim = sets.find((s) => s.name === 'cost-model-primitives')!;
  const fp8 = prim.coefficients.filter((c) => c.name.endsWith('_fp8'));
  prim.coefficients.push(...fp8.map((c) => ({ name: c.name.replace(/_fp8$/, '_nvfp4'), entry: c.entry })));
  return sets;
}

/** Resolve a registry (fixture file sets or synthetic) for a deployment. */
export function resolved(
  sets: readonly CoefficientSet[],
  chip: string,
  model: string,
  d: Deployment,
): ResolvedCoefficients {
  return resolveCoefficients(sets, { hardware: chip, model, tp: d.tp, ep: d.ep });
}

/** Build a pricer for shipped model/chip with a registry (default: synthetic for the chip). */
export function makePricer(
  model: string,
  chip: string,
  partial: Partial<Deployment> = {},
  sets?: CoefficientSet[],
  opts?: PricerOptions,
) {
  const d = defaultDeployment(partial);
  const s = sets ?? syntheticSets(chip);
  return createPricer(loadChip(chip), loadModel(model), d, resolved(s, chip, model, d), opts);
}

/** Copy of sets with one coefficient's value multiplied by `factor`. */
export function inflate(sets: readonly CoefficientSet[], name: string, factor: number): CoefficientSet[] {
  return sets.map((s) => ({
    ...s,
    coefficients: s.coefficients.map((c) =>
      c.name === name ? { name: c.name, entry: { ...c.entry, value: c.entry.value * factor } } : c,
    ),
  }));
}

/**
 * A walk plan over `readers` as the pricer builds one (the full-attention reader, if any, kept out
 * of the bounded list), for tests of the walk and of LiveBatch.
 */
export function walkPlanOf(readers: ReaderSpec[], threshold = 1, specTokens = 0): WalkPlan {
  const fullReader = readers.findIndex((r) => r.window === Infinity && r.ratio === 0);
  const bounded = Int32Array.from(readers.map((_, i) => i).filter((i) => i !== fullReader));
  return {
    readers,
    fullReader,
    bounded,
    ...boundedColumns(readers, bounded),
    threshold: Math.max(threshold, 1 + specTokens),
    uniformWidth: 1 + specTokens,
    attnMHalf: 512,
  };
}
