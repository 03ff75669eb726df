// One Engine over several: each model is served by the engine that lists it (the embedded llama.cpp engine for
// `source` models, the upstream engine for `upstream` ones), configured models in the config's order, then models
// added at run time. Engines may add and remove models at run time: a model is looked up when it is asked for.
import { UnknownModelError } from "./errors.js";
import type {
  AcceleratorState,
  Engine,
  Generation,
  GenerationRequest,
  ModelHealth,
  ModelInfo,
  ModelLoad,
  PreparedRequest,
  PromptCount,
} from "./types.js";

export class EngineRegistry implements Engine {
  private readonly rank: ReadonlyMap<string, number>;

  /** `order`: every configured model id in the config's order; each engine serves the ids it lists. */
  constructor(
    private readonly engines: readonly Engine[],
    order: readonly string[],
  ) {
    this.rank = new Map(order.map((id, i) => [id, i]));
    const seen = new Set<string>();
    for (const engine of engines) {
      for (const model of engine.listModels()) {
        if (seen.has(model.id)) throw new Error(`two engines serve model ${model.id}`);
        seen.add(model.id);
      }
    }
  }

  listModels(): ModelInfo[] {
    return this.ordered(
      this.engines.flatMap((e) => e.listModels()),
      (m) => m.id,
    );
  }

  isReady(): boolean {
    return this.engines.every((e) => e.isReady());
  }

  health(): ModelHealth[] {
    return this.ordered(
      this.engines.flatMap((e) => e.health()),
      (h) => h.model,
    );
  }

  demand(model: string): ModelHealth | undefined {
    const engine = this.engineFor(model);
    return engine.demand?.(model) ?? engine.health().find((h) => h.model === model);
  }

  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    return this.engineFor(request.model).prepare(request);
  }

  /** Every engine that waits for requests on their way hears of this one (its model is not known yet). */
  expectRequest(): () => void {
    const arrived = this.engines.map((engine) => engine.expectRequest?.());
    return () => {
      for (const done of arrived) done?.();
    };
  }

  async countPromptTokens(request: GenerationRequest): Promise<PromptCount> {
    return this.engineFor(request.model).countPromptTokens(request);
  }

  async enqueue(prepared: PreparedRequest): Promise<Generation> {
    return this.engineFor(prepared.request.model).enqueue(prepared);
  }

  modelLoad(): ModelLoad[] {
    return this.ordered(
      this.engines.flatMap((e) => e.modelLoad()),
      (l) => l.model,
    );
  }

  /** The embedded engine's (at most one engine computes here). */
  async accelerator(): Promise<AcceleratorState | undefined> {
    for (const engine of this.engines) {
      const state = await engine.accelerator?.();
      if (state !== undefined) return state;
    }
    return undefined;
  }

  async drain(): Promise<void> {
    await Promise.all(this.engines.map((e) => e.drain()));
  }

  async dispose(): Promise<void> {
    await Promise.all(this.engines.map((e) => e.dispose()));
  }

  private engineFor(model: string): Engine {
    const engine = this.engines.find((e) => e.listModels().some((m) => m.id === model));
    if (engine === undefined) throw new UnknownModelError(model);
    return engine;
  }

  private ordered<T>(items: T[], idOf: (item: T) => string): T[] {
    const rankOf = (item: T) => this.rank.get(idOf(item)) ?? Number.MAX_SAFE_INTEGER;
    return items.sort((a, b) => rankOf(a) - rankOf(b));
  }
}
