/**
 * Workloads for `stepcal serve`: length distributions, closed and open loops, trace replay, and the
 * round-robin deal over data-parallel replicas. Pure and seeded (mulberry32, src/core/numeric/stats.ts).
 */
import Papa from 'papaparse';
import { InputError, UserError } from '../core/errors.ts';
import { decimalNumber } from '../core/numeric/decimal.ts';
import { seededRandom } from '../core/numeric/stats.ts';
import type { ReplicaWorkload, RequestSpec } from './types.ts';

/** A token-length distribution: fixed, uniform on integers [lo, hi], or exponential with a mean (≥ 1, rounded). */
export type LengthDist =
  | { kind: 'fixed'; value: number }
  | { kind: 'uniform'; lo: number; hi: number }
  | { kind: 'exponential'; mean: number };

/**
 * Parse `1024`, `fixed:1024`, `uniform:512-2048` or `exp:300` (exponential, mean 300).
 * @throws UserError naming the flag and the accepted forms
 */
export function parseLengthDist(text: string, flag: string): LengthDist {
  const t = text.trim();
  const bad = () =>
    new UserError(`${flag}: expected N, fixed:N, uniform:LO-HI or exp:MEAN (positive integers), got "${text}"`);
  const int = (s: string) => {
    const v = Number(s);
    if (!Number.isInteger(v) || v < 1) throw bad();
    return v;
  };
  if (/^\d+$/.test(t)) return { kind: 'fixed', value: int(t) };
  const [kind, arg = ''] = t.split(':', 2) as [string, string?];
  if (kind === 'fixed') return { kind: 'fixed', value: int(arg) };
  if (kind === 'uniform') {
    const m = /^(\d+)-(\d+)$/.exec(arg);
    if (!m) throw bad();
    const lo = int(m[1]!);
    const hi = int(m[2]!);
    if (hi < lo) throw new UserError(`${flag}: uniform:LO-HI needs LO ≤ HI, got "${text}"`);
    return { kind: 'uniform', lo, hi };
  }
  if (kind === 'exp') return { kind: 'exponential', mean: int(arg) };
  throw bad();
}

/** One draw. */
export function drawLength(d: LengthDist, rand: () => number): number {
  if (d.kind === 'fixed') return d.value;
  if (d.kind === 'uniform') return d.lo + Math.floor(rand() * (d.hi - d.lo + 1));
  return Math.max(1, Math.round(-d.mean * Math.log(1 - rand())));
}

/** Arrival process of an open loop: Poisson (exponential gaps) or constant, rate in requests per second. */
export type ArrivalProcess = { kind: 'poisson' | 'constant'; rate_per_s: number };

/**
 * N requests with seeded lengths; arrivals from `arrivals` (open loop) or none (closed loop).
 * Lengths are drawn first (ISL then OSL per request), arrivals after, so both loops see the same lengths.
 */
export function generateRequests(
  n: number,
  isl: LengthDist,
  osl: LengthDist,
  seed: number,
  arrivals?: ArrivalProcess,
): RequestSpec[] {
  const rand = seededRandom(seed);
  const out: RequestSpec[] = [];
  for (let i = 0; i < n; i++) out.push({ id: `r${i}`, isl: drawLength(isl, rand), osl: drawLength(osl, rand) });
  if (arrivals) {
    if (!(arrivals.rate_per_s > 0))
      throw new UserError(`request rate must be > 0 per second, got ${arrivals.rate_per_s}`);
    const gap = 1e6 / arrivals.rate_per_s;
    let t = 0;
    for (let i = 0; i < n; i++) {
      out[i]!.arrival_us = t;
      t += arrivals.kind === 'constant' ? gap : -gap * Math.log(1 - rand());
    }
  }
  return out;
}

const ARRIVAL_COLUMNS = { arrival_ms: 1000, arrival_s: 1e6, arrival_us: 1 } as const;

