import { describe, expect, it } from "vitest";
import { parseByteSize, parseDurationMs, parseKeepAlive } from "./durations.js";

describe("parseDurationMs (the one duration grammar)", () => {
  it.each([
    // Plain numbers are seconds.
    ["120", 120_000],
    ["0", 0],
    ["1.5", 1500],
    ["0060", 60_000],
    ["-1", -1000],
    // Go durations (Ollama's keep_alive): ms, s, m, h, fractions, several terms.
    ["500ms", 500],
    ["30s", 30_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1500],
    ["-5m", -300_000],
    // The admin CLI's days, with the rest of the grammar.
    ["30d", 2_592_000_000],
    ["1d12h", 129_600_000],
    ["1.5h", 5_400_000],
    [" 2h ", 7_200_000],
    // Summed before rounding: 0.1 × 60000 is not exactly 6000 in floating point.
    ["0.1m", 6000],
    ["0.4ms", 0],
  ] as const)("%j → %s ms", (input, expected) => {
    expect(parseDurationMs(input)).toBe(expected);
  });

  it.each([
    "",
    " ",
    "m",
    "d",
    "5 minutes",
    "1w",
    "30x",
    "1h-30m",
    "--1s",
    "+1s",
    "1.s",
    ".5s",
    "1e3",
    "1h 30m",
    "5M",
    "99999999999999999999d",
  ])("refuses %j", (input) => {
    expect(parseDurationMs(input)).toBeUndefined();
  });
});

describe("parseKeepAlive (Ollama's keep_alive)", () => {
  it.each([
    [300, 300_000],
    [0, 0],
    [-1, null],
    ["-1", null],
    ["-5m", null],
    ["30s", 30_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["500ms", 500],
    ["1.5s", 1500],
    ["120", 120_000],
    ["0", 0],
    ["-0s", 0],
    // Days: the admin CLI's unit, accepted since the two grammars became one.
    ["5d", 432_000_000],
  ] as const)("%s → %s ms", (input, expected) => {
    expect(parseKeepAlive(input)).toBe(expected);
  });

  it.each(["", "5 minutes", "m", "5w", "1h-30m", Number.NaN, Number.POSITIVE_INFINITY])(
    "refuses %s",
    (input) => {
      expect(parseKeepAlive(input)).toBeUndefined();
    },
  );
});

describe("parseByteSize", () => {
  it.each([
    [1024, 1024],
    ["512MiB", 512 * 2 ** 20],
    ["8GiB", 8 * 2 ** 30],
    ["1.5GB", 1.5e9],
    ["100 mb", 100e6],
    ["2048", 2048],
  ] as const)("%s → %s bytes", (input, expected) => {
    expect(parseByteSize(input)).toBe(expected);
  });

  it.each(["", "lots", "-1", "5 parsecs", -3])("refuses %s", (input) => {
    expect(parseByteSize(input)).toBeUndefined();
  });
});
