// Conformance of JSON mode, tools and reasoning: the official openai client and a real server, on both real model
// families (SmolLM2's ChatML, Gemma 3's turns). Model-dependent checks use grammar-forced output.

import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import type OpenAI from "openai";
import { APIError } from "openai";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { describe, expect, it } from "vitest";
import { MODEL_FAMILIES } from "../support/models.js";
import { serveModelFamilies } from "../support/served-models.js";

const served = serveModelFamilies();

type Params = Omit<ChatCompletionCreateParamsNonStreaming, "model"> & {
  chat_template_kwargs?: { enable_thinking: boolean };
};

const JSON_PROMPTS = [
  "Describe a cat as JSON.",
  "Give me a JSON object with the capital of France.",
  "List three fruits in JSON.",
  "Return a JSON object describing today's weather in Paris.",
  "Output a JSON profile of a fictional person named Ana.",
  "Make a JSON object with keys a, b and c.",
  "Reply in JSON: what is 2 + 2?",
  "JSON please: the colours of the rainbow.",
  "Summarise the plot of Hamlet as a JSON object.",
  "Create a JSON shopping list.",
  "Give a JSON object with the name and year of a famous book.",
  "Convert 'hello world' into a JSON object.",
  "Write a JSON config for a web server.",
  "As JSON: three planets and their order from the sun.",
  "Produce a JSON object that describes a car.",
  "Answer with JSON: is water wet?",
  "A JSON object with a greeting in three languages.",
  "JSON object: the first five prime numbers.",
  "Describe a recipe for tea as JSON.",
  "Return JSON with your favourite number.",
];

const WEATHER: ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Get the current weather for a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string", maxLength: 40 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city"],
      additionalProperties: false,
    },
  },
};
const TIME: ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_time",
    description: "Get the current time in a time zone",
    parameters: {
      type: "object",
      properties: { zone: { type: "string", maxLength: 40 }, hours24: { type: "boolean" } },
      required: ["zone", "hours24"],
    },
  },
};

const ajv = new Ajv2020.default({ strict: false });
addFormats.default(ajv);

const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** What zod 4 and pydantic write: ±(2^53−1) integers, ge/le, gt, date-time, uuid, a pattern, a tuple. */
const CONSTRAINED = {
  type: "object",
  properties: {
    id: { type: "integer", minimum: -MAX_SAFE, maximum: MAX_SAFE },
    stars: { type: "integer", minimum: 1, maximum: 10 },
    price: { type: "number", exclusiveMinimum: 0 },
    at: { type: "string", format: "date-time" },
    ref: { type: "string", format: "uuid" },
    sku: { type: "string", pattern: "^[A-Z]{3}-[0-9]{3}$" },
    pair: {
      type: "array",
      prefixItems: [
        { type: "integer", minimum: 0, maximum: 99 },
        { type: "string", format: "date" },
      ],
      minItems: 2,
      maxItems: 2,
    },
  },
  required: ["id", "stars", "price", "at", "ref", "sku", "pair"],
  additionalProperties: false,
};

const BOOKING = {
  type: "function" as const,
  function: {
    name: "book_table",
    description: "Book a restaurant table",
    parameters: {
      type: "object",
      properties: {
        people: { type: "integer", minimum: -MAX_SAFE, maximum: MAX_SAFE },
        at: { type: "string", format: "date-time" },
      },
      required: ["people", "at"],
      additionalProperties: false,
    },
  },
};

/** A call is valid when it names a given tool and its arguments satisfy that tool's schema (checked by hand). */
function expectValidCall(call: { id: string; type: string; function: { name: string; arguments: string } }) {
  expect(call.id).toMatch(/^call_[0-9A-Za-z]{24}$/);
  expect(call.type).toBe("function");
  const args = JSON.parse(call.function.arguments) as Record<string, unknown>;
  if (call.function.name === "get_weather") {
    expect(typeof args.city).toBe("string");
    expect((args.city as string).length).toBeLessThanOrEqual(40);
    if ("unit" in args) expect(["celsius", "fahrenheit"]).toContain(args.unit);
    expect(Object.keys(args).every((k) => k === "city" || k === "unit")).toBe(true);
  } else {
    expect(call.function.name).toBe("get_time");
    expect(typeof args.zone).toBe("string");
    expect(typeof args.hours24).toBe("boolean");
  }
}

