/**
 * Minimal, dependency-free SVG charts (self-contained: no fonts or scripts fetched), used by the
 * fitters' plots, the pricer's sweep figure, the roofline and the accuracy report.
 * Deterministic: the same input gives byte-identical SVG.
 */
import { fmtTick } from './format.ts';

export interface Series {
  label: string;
  /** Points as [x, y]; non-finite or (on log axes) non-positive points are skipped. */
  points: Array<[number, number]>;
  /** 'line' joins points in order; 'scatter' draws dots; 'step' draws a staircase. */
  style: 'line' | 'scatter';
  color?: string;
  /** Dash pattern for lines (e.g. '4 3'). */
  dash?: string;
  /** Dot radius for scatter (default 2). */
  radius?: number;
}

export interface ChartOptions {
  title: string;
  x_label: string;
  y_label: string;
  x_log?: boolean;
  y_log?: boolean;
  width?: number;
  height?: number;
  /** Draw y = x (for predicted-vs-measured). */
  diagonal?: boolean;
  /** Horizontal reference lines. */
  h_lines?: Array<{ y: number; label: string }>;
  /** Force axis ranges. */
  x_range?: [number, number];
  y_range?: [number, number];
}

export const PALETTE = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#17becf',
  '#bcbd22',
];

/** Escape text for XML. */
export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceLinearTicks(lo: number, hi: number, count = 6): number[] {
  if (hi <= lo) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  // A tick the running sum leaves a rounding error away from 0 is 0 (else it reads "-5.6e-17").
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push(Math.abs(v) < step * 1e-9 ? 0 : +v.toPrecision(12));
  return out;
}

/** Average advance of a bold 13 px sans-serif glyph, px (a title's width estimate). */
const TITLE_PX_PER_CHAR = 7.8;

/**
 * A chart's bold title centred at x, or, when its estimated width (TITLE_PX_PER_CHAR per character) would pass
 * the figure's edges, centred on the figure at the font size that fits its width less 16 px; a title that
 * would need under 10 px is broken at the space nearest its middle into two lines (long set names were
 * clipped on both sides).
 */
function titleText(title: string, x: number, W: number): string {
  const est = title.length * TITLE_PX_PER_CHAR;
  const fits = est / 2 <= Math.min(x, W - x) - 8;
  const sizeFor = (chars: number) => Math.min(13, +((13 * (W - 16)) / (chars * TITLE_PX_PER_CHAR)).toFixed(1));
  const open = (cx: number, size: number, y = 18) =>
    `<text x="${cx}" y="${y}" text-anchor="middle" font-size="${size}" font-weight="bold">`;
  if (fits) return `${open(x, 13)}${esc(title)}</text>`;
  const cut = nearestSpace(title);
  if (sizeFor(title.length) >= 10 || cut < 0) return `${open(W / 2, sizeFor(title.length))}${esc(title)}</text>`;
  const [a, b] = [title.slice(0, cut), title.slice(cut + 1)];
  const size = sizeFor(Math.max(a.length, b.length));
  return `${open(W / 2, size, 14)}<tspan x="${W / 2}" dy="0">${esc(a)}</tspan><tspan x="${W / 2}" dy="${+(size * 1.15).toFixed(1)}">${esc(b)}</tspan></text>`;
}

/** Index of the space nearest the middle of `s`, −1 when it has none. */
function nearestSpace(s: string): number {
  const mid = s.length / 2;
  let best = -1;
  for (let i = s.indexOf(' '); i >= 0; i = s.indexOf(' ', i + 1))
    if (best < 0 || Math.abs(i - mid) < Math.abs(best - mid)) best = i;
  return best;
}

