// The Engine port on upstream OpenAI-compatible endpoints (vLLM, SGLang, llama-server, other Hearth nodes).
import type { UpstreamModelConfig } from "../../config/schema.js";
import type { Logger } from "../../observability/logger.js";
import {
  ContextOverflowError,
  QueueFullError,
  SamplingFieldUnsupportedError,
  ToolsUnsupportedError,
  TooManyChoicesError,
  UnknownModelError,
} from "../errors.js";
import { IdleSignal } from "../idle-signal.js";
import type {
  EndpointHealth,
  Engine,
  Generation,
  GenerationRequest,
  ModelHealth,
  ModelInfo,
  ModelLoad,
  PreparedRequest,
  PromptCount,
  RepinReason,
  UsageCounts,
} from "../types.js";
import { CacheAffinity } from "./cache-affinity.js";
import { type Endpoint, EndpointPool } from "./endpoint-pool.js";
import { EndpointSlots } from "./endpoint-slots.js";
import { UpstreamHttpClient } from "./http-client.js";
import { affinityKey, chooseEndpoint } from "./routing.js";
import { estimatePromptTokens, type TokenizeCall, tokenizeRequest } from "./tokenize.js";
import { callUpstream, type FirstTokenEvent, type UpstreamCallRequest } from "./upstream-call.js";
import { KIND_TRAITS, samplingExtensionSet } from "./wire.js";

/** Context size listed for a model whose config names none and whose endpoints did not report one yet. */
export const DEFAULT_UPSTREAM_CONTEXT_SIZE = 4096;
/** Tokens a choice may generate when the request names no max_tokens and the context size is unknown. */
export const DEFAULT_UPSTREAM_MAX_TOKENS = 4096;
/** Longest wait for an endpoint's tokenize route before `prepare` falls back to the estimate. */
export const TOKENIZE_TIMEOUT_MS = 1_000;

/**
 * n > 1 only where every endpoint's engine generates several choices: Ollama's OpenAI layer ignores `n` and would
 * answer one choice to a client that asked for more, so such a request is refused (400 on `n`) before it is sent.
 */
function assertMultipleChoices(pool: EndpointPool, n: number): void {
  for (const endpoint of pool.endpoints) {
    const kind = pool.kindOf(endpoint);
    if (kind !== undefined && !KIND_TRAITS[kind].multipleChoices) {
      throw new TooManyChoicesError(
        n,
        1,
        `the one choice its upstream engine (${kind}) generates per request`,
      );
    }
  }
}

/**
 * vLLM's sampling extensions only where every endpoint's engine takes them: the plain OpenAI dialect (and Ollama's)
 * would drop them silently, so such a request is refused (400 naming the field) before anything is sent.
 */
function assertSamplingFields(pool: EndpointPool, request: GenerationRequest): void {
  const field = samplingExtensionSet(request.sampling);
  if (field === undefined) return;
  for (const endpoint of pool.endpoints) {
    const kind = pool.kindOf(endpoint);
    if (kind !== undefined && KIND_TRAITS[kind].sampling === undefined) {
      throw new SamplingFieldUnsupportedError(request.model, field, kind);
    }
  }
}

/** Each endpoint's URL (without credentials) and why it is out, for `/health` and the CLI. */
function downReasons(endpoints: readonly EndpointHealth[]): string {
  return endpoints.map((e) => `${e.url}: ${e.lastError ?? "down"}`).join("; ");
}

export interface UpstreamEngineOptions {
  models: UpstreamModelConfig[];
  /** The probes' fetch: tests may pass their own; the global fetch otherwise. */
  fetch?: typeof fetch;
  logger?: Logger;
  /** Each request's time to its first token from the endpoint that served it (the metrics' histogram). */
  onFirstToken?: (event: FirstTokenEvent) => void;
  /** A conversation was re-pinned (cache-affinity.ts): for a debug line. */
  onRepin?: (event: RepinEvent) => void;
}

/** A conversation moved its pin, or its endpoint lost its cache (the pin stays). */
export interface RepinEvent {
  model: string;
  /** The endpoint (index in the config) that served the request. */
  endpoint: number;
  reason: RepinReason;
}

/** A request prepared by this engine: its prompt counted, its affinity key computed once. */
export class UpstreamPreparedRequest implements UpstreamCallRequest {
  constructor(
    readonly request: GenerationRequest,
    readonly promptTokens: number,
    readonly maxTokensPerChoice: number,
    /** Undefined when the model routes without affinity (`upstream.affinity: false`). */
    readonly affinityKey: string | undefined,
    /** Whether `promptTokens` came from an endpoint's tokenizer (else it is the estimate). */
    readonly exactPrompt: boolean,
  ) {}
}

interface UpstreamModel {
  config: UpstreamModelConfig;
  pool: EndpointPool;
  slots: EndpointSlots;
  affinity: CacheAffinity;
}

