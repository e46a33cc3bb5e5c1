/** `stepcal serve` end to end: JSON shape, determinism, the shared trace path, sweeps, and bad input. */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli as cli } from '../helpers/cli.ts';

const BASE = ['serve', '--model', 'llama-3.1-8b', '--chip', 'h100'];
const tmp = mkdtempSync(path.join(tmpdir(), 'stepcal-serve-'));

describe('stepcal serve', () => {
  it('--json: distributions with nearest-rank percentiles, rates with their denominators, step mix and resource shares that sum to 1', async () => {
    const r = await cli([
      ...BASE,
      '--concurrency',
      '4',
      '--requests',
      '12',
      '--isl',
      'uniform:64-256',
      '--osl',
      '24',
      '--json',
    ]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    const m = v.metrics;
    expect(m.requests).toEqual({ completed: 12, refused: 0, preemptions: 0 });
    expect(m.ttft.n).toBe(12);
    expect(m.itl.n).toBe(12 * 23);
    expect(m.ttft.p50_us).toBeLessThanOrEqual(m.ttft.p90_us);
    expect(m.ttft.p90_us).toBeLessThanOrEqual(m.ttft.p99_us);
    expect(m.whole.output_tokens).toBe(12 * 24);
    expect(m.whole.output_tokens_per_s).toBeCloseTo((m.whole.output_tokens * 1e6) / m.whole.span_us, 6);
    expect(m.per_gpu.output_tokens_per_s).toBeCloseTo(m.whole.output_tokens_per_s / 1, 6);
    expect(m.per_gpu.denominator).toMatch(/^1 GPUs = dp 1 × 1 per replica/);
    const shares = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
    expect(shares(m.steps.resource_share)).toBeCloseTo(1, 9);
    expect(shares(m.steps.bottleneck_time_share)).toBeCloseTo(1, 9);
    expect(m.steps.regime.prefill.share + m.steps.regime.mixed.share + m.steps.regime.decode.share).toBeCloseTo(1, 9);
    expect(m.window.rule).toMatch(/running count equals the concurrency/);
    expect(v.kv.blocks).toBeGreaterThan(1000);
  });

  it('is deterministic for a seed; another seed draws other Poisson arrivals', async () => {
    const args = [...BASE, '--rate', '20', '--requests', '10', '--isl', 'exp:200', '--osl', 'uniform:4-12', '--json'];
    const a = await cli([...args, '--seed', '7']);
    const b = await cli([...args, '--seed', '7']);
    const c = await cli([...args, '--seed', '8']);
    expect(a.stdout).toBe(b.stdout);
    expect(JSON.parse(a.stdout).metrics.ttft).not.toEqual(JSON.parse(c.stdout).metrics.ttft);
  });

  it('--timelines writes what `stepcal trace` reads, and trace gives the same TTFT and gap figures', async () => {
    const file = path.join(tmp, 'tl.json');
    const s = await cli([
      ...BASE,
      '--concurrency',
      '3',
      '--requests',
      '6',
      '--isl',
      '300',
      '--osl',
      '9',
      '--timelines',
      file,
      '--json',
    ]);
    expect(s.code).toBe(0);
    // The file carries its unit: no --unit needed (before, trace read these µs as ms, 1000× off).
    expect(JSON.parse(readFileSync(file, 'utf8')).unit).toBe('us');
    const t = await cli(['trace', file, '--json']);
    expect(t.code).toBe(0);
    const sv = JSON.parse(s.stdout).metrics;
    const tv = JSON.parse(t.stdout);
    expect(tv.input_unit).toBe('us');
    expect(tv.ttft.n).toBe(6);
    expect(sv.ttft.mean_us).toBeGreaterThan(1000); // a real figure, tens of ms: a 10³ slip would show
    expect(tv.ttft.mean_us).toBeCloseTo(sv.ttft.mean_us, 6);
    expect(tv.ttft.p50_us).toBeCloseTo(sv.ttft.p50_us, 6);
    expect(tv.gaps.mean_us).toBeCloseTo(sv.itl.mean_us, 6);
    expect(tv.tokens_per_s).toBeCloseTo(sv.whole.output_tokens_per_s, 6);
    // TPOT: one mean gap per request
    const per = JSON.parse((await cli(['trace', file, '--per-request-mean', '--json'])).stdout);
    expect(per.gaps.n).toBe(sv.tpot.n);
    expect(per.gaps.mean_us).toBeCloseTo(sv.tpot.mean_us, 6);
    // the table prints the file's unit: serve's mean TTFT in ms × 1000
    const table = await cli(['trace', file]);
    const ttftLine = /TTFT \(us\): n=6, mean=([\d.]+)/.exec(table.stdout);
    expect(Number(ttftLine?.[1])).toBeCloseTo(sv.ttft.mean_us, 2);
    // --unit equal to the file's is fine; a contradicting one is refused naming the file and field
    expect((await cli(['trace', file, '--unit', 'us', '--json'])).stdout).toBe(t.stdout);
    const clash = await cli(['trace', file, '--unit', 'ms']);
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain(
      'tl.json column "unit": the file declares its times in us, but they were to be read in ms',
    );
    // publish gap D = 0: the first token is delivered when the step that ends its prompt returns
    expect(tv.requests.every((r: { publish_us: number }) => r.publish_us === 0)).toBe(true);
  });

  it('replays a trace CSV, and names file, row and column of a bad value', async () => {
    const good = path.join(tmp, 'replay.csv');
    writeFileSync(good, 'id,arrival_ms,isl,osl\na,0,100,5\nb,2.5,50,3\nc,1,80,4\n');
    const r = await cli([...BASE, '--trace', good, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).metrics.whole.output_tokens).toBe(12);
    const bad = path.join(tmp, 'bad.csv');
    writeFileSync(bad, 'arrival_ms,isl,osl\n0,100,5\n1,0,3\n');
    const e = await cli([...BASE, '--trace', bad]);
    expect(e.code).toBe(1);
    expect(e.stderr).toMatch(/bad\.csv row 2 column "isl": expected a positive integer, got "0"/);
    // A JS literal that is not a decimal number (Number('0x10') is 16) is refused the same way.
    const hex = path.join(tmp, 'hex.csv');
    writeFileSync(hex, 'arrival_ms,isl,osl\n0,100,5\n0x10,50,3\n');
    const h = await cli([...BASE, '--trace', hex]);
    expect(h.code).toBe(1);
    expect(h.stderr).toMatch(/hex\.csv row 2 column "arrival_ms": expected a finite number ≥ 0, got "0x10"/);
  });

  it("refuses requests over the model's context limit as price does; --allow-over-capacity serves them with a note", async () => {
    // llama-2-7b: max_position_embeddings 4096; price refuses a 4000-token prompt at context 4000 + 200
    const L2 = ['serve', '--model', 'llama-2-7b', '--chip', 'h100'];
    const over = "context: a request reaches 4200 tokens, over llama-2-7b's max_position_embeddings 4096";
    const price = await cli(['price', '--model', 'llama-2-7b', '--chip', 'h100', '--batch', 'prefill:1x200@4000']);
    expect(price.code).toBe(1);
    expect(price.stderr).toContain(over);
    const drawn = await cli([...L2, '--concurrency', '2', '--requests', '3', '--isl', '4000', '--osl', '200']);
    expect(drawn.code).toBe(1);
    expect(drawn.stderr).toContain(
      `request "r0" (ISL 4000 + OSL 200; 3 of 3 requests over): ${over}; it cannot be served as given (pass --allow-over-capacity`,
    );
    // prompt + output = 4096 exactly is within the limit
    const edge = await cli([...L2, '--concurrency', '1', '--requests', '1', '--isl', '4000', '--osl', '96', '--json']);
    expect(edge.code).toBe(0);
    expect(JSON.parse(edge.stdout).over_capacity_notes).toEqual([]);
    // a replayed row names the file and its row (row 3, though it arrives first)
    const replay = path.join(tmp, 'long.csv');
    writeFileSync(replay, 'id,arrival_ms,isl,osl\na,5,100,10\nb,3,4000,10\nc,0,4000,200\n');
    const row = await cli([...L2, '--trace', replay]);
    expect(row.code).toBe(1);
    expect(row.stderr).toContain(`long.csv row 3: request "c" (ISL 4000 + OSL 200; 1 of 3 requests over): ${over};`);
    const allowed = await cli([...L2, '--trace', replay, '--allow-over-capacity', '--json']);
    expect(allowed.code).toBe(0);
    const v = JSON.parse(allowed.stdout);
    expect(v.over_capacity_notes).toEqual([
      `over capacity (--allow-over-capacity): ${over} (1 of 3 requests; the longest, "c": ISL 4000 + OSL 200)`,
    ]);
    expect(v.metrics.whole.output_tokens).toBe(220);
    const sweep = await cli([...L2, '--sweep-concurrency', '1,2', '--isl', '4090', '--osl', '8', '--requests', '2']);
    expect(sweep.code).toBe(1);
    expect(sweep.stderr).toContain("reaches 4098 tokens, over llama-2-7b's max_position_embeddings 4096");
  });

  it('usage errors exit 2: no workload, two workloads, a malformed length, an unknown --deployment key', async () => {
    expect((await cli([...BASE])).code).toBe(2);
    expect((await cli([...BASE, '--concurrency', '2', '--rate', '3'])).code).toBe(2);
    const bad = await cli([...BASE, '--concurrency', '2', '--osl', 'uniform:9-3']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/uniform:LO-HI needs LO ≤ HI/);
    const key = await cli([...BASE, '--sweep-concurrency', '1', '--deployment', 'tpp=2']);
    expect(key.code).toBe(2);
    expect(key.stderr).toMatch(/unknown key "tpp"/);
  });

  it('--sweep-concurrency over two deployments: a table row per point, Pareto points, and the SVG with the frontier', async () => {
    const out = path.join(tmp, 'sweep.svg');
    const deployments = ['--deployment', 'tp=1', '--deployment', 'tp=2'];
    const r = await cli([
      ...BASE,
      '--sweep-concurrency',
      '1,4,16',
      ...deployments,
      '--requests',
      '16',
      '--isl',
      '256',
      '--osl',
      '16',
      '--out',
      out,
      '--json',
    ]);
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout);
    const labels = v.points.map((p: { deployment: string; concurrency: number }) => `${p.deployment}@${p.concurrency}`);
    expect(labels).toEqual(['tp=1@1', 'tp=1@4', 'tp=1@16', 'tp=2@1', 'tp=2@4', 'tp=2@16']);
    const front = v.points.filter((p: { pareto: boolean }) => p.pareto);
    expect(front.length).toBeGreaterThan(0);
    // no frontier point is dominated by any other point
    for (const f of front) {
      for (const p of v.points) {
        const [x, y, u, w] = [
          p.tokens_per_s_per_user,
          p.tokens_per_s_per_gpu,
          f.tokens_per_s_per_user,
          f.tokens_per_s_per_gpu,
        ];
        const dominates = x >= u && y >= w && (x > u || y > w);
        expect(dominates).toBe(false);
      }
    }
    // more clients: TTFT and TPOT do not fall on one deployment
    const tp1 = v.points.slice(0, 3);
    expect(tp1[2].metrics.tpot.mean_us).toBeGreaterThan(tp1[0].metrics.tpot.mean_us);
    const svg = readFileSync(out, 'utf8');
    expect(svg).toMatch(/TTFT \(mean\) vs concurrency/);
    expect(svg).toMatch(/Pareto frontier/);
    expect(svg).toMatch(/id="plot2"/);
  });
});
