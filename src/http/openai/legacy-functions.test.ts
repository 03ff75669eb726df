// The deprecated functions/function_call: parsed as tools, refused where they clash, replies in the legacy shape.
import { describe, expect, it } from "vitest";
import { apiErrorOf } from "../../../test/support/api-errors.js";
import { Channel } from "../../engine/channel.js";
import type { GenerationEvent } from "../../engine/types.js";
import type { SseWriter } from "../sse.js";
import { completionBody } from "./chat-completion-body.js";
import { streamCompletion } from "./chat-completion-stream.js";
import { parseChatRequest } from "./chat-request.js";

const WEATHER = {
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};
const user = { role: "user", content: "Weather in Oslo?" };
const parse = (body: Record<string, unknown>) =>
  parseChatRequest({ model: "m", messages: [user], ...body }, { maxN: 8 });

const refusal = (body: Record<string, unknown>) => apiErrorOf(() => parse(body));

describe("legacy functions: the request", () => {
  it("functions become tools (one call at most); function_call a named choice", () => {
    const parsed = parse({ functions: [WEATHER], function_call: { name: "get_weather" } });
    expect(parsed.legacyFunctions).toBe(true);
    expect(parsed.output?.tools.map((t) => t.name)).toEqual(["get_weather"]);
    expect(parsed.output?.toolChoice).toEqual({ name: "get_weather" });
    expect(parsed.output?.parallelToolCalls).toBe(false);
    expect(parse({ functions: [WEATHER], function_call: "none" }).output?.toolChoice).toBe("none");
    expect(parse({ functions: [WEATHER] }).output?.toolChoice).toBe("auto");
    expect(parse({ tools: [{ type: "function", function: WEATHER }] }).legacyFunctions).toBe(false);
  });

  it("a legacy history: the assistant's function_call and the function message pair up by one id", () => {
    const parsed = parse({
      functions: [WEATHER],
      messages: [
        user,
        {
          role: "assistant",
          content: null,
          function_call: { name: "get_weather", arguments: '{"city":"Oslo"}' },
        },
        { role: "function", name: "get_weather", content: "-3 C" },
      ],
    });
    const [, assistant, result] = parsed.messages;
    const id = assistant?.toolCalls?.[0]?.id;
    expect(assistant?.toolCalls).toEqual([{ id, name: "get_weather", arguments: '{"city":"Oslo"}' }]);
    expect(result).toEqual({ role: "tool", content: "-3 C", name: "get_weather", toolCallId: id });
  });

  it("refuses what clashes, naming the field as the client sent it", () => {
    expect(refusal({ functions: [WEATHER], tools: [{ type: "function", function: WEATHER }] }).param).toBe(
      "functions",
    );
    expect(refusal({ function_call: "auto" }).param).toBe("function_call");
    expect(refusal({ functions: [WEATHER], tool_choice: "auto", function_call: "auto" }).param).toBe(
      "function_call",
    );
    expect(refusal({ functions: [WEATHER], function_call: { name: "nope" } }).param).toBe(
      "function_call.name",
    );
    expect(refusal({ functions: [{ name: "bad name!" }] }).param).toBe("functions[0].name");
    expect(refusal({ functions: [{ ...WEATHER, parameters: { type: 5 } }] }).param).toBe(
      "functions[0].parameters",
    );
    expect(refusal({ messages: [user, { role: "function", name: "f", content: "x" }] }).param).toBe(
      "messages[1].role",
    );
  });
});

async function* events(list: GenerationEvent[]): AsyncIterable<GenerationEvent> {
  yield* list;
}

const CALL: GenerationEvent[] = [
  { type: "delta", choice: 0, text: "", target: { kind: "tool_call", call: 0, name: "get_weather" } },
  { type: "delta", choice: 0, text: '{"city":', target: { kind: "tool_call", call: 0 } },
  { type: "delta", choice: 0, text: '"Oslo"}', target: { kind: "tool_call", call: 0 } },
  { type: "finish", choice: 0, reason: "tool_calls" },
  { type: "usage", usage: { promptTokens: 5, completionTokens: 7, cachedTokens: 0 } },
];
const META = { id: "chatcmpl-x", created: 1, model: "m" };

describe("legacy functions: the reply", () => {
  it("one JSON body: message.function_call, finish_reason function_call, no tool_calls", async () => {
    const channel = new Channel<GenerationEvent>();
    for (const event of CALL) channel.push(event);
    channel.close();
    const body = await completionBody({ promptTokens: 5, events: channel }, META, {
      n: 1,
      reasoning: false,
      logprobs: false,
      legacyFunctions: true,
      onInvalid: () => {},
    });
    expect(body.choices[0]).toMatchObject({
      message: {
        role: "assistant",
        content: null,
        function_call: { name: "get_weather", arguments: '{"city":"Oslo"}' },
      },
      finish_reason: "function_call",
    });
    expect(body.choices[0]?.message).not.toHaveProperty("tool_calls");
  });

  it("streamed: delta.function_call with the name first, then arguments; finish_reason function_call", async () => {
    const frames: unknown[] = [];
    const writer = {
      open: true,
      data: async (value: unknown) => void frames.push(value),
      dataJson: async (json: string) => void frames.push(JSON.parse(json)),
      error: async () => {},
      done: async () => {},
    } as unknown as SseWriter;
    await streamCompletion(writer, events(CALL), META, {
      n: 1,
      includeUsage: false,
      callsOnly: true,
      legacyFunctions: true,
      onInvalid: () => {},
      onError: () => ({ error: { message: "", type: "server_error", param: null, code: null } }),
    });
    const choices = frames.map(
      (f) => (f as { choices: { delta: unknown; finish_reason: unknown }[] }).choices[0],
    );
    expect(choices.map((c) => c?.delta)).toEqual([
      { role: "assistant", content: null },
      { function_call: { name: "get_weather", arguments: "" } },
      { function_call: { arguments: '{"city":' } },
      { function_call: { arguments: '"Oslo"}' } },
      {},
    ]);
    expect(choices.at(-1)?.finish_reason).toBe("function_call");
  });
});
