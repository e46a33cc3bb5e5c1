import { describe } from 'vitest';
import { CHECK_SPLIT, checkChips } from './check-shared.ts';

// gb200 (fitted from its own measurements, issue 15) and rtx-pro-6000 (onboarded from the complete upstream folder).
describe('reproducibility: fit all --check (gb200, rtx-pro-6000)', () => checkChips(CHECK_SPLIT.onboarded));
