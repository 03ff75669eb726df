// The Engine port on node-llama-cpp: each model is loaded and unloaded at run time (states with progress), within a
// memory budget (least recently used idle models make room) and its keepAlive; requests go to its runner.
import type { ProgressReporter } from "../../catalogue/progress.js";
import { TemplateThread } from "../../chat/template/thread.js";
import { parseKeepAlive } from "../../config/durations.js";
import {
  DEFAULT_BLOCKING_DECODE_MS,
  type EngineSettings,
  type GpuSetting,
  type MemoryBudget,
  type ModelConfig,
} from "../../config/schema.js";
import { EngineNotReadyError, ModelCatalogueError, ModelMemoryError, UnknownModelError } from "../errors.js";
import type {
  AcceleratorState,
  Engine,
  EngineBuildState,
  Generation,
  GenerationRequest,
  MemoryEstimate,
  ModelHealth,
  ModelInfo,
  ModelLoad,
  ModelProgress,
  ModelState,
  PreparedRequest,
  PromptCount,
} from "../types.js";
import { Arrivals, INCOMING_TTL_MS } from "./arrivals.js";
import { acceleratorState, type LoadedLlama, loadLlama } from "./backend.js";
import { usableCores } from "./cpu.js";
import { planEviction } from "./memory-budget.js";
import { disposeModel, estimateModelMemory, type LoadedModel, loadModel } from "./model-loader.js";
import type { ModelRunner } from "./model-runner.js";
import { LlamaPreparedRequest } from "./prepared-request.js";

export interface LlamaEngineOptions {
  models: ModelConfig[];
  /** node-llama-cpp's backend (config `gpu`); default auto: the GPU when one works, else the CPU. */
  gpu?: GpuSetting | undefined;
  /** Resolves a model to its local .gguf path (fetching it on first use), reporting the download to `progress`. */
  resolveModelPath: (model: ModelConfig, progress?: ProgressReporter) => Promise<string>;
  onModelLoaded?: (model: ModelConfig, path: string) => void;
  /** A model changed state (loaded, unloaded by keepAlive or to make room, failed): for the log. */
  onModelEvent?: (event: ModelEvent) => void;
  /** What the loaded models may take together; unset: no budget. */
  memory?: MemoryBudget | undefined;
  /** Which llama.cpp build to load (config `engine`); default auto: the tuned build when it is cached. */
  engine?: EngineSettings | undefined;
  /** Told once which build serves, and why the prebuilt binaries do when the tuned build was wanted. */
  onEngineBuild?: (state: EngineBuildState) => void;
  /** How often idle models are checked against their keepAlive (default 1000 ms). */
  keepAliveSweepMs?: number;
  now?: () => number;
}

export interface ModelEvent {
  model: string;
  state: ModelState;
  /** Why, when the engine did it by itself: "keepAlive", "evicted for <id>", "on demand", or the failure. */
  reason?: string;
}

/** One configured model and where it is in its lifecycle. */
interface ModelSlot {
  config: ModelConfig;
  state: ModelState;
  progress: ModelProgress;
  memory: MemoryEstimate | undefined;
  error: Error | undefined;
  loaded: LoadedModel | undefined;
  /** The load or unload under way. */
  transition: Promise<void> | undefined;
  lastUsed: number;
  /** ms idle before it is unloaded; null: never. */
  keepAliveMs: number | null;
}

const DEFAULT_SWEEP_MS = 1000;

export class LlamaEngine implements Engine {
  private readonly slots = new Map<string, ModelSlot>();
  private readonly created = Math.floor(Date.now() / 1000);
  private llama: Promise<LoadedLlama> | undefined;
  private ready = false;
  /** Loads one at a time: the budget is checked, and room made, with nothing else changing meanwhile. */
  private loadQueue: Promise<void> = Promise.resolve();
  private readonly sweep: NodeJS.Timeout;
  private readonly now: () => number;
  /** Renders large conversations for every model off the event loop. */
  private readonly templateThread = new TemplateThread();
  /** Requests received whose model is not known yet (`expectRequest`): every model's gather waits for them. */
  private readonly incoming = new Arrivals(INCOMING_TTL_MS);

  constructor(private readonly options: LlamaEngineOptions) {
    this.now = options.now ?? Date.now;
    for (const config of options.models) this.addModel(config);
    this.sweep = setInterval(() => this.unloadExpired(), options.keepAliveSweepMs ?? DEFAULT_SWEEP_MS);
    this.sweep.unref();
  }

