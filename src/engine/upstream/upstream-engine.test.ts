// The upstream engine against small real HTTP servers speaking the streaming wire (protocol stand-ins for unit
// speed; the e2e tier runs real `hearth serve` workers and llama-server).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { generationRequest } from "../../../test/support/generation-request.js";
import type { UpstreamModelConfig } from "../../config/schema.js";
import { mapDomainError } from "../../http/errors/domain-errors.js";
import { upstreamCacheSalt } from "../cache-scope.js";
import {
  ContextOverflowError,
  QueueFullError,
  QueueTimeoutError,
  RequestAbortedError,
  SamplingFieldUnsupportedError,
  ToolsUnsupportedError,
  TooManyChoicesError,
} from "../errors.js";
import type { GenerationEvent, GenerationRequest, OutputRequest } from "../types.js";
import { affinityKey, chooseEndpoint } from "./routing.js";
import { estimatePromptTokens } from "./tokenize.js";
import { UpstreamEngine } from "./upstream-engine.js";
import { UpstreamError } from "./wire.js";

type Mode = "good" | "slow" | "close-before-first-byte" | "503" | "429" | "400" | "stall" | "die-mid-stream";

const USAGE = {
  prompt_tokens: 11,
  completion_tokens: 2,
  total_tokens: 13,
  prompt_tokens_details: { cached_tokens: 4 },
};

/** One stand-in endpoint: what it saw, and a promise per completion request that resolves when its socket closes. */
interface Upstream {
  url: string;
  mode: Mode;
  completions: number;
  authorization: (string | undefined)[];
  bodies: Record<string, unknown>[];
  closed: Promise<void>[];
  /** Answers nothing at all, probes included (a stopped process). */
  frozen: boolean;
  /** GET /health: 200 when true, 503 while false (a model still loading). */
  ready: boolean;
  /** POST /tokenize calls answered (`vllm` and `hearth` upstreams). */
  tokenizeCalls: number;
  server: Server;
}

const servers: Upstream[] = [];
const engines: UpstreamEngine[] = [];

afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.dispose();
  for (const upstream of servers.splice(0)) {
    upstream.server.closeAllConnections();
    await new Promise((resolve) => upstream.server.close(resolve));
  }
});

function chunk(delta: Record<string, unknown>, finish: string | null = null): string {
  const body = {
    id: "up-1",
    object: "chat.completion.chunk",
    created: 1,
    model: "smol",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
  return `data: ${JSON.stringify(body)}\n\n`;
}

function usageChunk(): string {
  return `data: ${JSON.stringify({ id: "up-1", object: "chat.completion.chunk", created: 1, model: "smol", choices: [], usage: USAGE })}\n\n`;
}

function sse(res: ServerResponse): void {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.flushHeaders();
}

async function completion(upstream: Upstream, req: IncomingMessage, res: ServerResponse): Promise<void> {
  upstream.completions++;
  upstream.authorization.push(req.headers.authorization);
  upstream.closed.push(new Promise((resolve) => res.on("close", () => resolve())));
  let raw = "";
  for await (const part of req) raw += String(part);
  upstream.bodies.push(JSON.parse(raw) as Record<string, unknown>);
  switch (upstream.mode) {
    case "good":
      sse(res);
      res.write(chunk({ role: "assistant", content: "" }));
      res.write(chunk({ content: "Hello" }));
      res.write(chunk({ content: " world" }));
      res.write(chunk({}, "stop"));
      res.write(usageChunk());
      res.end("data: [DONE]\n\n");
      return;
    case "slow": {
      sse(res);
      let i = 0;
      const timer = setInterval(() => res.write(chunk({ content: `t${i++} ` })), 20);
      res.on("close", () => clearInterval(timer));
      return;
    }
    case "close-before-first-byte":
      req.socket.destroy();
      return;
    case "503":
    case "429":
      res.writeHead(Number(upstream.mode), { "content-type": "application/json" });
      res.end(
        JSON.stringify({ error: { message: "busy, internal queue at /srv/vllm", type: "server_error" } }),
      );
      return;
    case "400":
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ error: { message: "max_tokens is too large", type: "invalid_request_error" } }),
      );
      return;
    case "stall":
      sse(res);
      return;
    case "die-mid-stream":
      sse(res);
      res.write(chunk({ content: "Hello" }));
      setTimeout(() => req.socket.destroy(), 30);
      return;
    default:
      upstream.mode satisfies never;
  }
}

