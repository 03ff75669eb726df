// A request carrying every field of the newest OpenAI SDKs' ChatCompletionCreateParams (openai-node 7.57,
// openai-python 3.57) is accepted by the whole app in memory; the fields asking for what Hearth lacks are 400s.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FAKE_MODEL, type FakeEngine } from "../support/fake-engine.js";
import { startTestApp, type TestApp } from "../support/test-app.js";

let harness: TestApp<FakeEngine>;

beforeAll(async () => {
  harness = await startTestApp({ models: [{ id: FAKE_MODEL }] });
});

afterAll(async () => {
  await harness?.close();
});

const lookup = {
  type: "function",
  function: {
    name: "lookup_order",
    description: "Find an order by its id",
    parameters: {
      type: "object",
      properties: { order_id: { type: "string" } },
      required: ["order_id"],
      additionalProperties: false,
    },
    strict: true,
  },
};
const refund = {
  type: "function",
  function: {
    name: "refund_order",
    parameters: { type: "object", properties: { order_id: { type: "string" } }, required: ["order_id"] },
  },
};

/** Every field Hearth accepts, with the values an application would send. */
const ACCEPTED = {
  model: FAKE_MODEL,
  messages: [
    {
      role: "developer",
      content: [
        {
          type: "text",
          text: "You are ACME's support assistant.",
          prompt_cache_breakpoint: { mode: "explicit", ttl: "30m" },
        },
      ],
    },
    { role: "user", content: "Where is order 42?", name: "ana" },
    {
      role: "assistant",
      content: null,
      refusal: null,
      audio: null,
      tool_calls: [
        {
          id: "call_1",
          type: "function",
          function: { name: "lookup_order", arguments: '{"order_id":"42"}' },
        },
      ],
    },
    { role: "tool", tool_call_id: "call_1", content: "shipped" },
  ],
  frequency_penalty: 0.1,
  logit_bias: { "50256": -100 },
  logprobs: true,
  top_logprobs: 2,
  max_completion_tokens: 64,
  metadata: { conversation: "c-17" },
  modalities: ["text"],
  moderation: { model: "omni-moderation-latest", policy: { input: { mode: "score" }, output: null } },
  n: 1,
  parallel_tool_calls: false,
  prediction: { type: "content", content: "Your order shipped." },
  presence_penalty: 0.2,
  prompt_cache_key: "support-ana",
  prompt_cache_options: { mode: "implicit", ttl: "30m" },
  prompt_cache_retention: "24h",
  reasoning_effort: "low",
  response_format: { type: "text" },
  safety_identifier: "user-hash-1f2e",
  seed: 7,
  service_tier: "auto",
  stop: ["\n\nUser:"],
  store: true,
  stream: true,
  stream_options: { include_usage: true, include_obfuscation: false },
  temperature: 0.7,
  tool_choice: {
    type: "allowed_tools",
    allowed_tools: { mode: "auto", tools: [{ type: "function", function: { name: "lookup_order" } }] },
  },
  tools: [lookup, refund],
  top_p: 0.95,
  user: "user-hash-1f2e",
  verbosity: "medium",
};

/** The fields that ask for what Hearth does not have, each with a realistic value. */
const REFUSED: Record<string, unknown> = {
  audio: { voice: "alloy", format: "mp3" },
  web_search_options: { search_context_size: "low" },
};

/** The deprecated spelling of tools and tool_choice: sent in place of them (OpenAI refuses the two together). */
const LEGACY: Record<string, unknown> = {
  functions: [{ name: "lookup_order", parameters: { type: "object" } }],
  function_call: { name: "lookup_order" },
};

/** Also sent alone: the SDK's older spelling of max_completion_tokens (OpenAI refuses the two together). */
const ALTERNATIVES: Record<string, unknown> = { max_tokens: 64 };

