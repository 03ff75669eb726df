import { describe, expect, it } from "vitest";
import { formatDuration, rateLimitHeaders } from "./rate-limit-headers.js";

describe("formatDuration (OpenAI's x-ratelimit-reset-* format)", () => {
  it.each([
    [0, "0s"],
    [-5, "0s"],
    [1, "1ms"],
    [120, "120ms"],
    [999, "999ms"],
    [0.2, "1ms"],
    [1000, "1s"],
    [1500, "1.5s"],
    [8640, "8.64s"],
    [17_303, "17.303s"],
    [20_000, "20s"],
    [59_999, "59.999s"],
    [60_000, "1m0s"],
    [90_000, "1m30s"],
    [90_050, "1m30.05s"],
    [360_000, "6m0s"],
    [3_600_000, "1h0m0s"],
    [3_723_004, "1h2m3.004s"],
  ])("%d ms → %s", (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});

describe("rateLimitHeaders", () => {
  it("writes the requests and tokens trios", () => {
    expect(
      rateLimitHeaders({
        requests: { limit: 60, remaining: 59, resetMs: 1000 },
        tokens: { limit: 150_000, remaining: 149_984, resetMs: 360_000 },
      }),
    ).toEqual({
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-remaining-requests": "59",
      "x-ratelimit-reset-requests": "1s",
      "x-ratelimit-limit-tokens": "150000",
      "x-ratelimit-remaining-tokens": "149984",
      "x-ratelimit-reset-tokens": "6m0s",
    });
  });

  it("leaves out an unlimited window", () => {
    expect(rateLimitHeaders({ tokens: { limit: 1000, remaining: 0, resetMs: 120 } })).toEqual({
      "x-ratelimit-limit-tokens": "1000",
      "x-ratelimit-remaining-tokens": "0",
      "x-ratelimit-reset-tokens": "120ms",
    });
    expect(rateLimitHeaders({ requests: { limit: 3, remaining: 2, resetMs: 59_000 } })).toEqual({
      "x-ratelimit-limit-requests": "3",
      "x-ratelimit-remaining-requests": "2",
      "x-ratelimit-reset-requests": "59s",
    });
    expect(rateLimitHeaders({})).toEqual({});
  });
});
