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
import { z } from 'zod';

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
  'flops_per_us',
  'bytes_per_rank',
  'tokens',
  'sm_count',
] as const;
export type Units = (typeof UNITS)[number];

/** BLIS method enum. */
export const METHODS = ['measured', 'vendor_spec', 'literature', 'copied', 'assumed', 'not_charged'] as const;
export type Method = (typeof METHODS)[number];

/** A finite number (zod 4's z.number() already refuses NaN and ±Infinity; the message says so). */
const finite = () => z.number({ error: (i) => `must be a finite number, got ${describe(i.input)}` });
/** How a bad value is shown in a message: NaN as NaN, a string quoted. */
function describe(x: unknown): string {
  return typeof x === 'number' ? String(x) : x === undefined ? 'nothing' : JSON.stringify(x);
}

export const SourceSchema = z
  .object({
    kind: z.enum(['discussion', 'publication', 'datasheet', 'model', 'vendor_doc']),
    cite: z.string().trim().min(1, 'must be a non-empty string'),
    role: z.enum(['primary', 'supporting', 'upper_bound']),
  })
  .strict();
export type Source = z.infer<typeof SourceSchema>;

const names = z.array(z.string().min(1, 'must list non-empty names')).min(1, 'must be a non-empty list');
const counts = z.array(z.number().int().nonnegative()).min(1, 'must be a non-empty list');
/** Deployment dimensions an entry can be scoped to; an unstated dimension is a wildcard. */
export const ScopeSchema = z
  .object({
    hardware: names.optional(),
    model: names.optional(),
    tp: counts.optional(),
    ep: counts.optional(),
    nodes_spanned: counts.optional(),
  })
  .strict();
export type Scope = z.infer<typeof ScopeSchema>;

/** Error of a fit on one split. `geo` = exp(mean |ln(pred/meas)|) (≥ 1); `mape` in percent. */
export const FitErrorSchema = z.object({ geo: finite(), mape_pct: finite(), n: z.number().int().nonnegative() });
export type FitError = z.infer<typeof FitErrorSchema>;

/** stepcal's evidence for an entry (the one extra key; stripped on BLIS export). */
export const EvidenceSchema = z
  .object({
    /** Fitting family: gemm, hbm, attention_decode, attention_prefill, collective, moe, host. */
    family: z.string().min(1, 'must name the fitting family'),
    /** Measurement lane the value was fitted on (`vllm-0.24.0`). */
    lane: z.string().optional(),
    /** Input files with sha256, the filter applied and rows used. */
    inputs: z
      .array(
        z.object({
          file: z.string(),
          sha256: z.string(),
          filter: z.string(),
          rows_used: z.number().int().nonnegative(),
        }),
      )
      .optional(),
    /** How ci95 was obtained. */
    ci_method: z.enum(['bootstrap', 'lm_covariance', 'quantiles', 'none']).optional(),
    /** Bootstrap resamples and seed, when ci_method = bootstrap. */
    bootstrap: z.object({ resamples: z.number().int().positive(), seed: z.number().int() }).optional(),
    train_error: FitErrorSchema.optional(),
    holdout_error: FitErrorSchema.extend({ split: z.string() }).optional(),
    /** Free-form, ordered notes (biases found, rows excluded and why). */
    notes: z.array(z.string()).optional(),
    /** Set when a registry update accepted a worse held-out accuracy. */
    accepted_worse: z.string().optional(),
    /** Set when a registry update merged without held-out steps (`--no-holdout "<reason>"`). */
    accepted_without_holdout: z.string().optional(),
    /** Set when a registry update accepted coefficients outside both ci95 intervals (`--accept-shift "<reason>"`). */
    accepted_shift: z.string().optional(),
    /** Set for extrapolated values: what predicted it and from which chips/widths. */
    extrapolation: z
      .object({ predictor: z.string(), from: z.array(z.string()), holdout_error: FitErrorSchema.optional() })
      .optional(),
    /** Set for copied entries (`stepcal registry copy`): the source chip, entry, its method and file. */
    copy: z
      .object({ from: z.string(), source_name: z.string(), source_method: z.enum(METHODS), source_file: z.string() })
      .optional(),
  })
  .strict();
export type Evidence = z.infer<typeof EvidenceSchema>;

/**
 * One coefficient entry (BLIS's strict entry keys plus `evidence`). Shape only; the cross-field rules
 * (sources per method, rationale, ci95 containing the value) and the physics bounds are
 * src/registry/validate.ts's.
 */
export const CoefficientEntrySchema = z
  .object({
    value: finite(),
    units: z.enum(UNITS),
    method: z.enum(METHODS),
    fitted: z.boolean({ error: (i) => `must be true or false, got ${describe(i.input)}` }),
    scope: ScopeSchema,
    sources: z.array(SourceSchema).optional(),
    rationale: z.string().optional(),
    ci95: z.tuple([finite(), finite()]).optional(),
    copied_from: z.string().optional(),
    supersedes: z.string().optional(),
    validated: z.unknown().optional(),
    unsupported: z.unknown().optional(),
    evidence: EvidenceSchema.optional(),
  })
  .strict();
export type CoefficientEntry = z.infer<typeof CoefficientEntrySchema>;

/** A named entry (the single-key map flattened). */
export interface NamedEntry {
  name: string;
  entry: CoefficientEntry;
}

/** One YAML document of a registry file as written: `coefficients` is a list of single-key maps. */
export const CoefficientSetDocSchema = z
  .object({
    kind: z.literal('CoefficientSet'),
    name: z.string().min(1, 'set has no name'),
    coefficients: z.array(
      z
        .record(z.string().regex(/^[a-z][a-z0-9_]*$/, 'coefficient names are lower_snake_case'), CoefficientEntrySchema)
        .refine((m) => Object.keys(m).length === 1, 'expected a single-key map {name: entry}'),
    ),
  })
  .strict();

export interface CoefficientSet {
  kind: 'CoefficientSet';
  name: string;
  coefficients: NamedEntry[];
}

/**
 * JSON Schema (draft 2020-12) of one registry document, from the zod schema. Written to
 * docs/registry.schema.json; test/core/schemas.test.ts fails when the file is stale.
 */
export function registryJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(CoefficientSetDocSchema, { target: 'draft-2020-12' }) as Record<string, unknown>;
  return {
    ...schema,
    title: 'stepcal registry CoefficientSet document',
    description: 'One YAML document of registry/<chip>.yaml (generated from src/core/schemas/registry.ts)',
  };
}

/** The committed text of docs/registry.schema.json (2-space JSON, trailing newline). */
export function registryJsonSchemaText(): string {
  return `${JSON.stringify(registryJsonSchema(), null, 2)}\n`;
}

/** Set names stepcal writes (BLIS's). */
export const SET_NAMES = {
  primitives: 'cost-model-primitives',
  attention: 'cost-model-attention',
  collectives: 'cost-model-collectives',
  host: 'cost-model-host-overheads',
} as const;
