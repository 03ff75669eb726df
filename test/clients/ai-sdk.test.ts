// The Vercel AI SDK, unmodified, against Hearth through its OpenAI providers: on chat completions
// (`@ai-sdk/openai-compatible`, and `@ai-sdk/openai`'s `.chat()`) and on the Responses API (`@ai-sdk/openai`'s
// default, `openai(model)`): generateText, streamText, generateObject with zod integers, and multi-step tools with an
// integer parameter, each checked to have reached its provider's endpoint (the server's request log).
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateObject, generateText, type LanguageModel, stepCountIs, streamText, tool } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { hearth } from "./hearth.js";
import { logMark, routes, servedSince } from "./request-log.js";

const { baseURL, apiKey, model } = hearth();

const CHAT = "POST /v1/chat/completions";
const RESPONSES = "POST /v1/responses";

const PROVIDERS: { name: string; model: () => LanguageModel; route: string }[] = [
  {
    name: "@ai-sdk/openai-compatible",
    route: CHAT,
    // supportsStructuredOutputs: the provider then sends response_format json_schema (Hearth enforces it) instead
    // of json_object; includeUsage asks streams for usage, as the provider's docs recommend.
    model: () =>
      createOpenAICompatible({
        name: "hearth",
        baseURL,
        apiKey,
        supportsStructuredOutputs: true,
        includeUsage: true,
      }).chatModel(model),
  },
  { name: "@ai-sdk/openai .chat()", route: CHAT, model: () => createOpenAI({ baseURL, apiKey }).chat(model) },
  // The provider's default model: what `openai(model)` in the SDK's docs is.
  { name: "@ai-sdk/openai default", route: RESPONSES, model: () => createOpenAI({ baseURL, apiKey })(model) },
];

/** Runs `client` and checks that it made `requests` successful requests, all to `route`. */
async function through<T>(route: string, requests: number, client: () => Promise<T>): Promise<T> {
  const mark = await logMark();
  const result = await client();
  const served = await servedSince(mark);
  expect(routes(served)).toEqual(Array(requests).fill(route));
  for (const request of served) expect(request.status).toBe(200);
  return result;
}

const Book = z.object({
  title: z.string().max(40),
  pages: z.number().int(),
  stars: z.number().int().min(1).max(5),
});

describe.each(PROVIDERS)("Vercel AI SDK, $name", ({ model: languageModel, route }) => {
  it("generateText: text, a finish reason and usage", async () => {
    const result = await through(route, 1, () =>
      generateText({
        model: languageModel(),
        prompt: "Say hello.",
        temperature: 0,
        seed: 7,
        maxOutputTokens: 20,
        maxRetries: 0,
      }),
    );
    expect(result.text.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(result.finishReason);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBeGreaterThan(0);
  });

  it("streamText: text deltas, a finish reason and usage", async () => {
    await through(route, 1, async () => {
      const result = streamText({
        model: languageModel(),
        prompt: "Say hello.",
        temperature: 0,
        maxOutputTokens: 20,
        maxRetries: 0,
      });
      const deltas: string[] = [];
      for await (const delta of result.textStream) deltas.push(delta);
      expect(deltas.join("").length).toBeGreaterThan(0);
      expect(["stop", "length"]).toContain(await result.finishReason);
      expect((await result.usage).outputTokens).toBeGreaterThan(0);
    });
  });

  it("generateObject with a zod schema of integers: a typed object within the bounds", async () => {
    const { object } = await through(route, 1, () =>
      generateObject({
        model: languageModel(),
        schema: Book,
        prompt: "Describe the book Dune: title, number of pages and stars from 1 to 5.",
        temperature: 0,
        seed: 7,
        maxOutputTokens: 80,
        maxRetries: 0,
      }),
    );
    expect(typeof object.title).toBe("string");
    expect(Number.isSafeInteger(object.pages)).toBe(true);
    expect(Number.isInteger(object.stars)).toBe(true);
    expect(object.stars).toBeGreaterThanOrEqual(1);
    expect(object.stars).toBeLessThanOrEqual(5);
  });

  it("multi-step tools: an integer-parameter tool called with valid input, its result fed back, then text", async () => {
    const calls: { a: number; b: number }[] = [];
    const add = tool({
      description: "Adds two whole numbers",
      inputSchema: z.object({ a: z.number().int(), b: z.number().int() }),
      execute: async ({ a, b }) => {
        calls.push({ a, b });
        return { sum: a + b };
      },
    });
    const result = await through(route, 2, () =>
      generateText({
        model: languageModel(),
        tools: { add },
        prompt: "What is 12 plus 30? Use the add tool.",
        stopWhen: stepCountIs(3),
        // The first step must call the tool (a 135M model does not reliably choose to); later ones answer in text.
        prepareStep: ({ stepNumber }) =>
          stepNumber === 0 ? { toolChoice: { type: "tool", toolName: "add" } } : { toolChoice: "none" },
        temperature: 0,
        maxOutputTokens: 60,
        maxRetries: 0,
      }),
    );
    expect(calls.length).toBe(1);
    expect(Number.isInteger(calls[0]?.a)).toBe(true);
    expect(Number.isInteger(calls[0]?.b)).toBe(true);
    expect(result.steps.length).toBe(2);
    expect(result.steps[0]?.toolCalls[0]?.toolName).toBe("add");
    expect(result.steps[0]?.toolResults[0]?.output).toEqual({ sum: (calls[0]?.a ?? 0) + (calls[0]?.b ?? 0) });
    expect(["stop", "length"]).toContain(result.finishReason);
    expect(result.text.length).toBeGreaterThan(0);
  });
});