  /**
   * Loads every configured model (fetching on first use), in order; a model that does not fit the memory budget
   * beside those before it stays unloaded (loaded on demand). Resolves when each is ready or failed; rejects with
   * the first failure other than the budget's.
   */
  async start(): Promise<void> {
    const results = await Promise.allSettled(
      [...this.slots.keys()].map((id) => this.loadModel(id, { evict: false })),
    );
    this.ready = true;
    const failed = results.find(
      (r): r is PromiseRejectedResult => r.status === "rejected" && !(r.reason instanceof ModelMemoryError),
    );
    if (failed !== undefined) throw failed.reason;
  }

  /** Adds a model to serve, unloaded: `loadModel` or a request loads it. */
  addModel(config: ModelConfig): void {
    if (this.slots.has(config.id)) throw new ModelCatalogueError(config.id, "exists");
    this.slots.set(config.id, {
      config,
      state: "unloaded",
      progress: { downloadedBytes: 0, load: 0 },
      memory: undefined,
      error: undefined,
      loaded: undefined,
      transition: undefined,
      lastUsed: 0,
      keepAliveMs: config.keepAlive === undefined ? null : (parseKeepAlive(config.keepAlive) ?? null),
    });
  }

  /** Unloads the model (after its running requests) and forgets it. */
  async removeModel(id: string): Promise<void> {
    await this.unloadModel(id);
    this.slots.delete(id);
  }

  /**
   * Loads the model in the background of the callers (downloading it first when not cached), unloading the least
   * recently used idle models when it would not fit the budget (`evict: false`: never). Resolves once it is ready;
   * rejects with ModelMemoryError when it cannot fit, or the load's failure (the model is then `failed`).
   */
  loadModel(id: string, options: { evict?: boolean; reason?: string } = {}): Promise<void> {
    const slot = this.slot(id);
    if (slot.state === "ready") return Promise.resolve();
    if (slot.transition !== undefined) {
      // A load under way is the answer; an unload under way finishes first.
      if (slot.state !== "unloading") return slot.transition;
      return slot.transition.catch(() => undefined).then(() => this.loadModel(id, options));
    }
    slot.state = "loading";
    slot.error = undefined;
    slot.progress = { downloadedBytes: 0, load: 0 };
    const transition = this.queuedLoad(slot, options.evict ?? true)
      .then(
        () => {
          this.event(slot, "ready", options.reason);
        },
        (err: unknown) => {
          // A model that does not fit now may fit later (busy models become idle): it rests unloaded, the reason
          // kept, and loads on demand; any other failure stays until an operator loads it again.
          slot.state = err instanceof ModelMemoryError ? "unloaded" : "failed";
          slot.error = err instanceof Error ? err : new Error(String(err));
          this.event(slot, slot.state, slot.error.message);
          throw err;
        },
      )
      .finally(() => {
        if (slot.transition === transition) slot.transition = undefined;
      });
    slot.transition = transition;
    return transition;
  }

  /** Stops admitting to the model, waits for its running and queued requests, then releases it. */
  unloadModel(id: string, reason?: string): Promise<void> {
    const slot = this.slot(id);
    if (slot.transition !== undefined) {
      // A load under way finishes first, then is undone; an unload under way is the answer.
      if (slot.state === "unloading") return slot.transition;
      return slot.transition.catch(() => undefined).then(() => this.unloadModel(id, reason));
    }
    const loaded = slot.loaded;
    if (loaded === undefined) {
      if (slot.state === "failed") slot.state = "unloaded";
      return Promise.resolve();
    }
    slot.state = "unloading";
    const transition = (async () => {
      try {
        await loaded.runner.drain();
        await disposeModel(loaded);
      } finally {
        slot.loaded = undefined;
        slot.state = "unloaded";
        slot.progress = { downloadedBytes: slot.progress.downloadedBytes, load: 0 };
        this.event(slot, "unloaded", reason);
      }
    })().finally(() => {
      if (slot.transition === transition) slot.transition = undefined;
    });
    slot.transition = transition;
    return transition;
  }

  listModels(): ModelInfo[] {
    return [...this.slots.values()].map((s) => ({
      id: s.config.id,
      contextSize: s.config.contextSize,
      created: this.created,
      ...(s.config.defaults === undefined ? {} : { defaults: s.config.defaults }),
    }));
  }

