/**
 * The roofline parameter file (`stepcal roofline --config`, chapter §2.1–2.3): one zod schema, parsed
 * on every load (issue 12 item 1). All fields optional; defaults are the chapter's.
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { UserError } from '../errors.ts';

const nonneg = z.number().finite().nonnegative();
const numList = z.union([nonneg, z.array(nonneg).min(1)]);

/** YAML parameter file: the law's parameters (all optional, defaults = chapter) plus sweep lists. */
export const RooflineConfigSchema = z
  .object({
    shared_bytes: nonneg.optional(),
    bytes_per_request: nonneg.optional(),
    ops_per_position: nonneg.optional(),
    mem_bytes_per_s: z.number().finite().positive().optional(),
    compute_ops_per_s: z.number().finite().positive().optional(),
    overhead_us: nonneg.optional(),
    context_scale: nonneg.optional(),
    /** R values to sweep. */
    requests: numList.optional(),
    /** N values, paired with `requests` (broadcast when one has length 1). */
    positions: numList.optional(),
    /** N = k·R when `positions` is absent. */
    positions_per_request: z.number().finite().positive().optional(),
    /** U values, paired with `requests`; default U = R. */
    useful_tokens: numList.optional(),
  })
  .strict();
export type RooflineConfig = z.infer<typeof RooflineConfigSchema>;

/**
 * Parse a roofline YAML parameter file.
 * @throws UserError naming `file` and the offending field
 */
export function parseRooflineConfig(text: string, file: string): RooflineConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new UserError(`${file}: not valid YAML: ${(err as Error).message}`);
  }
  const parsed = RooflineConfigSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length ? `field "${issue.path.join('.')}"` : 'top level';
    throw new UserError(`${file}: ${where}: ${issue.message}`);
  }
  return parsed.data;
}

/** Normalise a YAML scalar-or-list to a list. */
export function asList(v: number | number[] | undefined): number[] | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v : [v];
}
