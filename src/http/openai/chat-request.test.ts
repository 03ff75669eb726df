// Every rule of the chat-completions body: what is accepted, how it maps to the engine, and each 400 with its param.
import { describe, expect, it } from "vitest";
import { InvalidRequestError } from "../errors/api-error.js";
import { parseJsonBody } from "../validation.js";
import { type ParsedChatRequest, parseChatRequest } from "./chat-request.js";
import { completionId, toUsage } from "./wire.js";

const MAX_N = 4;
const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const parse = (body: unknown) => parseChatRequest(body, { maxN: MAX_N });
const withFields = (fields: Record<string, unknown>) => parse({ ...base, ...fields });
const withMessages = (...messages: unknown[]) => parse({ ...base, messages });

function rejection(run: () => unknown): InvalidRequestError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidRequestError);
    return err as InvalidRequestError;
  }
  throw new Error("expected a 400, but the body was accepted");
}

function expect400(run: () => unknown, param: string | null, message: RegExp | string) {
  const err = rejection(run);
  expect(err.param).toBe(param);
  if (typeof message === "string") expect(err.message).toBe(message);
  else expect(err.message).toMatch(message);
}

describe("parseChatRequest: accepted bodies", () => {
  it("fills every default for a minimal body", () => {
    expect(parse(base)).toEqual<ParsedChatRequest>({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: false,
      includeUsage: false,
      legacyFunctions: false,
      n: 1,
      // temperature and top_p left out: the model's defaults fill them, else OpenAI's 1 (model-defaults.ts).
      sampling: {
        frequencyPenalty: 0,
        presencePenalty: 0,
        seed: undefined,
        maxTokens: undefined,
        stop: [],
      },
      enableThinking: false,
    });
  });

  it("maps vLLM's sampling extensions; top_k -1 and 0 both leave top-k out", () => {
    expect(withFields({ top_k: 40, min_p: 0.05, repetition_penalty: 1.1 }).sampling).toMatchObject({
      topK: 40,
      minP: 0.05,
      repetitionPenalty: 1.1,
    });
    expect(withFields({ top_k: -1 }).sampling.topK).toBe(0);
    expect(withFields({ top_k: 0 }).sampling.topK).toBe(0);
    expect(withFields({ top_k: 1, min_p: 0, repetition_penalty: 0.01 }).sampling).toMatchObject({
      topK: 1,
      minP: 0,
      repetitionPenalty: 0.01,
    });
    expect(withFields({ min_p: 1 }).sampling.minP).toBe(1);
    const omitted = parse(base).sampling;
    for (const field of ["temperature", "topP", "topK", "minP", "repetitionPenalty"]) {
      expect(omitted).not.toHaveProperty(field);
    }
  });

  it("maps every supported field", () => {
    const parsed = withFields({
      temperature: 0.5,
      top_p: 0.9,
      frequency_penalty: -1.5,
      presence_penalty: 1.5,
      n: MAX_N,
      max_tokens: 16,
      seed: 42,
      stop: ["END", "\n\n"],
      stream: true,
      stream_options: { include_usage: true },
      chat_template_kwargs: { enable_thinking: true },
      user: "user-7",
    });
    expect(parsed).toEqual<ParsedChatRequest>({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      includeUsage: true,
      legacyFunctions: false,
      n: MAX_N,
      sampling: {
        temperature: 0.5,
        topP: 0.9,
        frequencyPenalty: -1.5,
        presencePenalty: 1.5,
        seed: 42,
        maxTokens: 16,
        stop: ["END", "\n\n"],
      },
      enableThinking: true,
      user: "user-7",
    });
  });

  it("accepts the range boundaries", () => {
    expect(
      withFields({ temperature: 0, top_p: 1, frequency_penalty: -2, presence_penalty: 2 }).sampling,
    ).toMatchObject({
      temperature: 0,
      topP: 1,
      frequencyPenalty: -2,
      presencePenalty: 2,
    });
    expect(withFields({ temperature: 2, frequency_penalty: 2, presence_penalty: -2 }).sampling).toMatchObject(
      {
        temperature: 2,
        frequencyPenalty: 2,
        presencePenalty: -2,
      },
    );
  });

  it("treats null as absent for every optional field", () => {
    const nulls = Object.fromEntries(
      [
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "frequency_penalty",
        "presence_penalty",
        "n",
        "max_tokens",
        "max_completion_tokens",
        "seed",
        "stop",
        "stream",
        "stream_options",
        "chat_template_kwargs",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "logprobs",
        "top_logprobs",
        "logit_bias",
        "user",
        "metadata",
        "store",
        "service_tier",
        "prediction",
      ].map((field) => [field, null]),
    );
    expect(withFields(nulls)).toEqual(parse(base));
    expect(withMessages({ role: "user", content: "hi", name: null }).messages).toEqual([
      { role: "user", content: "hi" },
    ]);
    expect(
      withFields({
        stream: true,
        stream_options: { include_usage: null },
        chat_template_kwargs: { enable_thinking: null },
      }),
    ).toMatchObject({ includeUsage: false, enableThinking: false });
  });

  it("maps every role; developer becomes system", () => {
    const parsed = withMessages(
      { role: "system", content: "s", name: "sys" },
      { role: "developer", content: "d" },
      { role: "user", content: "u", name: "alice" },
      { role: "assistant", content: "a", name: "bot" },
      { role: "tool", content: "t", tool_call_id: "call_1" },
    );
    expect(parsed.messages).toEqual([
      { role: "system", content: "s", name: "sys" },
      { role: "system", content: "d" },
      { role: "user", content: "u", name: "alice" },
      { role: "assistant", content: "a", name: "bot" },
      { role: "tool", content: "t", toolCallId: "call_1" },
    ]);
  });

  it("joins text parts with no separator", () => {
    const parts = [
      { type: "text", text: "Hello, " },
      { type: "text", text: "world" },
    ];
    expect(withMessages({ role: "user", content: parts }).messages).toEqual([
      { role: "user", content: "Hello, world" },
    ]);
    expect(withMessages({ role: "system", content: [{ type: "text", text: "" }] }).messages[0]?.content).toBe(
      "",
    );
  });

  it("reads a null or absent assistant content beside tool_calls as empty text", () => {
    const call = { id: "call_1", type: "function", function: { name: "f", arguments: "{}" } };
    const parsed = withMessages(
      { role: "user", content: "q" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "call_1", content: "r" },
      { role: "assistant", tool_calls: [call] },
    );
    expect(parsed.messages[1]).toMatchObject({ role: "assistant", content: "" });
    expect(parsed.messages[3]).toMatchObject({ role: "assistant", content: "" });
  });

  it("accepts an earlier response sent back as it came (refusal, reasoning, tool_calls null) and drops those fields", () => {
    const echoed = { role: "assistant", content: "a", refusal: null, reasoning: "thought", tool_calls: null };
    expect(withMessages({ role: "user", content: "q" }, echoed).messages[1]).toEqual({
      role: "assistant",
      content: "a",
    });
  });

  it("accepts a reply from openai-node's parse sent back (parsed, parsed_arguments, annotations), none in the prompt", () => {
    const call = {
      id: "call_1",
      type: "function",
      function: { name: "f", arguments: '{"days":3}', parsed_arguments: { days: 3 } },
    };
    const echoed = { role: "assistant", content: null, parsed: null, annotations: [], tool_calls: [call] };
    expect(withMessages({ role: "user", content: "q" }, echoed).messages[1]).toEqual({
      role: "assistant",
      content: "",
      toolCalls: [{ id: "call_1", name: "f", arguments: '{"days":3}' }],
    });
  });

  it("accepts a tool result with the function's name (LangChain sends it) and keeps the name", () => {
    const call = { id: "call_1", type: "function", function: { name: "f", arguments: "{}" } };
    const parsed = withMessages(
      { role: "user", content: "q" },
      { role: "assistant", tool_calls: [call] },
      { role: "tool", tool_call_id: "call_1", name: "f", content: "r" },
    );
    expect(parsed.messages[2]).toEqual({ role: "tool", content: "r", name: "f", toolCallId: "call_1" });
  });

  it("maps a seed onto unsigned 32 bits, negative seeds included", () => {
    expect(withFields({ seed: 0 }).sampling.seed).toBe(0);
    expect(withFields({ seed: -1 }).sampling.seed).toBe(4294967295);
    expect(withFields({ seed: 2 ** 32 + 5 }).sampling.seed).toBe(5);
    expect(withFields({ seed: Number.MAX_SAFE_INTEGER }).sampling.seed).toBe(4294967295);
  });

  it("takes stop as a string or an array and drops empty strings", () => {
    expect(withFields({ stop: "END" }).sampling.stop).toEqual(["END"]);
    expect(withFields({ stop: "" }).sampling.stop).toEqual([]);
    expect(withFields({ stop: ["a", "", "b", "c"] }).sampling.stop).toEqual(["a", "b", "c"]);
    expect(withFields({ stop: [] }).sampling.stop).toEqual([]);
  });

  it("takes max_completion_tokens as an alias of max_tokens", () => {
    expect(withFields({ max_completion_tokens: 7 }).sampling.maxTokens).toBe(7);
  });

  it("reads stream_options only with stream true; include_usage defaults to false", () => {
    expect(withFields({ stream: true, stream_options: {} }).includeUsage).toBe(false);
    expect(withFields({ stream: true, stream_options: { include_usage: false } }).includeUsage).toBe(false);
    expect(withFields({ stream: false }).stream).toBe(false);
  });

  it("accepts response_format text", () => {
    expect(withFields({ response_format: { type: "text" } })).toEqual(parse(base));
  });

  it("accepts and ignores the OpenAI fields that do not change the output", () => {
    const ignored = {
      metadata: { team: "a" },
      store: false,
      service_tier: "auto",
      prediction: { type: "content", content: "draft" },
      safety_identifier: "hash",
      logprobs: false,
      logit_bias: {},
    };
    expect(withFields(ignored)).toEqual(parse(base));
    expect(withFields({ service_tier: "default" })).toEqual(parse(base));
  });
});

