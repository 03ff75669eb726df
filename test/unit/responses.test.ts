// POST /v1/responses in memory on the fake engine: the response object, the typed event stream (order, sequence
// numbers), items mapped onto the chat request, refusals named as sent, errors before and after the 200.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerationRequest } from "../../src/engine/types.js";
import { outputItemId, outputItemPlace } from "../../src/http/openai/responses/output.js";
import {
  callTool,
  FAKE_MODEL,
  type FakeEngine,
  fail,
  fakePromptTokens,
  finish,
  say,
  think,
} from "../support/fake-engine.js";
import { startTestApp, type TestApp, usageRecordOf } from "../support/test-app.js";

/** The smallest context the config allows. */
const SMALL = "small";

let harness: TestApp<FakeEngine>;
let engine: FakeEngine;

beforeAll(async () => {
  harness = await startTestApp({ models: [{ id: FAKE_MODEL }, { id: SMALL, contextSize: 128 }] });
  engine = harness.engine;
});

afterAll(async () => {
  await harness?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: bodies and events are checked field by field
type Json = any;

function post(body: unknown, key = harness.apiKey): Promise<Response> {
  return Promise.resolve(
    harness.app.request("/v1/responses", {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    }),
  );
}

async function create(body: Record<string, unknown>): Promise<Json> {
  const response = await post({ model: FAKE_MODEL, ...body });
  const json = await response.json();
  expect(response.status, JSON.stringify(json)).toBe(200);
  return json;
}

async function refusal(body: Record<string, unknown>): Promise<{ status: number; error: Json }> {
  const response = await post({ model: FAKE_MODEL, ...body });
  const json = (await response.json()) as Json;
  return { status: response.status, error: json.error };
}

/** The SSE events of a streamed response: `event:` name and parsed data, in order. */
async function events(response: Response): Promise<{ event: string; data: Json }[]> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((frame) => frame.startsWith("event: "))
    .map((frame) => {
      const [eventLine, dataLine] = frame.split("\n");
      return { event: (eventLine ?? "").slice(7), data: JSON.parse((dataLine ?? "").slice(6)) };
    });
}

/** The engine request the last response was generated from. */
function lastRequest(): GenerationRequest {
  const request = engine.requests.at(-1);
  if (request === undefined) throw new Error("no engine request");
  return request;
}

describe("POST /v1/responses, not streamed", () => {
  it("answers the response object with the reply, usage and every echoed field at OpenAI's defaults", async () => {
    engine.replyOnce({ steps: say("Hi there.") });
    const response = await create({ input: "Say hello." });
    expect(response).toMatchObject({
      object: "response",
      status: "completed",
      model: FAKE_MODEL,
      error: null,
      incomplete_details: null,
      instructions: null,
      max_output_tokens: null,
      max_tool_calls: null,
      metadata: {},
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: null, summary: null },
      service_tier: "default",
      temperature: 1,
      top_p: 1,
      text: { format: { type: "text" }, verbosity: "medium" },
      tool_choice: "auto",
      tools: [],
      top_logprobs: 0,
      truncation: "disabled",
      user: null,
      safety_identifier: null,
      prompt_cache_key: null,
      background: false,
    });
    expect(response.id).toMatch(/^resp_[0-9A-Za-z]{22}$/);
    expect(response.created_at).toBeTypeOf("number");
    expect(response.completed_at).toBeTypeOf("number");
    expect(response).not.toHaveProperty("output_text");
    expect(response.output).toEqual([
      {
        id: expect.stringMatching(/^msg_/),
        type: "message",
        status: "completed",
        role: "assistant",
        content: [{ type: "output_text", text: "Hi there.", annotations: [] }],
      },
    ]);
    const input = fakePromptTokens({ messages: [{ role: "user", content: "Say hello." }] });
    expect(response.usage).toEqual({
      input_tokens: input,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 3,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: input + 3,
    });
  });

  it("is incomplete with reason max_output_tokens when the budget ends it", async () => {
    engine.replyOnce({ steps: say("Cut short", "length") });
    const response = await create({ input: "Talk.", max_output_tokens: 2 });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.completed_at).toBeNull();
    expect(response.max_output_tokens).toBe(2);
    expect(response.output[0].status).toBe("incomplete");
    expect(lastRequest().sampling.maxTokens).toBe(2);
  });

  it("returns reasoning and function calls as their own items", async () => {
    engine.replyOnce({
      steps: [
        ...think("Need weather."),
        ...callTool(0, "get_weather", '{"city":"Oslo"}'),
        finish("tool_calls"),
      ],
    });
    const response = await create({
      input: "Weather in Oslo?",
      reasoning: { effort: "high" },
      tools: [
        {
          type: "function",
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      ],
    });
    expect(response.output).toEqual([
      {
        id: expect.stringMatching(/^rs_/),
        type: "reasoning",
        summary: [],
        content: [{ type: "reasoning_text", text: "Need weather." }],
      },
      {
        id: expect.stringMatching(/^fc_/),
        type: "function_call",
        status: "completed",
        call_id: expect.stringMatching(/^call_/),
        name: "get_weather",
        arguments: '{"city":"Oslo"}',
      },
    ]);
    expect(response.reasoning).toEqual({ effort: "high", summary: null });
    expect(response.tools).toEqual([
      {
        type: "function",
        name: "get_weather",
        description: null,
        parameters: { type: "object", properties: { city: { type: "string" } } },
        strict: null,
      },
    ]);
    expect(lastRequest().enableThinking).toBe(true);
  });
});

