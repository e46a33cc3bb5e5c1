/** The collector's balanced routing under a grouped top-k (src/fit/moe-grouped-routing.ts), worked by hand. */
import { describe, expect, it } from 'vitest';
import { expertWork } from '../../src/core/laws/moe-experts.ts';
import { groupedBalancedCounts, groupedWork } from '../../src/fit/moe-grouped-routing.ts';

const DSV3 = { n_group: 8, topk_group: 4 };

describe('groupedBalancedCounts: DeepSeek-V3 (E 256, k 8, 8 groups of 32, 4 kept), 4096 tokens', () => {
  const T = 4096;
  const c = groupedBalancedCounts(T, 256, 8, DSV3);
  const onRank = (L: number) => c.slice(0, L).reduce((a, x) => a + x, 0) / T;
  it('every token lands in groups 0-3; experts 0-3 take every token', () => {
    // Token i selects i mod 32 + 32·j (stride ⌈256/8⌉ = 32), one expert per group: every group ties, groups 0-3
    // are kept, the token's 4 experts there are taken and its other 4 picks are the lowest-index experts, 0-3
    // (0-4 less its own when i mod 32 < 4). So experts 0-3 get all T tokens; 128 experts are touched.
    expect(Array.from(c.slice(0, 4))).toEqual([T, T, T, T]);
    // Expert 4: its own tokens (i mod 32 = 4, T/32 = 128) and the ties of i mod 32 ∈ {0, 1, 2, 3} (4 × 128).
    expect(c[4]).toBe(640);
    expect(c.filter((x) => x > 0).length).toBe(128);
    expect(c.slice(128).every((x) => x === 0)).toBe(true);
    expect(c.reduce((a, x) => a + x, 0)).toBe(8 * T);
  });
  it('the measured rank (experts 0 … 256/ep − 1) holds 8, 8, 6, 5, 4.5, 4.25, 4, 2, 1 × T pairs at ep 1 … 256', () => {
    // ep 8 (experts 0-31, group 0): each token's own expert of group 0 (T) + its 4 tie picks there (4T) = 5T;
    // ep 4 (groups 0-1): 2T + 4T = 6T; ep 2 (groups 0-3): 4T + 4T = 8T, as at ep 1.
    expect([256, 128, 64, 32, 16, 8, 4, 2, 1].map(onRank)).toEqual([8, 8, 6, 5, 4.5, 4.25, 4, 2, 1]);
  });
  it('groupedWork: P, D and the re-read from the rank-0 counts; balanced routing would give T·k/ep on 32 experts', () => {
    const s = { tokens: T, hidden: 7168, inter: 2048, topk: 8, experts: 256, tp: 1, ep: 8 };
    // L2 16 MiB, so part of each 44 MB expert misses it and the re-read term has bytes to count.
    const w = groupedWork(s, DSV3, 1, 16 * 2 ** 20);
    expect(w.pairs).toBe(5 * T);
    expect(w.touched).toBe(32);
    expect(w.weight_bytes).toBe(32 * 3 * 7168 * 2048);
    // Re-read passes: experts 0-3 at 4096 tokens, ⌈4096/128⌉ − 1 = 31 each; expert 4 at 640 tokens, 4; experts 5-31
    // at 128 tokens (one m-tile), none: 128 in all.
    const passes = Array.from(groupedBalancedCounts(T, 256, 8, DSV3).slice(0, 32)).reduce(
      (a, x) => a + (x > 0 ? Math.max(0, Math.ceil(x / 128) - 1) : 0),
      0,
    );
    const expertBytes = 3 * 7168 * 2048;
    expect(passes).toBe(4 * 31 + 4);
    expect(w.reread_bytes).toBeCloseTo(expertBytes * passes * (1 - (16 * 2 ** 20) / expertBytes), 0);
    const balanced = expertWork({ ...s, routing: 'balanced' }, 1, 16 * 2 ** 20);
    expect(balanced.pairs).toBe(T);
    expect(w.pairs / balanced.pairs).toBe(5);
  });
  it('below the stride (T = 16 < ⌈256/8⌉ = 32) the logits spread each token by ⌊i·32/16⌋ = 2i: the same multiples', () => {
    // Token i selects ⌊2i + 32·j⌋ mod 256, one per group again; the 16 tokens' own experts in groups 0-3 are 0, 2, …,
    // 30 (+ 32·j), 64 of them, and the ties take experts 0-3 (or the next when one of them is the token's own).
    const c16 = groupedBalancedCounts(16, 256, 8, DSV3);
    expect(Array.from(c16.slice(0, 8))).toEqual([16, 16, 16, 16, 3, 0, 1, 0]);
    expect(c16.filter((x) => x > 0).length).toBe(66);
    const on = (L: number) => c16.slice(0, L).reduce((a, x) => a + x, 0);
    expect([256, 128, 64, 32, 16, 8, 4, 2, 1].map(on)).toEqual([128, 128, 96, 80, 72, 68, 64, 32, 16]);
  });
  it('a router that keeps every group is refused (not grouped)', () => {
    expect(() => groupedBalancedCounts(16, 256, 8, { n_group: 8, topk_group: 8 })).toThrow(/not|kept/);
  });
});

/**
 * The grouped top-k of one token written plainly (the module comment): the selected experts of the collector's
 * balanced logits, the topk_group groups by top-2 score (ties: lower group), the selected experts inside them
 * ascending, then the lowest-index others of the kept groups, k in all.
 */
function referenceCounts(tokens: number, experts: number, topk: number, g: { n_group: number; topk_group: number }) {
  const counts = new Array<number>(experts).fill(0);
  const s = Math.ceil(experts / topk);
  const size = experts / g.n_group;
  for (let i = 0; i < tokens; i++) {
    const sel = [
      ...new Set(
        Array.from({ length: topk }, (_, j) =>
          tokens >= s ? (i + j * s) % experts : Math.floor((i * s) / tokens + j * s) % experts,
        ),
      ),
    ];
    const score = (grp: number) => Math.min(sel.filter((e) => Math.floor(e / size) === grp).length, 2);
    const kept = Array.from({ length: g.n_group }, (_, grp) => grp)
      .sort((a, b) => score(b) - score(a) || a - b)
      .slice(0, g.topk_group)
      .sort((a, b) => a - b);
    const inKept = (e: number) => kept.includes(Math.floor(e / size));
    const picks = [
      ...sel.filter(inKept).sort((a, b) => a - b),
      ...kept.flatMap((grp) => Array.from({ length: size }, (_, x) => grp * size + x).filter((e) => !sel.includes(e))),
    ].slice(0, topk);
    for (const e of picks) counts[e]!++;
  }
  return counts;
}

describe('groupedBalancedCounts against the token-by-token grouped top-k', () => {
  it.each([
    [64, 4, 8, 4],
    [128, 6, 4, 2],
    [256, 8, 8, 3],
    [160, 8, 16, 4],
    [32, 2, 2, 1],
  ])('E %i, k %i, %i groups with %i kept, tokens 1 … 600', (experts, topk, n_group, topk_group) => {
    for (const tokens of [1, 3, 7, 16, 31, 33, 64, 100, 255, 600]) {
      const got = groupedBalancedCounts(tokens, experts, topk, { n_group, topk_group });
      expect(Array.from(got)).toEqual(referenceCounts(tokens, experts, topk, { n_group, topk_group }));
    }
  });
});
