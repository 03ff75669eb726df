// The Engine port on node-llama-cpp: loads every configured model once and routes requests to its runner.
import { getLlama, type Llama, type LlamaContext, LlamaLogLevel, type LlamaModel } from "node-llama-cpp";
import { createPromptRenderer } from "../../chat/template.js";
import { TemplateThread } from "../../chat/template-thread.js";
import { detectCapabilities } from "../../chat/tool-format.js";
import type { ModelConfig } from "../../config/schema.js";
import { UnknownModelError } from "../errors.js";
import type {
  Engine,
  Generation,
  GenerationRequest,
  ModelHealth,
  ModelInfo,
  ModelLoad,
  PreparedRequest,
  PromptCount,
} from "../types.js";
import { countingStrategy, createRunnerStats, decodeThreads } from "./batching.js";
import { usableCores } from "./cpu.js";
import { overrideDecodeThreads } from "./llama-internals.js";
import { ModelRunner } from "./model-runner.js";
import { rendererOptionsFor } from "./model-template.js";
import { LlamaPreparedRequest } from "./prepared-request.js";

export interface LlamaEngineOptions {
  models: ModelConfig[];
  /** Resolves a model to its local .gguf path (fetching it on first use). */
  resolveModelPath: (model: ModelConfig) => Promise<string>;
  onModelLoaded?: (model: ModelConfig, path: string) => void;
}

interface LoadedModel {
  config: ModelConfig;
  model: LlamaModel;
  context: LlamaContext;
  runner: ModelRunner;
}

export class LlamaEngine implements Engine {
  private readonly loaded = new Map<string, LoadedModel>();
  private readonly created = Math.floor(Date.now() / 1000);
  private llama: Llama | undefined;
  private ready = false;
  /** Renders large conversations for every model off the event loop. */
  private readonly templateThread = new TemplateThread();

  constructor(private readonly options: LlamaEngineOptions) {}

  /** Loads every model (fetching on first use); the engine reports ready when all are loaded. */
  async start(): Promise<void> {
    const cores = usableCores();
    // Never the library's default thread count: it oversubscribes small machines (see engine notes).
    this.llama = await getLlama({
      gpu: false,
      build: "never",
      maxThreads: cores,
      logLevel: LlamaLogLevel.error,
    });
    for (const config of this.options.models) {
      const path = await this.options.resolveModelPath(config);
      const model = await this.llama.loadModel({ modelPath: path });
      const threads = config.threads > 0 ? Math.min(config.threads, cores) : cores;
      // Counted through the batching strategy: the library asks it once per llama_decode it builds.
      const stats = createRunnerStats();
      // Each decode's threads follow its size (decodeThreads): the strategy sees the batch just before the library
      // sets the decode's threads.
      let batchTokens = 0;
      const context = await model.createContext({
        sequences: config.parallel,
        contextSize: config.contextSize,
        batchSize: config.batchSize,
        threads,
        flashAttention: true,
        batching: {
          itemPrioritizationStrategy: countingStrategy(stats, (tokens) => {
            batchTokens = tokens;
          }),
        },
      });
      overrideDecodeThreads(context, (requested) => decodeThreads(batchTokens, requested, cores));
      const rendererOptions = rendererOptionsFor(model);
      const renderer = this.templateThread.renderer(createPromptRenderer(rendererOptions), rendererOptions);
      const capabilities = detectCapabilities(rendererOptions.template);
      const runner = new ModelRunner({ config, model, context, stats, renderer, capabilities });
      this.loaded.set(config.id, { config, model, context, runner });
      this.options.onModelLoaded?.(config, path);
    }
    this.ready = true;
  }

  listModels(): ModelInfo[] {
    return this.options.models.map((m) => ({ id: m.id, contextSize: m.contextSize, created: this.created }));
  }

  isReady(): boolean {
    return this.ready;
  }

  health(): ModelHealth[] {
    return this.options.models.map((m) =>
      this.loaded.has(m.id) ? { model: m.id, ready: true } : { model: m.id, ready: false, detail: "loading" },
    );
  }

  runner(modelId: string): ModelRunner {
    const loaded = this.loaded.get(modelId);
    if (loaded === undefined) throw new UnknownModelError(modelId);
    return loaded.runner;
  }

  /** The loaded runners, for the benchmark and the batching tests. */
  runners(): ModelRunner[] {
    return [...this.loaded.values()].map((m) => m.runner);
  }

  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    return this.runner(request.model).prepare(request);
  }

  async countPromptTokens(request: GenerationRequest): Promise<PromptCount> {
    return { tokens: await this.runner(request.model).countPromptTokens(request), exact: true };
  }

  async enqueue(prepared: PreparedRequest): Promise<Generation> {
    if (!(prepared instanceof LlamaPreparedRequest)) {
      throw new TypeError("LlamaEngine.enqueue takes only requests it prepared itself");
    }
    return this.runner(prepared.request.model).enqueue(prepared);
  }

  modelLoad(): ModelLoad[] {
    return [...this.loaded.values()].map((m) => m.runner.load());
  }

  /** Stops admitting and waits for running requests to finish. */
  async drain(): Promise<void> {
    await Promise.all([...this.loaded.values()].map((m) => m.runner.drain()));
  }

  async dispose(): Promise<void> {
    this.ready = false;
    for (const loaded of this.loaded.values()) {
      await loaded.runner.dispose();
      await loaded.context.dispose();
      await loaded.model.dispose();
    }
    this.loaded.clear();
    await this.templateThread.dispose();
    await this.llama?.dispose();
  }
}
