/**
 * Host-overhead fitter (issue 3 "Host overheads"; reference §1.3 names, §1.5 published values, §4.10
 * how the pricer charges them).
 *
 * With `host` rows (a launch/replay microbenchmark): `t = a + b·N` per kind, N = kernels launched
 * (eager_launch, dispatch) or graph nodes replayed (graph_replay), repeats reduced by the median,
 * weighted least squares with relative residuals, ci95 from its covariance with a Student-t quantile
 * (the linear special case of the LM covariance). A negative intercept is an error (a fixed cost cannot be
 * negative). Entries:
 *   eager_launch  → host_launch_per_kernel      = b (us_per_transfer)
 *   graph_replay  → host_replay_graph_per_step  = a (us_per_step), host_replay_graph_per_node = b (us_per_transfer)
 *   dispatch      → host_dispatch_per_kernel    = b (us_per_transfer)   (stepcal name; BLIS has none)
 *
 * Without host rows — the AIConfigurator per-operator tables have none — nothing is fitted: host
 * terms are properties of the whole engine step and are never fitted from per-operator tables. The
 * BLIS registry's `assumed` values are emitted (reference §1.5), each with its rationale; step-level
 * fitting happens per engine in `stepcal validate --fit-host`. Every BLIS host name is always
 * emitted, so the set is complete either way.
 */
import { UserError } from '../core/errors.ts';
import { geometricError, groupBy, mapePct, median, roundSig } from '../core/numeric/stats.ts';
import type { CoefficientEntry, Units } from '../core/schemas/registry.ts';
import { SET_NAMES } from '../core/schemas/registry.ts';
import type { HostRow } from '../measurements/schema.ts';
import { fmt, provenance } from './collective-provenance.ts';
import type { FamilyFit, FitContext, FittedCoefficient } from './types.ts';

/** Two-sided 97.5% Student-t quantiles for 1…30 degrees of freedom. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145, 2.131, 2.12, 2.11,
  2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/** 97.5% quantile of Student's t with `dof` degrees of freedom (table to 30, Cornish–Fisher beyond). */
export function tQuantile975(dof: number): number {
  if (!(dof >= 1)) throw new Error(`t quantile needs dof ≥ 1, got ${dof}`);
  if (dof <= 30) return T975[Math.floor(dof) - 1]!;
  const z = 1.959963984540054;
  return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2);
}

/** Result of `fitHostLinear`. `n` = distinct N values fitted (repeats reduced by the median). */
export interface HostLinearFit {
  a_us: number;
  b_us_per_kernel: number;
  ci95_a: [number, number];
  ci95_b: [number, number];
  n: number;
  /** exp(mean |ln(pred/meas)|) over the median-reduced points. */
  residual_geo: number;
}

/**
 * Fit `latency_us = a + b·kernels` by weighted least squares (weights 1/latency², i.e. relative
 * residuals) on the per-N medians. ci95 = estimate ± t(0.975, n−2)·SE from the weighted LS covariance
 * s²·(XᵀWX)⁻¹; with exactly 2 distinct N the line is exact and the interval degenerates to the estimate.
 * @throws UserError with fewer than 2 distinct N, a non-positive latency or N, or a negative intercept.
 */
