import { describe, expect, it } from "vitest";
import type { Principal } from "../auth/principal.js";
import type { SamplingDefaults } from "../config/sampling-defaults.js";
import { Channel } from "../engine/channel.js";
import {
  ContextOverflowError,
  EngineNotReadyError,
  QueueFullError,
  RequestAbortedError,
  UnknownModelError,
} from "../engine/errors.js";
import type {
  Engine,
  Generation,
  GenerationEvent,
  GenerationRequest,
  PreparedRequest,
  PromptCount,
} from "../engine/types.js";
import { InvalidRequestError } from "../http/errors/api-error.js";
import { createRateLimiter } from "../limits/create-limiter.js";
import { RateLimitRefusal } from "../limits/rate-limit-refusal.js";
import { createLogger } from "../observability/logger.js";
import { Metrics } from "../observability/metrics.js";
import type { UsageMeter, UsageRecord } from "../usage/types.js";
import { Accounting } from "./accounting.js";
import { CompletionsService } from "./completions-service.js";
import { ModelAccess } from "./model-access.js";
import type { CompletionRequest } from "./types.js";

const PROMPT_TOKENS = 7;

/** An engine that records the calls the service makes, and refuses where a test says so. */
class RecordingEngine implements Engine {
  readonly calls: string[] = [];
  ready = true;
  refusePrepare: Error | undefined;
  refuseEnqueue: Error | undefined;
  lastRequest: GenerationRequest | undefined;
  readonly stream = new Channel<GenerationEvent>();
  defaults: SamplingDefaults | undefined;

  listModels() {
    return [
      {
        id: "m",
        contextSize: 100,
        created: 0,
        ...(this.defaults === undefined ? {} : { defaults: this.defaults }),
      },
    ];
  }
  isReady() {
    return this.ready;
  }
  health() {
    return [{ model: "m", ready: this.ready }];
  }
  async drain() {}
  async prepare(request: GenerationRequest): Promise<PreparedRequest> {
    this.calls.push("prepare");
    this.lastRequest = request;
    if (this.refusePrepare !== undefined) throw this.refusePrepare;
    return { request, promptTokens: PROMPT_TOKENS, maxTokensPerChoice: request.sampling.maxTokens ?? 93 };
  }
  async countPromptTokens(): Promise<PromptCount> {
    this.calls.push("count");
    return { tokens: PROMPT_TOKENS, exact: true };
  }
  async enqueue(prepared: PreparedRequest): Promise<Generation> {
    this.calls.push("enqueue");
    if (this.refuseEnqueue !== undefined) throw this.refuseEnqueue;
    return { promptTokens: prepared.promptTokens, events: this.stream };
  }
  modelLoad() {
    return [];
  }
  async dispose() {}
}

function setup(limits: { rpm: number | null; tpm: number | null } = { rpm: null, tpm: null }) {
  const engine = new RecordingEngine();
  const records: UsageRecord[] = [];
  const usageMeter: UsageMeter = {
    record: (r) => records.push(r),
    flush: async () => {},
    dispose: async () => {},
  };
  const logger = createLogger("silent");
  const accounting = new Accounting({ usageMeter, metrics: new Metrics(engine), logger });
  const limiter = createRateLimiter({ logger });
  const granted = new Set(["m"]);
  const access = new ModelAccess(engine, async () => granted);
  const service = new CompletionsService({ engine, access, limiter, accounting });
  const principal: Principal = { orgId: "org_1", orgName: "acme", keyId: "key_1", ...limits };
  const abort = new AbortController();
  const caller = { principal, requestId: "req_1", startedAt: performance.now(), signal: abort.signal };
  return { engine, records, accounting, limiter, service, principal, caller, abort, granted };
}

function request(overrides: Partial<CompletionRequest> = {}): CompletionRequest {
  return {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    n: 1,
    sampling: {
      temperature: 0,
      topP: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      seed: 1,
      maxTokens: 10,
      stop: [],
    },
    enableThinking: false,
    ...overrides,
  };
}

