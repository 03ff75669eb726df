// LangChain JS's ChatOpenAI, unmodified, against Hearth: invoke, stream, withStructuredOutput of a zod schema (both
// the default json_schema method and function calling) and bindTools with a tool call answered.
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { hearth } from "./hearth.js";

const { baseURL, apiKey, model } = hearth();

function chat(maxTokens: number): ChatOpenAI {
  return new ChatOpenAI({
    model,
    apiKey,
    configuration: { baseURL },
    temperature: 0,
    maxTokens,
    maxRetries: 0,
  });
}

const Movie = z.object({
  title: z.string().max(40),
  year: z.number().int(),
  rating: z.number().int().min(1).max(10),
});

function expectMovie(movie: z.infer<typeof Movie>): void {
  expect(typeof movie.title).toBe("string");
  expect(Number.isSafeInteger(movie.year)).toBe(true);
  expect(Number.isInteger(movie.rating)).toBe(true);
  expect(movie.rating).toBeGreaterThanOrEqual(1);
  expect(movie.rating).toBeLessThanOrEqual(10);
}

const PROMPT = "Describe the film Casablanca: title, year and a rating from 1 to 10.";

describe("LangChain JS ChatOpenAI", () => {
  it("invoke: an AIMessage with text and token usage", async () => {
    const message = await chat(20).invoke("Say hello.");
    expect(message).toBeInstanceOf(AIMessage);
    expect(typeof message.content).toBe("string");
    expect(String(message.content).length).toBeGreaterThan(0);
    // Typed `never` through ChatOpenAI's generics in this version; the field is there at run time.
    const usage = (message as unknown as { usage_metadata?: { output_tokens: number } }).usage_metadata;
    expect(usage?.output_tokens).toBeGreaterThan(0);
  });

  it("stream: chunks that add up to the text", async () => {
    let text = "";
    let chunks = 0;
    for await (const chunk of await chat(20).stream("Say hello.")) {
      text += typeof chunk.content === "string" ? chunk.content : "";
      chunks++;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(text.length).toBeGreaterThan(0);
  });

  it("withStructuredOutput(zod schema), default method (json_schema): integers within bounds", async () => {
    expectMovie(await chat(80).withStructuredOutput(Movie).invoke(PROMPT));
  });

  it("withStructuredOutput(zod schema, functionCalling): integers within bounds", async () => {
    expectMovie(await chat(80).withStructuredOutput(Movie, { method: "functionCalling" }).invoke(PROMPT));
  });

  it("bindTools: a forced tool call with a valid integer argument, its result answered", async () => {
    const received: { city: string; days: number }[] = [];
    const forecast = tool(
      async (input) => {
        received.push(input);
        return JSON.stringify({ forecast: "sunny", days: input.days });
      },
      {
        name: "get_forecast",
        description: "Weather forecast for a city",
        schema: z.object({ city: z.string().max(30), days: z.number().int().min(1).max(7) }),
      },
    );
    const question = new HumanMessage("What will the weather be in Paris for the next 3 days?");
    const call = await chat(60).bindTools([forecast], { tool_choice: "get_forecast" }).invoke([question]);
    const toolCall = call.tool_calls?.[0];
    expect(toolCall?.name).toBe("get_forecast");
    const args = toolCall?.args as { city: unknown; days: unknown };
    expect(typeof args.city).toBe("string");
    expect(Number.isInteger(args.days)).toBe(true);
    expect(args.days).toBeGreaterThanOrEqual(1);
    expect(args.days).toBeLessThanOrEqual(7);

    const result = (await forecast.invoke(toolCall as Parameters<typeof forecast.invoke>[0])) as ToolMessage;
    expect(result).toBeInstanceOf(ToolMessage);
    expect(received).toEqual([args]);
    const answer = await chat(30)
      .bindTools([forecast], { tool_choice: "none" })
      .invoke([question, call, result]);
    expect(answer.tool_calls ?? []).toEqual([]);
    expect(String(answer.content).length).toBeGreaterThan(0);
  });
});
