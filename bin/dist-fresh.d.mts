/** Types of bin/dist-fresh.mjs (read by the benches, which are TypeScript). */
/** True when bin/stepcal.mjs would run dist/ for the command line `argv` (as in process.argv). */
export function distIsFresh(argv: readonly string[]): boolean;
