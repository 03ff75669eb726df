import { describe, expect, it } from "vitest";
import { parseByteSize, parseKeepAlive } from "./durations.js";

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
  ] as const)("%s → %s ms", (input, expected) => {
    expect(parseKeepAlive(input)).toBe(expected);
  });

  it.each(["", "5 minutes", "m", "5d", "1h-30m", Number.NaN])("refuses %s", (input) => {
    expect(parseKeepAlive(input)).toBeUndefined();
  });
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
