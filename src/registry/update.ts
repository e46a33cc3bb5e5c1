/**
 * Gated registry update (issue 5): merge a refit into a chip's registry only when the composed
 * model's held-out accuracy does not get worse.
 *
 * Reference §6.4, "a better fit can be a worse model": per-primitive refits have made end-to-end
 * accuracy worse because the composed model rests on errors that partly cancel. So the gate is
 * end-to-end: the held-out steps are priced with the old and with the merged registry, pinned to
 * the same inputs (same step files, chip, host-fit flag and composition), and the update is refused
 * when, in ANY regime, held-out MAPE or |bias| grows by more than `tolerance_pct` percentage points.
 *
 * Merge rules (DECISION, docs/registry.md):
 * - only entries of the refit scoped to exactly this chip (`scope.hardware == [chip]`) and, with
 *   `only`, of the named families are merged; everything else in the registry file is never touched;
 * - an entry replaces the registry entry with the same (name, scope) wherever it sits, else it is
 *   appended to its set (created when missing);
 * - registry entries of this chip and family that the refit lacks are kept and listed as stale.
 *
 * Before the held-out gate (issue 12 item 3): merged entries must pass the evidence gates
 * (src/fit/evidence-gates.ts: holdout geo bound per family, prior plausibility band), and a refit
 * whose value moves outside both ci95 intervals (`ci95Shifts`) is refused unless `accept_shift`
 * gives a reason, recorded in `evidence.accepted_shift` of those entries.
 */
import { UserError } from '../core/errors.ts';
import { fmtDec } from '../core/render/format.ts';
import { type Column, tableLines } from '../core/render/table.ts';
import { changedFields, diffRegistries, type RegistryDiff } from './diff.ts';
import { entryKey, familyOf } from '../core/schemas/names.ts';
import type { CoefficientEntry, CoefficientSet, NamedEntry } from '../core/schemas/registry.ts';
import { errorsOf, formatProblem, validateRegistry, type ValidateOptions } from './validate.ts';
import { evidenceGates } from '../fit/evidence-gates.ts';

/** Held-out regimes compared by the gate (helper-7's `Regime`). */
export type GateRegime = string;

/** Metrics of one regime (subset of src/validate `RegimeMetrics`). */
export interface GateMetrics {
  n: number;
  mape_pct: number;
  bias_pct: number;
  median_ape_pct?: number;
  p90_ape_pct?: number;
  geo_mean_ratio?: number;
}

/** What the gate needs from a validation run. */
export interface HoldoutResult {
  regimes: Record<GateRegime, GateMetrics | null>;
  overall?: GateMetrics | null;
  /** Composition the metrics are for (pinned across the two runs). */
  headline?: string;
}

/**
 * Price the held-out steps with one registry. Injected so tests can use a fake; the CLI passes
 * src/validate's `runValidation`.
 */
export type HoldoutValidator = (args: {
  chip: string;
  registry: CoefficientSet[];
  stepFiles: string[];
  composition?: string;
}) => HoldoutResult;

/** One regime's comparison. */
export interface GateRow {
  regime: string;
  old: GateMetrics | null;
  new: GateMetrics | null;
  mape_delta_pp: number | null;
  abs_bias_delta_pp: number | null;
  worse: boolean;
  why?: string;
}

export interface GateResult {
  tolerance_pct: number;
  rows: GateRow[];
  worse: boolean;
  notes: string[];
}

/** Default tolerance, percentage points of MAPE and of |bias|. */
export const DEFAULT_TOLERANCE_PCT = 1;

/**
 * Compare old and new held-out metrics regime by regime (pure).
 * Worse in a regime when new MAPE − old MAPE > tol, or |new bias| − |old bias| > tol, or the old
 * registry could score the regime and the new one cannot.
 */
