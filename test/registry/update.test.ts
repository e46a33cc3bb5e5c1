import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRegistryFile } from '../../src/registry/load.ts';
import { parseCoefficientSets, stringifyCoefficientSets } from '../../src/core/schemas/registry-yaml.ts';
import type { CoefficientSet } from '../../src/core/schemas/registry.ts';
import {
  compareHoldout,
  planMerge,
  planUpdate,
  type HoldoutResult,
  type HoldoutValidator,
} from '../../src/registry/update.ts';
import { PAUSE_ENV } from '../../src/registry/write.ts';
import { REPO_ROOT } from '../../src/core/catalog/chip.ts';
import { listStepFiles } from '../../src/measurements/store.ts';
import { runValidation } from '../../src/validate/index.ts';
import { chipRegistry, clone, findEntry } from './fixtures.ts';
import { runCli as cliInProcess } from '../helpers/cli.ts';
import { BIN, runCli } from './cli.ts';

const TRUE_DECODE_RATE = 2_592_000;
const TRUE_PREFILL_FLOOR = 18.5;

/**
 * A fake held-out validator with a known answer: decode steps scale with 1/attention_decode_rate and
 * carry a −5% bias at the true rate; prefill steps scale with the prefill floor (+2% bias).
 * Metrics of a single-ratio regime: MAPE = |r − 1|·100, bias = (r − 1)·100.
 */
const fakeValidator: HoldoutValidator = ({ registry }) => {
  const rate = findEntry(registry, 'attention_decode_rate').value;
  const floor = findEntry(registry, 'attention_prefill_floor').value;
  const m = (r: number, n: number) => ({
    n,
    mape_pct: Math.abs(r - 1) * 100,
    bias_pct: (r - 1) * 100,
    median_ape_pct: Math.abs(r - 1) * 100,
    p90_ape_pct: Math.abs(r - 1) * 100,
    geo_mean_ratio: r,
  });
  return {
    regimes: {
      prefill: m(1.02 * (floor / TRUE_PREFILL_FLOOR), 40),
      decode: m(0.95 * (TRUE_DECODE_RATE / rate), 60),
      mixed: null,
      static_batch: null,
    },
    headline: 'no_overlap',
  };
};

function refit(f: (s: CoefficientSet[]) => void): CoefficientSet[] {
  const s = clone(chipRegistry('h200'));
  f(s);
  return s;
}

