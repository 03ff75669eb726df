// The whole app in memory on the fake engine (no model): auth, /v1/chat/completions streamed and not, 400/404/429/503
// before the 200, errors after it, usage records and metrics. The same paths on the real model: test/integration/
// app.test.ts, test/conformance.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UsageRecordRow } from "../../src/store/schema.js";
import {
  callTool,
  DEFAULT_REPLY,
  FAKE_MODEL,
  type FakeEngine,
  fail,
  fakePromptTokens,
  finish,
  gate,
  say,
  think,
  waitFor,
} from "../support/fake-engine.js";
import { startTestApp, type TestApp, usageRecordOf } from "../support/test-app.js";

/** One sequence and no queue: a second request while one runs is refused at once. */
const SINGLE = "single";
/** One sequence, one queue place, a short queue timeout. */
const QUEUED = "queued";
/** The smallest context the config allows. */
const SMALL = "small";

let harness: TestApp<FakeEngine>;
let engine: FakeEngine;

beforeAll(async () => {
  harness = await startTestApp({
    models: [
      { id: FAKE_MODEL },
      { id: SINGLE, parallel: 1, maxQueue: 0 },
      { id: QUEUED, parallel: 1, maxQueue: 1, queueTimeoutMs: 50 },
      { id: SMALL, contextSize: 128 },
    ],
  });
  engine = harness.engine;
});

afterAll(async () => {
  await harness?.close();
});

const messages = [{ role: "user", content: "Say hello." }];
const body = (overrides: Record<string, unknown> = {}) => ({ model: FAKE_MODEL, messages, ...overrides });
const PROMPT_TOKENS = fakePromptTokens({ messages: [{ role: "user", content: "Say hello." }] });

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

// biome-ignore lint/suspicious/noExplicitAny: chunks and bodies are checked field by field
type Json = any;

/** The data frames of an SSE body, parsed (the [DONE] terminator as the string). */
async function frames(response: Response): Promise<Json[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((frame) => frame.startsWith("data: "))
    .map((frame) => (frame === "data: [DONE]" ? "[DONE]" : JSON.parse(frame.slice(6))));
}

/** Resolves once the model's sequences are all busy (a request is generating, so the next one must wait). */
async function busy(model: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const load = engine.modelLoad().find((l) => l.model === model);
    if (load !== undefined && load.busySequences === load.parallel) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`${model} never got busy`);
}

/** The request's usage record, once the meter has written it. */
async function usageRecord(requestId: string | null): Promise<UsageRecordRow> {
  expect(requestId).toMatch(/^req_/);
  return usageRecordOf(harness, requestId ?? "");
}

/** A sample from /metrics; labels must match exactly (in any order). */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await harness.app.request("/metrics")).text();
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(",");
  for (const line of text.split("\n")) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    if ((match[2] ?? "").split(",").filter(Boolean).sort().join(",") === wanted) return Number(match[3]);
  }
  return 0;
}

describe("authentication", () => {
  it("answers 401 without a key or with a wrong one, and 200 with the bootstrap key", async () => {
    const missing = await harness.app.request("/v1/chat/completions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body()),
    });
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as ErrorJson).error.code).toBe("invalid_api_key");
    expect((await harness.chat(body(), `sk-${"x".repeat(43)}`)).status).toBe(401);
    expect((await harness.chat(body())).status).toBe(200);
  });
});

