/**
 * The contract between family fitters and the `fit` orchestrator.
 *
 * A family fitter is a pure function: rows (plus chip facts and earlier families' results) in,
 * `FamilyFit` out: coefficients, refusals and warnings, plus a typed, family-specific result
 * (residuals, holdout scores, evidence and the series a figure needs, as plain data). It never
 * writes files and never draws: src/report/fit-*.ts turn the results into Markdown and SVG. The
 * orchestrator (index.ts) runs families in dependency order (gemm → hbm → attention_decode →
 * attention_prefill → collective → moe → host) and applies the plausibility gates; the command
 * layer writes the registry, SVGs and README only when every gate passes.
 */
import type { Chip } from '../core/catalog/chip.ts';
import type { CoefficientEntry } from '../core/schemas/registry.ts';

/** One coefficient a fitter produced, and the set it belongs in. */
export interface FittedCoefficient {
  set: string;
  name: string;
  entry: CoefficientEntry;
}

/** A family fit's result. */
export interface FamilyFit {
  family: string;
  coefficients: FittedCoefficient[];
  /** Fatal problems (the orchestrator refuses to write anything if any family has one). */
  refusals: string[];
  /** Non-fatal warnings. */
  warnings: string[];
}

/** Inputs every family fitter gets besides its rows. */
export interface FitContext {
  chip: Chip;
  /** Path of the input file(s) relative to the repo root, with sha256, for provenance. */
  inputs: Array<{ file: string; sha256: string; lane: string }>;
  /** Bootstrap settings (seeded, ≥ 200 resamples). */
  bootstrap: { resamples: number; seed: number };
  /** Results of families already fitted in this run (name → value), e.g. the bf16 ramp for prefill. */
  prior: ReadonlyMap<string, number>;
}

/** A `FamilyFit` with nothing in it yet, for a fitter to fill in. */
export function emptyFamilyFit(family: string): FamilyFit {
  return { family, coefficients: [], refusals: [], warnings: [] };
}
