/**
 * From a held-out row to the batches the pricer prices, and the row's summed price. Pure (the
 * pricer is passed in).
 *
 * Mapping (issue 7; docs/validation.md):
 * - kind=step: `prefill_requests` requests, each scheduling prefill_tokens/prefill_requests new tokens
 *   on prefill_context_tokens/prefill_requests computed tokens; `decode_requests` requests, each
 *   scheduling 1 token on decode_context_tokens/decode_requests computed tokens. Totals that do not
 *   divide evenly are spread floor/ceil so the sums are exact ("requests within a class are equal",
 *   to one token).
 * - kind=static_batch: one prefill step of `batch` prompts of `prompt_tokens`, then output_tokens − 1
 *   decode steps at batch `batch`, decode step i (0-based) scheduling 1 token on prompt_tokens + i
 *   computed tokens (the context grows by one each step). The row's price is the sum of every step's.
 */
import type { Batch, PriceOptions, Pricer, Request, Resource, ResourceTimes, StepPrice } from '../pricer/types.ts';
import { RESOURCES } from '../pricer/types.ts';
import { emptyStepPrice } from '../pricer/compose.ts';
import type { StepTermsLog } from '../pricer/terms-log.ts';
import { collectiveMessageBytes, LARGE_STEP_MESSAGE_BYTES_GRID, largeStepNvlinkUs } from '../core/laws/host.ts';
import type { LocatedStepRow } from './steps.ts';
import type { Regime } from './types.ts';

/** Split `total` into `n` integers differing by at most 1 (larger ones first). */
export function spread(total: number, n: number): number[] {
  const base = Math.floor(total / n);
  const extra = Math.round(total - base * n);
  return Array.from({ length: n }, (_, i) => base + (i < extra ? 1 : 0));
}

/** Regime of a row: static_batch; else prefill / decode / mixed by which request classes it has. */
export function regimeOf(row: Pick<LocatedStepRow, 'kind' | 'prefill_requests' | 'decode_requests'>): Regime {
  if (row.kind === 'static_batch') return 'static_batch';
  if (row.prefill_requests > 0 && row.decode_requests > 0) return 'mixed';
  return row.prefill_requests > 0 ? 'prefill' : 'decode';
}

/** Requests in the step (kind=step) or `batch` (static_batch). */
export function batchSizeOf(row: LocatedStepRow): number {
  return row.kind === 'static_batch' ? row.batch : row.prefill_requests + row.decode_requests;
}

/** The batch of a kind=step row. */
export function stepBatch(row: LocatedStepRow): Batch {
  const requests: Request[] = [];
  if (row.prefill_requests > 0) {
    const n = row.prefill_requests;
    const nw = spread(row.prefill_tokens, n);
    const ctx = spread(row.prefill_context_tokens, n);
    for (let i = 0; i < n; i++) {
      requests.push({ scheduled_tokens: nw[i]!, computed_tokens: ctx[i]!, prompt_tokens: nw[i]! + ctx[i]! });
    }
  }
  if (row.decode_requests > 0) {
    const ctx = spread(row.decode_context_tokens, row.decode_requests);
    for (const c of ctx) requests.push({ scheduled_tokens: 1, computed_tokens: c, prompt_tokens: c });
  }
  return { requests };
}

/** The prefill step of a static batch. */
export function staticPrefillBatch(batch: number, prompt_tokens: number): Batch {
  return {
    requests: Array.from({ length: batch }, () => ({
      scheduled_tokens: prompt_tokens,
      computed_tokens: 0,
      prompt_tokens,
    })),
  };
}

/** Decode step `i` (0-based) of a static batch: every request schedules 1 on prompt_tokens + i computed. */
export function staticDecodeBatch(batch: number, prompt_tokens: number, i: number): Batch {
  const c = prompt_tokens + i;
  return {
    requests: Array.from({ length: batch }, () => ({ scheduled_tokens: 1, computed_tokens: c, prompt_tokens })),
  };
}

