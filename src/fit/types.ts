/**
 * The contract between family fitters and the `fit` orchestrator.
 *
 * A family fitter is a pure function: rows (plus chip facts and earlier families' results) in,
 * `FamilyFit` out. It never writes files. The orchestrator runs families in dependency order
 * (gemm → hbm → attention_decode → attention_prefill → collective → moe → host), applies the
 * plausibility gates, and writes the registry, SVGs and README only when every gate passes.
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
  /** One-screen summary lines (units included). */
  summary: string[];
  /** Markdown section for fits/<chip>/README.md (tables, biases, comparisons). */
  report_md: string;
  /** SVG figures, written as fits/<chip>/<name>. */
  figures: Array<{ name: string; svg: string }>;
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
  return { family, coefficients: [], summary: [], report_md: '', figures: [], refusals: [], warnings: [] };
}