describe("POST /v1/responses, streamed", () => {
  it("sends typed events in OpenAI's order, numbered from 0, ending with response.completed", async () => {
    engine.replyOnce({ steps: say("Hi there.") });
    const response = await post({ model: FAKE_MODEL, input: "Say hello.", stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const sent = await events(response);
    expect(sent.map((e) => e.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    for (const [i, { event, data }] of sent.entries()) {
      expect(data.type).toBe(event);
      expect(data.sequence_number).toBe(i);
    }
    const [created, , added, partAdded, delta, , , textDone, partDone, itemDone, completed] = sent.map(
      (e) => e.data,
    );
    expect(created.response).toMatchObject({ status: "in_progress", output: [], usage: null });
    const itemId = added.item.id;
    expect(added).toMatchObject({
      output_index: 0,
      item: { type: "message", status: "in_progress", content: [] },
    });
    expect(partAdded).toMatchObject({
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    expect(delta).toEqual({
      type: "response.output_text.delta",
      item_id: itemId,
      output_index: 0,
      content_index: 0,
      delta: "Hi",
      logprobs: [],
      sequence_number: 4,
    });
    expect(textDone).toMatchObject({ item_id: itemId, text: "Hi there.", logprobs: [] });
    expect(partDone.part).toEqual({ type: "output_text", text: "Hi there.", annotations: [] });
    expect(itemDone.item).toMatchObject({ id: itemId, status: "completed" });
    expect(completed.response).toMatchObject({ id: created.response.id, status: "completed" });
    expect(completed.response.output).toEqual([itemDone.item]);
    expect(completed.response.usage.output_tokens).toBe(3);
  });

  it("streams reasoning text and function call arguments with their own events", async () => {
    engine.replyOnce({
      steps: [...think("Hmm."), ...callTool(0, "lookup", '{"q":1}'), finish("tool_calls")],
    });
    const response = await post({
      model: FAKE_MODEL,
      input: "Look it up.",
      stream: true,
      reasoning: { effort: "medium" },
      tools: [{ type: "function", name: "lookup" }],
      tool_choice: "required",
    });
    const sent = await events(response);
    const names = sent.map((e) => e.event);
    expect(names).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.reasoning_text.delta",
      "response.reasoning_text.delta",
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      ...Array(names.filter((n) => n === "response.function_call_arguments.delta").length).fill(
        "response.function_call_arguments.delta",
      ),
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const call = sent.find((e) => e.event === "response.output_item.added" && e.data.output_index === 1)?.data
      .item;
    expect(call).toMatchObject({
      type: "function_call",
      name: "lookup",
      arguments: "",
      status: "in_progress",
    });
    const done = sent.find((e) => e.event === "response.function_call_arguments.done")?.data;
    expect(done).toMatchObject({ item_id: call.id, output_index: 1, name: "lookup", arguments: '{"q":1}' });
    const reasoningDone = sent.find((e) => e.event === "response.reasoning_text.done")?.data;
    expect(reasoningDone).toMatchObject({ output_index: 0, content_index: 0, text: "Hmm." });
  });

  it("ends with response.incomplete at the output budget", async () => {
    engine.replyOnce({ steps: say("Cut short", "length") });
    const sent = await events(
      await post({ model: FAKE_MODEL, input: "Talk.", stream: true, max_output_tokens: 2 }),
    );
    const last = sent.at(-1);
    expect(last?.event).toBe("response.incomplete");
    expect(last?.data.response).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
    });
  });

  it("reports a failure after the 200 as an error event, then response.failed; the usage is still recorded", async () => {
    engine.replyOnce({ steps: [...say("Partial").slice(0, 1), fail(new Error("engine exploded"))] });
    const response = await post({ model: FAKE_MODEL, input: "Go.", stream: true });
    const sent = await events(response);
    const error = sent.at(-2);
    expect(error?.event).toBe("error");
    expect(error?.data).toMatchObject({ code: "server_error", param: null, error: { type: "server_error" } });
    const failed = sent.at(-1);
    expect(failed?.event).toBe("response.failed");
    expect(failed?.data.response).toMatchObject({ status: "failed", error: { code: "server_error" } });
    expect(failed?.data.sequence_number).toBe(sent.length - 1);
    const record = await usageRecordOf(harness, response.headers.get("x-request-id") ?? "");
    expect(record.status).not.toBe(200);
  });
});

describe("the request as the engine sees it", () => {
  it("puts instructions first, then each item as its chat message; calls and their outputs pair up", async () => {
    await create({
      instructions: "Be brief.",
      input: [
        { role: "developer", content: "Use metric units." },
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "Weather in " },
            { type: "input_text", text: "Oslo?" },
          ],
        },
        {
          type: "reasoning",
          id: "rs_1",
          summary: [],
          content: [{ type: "reasoning_text", text: "call it" }],
        },
        {
          type: "message",
          role: "assistant",
          id: "msg_1",
          status: "completed",
          content: [{ type: "output_text", text: "Checking.", annotations: [] }],
        },
        {
          type: "function_call",
          id: "fc_1",
          call_id: "call_a",
          name: "get_weather",
          arguments: '{"city":"Oslo"}',
          status: "completed",
        },
        { type: "function_call_output", call_id: "call_a", output: '{"temp":3}' },
        { role: "assistant", content: "It is 3 degrees." },
        { role: "user", content: "Thanks." },
      ],
      tools: [
        {
          type: "function",
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } } },
        },
      ],
    });
    expect(lastRequest().messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "system", content: "Use metric units." },
      { role: "user", content: "Weather in Oslo?" },
      {
        role: "assistant",
        content: "Checking.",
        toolCalls: [{ id: "call_a", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      },
      { role: "tool", content: '{"temp":3}', toolCallId: "call_a" },
      { role: "assistant", content: "It is 3 degrees." },
      { role: "user", content: "Thanks." },
    ]);
  });

  it("maps sampling, output and tool fields onto the chat request", async () => {
    await create({
      input: "Pick one.",
      temperature: 0.5,
      top_p: 0.9,
      max_output_tokens: 40,
      reasoning: { effort: "none" },
      text: {
        format: {
          type: "json_schema",
          name: "pick",
          schema: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
          strict: true,
        },
      },
      tools: [
        { type: "function", name: "a" },
        { type: "function", name: "b" },
      ],
      tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "b" }] },
      parallel_tool_calls: false,
      user: "user-1",
      prompt_cache_key: "conv-1",
    });
    const request = lastRequest();
    expect(request.sampling).toMatchObject({ temperature: 0.5, topP: 0.9, maxTokens: 40 });
    expect(request.enableThinking).toBe(false);
    expect(request.output?.format).toMatchObject({ type: "json_schema", name: "pick" });
    expect(request.output?.tools.map((t) => t.name)).toEqual(["a", "b"]);
    expect(request.output?.toolChoice).toEqual({ allowed: ["b"], mode: "required" });
    expect(request.output?.parallelToolCalls).toBe(false);
    expect(request.user).toBe("user-1");
    expect(request.promptCacheKey).toBe("conv-1");
  });

  it("maps a named function choice, and drops auto or none when there are no tools (as OpenAI accepts them)", async () => {
    await create({
      input: "Go.",
      tools: [{ type: "function", name: "f" }],
      tool_choice: { type: "function", name: "f" },
    });
    expect(lastRequest().output?.toolChoice).toEqual({ name: "f" });
    const response = await create({
      input: "Go.",
      tool_choice: "auto",
      parallel_tool_calls: true,
      tools: [],
    });
    expect(response.tool_choice).toBe("auto");
    expect(lastRequest().output).toBeUndefined();
  });

  it("accepts and echoes the fields that change nothing here", async () => {
    const response = await create({
      input: "Hi.",
      store: false,
      include: ["reasoning.encrypted_content", "message.output_text.logprobs"],
      service_tier: "auto",
      background: false,
      prompt_cache_retention: "24h",
      truncation: "auto",
      top_logprobs: 3,
      metadata: { session: "s1" },
      safety_identifier: "hash-1",
      text: { verbosity: "low" },
      reasoning: { summary: "auto" },
      max_tool_calls: 4,
      // Codex CLI's ids for its turn, session and installation, on every request.
      client_metadata: { "x-codex-turn-metadata": '{"turn_id":"t1"}', session_id: "s-1" },
    });
    expect(response).not.toHaveProperty("client_metadata");
    expect(response).toMatchObject({
      store: false,
      service_tier: "default",
      background: false,
      prompt_cache_retention: "24h",
      truncation: "auto",
      top_logprobs: 3,
      metadata: { session: "s1" },
      safety_identifier: "hash-1",
      text: { format: { type: "text" }, verbosity: "low" },
      reasoning: { effort: null, summary: "auto" },
      max_tool_calls: 4,
    });
  });
});