/** The fields of `ChatCompletionCreateParamsBase` in a `completions.d.ts` of openai-node. */
function sdkFields(typesFile: string): string[] {
  const text = readFileSync(typesFile, "utf8");
  const start = text.indexOf("export interface ChatCompletionCreateParamsBase {");
  const end = text.indexOf("\n}", start);
  expect(start).toBeGreaterThan(-1);
  return [...text.slice(start, end).matchAll(/^ {4}([a-z_]+)\??:/gm)].map((m) => m[1] as string);
}

/** Fields of openai-node 7.57.0 and openai-python 3.57.0 (the newest when this was written; both the same set). */
const NEWEST_SDK_FIELDS = [
  "messages",
  "model",
  "audio",
  "frequency_penalty",
  "function_call",
  "functions",
  "logit_bias",
  "logprobs",
  "max_completion_tokens",
  "max_tokens",
  "metadata",
  "modalities",
  "moderation",
  "n",
  "parallel_tool_calls",
  "prediction",
  "presence_penalty",
  "prompt_cache_key",
  "prompt_cache_options",
  "prompt_cache_retention",
  "reasoning_effort",
  "response_format",
  "safety_identifier",
  "seed",
  "service_tier",
  "stop",
  "store",
  "stream",
  "stream_options",
  "temperature",
  "tool_choice",
  "tools",
  "top_logprobs",
  "top_p",
  "user",
  "verbosity",
  "web_search_options",
];

describe("every field of the OpenAI chat request", () => {
  it("this test covers every field of the newest SDK and of the installed openai package", () => {
    const covered = new Set([
      ...Object.keys(ACCEPTED),
      ...Object.keys(REFUSED),
      ...Object.keys(ALTERNATIVES),
      ...Object.keys(LEGACY),
    ]);
    const require = createRequire(import.meta.url);
    const installed = sdkFields(
      join(dirname(require.resolve("openai")), "resources/chat/completions/completions.d.ts"),
    );
    expect(installed.length).toBeGreaterThan(30);
    for (const field of [...NEWEST_SDK_FIELDS, ...installed]) expect(covered, field).toContain(field);
  });

  it("accepts them all at once and maps what it supports", async () => {
    const response = await harness.chat(ACCEPTED);
    expect(response.status, await response.clone().text()).toBe(200);
    await response.text();
    const request = harness.engine.requests.at(-1);
    expect(request).toMatchObject({
      enableThinking: true,
      reasoningEffort: "low",
      promptCacheKey: "support-ana",
      output: { toolChoice: { allowed: ["lookup_order"], mode: "auto" }, parallelToolCalls: false },
      sampling: { temperature: 0.7, topP: 0.95, maxTokens: 64, seed: 7, logprobs: 2 },
    });
    expect(request?.output?.tools.map((tool) => tool.name)).toEqual(["lookup_order", "refund_order"]);
  });

  it("accepts max_tokens in place of max_completion_tokens", async () => {
    const { max_completion_tokens: _, ...rest } = ACCEPTED;
    const response = await harness.chat({
      ...rest,
      ...ALTERNATIVES,
      stream: false,
      stream_options: undefined,
    });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(harness.engine.requests.at(-1)?.sampling.maxTokens).toBe(64);
  });

  it("accepts the legacy functions and function_call in place of tools and tool_choice", async () => {
    const { tools: _, tool_choice: __, parallel_tool_calls: ___, ...rest } = ACCEPTED;
    const response = await harness.chat({ ...rest, ...LEGACY, stream: false, stream_options: undefined });
    expect(response.status, await response.clone().text()).toBe(200);
    expect(harness.engine.requests.at(-1)?.output).toMatchObject({
      toolChoice: { name: "lookup_order" },
      parallelToolCalls: false,
    });
  });

  it.each(Object.entries(REFUSED))("answers %s with a 400 naming it and why", async (field, value) => {
    const response = await harness.chat({ ...ACCEPTED, [field]: value });
    expect(response.status).toBe(400);
    const { error } = (await response.json()) as { error: { message: string; param: string } };
    expect(error.param).toBe(field);
    expect(error.message).toMatch(new RegExp(`'${field}' parameter is not supported: \\S`));
  });
});