describe("CompletionsService", () => {
  it("checks access, prepares, charges, then enqueues; accounts for the usage when the stream ends", async () => {
    const { engine, records, accounting, limiter, service, principal, caller } = setup({
      rpm: 10,
      tpm: 1000,
    });
    const { generation, rateLimit } = await service.start(() => request({ n: 2 }), caller);
    expect(engine.calls).toEqual(["prepare", "enqueue"]);
    // Every choice may use its whole budget: 7 + 10 × 2.
    expect(rateLimit.tokens?.remaining).toBe(1000 - 27);
    expect(rateLimit.requests?.remaining).toBe(9);
    expect(engine.lastRequest?.cacheScope).toBe("org_1");
    engine.stream.push({ type: "usage", usage: { promptTokens: 7, completionTokens: 3, cachedTokens: 0 } });
    engine.stream.close();
    expect(generation.events).toBe(engine.stream);
    await accounting.settled();
    expect(records).toMatchObject([
      { orgId: "org_1", promptTokens: 7, completionTokens: 3, status: "completed" },
    ]);
    // Settled to what was used: 7 + 3.
    expect((await limiter.snapshot(principal)).tokens?.remaining).toBe(1000 - 10);
  });

  it("refuses an ungranted model before the engine sees it, and says the same as for an unknown one", async () => {
    const { engine, service, caller, granted } = setup();
    granted.clear();
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(UnknownModelError);
    await expect(service.start(() => request({ model: "nope" }), caller)).rejects.toBeInstanceOf(
      UnknownModelError,
    );
    expect(engine.calls).toEqual([]);
  });

  it("answers not ready while the models load, and gives the request back (not the client's doing)", async () => {
    const { engine, limiter, service, principal, caller } = setup({ rpm: 10, tpm: 1000 });
    engine.ready = false;
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(EngineNotReadyError);
    expect(engine.calls).toEqual([]);
    expect((await limiter.snapshot(principal)).requests?.remaining).toBe(10);
  });

  it("counts a prompt that does not fit as a request (OpenAI counts unsuccessful requests) but takes no tokens", async () => {
    const { engine, limiter, service, principal, caller } = setup({ rpm: 10, tpm: 1000 });
    engine.refusePrepare = new ContextOverflowError(100, 95, 10);
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(ContextOverflowError);
    expect(engine.calls).toEqual(["prepare"]);
    expect(await limiter.snapshot(principal)).toMatchObject({
      requests: { remaining: 9 },
      tokens: { remaining: 1000 },
    });
  });

  it("counts the request before reading it: an invalid one counts, and at the limit nothing is read", async () => {
    const { engine, limiter, service, principal, caller } = setup({ rpm: 2, tpm: 1000 });
    let reads = 0;
    const invalid = () => {
      reads++;
      throw new InvalidRequestError("bad", "messages");
    };
    await expect(service.start(invalid, caller)).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(service.start(invalid, caller)).rejects.toBeInstanceOf(InvalidRequestError);
    expect((await limiter.snapshot(principal)).requests?.remaining).toBe(0);
    await expect(service.start(invalid, caller)).rejects.toBeInstanceOf(RateLimitRefusal);
    expect(reads).toBe(2);
    expect(engine.calls).toEqual([]);
  });

  it("ends the request's count as on its way to the engine as it is queued, or once it was refused", async () => {
    const { engine, service, caller: base } = setup({ rpm: 10, tpm: 100 });
    // The HTTP edge's count (src/http/arrivals.ts); ending it again changes nothing there.
    let ended = false;
    const caller = {
      ...base,
      arrived: () => {
        if (!ended) engine.calls.push("arrived");
        ended = true;
      },
    };
    const start = (read: () => CompletionRequest) => {
      ended = false;
      return service.start(read, caller);
    };
    const read =
      (overrides: Partial<CompletionRequest> = {}) =>
      () => {
        engine.calls.push("read");
        return request(overrides);
      };
    await start(read());
    expect(engine.calls.splice(0)).toEqual(["read", "prepare", "arrived", "enqueue"]);
    const invalid = () => {
      engine.calls.push("read");
      throw new InvalidRequestError("bad", "messages");
    };
    await expect(start(invalid)).rejects.toBeInstanceOf(InvalidRequestError);
    expect(engine.calls.splice(0)).toEqual(["read", "arrived"]);
    // 7 prompt + 10 × 9 choices = 97 > the 83 tokens left this minute.
    await expect(start(read({ n: 9 }))).rejects.toBeInstanceOf(RateLimitRefusal);
    expect(engine.calls.splice(0)).toEqual(["read", "prepare", "arrived"]);
    engine.refuseEnqueue = new QueueFullError("m");
    await expect(start(read())).rejects.toBeInstanceOf(QueueFullError);
    expect(engine.calls.splice(0)).toEqual(["read", "prepare", "arrived", "enqueue"]);
  });

  it("neither prepares nor queues when the requests limit refuses", async () => {
    const { engine, service, caller } = setup({ rpm: 1, tpm: 1000 });
    await service.start(() => request(), caller);
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(RateLimitRefusal);
    expect(engine.calls).toEqual(["prepare", "enqueue"]);
  });

  it("queues nothing when the tokens would exceed the limit; the request still counts", async () => {
    const { engine, limiter, service, principal, caller } = setup({ rpm: 10, tpm: 20 });
    // 7 prompt + 10 × 2 choices = 27 > 20.
    await expect(service.start(() => request({ n: 2 }), caller)).rejects.toBeInstanceOf(RateLimitRefusal);
    expect(engine.calls).toEqual(["prepare"]);
    expect(await limiter.snapshot(principal)).toMatchObject({
      requests: { remaining: 9 },
      tokens: { remaining: 20 },
    });
  });

  it("gives the charge back when the queue refuses, and records no usage", async () => {
    const { engine, records, accounting, limiter, service, principal, caller } = setup({
      rpm: 10,
      tpm: 1000,
    });
    engine.refuseEnqueue = new QueueFullError("m");
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(QueueFullError);
    expect(await limiter.snapshot(principal)).toMatchObject({
      requests: { remaining: 10 },
      tokens: { remaining: 1000 },
    });
    await accounting.settled();
    expect(records).toEqual([]);
  });

  it("takes no tokens for and queues no request whose client left while it was prepared (the request counts)", async () => {
    const { engine, limiter, service, principal, caller, abort } = setup({ rpm: 10, tpm: 1000 });
    abort.abort();
    await expect(service.start(() => request(), caller)).rejects.toBeInstanceOf(RequestAbortedError);
    expect(engine.calls).toEqual(["prepare"]);
    expect(await limiter.snapshot(principal)).toMatchObject({
      requests: { remaining: 9 },
      tokens: { remaining: 1000 },
    });
  });

  it("draws a seed when the client sent none, and keeps the one it sent", async () => {
    const { engine, service, caller } = setup();
    await service.start(() => request({ sampling: { ...request().sampling, seed: undefined } }), caller);
    const drawn = engine.lastRequest?.sampling.seed;
    expect(Number.isInteger(drawn)).toBe(true);
    await service.start(() => request({ sampling: { ...request().sampling, seed: 42 } }), caller);
    expect(engine.lastRequest?.sampling.seed).toBe(42);
  });

  it("fills what the request left out from the model's defaults, before the engine prepares it", async () => {
    const { engine, service, caller } = setup();
    engine.defaults = {
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      min_p: 0.05,
      repetition_penalty: 1.1,
      max_tokens: 8,
    };
    const omitted = { frequencyPenalty: 0, presencePenalty: 0, seed: 1, maxTokens: undefined, stop: [] };
    await service.start(() => request({ sampling: omitted }), caller);
    expect(engine.lastRequest?.sampling).toMatchObject({
      temperature: 0.2,
      topP: 0.9,
      topK: 40,
      minP: 0.05,
      repetitionPenalty: 1.1,
      maxTokens: undefined,
      defaultMaxTokens: 8,
    });
    const set = { ...omitted, temperature: 0, topP: 1, topK: 0, minP: 0, repetitionPenalty: 1, maxTokens: 3 };
    await service.start(() => request({ sampling: set }), caller);
    expect(engine.lastRequest?.sampling).toMatchObject({
      temperature: 0,
      topP: 1,
      topK: 0,
      minP: 0,
      repetitionPenalty: 1,
      maxTokens: 3,
    });
  });

  it("without defaults: temperature 1 and top_p 1 where the request left them out, no extension set", async () => {
    const { engine, service, caller } = setup();
    const omitted = { frequencyPenalty: 0, presencePenalty: 0, seed: 1, maxTokens: undefined, stop: [] };
    await service.start(() => request({ sampling: omitted }), caller);
    expect(engine.lastRequest?.sampling).toEqual({ ...omitted, temperature: 1, topP: 1 });
  });
});