export function compareHoldout(
  oldR: HoldoutResult,
  newR: HoldoutResult,
  tolerance_pct = DEFAULT_TOLERANCE_PCT,
): GateResult {
  const regimes = [...new Set([...Object.keys(oldR.regimes), ...Object.keys(newR.regimes)])];
  const rows: GateRow[] = [];
  const notes: string[] = [];
  for (const regime of regimes) {
    const o = oldR.regimes[regime] ?? null;
    const n = newR.regimes[regime] ?? null;
    if (!o && !n) continue;
    if (o && !n) {
      rows.push({
        regime,
        old: o,
        new: null,
        mape_delta_pp: null,
        abs_bias_delta_pp: null,
        worse: true,
        why: 'the new registry scores no row of this regime',
      });
      continue;
    }
    if (!o && n) {
      rows.push({ regime, old: null, new: n, mape_delta_pp: null, abs_bias_delta_pp: null, worse: false });
      notes.push(`${regime}: only the new registry scores rows (n=${n.n}); nothing to compare`);
      continue;
    }
    const dm = n!.mape_pct - o!.mape_pct;
    const db = Math.abs(n!.bias_pct) - Math.abs(o!.bias_pct);
    const why: string[] = [];
    if (dm > tolerance_pct) why.push(`MAPE +${dm.toFixed(2)} pp`);
    if (db > tolerance_pct) why.push(`|bias| +${db.toFixed(2)} pp`);
    if (o!.n !== n!.n) notes.push(`${regime}: scored rows differ (old n=${o!.n}, new n=${n!.n})`);
    rows.push({
      regime,
      old: o,
      new: n,
      mape_delta_pp: dm,
      abs_bias_delta_pp: db,
      worse: why.length > 0,
      ...(why.length ? { why: why.join(', ') } : {}),
    });
  }
  return { tolerance_pct, rows, worse: rows.some((r) => r.worse), notes };
}

const f2 = (x: number | null | undefined) => fmtDec(x ?? undefined, 2);

/** Columns of the gate table (the widths keep old and new side by side when every value is short). */
const GATE_COLUMNS: Column[] = [
  { header: 'regime', align: 'left', width: 13 },
  { header: 'old n' },
  { header: 'old MAPE %' },
  { header: 'old bias %' },
  { header: 'new n' },
  { header: 'new MAPE %' },
  { header: 'new bias %' },
  { header: 'ΔMAPE pp' },
  { header: 'Δ|bias| pp' },
  { header: 'verdict', align: 'left' },
];

/** Both accuracy tables and the verdict per regime, as text. */
export function formatGate(g: GateResult): string {
  const rows = g.rows.map((r) => [
    r.regime,
    String(r.old?.n ?? '–'),
    f2(r.old?.mape_pct),
    f2(r.old?.bias_pct),
    String(r.new?.n ?? '–'),
    f2(r.new?.mape_pct),
    f2(r.new?.bias_pct),
    f2(r.mape_delta_pp),
    f2(r.abs_bias_delta_pp),
    r.worse ? `WORSE (${r.why})` : 'ok',
  ]);
  const lines = [`held-out accuracy (tolerance ${g.tolerance_pct} pp of MAPE and of |bias|, any regime):`];
  lines.push(...tableLines(GATE_COLUMNS, rows, { gap: ' | ' }).map((l) => `  ${l}`));
  for (const n of g.notes) lines.push(`  note: ${n}`);
  return `${lines.join('\n')}\n`;
}

/** Normalised hardware list equals [chip]. */
function scopedExactlyTo(e: CoefficientEntry, chip: string): boolean {
  const hw = e.scope?.hardware;
  const norm = (s: string) => s.toLowerCase().replace(/-/g, '_');
  return !!hw && hw.length === 1 && norm(String(hw[0])) === norm(chip);
}

/**
 * When a refit entry equals the registry entry in every public field, keep the reasons an earlier
 * update recorded (`accepted_worse`, `accepted_without_holdout`): re-merging the same refit must not
 * erase them.
 */
