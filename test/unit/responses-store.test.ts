// POST /v1/responses with the store (PGlite, in memory app): store true and false, previous_response_id rebuilding
// the conversation, another organization's id answered as unknown, chain bounds, and a store that fails to save.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { GenerationRequest } from "../../src/engine/types.js";
import { ResponseChainTooLargeError } from "../../src/responses/types.js";
import { callTool, FAKE_MODEL, type FakeEngine, finish, say } from "../support/fake-engine.js";
import { startTestApp, type TestApp, usageRecordOf } from "../support/test-app.js";

let harness: TestApp<FakeEngine>;
let engine: FakeEngine;
let orgId: string;

beforeAll(async () => {
  harness = await startTestApp();
  engine = harness.engine;
  const org = (await harness.services.tenancy.orgs.list()).find((o) => o.name === "default");
  if (org === undefined) throw new Error("no default org");
  orgId = org.id;
});

afterAll(async () => {
  await harness?.close();
});

afterEach(() => {
  vi.restoreAllMocks();
});

// biome-ignore lint/suspicious/noExplicitAny: bodies are checked field by field
type Json = any;

function post(body: Record<string, unknown>, key = harness.apiKey): Promise<Response> {
  return Promise.resolve(
    harness.app.request("/v1/responses", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: FAKE_MODEL, ...body }),
    }),
  );
}

async function create(body: Record<string, unknown>): Promise<Json> {
  const response = await post(body);
  const json = await response.json();
  expect(response.status, JSON.stringify(json)).toBe(200);
  return json;
}

function lastRequest(): GenerationRequest {
  const request = engine.requests.at(-1);
  if (request === undefined) throw new Error("no engine request");
  return request;
}

describe("store", () => {
  it("keeps a response by default: its input items with ids, and the response object as answered", async () => {
    engine.replyOnce({ steps: say("Hello Ada.") });
    const response = await create({ instructions: "Be kind.", input: "I am Ada.", metadata: { k: "v" } });
    expect(response.store).toBe(true);
    const stored = await harness.services.responses.get(orgId, response.id);
    expect(stored?.response).toEqual(response);
    expect(stored?.inputItems).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        role: "user",
        status: "completed",
        content: [{ type: "input_text", text: "I am Ada." }],
      },
    ]);
  });

  it("keeps nothing with store false", async () => {
    const response = await create({ input: "Forget me.", store: false });
    expect(response.store).toBe(false);
    expect(await harness.services.responses.get(orgId, response.id)).toBeUndefined();
  });

  it("stores a streamed response once it completes, and says so in response.completed", async () => {
    const response = await post({ input: "Stream it.", stream: true });
    const text = await response.text();
    const completed = JSON.parse(
      text
        .split("\n\n")
        .find((f) => f.startsWith("event: response.completed"))
        ?.split("\ndata: ")[1] ?? "{}",
    );
    expect(completed.response.store).toBe(true);
    expect((await harness.services.responses.get(orgId, completed.response.id))?.response.status).toBe(
      "completed",
    );
  });

  it("answers with store false when saving fails, and still records the usage", async () => {
    vi.spyOn(harness.services.responses, "save").mockRejectedValue(new Error("store down"));
    const response = await post({ input: "Save me." });
    const body = (await response.json()) as Json;
    expect(response.status).toBe(200);
    expect(body.store).toBe(false);
    const record = await usageRecordOf(harness, response.headers.get("x-request-id") ?? "");
    expect(record.endpoint).toBe("responses");

    const streamed = await post({ input: "Save me.", stream: true });
    const text = await streamed.text();
    const last = text.trim().split("\n\n").at(-1) ?? "";
    expect(last).toMatch(/^event: response.completed\n/);
    expect(JSON.parse(last.split("\ndata: ")[1] ?? "{}").response.store).toBe(false);
  });
});