export class UpstreamEngine implements Engine {
  private readonly models = new Map<string, UpstreamModel>();
  private readonly created = Math.floor(Date.now() / 1000);
  private readonly shutdown = new AbortController();
  private readonly http = new UpstreamHttpClient();
  /** Requests taken by `enqueue` and not yet ended (queued, in attempts or streaming): what `drain` waits for. */
  private active = 0;
  private draining = false;
  private readonly idle = new IdleSignal(() => this.active === 0);

  constructor(private readonly options: UpstreamEngineOptions) {
    for (const config of options.models) {
      const { upstream } = config;
      let slots: EndpointSlots | undefined;
      const affinity = new CacheAffinity(upstream.endpoints.length, upstream.affinityKeys);
      const pool = new EndpointPool({
        config,
        ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
        ...(options.logger === undefined ? {} : { logger: options.logger }),
        onHealthChange: () => slots?.healthChanged(),
      });
      slots = new EndpointSlots({
        pool,
        maxQueue: upstream.maxQueue,
        queueTimeoutMs: upstream.queueTimeoutMs,
        pinOf: (key) => affinity.pinOf(key),
      });
      this.models.set(config.id, { config, pool, slots, affinity });
    }
  }

  /** Probes every endpoint once (each probe is bounded to a second), then keeps probing in the background. */
  async start(): Promise<void> {
    await Promise.all([...this.models.values()].map((m) => m.pool.start()));
  }

  listModels(): ModelInfo[] {
    return [...this.models.values()].map((m) => ({
      id: m.config.id,
      contextSize: m.pool.contextSize ?? DEFAULT_UPSTREAM_CONTEXT_SIZE,
      created: this.created,
      ...(m.config.defaults === undefined ? {} : { defaults: m.config.defaults }),
    }));
  }

  isReady(): boolean {
    return [...this.models.values()].every((m) => m.pool.healthy().length > 0);
  }

  health(): ModelHealth[] {
    return [...this.models.values()].map((m) => {
      const endpoints = m.pool.endpoints.map((e) => ({
        ...e.health(),
        ...m.affinity.endpointStats(e.index),
      }));
      const ready = endpoints.some((e) => e.healthy);
      return {
        model: m.config.id,
        ready,
        ...(ready ? {} : { detail: `no healthy endpoint (${downReasons(endpoints)})` }),
        endpoints,
        repins: m.affinity.repins(),
      };
    });
  }