function keepRecordedReasons(old: CoefficientEntry, next: CoefficientEntry): CoefficientEntry {
  const ev = old.evidence;
  if (
    !ev ||
    (ev.accepted_worse === undefined && ev.accepted_without_holdout === undefined && ev.accepted_shift === undefined)
  )
    return next;
  const { evidence: _a, ...o } = old;
  const { evidence: _b, ...n } = next;
  if (changedFields(o as CoefficientEntry, n as CoefficientEntry).length) return next;
  return {
    ...next,
    evidence: {
      ...(next.evidence ?? { family: ev.family }),
      ...(ev.accepted_worse !== undefined ? { accepted_worse: ev.accepted_worse } : {}),
      ...(ev.accepted_without_holdout !== undefined ? { accepted_without_holdout: ev.accepted_without_holdout } : {}),
      ...(ev.accepted_shift !== undefined ? { accepted_shift: ev.accepted_shift } : {}),
    },
  };
}

/** Result of merging a refit (pure). */
export interface MergePlan {
  sets: CoefficientSet[];
  /** Refit entries taken (set, name). */
  merged: Array<{ set: string; name: string }>;
  /** Refit entries ignored, with why (other chips, other families, multi-chip scope). */
  ignored: string[];
  /** Registry entries of this chip and the merged families the refit does not produce (kept). */
  stale: string[];
}

/**
 * Merge `fitted` into `current` for `chip` (see the module comment). Does not validate.
 * @param only families to take (undefined = all families in the refit)
 */
export function planMerge(
  current: readonly CoefficientSet[],
  fitted: readonly CoefficientSet[],
  chip: string,
  only?: readonly string[],
): MergePlan {
  const sets = current.map((s) => ({ ...s, coefficients: [...s.coefficients] }));
  const merged: MergePlan['merged'] = [];
  const ignored: string[] = [];
  const families = new Set<string>();
  const refitKeys = new Set<string>();
  const counts = new Map<string, number>();
  const bump = (why: string) => counts.set(why, (counts.get(why) ?? 0) + 1);
  for (const fs of fitted) {
    for (const c of fs.coefficients) {
      const fam = familyOf(c.name, c.entry);
      if (!scopedExactlyTo(c.entry, chip)) {
        bump(`not scoped to exactly [${chip}] (other chips are never touched)`);
        continue;
      }
      if (only && !only.includes(fam)) {
        bump(`family ${fam} not in --only ${only.join(',')}`);
        continue;
      }
      families.add(fam);
      const key = entryKey(c.name, c.entry.scope);
      refitKeys.add(key);
      let placed = false;
      for (const s of sets) {
        const i = s.coefficients.findIndex((x) => entryKey(x.name, x.entry.scope) === key);
        if (i >= 0) {
          s.coefficients[i] = { name: c.name, entry: keepRecordedReasons(s.coefficients[i]!.entry, c.entry) };
          placed = true;
          merged.push({ set: s.name, name: c.name });
          break;
        }
      }
      if (!placed) {
        let s = sets.find((x) => x.name === fs.name);
        if (!s) {
          s = { kind: 'CoefficientSet', name: fs.name, coefficients: [] };
          sets.push(s);
        }
        s.coefficients.push({ name: c.name, entry: c.entry });
        merged.push({ set: s.name, name: c.name });
      }
    }
  }
  for (const [why, n] of counts) ignored.push(`${n} refit entr${n === 1 ? 'y' : 'ies'} ignored: ${why}`);
  const stale: string[] = [];
  for (const s of current)
    for (const c of s.coefficients)
      if (
        scopedExactlyTo(c.entry, chip) &&
        families.has(familyOf(c.name, c.entry)) &&
        !refitKeys.has(entryKey(c.name, c.entry.scope))
      )
        stale.push(`${s.name}: ${c.name}`);
  return { sets, merged, ignored, stale };
}