  /** The configuration a model is served with (the admin API lists it). */
  modelConfig(id: string): ModelConfig | undefined {
    return this.slots.get(id)?.config;
  }

  /** True once the models configured at start were loaded (or failed, or did not fit) and one of them serves. */
  isReady(): boolean {
    return this.ready && [...this.slots.values()].some((s) => s.state === "ready");
  }

  health(): ModelHealth[] {
    return [...this.slots.values()].map((s) => this.healthOf(s));
  }

  /** An unloaded model is loaded now (on demand); a model that failed for lack of memory is tried again. */
  demand(model: string): ModelHealth | undefined {
    const slot = this.slots.get(model);
    if (slot === undefined) return undefined;
    if (slot.state === "ready") slot.lastUsed = this.now();
    // The last try did not fit the budget: this request is told why (it is tried again for the next one).
    const refused = slot.error instanceof ModelMemoryError ? slot.error.message : undefined;
    if (slot.state === "unloaded" && slot.transition === undefined) {
      // Failures are in the model's state (and the log); the request that asked is told to retry either way.
      this.loadModel(model, { reason: "on demand" }).catch(() => undefined);
    }
    const health = this.healthOf(slot);
    return refused === undefined || health.ready ? health : { ...health, detail: refused };
  }

  runner(modelId: string): ModelRunner {
    const slot = this.slots.get(modelId);
    if (slot === undefined) throw new UnknownModelError(modelId);
    if (slot.loaded === undefined || slot.state !== "ready") {
      throw new EngineNotReadyError(modelId, this.healthOf(slot).detail);
    }
    slot.lastUsed = this.now();
    return slot.loaded.runner;
  }

