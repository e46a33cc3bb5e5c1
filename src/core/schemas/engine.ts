/**
 * Engine profiles (issue 16): the host terms and the compute-efficiency term s of one serving engine,
 * fitted once on some deployments' step timings (`stepcal fit engine`) and used to price others.
 * Stored as `registry/engines/<name>.yaml`, one YAML document, `kind: EngineProfile`. Parsing and
 * serialising only; loading by name lives in src/registry/engine.ts, the law in src/core/laws/host.ts.
 *
 * Engine CPU cost is a property of the engine, not of the chip, so one profile serves every chip;
 * s multiplies the chip registry's priced SM time (s = 1: the engine runs its arithmetic as fast as
 * the per-operator tables the registry was fitted on).
 */
import { parseDocument, stringify as stringifyYaml } from 'yaml';
import { z } from 'zod';
import { ENGINE_HOST_TERMS, LARGE_STEP_MESSAGE_BYTES_GRID } from '../laws/host.ts';
import { UserError } from '../errors.ts';

const finite = () => z.number({ error: (i) => `must be a finite number, got ${JSON.stringify(i.input)}` });
const ci95 = z.tuple([finite(), finite()]);

/** One fitted term: value (µs per unit of its regressor; s dimensionless), ci95, identified or not. */
const TermSchema = z
  .object({
    value: finite(),
    ci95,
    identified: z.boolean(),
    note: z.string().optional(),
  })
  .strict();

const MetricsSchema = z
  .object({
    n: z.number().int().nonnegative(),
    mape_pct: finite(),
    median_ape_pct: finite(),
    p90_ape_pct: finite(),
    bias_pct: finite(),
  })
  .strict();

const TermsSchema = z
  .object(
    Object.fromEntries(ENGINE_HOST_TERMS.map((t) => [t, TermSchema])) as Record<
      (typeof ENGINE_HOST_TERMS)[number],
      typeof TermSchema
    >,
  )
  .strict();

export const EngineProfileSchema = z
  .object({
    kind: z.literal('EngineProfile'),
    name: z.string().regex(/^[a-z0-9._-]+$/, 'must match [a-z0-9._-]+'),
    description: z.string(),
    /** The step composition the terms were fitted for (chosen on the training rows). */
    composition: z.enum(['no_overlap', 'cm_overlap', 'overlap']),
    law: z.string(),
    terms: TermsSchema,
    /**
     * Threshold of `large_step_nvlink_factor`, bytes of one collective message (a step's scheduled
     * tokens × its collective bytes per token; src/core/laws/host.ts `LARGE_STEP_MESSAGE_BYTES_GRID`,
     * chosen on the training rows). Absent = the term applies to no step.
     */
    large_step_message_bytes: z
      .number()
      .refine(
        (t) => LARGE_STEP_MESSAGE_BYTES_GRID.includes(t),
        `must be one of ${LARGE_STEP_MESSAGE_BYTES_GRID.join(', ')}`,
      )
      .optional(),
    sm_scale: TermSchema,
    /**
     * s per chip of the training rows (acc19; docs/validation.md "s per chip"), with ci95; `sm_scale`
     * is the pooled s, used for a chip absent here. Absent = one s for every chip.
     */
    sm_scale_by_chip: z.record(z.string(), TermSchema).optional(),
    /**
     * The steps the training rows span: the most tokens one step scheduled, and the most rows of a
     * pure-decode step (a static batch's decode steps count `batch` rows). A price of a step beyond
     * either carries an extrapolation note (src/pricer/engine.ts). Absent = not recorded (profiles
     * written before it): no note.
     */
    training_range: z
      .object({
        max_step_tokens: z.number().int().positive(),
        max_decode_rows: z.number().int().nonnegative(),
      })
      .strict()
      .optional(),
    fit: z
      .object({
        method: z.string(),
        weighting: z.enum(['relative', 'absolute']),
        composition_rule: z.string(),
        training_objective_rel_pct: z.record(z.string(), finite()),
        n_train: z.number().int().positive(),
        train_rms_rel_pct: finite(),
        ci95_method: z.string(),
        holdout: z
          .object({
            rule: z.string(),
            n: z.number().int().nonnegative(),
            regimes: z.record(z.string(), MetricsSchema),
          })
          .strict(),
      })
      .strict(),
    provenance: z
      .object({
        stepcal_version: z.string(),
        steps: z.array(z.object({ file: z.string(), sha256: z.string(), rows: z.number().int() }).strict()).min(1),
        registries: z.array(z.object({ chip: z.string(), file: z.string(), sha256: z.string() }).strict()).min(1),
        chips: z.array(z.string()).min(1),
        deployments: z.array(z.string()).min(1),
      })
      .strict(),
  })
  .strict();
export type EngineProfile = z.infer<typeof EngineProfileSchema>;

/**
 * Parse one engine profile document.
 * @throws UserError naming `source` and the field (`file: field a.b: message`) on a YAML or schema error
 */
export function parseEngineProfile(text: string, source: string): EngineProfile {
  const doc = parseDocument(text);
  if (doc.errors.length) throw new UserError(`${source}: YAML error: ${doc.errors[0]!.message}`);
  let obj: unknown;
  try {
    obj = doc.toJS();
  } catch (err) {
    throw new UserError(`${source}: YAML error: ${(err as Error).message}`);
  }
  const old = preLargeStepProfile(obj);
  if (old) throw new UserError(`${source}: field terms.large_step_nvlink_factor: absent: ${old}`);
  const parsed = EngineProfileSchema.safeParse(obj);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? `: field ${issue.path.map(String).join('.')}` : '';
    throw new UserError(`${source}${where}: ${issue.message}`);
  }
  return parsed.data;
}

/**
 * Why a profile document written before the large-step term (no `terms.large_step_nvlink_factor`) is
 * refused, with what to do; undefined for any other document. Refused rather than read as factor 0:
 * its other terms were fitted without the term, so they would price large steps as that older fit did
 * (docs/validation.md "Profiles written before the large-step term").
 */
function preLargeStepProfile(obj: unknown): string | undefined {
  if (typeof obj !== 'object' || obj === null) return undefined;
  const o = obj as { name?: unknown; terms?: unknown };
  if (typeof o.terms !== 'object' || o.terms === null || 'large_step_nvlink_factor' in o.terms) return undefined;
  const name = typeof o.name === 'string' ? o.name : '<name>';
  return `the profile was written before the large-step collective term; re-fit it with \`stepcal fit engine --engine ${name} --steps <files...>\` (docs/validation.md)`;
}

/**
 * The profile as it prices chip `chip`: `sm_scale` is the chip's own s when the profile has one
 * (`sm_scale_by_chip`), else the pooled s; its note says which (price, sweep, serve and validate
 * `--engine` print it).
 */
export function engineForChip(p: EngineProfile, chip: string): EngineProfile {
  const own = p.sm_scale_by_chip?.[chip];
  const note = own
    ? `s = ${own.value}: ${chip}'s own, fitted on its rows`
    : p.sm_scale_by_chip
      ? `s = ${p.sm_scale.value}: pooled (the profile has no ${chip} rows)`
      : `s = ${p.sm_scale.value}: one s for every chip`;
  return { ...p, sm_scale: { ...(own ?? p.sm_scale), note } };
}

/** Serialise a profile (schema-checked first; key order as the schema's, so output is diffable). */
export function stringifyEngineProfile(p: EngineProfile): string {
  return stringifyYaml(EngineProfileSchema.parse(p), { lineWidth: 0, aliasDuplicateObjects: false });
}
