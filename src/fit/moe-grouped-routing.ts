/**
 * The fused-MoE collector's `balanced` routing as a grouped router sees it (docs/fitting.md "MoE expert time",
 * session 15): which experts each token lands on, and so the work of the measured rank, for the rows the expert
 * fit leaves out (a geometry whose shipped model routes by groups, core/catalog/group-routing.ts). Used to score
 * those rows with the law fitted without them, a cross-geometry check; not to fit.
 *
 * Per token i of T, the collector's balanced logits select experts ⌊i·s/T + j·s⌋ mod E (T < s) or (i + j·s) mod E
 * (T ≥ s), j = 0…k−1, s = ⌈E/k⌉ (aiconfigurator's `balanced_logits`, public source). The grouped top-k then scores
 * each of the n_group groups by its top-2 logits, keeps the topk_group best (ties: the lower group index), and
 * takes the k best experts inside them (ties: the lower expert index): the token's selected experts there, then
 * the lowest-index others. The tie order is read off the rows (h200 DeepSeek-V3 fp8_block, ep 2 … 256: the rank
 * holds 8, 6, 5, 4.5, 4.25, ≈ 4, 2, 1 × T pairs), not from the collector's source. The measured rank holds experts
 * 0 … E/ep − 1.
 */
import {
  type ExpertLayerShape,
  type ExpertWork,
  expertRereadPasses,
  expertWork,
  l2MissFraction,
} from '../core/laws/moe-experts.ts';

/** A grouped router: n_group groups of E/n_group experts, topk_group of them kept per token. */
export interface GroupRouting {
  /** Expert groups (config.json `n_group`; DeepSeek-V3 8). */
  n_group: number;
  /** Groups a token may route to (config.json `topk_group`; DeepSeek-V3 4), below n_group. */
  topk_group: number;
}

const memo = new Map<string, Int32Array>();

/** The experts one token selects under the collector's balanced logits, into `out` (distinct); returns how many. */
function selected(i: number, tokens: number, experts: number, topk: number, out: Int32Array): number {
  const s = Math.ceil(experts / topk);
  let n = 0;
  for (let j = 0; j < topk; j++) {
    const e = tokens >= s ? (i + j * s) % experts : Math.floor((i * s) / tokens + j * s) % experts;
    let seen = false;
    for (let x = 0; x < n; x++) if (out[x] === e) seen = true;
    if (!seen) out[n++] = e;
  }
  return n;
}

/** Buffers of one counting run (groupedBalancedCounts): selected experts, membership, group counts, kept groups. */
interface Scratch {
  sel: Int32Array;
  isSel: Uint8Array;
  groupCount: Int32Array;
  kept: Uint8Array;
}

/**
 * Add one token's k picks under the grouped top-k to `counts` (module comment): the topk_group groups with the
 * most selected experts (capped at 2, the top-2 score; ties: the lower group), the selected experts inside them,
 * then the lowest-index others, k in all. `n` selected experts are in w.sel (distinct; sorted here in place).
 * No sort calls or arrays per token (issue 17): the kept groups are taken by score 2, 1, 0, each in index order.
 */
function addPicks(
  n: number,
  experts: number,
  topk: number,
  g: GroupRouting,
  w: Scratch,
  counts: Int32Array,
  weight = 1,
): void {
  const size = experts / g.n_group;
  w.groupCount.fill(0);
  w.kept.fill(0);
  for (let x = 0; x < n; x++) {
    w.isSel[w.sel[x]!] = 1;
    w.groupCount[Math.floor(w.sel[x]! / size)]!++;
  }
  let keep = g.topk_group;
  for (let score = 2; score >= 0 && keep > 0; score--)
    for (let grp = 0; grp < g.n_group && keep > 0; grp++)
      if (Math.min(w.groupCount[grp]!, 2) === score) {
        w.kept[grp] = 1;
        keep--;
      }
  w.sel.subarray(0, n).sort();
  let left = topk;
  for (let x = 0; x < n && left > 0; x++)
    if (w.kept[Math.floor(w.sel[x]! / size)]) {
      counts[w.sel[x]!]! += weight;
      left--;
    }
  for (let grp = 0; grp < g.n_group; grp++)
    if (w.kept[grp])
      for (let e = grp * size; e < (grp + 1) * size && left > 0; e++)
        if (!w.isSel[e]) {
          counts[e]! += weight;
          left--;
        }
  for (let x = 0; x < n; x++) w.isSel[w.sel[x]!] = 0;
}

