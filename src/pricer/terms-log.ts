/**
 * A step's composition inputs, recorded once and re-composed at another engine scale s (issue 17:
 * validation's CMOverlap search for s re-priced every row at every trial s). Pure.
 *
 * `s` enters a step only as the multiplier on each layer's SM and expert-SM µs and on the head's SM µs
 * (terms.ts, each kind's generated terms, applied before composition); every other term is independent of s. So a step
 * priced once at s = 1 with a `StepTermsLog` as `PriceOptions.terms` holds everything its price at any
 * s needs: `composeAt` multiplies the recorded SM times by s exactly as the kinds' terms do and calls the
 * same compose.ts functions in the same order, so its StepPrice equals, bit for bit, that of a pricer
 * built with `sm_scale = s` (test/pricer/terms-log.test.ts). Extrapolation notes are not recorded
 * (they do not depend on s); `composeAt` returns none.
 */
import { ACC_LEN, cmOverlapNohostOf, composeHead, composeHost, composeLayers, finishStepInto } from './compose.ts';
import type { StepPrice, StepTermsSink } from './types.ts';

const LAYER = 0;
const HEAD = 1;
const HOST = 2;
const NO_NOTES: readonly string[] = Object.freeze([]);

/**
 * Every step recorded through it, in order, as one flat tagged stream (a layer: tag + 7 numbers, a head:
 * tag + 2, the host: tag + 1, which ends a step). Record with a pricer built at s = 1.
 */
export class StepTermsLog implements StepTermsSink {
  private buf = new Float64Array(256);
  private len = 0;
  /** Offset of each recorded step's first entry (steps + 1 offsets: the last is the end). */
  private readonly starts: number[] = [0];
  private readonly acc = new Float64Array(ACC_LEN);

  /** Steps recorded so far. */
  get steps(): number {
    return this.starts.length - 1;
  }

  private room(n: number): void {
    if (this.len + n <= this.buf.length) return;
    const next = new Float64Array(Math.max(this.buf.length * 2, this.len + n));
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  layer(
    count: number,
    sm: number,
    hbm: number,
    nvlink: number,
    nic: number,
    expert_sm: number,
    expert_hbm: number,
  ): void {
    this.room(8);
    const b = this.buf;
    let j = this.len;
    b[j++] = LAYER;
    b[j++] = count;
    b[j++] = sm;
    b[j++] = hbm;
    b[j++] = nvlink;
    b[j++] = nic;
    b[j++] = expert_sm;
    b[j++] = expert_hbm;
    this.len = j;
  }

  head(sm: number, hbm: number): void {
    this.room(3);
    this.buf[this.len] = HEAD;
    this.buf[this.len + 1] = sm;
    this.buf[this.len + 2] = hbm;
    this.len += 3;
  }

  host(host_us: number): void {
    this.room(2);
    this.buf[this.len] = HOST;
    this.buf[this.len + 1] = host_us;
    this.len += 2;
    this.starts.push(this.len);
  }

  /**
   * Recorded step `step` (0-based) composed at engine scale `s` into `out` (no extrapolation notes).
   * @throws RangeError when `step` was not recorded
   */
  composeAt(step: number, s: number, out: StepPrice): StepPrice {
    this.check(step);
    return finishStepInto(this.replay(step, s), NO_NOTES, out);
  }

  /**
   * Σ over recorded steps `from` ≤ i < `to` of `composeAt(i, s, …)`'s compute_memory_overlap_us −
   * resources_us.host, added in step order onto `start` (the same number, bit for bit, as that sum
   * taken step by step; compose.ts `cmOverlapNohostOf`), without filling a StepPrice.
   * @throws RangeError when a step in the range was not recorded
   */
  cmOverlapNohostSum(from: number, to: number, s: number, start = 0): number {
    if (to > from) {
      this.check(from);
      this.check(to - 1);
    }
    let sum = start;
    for (let i = from; i < to; i++) sum += cmOverlapNohostOf(this.replay(i, s));
    return sum;
  }

  private check(step: number): void {
    if (!(step >= 0 && step < this.steps)) throw new RangeError(`step ${step} not recorded (${this.steps} steps)`);
  }

  /** The accumulators of step `step` composed at `s` (compose.ts, in the recorded order). */
  private replay(step: number, s: number): Float64Array {
    const b = this.buf;
    const acc = this.acc;
    acc.fill(0);
    for (let j = this.starts[step]!; ; ) {
      const tag = b[j]!;
      if (tag === LAYER) {
        composeLayers(acc, b[j + 1]!, b[j + 2]! * s, b[j + 3]!, b[j + 4]!, b[j + 5]!, b[j + 6]! * s, b[j + 7]!);
        j += 8;
      } else if (tag === HEAD) {
        composeHead(acc, b[j + 1]! * s, b[j + 2]!);
        j += 3;
      } else {
        composeHost(acc, b[j + 1]!);
        return acc;
      }
    }
  }
}