/** Options of `planUpdate`. */
export interface UpdateOptions {
  chip: string;
  current: readonly CoefficientSet[];
  fitted: readonly CoefficientSet[];
  only?: readonly string[];
  tolerance_pct?: number;
  /** Reason to accept a worse held-out accuracy (recorded in `evidence.accepted_worse`). */
  accept_worse?: string;
  /** Reason to merge without held-out steps (recorded in `evidence.accepted_without_holdout`). */
  no_holdout?: string;
  /** Reason to merge coefficients that moved outside both ci95 intervals (recorded in `evidence.accepted_shift`). */
  accept_shift?: string;
  stepFiles: readonly string[];
  validator: HoldoutValidator;
  /** Physics/schema lookups for the merged registry. */
  validate?: ValidateOptions;
  /** File name used in problems. */
  file?: string;
}

export interface UpdatePlan {
  status: 'write' | 'refused' | 'unchanged';
  /** Why refused, or what was recorded. */
  message: string;
  sets: CoefficientSet[];
  diff: RegistryDiff;
  merge: MergePlan;
  gate?: GateResult;
  /** Coefficients that moved outside both ci95 intervals (`ci95Shifts`), when that refused the update. */
  shifted?: string[];
  /** The two validation runs behind the gate (absent when no held-out check ran). */
  holdout?: { step_files: string[]; composition?: string; old: HoldoutResult; new: HoldoutResult };
  /** Text of both accuracy tables (empty when no held-out check ran). */
  report: string;
}

/** Attach a recorded reason to every entry of `merged` that is new or differs from `current` (returns new sets). */
function recordOnChanged(
  current: readonly CoefficientSet[],
  merged: CoefficientSet[],
  field: 'accepted_worse' | 'accepted_without_holdout' | 'accepted_shift',
  reason: string,
  only?: ReadonlySet<string>,
): CoefficientSet[] {
  const before = new Map<string, CoefficientEntry>();
  for (const s of current)
    for (const c of s.coefficients) before.set(`${s.name}\u0000${entryKey(c.name, c.entry.scope)}`, c.entry);
  return merged.map((s) => ({
    ...s,
    coefficients: s.coefficients.map((c): NamedEntry => {
      const old = before.get(`${s.name}\u0000${entryKey(c.name, c.entry.scope)}`);
      if (old && changedFields(old, c.entry).length === 0) return c;
      if (only && !only.has(entryKey(c.name, c.entry.scope))) return c;
      const evidence = { ...(c.entry.evidence ?? { family: familyOf(c.name, c.entry) }), [field]: reason };
      return { name: c.name, entry: { ...c.entry, evidence } };
    }),
  }));
}

/**
 * Decide an update (no I/O besides what the validator does): merge, validate the result, run the
 * held-out gate, and return the sets to write or the refusal.
 * @throws UserError when the merged registry fails schema or physics checks, or when the refit
 *   contributes nothing for the chip
 */
