// hearth.yaml's `responses:` block: its defaults, the duration and size grammars it takes, and what it refuses.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "./load.js";
import { RESPONSES_CONFIG_DEFAULTS } from "./responses-settings.js";

const load = (yaml: string) => {
  const path = join(mkdtempSync(join(tmpdir(), "hearth-responses-config-")), "hearth.yaml");
  writeFileSync(path, yaml);
  return loadConfig({ configPath: path, env: {} });
};

describe("responses: in hearth.yaml", () => {
  it("defaults to 30 days, 2,048 items, 8 MiB, and a chain of 1,000 responses, 10,000 items, 16 MiB", () => {
    expect(loadConfig({ env: {} }).responses).toEqual({
      retention: 30 * 86_400_000,
      maxInputItems: 2048,
      maxStoredBytes: 8 * 2 ** 20,
      chain: { maxResponses: 1000, maxItems: 10_000, maxBytes: 16 * 2 ** 20 },
    });
    expect(RESPONSES_CONFIG_DEFAULTS.retention).toBe(30 * 86_400_000);
  });

  it("takes durations and sizes as the rest of the config writes them; the chain's missing fields keep defaults", () => {
    const config = load(
      "responses:\n  retention: 24h30m\n  maxStoredBytes: 1MiB\n  chain:\n    maxItems: 50\n",
    );
    expect(config.responses).toEqual({
      retention: 24.5 * 3_600_000,
      maxInputItems: 2048,
      maxStoredBytes: 2 ** 20,
      chain: { maxResponses: 1000, maxItems: 50, maxBytes: 16 * 2 ** 20 },
    });
    expect(load("responses:\n  retention: 90\n").responses?.retention).toBe(90_000);
  });

  it("refuses a retention that is no duration, negative (forever) or under a second, naming the field", () => {
    for (const retention of ["30d", "-1h", "0", "500ms", "soon"]) {
      expect(() => load(`responses:\n  retention: "${retention}"\n`)).toThrow(/responses\.retention/);
    }
  });

  it("refuses unknown fields, bad sizes and bounds out of range, naming each", () => {
    expect(() => load("responses:\n  retain: 1h\n")).toThrow(/retain/);
    expect(() => load("responses:\n  maxStoredBytes: lots\n")).toThrow(/maxStoredBytes/);
    expect(() => load("responses:\n  maxInputItems: 0\n")).toThrow(/maxInputItems/);
    expect(() => load("responses:\n  chain:\n    maxResponses: 0\n")).toThrow(/chain\.maxResponses/);
  });

  it("hearth.example.yaml states the defaults", () => {
    const path = join(import.meta.dirname, "..", "..", "hearth.example.yaml");
    expect(loadConfig({ configPath: path, env: {} }).responses).toEqual(RESPONSES_CONFIG_DEFAULTS);
  });
});
