import { describe } from 'vitest';
import { checkChips } from './check-shared.ts';

// Split over two files (see check-hopper.test.ts) so two workers share the ~1.5 min of fitting.
describe('reproducibility: fit all --check (a100, l40s, b200)', () => checkChips(['a100', 'l40s', 'b200']));