describe("previous_response_id", () => {
  it("puts the earlier turns (input and output items) before this input; the earlier instructions are not carried", async () => {
    engine.replyOnce({
      steps: [...callTool(0, "lookup", '{"q":"x"}'), finish("tool_calls")],
    });
    const first = await create({
      instructions: "First instructions.",
      input: "Look x up.",
      tools: [{ type: "function", name: "lookup" }],
    });
    const call = first.output[0];
    expect(call.type).toBe("function_call");
    engine.replyOnce({ steps: say("x is 1.") });
    const second = await create({
      previous_response_id: first.id,
      instructions: "Second instructions.",
      input: [{ type: "function_call_output", call_id: call.call_id, output: "1" }],
      tools: [{ type: "function", name: "lookup" }],
    });
    expect(second.previous_response_id).toBe(first.id);
    expect(lastRequest().messages).toEqual([
      { role: "system", content: "Second instructions." },
      { role: "user", content: "Look x up." },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: call.call_id, name: "lookup", arguments: '{"q":"x"}' }],
      },
      { role: "tool", content: "1", toolCallId: call.call_id },
    ]);
    engine.replyOnce({ steps: say("Done.") });
    await create({ previous_response_id: second.id, input: "Thanks." });
    expect(lastRequest().messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
  });

  it("answers an unknown id, and another organization's, with the same 404", async () => {
    const unknown = await post({ previous_response_id: "resp_unknown", input: "Hi." });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as Json).error).toEqual({
      message: "Previous response with id 'resp_unknown' not found.",
      type: "invalid_request_error",
      param: "previous_response_id",
      code: "not_found",
    });
    const mine = await create({ input: "Mine." });
    await harness.services.tenancy.orgs.create("other", [FAKE_MODEL]);
    const { key } = await harness.services.tenancy.keys.create("other");
    const theirs = await post({ previous_response_id: mine.id, input: "Hi." }, key);
    expect(theirs.status).toBe(404);
    expect(((await theirs.json()) as Json).error.message).toBe(
      `Previous response with id '${mine.id}' not found.`,
    );
  });

  it("refuses a chain beyond its bounds with a 400 naming previous_response_id", async () => {
    const first = await create({ input: "One." });
    vi.spyOn(harness.services.responses, "conversation").mockRejectedValue(
      new ResponseChainTooLargeError("maxItems", 10),
    );
    const response = await post({ previous_response_id: first.id, input: "Two." });
    expect(response.status).toBe(400);
    expect(((await response.json()) as Json).error).toMatchObject({
      param: "previous_response_id",
      message: expect.stringContaining("10 items"),
    });
  });
});

describe("item_reference", () => {
  it("replaces a reference with the stored output item it names (the AI SDK's way with store on)", async () => {
    engine.replyOnce({ steps: [...callTool(0, "lookup", '{"q":"y"}'), finish("tool_calls")] });
    const first = await create({ input: "Look y up.", tools: [{ type: "function", name: "lookup" }] });
    const call = first.output[0];
    expect(call.id).toBe(`fc_${first.id.slice(5)}0`);
    engine.replyOnce({ steps: say("y is 2.") });
    const second = await create({
      input: [
        { role: "user", content: "Look y up." },
        { type: "item_reference", id: call.id },
        { type: "function_call_output", call_id: call.call_id, output: "2" },
      ],
      tools: [{ type: "function", name: "lookup" }],
    });
    expect(lastRequest().messages).toEqual([
      { role: "user", content: "Look y up." },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: call.call_id, name: "lookup", arguments: '{"q":"y"}' }],
      },
      { role: "tool", content: "2", toolCallId: call.call_id },
    ]);
    // Stored with the item itself, so a later previous_response_id needs no reference.
    const stored = await harness.services.responses.get(orgId, second.id);
    expect(stored?.inputItems[1]).toMatchObject({
      type: "function_call",
      id: call.id,
      call_id: call.call_id,
    });
    // Without `type`, an object with only an id is a reference too (OpenAI's shape).
    await create({
      input: [
        { role: "user", content: "Look y up." },
        { id: call.id },
        { type: "function_call_output", call_id: call.call_id, output: "2" },
      ],
      tools: [{ type: "function", name: "lookup" }],
    });
  });

  it("answers a reference to another organization's item like an unknown one", async () => {
    engine.replyOnce({ steps: say("Mine.") });
    const mine = await create({ input: "Mine." });
    const { key } = await harness.services.tenancy.keys.create("other");
    const theirs = await post({ input: [{ type: "item_reference", id: mine.output[0].id }] }, key);
    expect(theirs.status).toBe(404);
    expect(((await theirs.json()) as Json).error).toMatchObject({
      message: `Item with id '${mine.output[0].id}' not found.`,
      param: "input[0].id",
    });
  });
});
