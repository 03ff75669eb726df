// openai-node, unmodified, against Hearth: `parse` with zodResponseFormat (zod 4 integers and bounds), a streamed
// create, a tool round trip with zodFunction, and an allowed_tools tool_choice.
import OpenAI from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { hearth, ZOD_INT_BOUND } from "./hearth.js";

const { baseURL, apiKey, model } = hearth();
let client: OpenAI;

beforeAll(() => {
  client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
});

const Review = z.object({
  title: z.string().max(40),
  year: z.number().int(),
  rating: z.number().int().min(1).max(10),
});

const Forecast = z.object({
  city: z.string().max(30),
  days: z.number().int().min(1).max(7),
});

describe("openai-node", () => {
  it("chat.completions.parse with zodResponseFormat: integers within zod 4's bounds and min/max", async () => {
    const format = zodResponseFormat(Review, "review");
    // The case this test exists for: zod 4 writes ±(2^53 − 1) on every integer.
    expect(format.json_schema.schema?.properties).toMatchObject({
      year: { type: "integer", minimum: -ZOD_INT_BOUND, maximum: ZOD_INT_BOUND },
      rating: { type: "integer", minimum: 1, maximum: 10 },
    });
    const completion = await client.chat.completions.parse({
      model,
      messages: [
        { role: "user", content: "Review the film Casablanca: title, year and a rating from 1 to 10." },
      ],
      response_format: format,
      temperature: 0,
      seed: 7,
      max_completion_tokens: 80,
    });
    const parsed = completion.choices[0]?.message.parsed;
    expect(parsed).toBeTruthy();
    expect(typeof parsed?.title).toBe("string");
    expect(Number.isSafeInteger(parsed?.year)).toBe(true);
    expect(Number.isInteger(parsed?.rating)).toBe(true);
    expect(parsed?.rating).toBeGreaterThanOrEqual(1);
    expect(parsed?.rating).toBeLessThanOrEqual(10);
  });

  it("a streamed create: text deltas, a finish reason and usage", async () => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "Say hello." }],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0,
      max_completion_tokens: 20,
    });
    let text = "";
    let finish: string | null | undefined;
    let completionTokens: number | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish ??= chunk.choices[0]?.finish_reason;
      completionTokens ??= chunk.usage?.completion_tokens;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(["stop", "length"]).toContain(finish);
    expect(completionTokens).toBeGreaterThan(0);
  });

  it("a tool round trip with zodFunction: an integer argument within bounds, then an answer", async () => {
    const tool = zodFunction({ name: "get_forecast", parameters: Forecast, description: "Weather forecast" });
    expect(tool.function.strict).toBe(true);
    const messages: ChatCompletionMessageParam[] = [
      { role: "user", content: "What will the weather be in Paris for the next 3 days?" },
    ];
    const first = await client.chat.completions.parse({
      model,
      messages,
      tools: [tool],
      tool_choice: { type: "function", function: { name: "get_forecast" } },
      temperature: 0,
      max_completion_tokens: 60,
    });
    const message = first.choices[0]?.message;
    const call = message?.tool_calls?.[0];
    expect(call?.type).toBe("function");
    if (call?.type !== "function") throw new Error("no function call");
    expect(call.function.name).toBe("get_forecast");
    const args = call.function.parsed_arguments as z.infer<typeof Forecast>;
    expect(typeof args.city).toBe("string");
    expect(Number.isInteger(args.days)).toBe(true);
    expect(args.days).toBeGreaterThanOrEqual(1);
    expect(args.days).toBeLessThanOrEqual(7);

    const second = await client.chat.completions.create({
      model,
      messages: [
        ...messages,
        { role: "assistant", content: message?.content ?? null, tool_calls: [call] },
        {
          role: "tool",
          tool_call_id: call.id,
          content: JSON.stringify({ forecast: "sunny", days: args.days }),
        },
      ],
      tools: [tool],
      tool_choice: "none",
      temperature: 0,
      max_completion_tokens: 30,
    });
    const answer = second.choices[0];
    expect(["stop", "length"]).toContain(answer?.finish_reason);
    expect(answer?.message.content?.length).toBeGreaterThan(0);
  });

  it("tool_choice allowed_tools (mode required, one of two tools): only the allowed tool is called", async () => {
    const forecast = zodFunction({
      name: "get_forecast",
      parameters: Forecast,
      description: "Weather forecast",
    });
    const time = zodFunction({
      name: "get_time",
      parameters: z.object({ city: z.string().max(30) }),
      description: "Current time in a city",
    });
    const completion = await client.chat.completions.parse({
      model,
      messages: [{ role: "user", content: "What will the weather be in Paris for the next 3 days?" }],
      tools: [forecast, time],
      tool_choice: {
        type: "allowed_tools",
        allowed_tools: { mode: "required", tools: [{ type: "function", function: { name: "get_time" } }] },
      },
      temperature: 0,
      max_completion_tokens: 40,
    });
    const calls = completion.choices[0]?.message.tool_calls ?? [];
    expect(calls.length).toBeGreaterThan(0);
    for (const call of calls) {
      if (call.type !== "function") throw new Error(`a ${call.type} tool call`);
      expect(call.function.name).toBe("get_time");
      expect(typeof (call.function.parsed_arguments as { city: unknown }).city).toBe("string");
    }
  });
});
