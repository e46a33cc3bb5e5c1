#!/usr/bin/env node
// Open fits/<chip>/report.html (or the paths given) in headless Chromium, take a screenshot, and
// check the charts are drawn:
//   1. --dump-dom: the rendered DOM holds every <figure data-chart> with a non-empty <svg> (circles,
//      paths or rects beyond the background), and no network reference;
//   2. --screenshot: the PNG is not blank: enough non-white pixels overall and in the chart band.
// Usage: node scripts/check-report.mjs [report.html ...]   (default: every fits/*/report.html)
// Exit 0 when every report passes, 1 otherwise; the screenshots are kept beside each report as
// report.png for a human to look at.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inflateSync } from 'node:zlib';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

function findChromium() {
  for (const c of [process.env.CHROMIUM, 'chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable']) {
    if (!c) continue;
    const r = spawnSync('sh', ['-c', `command -v ${c}`], { encoding: 'utf8' });
    if (r.status === 0 && r.stdout.trim()) return r.stdout.trim();
  }
  return undefined;
}

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--hide-scrollbars',
];

function runChromium(bin, args) {
  const profile = mkdtempSync(path.join(tmpdir(), 'stepcal-chromium-'));
  try {
    return spawnSync(bin, [...FLAGS, `--user-data-dir=${profile}`, ...args], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
      timeout: 120_000,
    });
  } finally {
    rmSync(profile, { recursive: true, force: true });
  }
}

/** Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) into {width, height, channels, data}. */
function decodePng(buf) {
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error('not a PNG');
  let off = 8;
  let width = 0,
    height = 0,
    colorType = 0,
    bitDepth = 0,
    interlace = 0;
  const idat = [];
  while (off < buf.length) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString('ascii', off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      bitDepth = data[8];
      colorType = data[9];
      interlace = data[12];
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    off += 12 + len;
  }
  if (bitDepth !== 8 || interlace !== 0 || (colorType !== 2 && colorType !== 6))
    throw new Error(`unsupported PNG (depth ${bitDepth}, color ${colorType}, interlace ${interlace})`);
  const ch = colorType === 6 ? 4 : 3;
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * ch;
  const out = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = out.subarray(y * stride, (y + 1) * stride);
    const prev = y ? out.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
    for (let x = 0; x < stride; x++) {
      const a = x >= ch ? cur[x - ch] : 0;
      const b = prev[x];
      const c = x >= ch ? prev[x - ch] : 0;
      let v = src[x];
      if (f === 1) v += a;
      else if (f === 2) v += b;
      else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) {
        const p = a + b - c;
        const pa = Math.abs(p - a),
          pb = Math.abs(p - b),
          pc = Math.abs(p - c);
        v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      cur[x] = v & 255;
    }
  }
  return { width, height, channels: ch, data: out };
}

/** Fraction of non-white pixels in rows [y0, y1). */
function inkFraction(img, y0, y1) {
  let ink = 0,
    n = 0;
  for (let y = Math.max(0, y0); y < Math.min(img.height, y1); y++) {
    for (let x = 0; x < img.width; x++) {
      const i = (y * img.width + x) * img.channels;
      n++;
      if (img.data[i] < 235 || img.data[i + 1] < 235 || img.data[i + 2] < 235) ink++;
    }
  }
  return n ? ink / n : 0;
}

function checkReport(bin, file) {
  const problems = [];
  const html = readFileSync(file, 'utf8');
  if (/<script|<link|<img|src="http|href="http/i.test(html))
    problems.push('the HTML references external content or scripts');
  const url = `file://${path.resolve(file)}`;

  const dom = runChromium(bin, ['--dump-dom', url]);
  if (dom.status !== 0) return [`chromium --dump-dom failed (${dom.status}): ${dom.stderr.slice(-400)}`];
  const figures = [...dom.stdout.matchAll(/<figure data-chart="([^"]+)"[^>]*>([\s\S]*?)<\/figure>/g)];
  if (figures.length === 0) problems.push('no <figure data-chart> in the rendered DOM');
  let drawn = 0;
  for (const [, name, body] of figures) {
    const marks = (body.match(/<(circle|path|polyline|line|rect)\b/g) ?? []).length;
    if (!/<svg\b/.test(body)) problems.push(`${name}: no <svg>`);
    else if (marks < 5) problems.push(`${name}: svg has only ${marks} marks (empty chart?)`);
    else drawn++;
  }

  const png = path.join(path.dirname(file), 'report.png');
  const shot = runChromium(bin, [`--screenshot=${png}`, '--window-size=1280,4000', url]);
  if (shot.status !== 0 || !existsSync(png))
    return [...problems, `chromium --screenshot failed (${shot.status}): ${shot.stderr.slice(-400)}`];
  const img = decodePng(readFileSync(png));
  const whole = inkFraction(img, 0, img.height);
  // The charts sit below the headline tables; require ink in the lower three quarters too.
  const lower = inkFraction(img, Math.floor(img.height / 4), img.height);
  if (whole < 0.02) problems.push(`screenshot nearly blank (${(100 * whole).toFixed(2)} % non-white)`);
  if (lower < 0.02) problems.push(`chart band nearly blank (${(100 * lower).toFixed(2)} % non-white)`);
  console.log(
    `${path.relative(ROOT, file)}: ${figures.length} figures, ${drawn} drawn; screenshot ${img.width}×${img.height}, ${(100 * whole).toFixed(1)} % non-white (${(100 * lower).toFixed(1)} % below the first quarter) → ${path.relative(ROOT, png)}`,
  );
  return problems;
}

const args = process.argv.slice(2);
const files = args.length
  ? args
  : existsSync(path.join(ROOT, 'fits'))
    ? readdirSync(path.join(ROOT, 'fits'))
        .map((d) => path.join(ROOT, 'fits', d, 'report.html'))
        .filter(existsSync)
    : [];
if (!files.length) {
  console.error('check-report: no report.html found (run `npm run calibrate` first, or pass paths)');
  process.exit(1);
}
const bin = findChromium();
if (!bin) {
  console.error(
    'check-report: Chromium not found; install it (`apt-get install -y chromium`) or set CHROMIUM=/path/to/chrome',
  );
  process.exit(1);
}
let failed = 0;
for (const f of files) {
  const problems = checkReport(bin, f);
  for (const p of problems) console.error(`  FAIL ${path.relative(ROOT, f)}: ${p}`);
  if (problems.length) failed++;
}
process.exit(failed ? 1 : 0);