/** A row's summed price, with host split out so host terms can be refitted. */
export interface RowPrice {
  /** Σ steps (NoOverlap − host), µs. */
  no_overlap_nohost_us: number;
  /** Σ steps (Overlap − host), µs. */
  overlap_nohost_us: number;
  /** Σ steps (CMOverlap − host), µs. */
  cm_overlap_nohost_us: number;
  /** Σ steps host as priced from the registry, µs. */
  host_us: number;
  /** Σ steps per-resource µs (host = registry host). */
  resources_us: ResourceTimes;
  steps: number;
  /** Σ over steps of the requests in the step (host-fit feature). */
  request_steps: number;
  /**
   * Per threshold of `LARGE_STEP_MESSAGE_BYTES_GRID` (same order), Σ priced NVLink µs of the steps whose
   * collective message (tokens × collective bytes per token) is at least that many bytes (the large-step
   * collective regressor, src/core/laws/host.ts).
   */
  large_nvlink_us_by_t: number[];
  extrapolated: boolean;
  notes: string[];
}

function zeroTimes(): ResourceTimes {
  return { sm: 0, hbm: 0, nvlink: 0, nic: 0, host: 0 };
}

/**
 * Price a row: one pricer call for a step, 1 + (output_tokens − 1) for a static batch.
 * Host is taken from `resources_us.host` of each step; composition totals are kept without it.
 * With `log`, every step's composition inputs are recorded into it (PriceOptions.terms), for
 * `cmNohostFromLog`; a pricer that does not record leaves it empty.
 * @param collective_bytes_per_token bytes per scheduled token of the deployment's collective message
 *   (`PricerInfo.collective_message_bytes_per_token`; 0 = every message is 0 bytes)
 */
export function priceRow(
  row: LocatedStepRow,
  pricer: Pricer,
  log?: StepTermsLog,
  collective_bytes_per_token = 0,
): RowPrice {
  if (row.kind === 'static_batch')
    return priceStaticRows(
      row.batch,
      row.prompt_tokens,
      [row.output_tokens],
      pricer,
      log,
      collective_bytes_per_token,
    )[0]!;
  const acc = new RowAccumulator(pricer, log, collective_bytes_per_token);
  acc.add(stepBatch(row), row.prefill_tokens + row.decode_requests);
  return acc.snapshot();
}

/**
 * Static batches of `batch` prompts of `prompt_tokens` with the given output lengths (ascending), priced
 * as one: their steps are the same up to the shortest's end (the prefill, then decode step i on
 * prompt_tokens + i computed), so the longest is walked once and each row's price is the running sum
 * where its own steps end: the sums `priceRow` gives each row alone, bit for bit (same terms, same
 * order). With `log`, the longest row's steps are recorded (each row's are its first `steps`).
 * @param collective_bytes_per_token as `priceRow`'s
 */
export function priceStaticRows(
  batch: number,
  prompt_tokens: number,
  outputs: readonly number[],
  pricer: Pricer,
  log?: StepTermsLog,
  collective_bytes_per_token = 0,
): RowPrice[] {
  const acc = new RowAccumulator(pricer, log, collective_bytes_per_token);
  const out: RowPrice[] = [];
  acc.add(staticPrefillBatch(batch, prompt_tokens), batch * prompt_tokens);
  // One decode batch for every step, its context moved on in place (= staticDecodeBatch(batch,
  // prompt_tokens, i) at step i): a pricer keeps nothing of a batch, and building `batch` new
  // requests per step cost more than pricing them (validate on the Splitwise rows, issue 17).
  const dec = staticDecodeBatch(batch, prompt_tokens, 0);
  let i = 0;
  for (const o of outputs) {
    for (; i < o - 1; i++) {
      for (const q of dec.requests) q.computed_tokens = prompt_tokens + i;
      acc.add(dec, batch);
    }
    out.push(acc.snapshot());
  }
  return out;
}

/** The running sums of a row's steps (RowPrice), one step at a time. */
class RowAccumulator {
  private readonly acc: RowPrice = {
    no_overlap_nohost_us: 0,
    overlap_nohost_us: 0,
    cm_overlap_nohost_us: 0,
    host_us: 0,
    resources_us: zeroTimes(),
    steps: 0,
    request_steps: 0,
    large_nvlink_us_by_t: LARGE_STEP_MESSAGE_BYTES_GRID.map(() => 0),
    extrapolated: false,
    notes: [],
  };
  /** The last notes array merged (pricers share one between calls). */
  private seenNotes: readonly string[] | undefined;
  /**
   * One result for every step where the pricer can write into it (`priceInto`): a static batch has
   * thousands of steps, and a new StepPrice per step was most of validation's GC.
   */
  private readonly out: StepPrice | undefined;
  private readonly popts: PriceOptions | undefined;
  constructor(
    private readonly pricer: Pricer,
    log: StepTermsLog | undefined,
    private readonly bytesPerToken: number,
  ) {
    this.out = pricer.priceInto ? emptyStepPrice() : undefined;
    this.popts = log ? { terms: log } : undefined;
  }

