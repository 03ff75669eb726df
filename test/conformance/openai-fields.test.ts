// Conformance of the newer OpenAI request fields with the official openai client and a real server on both model
// families: tool_choice allowed_tools (auto and required), reasoning_effort, and the fields accepted as they come.
import { APIError } from "openai";
import type {
  ChatCompletion,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { describe, expect, it } from "vitest";
import { MODEL_FAMILIES } from "../support/models.js";
import { serveModelFamilies } from "../support/served-models.js";

const served = serveModelFamilies();

const tool = (name: string, description: string, property: string): ChatCompletionTool => ({
  type: "function",
  function: {
    name,
    description,
    parameters: {
      type: "object",
      properties: { [property]: { type: "string" } },
      required: [property],
      additionalProperties: false,
    },
  },
});

const WEATHER = tool("get_weather", "Current weather of a city", "city");
const TIME = tool("get_time", "Current local time of a city", "city");
const MAIL = tool("send_mail", "Send an e-mail", "to");

/** OpenAI's allowed_tools form, as the SDK types it. */
const allowed = (mode: "auto" | "required", ...names: string[]) =>
  ({
    type: "allowed_tools",
    allowed_tools: { mode, tools: names.map((name) => ({ type: "function", function: { name } })) },
  }) as const;

function callsOf(completion: ChatCompletion): { name: string; arguments: string }[] {
  return (completion.choices[0]?.message.tool_calls ?? []).map((call) => {
    if (call.type !== "function") throw new Error(`unexpected ${call.type} call`);
    return call.function;
  });
}

/** Prompts that ask for the weather: the tool a model reaches for first, which allowed_tools leaves out. */
const WEATHER_PROMPTS = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Perth"].map(
  (city) => `What's the weather in ${city} right now?`,
);