export function planUpdate(o: UpdateOptions): UpdatePlan {
  const tol = o.tolerance_pct ?? DEFAULT_TOLERANCE_PCT;
  if (!(tol >= 0)) throw new UserError(`--tolerance-pct must be ≥ 0, got ${tol}`);
  const merge = planMerge(o.current, o.fitted, o.chip, o.only);
  if (merge.merged.length === 0)
    throw new UserError(
      `the refit has no entry for chip ${o.chip}${o.only ? ` in families ${o.only.join(',')}` : ''} (${merge.ignored.join('; ') || 'it is empty'})`,
    );
  const diff = diffRegistries(o.current, merge.sets);
  if (diff.added.length + diff.changed.length === 0)
    return {
      status: 'unchanged',
      message: 'the refit equals the registry: nothing to write',
      sets: [...o.current],
      diff,
      merge,
      report: '',
    };
  const problems = errorsOf(validateRegistry(merge.sets, o.file ?? `<merged registry for ${o.chip}>`, o.validate));
  if (problems.length)
    throw new UserError(`the merged registry fails validation, refusing:\n${problems.map(formatProblem).join('\n')}`);
  const chipInfo = o.validate?.chip?.(o.chip);
  if (chipInfo) {
    const keys = new Set([...diff.added, ...diff.changed].map((d) => d.name));
    const refused = evidenceGates(
      chipInfo,
      merge.sets.flatMap((x) => x.coefficients).filter((c) => keys.has(c.name) && scopedExactlyTo(c.entry, o.chip)),
    );
    if (refused.length)
      throw new UserError(
        `the refit fails the evidence gates (docs/registry.md "Evidence gates"), refusing:\n  ${refused.join('\n  ')}`,
      );
  }
  const shifted = ci95Shifts(o.current, merge.sets, o.chip);
  if (shifted.length && !o.accept_shift)
    return {
      status: 'refused',
      message:
        `refused: ${shifted.length} coefficient(s) moved outside both ci95 intervals (old value outside the new ci95 and new value outside the old): ` +
        `${shifted.map((x) => x.text).join('; ')}. Pass --accept-shift "<reason>" to merge anyway, recording the reason in evidence.accepted_shift`,
      sets: [...o.current],
      diff,
      merge,
      shifted: shifted.map((x) => x.text),
      report: '',
    };
  if (shifted.length)
    merge.sets = recordOnChanged(
      o.current,
      merge.sets,
      'accepted_shift',
      o.accept_shift!,
      new Set(shifted.map((x) => x.key)),
    );

  if (o.stepFiles.length === 0) {
    const reason = o.no_holdout ?? o.accept_worse;
    if (!reason)
      return {
        status: 'refused',
        message: `chip ${o.chip} has no held-out steps, so the end-to-end gate cannot run; pass --no-holdout "<reason>" (or --accept-worse "<reason>") to merge anyway, recording the reason`,
        sets: [...o.current],
        diff,
        merge,
        report: '',
      };
    const sets = recordOnChanged(o.current, merge.sets, 'accepted_without_holdout', reason);
    return {
      status: 'write',
      message: `no held-out steps for ${o.chip}: merged without the gate; reason recorded in evidence.accepted_without_holdout`,
      sets,
      diff,
      merge,
      report: '',
    };
  }

  const stepFiles = [...o.stepFiles];
  const oldR = o.validator({ chip: o.chip, registry: [...o.current], stepFiles });
  const newR = o.validator({
    chip: o.chip,
    registry: merge.sets,
    stepFiles,
    ...(oldR.headline ? { composition: oldR.headline } : {}),
  });
  const gate = compareHoldout(oldR, newR, tol);
  const holdout = {
    step_files: stepFiles,
    ...(oldR.headline ? { composition: oldR.headline } : {}),
    old: oldR,
    new: newR,
  };
  const report =
    `held-out steps: ${stepFiles.join(', ')}${oldR.headline ? ` (composition pinned: ${oldR.headline})` : ''}\n` +
    formatGate(gate);
  if (!gate.worse)
    return {
      status: 'write',
      message: 'held-out accuracy is not worse in any regime: merged',
      sets: merge.sets,
      diff,
      merge,
      gate,
      holdout,
      report,
    };
  if (!o.accept_worse)
    return {
      status: 'refused',
      message: `refused: held-out accuracy gets worse by more than ${tol} pp in ${gate.rows
        .filter((r) => r.worse)
        .map((r) => `${r.regime} (${r.why})`)
        .join('; ')}. A better fit can be a worse model (reference §6.4); pass --accept-worse "<reason>" to override`,
      sets: [...o.current],
      diff,
      merge,
      gate,
      holdout,
      report,
    };
  const sets = recordOnChanged(o.current, merge.sets, 'accepted_worse', o.accept_worse);
  return {
    status: 'write',
    message: `held-out accuracy is worse, accepted by --accept-worse; reason recorded in evidence.accepted_worse of ${diff.added.length + diff.changed.length} entries`,
    sets,
    diff,
    merge,
    gate,
    holdout,
    report,
  };
}

/**
 * Entries of `chip` whose value moved outside both ci95 intervals: the new value is outside the old
 * entry's ci95 and the old value outside the new entry's (same name and scope). A refit entry
 * without a ci95 counts as a point interval; an old entry without one is not judged. Pure.
 */