describe('held-out gate', () => {
  it('compareHoldout: worse by more than the tolerance in any regime, MAPE or |bias|', () => {
    const base: HoldoutResult = {
      regimes: { decode: { n: 10, mape_pct: 10, bias_pct: -4 }, prefill: { n: 5, mape_pct: 20, bias_pct: 3 } },
    };
    const ok = compareHoldout(
      base,
      { regimes: { decode: { n: 10, mape_pct: 10.9, bias_pct: 4.9 }, prefill: { n: 5, mape_pct: 12, bias_pct: 0 } } },
      1,
    );
    expect(ok.worse).toBe(false);
    const bias = compareHoldout(
      base,
      { regimes: { decode: { n: 10, mape_pct: 9, bias_pct: -5.5 }, prefill: { n: 5, mape_pct: 12, bias_pct: 0 } } },
      1,
    );
    expect(bias.worse).toBe(true);
    expect(bias.rows.find((r) => r.regime === 'decode')!.why).toBe('|bias| +1.50 pp');
    const lost = compareHoldout(base, { regimes: { decode: base.regimes.decode!, prefill: null } }, 1);
    expect(lost.rows.find((r) => r.regime === 'prefill')).toMatchObject({
      worse: true,
      why: 'the new registry scores no row of this regime',
    });
  });

  it('refuses a deliberately worse coefficient and prints both tables', () => {
    const current = chipRegistry('h200');
    const worse = refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_000_000));
    const plan = planUpdate({
      chip: 'h200',
      current,
      fitted: worse,
      only: ['attention_decode'],
      stepFiles: ['held-out.steps.csv'],
      validator: fakeValidator,
    });
    expect(plan.status).toBe('refused');
    // decode: old r = 0.95 → MAPE 5.00, bias −5.00; new r = 0.95·1.296 = 1.2312 → MAPE 23.12, bias +23.12
    expect(plan.gate!.rows.find((r) => r.regime === 'decode')).toMatchObject({ worse: true });
    expect(plan.gate!.rows.find((r) => r.regime === 'decode')!.mape_delta_pp).toBeCloseTo(
      100 * (0.95 * 1.296 - 1) - 5,
      9,
    );
    expect(plan.message).toMatch(
      /refused: held-out accuracy gets worse by more than 1 pp in decode \(MAPE \+18\.12 pp, \|bias\| \+18\.12 pp\)/,
    );
    expect(plan.report).toContain(
      'decode        |    60 |       5.00 |      -5.00 |    60 |      23.12 |      23.12 |    18.12 |      18.12 | WORSE',
    );
    expect(plan.report).toContain(
      'prefill       |    40 |       2.00 |       2.00 |    40 |       2.00 |       2.00 |     0.00 |       0.00 | ok',
    );
    expect(plan.sets).toEqual(current);
  });

  it('accepts it with --accept-worse, recording the reason in each changed entry only', () => {
    const current = chipRegistry('h200');
    const worse = refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_000_000));
    const plan = planUpdate({
      chip: 'h200',
      current,
      fitted: worse,
      stepFiles: ['x'],
      validator: fakeValidator,
      accept_worse: 'new FA3 kernel; offsetting term identified in host',
    });
    expect(plan.status).toBe('write');
    expect(findEntry(plan.sets, 'attention_decode_rate').evidence!.accepted_worse).toBe(
      'new FA3 kernel; offsetting term identified in host',
    );
    expect(findEntry(plan.sets, 'attention_decode_floor').evidence!.accepted_worse).toBeUndefined();
    expect(plan.diff.changed.map((c) => c.name)).toEqual(['attention_decode_rate']);
  });

  it('passes a refit within tolerance; tolerance is stated and adjustable', () => {
    const current = chipRegistry('h200');
    const close = refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_600_000));
    const plan = planUpdate({ chip: 'h200', current, fitted: close, stepFiles: ['x'], validator: fakeValidator });
    expect(plan.status).toBe('write');
    expect(plan.report).toContain('tolerance 1 pp');
    // Better in decode (rate closer to truth lowers |bias|)? 0.95·2.592/2.6 = 0.94708 → MAPE 5.29 (+0.29 pp): within 1 pp.
    const strict = planUpdate({
      chip: 'h200',
      current,
      fitted: close,
      stepFiles: ['x'],
      validator: fakeValidator,
      tolerance_pct: 0.1,
    });
    expect(strict.status).toBe('refused');
  });

  it('no held-out steps: refused unless --no-holdout or --accept-worse gives a reason', () => {
    const current = chipRegistry('h200');
    const f = refit((s) => (findEntry(s, 'gemm_m_half_bf16').value = 111));
    const r = planUpdate({ chip: 'h200', current, fitted: f, stepFiles: [], validator: fakeValidator });
    expect(r.status).toBe('refused');
    expect(r.message).toMatch(/no held-out steps/);
    const w = planUpdate({
      chip: 'h200',
      current,
      fitted: f,
      stepFiles: [],
      validator: fakeValidator,
      no_holdout: 'new part, steps not collected yet',
    });
    expect(w.status).toBe('write');
    expect(findEntry(w.sets, 'gemm_m_half_bf16').evidence!.accepted_without_holdout).toBe(
      'new part, steps not collected yet',
    );
  });

  it('refuses a merged registry that fails physics, naming the entry', () => {
    const f = refit((s) => (findEntry(s, 'hbm_derate').value = 1.3));
    expect(() =>
      planUpdate({
        chip: 'h200',
        current: chipRegistry('h200'),
        fitted: f,
        stepFiles: ['x'],
        validator: fakeValidator,
      }),
    ).toThrow(/entry hbm_derate \[hardware=h200\]: field value: hbm_derate 1.3 is outside \(0, 1\]/);
  });
});

describe('merge never touches other chips or families', () => {
  it('--only attention_decode on a two-chip file changes only h200 attention_decode entries', () => {
    const current = [...chipRegistry('h100'), ...chipRegistry('h200')];
    // The refit changes h200 gemm, h200 decode rate, and (wrongly) carries an h100 entry and a two-chip entry.
    const fitted = refit((s) => {
      findEntry(s, 'attention_decode_rate').value = 2_600_000;
      findEntry(s, 'gemm_eps_max_bf16').value = 0.95;
    });
    fitted[0]!.coefficients.push({
      name: 'hbm_derate',
      entry: { ...clone(findEntry(chipRegistry('h100'), 'hbm_derate')), value: 0.7 },
    });
    fitted[1]!.coefficients.push({
      name: 'attention_decode_floor',
      entry: {
        ...clone(findEntry(chipRegistry('h200'), 'attention_decode_floor')),
        scope: { hardware: ['h100', 'h200'] },
      },
    });
    const plan = planMerge(current, fitted, 'h200', ['attention_decode']);
    const before = stringifyCoefficientSets(current);
    // Everything but h200's attention_decode_rate is deep-equal to before.
    const after = plan.sets;
    for (let i = 0; i < current.length; i++)
      for (let j = 0; j < current[i]!.coefficients.length; j++) {
        const c = current[i]!.coefficients[j]!;
        const isTarget = c.name === 'attention_decode_rate' && c.entry.scope.hardware![0] === 'h200';
        if (isTarget) expect(after[i]!.coefficients[j]!.entry.value).toBe(2_600_000);
        else expect(after[i]!.coefficients[j]).toEqual(c);
      }
    expect(after.map((s) => s.coefficients.length)).toEqual(current.map((s) => s.coefficients.length));
    expect(stringifyCoefficientSets(current)).toBe(before); // input untouched
    expect(plan.ignored.join('\n')).toMatch(/ignored: not scoped to exactly \[h200\]/);
    expect(plan.ignored.join('\n')).toMatch(/family gemm not in --only attention_decode/);
  });
});