  /** The pools, for the metrics (per-endpoint counters) and tests. */
  pools(): EndpointPool[] {
    return [...this.models.values()].map((m) => m.pool);
  }

  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    const model = this.model(request.model);
    if (request.n > 1) assertMultipleChoices(model.pool, request.n);
    assertSamplingFields(model.pool, request);
    const { output } = request;
    if (output?.tools !== undefined && output.tools.length > 0 && output.toolChoice !== "none") {
      if (model.pool.cannotCallTools()) throw new ToolsUnsupportedError(request.model);
    }
    const key = this.affinityKeyOf(model, request);
    // Without a TPM pre-charge the count only bounds the budget: an estimate does, without a round trip.
    const counted =
      request.exactPromptCount === false ? estimateOf(request) : await this.countPrompt(model, request, key);
    const contextSize = model.pool.contextSize;
    const asked = request.sampling.maxTokens;
    // Only an exact count may refuse a request: an estimate errs on the large side, and the endpoint refuses
    // what truly does not fit with its own 400 (relayed with its message).
    if (contextSize !== undefined && counted.exact) {
      const budget = asked ?? contextSize - counted.tokens;
      if (counted.tokens + budget > contextSize || budget < 1) {
        throw new ContextOverflowError(contextSize, counted.tokens, asked);
      }
    }
    const room =
      contextSize === undefined ? DEFAULT_UPSTREAM_MAX_TOKENS : Math.max(1, contextSize - counted.tokens);
    const { defaultMaxTokens } = request.sampling;
    const fitted =
      defaultMaxTokens === undefined || contextSize === undefined
        ? defaultMaxTokens
        : Math.min(defaultMaxTokens, room);
    const maxTokensPerChoice = asked ?? fitted ?? room;
    // The model's default max_tokens, fitted to the context, is sent as the request's (the engine's own would not
    // know Hearth's default).
    const sent =
      asked === undefined && defaultMaxTokens !== undefined
        ? { ...request, sampling: { ...request.sampling, maxTokens: maxTokensPerChoice } }
        : request;
    return new UpstreamPreparedRequest(sent, counted.tokens, maxTokensPerChoice, key, counted.exact);
  }

  async countPromptTokens(request: GenerationRequest): Promise<PromptCount> {
    const model = this.model(request.model);
    return this.countPrompt(model, request, this.affinityKeyOf(model, request));
  }

  /** The request's affinity key (routing.ts), or undefined when the model routes without affinity. */
  private affinityKeyOf(model: UpstreamModel, request: GenerationRequest): string | undefined {
    if (!model.config.upstream.affinity) return undefined;
    return affinityKey(request.cacheScope, request.messages, request.promptCacheKey, request.sessionId);
  }

  async enqueue(prepared: PreparedRequest): Promise<Generation> {
    if (!(prepared instanceof UpstreamPreparedRequest)) {
      throw new TypeError("UpstreamEngine.enqueue takes only requests it prepared itself");
    }
    const model = this.model(prepared.request.model);
    if (this.draining || this.shutdown.signal.aborted) throw new QueueFullError(model.config.id);
    this.active++;
    let generation: Generation;
    try {
      generation = await this.call(model, prepared);
    } catch (err) {
      this.ended();
      throw err;
    }
    generation.events.observe({ value: () => undefined, end: () => this.ended() });
    return generation;
  }

  /** A request `enqueue` took has ended (refused, failed or its stream over): `drain` may be done. */
  private ended(): void {
    this.active--;
    this.idle.check();
  }

  private call(model: UpstreamModel, prepared: UpstreamPreparedRequest): Promise<Generation> {
    const { upstream } = model.config;
    return callUpstream(
      {
        pool: model.pool,
        slots: model.slots,
        upstreamModel: upstream.model,
        firstTokenTimeoutMs: upstream.firstTokenTimeoutMs,
        maxAttempts: upstream.maxAttempts,
        engineSignal: this.shutdown.signal,
        post: this.http.post,
        logger: this.options.logger,
        onFirstToken: this.options.onFirstToken,
        onStreamEnd: (endpoint, usage) => this.served(model, prepared, endpoint, usage),
      },
      prepared,
    );
  }

  /** What a stream's reported usage teaches the model's learner (a stream that reported none teaches nothing). */
  private served(
    model: UpstreamModel,
    prepared: UpstreamPreparedRequest,
    endpoint: Endpoint,
    usage: UsageCounts | undefined,
  ): void {
    if (usage === undefined) return;
    const reason = model.affinity.served(
      {
        key: prepared.affinityKey,
        endpoint: endpoint.index,
        promptTokens: usage.promptTokens,
        cachedTokens: usage.cachedTokens,
      },
      (i) => model.pool.endpoints[i]?.healthy === true,
    );
    if (reason !== undefined) {
      this.options.onRepin?.({ model: model.config.id, endpoint: endpoint.index, reason });
    }
  }

  modelLoad(): ModelLoad[] {
    return [...this.models.values()].map((m) => ({
      model: m.config.id,
      parallel: m.pool.healthy().reduce((sum, e) => sum + e.maxInFlight, 0),
      busySequences: m.pool.endpoints.reduce((sum, e) => sum + e.inFlight, 0),
      queueDepth: m.slots.depth,
    }));
  }

  /** Stops admitting (new requests get QueueFullError); resolves once every request it took has ended. */
  async drain(): Promise<void> {
    this.draining = true;
    await this.idle.wait();
  }

  /** Stops the probes, refuses waiting requests and aborts those in flight (their streams fail). */
  async dispose(): Promise<void> {
    this.shutdown.abort();
    for (const m of this.models.values()) {
      m.pool.stop();
      m.slots.dropAll(new QueueFullError(m.config.id));
    }
    await this.http.close();
  }

  private model(id: string): UpstreamModel {
    const model = this.models.get(id);
    if (model === undefined) throw new UnknownModelError(id);
    return model;
  }

  /**
   * Prompt tokens from the tokenize route of the endpoint routing would pick, when its engine has one; the
   * estimate when it has none, is unknown yet, fails or takes longer than TOKENIZE_TIMEOUT_MS in all.
   */
  private async countPrompt(
    model: UpstreamModel,
    request: GenerationRequest,
    key: string | undefined,
  ): Promise<PromptCount> {
    const estimate = estimateOf(request);
    const { pool } = model;
    const i = chooseEndpoint(pool.endpoints, key, undefined, model.affinity.pinOf(key));
    const endpoint: Endpoint | undefined = i === undefined ? pool.healthy()[0] : pool.endpoints[i];
    if (endpoint === undefined) return estimate;
    const kind = pool.kindOf(endpoint);
    if (kind === undefined) return estimate;
    let call: TokenizeCall | number | undefined = tokenizeRequest(kind, {
      endpointUrl: endpoint.url,
      model: model.config.upstream.model,
      request,
    });
    if (call === undefined) return estimate;
    const signal = AbortSignal.any([AbortSignal.timeout(TOKENIZE_TIMEOUT_MS), this.shutdown.signal]);
    try {
      // A route may take two calls (llama-server renders the template, then tokenizes).
      while (call !== undefined && typeof call !== "number") {
        const response = await this.http.post(call.url, {
          headers: endpoint.headers({ "content-type": "application/json" }),
          body: JSON.stringify(call.body),
          signal,
        });
        if (response.status !== 200) {
          response.discard();
          return estimate;
        }
        call = call.read(await response.json());
      }
    } catch {
      return estimate;
    }
    return call === undefined ? estimate : { tokens: call, exact: true };
  }
}

function estimateOf(request: GenerationRequest): PromptCount {
  return { tokens: estimatePromptTokens(request.messages, request.output), exact: false };
}