/**
 * Tokens per expert (length E) of the collector's balanced routing of `tokens` tokens under grouped routing `g`.
 * Memoised per (tokens, E, k, g): the array returned is shared, so read it, do not modify it. From the stride on a
 * token's picks depend on i mod E only, so each residue is routed once and weighted by its token count (≤ E tokens
 * routed per call: 17 ms for the 27 token counts of a fused-MoE table, against 79 ms token by token).
 * @throws Error when E is not a multiple of n_group or topk_group ≥ n_group (not a grouped router)
 */
export function groupedBalancedCounts(tokens: number, experts: number, topk: number, g: GroupRouting): Int32Array {
  if (experts % g.n_group !== 0 || !(g.topk_group < g.n_group))
    throw new Error(`groupedBalancedCounts: ${experts} experts in ${g.n_group} groups, ${g.topk_group} kept`);
  const key = `${tokens}|${experts}|${topk}|${g.n_group}|${g.topk_group}`;
  const hit = memo.get(key);
  if (hit) return hit;
  const counts = new Int32Array(experts);
  const w: Scratch = {
    sel: new Int32Array(topk),
    isSel: new Uint8Array(experts),
    groupCount: new Int32Array(g.n_group),
    kept: new Uint8Array(g.n_group),
  };
  // From the stride on, a token's selection depends on i mod E only: each residue once, weighted by its tokens.
  const s = Math.ceil(experts / topk);
  const distinct = tokens >= s ? Math.min(tokens, experts) : tokens;
  for (let i = 0; i < distinct; i++) {
    const weight = tokens >= s ? Math.floor((tokens - 1 - i) / experts) + 1 : 1;
    addPicks(selected(i, tokens, experts, topk, w.sel), experts, topk, g, w, counts, weight);
  }
  memo.set(key, counts);
  return counts;
}

/**
 * The law's work (core/laws/moe-experts.ts ExpertWork) of the measured rank under grouped routing `g`: P pairs and
 * D touched experts from groupedBalancedCounts on experts 0 … E/ep − 1, the weight re-read per touched expert from
 * its own token count (not the mean m). What the routing does not change (FLOPs per pair, route and token bytes)
 * is expertWork's own.
 * @param bytes_per_element weight bytes per element of the format (fp8 1, bf16 2)
 * @param l2_bytes the chip's L2 size, bytes; absent: no re-read bytes (as expertWork)
 */
export function groupedWork(
  s: ExpertLayerShape,
  g: GroupRouting,
  bytes_per_element: number,
  l2_bytes?: number,
): ExpertWork {
  const law = expertWork(s, bytes_per_element, l2_bytes);
  const counts = groupedBalancedCounts(s.tokens, s.experts, s.topk, g).subarray(0, s.experts / s.ep);
  // One expert's weight bytes, mats·H·I'·bytes: W = 2·mats·H·I' FLOPs per pair (halving is exact).
  const expertBytes = (law.flops_per_pair / 2) * bytes_per_element;
  let pairs = 0;
  let touched = 0;
  let passes = 0;
  for (const c of counts) {
    if (c === 0) continue;
    pairs += c;
    touched++;
    passes += expertRereadPasses(c);
  }
  return {
    ...law,
    touched,
    pairs,
    tokens_per_expert: touched > 0 ? pairs / touched : 0,
    weight_bytes: touched * expertBytes,
    reread_bytes: expertBytes * passes * l2MissFraction(expertBytes, l2_bytes),
    // One bf16 activation row of H per pair on the rank, as expertWork counts its own pairs.
    pair_bytes: pairs * s.hidden * 2,
  };
}
