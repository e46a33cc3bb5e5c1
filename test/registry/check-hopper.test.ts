import { describe } from 'vitest';
import { CHECK_SPLIT, checkChips } from './check-shared.ts';

describe('reproducibility: fit all --check (h100, h200)', () => checkChips(CHECK_SPLIT.hopper));
