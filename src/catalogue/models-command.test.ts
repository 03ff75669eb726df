// `hearth models list` and `hearth models pull` through commander, with local model files (no network).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { registerModelsCommands } from "../cli/local-models.js";
import { ConfigError } from "../config/load.js";
import { type HearthConfig, modelConfigSchema, serverConfigSchema } from "../config/schema.js";
import { planEngineBuild } from "../engine/llama/engine-build.js";

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
  // An engine cache of its own, empty: the tuned build is "not built" whatever this machine's cache holds.
  process.env.HEARTH_ENGINE_CACHE = join(root, "engine");
  const good = join(root, "good.gguf");
  writeFileSync(good, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(64)]));
  config = {
    server: serverConfigSchema.parse({ maxBodyBytes: 4096 }),
    models: [
      modelConfigSchema.parse({
        id: "good",
        source: good,
        contextSize: 4096,
        parallel: 2,
        defaults: { temperature: 0.2, top_p: 0.9 },
      }),
      modelConfigSchema.parse({ id: "missing", source: join(root, "missing.gguf") }),
    ],
    upstreamModels: [],
    modelIds: ["good", "missing"],
    dataDir: join(root, "data"),
    databaseUrl: undefined,
    redisUrl: undefined,
    modelsDir: join(root, "models"),
    adminToken: undefined,
    // Nothing listens on the discard port: no running server, whatever else runs on this machine.
    serverUrl: "http://127.0.0.1:9",
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
        gpu: null,
        gpuLayers: null,
        engineBuild: null,
        defaults: { temperature: 0.2, top_p: 0.9 },
      },
      {
        id: "missing",
        source: join(root, "missing.gguf"),
        contextSize: 2048,
        parallel: 8,
        cached: false,
        path: join(root, "missing.gguf"),
        gpu: null,
        gpuLayers: null,
        engineBuild: null,
        defaults: null,
      },
    ]);
  });

  it("prints a table by default", async () => {
    const { out } = await runCli(["models", "list"]);
    const lines = out.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+SOURCE\s+CONTEXT\s+PARALLEL\s+GPU\s+BUILD\s+CACHED\s+DEFAULTS\s+PATH$/);
    expect(lines[1]).toMatch(
      /^good\s+\S+good\.gguf\s+4096\s+2\s+-\s+-\s+yes\s+temperature=0\.2 top_p=0\.9\s+\S+good\.gguf$/,
    );
    expect(lines[2]).toMatch(/^missing\s+.*\s+-\s+-\s+no\s+-\s+/);
    // No server: whether the engine cache (an empty one here) has the tuned build for this install and CPU.
    expect(lines[3]).toBe(
      `Engine: unknown (no server at http://127.0.0.1:9); configured gpu: auto; tuned build ${planEngineBuild().key}: not built`,
    );
  });

  it("shows the running server's backend, each model's GPU layers and the GPU's memory", async () => {
    // A real HTTP server answering /health as a Hearth on a GPU would (none runs here: docs/models.md).
    const body = {
      status: "starting",
      engine: {
        gpu: "cuda",
        build: { build: "prebuilt", reason: "gpu: cuda runs on the prebuilt binaries" },
        vram: { total: 8 * 2 ** 30, used: 1.5 * 2 ** 30, free: 6.5 * 2 ** 30 },
      },
      models: [
        { id: "good", status: "ok", gpu_layers: 24, engine_build: "prebuilt" },
        { id: "missing", status: "loading" },
      ],
    };
    const server = createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(body));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const running = { ...config, serverUrl: `http://127.0.0.1:${port}`, gpu: "cuda" as const };
    try {
      const lines = (await runCli(["models", "list"], () => running)).out.trimEnd().split("\n");
      expect(lines[1]).toMatch(/^good\s+\S+\s+4096\s+2\s+cuda, 24 layers\s+prebuilt\s+yes\s/);
      expect(lines[2]).toMatch(/^missing\s+\S+\s+2048\s+8\s+-\s+-\s+no\s/);
      expect(lines[3]).toBe(
        "Engine: GPU cuda, prebuilt binaries (gpu: cuda runs on the prebuilt binaries); VRAM 1.5 used of 8.0 GiB; configured gpu: cuda",
      );
      const json = JSON.parse((await runCli(["models", "list", "--json"], () => running)).out);
      expect(json.map((r: { gpu: unknown; gpuLayers: unknown }) => [r.gpu, r.gpuLayers])).toEqual([
        ["cuda", 24],
        ["cuda", null],
      ]);
    } finally {
      server.close();
    }
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

describe("hearth models list with upstream models", () => {
  const upstreamModel = {
    id: "fleet",
    defaults: { top_k: 20 },
    upstream: {
      model: "smol",
      endpoints: [
        { url: "http://127.0.0.1:8101/v1", apiKey: "sk-never-printed" },
        { url: "http://127.0.0.1:8102/v1", apiKey: undefined },
      ],
      maxInFlight: 4,
      maxQueue: 8,
      queueTimeoutMs: 1000,
      kind: "auto" as const,
      probeIntervalMs: 2000,
      firstTokenTimeoutMs: 1000,
      maxAttempts: 3,
      affinity: true,
      affinityKeys: 1000,
    },
  };

  it("shows each endpoint's health as the running server reports it, and never a key", async () => {
    // A real HTTP server answering /health as Hearth does (the CLI reads nothing else of it).
    const server = createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(
        JSON.stringify({
          status: "degraded",
          models: [
            {
              id: "fleet",
              status: "ok",
              endpoints: [
                { url: "http://127.0.0.1:8101/v1", status: "ok", in_flight: 2 },
                {
                  url: "http://127.0.0.1:8102/v1",
                  status: "ejected",
                  in_flight: 0,
                  error: "connection refused",
                },
              ],
            },
          ],
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const withFleet = { ...config, upstreamModels: [upstreamModel], serverUrl: `http://127.0.0.1:${port}` };
      const table = await runCli(["models", "list"], () => withFleet);
      expect(table.err).toBe("");
      expect(table.out).toMatch(/fleet\s+smol\s+top_k=20\s+http:\/\/127\.0\.0\.1:8101\/v1\s+ok, 2 in flight/);
      expect(table.out).toMatch(
        /fleet\s+smol\s+top_k=20\s+http:\/\/127\.0\.0\.1:8102\/v1\s+ejected: connection refused, 0 in flight/,
      );
      expect(table.out).not.toContain("sk-never-printed");
      const json = JSON.parse((await runCli(["models", "list", "--json"], () => withFleet)).out) as unknown[];
      expect(json.at(-1)).toEqual({
        id: "fleet",
        defaults: { top_k: 20 },
        upstream: {
          model: "smol",
          endpoints: [
            { url: "http://127.0.0.1:8101/v1", health: "ok, 2 in flight" },
            { url: "http://127.0.0.1:8102/v1", health: "ejected: connection refused, 0 in flight" },
          ],
        },
      });
    } finally {
      server.close();
    }
  });

  it("says the health is unknown when no server answers", async () => {
    const withFleet = { ...config, upstreamModels: [upstreamModel], serverUrl: "http://127.0.0.1:9" };
    const { out } = await runCli(["models", "list"], () => withFleet);
    expect(out).toContain("unknown (no server at http://127.0.0.1:9)");
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