describe('registry update CLI: atomic write, killed mid-write', () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'stepcal-upd-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const regFile = path.join(tmp, 'h200.yaml');
  const fromFile = path.join(tmp, 'fitted.yaml');

  it('an interrupted update (SIGKILL between temp write and rename) leaves the old file byte-identical', async () => {
    writeFileSync(regFile, stringifyCoefficientSets([...chipRegistry('h100'), ...chipRegistry('h200')]));
    writeFileSync(fromFile, stringifyCoefficientSets(refit((s) => (findEntry(s, 'gemm_m_half_bf16').value = 120))));
    const before = readFileSync(regFile);
    const args = [
      'registry',
      'update',
      '--chip',
      'h200',
      '--from',
      fromFile,
      '--registry',
      regFile,
      '--no-holdout',
      'test: kill mid-write',
    ];
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, [PAUSE_ENV]: '20000' },
      stdio: 'ignore',
    });
    // Wait until the complete temp file exists (the child then sleeps before rename), then kill it.
    const tmpName = await new Promise<string>((resolve, reject) => {
      const t0 = Date.now();
      const tick = () => {
        const t = readdirSync(tmp).find((n) => n.startsWith('.h200.yaml.') && n.endsWith('.tmp'));
        if (t) return resolve(t);
        if (Date.now() - t0 > 30_000) return reject(new Error('temp file never appeared'));
        setTimeout(tick, 25);
      };
      tick();
    });
    // The temp file is written in one call; wait until it parses as the merged registry.
    await new Promise((r) => setTimeout(r, 200));
    const staged = parseCoefficientSets(readFileSync(path.join(tmp, tmpName), 'utf8'), tmpName);
    expect(findEntry(staged.slice(3), 'gemm_m_half_bf16').value).toBe(120); // h200's sets follow h100's three
    const exited = new Promise<NodeJS.Signals | null>((r) => child.on('exit', (_c, sig) => r(sig)));
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(readFileSync(regFile).equals(before)).toBe(true);
    const old = loadRegistryFile(regFile);
    expect(findEntry(old.slice(3), 'gemm_m_half_bf16').value).toBe(110);
    rmSync(path.join(tmp, tmpName));
  });

  // The merge runs in-process (the lock take-over and the written file are the point); the refusal is
  // the spawned case: exit 1 through a real process.
  it('the same update without the kill writes the merge and records the reason; exit codes', async () => {
    const r = await cliInProcess([
      'registry',
      'update',
      '--chip',
      'h200',
      '--from',
      fromFile,
      '--registry',
      regFile,
      '--no-holdout',
      'new part',
    ]);
    // The killed run above left its lock (and its pid is gone): this run takes it over and says so.
    expect(r.stderr).toMatch(
      /^stepcal: took over a stale lock .*\.stepcal\.lock \(pid \d+ running "registry update --chip h200" since .* is not running\)\n$/,
    );
    expect(r.code).toBe(0);
    const after = loadRegistryFile(regFile);
    const h200 = after.flatMap((s) => s.coefficients).filter((c) => c.name === 'gemm_m_half_bf16');
    expect(h200.map((c) => [c.entry.scope.hardware![0], c.entry.value])).toEqual([
      ['h100', 170],
      ['h200', 120],
    ]);
    expect(findEntry(after.slice(3), 'gemm_m_half_bf16').evidence!.accepted_without_holdout).toBe('new part');
    expect(existsSync(regFile)).toBe(true);
    // No steps and no reason → refused, exit 1, file untouched.
    writeFileSync(fromFile, stringifyCoefficientSets(refit((s) => (findEntry(s, 'gemm_m_half_bf16').value = 130))));
    const before = readFileSync(regFile);
    const refused = runCli([
      'registry',
      'update',
      '--chip',
      'h200',
      '--from',
      fromFile,
      '--registry',
      regFile,
      '--measurements-dir',
      tmp,
    ]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/no held-out steps/);
    expect(readFileSync(regFile).equals(before)).toBe(true);
  });
});