describe("parseChatRequest: body and top-level 400s", () => {
  it.each([[[]], ["text"], [null], [42], [true]])("rejects a body that is not an object: %j", (body) => {
    expect400(() => parse(body), null, "The request body must be a JSON object.");
  });

  it("answers 400 invalid_request_error with the OpenAI body", () => {
    const err = rejection(() => withFields({ temperature: "hot" }));
    expect(err.status).toBe(400);
    expect(err.toBody()).toEqual({
      error: {
        message: "Invalid type for 'temperature': expected a number, but got a string instead.",
        type: "invalid_request_error",
        param: "temperature",
        code: "invalid_request_error",
      },
    });
  });

  it("rejects an unknown top-level field with OpenAI's message", () => {
    expect400(
      () => withFields({ mirostat: 2 }),
      "mirostat",
      "Unrecognized request argument supplied: mirostat",
    );
  });

  it.each<[string, Record<string, unknown>, string, RegExp | string]>([
    ["model missing", { model: undefined }, "model", "Missing required parameter: 'model'."],
    ["model empty", { model: "" }, "model", /'model'.*an empty string/],
    [
      "model null",
      { model: null },
      "model",
      "Invalid type for 'model': expected a string, but got null instead.",
    ],
    [
      "model a number",
      { model: 5 },
      "model",
      "Invalid type for 'model': expected a string, but got an integer instead.",
    ],
    ["messages missing", { messages: undefined }, "messages", "Missing required parameter: 'messages'."],
    ["messages empty", { messages: [] }, "messages", /'messages'.*at least 1 .*an empty array/],
    ["messages a string", { messages: "hi" }, "messages", /expected an array, but got a string/],
    ["temperature a string", { temperature: "hot" }, "temperature", /expected a number, but got a string/],
    [
      "temperature below 0",
      { temperature: -0.1 },
      "temperature",
      "Invalid 'temperature': expected a value >= 0, but got -0.1 instead.",
    ],
    [
      "temperature above 2",
      { temperature: 2.1 },
      "temperature",
      "Invalid 'temperature': expected a value <= 2, but got 2.1 instead.",
    ],
    ["top_p 0", { top_p: 0 }, "top_p", "Invalid 'top_p': expected a value > 0, but got 0 instead."],
    ["top_p above 1", { top_p: 1.1 }, "top_p", /<= 1, but got 1.1/],
    [
      "top_k below -1",
      { top_k: -2 },
      "top_k",
      "Invalid 'top_k': expected a value >= -1, but got -2 instead.",
    ],
    ["top_k a decimal", { top_k: 2.5 }, "top_k", /'top_k': expected an integer/],
    ["top_k a string", { top_k: "40" }, "top_k", /expected a number, but got a string/],
    [
      "min_p below 0",
      { min_p: -0.1 },
      "min_p",
      "Invalid 'min_p': expected a value >= 0, but got -0.1 instead.",
    ],
    ["min_p above 1", { min_p: 1.5 }, "min_p", /'min_p': expected a value <= 1, but got 1.5/],
    [
      "repetition_penalty 0",
      { repetition_penalty: 0 },
      "repetition_penalty",
      "Invalid 'repetition_penalty': expected a value > 0, but got 0 instead.",
    ],
    ["repetition_penalty negative", { repetition_penalty: -1 }, "repetition_penalty", /> 0, but got -1/],
    ["frequency_penalty above 2", { frequency_penalty: 3 }, "frequency_penalty", /<= 2, but got 3/],
    ["frequency_penalty below -2", { frequency_penalty: -2.5 }, "frequency_penalty", />= -2, but got -2.5/],
    ["presence_penalty below -2", { presence_penalty: -3 }, "presence_penalty", />= -2, but got -3/],
    [
      "presence_penalty a boolean",
      { presence_penalty: true },
      "presence_penalty",
      /expected a number, but got a boolean/,
    ],
    ["n 0", { n: 0 }, "n", "Invalid 'n': expected a value >= 1, but got 0 instead."],
    [
      "n a decimal",
      { n: 1.5 },
      "n",
      "Invalid type for 'n': expected an integer, but got a decimal number instead.",
    ],
    ["n a string", { n: "2" }, "n", /expected a number, but got a string/],
    ["max_tokens 0", { max_tokens: 0 }, "max_tokens", />= 1, but got 0/],
    ["max_tokens a decimal", { max_tokens: 2.5 }, "max_tokens", /expected an integer/],
    ["max_completion_tokens 0", { max_completion_tokens: 0 }, "max_completion_tokens", />= 1, but got 0/],
    ["seed a decimal", { seed: 1.5 }, "seed", /'seed': expected an integer/],
    ["seed beyond safe integers", { seed: 2 ** 60 }, "seed", /'seed': expected a value <= 9007199254740991/],
    ["seed a string", { seed: "7" }, "seed", /expected a number, but got a string/],
    [
      "stop a number",
      { stop: 5 },
      "stop",
      "Invalid type for 'stop': expected a string or an array, but got an integer instead.",
    ],
    ["stop five strings", { stop: ["a", "b", "c", "d", "e"] }, "stop", /'stop'.*at most 4 .*got 5/],
    [
      "stop with a number",
      { stop: ["a", 2] },
      "stop[1]",
      "Invalid type for 'stop[1]': expected a string, but got an integer instead.",
    ],
    ["stream a string", { stream: "yes" }, "stream", /expected a boolean, but got a string/],
    ["user a number", { user: 5 }, "user", /expected a string/],
    ["user over 64 characters", { user: "u".repeat(65) }, "user", /'user'.*at most 64/],
    [
      "user an API key",
      { user: `sk-${"A1b2".repeat(10)}xyz` },
      "user",
      /Invalid 'user': it has the form of an API key/,
    ],
    ["metadata value a number", { metadata: { a: 1 } }, "metadata.a", /expected a string/],
    ["metadata an array", { metadata: ["a"] }, "metadata", /expected an object, but got an array/],
    [
      "service_tier unknown",
      { service_tier: "turbo" },
      "service_tier",
      "Invalid value for 'service_tier': 'turbo'. Supported values are: 'auto', 'default', 'flex', 'scale', 'priority', and 'fast'.",
    ],
  ])("%s", (_, fields, param, message) => {
    expect400(() => withFields(fields), param, message);
  });
});

