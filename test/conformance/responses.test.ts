// Conformance of POST /v1/responses: the official openai client (responses.create, .stream, .parse) against a real
// `hearth serve` on both real model families: text, a streamed function-tool round trip, structured output,
// previous_response_id and store false, and the refusals a client sees.
import { BadRequestError, NotFoundError } from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import type {
  FunctionTool,
  ResponseInputItem,
  ResponseStreamEvent,
} from "openai/resources/responses/responses";
import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { MODEL_FAMILIES } from "../support/models.js";
import { serveModelFamilies } from "../support/served-models.js";

const served = serveModelFamilies();

// /health answers 200 once one model serves; these tests use every family from the start.
beforeAll(async () => {
  for (let i = 0; i < 600; i++) {
    const health = (await (await fetch(`${served.server.url}/health`)).json()) as {
      models: { status: string }[];
    };
    if (health.models.every((m) => m.status === "ok")) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error("the models never all became ready");
});

const WEATHER: FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The current weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
};

/** One event as a line of the report: its type, sequence number and the fields that change per event. */
function describeEvent(event: ResponseStreamEvent): string {
  const { type, sequence_number, ...rest } = event as ResponseStreamEvent & Record<string, unknown>;
  const fields = Object.fromEntries(
    Object.entries(rest).map(([key, value]) =>
      key === "response" ? [key, { status: (value as { status: string }).status }] : [key, value],
    ),
  );
  return `${sequence_number} ${type} ${JSON.stringify(fields)}`;
}

describe.each(MODEL_FAMILIES)("$model.id", ({ model: { id: MODEL } }) => {
  it("responses.create returns a completed response whose usage adds up", async () => {
    const response = await served.client.responses.create({
      model: MODEL,
      instructions: "Answer in one short sentence.",
      input: "What is the capital of France?",
      max_output_tokens: 40,
      temperature: 0,
    });
    expect(response.id).toMatch(/^resp_/);
    expect(response.object).toBe("response");
    expect(["completed", "incomplete"]).toContain(response.status);
    expect(response.model).toBe(MODEL);
    const [message] = response.output;
    expect(message).toMatchObject({ type: "message", role: "assistant" });
    expect(response.output_text.length).toBeGreaterThan(0);
    const usage = response.usage;
    expect(usage?.total_tokens).toBe((usage?.input_tokens ?? 0) + (usage?.output_tokens ?? 0));
    expect(usage?.output_tokens).toBeLessThanOrEqual(40);
    expect(response.instructions).toBe("Answer in one short sentence.");
    expect(response).toMatchObject({ store: true });
  });

  it("responses.stream: a function tool round trip (function_call → function_call_output → answer)", async () => {
    const input: ResponseInputItem[] = [
      { role: "user", content: "What is the weather in Oslo? Use the tool." },
    ];
    const stream = served.client.responses.stream({
      model: MODEL,
      input,
      tools: [WEATHER],
      tool_choice: "required",
      max_output_tokens: 60,
      temperature: 0,
    });
    const seen: ResponseStreamEvent[] = [];
    for await (const event of stream) seen.push(event);
    const first = await stream.finalResponse();
    console.log(`tool call stream (${MODEL}):\n${seen.map(describeEvent).join("\n")}`);
    expect(seen.map((e) => e.sequence_number)).toEqual(seen.map((_, i) => i));
    expect(seen[0]?.type).toBe("response.created");
    expect(seen.at(-1)?.type).toBe("response.completed");
    const call = first.output.find((item) => item.type === "function_call");
    if (call?.type !== "function_call") throw new Error("no function_call item");
    expect(call.name).toBe("get_weather");
    expect(call.call_id).toMatch(/^call_/);
    expect(JSON.parse(call.arguments)).toEqual({ city: expect.any(String) });
    const done = seen.find((e) => e.type === "response.function_call_arguments.done");
    expect(done).toMatchObject({ item_id: call.id, arguments: call.arguments });

    const answer = served.client.responses.stream({
      model: MODEL,
      input: [
        ...input,
        // The SDK's output item union is wider than its input item union; these items are message/function_call.
        ...(first.output as ResponseInputItem[]),
        {
          type: "function_call_output",
          call_id: call.call_id,
          output: JSON.stringify({ temperature_c: 3, sky: "snow" }),
        },
      ],
      tools: [WEATHER],
      tool_choice: "none",
      max_output_tokens: 60,
      temperature: 0,
    });
    const answerEvents: ResponseStreamEvent[] = [];
    for await (const event of answer) answerEvents.push(event);
    const final = await answer.finalResponse();
    console.log(`answer stream (${MODEL}):\n${answerEvents.map(describeEvent).join("\n")}`);
    expect(final.output.some((item) => item.type === "function_call")).toBe(false);
    expect(final.output_text.length).toBeGreaterThan(0);
    // (tool_choice none renders no tools, so this prompt may be shorter than the first one's.)
    expect(final.status).toMatch(/^(completed|incomplete)$/);
  });

  it("responses.parse with zodTextFormat returns the parsed object", async () => {
    const City = z.object({ city: z.string(), country: z.string() });
    const response = await served.client.responses.parse({
      model: MODEL,
      input: "Name one large city and its country as JSON.",
      text: { format: zodTextFormat(City, "city") },
      max_output_tokens: 80,
      temperature: 0,
    });
    expect(response.output_parsed).toEqual({ city: expect.any(String), country: expect.any(String) });
    expect(response.text?.format).toMatchObject({ type: "json_schema", name: "city", strict: true });
  });

  it("previous_response_id continues the stored conversation; store false keeps nothing", async () => {
    const first = await served.client.responses.create({
      model: MODEL,
      input: "My name is Ada. Say hello.",
      max_output_tokens: 20,
      temperature: 0,
    });
    const next = await served.client.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      input: "What is my name?",
      max_output_tokens: 20,
      temperature: 0,
    });
    expect(next.previous_response_id).toBe(first.id);
    // The earlier turn is in the prompt: more input than the first request's input and output together.
    expect(next.usage?.input_tokens).toBeGreaterThan(
      (first.usage?.input_tokens ?? 0) + (first.usage?.output_tokens ?? 0),
    );
    // The chained prompt starts with the first one: its tokens come from the prefix cache.
    expect(next.usage?.input_tokens_details.cached_tokens).toBeGreaterThan(0);

    const unstored = await served.client.responses.create({
      model: MODEL,
      input: "Say hi.",
      store: false,
      max_output_tokens: 10,
    });
    expect(unstored).toMatchObject({ store: false });
    const missing = await served.client.responses
      .create({ model: MODEL, previous_response_id: unstored.id, input: "Again." })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing).toMatchObject({ param: "previous_response_id", code: "not_found" });
  });

  it("refuses built-in tools and image input with a 400 naming the field", async () => {
    const search = await served.client.responses
      .create({ model: MODEL, input: "News?", tools: [{ type: "web_search" }] })
      .catch((e: unknown) => e);
    expect(search).toBeInstanceOf(BadRequestError);
    expect(search).toMatchObject({ param: "tools[0].type" });
    const image = await served.client.responses
      .create({
        model: MODEL,
        input: [
          {
            role: "user",
            content: [
              { type: "input_text", text: "What is in this image?" },
              { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=", detail: "auto" },
            ],
          },
        ],
      })
      .catch((e: unknown) => e);
    expect(image).toBeInstanceOf(BadRequestError);
    expect(image).toMatchObject({ param: "input[0].content[1].type" });
  });
});