/** Log-axis ticks: the powers of ten in range (every k-th past 8 decades), with 2 and 5 × them on an axis under 2.5 decades. */
function logTicks(lo: number, hi: number): number[] {
  const out: number[] = [];
  const a = Math.floor(Math.log10(lo));
  const b = Math.ceil(Math.log10(hi));
  const stride = Math.max(1, Math.ceil((b - a) / 8));
  const steps = Math.log10(hi / lo) < 2.5 ? [1, 2, 5] : [1];
  for (let e = a; e <= b; e += stride)
    for (const m of steps) {
      const v = +(m * 10 ** e).toPrecision(12);
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
  return out.length ? out : [lo, hi];
}

/** The share of an axis' span added beyond its data on each side of a chart with dots (padRange). */
const DOT_PAD = 0.03;

/**
 * [lo, hi] widened by DOT_PAD of its span on each side (on a log axis, of its log span); `keepLo` keeps a linear
 * axis's 0 where the chart starts it there.
 */
function padRange(lo: number, hi: number, log: boolean, keepLo: boolean): [number, number] {
  if (log) {
    const f = (hi / lo) ** DOT_PAD;
    return [lo / f, hi * f];
  }
  const d = (hi - lo) * DOT_PAD;
  return [keepLo ? lo : lo - d, hi + d];
}

/** Average advance of an 11 px sans-serif glyph, px (a legend label's width estimate). */
const LEGEND_PX_PER_CHAR = 6.1;

/** `text` broken at spaces into lines of at most `max` characters (a longer word keeps its own line). */
export function wrapWords(text: string, max: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > max) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

/**
 * The legend right of the plot from (x, y): a swatch and label per series, then each reference line's label,
 * every label wrapped at `max` characters per line (13 px a line, 3 px between entries).
 */
function legend(
  parts: string[],
  series: readonly Series[],
  hLines: ReadonlyArray<{ label: string }>,
  x: number,
  y: number,
  max: number,
): void {
  let at = y;
  const text = (label: string, tx: number, fill: string) => {
    const lines = wrapWords(label, max);
    const spans = lines.map((l, j) => `<tspan x="${tx}" dy="${j ? 13 : 0}">${esc(l)}</tspan>`).join('');
    parts.push(`<text x="${tx}" y="${at + 2}"${fill}>${spans}</text>`);
    at += 13 * lines.length + 3;
  };
  series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length]!;
    // A line's swatch is a stroke in its own dash, so series told apart by dash are told apart here too.
    parts.push(
      s.style === 'line'
        ? `<line x1="${x}" y1="${at - 2}" x2="${x + 12}" y2="${at - 2}" stroke="${color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`
        : `<rect x="${x}" y="${at - 7}" width="10" height="10" fill="${color}"/>`,
    );
    text(s.label, x + 15, '');
  });
  for (const h of hLines) text(`--- ${h.label}`, x, ' fill="#555"');
}

/** Render a line/scatter chart. */
export function chart(series: readonly Series[], o: ChartOptions): string {
  const W = o.width ?? 720;
  const H = o.height ?? 420;
  const m = { l: 70, r: 170, t: 34, b: 50 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const okX = (x: number) => Number.isFinite(x) && (!o.x_log || x > 0);
  const okY = (y: number) => Number.isFinite(y) && (!o.y_log || y > 0);
  const pts = series.flatMap((s) => s.points.filter(([x, y]) => okX(x) && okY(y)));
  let [x0, x1] = o.x_range ?? [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))];
  let [y0, y1] = o.y_range ?? [Math.min(...pts.map((p) => p[1])), Math.max(...pts.map((p) => p[1]))];
  if (!pts.length) [x0, x1, y0, y1] = [1, 10, 1, 10];
  if (o.h_lines && !o.y_range)
    for (const h of o.h_lines)
      if (okY(h.y)) {
        y0 = Math.min(y0, h.y);
        y1 = Math.max(y1, h.y);
      }
  if (o.diagonal) {
    x0 = Math.min(x0, y0);
    y0 = x0;
    x1 = Math.max(x1, y1);
    y1 = x1;
  }
  if (!o.y_log && !o.y_range && y0 > 0) y0 = 0;
  if (x1 === x0) {
    x0 = o.x_log ? x0 / 2 : x0 - 1;
    x1 = o.x_log ? x1 * 2 : x1 + 1;
  }
  if (y1 === y0) {
    y0 = o.y_log ? y0 / 2 : y0 - 1;
    y1 = o.y_log ? y1 * 2 : y1 + 1;
  }
  if (series.some((sr) => sr.style === 'scatter')) {
    // Dots at the data's extremes sit inside the frame, not half cut by the plot's clip.
    if (!o.x_range) [x0, x1] = padRange(x0, x1, o.x_log === true, false);
    if (!o.y_range) [y0, y1] = padRange(y0, y1, o.y_log === true, !o.y_log && y0 === 0);
  }
  // The axes' logs taken once per chart (the same values, so the same coordinates as per point).
  const [lx0, lxSpan, ly0, lySpan] = [
    Math.log(x0),
    Math.log(x1) - Math.log(x0),
    Math.log(y0),
    Math.log(y1) - Math.log(y0),
  ];
  const fx = (x: number) => m.l + (o.x_log ? (Math.log(x) - lx0) / lxSpan : (x - x0) / (x1 - x0)) * pw;
  const fy = (y: number) => m.t + ph - (o.y_log ? (Math.log(y) - ly0) / lySpan : (y - y0) / (y1 - y0)) * ph;
  const r = (v: number) => v.toFixed(1);
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
  );
  parts.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  parts.push(titleText(o.title, W / 2 - m.r / 2, W));
  const xt = o.x_log ? logTicks(x0, x1) : niceLinearTicks(x0, x1);
  const yt = o.y_log ? logTicks(y0, y1) : niceLinearTicks(y0, y1);
  for (const t of xt) {
    parts.push(`<line x1="${r(fx(t))}" y1="${m.t}" x2="${r(fx(t))}" y2="${m.t + ph}" stroke="#eee"/>`);
    parts.push(`<text x="${r(fx(t))}" y="${m.t + ph + 15}" text-anchor="middle">${fmtTick(t)}</text>`);
  }
  for (const t of yt) {
    parts.push(`<line x1="${m.l}" y1="${r(fy(t))}" x2="${m.l + pw}" y2="${r(fy(t))}" stroke="#eee"/>`);
    parts.push(`<text x="${m.l - 5}" y="${r(fy(t) + 4)}" text-anchor="end">${fmtTick(t)}</text>`);
  }
  parts.push(`<rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}" fill="none" stroke="#333"/>`);
  parts.push(`<text x="${m.l + pw / 2}" y="${H - 12}" text-anchor="middle">${esc(o.x_label)}</text>`);
  parts.push(
    `<text x="16" y="${m.t + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${m.t + ph / 2})">${esc(o.y_label)}</text>`,
  );
  parts.push(`<clipPath id="plot"><rect x="${m.l}" y="${m.t}" width="${pw}" height="${ph}"/></clipPath>`);
  parts.push(`<g clip-path="url(#plot)">`);
  if (o.diagonal)
    parts.push(
      `<line x1="${r(fx(x0))}" y1="${r(fy(y0))}" x2="${r(fx(x1))}" y2="${r(fy(y1))}" stroke="#888" stroke-dasharray="5 4"/>`,
    );
  for (const h of o.h_lines ?? []) {
    if (okY(h.y))
      parts.push(
        `<line x1="${m.l}" y1="${r(fy(h.y))}" x2="${m.l + pw}" y2="${r(fy(h.y))}" stroke="#888" stroke-dasharray="3 3"/>`,
      );
  }
  series.forEach((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length]!;
    const p = s.points.filter(([x, y]) => okX(x) && okY(y));
    if (s.style === 'line' && p.length) {
      const d = p.map(([x, y], j) => `${j ? 'L' : 'M'}${r(fx(x))},${r(fy(y))}`).join('');
      parts.push(
        `<path d="${d}" fill="none" stroke="${color}" stroke-width="1.8"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`,
      );
    } else {
      for (const [x, y] of p)
        parts.push(
          `<circle cx="${r(fx(x))}" cy="${r(fy(y))}" r="${s.radius ?? 2}" fill="${color}" fill-opacity="0.6"/>`,
        );
    }
  });
  parts.push(`</g>`);
  legend(parts, series, o.h_lines ?? [], m.l + pw + 12, m.t + 10, Math.floor((m.r - 31) / LEGEND_PX_PER_CHAR));
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/**
 * Stacked horizontal bars: one bar per item, segments per key. Optional (additive): `marker` per item
 * draws a black tick at that value on the same scale (e.g. the measured time beside the priced
 * segments), labelled by `o.marker_label`; `o.label_width` widens the left label column.
 */
