/**
 * Coefficient registry types.
 *
 * The file layout is BLIS's public CoefficientSet (reference §1.1): `kind: CoefficientSet`, `name`,
 * and `coefficients`, a list of single-key maps `{<coefficient name>: <entry>}`, with BLIS's names
 * (reference §1.3). `registry/<chip>.yaml` holds several sets as a multi-document YAML file.
 *
 * DECISION: the fields BLIS's strict schema lacks (fit errors, n, input hashes, lane, holdout, ...)
 * live under ONE extra key per entry, `evidence`. `stepcal registry export --format blis` strips it
 * (and changes nothing else, so export → import reproduces every public field; see
 * src/registry/blis.ts), so exported files decode under BLIS's strict reader.
 */

/** BLIS unit enum (reference §1.1). */
export const UNITS = [
  'dimensionless',
  'us_per_layer',
  'us_per_request',
  'us_per_step',
  'us_per_hop',
  'us_per_transfer',
  'us_per_load',
  'us_per_token',
  'bytes_per_us',
  'bytes_per_rank',
  'tokens',
  'sm_count',
] as const;
export type Units = (typeof UNITS)[number];

/** BLIS method enum. */
export const METHODS = ['measured', 'vendor_spec', 'literature', 'copied', 'assumed', 'not_charged'] as const;
export type Method = (typeof METHODS)[number];

export interface Source {
  kind: 'discussion' | 'publication' | 'datasheet' | 'model' | 'vendor_doc';
  cite: string;
  role: 'primary' | 'supporting' | 'upper_bound';
}

/** Deployment dimensions an entry can be scoped to; an unstated dimension is a wildcard. */
export interface Scope {
  hardware?: string[];
  model?: string[];
  tp?: number[];
  ep?: number[];
  nodes_spanned?: number[];
}

/** Error of a fit on one split. `geo` = exp(mean |ln(pred/meas)|) (≥ 1); `mape` in percent. */
export interface FitError {
  geo: number;
  mape_pct: number;
  n: number;
}

/** stepcal's evidence for an entry (the one extra key; stripped on BLIS export). */
export interface Evidence {
  /** Fitting family: gemm, hbm, attention_decode, attention_prefill, collective, moe, host. */
  family: string;
  /** Measurement lane the value was fitted on (`vllm-0.24.0`). */
  lane?: string;
  /** Input files with sha256, the filter applied and rows used. */
  inputs?: Array<{ file: string; sha256: string; filter: string; rows_used: number }>;
  /** How ci95 was obtained. */
  ci_method?: 'bootstrap' | 'lm_covariance' | 'quantiles' | 'none';
  /** Bootstrap resamples and seed, when ci_method = bootstrap. */
  bootstrap?: { resamples: number; seed: number };
  train_error?: FitError;
  holdout_error?: FitError & { split: string };
  /** Free-form, ordered notes (biases found, rows excluded and why). */
  notes?: string[];
  /** Set when a registry update accepted a worse held-out accuracy. */
  accepted_worse?: string;
  /** Set when a registry update merged without held-out steps (`--no-holdout "<reason>"`). */
  accepted_without_holdout?: string;
  /** Set for extrapolated values: what predicted it and from which chips/widths. */
  extrapolation?: { predictor: string; from: string[]; holdout_error?: FitError };
  /** Set for copied entries (`stepcal registry copy`): the source chip, entry, its method and file. */
  copy?: { from: string; source_name: string; source_method: Method; source_file: string };
}

export interface CoefficientEntry {
  value: number;
  units: Units;
  method: Method;
  fitted: boolean;
  scope: Scope;
  sources?: Source[];
  rationale?: string;
  ci95?: [number, number];
  copied_from?: string;
  evidence?: Evidence;
}

/** A named entry (the single-key map flattened). */
export interface NamedEntry {
  name: string;
  entry: CoefficientEntry;
}

export interface CoefficientSet {
  kind: 'CoefficientSet';
  name: string;
  coefficients: NamedEntry[];
}

/** Set names stepcal writes (BLIS's). */
export const SET_NAMES = {
  primitives: 'cost-model-primitives',
  attention: 'cost-model-attention',
  collectives: 'cost-model-collectives',
  host: 'cost-model-host-overheads',
} as const;