export function fitHostLinear(points: Array<{ kernels: number; latency_us: number }>): HostLinearFit {
  for (const p of points) {
    if (!(p.kernels > 0) || !Number.isFinite(p.kernels))
      throw new UserError(`host fit: kernels must be a positive count, got ${p.kernels}`);
    if (!(p.latency_us > 0) || !Number.isFinite(p.latency_us))
      throw new UserError(`host fit: latency_us must be positive, got ${p.latency_us}`);
  }
  const by = groupBy(points, (p) => p.kernels);
  const xs = [...by.keys()].sort((a, b) => a - b);
  if (xs.length < 2) throw new UserError(`host fit: t = a + b·N needs at least 2 distinct N, got ${xs.length}`);
  const ys = xs.map((x) => median(by.get(x)!.map((p) => p.latency_us)));
  const n = xs.length;
  // Weighted least squares, weights 1/y² (relative residuals: timing noise is multiplicative, so an
  // unweighted fit would let the largest N decide the intercept).
  let sw = 0;
  let swx = 0;
  let swxx = 0;
  let swy = 0;
  let swxy = 0;
  for (let i = 0; i < n; i++) {
    const w = 1 / ys[i]! ** 2;
    sw += w;
    swx += w * xs[i]!;
    swxx += w * xs[i]! ** 2;
    swy += w * ys[i]!;
    swxy += w * xs[i]! * ys[i]!;
  }
  const det = sw * swxx - swx * swx;
  const b = (sw * swxy - swx * swy) / det;
  let a = (swy - b * swx) / sw;
  // Rounding can leave an exact zero intercept at −1e-16: treat |a| below 1e-9 of the largest latency as 0.
  if (a < 0 && a > -1e-9 * Math.max(...ys)) a = 0;
  if (a < 0) {
    throw new UserError(
      `host fit: negative intercept a = ${a.toPrecision(4)} µs (slope ${b.toPrecision(4)} µs per kernel over N = ${xs[0]}…${xs[n - 1]}); ` +
        'a fixed cost cannot be negative — check the rows (mixed kinds, warm-up not excluded, N miscounted)',
    );
  }
  let ci95_a: [number, number] = [a, a];
  let ci95_b: [number, number] = [b, b];
  if (n > 2) {
    let swr2 = 0;
    for (let i = 0; i < n; i++) swr2 += (ys[i]! - (a + b * xs[i]!)) ** 2 / ys[i]! ** 2;
    const s2 = swr2 / (n - 2);
    const seA = Math.sqrt((s2 * swxx) / det);
    const seB = Math.sqrt((s2 * sw) / det);
    const t = tQuantile975(n - 2);
    ci95_a = [a - t * seA, a + t * seA];
    ci95_b = [b - t * seB, b + t * seB];
  }
  const pred = xs.map((x) => a + b * x);
  return { a_us: a, b_us_per_kernel: b, ci95_a, ci95_b, n, residual_geo: geometricError(pred, ys) };
}

/** BLIS's assumed host values (registry @ b4d8e2b8, reference §1.5), with their stated provenance. */
export const BLIS_HOST_ASSUMED: ReadonlyArray<{
  name: string;
  value: number;
  units: Units;
  why: string;
  ci95?: [number, number];
}> = [
  {
    name: 'host_admission_per_request',
    value: 40000,
    units: 'us_per_request',
    why: 'BLIS added it at b4d8e2b8 (absent at 1dd3dc75); the single largest accuracy lever it recorded (measured-tier TTFT MAPE 52.94% → 31.47%). Replacement experiment named there: TTFT intercept at 1 vs 1,024-token prompts, concurrency 1, warm cache.',
  },
  {
    name: 'host_admission_per_token',
    value: 0.35,
    units: 'us_per_token',
    why: 'BLIS assumed value; no measurement is recorded for it.',
  },
  {
    name: 'host_output_token',
    value: 45.9,
    units: 'us_per_token',
    why: 'transcribes the magnitude of BLIS trained-physics.yaml `output_token_processing` (45.907545) as an order-of-magnitude anchor.',
  },
  {
    name: 'host_completion',
    value: 777.3,
    units: 'us_per_request',
    why: 'transcribes the magnitude of BLIS trained-physics.yaml `post_decode_fixed` (777.3455) as an order-of-magnitude anchor.',
  },
  {
    name: 'host_launch_eager_per_layer',
    value: 7.0,
    units: 'us_per_layer',
    why: 'midpoint of the conventional 5–10 µs per-layer eager launch cost.',
  },
  {
    name: 'host_replay_graph_per_step',
    value: 7.0,
    units: 'us_per_step',
    why: 'midpoint of the conventional 5–10 µs CUDA-graph replay cost.',
  },
  {
    name: 'host_launch_per_kernel',
    value: 3.2,
    units: 'us_per_transfer',
    ci95: [3.1, 3.3],
    why: 'mean of the per-kernel residuals 3.116 µs (H200, 8,257-token context, ITL 6.02 ms) and 3.276 µs (H100, 707 tokens, ITL 6.13 ms) from two Granite-5 TP=8 runs at concurrency 1, divided by the graph kernel count; ci95 [3.1, 3.3] as published.',
  },
];