function toolCallsOf(completion: ChatCompletion) {
  return (completion.choices[0]?.message.tool_calls ?? []).map((call) => {
    if (call.type !== "function") throw new Error("not a function call");
    return call;
  });
}

describe.each(MODEL_FAMILIES)("$model.id", ({ model: { id: MODEL }, sampledPrompts }) => {
  const create = (params: Params) =>
    served.client.chat.completions.create({
      model: MODEL,
      ...params,
    } as ChatCompletionCreateParamsNonStreaming);

  describe("JSON mode", () => {
    it(`${sampledPrompts} varied prompts all give a JSON object (sampled, concurrently)`, async () => {
      const prompts = JSON_PROMPTS.slice(0, sampledPrompts);
      const results = await Promise.all(
        prompts.map((content, i) =>
          create({
            messages: [{ role: "user", content }],
            response_format: { type: "json_object" },
            max_tokens: 40,
            seed: 2000 + i,
          }),
        ),
      );
      let parsed = 0;
      for (const completion of results) {
        const text = completion.choices[0]?.message.content ?? "";
        try {
          const value: unknown = JSON.parse(text);
          if (typeof value === "object" && value !== null && !Array.isArray(value)) parsed++;
        } catch {}
        expect(text).not.toMatch(/\n\s*\n/); // bounded whitespace: never a blank line
      }
      console.log(`JSON mode: ${parsed}/${results.length} parsed`);
      expect(parsed).toBe(prompts.length);
    }, 300_000);

    it("steers the JSON closed within a small max_tokens, down to one token", async () => {
      for (const max_tokens of [3, 6, 12]) {
        const completion = await create({
          messages: [{ role: "user", content: "Describe the city of Paris in great detail as JSON." }],
          response_format: { type: "json_object" },
          max_tokens,
          seed: max_tokens,
        });
        expect(typeof JSON.parse(completion.choices[0]?.message.content ?? "")).toBe("object");
        expect(completion.choices[0]?.finish_reason).toBe("stop");
        expect(completion.usage?.completion_tokens).toBeLessThanOrEqual(max_tokens);
      }
      const tiny = await create({
        messages: [{ role: "user", content: "JSON about Paris." }],
        response_format: { type: "json_object" },
        max_tokens: 1,
      });
      // `{}` is one token: even this budget holds a complete object, so it is not cut off.
      expect(tiny.choices[0]?.message.content).toBe("{}");
      expect(tiny.choices[0]?.finish_reason).toBe("stop");
      expect(tiny.usage?.completion_tokens).toBe(1);
    });

    it("json_schema output validates against the schema, streamed too", async () => {
      const schema = {
        type: "object",
        properties: {
          name: { type: "string", maxLength: 30 },
          age: { type: "integer" },
          tags: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 },
          kind: { anyOf: [{ const: "cat" }, { type: "null" }] },
        },
        required: ["name", "age", "tags", "kind"],
        additionalProperties: false,
      };
      const params = {
        messages: [{ role: "user" as const, content: "Invent a pet and describe it as JSON." }],
        response_format: { type: "json_schema" as const, json_schema: { name: "pet", schema, strict: true } },
        max_tokens: 40,
      };
      const check = (text: string) => {
        const value = JSON.parse(text) as Record<string, unknown>;
        expect(Object.keys(value).sort()).toEqual(["age", "kind", "name", "tags"]);
        expect(Number.isInteger(value.age)).toBe(true);
        expect(Array.isArray(value.tags)).toBe(true);
        expect([null, "cat"]).toContain(value.kind);
      };
      const results = await Promise.all([1, 2, 3].map((seed) => create({ ...params, seed })));
      for (const r of results) check(r.choices[0]?.message.content ?? "");
      const stream = await served.client.chat.completions.create({ model: MODEL, ...params, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      check(text);
    });

    it("strict json_schema: zod's and pydantic's bounds, formats, a pattern and a tuple hold in real output", async () => {
      const params = {
        messages: [{ role: "user" as const, content: "Invent a product review and describe it as JSON." }],
        response_format: {
          type: "json_schema" as const,
          json_schema: { name: "review", schema: CONSTRAINED, strict: true },
        },
        max_tokens: 320,
      };
      const validate = ajv.compile(CONSTRAINED);
      const check = (text: string) => {
        const value: unknown = JSON.parse(text);
        expect(validate(value), `${text}: ${JSON.stringify(validate.errors)}`).toBe(true);
      };
      // Together: the engine decodes them in one batch.
      const streamed = (async () => {
        const stream = await served.client.chat.completions.create({ model: MODEL, ...params, stream: true });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        return text;
      })();
      const results = await Promise.all([1, 2].map((seed) => create({ ...params, seed })));
      for (const r of results) {
        expect(r.choices[0]?.finish_reason).toBe("stop");
        check(r.choices[0]?.message.content ?? "");
      }
      check(await streamed);
    }, 300_000);

    it("not strict: any valid JSON Schema is a hint (200); strict refuses what it cannot enforce, naming it", async () => {
      const hinted = {
        type: "object",
        properties: {
          site: { type: "string", format: "uri", not: { const: "" } },
          n: { type: "integer", minimum: 1, maximum: 9 },
        },
        required: ["site", "n"],
        patternProperties: { "^x-": { type: "string" } },
      };
      const ok = await create({
        messages: [{ role: "user", content: "A website and a number as JSON." }],
        response_format: { type: "json_schema", json_schema: { name: "x", schema: hinted } },
        max_tokens: 40,
      });
      const value = JSON.parse(ok.choices[0]?.message.content ?? "") as { n: number; site: string };
      expect(Number.isInteger(value.n) && value.n >= 1 && value.n <= 9).toBe(true);
      expect(typeof value.site).toBe("string");

      const error = await create({
        messages: [{ role: "user", content: "x" }],
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "string", format: "uri" }, strict: true },
        },
      }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(400);
      expect((error as APIError).param).toBe("response_format.json_schema.schema");
      expect((error as APIError).message).toMatch(/'format'/);

      const invalid = await create({
        messages: [{ role: "user", content: "x" }],
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "object", required: "n" } },
        },
      }).catch((e: unknown) => e);
      expect((invalid as APIError).status).toBe(400);
      expect((invalid as APIError).message).toMatch(/#\/required/);
    });

    it("a tool with zod's integer bounds and pydantic's date-time is called with valid arguments", async () => {
      const completion = await create({
        messages: [{ role: "user", content: "Book a table for 4 people tomorrow at 8pm." }],
        tools: [BOOKING],
        tool_choice: "required",
        max_tokens: 80,
        seed: 5,
      });
      const calls = toolCallsOf(completion);
      expect(calls.length).toBeGreaterThan(0);
      const validate = ajv.compile(BOOKING.function.parameters ?? {});
      for (const call of calls) {
        expect(call.function.name).toBe("book_table");
        const args: unknown = JSON.parse(call.function.arguments);
        expect(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`).toBe(true);
      }
    });
  });

  describe("tools", () => {
    const CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Perth", "Quito", "Rome", "Seoul", "Dakar"];

    it(`tool_choice required: ${sampledPrompts} prompts all give schema-valid calls (sampled, concurrently)`, async () => {
      const prompts = CITIES.flatMap((city) => [
        `What's the weather in ${city}?`,
        `What time is it in ${city}?`,
      ]).slice(0, sampledPrompts);
      // Sampled at the default temperature with a fixed seed per prompt, so a failure can be replayed.
      const results = await Promise.all(
        prompts.map((content, i) =>
          create({
            messages: [{ role: "user", content }],
            tools: [WEATHER, TIME],
            tool_choice: "required",
            max_tokens: 40,
            seed: 1000 + i,
          }),
        ),
      );
      let valid = 0;
      for (const completion of results) {
        const choice = completion.choices[0];
        expect(choice?.finish_reason).toBe("tool_calls");
        expect(choice?.message.content).toBeNull();
        const calls = toolCallsOf(completion);
        expect(calls.length).toBeGreaterThan(0);
        for (const call of calls) expectValidCall(call);
        valid++;
      }
      console.log(`tool_choice required: ${valid}/${results.length} schema-valid`);
      expect(valid).toBe(prompts.length);
    }, 300_000);

    it("a named tool_choice always calls that tool; parallel_tool_calls false gives one call", async () => {
      const completion = await create({
        messages: [{ role: "user", content: "What's the weather in Paris?" }],
        tools: [WEATHER, TIME],
        tool_choice: { type: "function", function: { name: "get_time" } },
        parallel_tool_calls: false,
        max_tokens: 40,
      });
      const calls = toolCallsOf(completion);
      expect(calls).toHaveLength(1);
      expect(calls[0]?.function.name).toBe("get_time");
      expectValidCall(calls[0] as (typeof calls)[number]);
    });

    it("tool_choice none never calls; auto gives either text or valid calls", async () => {
      const none = await create({
        messages: [{ role: "user", content: "What's the weather in Paris?" }],
        tools: [WEATHER],
        tool_choice: "none",
        max_tokens: 16,
      });
      expect(none.choices[0]?.message.tool_calls).toBeUndefined();
      expect(typeof none.choices[0]?.message.content).toBe("string");
      expect(["stop", "length"]).toContain(none.choices[0]?.finish_reason);

      const autos = await Promise.all(
        [1, 2, 3, 4].map((seed) =>
          create({
            messages: [{ role: "user", content: "Weather in Oslo?" }],
            tools: [WEATHER],
            max_tokens: 32,
            seed,
          }),
        ),
      );
      for (const auto of autos) {
        const calls = toolCallsOf(auto);
        if (calls.length > 0) {
          expect(auto.choices[0]?.finish_reason).toBe("tool_calls");
          expect(auto.choices[0]?.message.content).toBeNull();
          for (const call of calls) expectValidCall(call);
        } else {
          expect(typeof auto.choices[0]?.message.content).toBe("string");
          expect(auto.choices[0]?.message.content).not.toContain("<tool_call>");
        }
      }
    });

    it("streams calls in OpenAI's delta form and the SDK helper reassembles them", async () => {
      const stream = served.client.chat.completions.stream({
        model: MODEL,
        messages: [{ role: "user", content: "What's the weather in Rome?" }],
        tools: [WEATHER],
        tool_choice: "required",
        max_tokens: 40,
      });
      const chunks: ChatCompletionChunk[] = [];
      stream.on("chunk", (chunk) => chunks.push(chunk));
      const final = await stream.finalChatCompletion();
      const calls = toolCallsOf(final);
      expect(calls.length).toBeGreaterThan(0);
      for (const call of calls) expectValidCall(call);
      expect(final.choices[0]?.finish_reason).toBe("tool_calls");

      const fragments = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
      const first = fragments[0];
      expect(first).toMatchObject({
        index: 0,
        type: "function",
        function: { name: "get_weather", arguments: "" },
      });
      expect(first?.id).toMatch(/^call_/);
      for (const later of fragments.slice(1).filter((f) => f.index === 0)) {
        expect(Object.keys(later).sort()).toEqual(["function", "index"]);
        expect(Object.keys(later.function ?? {})).toEqual(["arguments"]);
      }
      const joined = fragments
        .filter((f) => f.index === 0)
        .map((f) => f.function?.arguments ?? "")
        .join("");
      expect(joined).toBe(calls[0]?.function.arguments);
    });

    it("a tool round trip puts the assistant's tool_calls and the tool result into the prompt", async () => {
      const call = {
        id: "call_abc",
        type: "function" as const,
        function: { name: "get_weather", arguments: '{"city":"Paris"}' },
      };
      const conversation = (withCall: boolean) =>
        create({
          messages: [
            { role: "user", content: "What's the weather in Paris?" },
            withCall
              ? { role: "assistant", content: null, tool_calls: [call] }
              : { role: "assistant", content: "" },
            { role: "tool", tool_call_id: "call_abc", content: "Sunny, 24 C" },
          ],
          tools: [WEATHER],
          tool_choice: "none",
          max_tokens: 4,
        });
      const [withCall, without] = await Promise.all([conversation(true), conversation(false)]);
      expect(typeof withCall.choices[0]?.message.content).toBe("string");
      // The call (name and arguments in the prompted <tool_call> format) is rendered, not dropped.
      expect((withCall.usage?.prompt_tokens ?? 0) - (without.usage?.prompt_tokens ?? 0)).toBeGreaterThan(15);
    });
  });

  describe("reasoning", () => {
    const question = [{ role: "user" as const, content: "Is 17 a prime number?" }];

    it("enable_thinking true: reasoning beside the answer, counted; false: no reasoning field", async () => {
      const [on, off] = await Promise.all([
        create({ messages: question, max_tokens: 48, chat_template_kwargs: { enable_thinking: true } }),
        create({ messages: question, max_tokens: 24, chat_template_kwargs: { enable_thinking: false } }),
      ]);
      const message = on.choices[0]?.message as { content: string | null; reasoning?: string };
      expect(typeof message.reasoning).toBe("string");
      expect(message.reasoning?.length).toBeGreaterThan(0);
      expect(message.content?.length).toBeGreaterThan(0);
      expect(`${message.reasoning}${message.content}`).not.toMatch(/<\/?think>/);
      const details = on.usage?.completion_tokens_details?.reasoning_tokens ?? 0;
      expect(details).toBeGreaterThan(0);
      expect(details).toBeLessThan(on.usage?.completion_tokens ?? 0);
      expect(on.usage?.completion_tokens).toBeLessThanOrEqual(48);

      expect("reasoning" in (off.choices[0]?.message ?? {})).toBe(false);
      expect(off.usage?.completion_tokens_details?.reasoning_tokens).toBe(0);
    });

    it("streams every reasoning delta before the content deltas", async () => {
      const stream = await served.client.chat.completions.create({
        model: MODEL,
        messages: question,
        max_tokens: 48,
        stream: true,
        stream_options: { include_usage: true },
        chat_template_kwargs: { enable_thinking: true },
      } as unknown as OpenAI.ChatCompletionCreateParamsStreaming);
      const order: string[] = [];
      let reasoningTokens = 0;
      for await (const chunk of stream) {
        const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning?: string } | undefined;
        if (delta?.reasoning) order.push("r");
        if (delta?.content) order.push("c");
        reasoningTokens = chunk.usage?.completion_tokens_details?.reasoning_tokens ?? reasoningTokens;
      }
      expect(order).toContain("r");
      expect(order).toContain("c");
      expect(order.lastIndexOf("r")).toBeLessThan(order.indexOf("c"));
      expect(reasoningTokens).toBeGreaterThan(0);
    });

    it("JSON mode applies to the answer after the reasoning", async () => {
      const completion = await create({
        messages: [{ role: "user", content: "Describe a dog as JSON." }],
        response_format: { type: "json_object" },
        max_tokens: 48,
        chat_template_kwargs: { enable_thinking: true },
      });
      const message = completion.choices[0]?.message as { content: string | null; reasoning?: string };
      expect(message.reasoning?.length).toBeGreaterThan(0);
      expect(typeof JSON.parse(message.content ?? "")).toBe("object");
    });
  });
});
