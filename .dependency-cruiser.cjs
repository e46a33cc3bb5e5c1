/**
 * The dependency rule (docs/architecture.md): one bottom layer (src/core) that every stage may use
 * and that uses no stage, then the stages in one direction. A file may import its own stage, any
 * lower stage and src/core; never a higher stage, and nothing may form a cycle. `npm test` runs
 * `npm run depcheck`, which fails on any violation.
 */
const STAGES = require('./scripts/stages.cjs');

const upward = STAGES.slice(0, -1).map((stage, i) => ({
  name: `no-upward-from-${stage}`,
  comment: `src/${stage} sits below ${STAGES.slice(i + 1).join(', ')}: it must not import them`,
  severity: 'error',
  from: { path: `^src/${stage}/` },
  to: { path: `^src/(${STAGES.slice(i + 1).join('|')})/` },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycle, at file level, anywhere in src/',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...upward,
    {
      name: 'src-not-to-tests',
      comment: 'Product code never imports tests, benchmarks or scripts',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench|scripts)/' },
    },
    {
      name: 'known-stage',
      comment: 'Every file under src/ belongs to a stage of the list above (add a new stage there first)',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/', pathNot: `^src/(${STAGES.join('|')})/` },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.ts', '.js', '.mjs'],
    },
    reporterOptions: {
      archi: { collapsePattern: '^src/[^/]+' },
      dot: { collapsePattern: '^src/[^/]+' },
    },
  },
};
