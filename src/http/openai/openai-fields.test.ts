// The fields of the newest OpenAI SDKs' ChatCompletionCreateParams: each accepted, mapped, or refused with a reason.
import { describe, expect, it } from "vitest";
import { REASONING_EFFORTS } from "../../engine/types.js";
import { InvalidRequestError } from "../errors/api-error.js";
import { parseChatRequest } from "./chat-request.js";

const base = { model: "m", messages: [{ role: "user", content: "hi" }] };
const parse = (body: unknown) => parseChatRequest(body, { maxN: 4 });
const withFields = (fields: Record<string, unknown>) => parse({ ...base, ...fields });

function expect400(run: () => unknown, param: string | null, message: RegExp) {
  let error: unknown;
  try {
    run();
  } catch (err) {
    error = err;
  }
  expect(error).toBeInstanceOf(InvalidRequestError);
  expect((error as InvalidRequestError).param).toBe(param);
  expect((error as InvalidRequestError).message).toMatch(message);
}

describe("accepted and ignored fields", () => {
  it.each<[string, Record<string, unknown>]>([
    ["verbosity", { verbosity: "low" }],
    ["prompt_cache_retention 24h", { prompt_cache_retention: "24h" }],
    ["prompt_cache_retention in_memory", { prompt_cache_retention: "in_memory" }],
    ["prompt_cache_options", { prompt_cache_options: { mode: "explicit", ttl: "30m" } }],
    ["moderation without a policy", { moderation: { model: "omni-moderation-latest" } }],
    [
      "moderation scoring",
      {
        moderation: {
          model: "omni-moderation-latest",
          policy: { input: { mode: "score" }, output: null },
        },
      },
    ],
    ["store true", { store: true }],
    ["service_tier priority", { service_tier: "priority" }],
    ["service_tier flex", { service_tier: "flex" }],
    ["modalities text", { modalities: ["text"] }],
    ["stream_options.include_obfuscation", { stream: true, stream_options: { include_obfuscation: false } }],
  ])("%s: the request is what it would be without it", (_, fields) => {
    const without = withFields(fields.stream === true ? { stream: true } : {});
    expect(withFields(fields)).toEqual(without);
  });

  it("accepts a text part's prompt_cache_breakpoint and drops it", () => {
    const part = { type: "text", text: "hi", prompt_cache_breakpoint: { mode: "explicit", ttl: "12h" } };
    expect(parse({ ...base, messages: [{ role: "user", content: [part] }] }).messages).toEqual([
      { role: "user", content: "hi" },
    ]);
  });

  it("treats null as absent for every new field", () => {
    const nulls = {
      verbosity: null,
      prompt_cache_retention: null,
      moderation: null,
      reasoning_effort: null,
      modalities: null,
      prompt_cache_key: null,
    };
    expect(withFields(nulls)).toEqual(parse(base));
  });
});

describe("refused capabilities", () => {
  it.each<[string, Record<string, unknown>, string, RegExp]>([
    ["audio output in modalities", { modalities: ["text", "audio"] }, "modalities", /text only/],
    ["audio", { audio: { voice: "alloy", format: "mp3" } }, "audio", /text only/],
    ["web_search_options", { web_search_options: {} }, "web_search_options", /no web search/],
    [
      "moderation that blocks",
      { moderation: { model: "omni-moderation-latest", policy: { output: { mode: "block" } } } },
      "moderation.policy.output.mode",
      /mode 'block' is not supported: Hearth runs no moderation model/,
    ],
    ["an unknown reasoning_effort", { reasoning_effort: "extreme" }, "reasoning_effort", /'none', 'minimal'/],
    ["an unknown verbosity", { verbosity: "terse" }, "verbosity", /'low', 'medium', and 'high'/],
  ])("%s", (_, fields, param, message) => {
    expect400(() => withFields(fields), param, message);
  });

  it("refuses an assistant message's audio reference; reads a legacy function_call as a tool call", () => {
    const messages = (assistant: Record<string, unknown>) => ({
      ...base,
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: "a", ...assistant },
      ],
    });
    expect400(() => parse(messages({ audio: { id: "audio_1" } })), "messages[1].audio", /text only/);
    expect(parse(messages({ function_call: { name: "f", arguments: "{}" } })).messages[1]).toEqual({
      role: "assistant",
      content: "a",
      toolCalls: [{ id: "call_function_1", name: "f", arguments: "{}" }],
    });
    expect400(() => parse(messages({ function_call: "f" })), "messages[1].function_call", /use 'tool_calls'/);
    expect(parse(messages({ audio: null })).messages[1]).toEqual({ role: "assistant", content: "a" });
  });
});

describe("reasoning_effort", () => {
  it.each(REASONING_EFFORTS)("%s maps onto thinking and travels to the engine", (effort) => {
    const parsed = withFields({ reasoning_effort: effort });
    expect(parsed.enableThinking).toBe(effort !== "none" && effort !== "minimal");
    expect(parsed.reasoningEffort).toBe(effort);
  });

  it("agrees with chat_template_kwargs.enable_thinking or is a 400 naming both", () => {
    const both = (effort: string, on: boolean) =>
      withFields({ reasoning_effort: effort, chat_template_kwargs: { enable_thinking: on } });
    expect(both("high", true).enableThinking).toBe(true);
    expect(both("none", false).enableThinking).toBe(false);
    expect(both("minimal", false).enableThinking).toBe(false);
    expect400(
      () => both("low", false),
      "reasoning_effort",
      /'reasoning_effort' \('low'\) and 'chat_template_kwargs.enable_thinking' \(false\) disagree/,
    );
    expect400(
      () => both("none", true),
      "reasoning_effort",
      /'reasoning_effort' \('none'\) and 'chat_template_kwargs.enable_thinking' \(true\) disagree/,
    );
  });

  it("leaves thinking off and sends no effort when absent", () => {
    const parsed = parse(base);
    expect(parsed.enableThinking).toBe(false);
    expect(parsed).not.toHaveProperty("reasoningEffort");
  });
});

describe("prompt_cache_key", () => {
  it("travels to the engine as the prefix-affinity key; an empty key is none", () => {
    expect(withFields({ prompt_cache_key: "user-42" }).promptCacheKey).toBe("user-42");
    expect(withFields({ prompt_cache_key: "" })).toEqual(parse(base));
  });
});

describe("assistant content parts", () => {
  const conversation = (content: unknown) => ({
    ...base,
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content },
    ],
  });

  it("accepts an earlier reply's refusal part and does not render it", () => {
    const parts = [
      { type: "text", text: "I can't help with " },
      { type: "refusal", refusal: "That request is not allowed." },
      { type: "text", text: "that." },
    ];
    expect(parse(conversation(parts)).messages[1]).toEqual({
      role: "assistant",
      content: "I can't help with that.",
    });
  });

  it("refuses other part types in assistant content and refusal parts elsewhere", () => {
    expect400(
      () => parse(conversation([{ type: "image_url", image_url: { url: "x" } }])),
      "messages[1].content[0].type",
      /'image_url' are not supported in assistant messages; Hearth accepts 'text' and 'refusal' parts/,
    );
    expect400(
      () => parse({ ...base, messages: [{ role: "user", content: [{ type: "refusal", refusal: "no" }] }] }),
      "messages[0].content[0].type",
      /'refusal' are not supported; Hearth accepts only 'text' parts/,
    );
  });
});