const SOURCE_CITE =
  'BLIS coefficient registry, set cost-model-host-overheads @ b4d8e2b8 (all entries assumed, fitted: false), transcribed in shared/reference/blis-kernel-and-registry.md §1.5';

function assumedEntry(chip: string, a: (typeof BLIS_HOST_ASSUMED)[number]): CoefficientEntry {
  return {
    value: a.value,
    units: a.units,
    method: 'assumed',
    fitted: false,
    scope: { hardware: [chip] },
    sources: [{ kind: 'publication', cite: SOURCE_CITE, role: 'primary' }],
    rationale:
      `Assumed, not measured on ${chip}: value copied from the BLIS registry's cost-model-host-overheads set (provenance there: ${a.why}) ` +
      'stepcal never fits host terms from per-operator tables (the AIConfigurator per-operator data holds no host rows, and host time is a ' +
      'property of the whole engine step): step-level fitting happens per engine in `stepcal validate --fit-host`, from measured step timings, ' +
      'and a host launch/replay microbenchmark (`host` rows) replaces the launch and replay terms when present.',
    ...(a.ci95 ? { ci95: a.ci95 } : {}),
    evidence: {
      family: 'host',
      notes: [a.ci95 ? 'ci95 copied from the BLIS registry (sourced, not computed here)' : 'no ci95: none is sourced'],
    },
  };
}

/** Map of host kind → registry outputs. */
const KIND_OUTPUTS: Record<string, Array<{ name: string; term: 'a' | 'b'; units: Units }>> = {
  eager_launch: [{ name: 'host_launch_per_kernel', term: 'b', units: 'us_per_transfer' }],
  graph_replay: [
    { name: 'host_replay_graph_per_step', term: 'a', units: 'us_per_step' },
    { name: 'host_replay_graph_per_node', term: 'b', units: 'us_per_transfer' },
  ],
  dispatch: [{ name: 'host_dispatch_per_kernel', term: 'b', units: 'us_per_transfer' }],
};

/** One host kind's fit, for the report. */
export interface HostKindFit {
  what: string;
  /** Raw rows of this kind. */
  rows: number;
  fit: HostLinearFit;
  train: { geo: number; mape_pct: number; n: number };
  holdout?: { geo: number; mape_pct: number; n: number; split: string };
  /** Distinct N, ascending. */
  ns: number[];
  /** Every row as (N, latency µs): the figure's scatter. */
  points: Array<[number, number]>;
}

/** Host family result: the kinds fitted (empty without host rows: every entry is then assumed). */
export type HostFit = FamilyFit & { result: { kinds: HostKindFit[] } };

/** Holdout of one kind: the largest N predicted from a fit on the smaller ones (needs ≥ 3 distinct N). */
function kindHoldout(
  what: string,
  krows: readonly HostRow[],
  ns: readonly number[],
  warnings: string[],
): HostKindFit['holdout'] {
  if (ns.length < 3) return undefined;
  const top = ns[ns.length - 1]!;
  try {
    const h = fitHostLinear(
      krows.filter((r) => r.kernels !== top).map((r) => ({ kernels: r.kernels, latency_us: r.latency_us })),
    );
    const m = [median(krows.filter((r) => r.kernels === top).map((r) => r.latency_us))];
    const p = [h.a_us + h.b_us_per_kernel * top];
    return {
      geo: roundSig(geometricError(p, m), 4),
      mape_pct: roundSig(mapePct(p, m), 4),
      n: 1,
      split: `largest N (${top}) held out, fitted on N = ${ns.slice(0, -1).join(', ')}`,
    };
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    warnings.push(`host ${what}: holdout fit failed: ${e.message}`);
    return undefined;
  }
}

