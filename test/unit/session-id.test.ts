// The X-Session-Id header at the edge: passed down as the request's session id (an affinity key for upstream
// models), on chat completions and responses; empty is none; over-long is a 400 in OpenAI's shape, never a 500.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_SESSION_ID_CHARS } from "../../src/http/session-id.js";
import { FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

let harness: TestApp<FakeEngine>;

beforeAll(async () => {
  harness = await startTestApp({ models: [{ id: FAKE_MODEL }] });
});

afterAll(async () => {
  await harness?.close();
});

const chatBody = { model: FAKE_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 };

function chat(sessionId: string | undefined): Promise<Response> {
  return harness.chat(chatBody, undefined, {
    headers: sessionId === undefined ? {} : { "X-Session-Id": sessionId },
  });
}

function responses(sessionId: string): Promise<Response> {
  return Promise.resolve(
    harness.app.request("/v1/responses", {
      method: "POST",
      headers: {
        authorization: `Bearer ${harness.apiKey}`,
        "content-type": "application/json",
        "x-session-id": sessionId,
      },
      body: JSON.stringify({ model: FAKE_MODEL, input: "Hi", max_output_tokens: 4 }),
    }),
  );
}

const lastSessionId = () => harness.engine.requests.at(-1)?.sessionId;

describe("X-Session-Id", () => {
  it("reaches the engine's request on chat completions and responses; absent or empty is none", async () => {
    const answered = await chat("conversation-7");
    expect(answered.status, await answered.text()).toBe(200);
    expect(lastSessionId()).toBe("conversation-7");
    await (await chat(undefined)).text();
    expect(lastSessionId()).toBeUndefined();
    await (await chat("  ")).text();
    expect(lastSessionId()).toBeUndefined();
    const response = await responses("conversation-8");
    expect(response.status, await response.text()).toBe(200);
    expect(lastSessionId()).toBe("conversation-8");
  });

  it("refuses one longer than the bound with a 400 naming the header, before the engine sees it", async () => {
    const before = harness.engine.requests.length;
    await (await chat("x".repeat(MAX_SESSION_ID_CHARS))).text();
    expect(lastSessionId()).toHaveLength(MAX_SESSION_ID_CHARS);
    for (const response of [
      await chat("x".repeat(MAX_SESSION_ID_CHARS + 1)),
      await responses("y".repeat(5_000)),
    ]) {
      expect(response.status).toBe(400);
      const { error } = (await response.json()) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ type: "invalid_request_error", param: "X-Session-Id" });
      expect(String(error.message)).toContain(`at most ${MAX_SESSION_ID_CHARS}`);
    }
    expect(harness.engine.requests.length).toBe(before + 1);
  });
});