/**
 * `vllm`: the model list says vLLM with a 100-token context, and `POST /tokenize` counts 42 tokens. `hearth`: the
 * model list says Hearth (whose /health is 503 while its models load).
 */
async function startUpstream(
  mode: Mode,
  { vllm = false, hearth = false, llamaToolCalls = undefined as boolean | undefined } = {},
): Promise<Upstream> {
  const llama = llamaToolCalls !== undefined;
  const upstream = {
    mode,
    completions: 0,
    authorization: [],
    bodies: [],
    closed: [],
    frozen: false,
    ready: true,
    tokenizeCalls: 0,
  } as unknown as Upstream;
  upstream.server = createServer((req, res) => {
    if (upstream.frozen) return;
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      const entry = vllm
        ? { owned_by: "vllm", max_model_len: 100 }
        : hearth
          ? { owned_by: "hearth", context_length: 2048 }
          : llama
            ? { owned_by: "llamacpp", meta: { n_ctx_train: 8192, n_ctx: 2048 } }
            : { owned_by: "test" };
      res.end(JSON.stringify({ object: "list", data: [{ id: "smol", object: "model", ...entry }] }));
      return;
    }
    if (req.method === "GET" && req.url === "/health") {
      res.writeHead(upstream.ready ? 200 : 503, { "content-type": "application/json" });
      res.end(JSON.stringify({ status: upstream.ready ? "ok" : "starting" }));
      return;
    }
    if (llama && req.method === "GET" && req.url === "/props") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ chat_template_caps: { supports_tool_calls: llamaToolCalls } }));
      return;
    }
    if ((vllm || hearth) && req.method === "POST" && req.url === "/tokenize") {
      upstream.tokenizeCalls++;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({ count: 42, max_model_len: 100, tokens: Array.from({ length: 42 }, (_, i) => i) }),
      );
      return;
    }
    if (req.method === "POST" && req.url === "/v1/chat/completions") {
      void completion(upstream, req, res);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => upstream.server.listen(0, "127.0.0.1", resolve));
  upstream.url = `http://127.0.0.1:${(upstream.server.address() as AddressInfo).port}/v1`;
  servers.push(upstream);
  return upstream;
}

