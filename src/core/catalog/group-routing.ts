/**
 * Shipped MoE models whose router limits each token to `topk_group` of `n_group` expert groups (DeepSeek-V3's
 * grouped top-k: config.json `n_group` 8, `topk_group` 4), read from `catalog/models/<name>/config.json`.
 *
 * Why the fit needs them (docs/fitting.md "MoE expert time", session 15): the fused-MoE collector's `balanced`
 * routing gives each token one selected expert per group (token i picks experts (i + j·⌈E/k⌉) mod E), so
 * under a grouped router every group scores the same, the first `topk_group` groups win the tie, and the
 * token's remaining picks go to the lowest-index experts of those groups. The rows of such a geometry
 * labelled `balanced` are the table's most skewed routing, not its balanced one: the h200 fp8_block
 * DeepSeek-V3 rows take the same time at ep 1 and ep 2 (5020 µs at 4096 tokens) and ≈ 4.8× the time of
 * ep 256 at ep 8, where balanced routing would put 1/8 of the pairs on each rank.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { UserError } from '../errors.ts';
import { knownModels, loadModelConfigText, MODELS_DIR, parseConfigJson } from './model.ts';

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
}

const cache = new Map<string, GroupRoutedModel[]>();

/** A config's (or its text_config's) positive integer field, else undefined. */
function int(c: Record<string, unknown>, key: string): number | undefined {
  const v = c[key];
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;
}

/** The group-routed MoE of one parsed config (top level or `text_config`), else undefined. */
function groupRouted(model: string, root: Record<string, unknown>): GroupRoutedModel | undefined {
  const text = root.text_config;
  for (const c of [root, ...(text && typeof text === 'object' ? [text as Record<string, unknown>] : [])]) {
    const [n_group, topk_group] = [int(c, 'n_group'), int(c, 'topk_group')];
    if (n_group === undefined || topk_group === undefined || !(n_group > 1 && topk_group < n_group)) continue;
    const [hidden, inter, experts, topk] = [
      'hidden_size',
      'moe_intermediate_size',
      'n_routed_experts',
      'num_experts_per_tok',
    ].map((k) => int(c, k));
    if (hidden && inter && experts && topk) return { model, hidden, inter, experts, topk, n_group, topk_group };
  }
  return undefined;
}

/**
 * Every shipped model with a config.json (catalog/models/<name>/config.json) routed by groups: n_group > 1 and topk_group < n_group, with
 * its MoE sizes. Read once per directory.
 * @throws UserError when a config.json is not valid JSON (naming the model)
 */
export function groupRoutedModels(dir = MODELS_DIR): GroupRoutedModel[] {
  const hit = cache.get(dir);
  if (hit) return hit;
  const out: GroupRoutedModel[] = [];
  for (const name of knownModels(dir)) {
    if (!existsSync(path.join(dir, name, 'config.json'))) continue;
    let config: Record<string, unknown>;
    try {
      config = parseConfigJson(loadModelConfigText(name, dir));
    } catch (e) {
      throw new UserError(`catalog/models/${name}/config.json: not valid JSON (${(e as Error).message})`);
    }
    const g = groupRouted(name, config);
    if (g) out.push(g);
  }
  cache.set(dir, out);
  return out;
}