/**
 * Parse a replay trace: one row per request with one of `arrival_ms`/`arrival_s`/`arrival_us`, `isl`,
 * `osl`, optional `id` and optional `accepted_per_step` (mean accepted draft tokens per verification
 * step). Rows are sorted by arrival (stable); each request keeps its file and row (`where`).
 * @throws InputError naming file, row and column
 */
export function parseReplayCsv(text: string, file: string): RequestSpec[] {
  const parsed = Papa.parse<Record<string, string>>(text.trim(), {
    header: true,
    delimiter: ',',
    skipEmptyLines: true,
    transformHeader: (h) => h.trim(),
  });
  const fields = parsed.meta.fields ?? [];
  const tcols = (Object.keys(ARRIVAL_COLUMNS) as Array<keyof typeof ARRIVAL_COLUMNS>).filter((c) => fields.includes(c));
  if (tcols.length !== 1) {
    throw new InputError(
      { file, row: 0 },
      `expected exactly one arrival column (arrival_ms, arrival_s or arrival_us), found ${tcols.join(', ') || 'none'}`,
    );
  }
  for (const c of ['isl', 'osl']) {
    if (!fields.includes(c))
      throw new InputError(
        { file, row: 0, column: c },
        `missing column; expected ${tcols[0]}, isl, osl[, id, accepted_per_step]`,
      );
  }
  const tcol = tcols[0]!;
  const num = (rec: Record<string, string>, row: number, column: string, integer: boolean): number => {
    const s = (rec[column] ?? '').trim();
    const v = decimalNumber(s);
    const ok = integer ? Number.isInteger(v) && v >= 1 : Number.isFinite(v) && v >= 0;
    if (!ok)
      throw new InputError(
        { file, row, column },
        `expected ${integer ? 'a positive integer' : 'a finite number ≥ 0'}, got "${s}"`,
      );
    return v;
  };
  const out = parsed.data.map((rec, i): RequestSpec => {
    const row = i + 1;
    const r: RequestSpec = {
      id: (rec.id ?? '').trim() || `row${row}`,
      isl: num(rec, row, 'isl', true),
      osl: num(rec, row, 'osl', true),
      arrival_us: num(rec, row, tcol, false) * ARRIVAL_COLUMNS[tcol],
      where: { file, row },
    };
    if (fields.includes('accepted_per_step') && (rec.accepted_per_step ?? '').trim() !== '')
      r.accepted_per_step = num(rec, row, 'accepted_per_step', false);
    return r;
  });
  if (!out.length) throw new InputError({ file }, 'no requests');
  return byArrival(out);
}

/** Requests in arrival order, stable (ties keep the given FCFS order). */
export function byArrival(requests: readonly RequestSpec[]): RequestSpec[] {
  return requests
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.arrival_us! - b.r.arrival_us! || a.i - b.i)
    .map((x) => x.r);
}

/**
 * Deal requests over `dp` replicas round-robin (request i to replica i mod dp); a closed loop's
 * clients likewise (replica k gets the k-th share of `concurrency`, larger shares first). With fewer
 * clients than replicas, only the first `concurrency` replicas get clients and requests; the others
 * idle (their GPUs still count in the per-GPU denominator). KNOWN DIVERGENCE 5 (docs/serving.md):
 * vLLM's DP coordinator balances by queue length.
 */
export function dealReplicas(
  kind: 'closed' | 'open',
  requests: readonly RequestSpec[],
  dp: number,
  concurrency = 0,
): ReplicaWorkload[] {
  const active = kind === 'closed' ? Math.max(1, Math.min(dp, concurrency)) : dp;
  const out: ReplicaWorkload[] = [];
  for (let k = 0; k < dp; k++) {
    const mine = k < active ? requests.filter((_, i) => i % active === k) : [];
    if (kind === 'open') out.push({ kind, requests: mine });
    else
      out.push({
        kind,
        requests: mine,
        concurrency: k < active ? Math.floor(concurrency / active) + (k < concurrency % active ? 1 : 0) : 0,
      });
  }
  return out;
}
