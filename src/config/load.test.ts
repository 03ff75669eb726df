import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./load.js";
import { DEFAULT_MODEL_ID } from "./schema.js";

function configFile(yaml: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "hearth-config-")), "hearth.yaml");
  writeFileSync(path, yaml);
  return path;
}

const load = (yaml: string, env: NodeJS.ProcessEnv = {}) => loadConfig({ configPath: configFile(yaml), env });

describe("loadConfig", () => {
  it("uses the built-in default model and server settings without a file", () => {
    const config = loadConfig({ env: { HEARTH_DATA_DIR: "/tmp/x", HEARTH_MODELS_DIR: "/tmp/m" } });
    expect(config.server).toMatchObject({ host: "127.0.0.1", port: 8000 });
    expect(config.models.map((m) => m.id)).toEqual([DEFAULT_MODEL_ID]);
    expect(config.models[0]).toMatchObject({
      contextSize: 2048,
      parallel: 8,
      maxQueue: 64,
      queueTimeoutMs: 30_000,
    });
    expect(config.dataDir).toBe("/tmp/x");
    expect(config.modelsDir).toBe("/tmp/m");
    expect(config.serverUrl).toBe("http://127.0.0.1:8000");
  });

  it("reads models from YAML and applies command-line overrides", () => {
    const config = loadConfig({
      configPath: configFile(
        "server:\n  port: 9000\nmodels:\n  - id: a\n    source: ./a.gguf\n    parallel: 2\n",
      ),
      env: { HEARTH_URL: "http://elsewhere:1" },
      overrides: { parallel: 4, maxQueue: 3 },
    });
    expect(config.server.port).toBe(9000);
    expect(config.models).toHaveLength(1);
    expect(config.models[0]).toMatchObject({ id: "a", parallel: 4, maxQueue: 3, contextSize: 2048 });
    expect(config.serverUrl).toBe("http://elsewhere:1");
  });

  it("takes the queue settings from the environment, command-line overrides winning", () => {
    const yaml = "models:\n  - id: a\n    source: ./a.gguf\n    queueTimeoutMs: 5000\n";
    expect(load(yaml).models[0]).toMatchObject({ queueTimeoutMs: 5000, maxQueue: 64 });
    const env = { HEARTH_QUEUE_TIMEOUT_MS: "250", HEARTH_MAX_QUEUE: "3", HEARTH_PARALLEL: "2" };
    expect(load(yaml, env).models[0]).toMatchObject({ queueTimeoutMs: 250, maxQueue: 3, parallel: 2 });
    const overridden = loadConfig({
      configPath: configFile(yaml),
      env,
      overrides: { queueTimeoutMs: 40, maxQueue: 0 },
    });
    expect(overridden.models[0]).toMatchObject({ queueTimeoutMs: 40, maxQueue: 0, parallel: 2 });
  });

  it("takes the engine settings from the file, the environment winning", () => {
    expect(load("").engine).toMatchObject({ build: "auto", backgroundBuild: true, directSteps: true });
    const file = "engine:\n  build: prebuilt\n  directSteps: false\n";
    expect(load(file).engine).toMatchObject({ build: "prebuilt", directSteps: false });
    const env = {
      HEARTH_ENGINE_BUILD: "tuned",
      HEARTH_ENGINE_DIRECT_STEPS: "1",
      HEARTH_ENGINE_BACKGROUND_BUILD: "0",
    };
    expect(load(file, env).engine).toMatchObject({
      build: "tuned",
      directSteps: true,
      backgroundBuild: false,
    });
    expect(load("", { HEARTH_ENGINE_DIRECT_STEPS: "false" }).engine).toMatchObject({ directSteps: false });
    expect(load("").engine).toMatchObject({ blockingDecodeMs: 15 });
    expect(load("", { HEARTH_ENGINE_BLOCKING_DECODE_MS: "0" }).engine).toMatchObject({ blockingDecodeMs: 0 });
    expect(() => load("", { HEARTH_ENGINE_BLOCKING_DECODE_MS: "500" })).toThrow(ConfigError);
    expect(() => load("", { HEARTH_ENGINE_BLOCKING_DECODE_MS: "soon" })).toThrow(ConfigError);
  });

  it("refuses out-of-range overrides like values in the file", () => {
    expect(() => loadConfig({ env: { HEARTH_QUEUE_TIMEOUT_MS: "0" } })).toThrow(/queueTimeoutMs/);
    expect(() => loadConfig({ env: {}, overrides: { parallel: 0 } })).toThrow(/parallel/);
    expect(() => loadConfig({ env: { HEARTH_QUEUE_TIMEOUT_MS: "soon" } })).toThrow(
      /HEARTH_QUEUE_TIMEOUT_MS must be an integer/,
    );
  });

  it("says which field is wrong and why", () => {
    expect(() => load("models:\n  - id: a\n    source: ./a.gguf\n    parallel: 0\n")).toThrow(
      /models\.0\.parallel: .*>=\s*1/,
    );
    // prefillStretch: 0 is off, under 1 is no stretch at all.
    expect(() => load("models:\n  - id: a\n    source: ./a.gguf\n    prefillStretch: 0.5\n")).toThrow(
      /models\.0\.prefillStretch: must be 0 \(off\) or at least 1/,
    );
    expect(
      load("models:\n  - id: a\n    source: ./a.gguf\n    prefillStretch: 1.4\n").models[0]?.prefillStretch,
    ).toBe(1.4);
    expect(() => load("server:\n  prot: 1\n")).toThrow(/server.*prot/);
    expect(() => load("models:\n  - id: a\n")).toThrow(/models\.0\.source/);
  });

  it("rejects invalid YAML, bad model sources and duplicate ids with a ConfigError", () => {
    expect(() => load("server: [")).toThrow(ConfigError);
    expect(() => load("models:\n  - id: a\n    source: ftp://x/model.bin\n")).toThrow(/Model "a".*not valid/);
    expect(() => load("models:\n  - id: a\n    source: ./a.gguf\n  - id: a\n    source: ./b.gguf\n")).toThrow(
      /twice/,
    );
    expect(() => loadConfig({ configPath: "/nonexistent/hearth.yaml", env: {} })).toThrow(
      /Cannot read config file/,
    );
  });

  it("reads gpu (default auto) and each model's gpuLayers (default auto)", () => {
    const none = loadConfig({ env: {} });
    expect(none.gpu).toBe("auto");
    expect(none.models[0]?.gpuLayers).toBe("auto");
    for (const gpu of ["auto", "cuda", "vulkan"]) expect(load(`gpu: ${gpu}\n`).gpu).toBe(gpu);
    expect(load("gpu: false\n").gpu).toBe(false);
    const layers = (value: string) =>
      load(`models:\n  - id: a\n    source: ./a.gguf\n    gpuLayers: ${value}\n`).models[0]?.gpuLayers;
    expect(layers("0")).toBe(0);
    expect(layers("33")).toBe(33);
    expect(layers("max")).toBe("max");
    expect(layers("auto")).toBe("auto");
  });

  it("refuses a bad gpu or gpuLayers with a config error naming the field and the choices", () => {
    for (const bad of ["true", "cpu", "metal", "yes", "1", '"false"']) {
      expect(() => load(`gpu: ${bad}\n`)).toThrow(
        /^Config file .* is not valid:\n {2}- gpu: expected auto, cuda, vulkan or false \(the CPU\), but got /,
      );
    }
    expect(() => load("gpu: cude\n")).toThrow(/gpu: .*but got "cude"$/);
    const model = (value: string) => `models:\n  - id: a\n    source: ./a.gguf\n    gpuLayers: ${value}\n`;
    for (const bad of ["all", "2.5", "-1", "true", "[1]"]) {
      expect(() => load(model(bad))).toThrow(ConfigError);
      expect(() => load(model(bad))).toThrow(/models\.0\.gpuLayers: /);
    }
    expect(() => load(model("many"))).toThrow(
      /models\.0\.gpuLayers: expected a whole number of layers \(0 = none\), auto .* or max \(all\), but got "many"/,
    );
  });

  it("rejects a non-integer port in the environment", () => {
    expect(() => loadConfig({ env: { HEARTH_PORT: "eighty" } })).toThrow(/HEARTH_PORT must be an integer/);
  });

  describe("upstream models", () => {
    const fleet = [
      "models:",
      "  - id: fleet-smol",
      "    upstream:",
      "      model: smollm2-135m-instruct",
      "      endpoints:",
      "        - url: http://127.0.0.1:8101/v1/",
      "          apiKeyEnv: WORKER1_KEY",
      "        - url: http://127.0.0.1:8102/v1",
      "      maxInFlight: 4",
      "  - id: local",
      "    source: ./a.gguf",
      "",
    ].join("\n");

    it("reads the upstream block with its defaults, the endpoints' keys from the environment, in file order", () => {
      const config = load(fleet, { WORKER1_KEY: "sk-worker-1" });
      expect(config.modelIds).toEqual(["fleet-smol", "local"]);
      expect(config.models.map((m) => m.id)).toEqual(["local"]);
      expect(config.upstreamModels).toEqual([
        {
          id: "fleet-smol",
          upstream: {
            model: "smollm2-135m-instruct",
            endpoints: [
              { url: "http://127.0.0.1:8101/v1", apiKey: "sk-worker-1" },
              { url: "http://127.0.0.1:8102/v1", apiKey: undefined },
            ],
            maxInFlight: 4,
            maxQueue: 64,
            queueTimeoutMs: 30_000,
            kind: "auto",
            probeIntervalMs: 2_000,
            firstTokenTimeoutMs: 30_000,
            maxAttempts: 3,
            affinity: true,
            affinityKeys: 50_000,
          },
        },
      ]);
    });

    it("serves the id as the upstream model name by default, and loads no embedded model for an upstream-only file", () => {
      const config = load(
        "models:\n  - id: big\n    upstream:\n      endpoints:\n        - url: https://gpu-1/v1\n",
      );
      expect(config.models).toEqual([]);
      expect(config.upstreamModels[0]?.upstream.model).toBe("big");
    });

    it("refuses an entry with both source and upstream, or neither, naming the model", () => {
      const both =
        "models:\n  - id: twice\n    source: ./a.gguf\n    upstream:\n      endpoints:\n        - url: http://h/v1\n";
      expect(() => load(both)).toThrow(
        /models\.0\.upstream: Model "twice" gives both "source".*and "upstream"/,
      );
      expect(() => load("models:\n  - id: none\n    parallel: 2\n")).toThrow(
        /models\.0\.source: Model "none" needs "source".*or "upstream"/,
      );
    });

    it("refuses a missing key variable, a bad URL, an unknown kind and embedded-only fields", () => {
      expect(() => load(fleet)).toThrow(
        /Model "fleet-smol": endpoint http:\/\/127\.0\.0\.1:8101\/v1 reads its key from WORKER1_KEY/,
      );
      const upstream = (body: string) => `models:\n  - id: u\n    upstream:\n${body}`;
      expect(() => load(upstream("      endpoints:\n        - url: gpu-1:8000\n"))).toThrow(
        /models\.0\.upstream\.endpoints\.0\.url/,
      );
      expect(() => load(upstream("      endpoints: []\n"))).toThrow(/models\.0\.upstream\.endpoints/);
      expect(() => load(upstream("      kind: tgi\n      endpoints:\n        - url: http://h/v1\n"))).toThrow(
        /models\.0\.upstream\.kind/,
      );
      expect(() =>
        load(
          "models:\n  - id: u\n    parallel: 2\n    upstream:\n      endpoints:\n        - url: http://h/v1\n",
        ),
      ).toThrow(/models\.0.*parallel/);
    });

    it("refuses an id used by an embedded and an upstream model alike", () => {
      const yaml =
        "models:\n  - id: a\n    source: ./a.gguf\n  - id: a\n    upstream:\n      endpoints:\n        - url: http://h/v1\n";
      expect(() => load(yaml)).toThrow(/twice/);
    });
  });
});
