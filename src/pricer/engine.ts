/**
 * A step price under an engine profile (issue 16): the registry's host terms are replaced by the
 * profile's (law: src/core/laws/host.ts `engineHostUs`), and SM time carries the profile's s (the
 * caller builds the pricer with `sm_scale = profile.sm_scale.value`); a step whose collective message
 * (tokens × `info.collective_message_bytes_per_token`) is at least the profile's
 * `large_step_message_bytes` pays `large_step_nvlink_factor` × its NVLink µs more, as NVLink. Pure.
 */
import { collectiveMessageBytes, ENGINE_HOST_TERMS, engineHostUs, largeStepNvlinkUs } from '../core/laws/host.ts';
import type { EngineProfile } from '../core/schemas/engine.ts';
import type { PricerInfo, StepPricer } from './pricer.ts';
import { bottleneckOf } from './compose.ts';
import type { Batch, ColumnBatch, StepPrice } from './types.ts';

/** What `withEngineProfile` adds to a price: the profile's host and the registry's it replaced, µs. */
export interface EngineHostOutcome {
  engine: string;
  /** The composition the profile was fitted for (its prices are the ones to read). */
  composition: EngineProfile['composition'];
  sm_scale: number;
  host_us: number;
  registry_host_us: number;
  /** This step's collective message, bytes (scheduled tokens × collective bytes per token). */
  message_bytes: number;
  /** The profile's large-step threshold, bytes of a collective message; null = the term applies to no step. */
  large_step_message_bytes: number | null;
  /** Whether this step's message reached the threshold (it pays the large-step extra). */
  large_step_crossed: boolean;
  /** The large-step extra this step pays, µs of NVLink (`large_step_nvlink_factor` × its priced NVLink µs; 0 when not crossed). */
  large_step_nvlink_extra_us: number;
}

/** Bytes as MiB for a note (64 MiB; 0.5 MiB). */
function mib(bytes: number): string {
  return `${Number((bytes / (1024 * 1024)).toPrecision(3))} MiB`;
}

/**
 * The profile's large-step term in words (the engine line of price and sweep, serve's header):
 * `large-step collective: 2.717 × priced NVLink on steps whose collective message is ≥ 64 MiB`.
 */
export function largeStepLine(profile: EngineProfile): string {
  const t = profile.large_step_message_bytes;
  const f = profile.terms.large_step_nvlink_factor.value;
  return t === undefined || f === 0
    ? 'large-step collective: none'
    : `large-step collective: + ${f} × priced NVLink on steps whose collective message is ≥ ${mib(t)}`;
}

/**
 * The note a price under a profile prints when its step paid the large-step extra: how much, on what
 * NVLink, and that `--per-kind` does not include it (it is added per step, not per layer kind).
 */
export function largeStepNote(e: EngineHostOutcome, factor: number): string {
  const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;
  return `engine ${e.engine}: this step's collective message ${mib(e.message_bytes)} ≥ ${mib(e.large_step_message_bytes ?? 0)}: + ${ms(e.large_step_nvlink_extra_us)} NVLink (large_step_nvlink_factor ${factor} × ${ms(e.large_step_nvlink_extra_us / factor)} priced NVLink), in the nvlink line and every estimate, not in --per-kind`;
}

/**
 * A batch's rows, whether any schedules more than `decodeTokens` (a prefill row) and the tokens it
 * schedules, either batch form.
 */
function rowsOf(
  batch: Batch | ColumnBatch,
  decodeTokens: number,
): { rows: number; hasPrefill: boolean; tokens: number } {
  let hasPrefill = false;
  let tokens = 0;
  const n = 'requests' in batch ? batch.requests.length : batch.n;
  for (let i = 0; i < n; i++) {
    const t = 'requests' in batch ? batch.requests[i]!.scheduled_tokens : batch.scheduled[i]!;
    tokens += t;
    if (t > decodeTokens) hasPrefill = true;
  }
  return { rows: n, hasPrefill, tokens };
}

/**
 * Extrapolation notes of a step outside the profile's training steps (`training_range`): more tokens
 * than its largest training step, or a pure-decode step of more rows than its largest one. Empty
 * inside them or for a profile without a recorded range.
 */
function rangeNotes(profile: EngineProfile, rows: number, hasPrefill: boolean, tokens: number): string[] {
  const r = profile.training_range;
  if (!r) return [];
  const out: string[] = [];
  if (tokens > r.max_step_tokens)
    out.push(
      `engine profile ${profile.name}: the step schedules ${tokens} tokens, beyond its training steps (at most ${r.max_step_tokens}): host terms and large-step factor extrapolated`,
    );
  if (!hasPrefill && rows > r.max_decode_rows)
    out.push(
      `engine profile ${profile.name}: a decode step of ${rows} rows, beyond its training decode steps (at most ${r.max_decode_rows} rows): host terms and large-step factor extrapolated`,
    );
  return out;
}

