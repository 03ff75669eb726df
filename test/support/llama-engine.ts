// The embedded llama.cpp engine over a test's config (models fetched into the models dir on first use): the model tier.
import type { Llama, LlamaModel } from "node-llama-cpp";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import type { HearthConfig } from "../../src/config/schema.js";
import { loadLlama } from "../../src/engine/llama/backend.js";
import { usableCores } from "../../src/engine/llama/cpu.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";

/** Not started: the test calls `start()` (loading is what some tests look at). */
export function llamaEngine(config: HearthConfig): LlamaEngine {
  return new LlamaEngine({
    models: config.models,
    gpu: config.gpu,
    engine: config.engine,
    resolveModelPath: (model) => ensureModelFile(model, { modelsDir: config.modelsDir }),
  });
}

/**
 * node-llama-cpp with the default model loaded as the engine loads it (the CPU, on the build the engine would
 * load: the tuned one when cached), for raw-library tests.
 */
export async function loadDefaultModel(): Promise<{ llama: Llama; model: LlamaModel }> {
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const base = config.models[0];
  if (base === undefined) throw new Error("no default model");
  const { llama } = await loadLlama(false, usableCores(), config.engine);
  const model = await llama.loadModel({
    modelPath: await ensureModelFile(base, { modelsDir: config.modelsDir }),
  });
  return { llama, model };
}