describe("refusals before the 200, named as sent", () => {
  it.each([
    ["web_search", { tools: [{ type: "function", name: "f" }, { type: "web_search" }] }, "tools[1].type"],
    ["file_search", { tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] }, "tools[0].type"],
    [
      "code_interpreter",
      { tools: [{ type: "code_interpreter", container: { type: "auto" } }] },
      "tools[0].type",
    ],
    ["computer_use_preview", { tools: [{ type: "computer_use_preview" }] }, "tools[0].type"],
    ["image_generation", { tools: [{ type: "image_generation" }] }, "tools[0].type"],
    [
      "mcp",
      { tools: [{ type: "mcp", server_label: "x", server_url: "https://example.invalid" }] },
      "tools[0].type",
    ],
    ["local_shell", { tools: [{ type: "local_shell" }] }, "tools[0].type"],
    ["custom", { tools: [{ type: "custom", name: "c" }] }, "tools[0].type"],
  ])("refuses a %s tool", async (_name, fields, param) => {
    const { status, error } = await refusal({ input: "Hi.", ...fields });
    expect(status).toBe(400);
    expect(error).toMatchObject({ type: "invalid_request_error", param, code: "invalid_request_error" });
    expect(error.message).toMatch(/not supported/);
  });

  it.each([
    ["input_image", { type: "input_image", image_url: "https://example.invalid/a.png", detail: "auto" }],
    ["input_file", { type: "input_file", file_id: "file_1" }],
    ["input_audio", { type: "input_audio", input_audio: { data: "", format: "wav" } }],
  ])("refuses an %s part on a text-only model, naming the part", async (type, part) => {
    const { status, error } = await refusal({
      input: [{ role: "user", content: [{ type: "input_text", text: "What is this?" }, part] }],
    });
    expect(status).toBe(400);
    expect(error.param).toBe("input[0].content[1].type");
    expect(error.message).toContain(`'${type}'`);
  });

  it("refuses unknown item types, unknown item references, and hosted tool choices", async () => {
    expect((await refusal({ input: [{ type: "web_search_call", id: "ws_1" }] })).error.param).toBe(
      "input[0].type",
    );
    expect(await refusal({ input: [{ type: "item_reference", id: "msg_1" }] })).toEqual({
      status: 404,
      error: {
        message: "Item with id 'msg_1' not found.",
        type: "invalid_request_error",
        param: "input[0].id",
        code: "not_found",
      },
    });
    const hosted = await refusal({
      input: "Hi.",
      tools: [{ type: "function", name: "f" }],
      tool_choice: { type: "file_search" },
    });
    expect(hosted.error.param).toBe("tool_choice");
    const garbage = await refusal({
      input: "Hi.",
      tools: [{ type: "function", name: "f" }],
      tool_choice: "sometimes",
    });
    expect(garbage.error).toMatchObject({ param: "tool_choice" });
    expect(garbage.error.message).toContain('{"type": "function", "name": ...}');
  });

  it("names chat's refusals by their Responses fields", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [
        {
          input: [
            { role: "user", content: "a" },
            { role: "user", content: 5 },
          ],
        },
        "input[1].content",
      ],
      [{ input: "Hi.", max_output_tokens: 0 }, "max_output_tokens"],
      [{ input: "Hi.", temperature: 3 }, "temperature"],
      [{ input: "Hi.", reasoning: { effort: "extreme" } }, "reasoning.effort"],
      [{ input: "Hi.", text: { format: { type: "xml" } } }, "text.format.type"],
      [
        {
          input: "Hi.",
          text: { format: { type: "json_schema", name: "bad name!", schema: { type: "object" } } },
        },
        "text.format.name",
      ],
      [
        {
          input: "Hi.",
          text: {
            format: {
              type: "json_schema",
              name: "s",
              schema: { type: "object", properties: { a: { type: "nonsense" } } },
            },
          },
        },
        "text.format.schema",
      ],
      [{ input: "Hi.", tools: [{ type: "function", name: "bad name!" }] }, "tools[0].name"],
      [
        { input: "Hi.", tools: [{ type: "function", name: "f", parameters: { type: "string" } }] },
        "tools[0].parameters",
      ],
      [
        {
          input: "Hi.",
          tools: [{ type: "function", name: "f" }],
          tool_choice: { type: "function", name: "g" },
        },
        "tool_choice.name",
      ],
      [
        {
          input: "Hi.",
          tools: [{ type: "function", name: "f" }],
          tool_choice: { type: "allowed_tools", mode: "auto", tools: [{ type: "function", name: "g" }] },
        },
        "tool_choice.tools[0].name",
      ],
      [{ input: "Hi.", tool_choice: "required" }, "tool_choice"],
      [{ input: "Hi.", metadata: { k: "v".repeat(513) } }, "metadata.k"],
      [{ input: "Hi.", user: harness.apiKey }, "user"],
      [{ input: [{ type: "function_call", call_id: "c", name: "f" }] }, "input[0].arguments"],
      [{ input: [{ type: "function_call_output", call_id: "c", output: 5 }] }, "input[0].output"],
      [{ input: "Hi.", background: true }, "background"],
      [{ input: "Hi.", conversation: "conv_1" }, "conversation"],
      [{ input: "Hi.", truncation: "sometimes" }, "truncation"],
      [{ input: "Hi.", surprise: 1 }, "surprise"],
      [{ input: [] }, "input"],
    ];
    for (const [fields, param] of cases) {
      const { status, error } = await refusal(fields);
      expect([status, error?.param], JSON.stringify(fields)).toEqual([400, param]);
    }
  });

  it("answers a prompt beyond the context with 400 context_length_exceeded naming input", async () => {
    const response = await post({ model: SMALL, input: "word ".repeat(200) });
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as Json;
    expect(error).toMatchObject({ param: "input", code: "context_length_exceeded" });
  });

  it("answers 401 without a key and 404 for an unknown model, as chat does", async () => {
    expect((await post({ model: FAKE_MODEL, input: "Hi." }, `sk-${"x".repeat(43)}`)).status).toBe(401);
    const unknown = await post({ model: "nope", input: "Hi." });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as Json).error).toMatchObject({ param: "model", code: "model_not_found" });
  });

  it("answers 429 with retry headers once the organization's requests per minute are spent, as chat does", async () => {
    await harness.services.tenancy.orgs.create("limited", [FAKE_MODEL], { rpm: 1 });
    const { key } = await harness.services.tenancy.keys.create("limited");
    expect((await post({ model: FAKE_MODEL, input: "Hi." }, key)).status).toBe(200);
    const refused = await post({ model: FAKE_MODEL, input: "Hi.", stream: true }, key);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(((await refused.json()) as Json).error).toMatchObject({
      type: "requests",
      code: "rate_limit_exceeded",
    });
  });

  it("records the usage under the responses endpoint", async () => {
    const response = await post({ model: FAKE_MODEL, input: "Hi." });
    await response.json();
    const record = await usageRecordOf(harness, response.headers.get("x-request-id") ?? "");
    expect(record).toMatchObject({ endpoint: "responses", model: FAKE_MODEL });
  });
});