/** Fit `t = a + b·N` for one kind; a data problem is a refusal (undefined returned). */
function fitKind(
  what: string,
  krows: readonly HostRow[],
  chip: string,
  refusals: string[],
  warnings: string[],
): HostKindFit | undefined {
  let f: HostLinearFit;
  try {
    f = fitHostLinear(krows.map((r) => ({ kernels: r.kernels, latency_us: r.latency_us })));
  } catch (e) {
    if (!(e instanceof UserError)) throw e;
    refusals.push(`host ${what} on ${chip}: ${e.message}`);
    return undefined;
  }
  const ns = [...new Set(krows.map((r) => r.kernels))].sort((a, b) => a - b);
  const holdout = kindHoldout(what, krows, ns, warnings);
  const meds = ns.map((x) => median(krows.filter((r) => r.kernels === x).map((r) => r.latency_us)));
  const pred = ns.map((x) => f.a_us + f.b_us_per_kernel * x);
  const train = {
    geo: roundSig(geometricError(pred, meds), 4),
    mape_pct: roundSig(mapePct(pred, meds), 4),
    n: ns.length,
  };
  return {
    what,
    rows: krows.length,
    fit: f,
    train,
    ...(holdout ? { holdout } : {}),
    ns,
    points: krows.map((r) => [r.kernels, r.latency_us]),
  };
}

/** The measured entry of one registry output (`a` or `b`) of a kind's fit. */
function kindEntry(
  k: HostKindFit,
  o: (typeof KIND_OUTPUTS)[string][number],
  lanes: readonly string[],
  prov: ReturnType<typeof provenance>,
  chip: string,
): CoefficientEntry {
  const f = k.fit;
  const v = o.term === 'a' ? f.a_us : f.b_us_per_kernel;
  const ci = o.term === 'a' ? f.ci95_a : f.ci95_b;
  return {
    value: roundSig(v, 4),
    units: o.units,
    method: 'measured',
    fitted: true,
    scope: { hardware: [chip] },
    sources: prov.sources,
    ci95: [roundSig(Math.min(ci[0], v), 4), roundSig(Math.max(ci[1], v), 4)],
    ...(o.name === 'host_dispatch_per_kernel'
      ? { rationale: 'stepcal extension: BLIS has no dispatch term; slope of t = a + b·N over dispatch rows.' }
      : {}),
    evidence: {
      family: 'host',
      lane: lanes.join('+'),
      inputs: prov.inputs,
      ci_method: f.n > 2 ? 'lm_covariance' : 'none',
      train_error: k.train,
      ...(k.holdout ? { holdout_error: k.holdout } : {}),
      notes: [
        `t = a + b·N fitted by weighted LS (weights 1/t²) on ${f.n} per-N medians: a = ${fmt(f.a_us)} µs, b = ${fmt(f.b_us_per_kernel)} µs per ${k.what === 'graph_replay' ? 'node' : 'kernel'}`,
        ...(f.n > 2 ? [] : ['only 2 distinct N: the line is exact and no interval can be estimated']),
      ],
    },
  };
}

/** Fit (or, without rows, assume) the host overheads; see module doc. Never throws on data problems. */
export function fitHost(rows: HostRow[], ctx: FitContext): HostFit {
  const chip = ctx.chip.name;
  const set = SET_NAMES.host;
  const refusals: string[] = [];
  const warnings: string[] = [];
  const fitted = new Map<string, FittedCoefficient>();
  const kinds: HostKindFit[] = [];
  for (const what of [...new Set(rows.map((r) => r.what))].sort()) {
    const outs = KIND_OUTPUTS[what];
    const krows = rows.filter((r) => r.what === what);
    if (!outs) {
      warnings.push(`host: rows of unknown kind "${what}" ignored`);
      continue;
    }
    const k = fitKind(what, krows, chip, refusals, warnings);
    if (!k) continue;
    kinds.push(k);
    const lanes = [...new Set(krows.map((r) => r.lane))].sort();
    const prov = provenance(ctx, lanes, `what=${what}; repeats reduced by median per N`, krows.length);
    for (const o of outs) fitted.set(o.name, { set, name: o.name, entry: kindEntry(k, o, lanes, prov, chip) });
  }
  // Assemble: fitted entries replace assumed ones of the same name; every BLIS name is present.
  const coefficients: FittedCoefficient[] = [];
  for (const a of BLIS_HOST_ASSUMED)
    coefficients.push(fitted.get(a.name) ?? { set, name: a.name, entry: assumedEntry(chip, a) });
  for (const [name, c] of [...fitted.entries()].sort())
    if (!BLIS_HOST_ASSUMED.some((a) => a.name === name)) coefficients.push(c);
  return { family: 'host', coefficients, refusals, warnings, result: { kinds } };
}