/**
 * Re-price the host of one step with an engine profile: every composition total and the host resource
 * get host = engineHostUs(profile terms; steps 1, the batch's requests, the pricer's kernel count for
 * a step with or without prefill rows, tp) instead of the registry's host.
 * @param price the step priced by a pricer built with the profile's sm_scale
 * @param info that pricer's info (kernel counts, collective bytes per token)
 * @param decodeTokens tokens a decode row schedules (1 + speculative tokens); more = a prefill row
 */
export function withEngineProfile(
  price: StepPrice,
  batch: Batch | ColumnBatch,
  info: Pick<PricerInfo, 'kernels_with_prefill' | 'kernels_decode_only' | 'collective_message_bytes_per_token'>,
  tp: number,
  profile: EngineProfile,
  decodeTokens = 1,
): { price: StepPrice; engine: EngineHostOutcome } {
  const { rows, hasPrefill, tokens } = rowsOf(batch, decodeTokens);
  const host_us = engineHostUs(
    ENGINE_HOST_TERMS.map((t) => (t === 'large_step_nvlink_factor' ? 0 : profile.terms[t].value)),
    {
      steps: 1,
      request_steps: rows,
      kernel_steps: hasPrefill ? info.kernels_with_prefill : info.kernels_decode_only,
      tp,
    },
  );
  // The large-step collective extra is NVLink time (docs/validation.md "Large-step collective factor").
  const message_bytes = collectiveMessageBytes(tokens, info.collective_message_bytes_per_token);
  const threshold = profile.large_step_message_bytes;
  const nvlink_extra_us =
    threshold === undefined
      ? 0
      : profile.terms.large_step_nvlink_factor.value *
        largeStepNvlinkUs(message_bytes, price.resources_us.nvlink, threshold);
  const registry_host_us = price.resources_us.host;
  const d = host_us - registry_host_us + nvlink_extra_us;
  const resources_us = {
    ...price.resources_us,
    nvlink: price.resources_us.nvlink + nvlink_extra_us,
    host: host_us,
  };
  const bottleneck = bottleneckOf(resources_us);
  const outside = rangeNotes(profile, rows, hasPrefill, tokens);
  return {
    price: {
      ...price,
      ...(outside.length
        ? { extrapolated: true, extrapolation_notes: [...price.extrapolation_notes, ...outside] }
        : {}),
      no_overlap_us: price.no_overlap_us + d,
      compute_memory_overlap_us: price.compute_memory_overlap_us + d,
      overlap_us: price.overlap_us + d,
      resources_us,
      bottleneck,
    },
    engine: {
      engine: profile.name,
      composition: profile.composition,
      sm_scale: profile.sm_scale.value,
      host_us,
      registry_host_us,
      message_bytes,
      large_step_message_bytes: threshold ?? null,
      large_step_crossed: threshold !== undefined && message_bytes >= threshold,
      large_step_nvlink_extra_us: nvlink_extra_us,
    },
  };
}

/**
 * A pricer that prices every step under an engine profile (`withEngineProfile`): build `inner` with
 * `sm_scale = profile.sm_scale.value`; its info is kept. `priceInto` adjusts the caller's StepPrice in place.
 * @param decodeTokens tokens a decode row schedules (1 + speculative tokens)
 */
export function engineProfiledPricer(
  inner: StepPricer,
  profile: EngineProfile,
  tp: number,
  decodeTokens = 1,
): StepPricer {
  const apply = (batch: Batch | ColumnBatch, p: StepPrice) =>
    withEngineProfile(p, batch, inner.info, tp, profile, decodeTokens).price;
  return {
    info: inner.info,
    price: (batch, opts) => apply(batch, inner.price(batch, opts)),
    priceInto(batch, out, opts) {
      inner.priceInto(batch, out, opts);
      return Object.assign(out, apply(batch, out));
    },
    priceColumnsInto(batch, out, opts) {
      inner.priceColumnsInto(batch, out, opts);
      return Object.assign(out, apply(batch, out));
    },
    liveBatch: () => inner.liveBatch(),
    // The profile's host terms read the rows (engine.ts rowsOf): from the live batch's columns (allocates, as the rest of this path).
    priceLiveInto(live, out, opts) {
      inner.priceLiveInto(live, out, opts);
      return Object.assign(out, apply(live.columns(), out));
    },
  };
}
