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
    expect(config.models[0]).toMatchObject({ contextSize: 2048, parallel: 8, maxQueue: 64 });
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

  it("says which field is wrong and why", () => {
    expect(() => load("models:\n  - id: a\n    source: ./a.gguf\n    parallel: 0\n")).toThrow(
      /models\.0\.parallel: .*>=\s*1/,
    );
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

  it("rejects a non-integer port in the environment", () => {
    expect(() => loadConfig({ env: { HEARTH_PORT: "eighty" } })).toThrow(/HEARTH_PORT must be an integer/);
  });
});