  /** Price one step of `tokens` scheduled tokens (Σ scheduled_tokens of `batch`) and add it. */
  add(batch: Batch, tokens: number): void {
    const { acc, out, popts } = this;
    const p = out ? this.pricer.priceInto!(batch, out, popts) : this.pricer.price(batch, popts);
    const r = p.resources_us;
    const host = r.host;
    acc.no_overlap_nohost_us += p.no_overlap_us - host;
    acc.overlap_nohost_us += p.overlap_us - host;
    acc.cm_overlap_nohost_us += p.compute_memory_overlap_us - host;
    acc.host_us += host;
    // Each resource by name, not a loop over RESOURCES: keyed access by a variable name was the
    // largest cost of a static batch's thousands of steps (same sums, same order).
    const sum = acc.resources_us;
    sum.sm += r.sm;
    sum.hbm += r.hbm;
    sum.nvlink += r.nvlink;
    sum.nic += r.nic;
    sum.host += r.host;
    acc.steps += 1;
    acc.request_steps += batch.requests.length;
    const large = acc.large_nvlink_us_by_t;
    const message_bytes = collectiveMessageBytes(tokens, this.bytesPerToken);
    for (let k = 0; k < large.length; k++)
      large[k] = large[k]! + largeStepNvlinkUs(message_bytes, r.nvlink, LARGE_STEP_MESSAGE_BYTES_GRID[k]!);
    if (p.extrapolated) {
      acc.extrapolated = true;
      if (p.extrapolation_notes !== this.seenNotes)
        for (const n of p.extrapolation_notes) if (!acc.notes.includes(n)) acc.notes.push(n);
      this.seenNotes = p.extrapolation_notes;
    }
  }

  /** The sums so far, as a RowPrice of its own. */
  snapshot(): RowPrice {
    const a = this.acc;
    return {
      ...a,
      resources_us: { ...a.resources_us },
      large_nvlink_us_by_t: [...a.large_nvlink_us_by_t],
      notes: [...a.notes],
    };
  }
}

/**
 * `priceRow(row, pricer at engine scale s).cm_overlap_nohost_us` for rows whose steps are the first
 * `steps[j]` (ascending) steps recorded in `log` at s = 1 (src/pricer/terms-log.ts): the steps
 * re-composed at s and summed in order, each row's value read where its steps end, so the same
 * numbers, bit for bit, without pricing the rows again.
 */
export function cmNohostFromLog(log: StepTermsLog, s: number, steps: readonly number[]): number[] {
  const sums: number[] = [];
  let sum = 0;
  let i = 0;
  for (const n of steps) {
    if (n > i) {
      sum = log.cmOverlapNohostSum(i, n, s, sum);
      i = n;
    }
    sums.push(sum);
  }
  return sums;
}

/** Resource with the largest total. */
export function bottleneckOf(t: ResourceTimes): Resource {
  let best: Resource = 'sm';
  for (const r of RESOURCES) if (t[r] > t[best]) best = r;
  return best;
}

/**
 * The reason of one pricer extrapolation note, for counting rows per reason: the note without its
 * trailing parenthetical source, and, for the notes that carry per-step figures (memory capacity in
 * GiB, collective message bytes), a fixed wording without the figures. Pure.
 * Notes come from src/pricer/pricer.ts ("Extrapolation flags" in docs/pricer.md).
 */
export function extrapolationReason(note: string): string {
  if (/^memory: weights .* KV cache .* exceed /.test(note))
    return "memory: weights + the batch's KV cache exceed the chip's HBM";
  if (/^memory: weights .* before any KV cache$/.test(note)) return "memory: weights alone exceed the chip's HBM";
  if (/^a collective message of \d+ bytes exceeds/.test(note))
    return 'a collective message exceeds the largest fitted size (512 MiB)';
  let s = note.trim();
  if (s.endsWith(')')) {
    // drop the trailing balanced "( ... )"
    let depth = 0;
    for (let i = s.length - 1; i >= 0; i--) {
      if (s[i] === ')') depth++;
      else if (s[i] === '(' && --depth === 0) {
        if (i > 0) s = s.slice(0, i).trimEnd();
        break;
      }
    }
  }
  return s;
}