describe("POST /v1/chat/completions", () => {
  it("answers one JSON body with the reply and its usage", async () => {
    const response = await harness.chat(body());
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toMatch(/^req_/);
    const completion = (await response.json()) as Json;
    expect(completion).toMatchObject({
      object: "chat.completion",
      model: FAKE_MODEL,
      choices: [{ index: 0, message: { role: "assistant", content: DEFAULT_REPLY }, finish_reason: "stop" }],
      usage: {
        prompt_tokens: PROMPT_TOKENS,
        completion_tokens: 6,
        total_tokens: PROMPT_TOKENS + 6,
        prompt_tokens_details: { cached_tokens: 0 },
        completion_tokens_details: { reasoning_tokens: 0 },
      },
    });
    expect(completion.id).toMatch(/^chatcmpl-/);
  });

  it("streams chunks, the usage chunk on request and [DONE]", async () => {
    engine.replyOnce({ steps: say("Hi there!"), usage: { cachedTokens: 2 } });
    const response = await harness.chat(body({ stream: true, stream_options: { include_usage: true } }));
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const chunks = await frames(response);
    expect(chunks.at(-1)).toBe("[DONE]");
    const data = chunks.slice(0, -1);
    expect(data[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
    expect(data.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Hi there!");
    const finishing = data.find((c) => c.choices[0]?.finish_reason !== null && c.choices.length > 0);
    expect(finishing.choices[0].finish_reason).toBe("stop");
    expect(data.at(-1)).toMatchObject({
      choices: [],
      usage: {
        prompt_tokens: PROMPT_TOKENS,
        completion_tokens: 3,
        prompt_tokens_details: { cached_tokens: 2 },
      },
    });
    expect(data.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it("ends a choice at max_tokens with finish_reason length", async () => {
    const completion = (await (await harness.chat(body({ max_tokens: 2 }))).json()) as Json;
    expect(completion.choices[0]).toMatchObject({
      message: { content: "Hello from" },
      finish_reason: "length",
    });
    expect(completion.usage.completion_tokens).toBe(2);
  });

  it("answers n choices", async () => {
    const completion = (await (await harness.chat(body({ n: 2 }))).json()) as Json;
    expect(completion.choices.map((c: Json) => c.message.content)).toEqual([DEFAULT_REPLY, DEFAULT_REPLY]);
    expect(completion.usage.completion_tokens).toBe(12);
  });

  it("puts reasoning and tool calls where they belong, streamed and not", async () => {
    const steps = [
      ...think("Weather."),
      ...callTool(0, "get_weather", '{"city":"Paris"}'),
      finish("tool_calls"),
    ];
    const tools = [
      {
        type: "function",
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    engine.replyOnce({ steps }, { steps });
    const completion = (await (await harness.chat(body({ tools }))).json()) as Json;
    expect(completion.choices[0].finish_reason).toBe("tool_calls");
    expect(completion.choices[0].message.tool_calls).toEqual([
      {
        id: expect.any(String),
        type: "function",
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
      },
    ]);
    expect(completion.choices[0].message.content ?? "").not.toContain("Weather");

    const chunks = (await frames(await harness.chat(body({ tools, stream: true })))).slice(0, -1);
    const calls = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(calls[0]).toMatchObject({ index: 0, type: "function", function: { name: "get_weather" } });
    expect(calls.map((c: Json) => c.function?.arguments ?? "").join("")).toBe('{"city":"Paris"}');
    expect(chunks.at(-1).choices[0].finish_reason).toBe("tool_calls");
  });

  it("passes the org as the cache scope and a seed to the engine", async () => {
    await harness.chat(body({ seed: 42 }));
    const request = engine.requests.at(-1);
    const org = await harness.services.tenancy.orgs.getByName("default");
    expect(request?.cacheScope).toBe(org?.id);
    expect(request?.sampling.seed).toBe(42);
  });
});

describe("refusals before the 200", () => {
  it("answers a prompt beyond the context with 400 context_length_exceeded", async () => {
    const response = await harness.chat(body({ model: SMALL, max_tokens: 200 }));
    expect(response.status).toBe(400);
    expect(((await response.json()) as ErrorJson).error).toMatchObject({
      code: "context_length_exceeded",
      param: "messages",
    });
  });

  it("answers an unknown model with 404 model_not_found", async () => {
    const response = await harness.chat(body({ model: "no-such-model" }));
    expect(response.status).toBe(404);
    expect(((await response.json()) as ErrorJson).error).toMatchObject({
      code: "model_not_found",
      param: "model",
    });
  });

  it("answers 429 with retry headers once the org's requests per minute are spent", async () => {
    await harness.services.tenancy.orgs.create("limited", [FAKE_MODEL], { rpm: 1 });
    const { key } = await harness.services.tenancy.keys.create("limited");
    const limitedBefore = await metric("hearth_rate_limited_total");
    const admitted = await harness.chat(body(), key);
    expect(admitted.status).toBe(200);
    expect(admitted.headers.get("x-ratelimit-limit-requests")).toBe("1");
    expect(admitted.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    const refused = await harness.chat(body({ stream: true }), key);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as ErrorJson).error.code).toBe("rate_limit_exceeded");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers.get("retry-after-ms"))).toBeGreaterThanOrEqual(1);
    expect(await metric("hearth_rate_limited_total")).toBe(limitedBefore + 1);
  });

  it("answers 503 engine_overloaded while every sequence is busy and the queue is full", async () => {
    const held = gate();
    engine.replyOnce({ steps: [...say("held").slice(0, 1), waitFor(held.opened), finish("stop")] });
    const running = await harness.chat(body({ model: SINGLE, stream: true }));
    expect(running.status).toBe(200);
    const refused = await harness.chat(body({ model: SINGLE }));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as ErrorJson).error).toMatchObject({
      type: "server_error",
      code: "engine_overloaded",
    });
    held.open();
    expect((await frames(running)).at(-1)).toBe("[DONE]");
    expect((await harness.chat(body({ model: SINGLE }))).status).toBe(200);
  });

  it("answers 503 when a queued request times out, and gives the rate-limit charge back", async () => {
    const held = gate();
    engine.replyOnce({ steps: [waitFor(held.opened), ...say("late")] });
    const running = harness.chat(body({ model: QUEUED }));
    await busy(QUEUED);
    const timedOut = await harness.chat(body({ model: QUEUED }));
    expect(timedOut.status).toBe(503);
    expect(((await timedOut.json()) as ErrorJson).error.message).toContain("waited 50 ms");
    held.open();
    expect((await running).status).toBe(200);
  });

  it("answers 503 while the models are loading", async () => {
    engine.setReady(false);
    try {
      const response = await harness.chat(body());
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("1");
      expect((await harness.app.request("/health")).status).toBe(503);
    } finally {
      engine.setReady(true);
    }
    expect((await harness.app.request("/health")).status).toBe(200);
  });
});

describe("after the 200", () => {
  it("reports an engine failure mid-stream as an error frame, and records the request as an error", async () => {
    engine.replyOnce({ steps: [...say("partial").slice(0, 1), fail(new Error("decode failed"))] });
    const response = await harness.chat(body({ stream: true }));
    expect(response.status).toBe(200);
    const chunks = await frames(response);
    expect(chunks.at(-1)).toBe("[DONE]");
    expect(chunks.at(-2)).toEqual({
      error: { message: expect.any(String), type: "server_error", param: null, code: "server_error" },
    });
    expect((await usageRecord(response.headers.get("x-request-id"))).status).toBe("error");
  });

  it("records each completed request with the tokens its response reported", async () => {
    const response = await harness.chat(body());
    const completion = (await response.json()) as Json;
    expect(await usageRecord(response.headers.get("x-request-id"))).toMatchObject({
      status: "completed",
      model: FAKE_MODEL,
      promptTokens: completion.usage.prompt_tokens,
      completionTokens: completion.usage.completion_tokens,
      cachedTokens: 0,
    });
  });

  it("records a stream the client left with the tokens generated until then", async () => {
    const held = gate();
    engine.replyOnce({ steps: [...say("one two").slice(0, 2), waitFor(held.opened), ...say("never")] });
    const controller = new AbortController();
    const response = await harness.chat(body({ stream: true }), undefined, { signal: controller.signal });
    expect(response.status).toBe(200);
    const reader = response.body?.getReader();
    let text = "";
    while (!text.includes(" two")) text += new TextDecoder().decode((await reader?.read())?.value);
    controller.abort();
    await reader?.cancel().catch(() => {});
    const record = await usageRecord(response.headers.get("x-request-id"));
    expect(record).toMatchObject({ status: "aborted", completionTokens: 2, promptTokens: PROMPT_TOKENS });
    held.open();
  });
});

describe("/metrics", () => {
  it("counts requests, tokens and first-token latencies as the responses reported them", async () => {
    const labels = { model: FAKE_MODEL };
    const before = {
      ok: await metric("hearth_requests_total", { ...labels, status: "200" }),
      prompt: await metric("hearth_prompt_tokens_total", labels),
      completion: await metric("hearth_completion_tokens_total", labels),
      ttft: await metric("hearth_time_to_first_token_seconds_count", labels),
    };
    const usage = { prompt: 0, completion: 0 };
    for (const stream of [false, true]) {
      const response = await harness.chat(
        body({ stream, stream_options: stream ? { include_usage: true } : undefined }),
      );
      const reported = stream
        ? (await frames(response)).at(-2).usage
        : ((await response.json()) as Json).usage;
      usage.prompt += reported.prompt_tokens;
      usage.completion += reported.completion_tokens;
    }
    await harness.services.accounting.settled();
    expect(await metric("hearth_requests_total", { ...labels, status: "200" })).toBe(before.ok + 2);
    expect(await metric("hearth_prompt_tokens_total", labels)).toBe(before.prompt + usage.prompt);
    expect(await metric("hearth_completion_tokens_total", labels)).toBe(before.completion + usage.completion);
    expect(await metric("hearth_time_to_first_token_seconds_count", labels)).toBe(before.ttft + 2);
  });

  it("shows the engine's sequences and queue", async () => {
    const held = gate();
    engine.replyOnce({ steps: [waitFor(held.opened), ...say("done")] });
    const running = harness.chat(body({ model: SINGLE }));
    await busy(SINGLE);
    expect(await metric("hearth_busy_sequences", { model: SINGLE })).toBe(1);
    held.open();
    expect((await running).status).toBe(200);
  });
});