describe("parseChatRequest: cross-field rules", () => {
  it("caps n at the configured maximum and says it", () => {
    expect400(() => withFields({ n: MAX_N + 1 }), "n", /'n': expected a value <= 4, but got 5.*at most 4/);
    expect(parseChatRequest({ ...base, n: 9 }, { maxN: 9 }).n).toBe(9);
  });

  it("allows stream_options only when stream is true", () => {
    const message = "The 'stream_options' parameter is only allowed when 'stream' is enabled.";
    expect400(() => withFields({ stream_options: { include_usage: true } }), "stream_options", message);
    expect400(() => withFields({ stream: false, stream_options: {} }), "stream_options", message);
  });

  it("checks stream_options' own fields", () => {
    expect400(
      () => withFields({ stream: true, stream_options: { include_usage: "yes" } }),
      "stream_options.include_usage",
      /expected a boolean, but got a string/,
    );
    expect400(
      () => withFields({ stream: true, stream_options: { include_obfuscation: "no" } }),
      "stream_options.include_obfuscation",
      /expected a boolean, but got a string/,
    );
    expect400(
      () => withFields({ stream: true, stream_options: { include_padding: false } }),
      "stream_options.include_padding",
      "Unrecognized argument supplied in 'stream_options': include_padding",
    );
  });

  it("refuses max_tokens and max_completion_tokens together", () => {
    expect400(
      () => withFields({ max_tokens: 5, max_completion_tokens: 5 }),
      "max_tokens",
      "Use either max_tokens or max_completion_tokens, not both.",
    );
  });
});

