// The SVG chart as markup: accessible name and description, escaping, stacking, axis ticks, the empty state.
import { describe, expect, it } from "vitest";
import { compactNumber, formatNumber, niceTicks, stackedBarChart } from "./chart.js";

const BASE = {
  id: "usage-chart",
  title: "Tokens per day and model",
  description: "Two days, two models.",
  unit: "tokens",
};

function rects(svg: string): { y: number; height: number; fill: string; title: string }[] {
  return [
    ...svg.matchAll(
      /<rect x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)" fill="([^"]+)"><title>([^<]*)<\/title><\/rect>/g,
    ),
  ].map((m) => ({ y: Number(m[1]), height: Number(m[2]), fill: m[3] ?? "", title: m[4] ?? "" }));
}

describe("stackedBarChart", () => {
  it("is an img named by its title and described by its description", () => {
    const svg = stackedBarChart({
      ...BASE,
      categories: ["2031-05-01"],
      series: [{ name: "m", values: [3] }],
    });
    expect(svg.startsWith("<svg ")).toBe(true);
    expect(svg).toContain('role="img"');
    expect(svg).toContain('aria-labelledby="usage-chart-title usage-chart-desc"');
    expect(svg).toContain('<title id="usage-chart-title">Tokens per day and model</title>');
    expect(svg).toContain('<desc id="usage-chart-desc">Two days, two models.</desc>');
    expect(svg).not.toMatch(/style=|<script/);
  });

  it("escapes every text it is given", () => {
    const svg = stackedBarChart({
      ...BASE,
      title: "<b>&",
      categories: ['"day"<'],
      series: [{ name: "<script>alert(1)</script>", values: [1] }],
    });
    expect(svg).not.toContain("<script>");
    expect(svg).not.toContain("<b>");
    expect(svg).toContain("&lt;b&gt;&amp;");
    expect(svg).toContain("&lt;script&gt;");
  });

  it("stacks the series of a category, heights in proportion to the values, one colour per series", () => {
    const svg = stackedBarChart({
      ...BASE,
      categories: ["d1", "d2"],
      series: [
        { name: "a", values: [100, 0] },
        { name: "b", values: [300, 200] },
      ],
    });
    const bars = rects(svg);
    // No segment for a zero value.
    expect(bars.map((b) => b.title)).toEqual([
      "d1 · a: 100 tokens",
      "d1 · b: 300 tokens",
      "d2 · b: 200 tokens",
    ]);
    const [a1, b1, b2] = bars;
    if (a1 === undefined || b1 === undefined || b2 === undefined) throw new Error("missing bars");
    expect(b1.height / a1.height).toBeCloseTo(3, 1);
    expect(b2.height / a1.height).toBeCloseTo(2, 1);
    // b sits on a: its bottom is a's top.
    expect(b1.y + b1.height).toBeCloseTo(a1.y, 0);
    expect(a1.fill).not.toBe(b1.fill);
    expect(b1.fill).toBe(b2.fill);
  });

  it("labels at most a dozen days, always the last one", () => {
    const categories = Array.from({ length: 30 }, (_, i) => `day-${i + 1}`);
    const svg = stackedBarChart({ ...BASE, categories, series: [{ name: "m", values: [] }] });
    const labels = [...svg.matchAll(/>day-(\d+)</g)].map((m) => Number(m[1]));
    expect(labels.length).toBeLessThanOrEqual(12);
    expect(labels).toContain(30);
  });

  it("says so when there is nothing to draw", () => {
    const svg = stackedBarChart({
      ...BASE,
      categories: ["d1", "d2"],
      series: [],
      emptyText: "No tokens in this period",
    });
    expect(svg).toContain("No tokens in this period");
    expect(rects(svg)).toEqual([]);
  });
});

describe("axis numbers", () => {
  it("ticks at round steps up to the maximum", () => {
    expect(niceTicks(0)).toEqual([0, 1]);
    expect(niceTicks(3)).toEqual([0, 1, 2, 3]);
    expect(niceTicks(100)).toEqual([0, 50, 100]);
    expect(niceTicks(1234)).toEqual([0, 500, 1000, 1500]);
    expect(niceTicks(0.5)).toEqual([0, 1]);
  });

  it("prints compact and full numbers", () => {
    expect(compactNumber(950)).toBe("950");
    expect(compactNumber(1500)).toBe("1.5k");
    expect(compactNumber(2000)).toBe("2k");
    expect(compactNumber(15_000)).toBe("15k");
    expect(compactNumber(3_400_000)).toBe("3.4M");
    expect(formatNumber(1234567)).toBe("1,234,567");
  });
});