describe('held-out gate with the real validator (a100 registry, Splitwise held-out steps)', () => {
  const regFile = path.join(REPO_ROOT, 'registry', 'a100.yaml');
  const steps = listStepFiles(path.join(REPO_ROOT, 'measurements', 'a100'));
  const have = existsSync(regFile) && steps.length > 0;
  // Memoised on its whole input: the same registry is scored by several plans below (the current one by
  // three), and a validation of the same registry on the same steps gives the same scores.
  const scored = new Map<string, ReturnType<HoldoutValidator>>();
  const validator: HoldoutValidator = ({ chip, registry, stepFiles, composition }) => {
    const key = JSON.stringify([chip, registry, stepFiles, composition ?? null]);
    const hit = scored.get(key);
    if (hit) return structuredClone(hit); // a plan may not alter what the next one is given
    const r = runValidation({
      chip,
      registry,
      stepFiles,
      ...(composition ? { composition: composition as 'no_overlap' | 'overlap' } : {}),
    });
    const out = { regimes: r.regimes, headline: r.headline };
    scored.set(key, out);
    return out;
  };
  const scaled = (f: (sets: CoefficientSet[]) => void) => {
    const s = loadRegistryFile(regFile);
    f(s);
    return s;
  };
  it.skipIf(!have)(
    'refuses a deliberately worse coefficient (hbm_derate → 1.0, decode rate ×1.2: faster, on a chip already under-predicted)',
    () => {
      const current = loadRegistryFile(regFile);
      const worse = scaled((s) => {
        findEntry(s, 'hbm_derate').value = 1;
        findEntry(s, 'hbm_derate').ci95 = undefined;
        findEntry(s, 'attention_decode_rate').value = Math.round(findEntry(s, 'attention_decode_rate').value * 1.2); // ×2 would exceed the HBM datasheet and fail physics first
        findEntry(s, 'attention_decode_rate').ci95 = undefined;
      });
      // Both moves leave their ci95 (a refit without ci95 is a point): the shift gate refuses first.
      expect(planUpdate({ chip: 'a100', current, fitted: worse, stepFiles: steps, validator }).shifted).toHaveLength(2);
      const shift = { accept_shift: 'test: exercise the held-out gate' };
      const plan = planUpdate({ chip: 'a100', current, fitted: worse, stepFiles: steps, validator, ...shift });
      expect(plan.status).toBe('refused');
      const decode = plan.gate!.rows.find((r) => r.regime === 'decode')!;
      expect(decode.worse).toBe(true);
      expect(decode.mape_delta_pp!).toBeGreaterThan(1);
      const ok = planUpdate({
        chip: 'a100',
        current,
        fitted: worse,
        stepFiles: steps,
        validator,
        accept_worse: 'demonstration',
        ...shift,
      });
      expect(ok.status).toBe('write');
      expect(findEntry(ok.sets, 'hbm_derate').evidence!.accepted_worse).toBe('demonstration');
      expect(findEntry(ok.sets, 'hbm_derate').evidence!.accepted_shift).toBe('test: exercise the held-out gate');
    },
  );
  it.skipIf(!have)(
    '"a better fit can be a worse model" runs both ways: a slower decode rate (a worse primitive) passes because the composed model improves',
    () => {
      const current = loadRegistryFile(regFile);
      const slower = scaled((s) => {
        findEntry(s, 'attention_decode_rate').value = Math.round(findEntry(s, 'attention_decode_rate').value * 0.8);
        findEntry(s, 'attention_decode_rate').ci95 = undefined;
      });
      const plan = planUpdate({
        chip: 'a100',
        current,
        fitted: slower,
        stepFiles: steps,
        validator,
        accept_shift: 'test: exercise the held-out gate',
      });
      // The end-to-end gate judges the composed model only: a100 steps are under-predicted, so slower attention helps.
      expect(plan.gate!.rows.find((r) => r.regime === 'decode')!.mape_delta_pp!).toBeLessThan(0);
      expect(plan.status).toBe('write');
    },
  );
});

describe('recorded reasons survive a re-merge of the same refit', () => {
  it('merging the accepted refit again is "unchanged" and keeps evidence.accepted_worse', () => {
    const current = chipRegistry('h200');
    const worse = refit((s) => (findEntry(s, 'attention_decode_rate').value = 2_000_000));
    const first = planUpdate({
      chip: 'h200',
      current,
      fitted: worse,
      stepFiles: ['x'],
      validator: fakeValidator,
      accept_worse: 'kept reason',
    });
    const again = planUpdate({
      chip: 'h200',
      current: first.sets,
      fitted: worse,
      stepFiles: ['x'],
      validator: fakeValidator,
    });
    expect(again.status).toBe('unchanged');
    expect(findEntry(again.sets, 'attention_decode_rate').evidence!.accepted_worse).toBe('kept reason');
  });
});
