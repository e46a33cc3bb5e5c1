/**
 * Reader of held-out step-timing files (`*.steps.csv`, format of issue 7). The implementation lives
 * in src/measurements/store.ts (one reader for the store, `calibrate` and the validator); this module
 * re-exports it so validation code imports it from its own area.
 */
export { parseStepsCsv, readStepsFile } from '../measurements/store.ts';
export type { LocatedStepRow } from '../measurements/schema.ts';