describe("edge cases", () => {
  it("answers a reply with no text as one empty message, streamed and not", async () => {
    engine.replyOnce({ steps: [finish("stop")] });
    const response = await create({ input: "Say nothing." });
    expect(response.output).toEqual([
      expect.objectContaining({
        type: "message",
        status: "completed",
        content: [{ type: "output_text", text: "", annotations: [] }],
      }),
    ]);
    engine.replyOnce({ steps: [finish("stop")] });
    const sent = await events(await post({ model: FAKE_MODEL, input: "Say nothing.", stream: true }));
    expect(sent.map((e) => e.event)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
  });

  it("refuses more input items than responses.maxInputItems, naming input", async () => {
    const items = Array.from({ length: 2049 }, () => ({ role: "user", content: "a" }));
    const { status, error } = await refusal({ input: items });
    expect(status).toBe(400);
    expect(error).toMatchObject({ param: "input" });
    expect(error.message).toContain("2048");
  });
});

describe("items sent back as the SDKs give them", () => {
  it("accepts openai-node's parsed_arguments on calls and parsed on text parts", async () => {
    await create({
      input: [
        { role: "user", content: "Go." },
        {
          type: "function_call",
          call_id: "call_1",
          name: "f",
          arguments: "{}",
          parsed_arguments: {},
          status: "completed",
          id: "fc_1",
        },
        { type: "function_call_output", call_id: "call_1", output: "ok" },
        {
          type: "message",
          role: "assistant",
          status: "completed",
          id: "msg_2",
          content: [{ type: "output_text", text: "{}", annotations: [], parsed: {} }],
        },
        { role: "user", content: "Again." },
      ],
      tools: [{ type: "function", name: "f" }],
    });
    expect(lastRequest().messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
    ]);
  });
});

describe("output item ids", () => {
  it("name their response and place, and nothing else parses as one", () => {
    const responseId = `resp_${"a1B2".repeat(5)}xY`;
    const id = outputItemId("functionCall", responseId, 12);
    expect(id).toBe(`fc_${"a1B2".repeat(5)}xY12`);
    expect(outputItemPlace(id)).toEqual({ responseId, index: 12 });
    for (const other of [
      "msg_1",
      `msg_${"a".repeat(22)}`,
      `msg_${"a".repeat(22)}01`,
      `call_${"a".repeat(22)}0`,
      "fc_x",
    ]) {
      expect(outputItemPlace(other)).toBeUndefined();
    }
  });
});