export function stackedBars(
  items: ReadonlyArray<{ label: string; segments: Record<string, number>; marker?: number }>,
  o: {
    title: string;
    unit: string;
    keys: readonly string[];
    width?: number;
    label_width?: number;
    marker_label?: string;
  },
): string {
  const W = o.width ?? 720;
  const rowH = 22;
  const m = { l: o.label_width ?? 200, r: 30, t: 34, b: 40 };
  const H = m.t + m.b + items.length * rowH + 20;
  const pw = W - m.l - m.r;
  const total = Math.max(
    1e-12,
    ...items.map((it) => o.keys.reduce((a, k) => a + (it.segments[k] ?? 0), 0)),
    ...items.map((it) => (it.marker !== undefined && Number.isFinite(it.marker) ? it.marker : 0)),
  );
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    titleText(o.title, W / 2, W),
  ];
  items.forEach((it, i) => {
    const y = m.t + i * rowH;
    parts.push(`<text x="${m.l - 6}" y="${y + 14}" text-anchor="end">${esc(it.label)}</text>`);
    let x = m.l;
    o.keys.forEach((k, j) => {
      const w = ((it.segments[k] ?? 0) / total) * pw;
      if (w > 0)
        parts.push(
          `<rect x="${x.toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${PALETTE[j % PALETTE.length]}"/>`,
        );
      x += w;
    });
    if (it.marker !== undefined && Number.isFinite(it.marker)) {
      const mx = m.l + (it.marker / total) * pw;
      parts.push(
        `<line x1="${mx.toFixed(1)}" y1="${y}" x2="${mx.toFixed(1)}" y2="${y + rowH}" stroke="black" stroke-width="2.5"/>`,
      );
    }
  });
  const ly = m.t + items.length * rowH + 16;
  o.keys.forEach((k, j) => {
    parts.push(
      `<rect x="${m.l + j * 90}" y="${ly - 8}" width="10" height="10" fill="${PALETTE[j % PALETTE.length]}"/>`,
    );
    parts.push(`<text x="${m.l + j * 90 + 14}" y="${ly + 1}">${esc(k)} (${esc(o.unit)})</text>`);
  });
  parts.push(
    `<text x="${m.l + pw}" y="${ly + 1}" text-anchor="end">full bar = ${fmtTick(total)} ${esc(o.unit)}</text>`,
  );
  if (items.some((it) => it.marker !== undefined)) {
    parts.push(`<line x1="${m.l}" y1="${ly + 10}" x2="${m.l}" y2="${ly + 20}" stroke="black" stroke-width="2.5"/>`);
    parts.push(`<text x="${m.l + 6}" y="${ly + 19}">${esc(o.marker_label ?? 'marker')}</text>`);
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
