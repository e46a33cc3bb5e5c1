/**
 * The request-trace file formats (`stepcal trace`, seed chapter 2 §2.4 Listing 2.2), one zod schema
 * each, parsed on every load (issue 12 item 1):
 * - JSON: an array of requests, or `{unit?, requests: [...]}`; each request
 *   `{id, arrival, prompt_start, prompt_end, tokens: [t1, …]}`, times in the file's unit (numbers, or
 *   numeric strings as spreadsheets export them). Unknown request fields are refused: a misspelt
 *   `prompt_end` must not silently default.
 * - CSV: one row per token delivery, columns `TRACE_CSV_COLUMNS` (cells are strings; numbers are
 *   checked by `TraceTime`).
 * Times stay in the file's unit here; analytics/trace.ts converts them to µs once.
 */
import { z } from 'zod';
import { decimalNumber } from '../numeric/decimal.ts';

/** A finite time: a number or a non-blank numeric string (in the file's unit). */
export const TraceTime = z.union([
  z.number().finite(),
  z
    .string()
    .trim()
    .min(1)
    .transform((s) => decimalNumber(s))
    .pipe(z.number().finite()),
]);

/** One request of a JSON trace. */
export const TraceRequestSchema = z
  .object({
    id: z.union([z.string().min(1), z.number().finite()]).transform(String),
    arrival: TraceTime,
    prompt_start: TraceTime,
    prompt_end: TraceTime,
    tokens: z.array(TraceTime),
  })
  .strict();

/**
 * A JSON trace file: a bare array, or an object with a `requests` array and optionally the `unit` of
 * its times (ms, us or s; checked by analytics/trace.ts, which names the field).
 */
export const TraceJsonSchema = z.union([
  z.array(z.unknown()),
  z.object({ unit: z.unknown().optional(), requests: z.array(z.unknown()) }).passthrough(),
]);

/** CSV columns of a per-delivery trace. */
export const TRACE_CSV_COLUMNS = ['id', 'arrival', 'prompt_start', 'prompt_end', 'token_time'] as const;

/** One row of a CSV trace (cells as strings). */
export const TraceCsvRowSchema = z.object({
  id: z.string().trim().min(1, 'expected a request id'),
  arrival: TraceTime,
  prompt_start: TraceTime,
  prompt_end: TraceTime,
  token_time: TraceTime,
});
