// The Vercel AI SDK's default OpenAI provider (`createOpenAI({ baseURL, apiKey })(model)`: the Responses API) beyond
// what ai-sdk.test.ts runs on every provider: a system prompt, the response id, streamText with Output.object, and a
// conversation continued with the assistant's earlier text (which the provider sends back as an item_reference to
// the stored response's item). Every request must reach POST /v1/responses.
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, type LanguageModel, Output, streamText } from "ai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { hearth } from "./hearth.js";
import { logMark, routes, servedSince } from "./request-log.js";

const { baseURL, apiKey, model } = hearth();

function languageModel(): LanguageModel {
  return createOpenAI({ baseURL, apiKey })(model);
}

/** Runs `client` and checks that every request it made was one successful POST /v1/responses. */
async function throughResponses<T>(client: () => Promise<T>): Promise<T> {
  const mark = await logMark();
  const result = await client();
  const served = await servedSince(mark);
  expect(routes(served)).toEqual(["POST /v1/responses"]);
  expect(served[0]?.status).toBe(200);
  return result;
}

const Book = z.object({
  title: z.string().max(40),
  pages: z.number().int(),
  stars: z.number().int().min(1).max(5),
});

describe("Vercel AI SDK, @ai-sdk/openai default provider (Responses API)", () => {
  it("generateText with a system prompt: the response's resp_ id and usage", async () => {
    const result = await throughResponses(() =>
      generateText({
        model: languageModel(),
        system: "You are a helpful assistant.",
        prompt: "Say hello.",
        temperature: 0,
        maxOutputTokens: 20,
        maxRetries: 0,
      }),
    );
    expect(result.text.length).toBeGreaterThan(0);
    expect(result.response.id).toMatch(/^resp_/);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
  });

  it("streamText with Output.object (text.format json_schema): a typed object within the bounds", async () => {
    const book = await throughResponses(async () => {
      const result = streamText({
        model: languageModel(),
        output: Output.object({ schema: Book }),
        prompt: "Describe the book Dune: title, number of pages and stars from 1 to 5.",
        temperature: 0,
        maxOutputTokens: 80,
        maxRetries: 0,
      });
      for await (const _ of result.partialOutputStream) {
        // Drained: the object is read whole below.
      }
      return result.output;
    });
    expect(typeof book.title).toBe("string");
    expect(Number.isSafeInteger(book.pages)).toBe(true);
    expect(book.stars).toBeGreaterThanOrEqual(1);
    expect(book.stars).toBeLessThanOrEqual(5);
  });

  // A chat app's second turn: the first result's messages sent back with the next question. With the provider's
  // default (store on) the assistant's earlier text goes back as an item_reference to the stored output item; with
  // store off (the workaround docs/responses.md gives) it goes back inline.
  for (const [how, providerOptions] of [
    ["the provider's defaults (the assistant's text as an item_reference)", {}],
    ["the provider's store option off (the history sent inline)", { openai: { store: false } }],
  ] as const) {
    it(`a conversation continued from the previous result's messages, ${how}`, async () => {
      const prompt = "My name is Alice. Say hello to me.";
      const request = {
        model: languageModel(),
        providerOptions,
        temperature: 0,
        maxOutputTokens: 20,
        maxRetries: 0,
      };
      const first = await throughResponses(() => generateText({ ...request, prompt }));
      const second = await throughResponses(() =>
        generateText({
          ...request,
          messages: [
            { role: "user", content: prompt },
            ...first.response.messages,
            { role: "user", content: "What is my name?" },
          ],
        }),
      );
      expect(second.text.length).toBeGreaterThan(0);
      // The earlier answer reached the model: the second prompt holds its tokens too.
      expect(second.usage.inputTokens).toBeGreaterThan(
        (first.usage.inputTokens ?? 0) + (first.usage.outputTokens ?? 0),
      );
    });
  }
});