/** A URL nothing listens on. */
async function deadUrl(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}/v1`;
}

function config(urls: string[], extra: Partial<UpstreamModelConfig["upstream"]> = {}): UpstreamModelConfig {
  return {
    id: "fleet",
    upstream: {
      model: "smol",
      endpoints: urls.map((url, i) => ({ url, apiKey: i === 0 ? "worker-key" : undefined })),
      maxInFlight: 4,
      maxQueue: 8,
      queueTimeoutMs: 2_000,
      kind: "openai",
      probeIntervalMs: 60_000,
      firstTokenTimeoutMs: 300,
      maxAttempts: 3,
      affinity: true,
      affinityKeys: 1000,
      ...extra,
    },
  };
}

async function engineFor(urls: string[], extra: Partial<UpstreamModelConfig["upstream"]> = {}) {
  const engine = new UpstreamEngine({ models: [config(urls, extra)] });
  engines.push(engine);
  await engine.start();
  return engine;
}

function request(org: string, signal?: AbortSignal): GenerationRequest {
  return generationRequest("fleet", {
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Say hello." },
    ],
    cacheScope: org,
    ...(signal === undefined ? {} : { signal }),
  });
}

/** An organization whose requests routing sends to endpoint `index` first. */
function orgRoutedTo(engine: UpstreamEngine, index: number): string {
  const [pool] = engine.pools();
  if (pool === undefined) throw new Error("no pool");
  for (let i = 0; i < 1000; i++) {
    const org = `org-${i}`;
    if (chooseEndpoint(pool.endpoints, affinityKey(org, request(org).messages)) === index) return org;
  }
  throw new Error(`no organization routes to endpoint ${index}`);
}

async function collect(
  events: AsyncIterable<GenerationEvent>,
): Promise<{ events: GenerationEvent[]; error?: unknown }> {
  const seen: GenerationEvent[] = [];
  try {
    for await (const event of events) seen.push(event);
    return { events: seen };
  } catch (error) {
    return { events: seen, error };
  }
}

async function run(engine: UpstreamEngine, req: GenerationRequest) {
  const generation = await engine.enqueue(await engine.prepare(req));
  return collect(generation.events);
}

describe("UpstreamEngine", () => {
  it("relays a stream with its exact upstream usage last, sending the key and the org's cache salt", async () => {
    const good = await startUpstream("good");
    const engine = await engineFor([good.url]);
    expect(engine.isReady()).toBe(true);
    const { events, error } = await run(engine, request("org-a"));
    expect(error).toBeUndefined();
    const texts = events
      .filter((e) => e.type === "delta")
      .map((e) => e.text)
      .join("");
    expect(texts).toBe("Hello world");
    expect(events.at(-2)).toMatchObject({ type: "finish", choice: 0, reason: "stop" });
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: expect.objectContaining({ promptTokens: 11, completionTokens: 2, cachedTokens: 4 }),
    });
    expect(events.filter((e) => e.type === "usage")).toHaveLength(1);
    expect(good.authorization).toEqual(["Bearer worker-key"]);
    expect(good.bodies[0]).toMatchObject({ model: "smol", stream: true });
    expect(engine.modelLoad()).toEqual([{ model: "fleet", parallel: 4, busySequences: 0, queueDepth: 0 }]);
  });

  for (const mode of ["close-before-first-byte", "stall"] as const) {
    it(`moves a request to a good endpoint when the chosen one fails before the first token (${mode})`, async () => {
      const bad = await startUpstream(mode);
      const good = await startUpstream("good");
      const engine = await engineFor([bad.url, good.url]);
      const org = orgRoutedTo(engine, 0);
      const started = Date.now();
      const { events, error } = await run(engine, request(org));
      expect(error).toBeUndefined();
      expect(events.at(-1)).toMatchObject({
        type: "usage",
        usage: { promptTokens: 11, completionTokens: 2 },
      });
      // A connection closed before any answer is tried once more on a fresh connection (a kept-alive socket the
      // endpoint closed as the request went out), then counted: the endpoint is ejected after the second.
      const tries = mode === "close-before-first-byte" ? 2 : 1;
      expect(bad.completions).toBe(tries);
      expect(good.completions).toBe(1);
      // The stall costs firstTokenTimeoutMs (300 ms); the others move on at once.
      expect(Date.now() - started).toBeLessThan(mode === "stall" ? 1_500 : 500);
      const [health] = engine.health();
      expect(health?.endpoints?.[0]).toMatchObject({ healthy: false, inFlight: 0 });
      expect(health?.endpoints?.[0]?.lastError).toBeTruthy();
      expect(health?.endpoints?.[0]?.lastError).not.toMatch(/srv\/vllm/);
      expect(health?.endpoints?.[1]).toMatchObject({ healthy: true, inFlight: 0 });
      // The ejected endpoint is not tried again while it is out.
      await run(engine, request(org));
      expect(bad.completions).toBe(tries);
      expect(good.completions).toBe(2);
    });
  }

  it("moves a request waiting on an endpoint that stops answering as soon as a probe ejects it", async () => {
    const stopped = await startUpstream("stall");
    const good = await startUpstream("good");
    const engine = await engineFor([stopped.url, good.url], {
      firstTokenTimeoutMs: 30_000,
      probeIntervalMs: 200,
    });
    const org = orgRoutedTo(engine, 0);
    const started = Date.now();
    const pending = run(engine, request(org));
    while (stopped.completions === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    stopped.frozen = true;
    const { error } = await pending;
    expect(error).toBeUndefined();
    // One probe interval plus its time-out, far below the first-token time-out.
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(good.completions).toBe(1);
    expect(engine.health()[0]?.endpoints?.[0]).toMatchObject({ healthy: false, inFlight: 0 });
    await stopped.closed[0];
  });

  for (const mode of ["429", "503"] as const) {
    it(`retries a busy answer (${mode}) elsewhere without ejecting the endpoint`, async () => {
      const busy = await startUpstream(mode);
      const good = await startUpstream("good");
      const engine = await engineFor([busy.url, good.url]);
      const { error } = await run(engine, request(orgRoutedTo(engine, 0)));
      expect(error).toBeUndefined();
      expect(busy.completions).toBe(1);
      expect(good.completions).toBe(1);
      expect(engine.health()[0]?.endpoints?.[0]?.healthy).toBe(true);
    });
  }

  it("admits a Hearth endpoint only once its /health says its models are loaded", async () => {
    const loading = await startUpstream("good", { hearth: true });
    loading.ready = false;
    const engine = await engineFor([loading.url], { kind: "auto", probeIntervalMs: 100 });
    expect(engine.health()[0]).toMatchObject({ ready: false, endpoints: [{ healthy: false }] });
    expect(engine.health()[0]?.endpoints?.[0]?.lastError).toMatch(/not ready \(health 503\)/);
    await expect(run(engine, request("org-a"))).rejects.toBeInstanceOf(QueueFullError);
    expect(loading.completions).toBe(0);
    loading.ready = true;
    const deadline = Date.now() + 5_000;
    while (!engine.isReady() && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(engine.isReady()).toBe(true);
    expect((await run(engine, request("org-a"))).error).toBeUndefined();
  });

  it("keeps the last endpoint in when it answers busy: the request gets a 503, later ones are served", async () => {
    const busy = await startUpstream("503");
    const engine = await engineFor([busy.url], { maxAttempts: 2 });
    await expect(run(engine, request("org-a"))).rejects.toBeInstanceOf(QueueFullError);
    expect(engine.health()[0]).toMatchObject({ ready: true, endpoints: [{ healthy: true }] });
    busy.mode = "good";
    expect((await run(engine, request("org-a"))).error).toBeUndefined();
  });

  it("does not retry an upstream 400: enqueue rejects with its UpstreamError", async () => {
    const refusing = await startUpstream("400");
    const good = await startUpstream("good");
    const engine = await engineFor([refusing.url, good.url]);
    const prepared = await engine.prepare(request(orgRoutedTo(engine, 0)));
    const err = await engine.enqueue(prepared).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect(err).toMatchObject({ status: 400, clientError: true });
    expect((err as Error).message).toContain("max_tokens is too large");
    expect(good.completions).toBe(0);
    expect(engine.health()[0]?.endpoints?.[0]?.healthy).toBe(true);
  });

  it("answers 503 at once when every endpoint is down, before and after the probes noticed", async () => {
    const urls = [await deadUrl(), await deadUrl()];
    // Not started: both endpoints are still presumed healthy; the first request finds out and gives up fast.
    const optimistic = new UpstreamEngine({ models: [config(urls)] });
    engines.push(optimistic);
    let started = Date.now();
    const first = await optimistic
      .enqueue(await optimistic.prepare(request("org-a")))
      .catch((e: unknown) => e);
    expect(first).toBeInstanceOf(QueueFullError);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(optimistic.isReady()).toBe(false);
    // Started: the probes ejected both; a request is refused without touching the network.
    const engine = await engineFor(urls);
    expect(engine.isReady()).toBe(false);
    const [health] = engine.health();
    expect(health).toMatchObject({ model: "fleet", ready: false });
    expect(health?.detail).toBe(
      `no healthy endpoint (${urls[0]}: probe: connection refused; ${urls[1]}: probe: connection refused)`,
    );
    expect(health?.endpoints?.map((e) => e.lastError)).toEqual([
      "probe: connection refused",
      "probe: connection refused",
    ]);
    started = Date.now();
    const err = await engine.enqueue(await engine.prepare(request("org-a"))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(QueueFullError);
    expect(Date.now() - started).toBeLessThan(100);
    expect(engine.modelLoad()).toEqual([{ model: "fleet", parallel: 0, busySequences: 0, queueDepth: 0 }]);
  });

  it("fails the channel after a usage event for what was relayed when the upstream dies mid-stream", async () => {
    const dying = await startUpstream("die-mid-stream");
    const engine = await engineFor([dying.url]);
    const prepared = await engine.prepare(request("org-a"));
    const generation = await engine.enqueue(prepared);
    const { events, error } = await collect(generation.events);
    // The broken connection as the upstream failure it is (the client's frame: 503, retry), not a raw socket error.
    expect(error).toBeInstanceOf(UpstreamError);
    expect(mapDomainError(error)).toMatchObject({ status: 503, code: "engine_overloaded" });
    expect(events.map((e) => e.type)).toEqual(["delta", "usage"]);
    expect(events.at(-1)).toEqual({
      type: "usage",
      usage: { promptTokens: prepared.promptTokens, completionTokens: 1, cachedTokens: 0 },
    });
    expect(engine.health()[0]?.endpoints?.[0]).toMatchObject({ healthy: false, inFlight: 0 });
  });

  it("aborts the upstream request at once when the client leaves mid-stream, ending with usage", async () => {
    const slow = await startUpstream("slow");
    const engine = await engineFor([slow.url]);
    const client = new AbortController();
    const generation = await engine.enqueue(await engine.prepare(request("org-a", client.signal)));
    const seen: GenerationEvent[] = [];
    let error: unknown;
    try {
      for await (const event of generation.events) {
        seen.push(event);
        if (seen.length === 3) client.abort();
      }
    } catch (err) {
      error = err;
    }
    expect(error).toBeUndefined();
    await slow.closed[0];
    const deltas = seen.filter((e) => e.type === "delta").length;
    expect(deltas).toBeGreaterThanOrEqual(3);
    expect(seen.at(-1)).toEqual({
      type: "usage",
      usage: expect.objectContaining({ completionTokens: deltas }),
    });
    expect(engine.health()[0]?.endpoints?.[0]).toMatchObject({ healthy: true, inFlight: 0 });
  });

  it("drops a request whose client leaves before the first token, closing the upstream connection", async () => {
    const stalled = await startUpstream("stall");
    const engine = await engineFor([stalled.url], { firstTokenTimeoutMs: 10_000 });
    const client = new AbortController();
    const pending = engine.enqueue(await engine.prepare(request("org-a", client.signal)));
    while (stalled.completions === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    client.abort();
    await expect(pending).rejects.toBeInstanceOf(RequestAbortedError);
    await stalled.closed[0];
    expect(engine.health()[0]?.endpoints?.[0]).toMatchObject({ healthy: true, inFlight: 0 });
  });

  it("queues when every healthy endpoint is full: refuses beyond maxQueue and after queueTimeoutMs", async () => {
    const slow = await startUpstream("slow");
    const engine = await engineFor([slow.url], { maxInFlight: 1, maxQueue: 1, queueTimeoutMs: 200 });
    const holder = new AbortController();
    const first = await engine.enqueue(await engine.prepare(request("org-a", holder.signal)));
    const waiting = engine.enqueue(await engine.prepare(request("org-b")));
    expect(engine.modelLoad()).toEqual([{ model: "fleet", parallel: 1, busySequences: 1, queueDepth: 1 }]);
    await expect(engine.enqueue(await engine.prepare(request("org-c")))).rejects.toBeInstanceOf(
      QueueFullError,
    );
    await expect(waiting).rejects.toBeInstanceOf(QueueTimeoutError);
    // A freed slot goes to the next waiting request.
    const next = engine.enqueue(await engine.prepare(request("org-b")));
    holder.abort();
    await collect(first.events);
    const second = await next;
    expect(engine.modelLoad()[0]).toMatchObject({ busySequences: 1, queueDepth: 0 });
    await engine.dispose();
    const { events, error } = await collect(second.events);
    expect(error).toBeDefined();
    expect(events.at(-1)?.type).toBe("usage");
    expect(engine.modelLoad()[0]).toMatchObject({ busySequences: 0 });
  });

  it("lists its models with the configured context size and reports per-endpoint health without credentials", async () => {
    const good = await startUpstream("good");
    const withCredentials = good.url.replace("http://", "http://user:pw@");
    const engine = await engineFor([withCredentials], { contextSize: 2048 });
    expect(engine.listModels()).toEqual([{ id: "fleet", contextSize: 2048, created: expect.any(Number) }]);
    expect(engine.health()).toEqual([
      {
        model: "fleet",
        ready: true,
        endpoints: [
          {
            url: good.url,
            healthy: true,
            inFlight: 0,
            requests: 0,
            retries: 0,
            ejections: 0,
            promptTokens: 0,
            cachedTokens: 0,
          },
        ],
        repins: { cache_lost: 0, endpoint_down: 0, endpoint_busy: 0 },
      },
    ]);
    const prepared = await engine.prepare({
      ...request("org-a"),
      sampling: { ...request("org-a").sampling, maxTokens: undefined },
    });
    expect(prepared.maxTokensPerChoice).toBe(2048 - prepared.promptTokens);
  });

  it("fits a model's default max_tokens to the context and sends it; never refuses for it", async () => {
    const worker = await startUpstream("good", { vllm: true });
    const engine = await engineFor([worker.url], { kind: "auto" });
    const withDefault = (defaultMaxTokens: number) => ({
      ...request("org-a"),
      sampling: { ...request("org-a").sampling, maxTokens: undefined, defaultMaxTokens },
    });
    // The probed context is 100 and the prompt counts 42: a default of 1000 is fitted to the 58 left.
    const capped = await engine.prepare(withDefault(1000));
    expect(capped).toMatchObject({ promptTokens: 42, maxTokensPerChoice: 58 });
    expect(capped.request.sampling.maxTokens).toBe(58);
    const small = await engine.prepare(withDefault(8));
    expect(small.maxTokensPerChoice).toBe(8);
    const { error } = await run(engine, withDefault(8));
    expect(error).toBeUndefined();
    expect(worker.bodies.at(-1)).toMatchObject({ max_tokens: 8 });
  });

  it("sends llama-server a penalty window as long as the prompt and the output can get", async () => {
    const worker = await startUpstream("good", { llamaToolCalls: true });
    const engine = await engineFor([worker.url], { kind: "llama-server", contextSize: 2048 });
    // An estimated count (the fake has no llama-server tokenize route), as without a TPM limit.
    const asked = {
      ...request("org-a"),
      exactPromptCount: false,
      sampling: { ...request("org-a").sampling, repetitionPenalty: 1.2 },
    };
    const prepared = await engine.prepare(asked);
    const { error } = await run(engine, asked);
    expect(error).toBeUndefined();
    expect(worker.bodies.at(-1)).toMatchObject({
      repeat_penalty: 1.2,
      repeat_last_n: prepared.promptTokens + prepared.maxTokensPerChoice,
    });
  });

  it("counts the prompt with the endpoint's tokenize route and refuses what does not fit the probed context", async () => {
    const worker = await startUpstream("good", { vllm: true });
    const engine = await engineFor([worker.url], { kind: "auto" });
    expect(engine.listModels()[0]?.contextSize).toBe(100);
    const open = { ...request("org-a"), sampling: { ...request("org-a").sampling, maxTokens: undefined } };
    const prepared = await engine.prepare(open);
    expect(prepared).toMatchObject({ promptTokens: 42, maxTokensPerChoice: 58 });
    const tooLong = { ...request("org-a"), sampling: { ...request("org-a").sampling, maxTokens: 80 } };
    await expect(engine.prepare(tooLong)).rejects.toBeInstanceOf(ContextOverflowError);
    // The detected dialect: vLLM gets a cache salt per organization (and client salt), opaque to it.
    const { error } = await run(engine, request("org-a"));
    expect(error).toBeUndefined();
    await run(engine, { ...request("org-a"), cacheSalt: "tenant-1" });
    await run(engine, request("org-b"));
    const salts = worker.bodies.map((b) => (b as { cache_salt?: unknown }).cache_salt);
    expect(worker.bodies[0]).toMatchObject({
      model: "smol",
      cache_salt: upstreamCacheSalt(request("org-a")),
    });
    expect(salts).toHaveLength(3);
    expect(new Set(salts).size).toBe(3);
    for (const salt of salts) expect(salt).toMatch(/^[0-9a-f]{32}$/);
  });

  it("asks no tokenize route when an estimate will do (no TPM pre-charge); the tokenize route counts exactly", async () => {
    const worker = await startUpstream("good", { hearth: true });
    const engine = await engineFor([worker.url], { kind: "auto" });
    const estimated = await engine.prepare({ ...request("org-a"), exactPromptCount: false });
    expect(estimated.promptTokens).toBe(estimatePromptTokens(request("org-a").messages));
    expect(worker.tokenizeCalls).toBe(0);
    await expect(engine.prepare(request("org-a"))).resolves.toMatchObject({ promptTokens: 42 });
    await expect(engine.countPromptTokens(request("org-a"))).resolves.toEqual({ tokens: 42, exact: true });
    expect(worker.tokenizeCalls).toBe(2);
  });

  it("refuses tools (unless tool_choice is none) when llama-server says its template cannot call them", async () => {
    const output: OutputRequest = {
      format: { type: "text" },
      tools: [{ name: "f", parameters: { type: "object" }, compiledParameters: {} as never }],
      toolChoice: "required",
      parallelToolCalls: true,
    };
    const plain = await startUpstream("good", { llamaToolCalls: false });
    const engine = await engineFor([plain.url], { kind: "auto" });
    const withTools = { ...request("org-a"), output, exactPromptCount: false };
    await expect(engine.prepare(withTools)).rejects.toBeInstanceOf(ToolsUnsupportedError);
    await expect(
      engine.prepare({ ...withTools, output: { ...output, toolChoice: "auto" } }),
    ).rejects.toBeInstanceOf(ToolsUnsupportedError);
    await expect(
      engine.prepare({ ...withTools, output: { ...output, toolChoice: "none" } }),
    ).resolves.toBeDefined();
    await expect(engine.prepare({ ...request("org-a"), exactPromptCount: false })).resolves.toBeDefined();
    const capable = await startUpstream("good", { llamaToolCalls: true });
    const toolEngine = await engineFor([capable.url], { kind: "auto" });
    await expect(toolEngine.prepare(withTools)).resolves.toBeDefined();
  });

  it("estimates the prompt when the endpoint has no tokenize route", async () => {
    const worker = await startUpstream("good");
    const engine = await engineFor([worker.url]);
    const prepared = await engine.prepare(request("org-a"));
    expect(prepared.promptTokens).toBe(estimatePromptTokens(request("org-a").messages));
    expect(prepared.maxTokensPerChoice).toBe(16);
  });

  it("refuses n > 1 before sending it to an engine that generates one choice (Ollama), and sends it elsewhere", async () => {
    const worker = await startUpstream("good");
    const ollama = await engineFor([worker.url], { kind: "ollama" });
    const twoChoices = { ...request("org-a"), n: 2 };
    await expect(ollama.prepare(twoChoices)).rejects.toBeInstanceOf(TooManyChoicesError);
    await expect(ollama.prepare(request("org-a"))).resolves.toBeDefined();
    const vllm = await engineFor([worker.url], { kind: "vllm" });
    await expect(vllm.prepare(twoChoices)).resolves.toBeDefined();
  });

  it("refuses vLLM's sampling extensions (400 naming the field) before sending them to OpenAI or Ollama", async () => {
    const worker = await startUpstream("good");
    const base = request("org-a");
    const cases = [
      ["top_k", { topK: 40 }],
      ["min_p", { minP: 0.1 }],
      ["repetition_penalty", { repetitionPenalty: 1.1 }],
    ] as const;
    for (const kind of ["openai", "ollama"] as const) {
      const engine = await engineFor([worker.url], { kind });
      for (const [field, sampling] of cases) {
        const asked = { ...base, sampling: { ...base.sampling, ...sampling } };
        const err = await engine.prepare(asked).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(SamplingFieldUnsupportedError);
        expect(mapDomainError(err)).toMatchObject({ status: 400, param: field });
        expect((err as Error).message).toContain(`'${field}'`);
      }
      await expect(engine.prepare(base)).resolves.toBeDefined();
    }
    // Each accepting kind on a worker that answers as that engine does (its probes and tokenize route).
    const workers = {
      vllm: await startUpstream("good", { vllm: true }),
      sglang: worker,
      "llama-server": await startUpstream("good", { llamaToolCalls: true }),
      hearth: await startUpstream("good", { hearth: true }),
    };
    for (const kind of ["vllm", "sglang", "llama-server", "hearth"] as const) {
      const engine = await engineFor([workers[kind].url], { kind });
      // An estimated count: these fakes have no tokenize route of the kind's shape.
      const asked = {
        ...base,
        exactPromptCount: false,
        sampling: { ...base.sampling, topK: 40, minP: 0.1, repetitionPenalty: 1.1 },
      };
      await expect(engine.prepare(asked)).resolves.toBeDefined();
    }
  });

  it("drains: refuses new requests at once and resolves when the running ones have ended", async () => {
    const slow = await startUpstream("slow");
    const engine = await engineFor([slow.url]);
    const client = new AbortController();
    const running = await engine.enqueue(await engine.prepare(request("org-a", client.signal)));
    let drained = false;
    const draining = engine.drain().then(() => {
      drained = true;
    });
    await expect(engine.enqueue(await engine.prepare(request("org-b")))).rejects.toBeInstanceOf(
      QueueFullError,
    );
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(drained).toBe(false);
    client.abort();
    const { events } = await collect(running.events);
    expect(events.at(-1)?.type).toBe("usage");
    await draining;
    expect(drained).toBe(true);
  });

  it("drain resolves when the last request ends, not before, and not on a timer", async () => {
    const slow = await startUpstream("slow");
    const engine = await engineFor([slow.url]);
    const first = new AbortController();
    const second = new AbortController();
    const one = await engine.enqueue(await engine.prepare(request("org-a", first.signal)));
    const two = await engine.enqueue(await engine.prepare(request("org-b", second.signal)));
    let drained = false;
    const draining = engine.drain().then(() => {
      drained = true;
    });
    first.abort();
    await collect(one.events);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(drained).toBe(false);
    const ended = new Promise<void>((resolve) =>
      two.events.observe({ value: () => undefined, end: resolve }),
    );
    second.abort();
    await ended;
    // Woken by the stream's end itself: a few promise callbacks later, without a timer or I/O turn between (a
    // poll on a timer could not have noticed yet).
    for (let i = 0; i < 20; i++) await Promise.resolve();
    expect(drained).toBe(true);
    await draining;
    await collect(two.events);
  });

  it("drain resolves at once with nothing in flight, and after a refused request", async () => {
    const busy = await startUpstream("503");
    const engine = await engineFor([busy.url], { maxAttempts: 1 });
    await expect(run(engine, request("org-a"))).rejects.toBeDefined();
    let drained = false;
    void engine.drain().then(() => {
      drained = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    expect(drained).toBe(true);
  });
});