describe("parseChatRequest: message 400s", () => {
  it.each<[string, unknown[], string, RegExp | string]>([
    ["a message that is not an object", ["hi"], "messages[0]", /expected an object, but got a string/],
    [
      "a missing role",
      [{ content: "x" }],
      "messages[0].role",
      "Missing required parameter: 'messages[0].role'.",
    ],
    [
      "an unknown role",
      [
        { role: "user", content: "a" },
        { role: "function", content: "x" },
      ],
      "messages[1].role",
      "Invalid value for 'messages[1].role': 'function'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.",
    ],
    [
      "a role of the wrong type",
      [{ role: 1, content: "x" }],
      "messages[0].role",
      /Invalid value for 'messages\[0\].role': 1\./,
    ],
    [
      "user content missing",
      [{ role: "user" }],
      "messages[0].content",
      "Missing required parameter: 'messages[0].content'.",
    ],
    [
      "user content null",
      [{ role: "user", content: null }],
      "messages[0].content",
      /expected a string or an array, but got null/,
    ],
    ["system content missing", [{ role: "system" }], "messages[0].content", /Missing required parameter/],
    [
      "tool content missing",
      [{ role: "tool", tool_call_id: "c" }],
      "messages[0].content",
      /Missing required parameter/,
    ],
    [
      "content a number",
      [{ role: "user", content: 5 }],
      "messages[0].content",
      /expected a string or an array, but got an integer/,
    ],
    [
      "content an empty array",
      [{ role: "user", content: [] }],
      "messages[0].content",
      /at least 1 .*an empty array/,
    ],
    [
      "an image part",
      [
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "image_url", image_url: { url: "x" } },
          ],
        },
      ],
      "messages[0].content[1].type",
      "Content parts of type 'image_url' are not supported; Hearth accepts only 'text' parts.",
    ],
    [
      "a part without type",
      [{ role: "user", content: [{ text: "a" }] }],
      "messages[0].content[0].type",
      /Missing required/,
    ],
    [
      "a part that is a string",
      [{ role: "user", content: ["a"] }],
      "messages[0].content[0]",
      /expected an object/,
    ],
    [
      "a text part without text",
      [{ role: "user", content: [{ type: "text" }] }],
      "messages[0].content[0].text",
      /Missing required/,
    ],
    [
      "a text part with a number",
      [{ role: "user", content: [{ type: "text", text: 1 }] }],
      "messages[0].content[0].text",
      /expected a string/,
    ],
    [
      "a text part with an extra key",
      [{ role: "user", content: [{ type: "text", text: "a", cache: true }] }],
      "messages[0].content[0].cache",
      "Unrecognized argument supplied in 'messages[0].content[0]': cache",
    ],
    [
      "a name that is a number",
      [{ role: "user", content: "a", name: 5 }],
      "messages[0].name",
      /expected a string/,
    ],
    [
      "a tool message without tool_call_id",
      [{ role: "tool", content: "r" }],
      "messages[0].tool_call_id",
      "Missing required parameter: 'messages[0].tool_call_id'.",
    ],
    [
      "a tool_call_id of the wrong type",
      [{ role: "tool", content: "r", tool_call_id: 3 }],
      "messages[0].tool_call_id",
      /expected a string/,
    ],
    [
      "tool_call_id on a user message",
      [{ role: "user", content: "a", tool_call_id: "c" }],
      "messages[0].tool_call_id",
      /Unrecognized argument supplied in 'messages\[0\]': tool_call_id/,
    ],
    [
      "tool_calls on a tool message",
      [{ role: "tool", content: "r", tool_call_id: "c", tool_calls: [] }],
      "messages[0].tool_calls",
      /Unrecognized argument/,
    ],
    [
      "an unknown message key",
      [{ role: "user", content: "a", foo: 1 }],
      "messages[0].foo",
      "Unrecognized argument supplied in 'messages[0]': foo",
    ],
    [
      "assistant tool_calls without a function",
      [
        { role: "user", content: "q" },
        { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function" }] },
      ],
      "messages[1].tool_calls[0].function",
      "Missing required parameter: 'messages[1].tool_calls[0].function'.",
    ],
  ])("rejects %s", (_, messages, param, message) => {
    expect400(() => withMessages(...messages), param, message);
  });
});

