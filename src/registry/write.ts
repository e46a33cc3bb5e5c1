/**
 * The registry's write: multi-document YAML through the one atomic writer (src/core/io/fs.ts).
 * `PAUSE_ENV` (the kill-test hook between temp write and rename) is re-exported from there.
 */
import { PAUSE_ENV, writeFileAtomic } from '../core/io/fs.ts';
import { stringifyCoefficientSets } from '../core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../core/schemas/registry.ts';

export { PAUSE_ENV };

/** Atomically write sets as multi-document YAML. @throws UserError when the path is a folder or not writable. */
export function writeRegistryAtomic(file: string, sets: readonly CoefficientSet[]): void {
  writeFileAtomic(file, stringifyCoefficientSets(sets));
}
