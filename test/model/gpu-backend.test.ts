// The embedded engine's backend with node-llama-cpp's real prebuilt binaries and the real model: an explicit GPU that
// does not run here is a clear start-up error, `gpu: auto` falls back to the CPU when no GPU binary runs (this
// machine has no GPU), serves completions there and says which backend it used. Nothing is built or downloaded.
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import type { GpuSetting } from "../../src/config/schema.js";
import { generate } from "../../src/engine/generate.js";
import { GpuUnavailableError, loadLlama } from "../../src/engine/llama/backend.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { Generation } from "../../src/engine/types.js";
import { generationRequest } from "../support/generation-request.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 1, contextSize: 512 };

/** What the explicit GPU backends do on this machine: the Llama's gpu, or the error getLlama gave. */
const explicit = new Map<"cuda" | "vulkan", { gpu: unknown } | { error: unknown }>();

function engineOn(gpu: GpuSetting, gpuLayers: (typeof model)["gpuLayers"] = "auto"): LlamaEngine {
  return new LlamaEngine({
    models: [{ ...model, gpuLayers }],
    gpu,
    resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
  });
}

async function text(generation: Generation): Promise<string> {
  let out = "";
  for await (const event of generation.events) if (event.type === "delta") out += event.text;
  return out;
}

beforeAll(async () => {
  for (const gpu of ["cuda", "vulkan"] as const) {
    try {
      const { llama } = await loadLlama(gpu, 1);
      explicit.set(gpu, { gpu: llama.gpu });
      await llama.dispose();
    } catch (error) {
      explicit.set(gpu, { error });
    }
  }
});

describe("an explicit GPU backend", () => {
  // The machine's own word on NVIDIA, independent of node-llama-cpp: the driver's control device.
  const nvidia = existsSync("/dev/nvidiactl");

  it(`gpu: cuda ${nvidia ? "runs on CUDA" : "is a start-up error naming the setting and the ways out (no NVIDIA device here)"}`, () => {
    const outcome = explicit.get("cuda");
    if (nvidia) {
      expect(outcome).toEqual({ gpu: "cuda" });
      return;
    }
    const error = (outcome as { error?: unknown }).error;
    expect(error).toBeInstanceOf(GpuUnavailableError);
    expect(String((error as Error).message)).toMatch(
      /^gpu: cuda is configured, but node-llama-cpp's prebuilt CUDA binary does not run on this machine .*Set gpu: auto .*or gpu: false/,
    );
    // node-llama-cpp's own error stays attached for the log.
    expect((error as GpuUnavailableError).cause).toBeInstanceOf(Error);
  });

  it("gpu: vulkan either runs on Vulkan or is the same start-up error, never the CPU", () => {
    const outcome = explicit.get("vulkan");
    if (outcome !== undefined && "gpu" in outcome) {
      expect(outcome.gpu).toBe("vulkan");
      return;
    }
    const error = (outcome as { error?: unknown } | undefined)?.error;
    expect(error).toBeInstanceOf(GpuUnavailableError);
    expect(String((error as Error).message)).toMatch(/^gpu: vulkan is configured, .*Vulkan binary/);
  });

  it("the engine's start() rejects with that error and loads no model", async () => {
    if (nvidia) return expect(explicit.get("cuda")).toEqual({ gpu: "cuda" });
    const engine = engineOn("cuda");
    try {
      await expect(engine.start()).rejects.toBeInstanceOf(GpuUnavailableError);
      expect(engine.isReady()).toBe(false);
      expect(engine.health()[0]?.ready).toBe(false);
      expect(await engine.accelerator()).toBeUndefined();
    } finally {
      await engine.dispose();
    }
  });
});

describe("gpu: auto", () => {
  let auto: LlamaEngine;

  beforeAll(async () => {
    // gpuLayers max: every layer where there is a GPU; on the CPU node-llama-cpp offloads none.
    auto = engineOn("auto", "max");
    await auto.start();
  });

  afterAll(async () => {
    await auto?.dispose();
  });

  /** The GPU node-llama-cpp's auto order (CUDA, then Vulkan) would take, from what ran explicitly above. */
  function expectedBackend(): "cuda" | "vulkan" | false {
    for (const gpu of ["cuda", "vulkan"] as const) if ("gpu" in (explicit.get(gpu) ?? {})) return gpu;
    return false;
  }

  it("takes a GPU that runs here, else the CPU, and says which (with VRAM only on a GPU)", async () => {
    const expected = expectedBackend();
    const state = await auto.accelerator();
    if (expected === false) {
      // On the CPU: no VRAM, and the build that serves named (the tuned one when cached).
      expect(state).toMatchObject({
        gpu: false,
        build: { build: expect.stringMatching(/^(tuned|prebuilt)$/) },
      });
      expect(state?.vram).toBeUndefined();
      // The model's lifecycle fields (state, progress, memory) are beside these.
      expect(auto.health()).toMatchObject([{ model: model.id, ready: true, gpuLayers: 0 }]);
    } else {
      expect(state?.gpu).toBe(expected);
      expect(state?.vram?.total).toBeGreaterThan(0);
      expect(auto.health()[0]?.gpuLayers).toBeGreaterThan(0);
    }
  });

  it("serves a completion, the same greedy text as an engine on gpu: false when it fell back", async () => {
    const request = generationRequest(model.id, { messages: [{ role: "user", content: "Name a color." }] });
    const fromAuto = await text(await generate(auto, request));
    expect(fromAuto.length).toBeGreaterThan(0);
    if (expectedBackend() !== false) return;
    const cpu = engineOn(false);
    await cpu.start();
    try {
      expect(await cpu.accelerator()).toMatchObject({ gpu: false, build: (await auto.accelerator())?.build });
      expect(await text(await generate(cpu, request))).toBe(fromAuto);
    } finally {
      await cpu.dispose();
    }
  });
});
