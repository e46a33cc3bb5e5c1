/**
 * The stage order of src/, lowest first (docs/architecture.md). src/core is the bottom layer every
 * stage may use; each stage may import itself, core and the stages before it in this list, never one
 * after it. Read by .dependency-cruiser.cjs (the rule npm test enforces) and scripts/dep-graph.mjs
 * (the drawing in docs/architecture.svg).
 */
module.exports = ['core', 'measurements', 'fit', 'registry', 'pricer', 'analytics', 'serve', 'validate', 'report', 'cli'];