  /** The loaded runners, for the benchmark and the batching tests. */
  runners(): ModelRunner[] {
    return [...this.slots.values()].flatMap((s) => (s.loaded === undefined ? [] : [s.loaded.runner]));
  }

  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    return this.runner(request.model).prepare(request);
  }

  /** Every loaded model's step loop counts the request as arriving until it is queued or refused. */
  expectRequest(): () => void {
    const request = {};
    this.incoming.expect(request);
    return () => this.incoming.arrived(request);
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
    return this.runners().map((r) => r.load());
  }

  /** Stops admitting and waits for running requests to finish. */
  async drain(): Promise<void> {
    await Promise.all(this.runners().map((r) => r.drain()));
  }

  async dispose(): Promise<void> {
    this.ready = false;
    clearInterval(this.sweep);
    await Promise.allSettled([...this.slots.values()].map((s) => s.transition));
    for (const slot of this.slots.values()) {
      if (slot.loaded !== undefined) await disposeModel(slot.loaded);
      slot.loaded = undefined;
      slot.state = "unloaded";
    }
    await this.templateThread.dispose();
    // A backend that failed to load (an explicit GPU that is not there) has nothing to dispose.
    const loaded = await this.llama?.catch(() => undefined);
    await loaded?.llama.dispose();
  }

  /** The backend node-llama-cpp loaded (and the GPU's memory); undefined until the first load has made it. */
  async accelerator(): Promise<AcceleratorState | undefined> {
    const loaded = await this.llama?.catch(() => undefined);
    return loaded === undefined ? undefined : acceleratorState(loaded);
  }

  /** The llama.cpp bindings, made on the first load (an engine that never loads a model never makes them). */
  private async llamaInstance(): Promise<LoadedLlama> {
    if (this.llama === undefined) {
      // Never the library's default thread count: it oversubscribes small machines (see engine notes).
      this.llama = loadLlama(this.options.gpu ?? "auto", usableCores(), this.options.engine);
      this.llama.then((loaded) => this.options.onEngineBuild?.(loaded.build)).catch(() => undefined);
    }
    return this.llama;
  }

  /** Waits for its turn among loads, then fetches, checks the budget (making room) and loads. */
  private queuedLoad(slot: ModelSlot, evict: boolean): Promise<void> {
    const turn = this.loadQueue.then(() => this.load(slot, evict));
    this.loadQueue = turn.catch(() => undefined);
    return turn;
  }

  private async load(slot: ModelSlot, evict: boolean): Promise<void> {
    const { config } = slot;
    slot.state = "downloading";
    const path = await this.options.resolveModelPath(config, progressInto(slot.progress));
    slot.state = "loading";
    const { llama, build } = await this.llamaInstance();
    slot.memory = await estimateModelMemory(llama, config, path);
    await this.makeRoom(slot, slot.memory, evict);
    slot.loaded = await loadModel({
      llama,
      config,
      path,
      cores: usableCores(),
      engineBuild: build.build,
      directSteps: this.options.engine?.directSteps ?? true,
      blockingDecodeMs: this.options.engine?.blockingDecodeMs ?? DEFAULT_BLOCKING_DECODE_MS,
      incoming: () => this.incoming.pending,
      templateThread: this.templateThread,
      onLoadProgress: (load) => {
        slot.progress.load = load;
      },
    });
    slot.progress.load = 1;
    slot.lastUsed = this.now();
    slot.state = "ready";
    this.options.onModelLoaded?.(config, path);
  }

  /** Unloads the least recently used idle models until `need` fits the budget; throws when it cannot. */
  private async makeRoom(slot: ModelSlot, need: MemoryEstimate, evict: boolean): Promise<void> {
    const budget = this.options.memory;
    if (budget === undefined || (budget.ram === undefined && budget.vram === undefined)) return;
    const holders = [...this.slots.values()]
      .filter((s) => s !== slot && s.memory !== undefined && s.loaded !== undefined)
      .map((s) => {
        const load = s.loaded?.runner.load();
        const idle = s.state === "ready" && load !== undefined && load.busySequences + load.queueDepth === 0;
        return {
          id: s.config.id,
          memory: s.memory as MemoryEstimate,
          idle: idle && evict,
          lastUsed: s.lastUsed,
        };
      });
    const plan = planEviction(need, holders, { ramBytes: budget.ram, vramBytes: budget.vram });
    if (!plan.fits) {
      throw new ModelMemoryError(
        slot.config.id,
        plan.resource,
        plan.needBytes,
        plan.budgetBytes,
        plan.heldBytes,
      );
    }
    for (const id of plan.evict) await this.unloadModel(id, `evicted for ${slot.config.id}`);
  }

  /** Unloads every ready model idle for longer than its keepAlive. */
  private unloadExpired(): void {
    const now = this.now();
    for (const slot of this.slots.values()) {
      if (slot.state !== "ready" || slot.keepAliveMs === null || slot.loaded === undefined) continue;
      const load = slot.loaded.runner.load();
      if (load.busySequences + load.queueDepth > 0) {
        slot.lastUsed = now;
        continue;
      }
      if (now - slot.lastUsed >= slot.keepAliveMs) {
        this.unloadModel(slot.config.id, "keepAlive").catch((err: unknown) =>
          this.event(slot, "failed", `unloading after keepAlive: ${String(err)}`),
        );
      }
    }
  }

  private healthOf(slot: ModelSlot): ModelHealth {
    const common = {
      model: slot.config.id,
      state: slot.state,
      progress: { ...slot.progress },
      ...(slot.memory === undefined ? {} : { memory: slot.memory }),
    };
    if (slot.state === "ready")
      return {
        ...common,
        ready: true,
        gpuLayers: slot.loaded?.model.gpuLayers ?? 0,
        ...(slot.loaded === undefined ? {} : { engineBuild: slot.loaded.engineBuild }),
      };
    return {
      ...common,
      ready: false,
      detail: slot.state === "failed" ? `failed: ${slot.error?.message ?? "unknown error"}` : slot.state,
      ...(slot.error === undefined ? {} : { error: slot.error.message }),
    };
  }

  private slot(id: string): ModelSlot {
    const slot = this.slots.get(id);
    if (slot === undefined) throw new ModelCatalogueError(id, "not_found");
    return slot;
  }

  private event(slot: ModelSlot, state: ModelState, reason?: string): void {
    this.options.onModelEvent?.({
      model: slot.config.id,
      state,
      ...(reason === undefined ? {} : { reason }),
    });
  }
}

/** A progress reporter that records a fetch's bytes into the model's progress. */
function progressInto(progress: ModelProgress): ProgressReporter {
  let downloading = false;
  return {
    phase(_model, phase, totalBytes) {
      downloading = phase === "downloading";
      if (!downloading) return;
      progress.downloadedBytes = 0;
      if (totalBytes !== undefined) progress.totalBytes = totalBytes;
    },
    update(doneBytes, totalBytes) {
      if (!downloading) return;
      progress.downloadedBytes = Math.max(progress.downloadedBytes, doneBytes);
      if (totalBytes !== undefined) progress.totalBytes = totalBytes;
    },
    finish() {},
  };
}
