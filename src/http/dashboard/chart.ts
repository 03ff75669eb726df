// Stacked bar charts as inline SVG strings: no script, no styles (the dashboard's CSP allows neither inline), only
// presentation attributes. Pure: the same input gives the same markup. Pages pair every chart with a data table.

export interface ChartSeries {
  /** Legend text, e.g. a model id. */
  name: string;
  /** One value (≥ 0) per category; missing values count as 0. */
  values: readonly number[];
}

export interface StackedBarChartInput {
  /** Prefix of the ids inside the SVG (title, description): unique on the page. */
  id: string;
  /** The accessible name, e.g. "Tokens per day and model". */
  title: string;
  /** The accessible description: the chart in one or two sentences. */
  description: string;
  /** Bar labels along the x axis, e.g. UTC days. */
  categories: readonly string[];
  series: readonly ChartSeries[];
  /** What the values count, for the hover titles: "tokens". */
  unit: string;
  /** Shown inside the plot when every value is 0. */
  emptyText?: string;
  width?: number;
  height?: number;
}

/** Colours in a fixed order, told apart with the common colour-vision deficiencies, ≥ 3:1 against white. */
export const CHART_COLORS = Object.freeze([
  "#2f5bd3",
  "#c2410c",
  "#047857",
  "#7e22ce",
  "#a16207",
  "#be185d",
  "#0e7490",
  "#4b5563",
]);

const FONT = 'font-family="system-ui, sans-serif" font-size="12"';
const INK = "#1d2330";
const MUTED = "#5b6475";
const GRID = "#d9dee7";
const MAX_X_LABELS = 12;
const LEGEND_ROW = 20;

/** A stacked bar chart: one bar per category, one coloured segment per series, a y axis with round ticks. */
export function stackedBarChart(input: StackedBarChartInput): string {
  const width = input.width ?? 960;
  const height = input.height ?? 320;
  const { categories, series } = input;
  const totals = categories.map((_, i) => series.reduce((sum, s) => sum + valueAt(s, i), 0));
  const max = Math.max(0, ...totals);
  const ticks = niceTicks(max);
  const top = ticks[ticks.length - 1] ?? 1;

  const legendRows = Math.ceil(series.length / 4);
  const plot = {
    left: 56,
    right: width - 12,
    top: 12 + legendRows * LEGEND_ROW + 8,
    bottom: height - 28,
  };
  const plotHeight = plot.bottom - plot.top;
  const y = (value: number) => plot.bottom - (value / top) * plotHeight;

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" width="100%" role="img" ` +
      `aria-labelledby="${attr(input.id)}-title ${attr(input.id)}-desc" class="chart">`,
    `<title id="${attr(input.id)}-title">${text(input.title)}</title>`,
    `<desc id="${attr(input.id)}-desc">${text(input.description)}</desc>`,
  );

  // Legend: four entries a row.
  series.forEach((s, i) => {
    const x = plot.left + (i % 4) * 200;
    const ly = 12 + Math.floor(i / 4) * LEGEND_ROW;
    parts.push(
      `<rect x="${x}" y="${ly}" width="12" height="12" fill="${colorOf(i)}"/>`,
      `<text x="${x + 18}" y="${ly + 10}" ${FONT} fill="${INK}">${text(truncate(s.name, 28))}</text>`,
    );
  });

  // Grid lines and y labels.
  for (const tick of ticks) {
    const ty = round(y(tick));
    parts.push(
      `<line x1="${plot.left}" x2="${plot.right}" y1="${ty}" y2="${ty}" stroke="${GRID}" stroke-width="1"/>`,
      `<text x="${plot.left - 6}" y="${ty + 4}" ${FONT} fill="${MUTED}" text-anchor="end">${compactNumber(tick)}</text>`,
    );
  }

  // Bars.
  const slot = categories.length === 0 ? 0 : (plot.right - plot.left) / categories.length;
  const barWidth = round(Math.max(1, Math.min(48, slot * 0.7)));
  categories.forEach((category, i) => {
    const x = round(plot.left + slot * i + (slot - barWidth) / 2);
    let base = 0;
    series.forEach((s, j) => {
      const value = valueAt(s, i);
      if (value === 0) return;
      const y0 = y(base);
      const y1 = y(base + value);
      base += value;
      parts.push(
        `<rect x="${x}" y="${round(y1)}" width="${barWidth}" height="${round(y0 - y1)}" fill="${colorOf(j)}">` +
          `<title>${text(`${category} · ${s.name}: ${formatNumber(value)} ${input.unit}`)}</title></rect>`,
      );
    });
  });

  // X labels: at most MAX_X_LABELS, evenly spread back from the last (the most recent) one.
  const every = Math.max(1, Math.ceil(categories.length / MAX_X_LABELS));
  categories.forEach((category, i) => {
    if ((categories.length - 1 - i) % every !== 0) return;
    const cx = round(plot.left + slot * i + slot / 2);
    parts.push(
      `<text x="${cx}" y="${plot.bottom + 18}" ${FONT} fill="${MUTED}" text-anchor="middle">${text(category)}</text>`,
    );
  });
  parts.push(
    `<line x1="${plot.left}" x2="${plot.right}" y1="${plot.bottom}" y2="${plot.bottom}" stroke="${MUTED}" stroke-width="1"/>`,
  );

  if (max === 0 && input.emptyText !== undefined) {
    parts.push(
      `<text x="${round((plot.left + plot.right) / 2)}" y="${round((plot.top + plot.bottom) / 2)}" ${FONT} ` +
        `fill="${MUTED}" text-anchor="middle">${text(input.emptyText)}</text>`,
    );
  }
  parts.push("</svg>");
  return parts.join("");
}

/** 0 and round steps (1, 2 or 5 × 10^n) up to the first at or above `max`; [0, 1] for nothing. */
export function niceTicks(max: number, target = 4): number[] {
  if (!(max > 0)) return [0, 1];
  const rough = max / target;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude;
  const safeStep = Math.max(1, step);
  const ticks = [0];
  while ((ticks[ticks.length - 1] ?? 0) < max) ticks.push(ticks.length * safeStep);
  return ticks;
}

/** 950, 1.2k, 15k, 3.4M: short axis labels. */
export function compactNumber(value: number): string {
  const units = [
    [1e9, "G"],
    [1e6, "M"],
    [1e3, "k"],
  ] as const;
  for (const [size, suffix] of units) {
    if (value >= size) return `${trimZero((value / size).toFixed(value >= size * 10 ? 0 : 1))}${suffix}`;
  }
  return String(value);
}

/** 1,234,567: full numbers in English grouping. */
export function formatNumber(value: number): string {
  return value.toLocaleString("en-US");
}

export function colorOf(index: number): string {
  return CHART_COLORS[index % CHART_COLORS.length] ?? "#4b5563";
}

function valueAt(series: ChartSeries, index: number): number {
  const value = series.values[index] ?? 0;
  return Number.isFinite(value) && value > 0 ? value : 0;
}

function trimZero(s: string): string {
  return s.endsWith(".0") ? s.slice(0, -2) : s;
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function text(s: string): string {
  return s.replace(/[&<>]/g, (ch) => (ch === "&" ? "&amp;" : ch === "<" ? "&lt;" : "&gt;"));
}

function attr(s: string): string {
  return text(s).replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}
