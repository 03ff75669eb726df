// Loads one model onto llama.cpp (weights, context, template, runner) and estimates what that takes beforehand.
import {
  GgufInsights,
  type Llama,
  type LlamaContext,
  type LlamaModel,
  readGgufFileInfo,
} from "node-llama-cpp";
import { createPromptRenderer } from "../../chat/template/render.js";
import type { TemplateThread } from "../../chat/template/thread.js";
import { detectCapabilities } from "../../chat/template/tool-format.js";
import type { ModelConfig } from "../../config/schema.js";
import type { EngineBuildState, MemoryEstimate } from "../types.js";
import { countingStrategy, createRunnerStats, decodeThreads } from "./batching.js";
import { overrideDecodeThreads } from "./llama-internals.js";
import { ModelRunner } from "./model-runner.js";
import { rendererOptionsFor } from "./model-template.js";
import { createPromptStore } from "./prompt-store.js";

export interface LoadedModel {
  config: ModelConfig;
  model: LlamaModel;
  context: LlamaContext;
  runner: ModelRunner;
  engineBuild: EngineBuildState["build"];
}

export interface LoadModelOptions {
  llama: Llama;
  config: ModelConfig;
  path: string;
  /** The cores this process may use. */
  cores: number;
  /** The llama.cpp build `llama` runs: the tuned build keeps a thread pool per context. */
  engineBuild: EngineBuildState["build"];
  /** Greedy steps decoded by the step loop itself where the build allows (`engine.directSteps`). */
  directSteps: boolean;
  /** The longest decode of a direct step the event loop may wait for (`engine.blockingDecodeMs`). */
  blockingDecodeMs: number;
  /** Requests received for some model, not yet known which (`ModelRunnerOptions.incoming`). */
  incoming: () => number;
  templateThread: TemplateThread;
  /** llama.cpp's load progress, 0..1. */
  onLoadProgress?: (progress: number) => void;
}

/** The options every context is created with; the estimate reads the same ones. */
function contextShape(config: ModelConfig) {
  return {
    sequences: config.parallel,
    contextSize: config.contextSize,
    batchSize: config.batchSize,
    flashAttention: true,
  } as const;
}

/** Loads the weights, creates the context with `parallel` sequences and builds the model's runner. */
export async function loadModel(options: LoadModelOptions): Promise<LoadedModel> {
  const { llama, config, path, cores } = options;
  const model = await llama.loadModel({
    modelPath: path,
    gpuLayers: config.gpuLayers,
    ...(options.onLoadProgress === undefined ? {} : { onLoadProgress: options.onLoadProgress }),
  });
  try {
    const threads = config.threads > 0 ? Math.min(config.threads, cores) : cores;
    // Counted through the batching strategy: the library asks it once per llama_decode it builds.
    const stats = createRunnerStats();
    // Each decode's threads follow its size (decodeThreads): the strategy sees the batch just before the library
    // sets the decode's threads.
    let batchTokens = 0;
    const context = await model.createContext({
      ...contextShape(config),
      threads,
      batching: {
        itemPrioritizationStrategy: countingStrategy(stats, (tokens) => {
          batchTokens = tokens;
        }),
      },
    });
    // The tuned build's pool keeps its threads between decodes: every decode may use them all.
    const pooled = options.engineBuild === "tuned";
    overrideDecodeThreads(context, (requested) => decodeThreads(batchTokens, requested, cores, pooled));
    // A GGUF without a template gets the built-in one of its vocabulary's turn format (model-template.ts).
    const rendererOptions = rendererOptionsFor(model);
    const renderer = options.templateThread.renderer(createPromptRenderer(rendererOptions), rendererOptions);
    const capabilities = detectCapabilities(rendererOptions.template);
    const store = await createPromptStore(config.promptCacheMiB * 1024 * 1024);
    const runner = new ModelRunner({
      config,
      model,
      context,
      stats,
      renderer,
      capabilities,
      store,
      directSteps: options.directSteps,
      blockingDecodeMs: options.blockingDecodeMs,
      incoming: options.incoming,
    });
    return { config, model, context, runner, engineBuild: options.engineBuild };
  } catch (err) {
    await model.dispose();
    throw err;
  }
}

/** Releases a loaded model: its runner (after it drained), its context, its weights. */
export async function disposeModel(loaded: LoadedModel): Promise<void> {
  await loaded.runner.dispose();
  await loaded.context.dispose();
  await loaded.model.dispose();
}

/**
 * What loading `path` with `config` will take, by node-llama-cpp's own resolvers: the weights (all layers on the
 * device llama uses: 0 GPU layers on a CPU build) plus the context with its sequences. Reads the GGUF header only.
 */
export async function estimateModelMemory(
  llama: Llama,
  config: ModelConfig,
  path: string,
): Promise<MemoryEstimate> {
  const insights = await GgufInsights.from(await readGgufFileInfo(path), llama);
  const gpuLayers = llama.gpu === false ? 0 : insights.totalLayers;
  const weights = await insights.estimateModelResourceRequirementsV2({ gpuLayers });
  const context = await insights.estimateContextResourceRequirementsV2({
    ...contextShape(config),
    modelGpuLayers: gpuLayers,
  });
  return {
    ramBytes: weights.cpuRam + context.cpuRam,
    vramBytes: weights.gpuVram + context.gpuVram,
  };
}
