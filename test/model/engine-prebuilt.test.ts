// The prebuilt path keeps working beside the tuned build: `engine.build: prebuilt` serves on node-llama-cpp's
// binaries (whose decodes create and join their workers: no thread outlives a decode), and a tuned build that
// node-llama-cpp does not take falls back to them with the reason. Its own process (a test file is one): a
// process holds one llama.cpp build.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { loadLlama } from "../../src/engine/llama/backend.js";
import { nodeLlamaCppDir, planEngineBuild, RECORD_FILE } from "../../src/engine/llama/engine-build.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import { generatedText } from "../support/generation-request.js";

const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
const base = config.models[0];
if (base === undefined) throw new Error("no default model");
const model = { ...base, parallel: 2, contextSize: 1024 };
const threads = () => readdirSync("/proc/self/task").length;

describe("engine.build: prebuilt", () => {
  let engine: LlamaEngine;
  beforeAll(async () => {
    engine = new LlamaEngine({
      models: [model],
      resolveModelPath: (m) => ensureModelFile(m, { modelsDir: config.modelsDir }),
      engine: { build: "prebuilt", threadPoolPoll: undefined },
    });
    await engine.start();
  });
  afterAll(async () => {
    await engine?.dispose();
  });

  it("serves on node-llama-cpp's prebuilt binaries, says so, and generates", async () => {
    expect(engine.health()[0]).toMatchObject({ ready: true, engineBuild: "prebuilt" });
    expect((await engine.accelerator())?.build).toEqual({
      build: "prebuilt",
      reason: "engine.build is prebuilt",
    });
    expect(await generatedText(engine, model.id)).not.toBe("");
  });

  it("keeps no thread between decodes", async () => {
    const { llama } = await loadLlama(false, 2, { build: "prebuilt", threadPoolPoll: undefined });
    const weights = await llama.loadModel({ modelPath: await ensureModelFile(model, config) });
    const before = threads();
    const context = await weights.createContext({ sequences: 1, contextSize: 512, threads: 2 });
    expect(threads()).toBe(before);
    let tokens = 0;
    for await (const _ of context
      .getSequence()
      .evaluate(weights.tokenize("Once upon a time"), { temperature: 0 }))
      if (++tokens === 8) break;
    expect(threads()).toBe(before);
    await context.dispose();
    await weights.dispose();
  });
});

describe("a tuned build node-llama-cpp does not take", () => {
  const cache = mkdtempSync(join(tmpdir(), "hearth-engine-cache-"));
  const saved = process.env.HEARTH_ENGINE_CACHE;
  let link: string | undefined;
  afterAll(() => {
    if (saved === undefined) delete process.env.HEARTH_ENGINE_CACHE;
    else process.env.HEARTH_ENGINE_CACHE = saved;
    if (link !== undefined) rmSync(link, { force: true });
    rmSync(cache, { recursive: true, force: true });
  });

  it("falls back to the prebuilt binaries, with the reason", async () => {
    process.env.HEARTH_ENGINE_CACHE = cache;
    const plan = planEngineBuild();
    // A cache entry whose folder holds no binary (a build someone emptied): node-llama-cpp finds nothing to load.
    const folder = `linux-x64-broken-${plan.key}`;
    mkdirSync(join(plan.dir, folder), { recursive: true });
    writeFileSync(
      join(plan.dir, RECORD_FILE),
      JSON.stringify({
        key: plan.key,
        folder,
        nodeLlamaCppVersion: plan.nodeLlamaCppVersion,
        cmakeOptions: {},
      }),
    );
    link = join(nodeLlamaCppDir(), "llama", "localBuilds", folder);
    const { llama, build } = await loadLlama(false, 2, { build: "tuned", threadPoolPoll: undefined });
    try {
      expect(llama.buildType).toBe("prebuilt");
      expect(build).toEqual({
        build: "prebuilt",
        key: plan.key,
        reason: "node-llama-cpp did not take the tuned build",
      });
    } finally {
      await llama.dispose();
    }
  });
});
