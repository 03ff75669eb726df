// A model's `defaults` in hearth.yaml: read for embedded and upstream models, checked with the request's ranges.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfig } from "./load.js";
import { DEFAULT_MODEL_ID, DEFAULT_MODEL_SAMPLING } from "./schema.js";

function load(yaml: string) {
  const path = join(mkdtempSync(join(tmpdir(), "hearth-defaults-")), "hearth.yaml");
  writeFileSync(path, yaml);
  return loadConfig({ configPath: path, env: {} });
}

const embedded = (defaults: string) =>
  `models:\n  - id: a\n    source: ./a.gguf\n    defaults: ${defaults}\n`;
const upstream = (kind: string, defaults: string) =>
  `models:\n  - id: u\n    defaults: ${defaults}\n    upstream:\n      kind: ${kind}\n      endpoints:\n        - url: http://h/v1\n`;

describe("a model's sampling defaults", () => {
  it("the built-in default model carries its model card's sampling", () => {
    const config = loadConfig({ env: {} });
    expect(config.models.find((m) => m.id === DEFAULT_MODEL_ID)?.defaults).toEqual(DEFAULT_MODEL_SAMPLING);
    expect(DEFAULT_MODEL_SAMPLING).toEqual({ temperature: 0.2, top_p: 0.9 });
  });

  it("reads every field on an embedded model; none is required", () => {
    const all =
      "{temperature: 1.0, top_p: 0.95, top_k: 64, min_p: 0.0, repetition_penalty: 1.1, max_tokens: 512}";
    expect(load(embedded(all)).models[0]?.defaults).toEqual({
      temperature: 1,
      top_p: 0.95,
      top_k: 64,
      min_p: 0,
      repetition_penalty: 1.1,
      max_tokens: 512,
    });
    expect(load(embedded("{}")).models[0]?.defaults).toEqual({});
    expect(load("models:\n  - id: a\n    source: ./a.gguf\n").models[0]?.defaults).toBeUndefined();
  });

  it.each([
    ["temperature: 2.5", /models\.0\.defaults\.temperature: .*<=\s*2/],
    ["top_p: 0", /models\.0\.defaults\.top_p: .*>\s*0/],
    ["top_k: -2", /models\.0\.defaults\.top_k: .*>=\s*-1/],
    ["top_k: 1.5", /models\.0\.defaults\.top_k/],
    ["min_p: 1.5", /models\.0\.defaults\.min_p: .*<=\s*1/],
    ["repetition_penalty: 0", /models\.0\.defaults\.repetition_penalty: .*>\s*0/],
    ["max_tokens: 0", /models\.0\.defaults\.max_tokens: .*>=\s*1/],
    ["frequency_penalty: 1", /models\.0\.defaults.*frequency_penalty/],
  ])("refuses %s with the request's ranges, naming the field", (field, message) => {
    expect(() => load(embedded(`{${field}}`))).toThrow(message);
  });

  it("reads them on an upstream model and hands them to the engine's config", () => {
    const config = load(upstream("vllm", "{top_k: 20, min_p: 0.05, temperature: 0.7}"));
    expect(config.upstreamModels[0]?.defaults).toEqual({ top_k: 20, min_p: 0.05, temperature: 0.7 });
    expect(load(upstream("auto", "{top_k: 20}")).upstreamModels[0]?.defaults).toEqual({ top_k: 20 });
  });

  it("refuses vLLM's extensions on an upstream kind that does not take them, and allows OpenAI's fields", () => {
    for (const kind of ["openai", "ollama"]) {
      expect(() => load(upstream(kind, "{top_k: 20}"))).toThrow(`models.0.defaults.top_k: ${kind} engines`);
      expect(() => load(upstream(kind, "{repetition_penalty: 1.1}"))).toThrow(/defaults\.repetition_penalty/);
      expect(load(upstream(kind, "{temperature: 0.5, max_tokens: 64}")).upstreamModels[0]?.defaults).toEqual({
        temperature: 0.5,
        max_tokens: 64,
      });
    }
  });
});
