// `hearth models list` and `hearth models pull` through commander, with local model files (no network).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { registerModelsCommands } from "../cli/models.js";
import { ConfigError } from "../config/load.js";
import { type HearthConfig, modelConfigSchema } from "../config/schema.js";

let root: string;
let config: HearthConfig;
const savedExitCode = process.exitCode;

async function runCli(
  args: string[],
  loadConfig: () => HearthConfig = () => config,
): Promise<{ out: string; err: string; exitCode: typeof process.exitCode }> {
  let out = "";
  let err = "";
  process.exitCode = undefined;
  const program = new Command("hearth").exitOverride();
  program.configureOutput({
    writeOut: (text) => {
      out += text;
    },
    writeErr: (text) => {
      err += text;
    },
  });
  registerModelsCommands(program, loadConfig);
  await program.parseAsync(args, { from: "user" });
  const exitCode = process.exitCode;
  process.exitCode = savedExitCode;
  return { out, err, exitCode };
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "hearth-models-cli-"));
  const good = join(root, "good.gguf");
  writeFileSync(good, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(64)]));
  config = {
    server: { host: "127.0.0.1", port: 8000, maxBodyBytes: 4096, maxN: 8, keepAliveMs: 5000 },
    models: [
      modelConfigSchema.parse({ id: "good", source: good, contextSize: 4096, parallel: 2 }),
      modelConfigSchema.parse({ id: "missing", source: join(root, "missing.gguf") }),
    ],
    dataDir: join(root, "data"),
    databaseUrl: undefined,
    redisUrl: undefined,
    modelsDir: join(root, "models"),
    adminToken: undefined,
    serverUrl: "http://127.0.0.1:8000",
    logLevel: "info",
  };
});

afterEach(() => {
  process.exitCode = savedExitCode;
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe("hearth models list", () => {
  it("prints every configured model as JSON with --json", async () => {
    const { out, err, exitCode } = await runCli(["models", "list", "--json"]);
    expect(err).toBe("");
    expect(exitCode).toBeUndefined();
    expect(JSON.parse(out)).toEqual([
      {
        id: "good",
        source: join(root, "good.gguf"),
        contextSize: 4096,
        parallel: 2,
        cached: true,
        path: join(root, "good.gguf"),
      },
      {
        id: "missing",
        source: join(root, "missing.gguf"),
        contextSize: 2048,
        parallel: 8,
        cached: false,
        path: join(root, "missing.gguf"),
      },
    ]);
  });

  it("prints a table by default", async () => {
    const { out } = await runCli(["models", "list"]);
    const lines = out.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+SOURCE\s+CONTEXT\s+PARALLEL\s+CACHED\s+PATH$/);
    expect(lines[1]).toMatch(/^good\s+\S+good\.gguf\s+4096\s+2\s+yes\s+\S+good\.gguf$/);
    expect(lines[2]).toMatch(/^missing\s+.*\s+no\s+/);
  });

  it("prints a config error as one line and exits 1", async () => {
    const { out, err, exitCode } = await runCli(["models", "list"], () => {
      throw new ConfigError("Config file hearth.yaml is not valid YAML: bad indentation");
    });
    expect(out).toBe("");
    expect(err).toBe("hearth: Config file hearth.yaml is not valid YAML: bad indentation\n");
    expect(exitCode).toBe(1);
  });
});

describe("hearth models pull", () => {
  it("prints the path of the model it made available", async () => {
    const { out, err, exitCode } = await runCli(["models", "pull", "good"]);
    expect(err).toBe("");
    expect(exitCode).toBeUndefined();
    expect(out).toBe(`good ${join(root, "good.gguf")}\n`);
  });

  it("lists the configured ids for an unknown id", async () => {
    const { err, exitCode } = await runCli(["models", "pull", "nope"]);
    expect(err).toBe('hearth: No model "nope" is configured; the configured models are: good, missing\n');
    expect(exitCode).toBe(1);
  });

  it("pulls every model when no id is given, one line per failure, without a stack trace", async () => {
    const { out, err, exitCode } = await runCli(["models", "pull"]);
    expect(out).toBe(`good ${join(root, "good.gguf")}\n`);
    expect(err).toBe(
      `hearth: The model file of missing does not exist or is not a file: ${join(root, "missing.gguf")}\n`,
    );
    expect(err).not.toContain("    at ");
    expect(exitCode).toBe(1);
  });
});