describe("parseChatRequest: chat_template_kwargs", () => {
  it("accepts only enable_thinking, a boolean", () => {
    expect(withFields({ chat_template_kwargs: {} }).enableThinking).toBe(false);
    expect400(
      () => withFields({ chat_template_kwargs: { enable_thinking: true, add_generation_prompt: false } }),
      "chat_template_kwargs.add_generation_prompt",
      /Unrecognized argument supplied in 'chat_template_kwargs': add_generation_prompt/,
    );
    expect400(
      () => withFields({ chat_template_kwargs: { enable_thinking: "yes" } }),
      "chat_template_kwargs.enable_thinking",
      /expected a boolean, but got a string/,
    );
    expect400(() => withFields({ chat_template_kwargs: "x" }), "chat_template_kwargs", /expected an object/);
  });
});

describe("parseChatRequest: fields not supported", () => {
  it.each<[string, Record<string, unknown>, string, RegExp | string]>([
    [
      "a strict json_schema with a pattern outside the supported subset",
      {
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "string", pattern: "(?=a)a+" }, strict: true },
        },
      },
      "response_format.json_schema.schema",
      /'pattern' is not supported/,
    ],
    [
      "json_object with extras",
      { response_format: { type: "json_object", schema: {} } },
      "response_format.schema",
      /Unrecognized argument/,
    ],
    [
      "an unknown response_format type",
      { response_format: { type: "xml" } },
      "response_format.type",
      /Invalid value for 'response_format.type': 'xml'\. Supported values are: 'text', 'json_object', and 'json_schema'\./,
    ],
    [
      "response_format without type",
      { response_format: {} },
      "response_format.type",
      /Missing required parameter/,
    ],
    [
      "response_format text with extras",
      { response_format: { type: "text", x: 1 } },
      "response_format.x",
      /Unrecognized argument/,
    ],
    ["empty tools", { tools: [] }, "tools", /at least 1 element/],
    [
      "tool_choice without tools",
      { tool_choice: "auto" },
      "tool_choice",
      "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
    ],
    [
      "parallel_tool_calls without tools",
      { parallel_tool_calls: false },
      "parallel_tool_calls",
      "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.",
    ],
    ["an empty functions list", { functions: [] }, "functions", /expected an array with at least 1 element/],
    [
      "function_call without functions",
      { function_call: "auto" },
      "function_call",
      "Invalid value for 'function_call': 'function_call' is only allowed when 'functions' are specified.",
    ],
    ["logit_bias of the wrong type", { logit_bias: { "1": "x" } }, "logit_bias.1", /expected a number/],
    ["modalities", { modalities: ["text", "audio"] }, "modalities", /text only/],
    ["audio", { audio: { voice: "alloy", format: "mp3" } }, "audio", /text only/],
    ["web_search_options", { web_search_options: {} }, "web_search_options", /no web search/],
    ["a prediction of another type", { prediction: { type: "x" } }, "prediction.type", /Invalid value/],
  ])("rejects %s", (_, fields, param, message) => {
    expect400(() => withFields(fields), param, message);
  });
});

