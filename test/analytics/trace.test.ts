/**
 * Known answers: seed ch02 §2.4–2.4.1, the five-request teaching trace (results/06_trace.txt).
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  analyseRequest,
  parseTraceCsv,
  readTraceJson,
  summariseTrace,
  type RequestRecord,
} from '../../src/analytics/trace.ts';
import { traceReport } from '../../src/report/trace.ts';
import { runCli } from '../helpers/cli.ts';

const FIX = path.join(import.meta.dirname, '..', 'fixtures', 'analytics');
const JSON_FILE = path.join(FIX, 'ch02-trace.json');
const CSV_FILE = path.join(FIX, 'ch02-trace.csv');
const ms = (x: number) => x * 1000;

function chapterTrace(): RequestRecord[] {
  return readTraceJson(readFileSync(JSON_FILE, 'utf8'), JSON_FILE, 'ms').records;
}

describe('a declared unit is read in any case', () => {
  it('"US" is us: an arrival of 2000 is 2000 µs', () => {
    const t = readTraceJson(
      '{"unit":"US","requests":[{"id":"A","arrival":2000,"prompt_start":3000,"prompt_end":4000,"tokens":[5000]}]}',
      'u.json',
    );
    expect(t.unit).toBe('us');
    expect(t.records[0]!.arrival_us).toBe(2000);
  });
});

describe('trace times are decimal numbers', () => {
  it('a numeric string time is read; "0x10" (16 to Number()) is refused naming the field', () => {
    const ok = readTraceJson(
      '[{"id":"A","arrival":"0","prompt_start":"2","prompt_end":"8","tokens":["10"]}]',
      't.json',
      'ms',
    ).records;
    expect(ok[0]!.arrival_us).toBe(0);
    expect(
      () =>
        readTraceJson('[{"id":"A","arrival":"0x10","prompt_start":2,"prompt_end":8,"tokens":[10]}]', 't.json', 'ms')
          .records,
    ).toThrow(/t\.json.*arrival/);
  });
});

describe('request timelines (chapter Listing 2.2)', () => {
  it('per-request Q/S/D/TTFT and gaps match the printed table', () => {
    const s = summariseTrace(chapterTrace());
    const rows = s.requests.map((r) => [r.id, r.queue_us, r.prompt_us, r.publish_us, r.ttft_us, r.gaps_us].flat());
    expect(rows).toEqual([
      ['A', ms(2), ms(6), ms(2), ms(10), ms(4), ms(4), ms(4)],
      ['B', ms(2), ms(6), ms(2), ms(10)],
      ['C', ms(8), ms(8), ms(3), ms(19), ms(4), ms(4)],
      ['D', ms(8), ms(4), ms(3), ms(15), ms(4)],
      ['E', ms(27), ms(12), ms(3), ms(42), ms(4), ms(16)],
    ]);
  });

  it('aggregates: TTFT n=5 mean 19.2 p50 15 p95 42; gaps n=8 mean 5.5 p95 16; 13 tokens / 65 ms = 200 tokens/s', () => {
    const s = summariseTrace(chapterTrace());
    expect(s.ttft).toEqual({ n: 5, mean_us: ms(19.2), p50_us: ms(15), p95_us: ms(42) });
    expect(s.gaps).toEqual({ n: 8, mean_us: ms(5.5), p95_us: ms(16) });
    expect(s.tokens).toBe(13);
    expect(s.span_us).toBe(ms(65));
    expect(s.tokens_per_s).toBe(200);
    expect(s.percentile_rule).toMatch(/nearest-rank/);
  });

  it('prints what the chapter prints, with the percentile convention', () => {
    const t = traceReport(summariseTrace(chapterTrace()), 'ms');
    expect(t).toContain('TTFT (ms): n=5, mean=19.2, p50=15, p95=42');
    expect(t).toContain('n=8, mean=5.5, p95=16');
    expect(t).toContain('Whole trace: 13 tokens / 65 ms = 200.0 tokens/s');
    expect(t).toMatch(/^B\s+2\s+6\s+2\s+10\s+1\s+-$/m);
    expect(t).toMatch(/^E\s+27\s+12\s+3\s+42\s+3\s+4,16$/m);
    expect(t).toContain('sorted[ceil(p·n) − 1]');
  });

  it('the CSV (one row per delivery) gives the same summary as the JSON', () => {
    const fromCsv = summariseTrace(parseTraceCsv(readFileSync(CSV_FILE, 'utf8'), CSV_FILE, 'ms'));
    const fromJson = summariseTrace(chapterTrace());
    expect(fromCsv.requests).toEqual(fromJson.requests);
    expect(fromCsv.ttft).toEqual(fromJson.ttft);
    expect(fromCsv.gaps).toEqual(fromJson.gaps);
  });

  it('the unit flag scales input: the same trace written in seconds gives the same µs', () => {
    const text = JSON.stringify(
      JSON.parse(readFileSync(JSON_FILE, 'utf8')).map(
        (r: { arrival: number; prompt_start: number; prompt_end: number; tokens: number[]; id: string }) => ({
          ...r,
          arrival: r.arrival / 1000,
          prompt_start: r.prompt_start / 1000,
          prompt_end: r.prompt_end / 1000,
          tokens: r.tokens.map((t) => t / 1000),
        }),
      ),
    );
    const s = summariseTrace(readTraceJson(text, 'x.json', 's').records);
    expect(s.ttft.mean_us).toBeCloseTo(19_200, 6);
    expect(s.tokens_per_s).toBeCloseTo(200, 9);
  });

  it('a one-token request contributes no gap, never a zero; all one-token → no gap result', () => {
    const s = summariseTrace(chapterTrace());
    expect(s.requests.find((r) => r.id === 'B')!.gaps_us).toEqual([]);
    expect(s.gaps.n).toBe(8); // 3 + 0 + 2 + 1 + 2, not 9
    const single = summariseTrace([
      { id: 'x', arrival_us: 0, prompt_start_us: 1, prompt_end_us: 2, token_times_us: [3] },
    ]);
    expect(single.gaps).toEqual({ n: 0, mean_us: null, p95_us: null });
    expect(traceReport(single, 'us')).toMatch(/n=0, no result/);
  });

  it('one mean per request: A 4, C 4, D 4, E 10 → n=4 mean 5.5, p95 10 (nearest-rank)', () => {
    const s = summariseTrace(chapterTrace(), { gap_mode: 'per-request-mean' });
    expect(s.gaps).toEqual({ n: 4, mean_us: ms(5.5), p95_us: ms(10) });
  });

  it('type-7 percentiles are an option: TTFT p95 = 19 + 0.8·(42 − 19) = 37.4 ms', () => {
    const s = summariseTrace(chapterTrace(), { percentile: 'type7' });
    expect(s.ttft.p95_us).toBeCloseTo(ms(37.4), 6);
    expect(s.ttft.p50_us).toBe(ms(15));
  });

  it("experiment 3: delaying E's deliveries by 10 ms moves TTFT, publish gap and throughput, not later gaps", () => {
    const base = chapterTrace();
    const delayed = base.map((r) =>
      r.id === 'E' ? { ...r, token_times_us: r.token_times_us.map((t) => t + ms(10)) } : r,
    );
    const a = summariseTrace(base);
    const b = summariseTrace(delayed);
    const eA = a.requests[4]!;
    const eB = b.requests[4]!;
    expect(eB.ttft_us - eA.ttft_us).toBe(ms(10));
    expect(eB.publish_us - eA.publish_us).toBe(ms(10));
    expect(eB.gaps_us).toEqual(eA.gaps_us);
    expect(b.tokens_per_s).toBe((13 * 1e6) / ms(75));
  });

  it('order violations name the request (and the file row when known)', () => {
    const r: RequestRecord = { id: 'E', arrival_us: 3, prompt_start_us: 2, prompt_end_us: 4, token_times_us: [5] };
    expect(() => analyseRequest(r)).toThrow(/request "E": prompt_start 2 us is before arrival 3 us/);
    expect(() => analyseRequest({ ...r, prompt_start_us: 3, prompt_end_us: 6 })).toThrow(/request "E": first token/);
    expect(() => analyseRequest({ ...r, prompt_start_us: 3, token_times_us: [] })).toThrow(/request "E": has no token/);
    const csv = 'id,arrival,prompt_start,prompt_end,token_time\nA,0,2,8,10\nA,0,2,8,18\nA,0,2,8,14\n';
    expect(() => summariseTrace(parseTraceCsv(csv, 't.csv', 'ms'), { unit: 'ms' })).toThrow(
      /t\.csv row 3: request "A": token 3 at 14 ms is before token 2 at 18 ms/,
    );
  });

  it('numeric strings parse as times, converted once to µs: "1.5" s = 1,500,000 µs', () => {
    const [r] = readTraceJson(
      '{"requests":[{"id":7,"arrival":"0","prompt_start":0.5,"prompt_end":"1.5","tokens":[2,"2.25"]}]}',
      'x.json',
      's',
    ).records;
    expect(r).toMatchObject({
      id: '7',
      arrival_us: 0,
      prompt_start_us: 500_000,
      prompt_end_us: 1_500_000,
      token_times_us: [2e6, 2.25e6],
    });
  });

  it('bad input names file, row and column', () => {
    expect(() => parseTraceCsv('id,arrival,prompt_start,prompt_end,token_time\nA,0,2,x,10\n', 't.csv', 'ms')).toThrow(
      /t\.csv row 1 column "prompt_end": expected a finite time in ms/,
    );
    expect(() =>
      parseTraceCsv('id,arrival,prompt_start,prompt_end,token_time\nA,0,2,8,10\nA,1,2,8,11\n', 't.csv', 'ms'),
    ).toThrow(/t\.csv row 2 column "arrival": request "A": arrival 1 ms differs/);
    expect(() => parseTraceCsv('id,arrival,token_time\nA,0,1\n', 't.csv', 'ms')).toThrow(
      /missing column\(s\) prompt_start, prompt_end/,
    );
    expect(
      () =>
        readTraceJson('[{"id":"A","arrival":0,"prompt_start":1,"prompt_end":2,"tokens":[3,"z"]}]', 't.json', 'ms')
          .records,
    ).toThrow(/t\.json row 1 column "tokens\[1\]"/);
    expect(() => summariseTrace([...chapterTrace(), chapterTrace()[0]!])).toThrow(/"A" appears twice/);
    // one schema per format (core/schemas/trace.ts): a misspelt field is refused, not defaulted
    expect(
      () =>
        readTraceJson('[{"id":"A","arrival":0,"prompt_start":1,"promt_end":2,"tokens":[3]}]', 't.json', 'ms').records,
    ).toThrow(/t\.json row 1: unknown field\(s\) promt_end/);
    expect(
      () => readTraceJson('[{"id":"A","arrival":0,"prompt_start":1,"tokens":[3]}]', 't.json', 'ms').records,
    ).toThrow(/t\.json row 1 column "prompt_end": expected a finite time in ms, got nothing/);
    expect(() => readTraceJson('{"reqs":[]}', 't.json', 'ms').records).toThrow(/expected a JSON array of requests/);
    expect(() => parseTraceCsv('id,arrival,prompt_start,prompt_end,token_time\n ,0,2,8,10\n', 't.csv', 'ms')).toThrow(
      /t\.csv row 1 column "id": expected a non-empty string or number id/,
    );
  });

  it('a JSON trace that declares its unit is read in it; a contradicting unit is refused, a bad one named', () => {
    const req = '{"id":"A","arrival":0,"prompt_start":1,"prompt_end":2,"tokens":[3,5]}';
    const us = readTraceJson(`{"unit":"us","requests":[${req}]}`, 't.json');
    expect(us.unit).toBe('us');
    expect(us.records[0]!.token_times_us).toEqual([3, 5]);
    // the same numbers in s: 10⁶ µs each
    expect(readTraceJson(`{"unit":"s","requests":[${req}]}`, 't.json', 's').records[0]!.token_times_us).toEqual([
      3e6, 5e6,
    ]);
    // no declaration: the given unit, else ms
    expect(readTraceJson(`[${req}]`, 't.json', 'us').unit).toBe('us');
    expect(readTraceJson(`{"requests":[${req}]}`, 't.json').records[0]!.arrival_us).toBe(0);
    expect(readTraceJson(`[${req}]`, 't.json').records[0]!.prompt_end_us).toBe(2000);
    expect(() => readTraceJson(`{"unit":"us","requests":[${req}]}`, 't.json', 'ms').records).toThrow(
      /^t\.json column "unit": the file declares its times in us, but they were to be read in ms/,
    );
    expect(() => readTraceJson(`{"unit":"min","requests":[${req}]}`, 't.json')).toThrow(
      /^t\.json column "unit": expected "ms", "us" or "s", got "min"$/,
    );
  });

  it('property: TTFT = Q + S + D, gaps sum to tn − t1, gap count = tokens − 1', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(1000), { minLength: 4, maxLength: 12 }), (xs) => {
        const v = [...xs].sort((a, b) => a - b);
        const r = analyseRequest({
          id: 'p',
          arrival_us: v[0]!,
          prompt_start_us: v[1]!,
          prompt_end_us: v[2]!,
          token_times_us: v.slice(3),
        });
        const sum = r.gaps_us.reduce((a, b) => a + b, 0);
        return (
          r.ttft_us === r.queue_us + r.prompt_us + r.publish_us &&
          sum === v[v.length - 1]! - v[3]! &&
          r.gaps_us.length === r.tokens - 1
        );
      }),
    );
  });
});

describe('stepcal trace (CLI)', () => {
  it('reads the CSV fixture and prints the chapter aggregates; --json gives µs', async () => {
    const r = await runCli(['trace', CSV_FILE]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('TTFT (ms): n=5, mean=19.2, p50=15, p95=42');
    const j = await runCli(['trace', JSON_FILE, '--json']);
    const out = JSON.parse(j.stdout);
    expect(out.input_unit).toBe('ms');
    expect(out.gaps).toEqual({ n: 8, mean_us: 5500, p95_us: 16000 });
    expect(out.tokens_per_s).toBe(200);
  });

  it('an order violation exits 1 naming the request; a bad --unit exits 2', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'trace-'));
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, '[{"id":"E","arrival":3,"prompt_start":30,"prompt_end":42,"tokens":[45,65,49]}]');
    const r = await runCli(['trace', bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/bad\.json row 1: request "E": token 3 at 49 ms is before token 2 at 65 ms/);
    expect((await runCli(['trace', JSON_FILE, '--unit', 'min'])).code).toBe(2);
  });
});
