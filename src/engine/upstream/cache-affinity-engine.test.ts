// Cache-aware routing through the upstream engine, against stand-in endpoints with a prefix cache of their own:
// each remembers the conversations it evaluated and reports cached_tokens for them, forgets them when "restarted",
// and can go down (its probes and completions fail) and come back.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { generationRequest } from "../../../test/support/generation-request.js";
import type { UpstreamModelConfig } from "../../config/schema.js";
import type { GenerationRequest, ModelHealth } from "../types.js";
import { MIN_HIT_TOKENS } from "./cache-affinity.js";
import { affinityKey, chooseEndpoint } from "./routing.js";
import { type RepinEvent, UpstreamEngine } from "./upstream-engine.js";

const PROMPT_TOKENS = 200;
const CACHED_TOKENS = 160;

/** A stand-in endpoint whose prefix cache is a set of conversation beginnings. */
interface CachingUpstream {
  url: string;
  /** Conversation beginnings (system + first user message) it has evaluated. */
  cache: Set<string>;
  /** Completions it served. */
  served: number;
  /** While true, every request (probes too) answers 500: an endpoint that is down. */
  down: boolean;
  server: Server;
}

/** What each test started, stopped after it (last started first). */
const started: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

function frame(body: Record<string, unknown>): string {
  return `data: ${JSON.stringify({ id: "up", object: "chat.completion.chunk", created: 1, model: "smol", ...body })}\n\n`;
}

async function startCachingUpstream(): Promise<CachingUpstream> {
  const upstream = { cache: new Set<string>(), served: 0, down: false } as unknown as CachingUpstream;
  upstream.server = createServer(async (req, res) => {
    let raw = "";
    for await (const part of req) raw += String(part);
    if (upstream.down) {
      res.writeHead(500).end();
      return;
    }
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "smol", object: "model" }] }));
      return;
    }
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    upstream.served++;
    const { messages } = JSON.parse(raw) as { messages: unknown[] };
    const beginning = JSON.stringify(messages.slice(0, 2));
    const cached = upstream.cache.has(beginning) ? CACHED_TOKENS : 0;
    upstream.cache.add(beginning);
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(
      frame({ choices: [{ index: 0, delta: { role: "assistant", content: "Hi" }, finish_reason: null }] }),
    );
    res.write(frame({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }));
    const usage = {
      prompt_tokens: PROMPT_TOKENS,
      completion_tokens: 1,
      total_tokens: PROMPT_TOKENS + 1,
      prompt_tokens_details: { cached_tokens: cached },
    };
    res.write(frame({ choices: [], usage }));
    res.end("data: [DONE]\n\n");
  });
  await new Promise<void>((resolve) => upstream.server.listen(0, "127.0.0.1", resolve));
  upstream.url = `http://127.0.0.1:${(upstream.server.address() as AddressInfo).port}/v1`;
  started.push(async () => {
    upstream.server.closeAllConnections();
    await new Promise((resolve) => upstream.server.close(resolve));
  });
  return upstream;
}

async function fleet(count: number, extra: Partial<UpstreamModelConfig["upstream"]> = {}) {
  const upstreams = await Promise.all(Array.from({ length: count }, startCachingUpstream));
  const repins: RepinEvent[] = [];
  const config: UpstreamModelConfig = {
    id: "fleet",
    upstream: {
      model: "smol",
      endpoints: upstreams.map((u) => ({ url: u.url, apiKey: undefined })),
      maxInFlight: 4,
      maxQueue: 8,
      queueTimeoutMs: 2_000,
      kind: "openai",
      probeIntervalMs: 100,
      firstTokenTimeoutMs: 2_000,
      maxAttempts: 3,
      affinity: true,
      affinityKeys: 100,
      ...extra,
    },
  };
  const engine = new UpstreamEngine({ models: [config], onRepin: (e) => repins.push(e) });
  started.push(() => engine.dispose());
  await engine.start();
  return { engine, upstreams, repins };
}

function conversation(org: string, question: string, extra: Partial<GenerationRequest> = {}) {
  return generationRequest("fleet", {
    messages: [
      { role: "system", content: "You are the assistant of a bakery." },
      { role: "user", content: question },
    ],
    cacheScope: org,
    ...extra,
  });
}

/** Runs a request to its end; resolves with the cached tokens its usage reported. */
async function cachedTokensOf(engine: UpstreamEngine, request: GenerationRequest): Promise<number> {
  const generation = await engine.enqueue(await engine.prepare(request));
  let cached = -1;
  for await (const event of generation.events) if (event.type === "usage") cached = event.usage.cachedTokens;
  return cached;
}

/** An organization whose conversation the rendezvous ranking sends to endpoint `index` first. */
function orgRankedFirstOn(engine: UpstreamEngine, index: number, question: string): string {
  const endpoints = engine.pools()[0]?.endpoints ?? [];
  for (let i = 0; i < 1000; i++) {
    const org = `org-${i}`;
    const { messages } = conversation(org, question);
    if (chooseEndpoint(endpoints, affinityKey(org, messages)) === index) return org;
  }
  throw new Error(`no organization ranks endpoint ${index} first`);
}