describe("parseChatRequest: logprobs, top_logprobs, logit_bias", () => {
  it("maps logprobs and top_logprobs to the number of alternatives; absent or false means none", () => {
    expect(withFields({ logprobs: true }).sampling.logprobs).toBe(0);
    expect(withFields({ logprobs: true, top_logprobs: 20 }).sampling.logprobs).toBe(20);
    expect(withFields({ logprobs: true, top_logprobs: 0 }).sampling.logprobs).toBe(0);
    expect(withFields({ logprobs: false }).sampling.logprobs).toBeUndefined();
    expect(parse(base).sampling.logprobs).toBeUndefined();
  });

  it("maps logit_bias to token ids; an empty one is no bias", () => {
    const bias = withFields({ logit_bias: { "0": -100, "50256": 100, "17": 0.5 } }).sampling.logitBias;
    expect(bias).toEqual(
      new Map([
        [0, -100],
        [50256, 100],
        [17, 0.5],
      ]),
    );
    expect(withFields({ logit_bias: {} }).sampling.logitBias).toBeUndefined();
  });

  it("accepts 300 biased tokens", () => {
    const bias = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [String(i), -1]));
    expect(withFields({ logit_bias: bias }).sampling.logitBias?.size).toBe(300);
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    [
      "top_logprobs without logprobs",
      { top_logprobs: 2 },
      "top_logprobs",
      /'logprobs' must be set to true when 'top_logprobs' is used/,
    ],
    [
      "top_logprobs with logprobs false",
      { logprobs: false, top_logprobs: 0 },
      "top_logprobs",
      /'logprobs' must be set to true/,
    ],
    ["top_logprobs above 20", { logprobs: true, top_logprobs: 21 }, "top_logprobs", /20/],
    ["a negative top_logprobs", { logprobs: true, top_logprobs: -1 }, "top_logprobs", /0/],
    ["a fractional top_logprobs", { logprobs: true, top_logprobs: 1.5 }, "top_logprobs", /integer/],
    ["logprobs that is not a boolean", { logprobs: 5 }, "logprobs", /boolean/],
    ["a bias above 100", { logit_bias: { "5": 100.5 } }, "logit_bias", /from -100 to 100, but got 100.5/],
    ["a bias below -100", { logit_bias: { "5": -101 } }, "logit_bias", /from -100 to 100/],
    [
      "a key that is not a token id",
      { logit_bias: { abc: 1 } },
      "logit_bias",
      /Invalid key in 'logit_bias': 'abc'/,
    ],
    ["a negative key", { logit_bias: { "-1": 1 } }, "logit_bias", /Invalid key/],
    ["a fractional key", { logit_bias: { "1.5": 1 } }, "logit_bias", /Invalid key/],
    ["a key with a leading zero", { logit_bias: { "07": 1 } }, "logit_bias", /Invalid key/],
    ["a key beyond 32 bits", { logit_bias: { "99999999999": 1 } }, "logit_bias", /Invalid key/],
    ["logit_bias that is not an object", { logit_bias: [1] }, "logit_bias", /object/],
  ])("rejects %s", (_, fields, param, message) => {
    expect400(() => withFields(fields), param, message);
  });

  it("rejects more than 300 biased tokens", () => {
    const bias = Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), -1]));
    expect400(
      () => withFields({ logit_bias: bias }),
      "logit_bias",
      "Invalid 'logit_bias': expected at most 300 tokens, but got 301 instead.",
    );
  });
});

describe("parseJsonBody", () => {
  it("returns the parsed value", () => {
    expect(parseJsonBody('{"a":[1,null]}')).toEqual({ a: [1, null] });
  });

  it.each([["{"], [""], ["{'a':1}"], ["[1,]"]])("answers 400 for %j", (text) => {
    expect400(() => parseJsonBody(text), null, /^We could not parse the JSON body of your request\./);
  });
});

describe("wire builders", () => {
  it("makes chatcmpl- ids of 29 base62 characters, different each time", () => {
    const ids = Array.from({ length: 200 }, completionId);
    for (const id of ids) expect(id).toMatch(/^chatcmpl-[0-9A-Za-z]{29}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("maps usage counts to the wire usage", () => {
    expect(toUsage({ promptTokens: 10, completionTokens: 5, cachedTokens: 3 })).toEqual({
      prompt_tokens: 10,
      completion_tokens: 5,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 3 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
  });
});
