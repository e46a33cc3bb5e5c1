/**
 * Shipped MoE models whose router limits each token to `topk_group` of `n_group` expert groups (DeepSeek-V3's
 * grouped top-k: config.json `n_group` 8, `topk_group` 4), read from `catalog/models/<name>/config.json`.
 *
 * Why the fit needs them (docs/fitting.md "MoE expert time", session 15): the fused-MoE collector's `balanced`
 * routing gives each token one selected expert per group (token i picks experts (i + j·⌈E/k⌉) mod E, the
 * collector's `balanced_logits`), so under a grouped router every group scores the same; the rows say the first
 * `topk_group` groups win the tie and the token's other picks go to the lowest-index experts of those groups
 * (inferred from the rows, not from the collector's source). The rows of such a geometry labelled `balanced`
 * are then the table's most skewed routing: on the h200 fp8_block DeepSeek-V3 rows at 4096 tokens the ep 2 … 256
 * rows (CUTLASS) take 7.76, 5.67, 4.63, 4.04, 3.87, 3.65, 1.92 and 1 × the ep-256 time, against 8, 6, 5, 4.5,
 * 4.25, ≈ 4, 2, 1 × T pairs for that routing and 1/ep of the work for balanced routing.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.ts';
import { sha256 } from '../io/fs.ts';
import { knownModels, MODELS_DIR, parseConfigJson } from './model.ts';

/** One group-routed model's MoE geometry (model-level sizes, as the fused-MoE tables give them). */
export interface GroupRoutedModel {
  /** Catalog name (catalog/models/<name>). */
  model: string;
  hidden: number;
  /** Per-expert FFN intermediate size (moe_intermediate_size). */
  inter: number;
  /** Routed experts (n_routed_experts). */
  experts: number;
  /** Experts per token (num_experts_per_tok). */
  topk: number;
  n_group: number;
  topk_group: number;
  /** sha256 of the config.json read (hex), for the evidence that cites it. */
  config_sha256: string;
}

const cache = new Map<string, GroupRoutedModel[]>();

type Config = Record<string, unknown>;
const isObject = (v: unknown): v is Config => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A config's field as a positive integer; undefined when absent.
 * @throws UserError naming the file and field when present but not a positive integer
 */
function int(file: string, c: Config, key: string): number | undefined {
  const v = c[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
  throw new UserError(`${file}: ${key} must be a positive integer, got ${JSON.stringify(v)}`);
}

/**
 * The group-routed MoE of one parsed config (top level or `text_config`), else undefined.
 * @throws UserError when a config routes by groups but lacks one of its MoE sizes, or a field is malformed
 */
function groupRouted(file: string, model: string, root: Config, config_sha256: string): GroupRoutedModel | undefined {
  const text = root.text_config;
  for (const c of [root, ...(isObject(text) ? [text] : [])]) {
    const [n_group, topk_group] = [int(file, c, 'n_group'), int(file, c, 'topk_group')];
    if (n_group === undefined || topk_group === undefined || !(n_group > 1 && topk_group < n_group)) continue;
    const keys = ['hidden_size', 'moe_intermediate_size', 'n_routed_experts', 'num_experts_per_tok'] as const;
    const [hidden, inter, experts, topk] = keys.map((k) => int(file, c, k));
    if (!(hidden && inter && experts && topk)) {
      const missing = keys.filter((k) => c[k] === undefined);
      throw new UserError(
        `${file}: routes by groups (n_group ${n_group}, topk_group ${topk_group}) but has no ${missing.join(', ')}`,
      );
    }
    return { model, hidden, inter, experts, topk, n_group, topk_group, config_sha256 };
  }
  return undefined;
}

/** Read and parse one config.json. @throws UserError naming the file: unreadable, not JSON, or not an object */
function readConfig(file: string): { config: Config; text: string } {
  let text: string;
  try {
    if (!statSync(file).isFile()) throw new Error('not a file');
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UserError(`${file}: cannot read it (${(e as Error).message})`);
  }
  let config: unknown;
  try {
    config = parseConfigJson(text);
  } catch (e) {
    throw new UserError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  if (!isObject(config)) throw new UserError(`${file}: expected a JSON object, got ${JSON.stringify(config)}`);
  return { config, text };
}

/**
 * Every shipped model whose config.json (catalog/models/<name>/config.json, top level or `text_config`) routes
 * by groups (n_group > 1 and topk_group < n_group), with its MoE sizes; a model without a config.json is
 * skipped. Read once per directory.
 * @throws UserError naming the file when a config.json cannot be read, is not a JSON object, has a routing or
 *   size field that is not a positive integer, or routes by groups without its MoE sizes
 */
export function groupRoutedModels(dir = MODELS_DIR): GroupRoutedModel[] {
  const hit = cache.get(dir);
  if (hit) return hit;
  const out: GroupRoutedModel[] = [];
  for (const name of knownModels(dir)) {
    const file = path.join(dir, name, 'config.json');
    if (!existsSync(file)) continue;
    const { config, text } = readConfig(file);
    const g = groupRouted(file, name, config, sha256(text));
    if (g) out.push(g);
  }
  cache.set(dir, out);
  return out;
}

/**
 * The expert-law evidence notes about group-routed geometries, written by the fit (src/fit/moe-experts.ts) and read
 * back by the pricer (src/pricer/plan.ts) for `price`'s note: one format, here, for both.
 */
const LEFT_OUT_PREFIX =
  'balanced series left out, routed by groups (catalog/models/<model>/config.json; docs/fitting.md, MoE expert time) for ';
const CHECK_PREFIX =
  "left-out group-routed rows scored with this law, the collector's routing under the grouped router emulated (src/fit/moe-grouped-routing.ts): ";

/** The note naming a geometry whose balanced rows the fit left out: `… for <geometry> = <models; router>`. */
export const leftOutNote = (geometry: string, why: string): string => `${LEFT_OUT_PREFIX}${geometry} = ${why}`;

/** The note of the left-out rows' check (geo and bias as the fit prints them, n rows). */
export const leftOutCheckNote = (geo: string, bias: string, n: number): string =>
  `${CHECK_PREFIX}geo ${geo}, bias ${bias} over ${n}`;

/** Whether an entry's notes say the fit left out `geometry`'s balanced rows. */
export const notesLeaveOut = (notes: readonly string[] | undefined, geometry: string): boolean =>
  notes?.some((n) => n.startsWith(`${LEFT_OUT_PREFIX}${geometry} = `)) ?? false;

/** The left-out rows' check an entry's notes record (leftOutCheckNote), as printed; undefined when none. */
export function leftOutCheckOf(
  notes: readonly string[] | undefined,
): { geo: string; bias: string; n: string } | undefined {
  for (const n of notes ?? []) {
    if (!n.startsWith(CHECK_PREFIX)) continue;
    const m = /^geo ([\d.]+), bias ([\d.]+) over (\d+)$/.exec(n.slice(CHECK_PREFIX.length));
    if (m) return { geo: m[1]!, bias: m[2]!, n: m[3]! };
  }
  return undefined;
}
