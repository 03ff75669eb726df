// The embedded llama.cpp engine over a test's config (models fetched into the models dir on first use): the model tier.
import type { HearthConfig } from "../../src/config/schema.js";
import { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import { ensureModelFile } from "../../src/models/fetch.js";

/** Not started: the test calls `start()` (loading is what some tests look at). */
export function llamaEngine(config: HearthConfig): LlamaEngine {
  return new LlamaEngine({
    models: config.models,
    gpu: config.gpu,
    resolveModelPath: (model) => ensureModelFile(model, { modelsDir: config.modelsDir }),
  });
}
