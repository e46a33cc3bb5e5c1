#!/usr/bin/env node
/**
 * Draws the stage-level import graph of src/ (docs/architecture.svg) from dependency-cruiser's own
 * analysis, with the stage order of .dependency-cruiser.cjs: one box per stage, lowest (core) at the
 * bottom, one arrow per importing pair of stages (file counts are left out so that the drawing changes
 * only when a new pair appears). An arrow that
 * points up (a lower stage importing a higher one) is drawn red and makes the script exit 1.
 *
 * The same run applies the rules of .dependency-cruiser.cjs (no cycle, no upward import) and prints
 * every violation.
 *
 *   node scripts/dep-graph.mjs            write docs/architecture.svg
 *   node scripts/dep-graph.mjs --check    exit 1 on any rule violation, an edge pointing up, or a stale drawing
 *                                         (`npm run depcheck`, part of `npm test`)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'docs', 'architecture.svg');
const config = createRequire(import.meta.url)(path.join(ROOT, '.dependency-cruiser.cjs'));
const STAGES = createRequire(import.meta.url)(path.join(ROOT, 'scripts', 'stages.cjs'));

/**
 * One dependency-cruiser run over src/ with the repo's rules: the rule violations, and the
 * stage-level edges { from, to, imports } of its file-level graph.
 */
async function analyse() {
  const tsConfig = extractTSConfig(path.join(ROOT, 'tsconfig.json'));
  const options = { ...config.options, tsConfig: undefined, validate: true, ruleSet: { forbidden: config.forbidden } };
  const r = await cruise(['src'], options, undefined, { tsConfig });
  const stageOf = (p) => /(?:^|\/)src\/([^/]+)\//.exec(p)?.[1];
  const counts = new Map();
  for (const m of r.output.modules) {
    const from = stageOf(m.source);
    for (const d of m.dependencies) {
      const to = stageOf(d.resolved);
      if (!from || !to || from === to) continue;
      counts.set(`${from}>${to}`, (counts.get(`${from}>${to}`) ?? 0) + 1);
    }
  }
  const edges = [...counts].map(([k, imports]) => ({ from: k.split('>')[0], to: k.split('>')[1], imports }));
  return { edges, violations: r.output.summary.violations, modules: r.output.modules.length };
}

/** Attachment heights: the k-th of n edges at a box spreads over the box's height. */
function spread(edges, key) {
  const at = new Map();
  for (const s of STAGES) {
    const mine = edges.filter((e) => e[key] === s);
    mine.forEach((e, k) => {
      at.set(e, mine.length === 1 ? 0.5 : 0.15 + (0.7 * k) / (mine.length - 1));
    });
  }
  return at;
}

/** SVG of the stages (top = highest) and their edges; returns { svg, upward }. */
function draw(edges) {
  const boxW = 150,
    boxH = 34,
    gap = 20,
    left = 40,
    top = 40,
    laneW = 13;
  const y = (s) => top + (STAGES.length - 1 - STAGES.indexOf(s)) * (boxH + gap);
  const rank = (s) => STAGES.indexOf(s);
  const sorted = [...edges].sort(
    (a, b) => rank(a.from) - rank(a.to) - (rank(b.from) - rank(b.to)) || rank(b.from) - rank(a.from),
  );
  const outAt = spread(sorted, 'from');
  const inAt = spread(sorted, 'to');
  const paths = [];
  let upward = 0;
  sorted.forEach((e, lane) => {
    const up = rank(e.to) > rank(e.from);
    if (up) upward++;
    const x = left + boxW + 18 + lane * laneW;
    const y1 = y(e.from) + boxH * outAt.get(e);
    const y2 = y(e.to) + boxH * inAt.get(e);
    const color = up ? '#d62728' : '#777';
    paths.push(
      `<path d="M${left + boxW},${y1.toFixed(1)} H${x} V${y2.toFixed(1)} H${left + boxW + 6}" fill="none" stroke="${color}" stroke-width="1.1" marker-end="url(#${up ? 'up' : 'down'})"><title>${e.from} → ${e.to}</title></path>`,
    );
  });
  const width = Math.max(left + boxW + 40 + sorted.length * laneW, 640);
  const height = top + STAGES.length * (boxH + gap) + 24;
  const boxes = STAGES.map(
    (s) =>
      `<rect x="${left}" y="${y(s)}" width="${boxW}" height="${boxH}" rx="4" fill="${s === 'core' ? '#e8eef7' : '#f7f7f7'}" stroke="#333"/><text x="${left + boxW / 2}" y="${y(s) + 21}" text-anchor="middle">src/${s}</text>`,
  );
  const marker = (id, c) =>
    `<marker id="${id}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="${c}"/></marker>`;
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">
<defs>${marker('down', '#777')}${marker('up', '#d62728')}</defs>
<text x="${left}" y="22" font-weight="bold">Imports between the stages of src/: ${sorted.length} importing pairs, ${upward} pointing up</text>
${boxes.join('\n')}
${paths.join('\n')}
<text x="${left}" y="${height - 8}" fill="#555">Each arrow runs from the importing stage down to the imported one (scripts/dep-graph.mjs).</text>
</svg>
`;
  return { svg, upward };
}

process.chdir(ROOT);
const { edges, violations, modules } = await analyse();
for (const v of violations)
  console.error(
    `depcheck: ${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (cycle: ${v.cycle.map((c) => c.name ?? c).join(' → ')})` : ''}`,
  );
const { svg, upward } = draw(edges);
if (process.argv.includes('--check')) {
  let old = '';
  try {
    old = readFileSync(OUT, 'utf8');
  } catch {}
  if (upward > 0) console.error(`depcheck: ${upward} stage edge(s) point up`);
  if (old !== svg)
    console.error('depcheck: docs/architecture.svg is stale; run `node scripts/dep-graph.mjs` and commit it');
  const ok = violations.length === 0 && upward === 0 && old === svg;
  console.log(
    ok
      ? `depcheck: no violations (${modules} modules, ${edges.length} stage pairs, none pointing up)`
      : `depcheck: ${violations.length} rule violation(s)`,
  );
  process.exit(ok ? 0 : 1);
}
writeFileSync(OUT, svg);
console.log(`wrote ${path.relative(ROOT, OUT)}${upward ? ` (${upward} upward edges!)` : ''}`);
