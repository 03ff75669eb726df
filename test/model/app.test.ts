// The composed app in memory (app.request, no port): readiness, routing errors and headers, real store and engine.
// The same HTTP paths on the fake engine, without the model: test/unit/chat-completions-fake-engine.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defaultModels } from "../../src/config/schema.js";
import type { LlamaEngine } from "../../src/engine/llama/llama-engine.js";
import type { Tenancy } from "../../src/tenancy/tenancy.js";
import { llamaEngine } from "../support/llama-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

let harness: TestApp<LlamaEngine>;
let engine: LlamaEngine;
let app: TestApp<LlamaEngine>["app"];
let apiKey: string;
let tenancy: Tenancy;

beforeAll(async () => {
  harness = await startTestApp({
    engine: llamaEngine,
    models: defaultModels.map((m) => ({ ...m, parallel: 2 })),
  });
  ({ engine, app, apiKey } = harness);
  tenancy = harness.services.tenancy;
});

afterAll(async () => {
  await harness?.close();
});

const chat = (body: unknown) =>
  app.request("/v1/chat/completions", {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("readiness", () => {
  it("answers 503 on /health and on completions until every model is loaded, then 200", async () => {
    const health = await app.request("/health");
    expect(health.status).toBe(503);
    const early = await chat({ model: "smollm2-135m-instruct", messages: [{ role: "user", content: "hi" }] });
    expect(early.status).toBe(503);
    expect(early.headers.get("retry-after")).toBe("1");
    expect(((await early.json()) as { error: { type: string } }).error.type).toBe("server_error");

    await engine.start();
    expect((await app.request("/health")).status).toBe(200);
    const ready = await chat({
      model: "smollm2-135m-instruct",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
    });
    expect(ready.status).toBe(200);
    expect(ready.headers.get("x-request-id")).toMatch(/^req_/);
  });
});

describe("routing errors", () => {
  it("answers unknown routes with a JSON 404 and a request id", async () => {
    const response = await app.request("/nope");
    expect(response.status).toBe(404);
    expect(response.headers.get("x-request-id")).toMatch(/^req_/);
    expect(await response.json()).toEqual({
      error: {
        message: "Unknown request URL: GET /nope.",
        type: "invalid_request_error",
        param: null,
        code: "unknown_url",
      },
    });
  });

  it("answers a wrong method with 405", async () => {
    const response = await app.request("/v1/chat/completions", {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(response.status).toBe(405);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
  });

  it("refuses a body over the limit with 413 before reading it whole", async () => {
    const response = await app.request("/v1/chat/completions", {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: "x".repeat(5 * 1024 * 1024),
    });
    expect(response.status).toBe(413);
  });

  it("answers n above the model's sequences with 400 on param n", async () => {
    const response = await chat({
      model: "smollm2-135m-instruct",
      messages: [{ role: "user", content: "hi" }],
      n: 3,
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { param: string } }).error.param).toBe("n");
  });
});

describe("the default model's sampling defaults (temperature 0.2, top_p 0.9)", () => {
  /** The first token's alternatives (token → logprob) with the request's sampling fields. */
  async function firstAlternatives(fields: Record<string, unknown>): Promise<Map<string, number>> {
    const response = await chat({
      model: "smollm2-135m-instruct",
      messages: [{ role: "user", content: "Tell me a story." }],
      max_tokens: 1,
      logprobs: true,
      top_logprobs: 5,
      seed: 1,
      ...fields,
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as {
      choices: { logprobs: { content: { top_logprobs: { token: string; logprob: number }[] }[] } }[];
    };
    const top = body.choices[0]?.logprobs.content[0]?.top_logprobs ?? [];
    return new Map(top.filter((t) => t.logprob > -9999).map((t) => [t.token, t.logprob]));
  }

  it("apply when the request leaves temperature and top_p out, and not when it sets them", async () => {
    // Logprobs are those of the real draw: softmax(logits / T) over what top_p keeps, so the gap between two
    // tokens' logprobs is their logit gap divided by the temperature the engine sampled with.
    const defaulted = await firstAlternatives({});
    const explicit = await firstAlternatives({ temperature: 1, top_p: 1 });
    const [first, second] = [...defaulted.keys()];
    expect(second, "two tokens kept at the defaults").toBeDefined();
    const gap = (m: Map<string, number>) => (m.get(first as string) ?? 0) - (m.get(second as string) ?? 0);
    expect(gap(explicit)).toBeGreaterThan(0.05);
    expect(gap(defaulted) / gap(explicit)).toBeCloseTo(1 / 0.2, 1);
    // The request's temperature wins over the default one; top_p stays the model's.
    const warmer = await firstAlternatives({ temperature: 0.5 });
    expect(gap(warmer) / gap(explicit)).toBeCloseTo(1 / 0.5, 1);
  });
});

/** A sample's value from the exposition text; labels must match exactly the ones given (in any order). */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await app.request("/metrics")).text();
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(",");
  for (const line of text.split("\n")) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const got = (match[2] ?? "").split(",").filter(Boolean).sort().join(",");
    if (got === wanted) return Number(match[3]);
  }
  return 0;
}

describe("/metrics", () => {
  const MODEL = "smollm2-135m-instruct";

  it("counts what the responses reported: requests, tokens, first-token and inter-token latencies, 429s", async () => {
    const before = {
      ok: await metric("hearth_requests_total", { model: MODEL, status: "200" }),
      prompt: await metric("hearth_prompt_tokens_total", { model: MODEL }),
      completion: await metric("hearth_completion_tokens_total", { model: MODEL }),
      cached: await metric("hearth_cached_prompt_tokens_total", { model: MODEL }),
      ttft: await metric("hearth_time_to_first_token_seconds_count", { model: MODEL }),
      itl: await metric("hearth_inter_token_latency_seconds_count", { model: MODEL }),
    };
    const body = {
      model: MODEL,
      messages: [
        { role: "system", content: "You are a helpful assistant." },
        { role: "user", content: "Count from one to twenty." },
      ],
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    };
    const reported = { prompt: 0, completion: 0, cached: 0, deltas: 0 };
    for (let i = 0; i < 2; i++) {
      const response = await chat(body);
      expect(response.status).toBe(200);
      for (const line of (await response.text()).split("\n")) {
        if (!line.startsWith("data: {")) continue;
        const chunk = JSON.parse(line.slice(6)) as {
          choices: { delta: { content?: string } }[];
          usage?: {
            prompt_tokens: number;
            completion_tokens: number;
            prompt_tokens_details: { cached_tokens: number };
          } | null;
        };
        if (chunk.choices[0]?.delta.content) reported.deltas++;
        if (chunk.usage) {
          reported.prompt += chunk.usage.prompt_tokens;
          reported.completion += chunk.usage.completion_tokens;
          reported.cached += chunk.usage.prompt_tokens_details.cached_tokens;
        }
      }
    }
    // Metrics are recorded when the engine's events end, which may be just after the response's last byte.
    for (let i = 0; i < 100; i++) {
      if ((await metric("hearth_time_to_first_token_seconds_count", { model: MODEL })) === before.ttft + 2)
        break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(reported.completion).toBeGreaterThan(0);
    expect(reported.cached).toBeGreaterThan(0); // the second request reuses the first one's prompt
    expect(await metric("hearth_requests_total", { model: MODEL, status: "200" })).toBe(before.ok + 2);
    expect(await metric("hearth_prompt_tokens_total", { model: MODEL })).toBe(
      before.prompt + reported.prompt,
    );
    expect(await metric("hearth_completion_tokens_total", { model: MODEL })).toBe(
      before.completion + reported.completion,
    );
    expect(await metric("hearth_cached_prompt_tokens_total", { model: MODEL })).toBe(
      before.cached + reported.cached,
    );
    expect(await metric("hearth_time_to_first_token_seconds_count", { model: MODEL })).toBe(before.ttft + 2);
    // One gap between consecutive deltas of a stream: at least one per content chunk after the first.
    expect(await metric("hearth_inter_token_latency_seconds_count", { model: MODEL })).toBeGreaterThanOrEqual(
      before.itl + reported.deltas - 2,
    );

    const limitedBefore = await metric("hearth_rate_limited_total");
    await tenancy.orgs.setLimits("default", { rpm: 1 });
    try {
      const statuses = [];
      for (let i = 0; i < 2; i++)
        statuses.push((await chat({ model: MODEL, messages: body.messages, max_tokens: 1 })).status);
      expect(statuses).toEqual([200, 429]);
      expect(await metric("hearth_rate_limited_total")).toBe(limitedBefore + 1);
      // Counted before the body is read (nothing is spent on a request over the limit), so no model is known.
      expect(await metric("hearth_requests_total", { model: "unknown", status: "429" })).toBe(1);
    } finally {
      await tenancy.orgs.setLimits("default", { rpm: 0 });
    }
  });
});