describe.each(MODEL_FAMILIES)("$model.id", ({ model: { id: MODEL } }) => {
  const create = (params: Omit<ChatCompletionCreateParamsNonStreaming, "model">) =>
    served.client.chat.completions.create({ model: MODEL, ...params });

  describe("tool_choice allowed_tools", () => {
    it("mode required: every reply calls one of the allowed tools, never another (sampled)", async () => {
      const results = await Promise.all(
        WEATHER_PROMPTS.map((content, i) =>
          create({
            messages: [{ role: "user", content }],
            tools: [WEATHER, TIME, MAIL],
            tool_choice: allowed("required", "get_time", "send_mail"),
            max_tokens: 48,
            seed: 300 + i,
          }),
        ),
      );
      for (const completion of results) {
        expect(completion.choices[0]?.finish_reason).toBe("tool_calls");
        const calls = callsOf(completion);
        expect(calls.length).toBeGreaterThan(0);
        for (const call of calls) {
          expect(["get_time", "send_mail"]).toContain(call.name);
          expect(typeof JSON.parse(call.arguments)).toBe("object");
        }
      }
    }, 300_000);

    it("mode auto: text or a call to an allowed tool, never another (sampled)", async () => {
      const results = await Promise.all(
        WEATHER_PROMPTS.map((content, i) =>
          create({
            messages: [{ role: "user", content }],
            tools: [WEATHER, TIME],
            tool_choice: allowed("auto", "get_time"),
            max_tokens: 32,
            seed: 400 + i,
          }),
        ),
      );
      for (const completion of results) {
        const calls = callsOf(completion);
        for (const call of calls) expect(call.name).toBe("get_time");
        if (calls.length === 0) {
          const content = completion.choices[0]?.message.content;
          expect(typeof content).toBe("string");
          // No call to another tool in the text either: neither the tool-call marker (Hearth's format on both
          // families is hermes) nor a call's start naming it. A reply may still name the tool in prose (both
          // families were seen writing "Calling "get_weather" in ..." and "function get_weather_data(...)"):
          // that is text, not a call.
          expect(content).not.toContain("<tool_call>");
          expect(content).not.toMatch(/\{\s*"name"\s*:\s*"get_weather"/);
        }
      }
    }, 300_000);

    it("a tool_choice outside every form is a 400 that lists them", async () => {
      const error = await create({
        messages: [{ role: "user", content: "x" }],
        tools: [WEATHER],
        tool_choice: "always" as "auto",
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(400);
      expect((error as APIError).param).toBe("tool_choice");
      expect((error as APIError).message).toMatch(/'none', 'auto', 'required'.*"function".*"allowed_tools"/);
    });
  });

  describe("reasoning_effort", () => {
    const question = [{ role: "user" as const, content: "Is 17 a prime number?" }];

    it("low: a reasoning field beside the answer; none and minimal: no reasoning", async () => {
      const [low, none, minimal] = await Promise.all([
        create({ messages: question, max_tokens: 48, reasoning_effort: "low" }),
        create({ messages: question, max_tokens: 24, reasoning_effort: "none" }),
        create({ messages: question, max_tokens: 24, reasoning_effort: "minimal" }),
      ]);
      const message = low.choices[0]?.message as { content: string | null; reasoning?: string };
      expect(typeof message.reasoning).toBe("string");
      expect(message.reasoning?.length).toBeGreaterThan(0);
      expect(low.usage?.completion_tokens_details?.reasoning_tokens ?? 0).toBeGreaterThan(0);
      for (const off of [none, minimal]) {
        expect("reasoning" in (off.choices[0]?.message ?? {})).toBe(false);
        expect(off.usage?.completion_tokens_details?.reasoning_tokens).toBe(0);
      }
    });

    it("disagreeing with chat_template_kwargs.enable_thinking is a 400 naming both", async () => {
      const error = await create({
        messages: question,
        reasoning_effort: "high",
        chat_template_kwargs: { enable_thinking: false },
      } as Omit<ChatCompletionCreateParamsNonStreaming, "model">).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(400);
      expect((error as APIError).param).toBe("reasoning_effort");
      expect((error as APIError).message).toMatch(
        /'reasoning_effort'.*'chat_template_kwargs.enable_thinking'/,
      );
    });
  });

  describe("the deprecated functions and function_call", () => {
    const functions = [
      {
        name: "get_weather",
        description: "Current weather of a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    ];
    const messages = [{ role: "user" as const, content: "What's the weather in Lima?" }];

    it("a named function_call: message.function_call with valid arguments, finish_reason function_call", async () => {
      const completion = await create({
        messages,
        functions,
        function_call: { name: "get_weather" },
        max_tokens: 40,
      } as Omit<ChatCompletionCreateParamsNonStreaming, "model">);
      const choice = completion.choices[0];
      expect(choice?.finish_reason).toBe("function_call");
      expect(choice?.message.tool_calls).toBeUndefined();
      expect(choice?.message.function_call?.name).toBe("get_weather");
      expect(JSON.parse(choice?.message.function_call?.arguments ?? "")).toMatchObject({
        city: expect.any(String),
      });
    });

    it("streamed: the SDK's chat.completions.stream helper reassembles the function_call", async () => {
      const stream = served.client.chat.completions.stream({
        model: MODEL,
        messages,
        functions,
        function_call: { name: "get_weather" },
        max_tokens: 40,
      });
      const completion = await stream.finalChatCompletion();
      expect(completion.choices[0]?.finish_reason).toBe("function_call");
      const call = completion.choices[0]?.message.function_call;
      expect(call?.name).toBe("get_weather");
      expect(JSON.parse(call?.arguments ?? "")).toMatchObject({ city: expect.any(String) });
    });
  });

  it("accepts the fields that tune OpenAI's own service, streamed, as the SDK sends them", async () => {
    const stream = await served.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Say hi." }],
      max_completion_tokens: 8,
      stream: true,
      stream_options: { include_usage: true, include_obfuscation: false },
      verbosity: "low",
      prompt_cache_key: "conformance",
      prompt_cache_retention: "24h",
      prompt_cache_options: { mode: "implicit", ttl: "30m" },
      moderation: { model: "omni-moderation-latest", policy: { input: { mode: "score" } } },
      store: true,
      service_tier: "flex",
      modalities: ["text"],
      metadata: { suite: "conformance" },
      safety_identifier: "hash-1",
    } as ChatCompletionCreateParamsStreaming);
    let text = "";
    let usage: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      usage = chunk.usage ?? usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage).toMatchObject({ completion_tokens: expect.any(Number) });
  });
});
