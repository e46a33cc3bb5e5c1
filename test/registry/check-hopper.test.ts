import { describe } from 'vitest';
import { checkChips } from './check-shared.ts';

describe('reproducibility: fit all --check (h100, h200)', () => checkChips(['h100', 'h200']));
