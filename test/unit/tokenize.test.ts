// POST /tokenize on the fake engine: a chat completion's body in, vLLM's `count` and `max_model_len` out; the same
// key, grant, validation and RPM rules as a chat completion, and nothing generated. The real model's count is
// checked against its completions' usage in test/conformance/chat-completions.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_MODEL, type FakeEngine, fakePromptTokens } from "../support/fake-engine.js";
import { generationRequest } from "../support/generation-request.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

let harness: TestApp<FakeEngine>;

beforeAll(async () => {
  harness = await startTestApp({ models: [{ id: FAKE_MODEL, contextSize: 2048 }, { id: "other" }] });
});

afterAll(async () => {
  await harness?.close();
});

const messages = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "What is the capital of France?" },
];

async function post(body: unknown, key = harness.apiKey): Promise<Response> {
  return harness.app.request("/tokenize", {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

describe("POST /tokenize", () => {
  it("counts the prompt as the engine does, with the model's context; generates nothing", async () => {
    const before = harness.engine.requests.length;
    const response = await post({ model: FAKE_MODEL, messages, add_generation_prompt: true });
    expect(response.status).toBe(200);
    const expected = fakePromptTokens(
      generationRequest(FAKE_MODEL, {
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "What is the capital of France?" },
        ],
      }),
    );
    expect(await response.json()).toEqual({ count: expected, max_model_len: 2048 });
    // prepare() was not called: nothing was queued or generated.
    expect(harness.engine.requests.length).toBe(before);
  });

  it("takes a whole chat completion body (streaming fields and sampling included)", async () => {
    const response = await post({
      model: FAKE_MODEL,
      messages,
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      max_tokens: 16,
    });
    expect(response.status).toBe(200);
  });

  it("refuses what a chat completion refuses, and add_generation_prompt other than true", async () => {
    const unknown = await post({ model: FAKE_MODEL, messages, frobnicate: 1 });
    expect(unknown.status).toBe(400);
    const noMessages = await post({ model: FAKE_MODEL });
    expect(noMessages.status).toBe(400);
    expect(((await noMessages.json()) as ErrorJson).error.param).toBe("messages");
    const noPrompt = await post({ model: FAKE_MODEL, messages, add_generation_prompt: false });
    expect(noPrompt.status).toBe(400);
    expect(((await noPrompt.json()) as ErrorJson).error.param).toBe("add_generation_prompt");
    const notJson = await harness.app.request("/tokenize", {
      method: "POST",
      headers: { authorization: `Bearer ${harness.apiKey}` },
      body: "{not json",
    });
    expect(notJson.status).toBe(400);
  });

  it("needs a key (401) and a model the organization is granted (404)", async () => {
    const anonymous = await harness.app.request("/tokenize", {
      method: "POST",
      body: JSON.stringify({ model: FAKE_MODEL, messages }),
    });
    expect(anonymous.status).toBe(401);
    await harness.services.tenancy.orgs.create("narrow", [FAKE_MODEL]);
    const { key } = await harness.services.tenancy.keys.create("narrow");
    const ungranted = await post({ model: "other", messages }, key);
    expect(ungranted.status).toBe(404);
    expect(((await ungranted.json()) as ErrorJson).error.code).toBe("model_not_found");
    const missing = await post({ model: "nope", messages }, key);
    expect(missing.status).toBe(404);
  });

  it("counts against the key's requests per minute, as a chat completion does", async () => {
    await harness.services.tenancy.orgs.create("limited", [FAKE_MODEL], { rpm: 2 });
    const { key } = await harness.services.tenancy.keys.create("limited");
    expect((await post({ model: FAKE_MODEL, messages }, key)).status).toBe(200);
    expect((await post({ model: FAKE_MODEL, messages }, key)).status).toBe(200);
    const refused = await post({ model: FAKE_MODEL, messages }, key);
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as ErrorJson).error.code).toBe("rate_limit_exceeded");
  });

  it("refuses a declared body over the limit with 413 before authenticating it", async () => {
    const response = await harness.app.request("/tokenize", {
      method: "POST",
      headers: { "content-length": String(harness.config.server.maxBodyBytes + 1) },
      body: "x",
    });
    expect(response.status).toBe(413);
  });
});