const health = (engine: UpstreamEngine): ModelHealth => engine.health()[0] as ModelHealth;

async function until(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("cache-aware routing", () => {
  it("keeps a conversation on the endpoint that holds its cache after a fail-over, not on its cold first choice", async () => {
    const { engine, upstreams, repins } = await fleet(2);
    const [first, second] = upstreams as [CachingUpstream, CachingUpstream];
    const org = orgRankedFirstOn(engine, 0, "Do you sell rye?");
    const ask = () => cachedTokensOf(engine, conversation(org, "Do you sell rye?"));
    expect(await ask()).toBe(0);
    expect(await ask()).toBe(CACHED_TOKENS);
    expect([first.served, second.served]).toEqual([2, 0]);

    // Its endpoint goes down: the conversation moves to the next one (cold there), which now holds its cache.
    first.down = true;
    await until("the first endpoint to be ejected", () => !health(engine).endpoints?.[0]?.healthy);
    expect(await ask()).toBe(0);
    expect(repins).toEqual([{ model: "fleet", endpoint: 1, reason: "endpoint_down" }]);
    expect(await ask()).toBe(CACHED_TOKENS);

    // It comes back, restarted with an empty cache: the rendezvous ranking alone would send the conversation back
    // there (a miss); its pin keeps it where its prefix is cached.
    first.cache.clear();
    first.down = false;
    await until(
      "the first endpoint to be re-admitted",
      () => health(engine).endpoints?.[0]?.healthy === true,
    );
    expect(await ask()).toBe(CACHED_TOKENS);
    expect([first.served, second.served]).toEqual([2, 3]);
    const { endpoints, repins: counted } = health(engine);
    expect(endpoints?.map((e) => [e.promptTokens, e.cachedTokens])).toEqual([
      [2 * PROMPT_TOKENS, CACHED_TOKENS],
      [3 * PROMPT_TOKENS, 2 * CACHED_TOKENS],
    ]);
    expect(counted).toEqual({ cache_lost: 0, endpoint_down: 1, endpoint_busy: 0 });
  });

  it("counts a lost cache on a healthy endpoint and keeps the conversation there (it is warm again)", async () => {
    const { engine, upstreams, repins } = await fleet(2);
    const org = orgRankedFirstOn(engine, 1, "When do you open?");
    const ask = () => cachedTokensOf(engine, conversation(org, "When do you open?"));
    await ask();
    expect(await ask()).toBeGreaterThanOrEqual(MIN_HIT_TOKENS);
    // Evicted (or restarted between two probes): the next request misses where a hit was expected.
    upstreams[1]?.cache.clear();
    expect(await ask()).toBe(0);
    expect(repins).toEqual([{ model: "fleet", endpoint: 1, reason: "cache_lost" }]);
    expect(await ask()).toBe(CACHED_TOKENS);
    expect(upstreams.map((u) => u.served)).toEqual([0, 4]);
    expect(health(engine).repins).toEqual({ cache_lost: 1, endpoint_down: 0, endpoint_busy: 0 });
  });

  it("sends an X-Session-Id's different prompts to one endpoint; prompt_cache_key wins over it", async () => {
    const { engine, upstreams } = await fleet(3);
    const questions = Array.from({ length: 12 }, (_, i) => `Question number ${i}?`);
    for (const q of questions) await cachedTokensOf(engine, conversation("org-a", q, { sessionId: "s-1" }));
    expect(upstreams.map((u) => u.served).sort()).toEqual([0, 0, 12]);
    // Without the session, the same prompts spread over the endpoints by their beginnings.
    for (const q of questions) await cachedTokensOf(engine, conversation("org-a", q));
    expect(upstreams.filter((u) => u.served > 0).length).toBeGreaterThan(1);
    // One prompt_cache_key across sessions: one endpoint.
    const before = upstreams.map((u) => u.served);
    for (const [i, q] of questions.entries()) {
      await cachedTokensOf(engine, conversation("org-a", q, { promptCacheKey: "k", sessionId: `s-${i}` }));
    }
    expect(upstreams.filter((u, i) => u.served > (before[i] ?? 0)).length).toBe(1);
  });

  it("with affinity off, routes by load alone and still counts each endpoint's hit rate", async () => {
    const { engine, upstreams } = await fleet(2, { affinity: false });
    const org = orgRankedFirstOn(engine, 1, "Any cakes?");
    for (let i = 0; i < 3; i++) await cachedTokensOf(engine, conversation(org, "Any cakes?"));
    // Idle endpoints tie: the first one, whatever the ranking says.
    expect(upstreams.map((u) => u.served)).toEqual([3, 0]);
    expect(health(engine).endpoints?.[0]).toMatchObject({
      promptTokens: 3 * PROMPT_TOKENS,
      cachedTokens: 2 * CACHED_TOKENS,
    });
    expect(health(engine).repins).toEqual({ cache_lost: 0, endpoint_down: 0, endpoint_busy: 0 });
  });
});
