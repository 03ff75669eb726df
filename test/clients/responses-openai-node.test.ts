// openai-node, unmodified, against Hearth's Responses API: `responses.create` (a string and items, instructions),
// `responses.stream` through a function tool round trip (by previous_response_id, and by sending the items back),
// `responses.parse` with zodTextFormat, and a stored response read back, its input items listed, then deleted.
import OpenAI, { NotFoundError } from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import type {
  FunctionTool,
  Response,
  ResponseFunctionToolCall,
  ResponseInputItem,
  ResponseStreamEvent,
} from "openai/resources/responses/responses";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { hearth } from "./hearth.js";
import { logMark, routes, servedSince } from "./request-log.js";

const { baseURL, apiKey, model } = hearth();
let client: OpenAI;

beforeAll(() => {
  client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
});

const GET_WEATHER: FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Current weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", maxLength: 30 } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
};

const WEATHER_PROMPT = "What is the weather in Paris right now?";

/** A finished response's shape, whatever the model said: what every client reads. */
function expectResponse(response: Response): void {
  expect(response.object).toBe("response");
  expect(response.id).toMatch(/^resp_/);
  expect(response.model).toBe(model);
  expect(["completed", "incomplete"]).toContain(response.status);
  if (response.status === "incomplete") expect(response.incomplete_details?.reason).toBe("max_output_tokens");
  const usage = response.usage;
  expect(usage?.input_tokens).toBeGreaterThan(0);
  expect(usage?.output_tokens).toBeGreaterThan(0);
  expect(usage?.total_tokens).toBe((usage?.input_tokens ?? 0) + (usage?.output_tokens ?? 0));
  expect(usage?.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
  expect(usage?.output_tokens_details.reasoning_tokens).toBeGreaterThanOrEqual(0);
}

/** The one assistant message of a text answer: output_text parts with their (empty) annotations. */
function expectTextMessage(response: Response): void {
  const messages = response.output.filter((item) => item.type === "message");
  expect(messages).toHaveLength(1);
  const message = messages[0];
  if (message?.type !== "message") throw new Error("no message");
  expect(message.role).toBe("assistant");
  expect(message.id.length).toBeGreaterThan(0);
  for (const part of message.content) {
    expect(part.type).toBe("output_text");
    if (part.type === "output_text") expect(part.annotations).toEqual([]);
  }
  expect(response.output_text.length).toBeGreaterThan(0);
}

function functionCall(response: Response): ResponseFunctionToolCall {
  const call = response.output.find((item) => item.type === "function_call");
  if (call?.type !== "function_call")
    throw new Error(`no function_call in ${JSON.stringify(response.output)}`);
  return call;
}

describe("openai-node responses", () => {
  it("responses.create with a string input and instructions: a text message, usage, the fields echoed", async () => {
    const mark = await logMark();
    const response = await client.responses.create({
      model,
      instructions: "You are a helpful assistant. Answer in one short sentence.",
      input: "Say hello.",
      temperature: 0,
      max_output_tokens: 24,
      metadata: { suite: "clients" },
    });
    expectResponse(response);
    expectTextMessage(response);
    expect(response.instructions).toBe("You are a helpful assistant. Answer in one short sentence.");
    expect(response.max_output_tokens).toBe(24);
    expect(response.temperature).toBe(0);
    expect(response.metadata).toEqual({ suite: "clients" });
    expect(routes(await servedSince(mark))).toEqual(["POST /v1/responses"]);
  });

  it("responses.create with items: system, developer, user and assistant messages, string and part contents", async () => {
    const response = await client.responses.create({
      model,
      input: [
        { role: "system", content: "You are a terse assistant." },
        { role: "developer", content: [{ type: "input_text", text: "Answer with one word." }] },
        { role: "user", content: "My name is Alice." },
        // An earlier answer sent back as the API returned it: an output message with its id and output_text.
        {
          type: "message",
          role: "assistant",
          id: "msg_earlier_answer",
          status: "completed",
          content: [{ type: "output_text", text: "Hello Alice!", annotations: [] }],
        },
        { role: "user", content: [{ type: "input_text", text: "What is my name?" }] },
      ],
      temperature: 0,
      max_output_tokens: 16,
    });
    expectResponse(response);
    expectTextMessage(response);
  });

  it("responses.stream with a function tool: the call streamed event by event, its output sent back by previous_response_id, then the answer", async () => {
    const events: ResponseStreamEvent[] = [];
    const stream = client.responses.stream({
      model,
      input: WEATHER_PROMPT,
      tools: [GET_WEATHER],
      // A 135M model does not reliably choose a tool on its own: the call is what this test is about.
      tool_choice: { type: "function", name: "get_weather" },
      temperature: 0,
      max_output_tokens: 60,
    });
    for await (const event of stream) events.push(event);
    const first = await stream.finalResponse();
    expectResponse(first);
    expect(first.status).toBe("completed");
    const call = functionCall(first);
    expect(call.name).toBe("get_weather");
    expect(call.call_id.length).toBeGreaterThan(0);
    const args = JSON.parse(call.arguments) as { city: unknown };
    expect(typeof args.city).toBe("string");

    // The events, in the order OpenAI streams a function call, numbered from 0 without a gap.
    const types = events.map((event) => event.type);
    expect(types[0]).toBe("response.created");
    expect(types[1]).toBe("response.in_progress");
    expect(types.at(-1)).toBe("response.completed");
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const added = events.find(
      (e) => e.type === "response.output_item.added" && e.item.type === "function_call",
    );
    const done = events.find(
      (e) => e.type === "response.output_item.done" && e.item.type === "function_call",
    );
    expect(added).toBeDefined();
    expect(done).toBeDefined();
    const deltas = events.filter((e) => e.type === "response.function_call_arguments.delta");
    expect(deltas.length).toBeGreaterThan(0);
    const argumentsDone = events.find((e) => e.type === "response.function_call_arguments.done");
    if (argumentsDone?.type !== "response.function_call_arguments.done") throw new Error("no arguments.done");
    expect(
      deltas.map((e) => (e.type === "response.function_call_arguments.delta" ? e.delta : "")).join(""),
    ).toBe(argumentsDone.arguments);
    expect(argumentsDone.arguments).toBe(call.arguments);
    expect(types.indexOf("response.output_item.added")).toBeLessThan(
      types.indexOf("response.function_call_arguments.delta"),
    );
    expect(types.lastIndexOf("response.function_call_arguments.delta")).toBeLessThan(
      types.indexOf("response.function_call_arguments.done"),
    );
    expect(types.indexOf("response.function_call_arguments.done")).toBeLessThan(
      types.lastIndexOf("response.output_item.done"),
    );

    const second = client.responses.stream({
      model,
      previous_response_id: first.id,
      input: [
        { type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ sky: "sunny" }) },
      ],
      tools: [GET_WEATHER],
      tool_choice: "none",
      temperature: 0,
      max_output_tokens: 40,
    });
    let text = "";
    second.on("response.output_text.delta", (event) => {
      text += event.delta;
    });
    const answer = await second.finalResponse();
    expectResponse(answer);
    expectTextMessage(answer);
    expect(answer.previous_response_id).toBe(first.id);
    expect(text).toBe(answer.output_text);
    // The continuation is the conversation rebuilt from the stored first turn: the same prompt, token for token, as
    // the same items sent inline.
    const inline = await client.responses.create({
      model,
      input: [
        { role: "user", content: WEATHER_PROMPT },
        call,
        { type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ sky: "sunny" }) },
      ],
      tools: [GET_WEATHER],
      tool_choice: "none",
      store: false,
      temperature: 0,
      max_output_tokens: 16,
    });
    expect(answer.usage?.input_tokens).toBe(inline.usage?.input_tokens);
    // Its own input items are the function output only: the first turn is reached through previous_response_id.
    const own = await client.responses.inputItems.list(answer.id);
    expect(own.data.map((item) => item.type)).toEqual(["function_call_output"]);
  });

  it("a function tool round trip with the items sent back (store false, no previous_response_id)", async () => {
    const input: ResponseInputItem[] = [{ role: "user", content: WEATHER_PROMPT }];
    const first = await client.responses.create({
      model,
      input,
      tools: [GET_WEATHER],
      tool_choice: "required",
      store: false,
      temperature: 0,
      max_output_tokens: 60,
    });
    expectResponse(first);
    const call = functionCall(first);
    expect(call.name).toBe("get_weather");
    const answer = await client.responses.create({
      model,
      input: [
        ...input,
        ...first.output.filter((item) => item.type === "function_call"),
        { type: "function_call_output", call_id: call.call_id, output: JSON.stringify({ sky: "sunny" }) },
      ],
      tools: [GET_WEATHER],
      tool_choice: "none",
      store: false,
      temperature: 0,
      max_output_tokens: 40,
    });
    expectResponse(answer);
    expectTextMessage(answer);
    // Not stored: reading it back is the 404 of an unknown id.
    await expect(client.responses.retrieve(answer.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("responses.parse with zodTextFormat: a typed object within its bounds", async () => {
    const Review = z.object({
      title: z.string().max(40),
      year: z.number().int(),
      rating: z.number().int().min(1).max(10),
    });
    const response = await client.responses.parse({
      model,
      input: "Review the film Casablanca: title, year and a rating from 1 to 10.",
      text: { format: zodTextFormat(Review, "review") },
      temperature: 0,
      max_output_tokens: 80,
    });
    expect(response.status).toBe("completed");
    const review = response.output_parsed;
    expect(review).toBeTruthy();
    expect(typeof review?.title).toBe("string");
    expect(Number.isSafeInteger(review?.year)).toBe(true);
    expect(review?.rating).toBeGreaterThanOrEqual(1);
    expect(review?.rating).toBeLessThanOrEqual(10);
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "review", strict: true });
  });

  it("a stored response: retrieve, inputItems.list (paged), delete, then a 404", async () => {
    const created = await client.responses.create({
      model,
      input: [
        { role: "user", content: "Remember the word papaya." },
        { role: "user", content: "Say OK." },
      ],
      temperature: 0,
      max_output_tokens: 8,
    });
    expectResponse(created);

    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved.id).toBe(created.id);
    expect(retrieved.status).toBe(created.status);
    expect(retrieved.output).toEqual(created.output);
    expect(retrieved.usage).toEqual(created.usage);

    const items = [];
    for await (const item of client.responses.inputItems.list(created.id, { limit: 1, order: "asc" })) {
      items.push(item);
    }
    expect(items).toHaveLength(2);
    const texts = items.map((item) =>
      item.type === "message" ? item.content.map((part) => ("text" in part ? part.text : "")).join("") : "",
    );
    expect(texts).toEqual(["Remember the word papaya.", "Say OK."]);
    for (const item of items) expect(item.id.length).toBeGreaterThan(0);
    const descending = await client.responses.inputItems.list(created.id, { order: "desc" });
    expect(descending.data.map((item) => item.id)).toEqual(items.map((item) => item.id).reverse());

    const mark = await logMark();
    await client.responses.delete(created.id);
    await expect(client.responses.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.responses.delete(created.id)).rejects.toBeInstanceOf(NotFoundError);
    // The log writes an id this long as [redacted] (request-id.ts: a long opaque segment is treated as a secret).
    const byId = expect.stringMatching(/^\/v1\/responses\/[^/]+$/);
    expect(await servedSince(mark)).toEqual([
      { method: "DELETE", path: byId, status: 200 },
      { method: "GET", path: byId, status: 404 },
      { method: "DELETE", path: byId, status: 404 },
    ]);
  });
});