export function ci95Shifts(
  current: readonly CoefficientSet[],
  merged: readonly CoefficientSet[],
  chip: string,
): Array<{ key: string; text: string }> {
  const before = new Map<string, CoefficientEntry>();
  for (const st of current) for (const c of st.coefficients) before.set(entryKey(c.name, c.entry.scope), c.entry);
  const out: Array<{ key: string; text: string }> = [];
  for (const st of merged)
    for (const c of st.coefficients) {
      const key = entryKey(c.name, c.entry.scope);
      const old = before.get(key);
      const [a, b] = [old?.ci95, c.entry.ci95];
      if (!old || !a || !scopedExactlyTo(c.entry, chip)) continue;
      const outside = (v: number, ci: readonly [number, number]) => v < ci[0] || v > ci[1];
      // A refit without a ci95 is a point: moving outside the old interval is then enough.
      if (outside(c.entry.value, a) && (!b || outside(old.value, b)))
        out.push({
          key,
          text: `${c.name} ${old.value} [${a[0]}, ${a[1]}] → ${c.entry.value} ${b ? `[${b[0]}, ${b[1]}]` : '(no ci95)'}`,
        });
    }
  return out;
}

/** `stepcal registry update --json` outcome (docs/registry.md "JSON output"). */
export interface UpdateJson {
  /** written | dry_run | unchanged | refused */
  status: 'written' | 'dry_run' | 'unchanged' | 'refused';
  chip: string;
  registry: string;
  message: string;
  /** Gate verdict: `passed`, `failed` (refused), `accepted_worse` (failed, overridden), `skipped_no_holdout` (no steps: refused or merged with --no-holdout), `not_run` (nothing changed), `refused_shift` (outside both ci95 intervals, before the held-out runs). */
  gate: {
    verdict: 'passed' | 'failed' | 'accepted_worse' | 'skipped_no_holdout' | 'not_run' | 'refused_shift';
    tolerance_pct: number | null;
    step_files: string[];
    composition: string | null;
    rows: GateRow[];
    notes: string[];
  };
  /** Both accuracy tables: per regime (and overall where the validator gives it), old and new registry. */
  accuracy: {
    old: Record<string, GateMetrics | null> | null;
    new: Record<string, GateMetrics | null> | null;
    old_overall: GateMetrics | null;
    new_overall: GateMetrics | null;
  };
  diff: RegistryDiff;
  merge: { merged: number; ignored: string[]; stale: string[] };
  /** Entries outside both ci95 intervals, when that refused the update. */
  shifted?: string[];
}

/**
 * The JSON form of an update plan (pure).
 * @param written whether the file was written (false for a dry run or a refusal)
 */
export function updateJson(plan: UpdatePlan, o: { chip: string; registry: string; written: boolean }): UpdateJson {
  const h = plan.holdout;
  const verdict: UpdateJson['gate']['verdict'] = plan.gate
    ? plan.gate.worse
      ? plan.status === 'write'
        ? 'accepted_worse'
        : 'failed'
      : 'passed'
    : plan.status === 'unchanged'
      ? 'not_run'
      : plan.shifted
        ? 'refused_shift'
        : 'skipped_no_holdout';
  return {
    status:
      plan.status === 'refused'
        ? 'refused'
        : plan.status === 'unchanged'
          ? 'unchanged'
          : o.written
            ? 'written'
            : 'dry_run',
    chip: o.chip,
    registry: o.registry,
    message: plan.message,
    gate: {
      verdict,
      tolerance_pct: plan.gate?.tolerance_pct ?? null,
      step_files: h?.step_files ?? [],
      composition: h?.composition ?? null,
      rows: plan.gate?.rows ?? [],
      notes: plan.gate?.notes ?? [],
    },
    accuracy: {
      old: h?.old.regimes ?? null,
      new: h?.new.regimes ?? null,
      old_overall: h?.old.overall ?? null,
      new_overall: h?.new.overall ?? null,
    },
    diff: plan.diff,
    merge: { merged: plan.merge.merged.length, ignored: plan.merge.ignored, stale: plan.merge.stale },
    ...(plan.shifted ? { shifted: plan.shifted } : {}),
  };
}
