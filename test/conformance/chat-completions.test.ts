// Conformance: the official openai client against a real `hearth serve` process serving both real model families
// (SmolLM2's ChatML and Gemma 3's turns); every model-dependent behaviour runs on each.
import { APIError } from "openai";
import { describe, expect, it } from "vitest";
import { MODEL_FAMILIES, SMOLLM2_MODEL } from "../support/models.js";
import { serveModelFamilies } from "../support/served-models.js";
import { openaiClient } from "../support/server-process.js";

/** The model of the model-independent checks (auth, validation, routes). */
const MODEL = SMOLLM2_MODEL.id;
const served = serveModelFamilies();

const ask = (content: string) => [{ role: "user" as const, content }];

async function errorOf(
  response: Response,
): Promise<{ message: string; type: string; param: unknown; code: unknown }> {
  const body = (await response.json()) as {
    error: { message: string; type: string; param: unknown; code: unknown };
  };
  return body.error;
}

async function rawPost(body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${served.server.url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${served.server.apiKey}`,
      "content-type": "application/json",
      ...headers,
    },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function expectError(promise: Promise<unknown>, status: number, code: string, param?: string | null) {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(APIError);
  const apiError = err as APIError;
  expect(apiError.status).toBe(status);
  expect(apiError.code).toBe(code);
  if (param !== undefined) expect(apiError.param).toBe(param);
  expect(apiError.headers?.get("x-request-id")).toMatch(/^req_/);
}

/**
 * A stop string the model is sure to write: `length` characters from the middle of its own greedy reply to the same
 * request (a base model need not count when asked to; every model repeats its greedy reply).
 */
function stopIn(reference: string, length: number): { stop: string; before: string } {
  expect(reference.length).toBeGreaterThanOrEqual(2 * length);
  const at = Math.floor(reference.length / 2);
  const stop = reference.slice(at, at + length);
  return { stop, before: reference.slice(0, reference.indexOf(stop)) };
}

describe.each(MODEL_FAMILIES)("$model.id", ({ model: { id: MODEL } }) => {
  describe("non-streamed completions (behaviour 1)", () => {
    it("returns one chat.completion with usage that adds up", async () => {
      const completion = await served.client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "system", content: "You are a helpful assistant." },
          { role: "user", content: "What is the capital of France?", name: "alice" },
        ],
        temperature: 0,
        max_tokens: 30,
      });
      expect(completion.id).toMatch(/^chatcmpl-/);
      expect(completion.object).toBe("chat.completion");
      expect(Number.isInteger(completion.created)).toBe(true);
      expect(completion.model).toBe(MODEL);
      expect(completion.choices).toHaveLength(1);
      const choice = completion.choices[0];
      expect(choice?.index).toBe(0);
      expect(choice?.message.role).toBe("assistant");
      expect(typeof choice?.message.content).toBe("string");
      expect(["stop", "length"]).toContain(choice?.finish_reason);
      const usage = completion.usage;
      expect(usage?.prompt_tokens).toBeGreaterThan(10);
      expect(usage?.completion_tokens).toBeGreaterThan(0);
      expect(usage?.total_tokens).toBe((usage?.prompt_tokens ?? 0) + (usage?.completion_tokens ?? 0));
    });

    it("answers what the rendered prompt asks: the capital of France, chosen among five cities, is Paris", async () => {
      const completion = await served.client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "system", content: "You are a helpful assistant." },
          { role: "user", content: "What is the capital of France?" },
        ],
        response_format: {
          type: "json_schema",
          json_schema: {
            name: "capital",
            schema: {
              type: "object",
              properties: { city: { enum: ["Berlin", "London", "Madrid", "Paris", "Rome"] } },
              required: ["city"],
              additionalProperties: false,
            },
          },
        },
        temperature: 0,
        max_tokens: 20,
      });
      expect(JSON.parse(completion.choices[0]?.message.content ?? "")).toEqual({ city: "Paris" });
      expect(completion.choices[0]?.finish_reason).toBe("stop");
    });

    it("honours max_tokens and max_completion_tokens with finish_reason length", async () => {
      for (const limit of [{ max_tokens: 5 }, { max_completion_tokens: 5 }]) {
        const completion = await served.client.chat.completions.create({
          model: MODEL,
          messages: ask("Write a long essay about the history of Rome."),
          ...limit,
        });
        expect(completion.choices[0]?.finish_reason).toBe("length");
        expect(completion.usage?.completion_tokens).toBe(5);
      }
    });

    it("accepts every sampling field, and the same seed gives the same text", async () => {
      const params = {
        model: MODEL,
        messages: ask("Tell me something about owls."),
        temperature: 1.3,
        top_p: 0.9,
        frequency_penalty: 0.5,
        presence_penalty: 0.3,
        seed: 1234,
        max_tokens: 24,
      };
      // One after the other, each with its own cache_salt, so both evaluate the whole prompt alone. llama.cpp's
      // arithmetic depends on how a step's batch is made up (sent together, the two can land in different batch
      // shapes), so a seed repeats a text for the same work, as OpenAI's seed is best effort (docs/compatibility.md).
      const salted = (salt: string) =>
        served.client.chat.completions.create({ ...params, cache_salt: salt } as typeof params);
      const a = await salted("seed-a");
      const b = await salted("seed-b");
      expect(a.choices[0]?.message.content).toBe(b.choices[0]?.message.content);
      const c = await served.client.chat.completions.create({ ...params, seed: 4321 });
      expect(c.choices[0]?.message.content).not.toBe(a.choices[0]?.message.content);
    });

    it("generates n choices that differ without a seed", async () => {
      const completion = await served.client.chat.completions.create({
        model: MODEL,
        messages: ask("Suggest a name for a cat."),
        n: 3,
        temperature: 1.2,
        max_tokens: 12,
      });
      expect(completion.choices.map((c) => c.index)).toEqual([0, 1, 2]);
      expect(new Set(completion.choices.map((c) => c.message.content)).size).toBeGreaterThan(1);
    });

    it("stops before a stop sequence and leaves it out", async () => {
      const base = {
        model: MODEL,
        messages: ask("Count from 1 to 10, separated by commas."),
        temperature: 0,
      };
      const full = await served.client.chat.completions.create({ ...base, max_tokens: 30 });
      const { stop, before } = stopIn(full.choices[0]?.message.content ?? "", 1);
      const completion = await served.client.chat.completions.create({
        ...base,
        stop: [stop, "never-appears"],
        max_tokens: 30,
      });
      const text = completion.choices[0]?.message.content ?? "";
      expect(completion.choices[0]?.finish_reason).toBe("stop");
      expect(text).toBe(before);
      expect(text).not.toContain(stop);
    });

    it("renders tool role messages in a conversation", async () => {
      const completion = await served.client.chat.completions.create({
        model: MODEL,
        messages: [
          { role: "user", content: "What's the weather in Paris?" },
          { role: "assistant", content: "Let me check." },
          { role: "tool", content: "Sunny, 24 degrees.", tool_call_id: "call_1" },
        ],
        max_tokens: 10,
      });
      expect(completion.choices[0]?.message.role).toBe("assistant");
    });
  });

  describe("streamed completions (behaviour 2)", () => {
    it("sends role chunk, content chunks, a finish chunk, then [DONE], with one id", async () => {
      const response = await rawPost({
        model: MODEL,
        messages: ask("Say hello."),
        stream: true,
        max_tokens: 12,
      });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/text\/event-stream/);
      expect(response.headers.get("x-request-id")).toMatch(/^req_/);
      const text = await response.text();
      const lines = text.split("\n\n").filter((l) => l.startsWith("data: "));
      expect(lines.at(-1)).toBe("data: [DONE]");
      const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.slice(6)));
      expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
      expect(new Set(chunks.map((c) => c.created)).size).toBe(1);
      for (const c of chunks) {
        expect(c.object).toBe("chat.completion.chunk");
        expect(c.model).toBe(MODEL);
        expect(c).not.toHaveProperty("usage");
      }
      expect(chunks[0].choices[0].delta).toEqual({ role: "assistant", content: "" });
      const last = chunks.at(-1);
      expect(last.choices[0].delta).toEqual({});
      expect(["stop", "length"]).toContain(last.choices[0].finish_reason);
      for (const c of chunks.slice(0, -1)) expect(c.choices[0].finish_reason).toBeNull();
      const content = chunks
        .slice(1, -1)
        .map((c) => c.choices[0].delta.content)
        .join("");
      expect(content.length).toBeGreaterThan(0);
    });

    it("streams through the SDK with include_usage: usage null on chunks, then a final usage chunk", async () => {
      const stream = await served.client.chat.completions.create({
        model: MODEL,
        messages: ask("Name a fruit."),
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: 10,
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      const final = chunks.at(-1);
      expect(final?.choices).toEqual([]);
      expect(final?.usage?.total_tokens).toBe(
        (final?.usage?.prompt_tokens ?? 0) + (final?.usage?.completion_tokens ?? 0),
      );
      for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
    });

    it("interleaves n choices by index, each ending with its own finish chunk", async () => {
      const stream = await served.client.chat.completions.create({
        model: MODEL,
        messages: ask("Give me a random word."),
        stream: true,
        n: 2,
        max_tokens: 8,
      });
      const finished = new Set<number>();
      const roles = new Set<number>();
      for await (const chunk of stream) {
        for (const choice of chunk.choices) {
          if (choice.delta.role === "assistant") roles.add(choice.index);
          if (choice.finish_reason !== null) finished.add(choice.index);
          else expect(finished.has(choice.index)).toBe(false);
        }
      }
      expect([...roles].sort()).toEqual([0, 1]);
      expect([...finished].sort()).toEqual([0, 1]);
    });

    it("streamed stop sequences are never emitted, even split across tokens", async () => {
      const base = {
        model: MODEL,
        messages: ask("Count from 1 to 10, separated by commas."),
        temperature: 0,
      };
      const full = await served.client.chat.completions.create({ ...base, max_tokens: 60 });
      const { stop, before } = stopIn(full.choices[0]?.message.content ?? "", 4);
      const stream = await served.client.chat.completions.create({
        ...base,
        max_tokens: 60,
        stream: true,
        stop: [stop],
      });
      let text = "";
      let reason: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta.content ?? "";
        reason = chunk.choices[0]?.finish_reason ?? reason;
      }
      expect(reason).toBe("stop");
      expect(text).toBe(before);
    });

    it("never splits a UTF-8 character across chunks", async () => {
      const stream = await served.client.chat.completions.create({
        model: MODEL,
        messages: ask("Repeat exactly: 日本語のテキスト 🎉🎉 café ñandú 😀"),
        temperature: 0,
        max_tokens: 40,
        stream: true,
      });
      const pieces: string[] = [];
      let reason: string | null = null;
      for await (const chunk of stream) {
        const piece = chunk.choices[0]?.delta.content ?? "";
        if (piece !== "") pieces.push(piece);
        reason = chunk.choices[0]?.finish_reason ?? reason;
      }
      // A character split across chunks would show as U+FFFD in both. Only a reply that max_tokens cut inside a
      // character (SmolLM2 repeats 🎉 until the bound, on some CPUs) ends with one: that partial character's.
      const last = pieces.at(-1) ?? "";
      for (const piece of pieces.slice(0, -1)) expect(piece).not.toContain("\uFFFD");
      const cut = reason === "length" && last.endsWith("\uFFFD") ? last.slice(0, -1) : last;
      expect(cut).not.toContain("\uFFFD");
      expect([...pieces.join("")].some((ch) => (ch.codePointAt(0) ?? 0) > 127)).toBe(true);
    });

    it("serves 8 concurrent streams to completion", async () => {
      const results = await Promise.all(
        Array.from({ length: 8 }, async (_, i) => {
          const stream = await served.client.chat.completions.create({
            model: MODEL,
            messages: ask(`Tell me fact number ${i} about space.`),
            stream: true,
            max_tokens: 20,
          });
          let text = "";
          let reason: string | null = null;
          for await (const chunk of stream) {
            text += chunk.choices[0]?.delta.content ?? "";
            reason = chunk.choices[0]?.finish_reason ?? reason;
          }
          return { text, reason };
        }),
      );
      for (const r of results) {
        expect(r.text.length).toBeGreaterThan(0);
        expect(["stop", "length"]).toContain(r.reason);
      }
    });
  });

  describe("POST /tokenize (vLLM's route: what a gateway in front of this server pre-charges)", () => {
    const weather = {
      type: "function" as const,
      function: {
        name: "get_weather",
        description: "The weather in a city.",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    };
    it.each([
      ["a plain chat", {}],
      ["tools", { tools: [weather] }],
      [
        "a JSON schema (its instructions are part of the prompt)",
        {
          response_format: {
            type: "json_schema",
            json_schema: {
              name: "city",
              schema: { type: "object", properties: { name: { type: "string" } } },
            },
          },
        },
      ],
    ])("counts exactly the prompt tokens the completion reports: %s", async (_, extra) => {
      const body = {
        model: MODEL,
        messages: [
          { role: "system", content: "You are a helpful assistant." },
          { role: "user", content: "What is the capital of France?" },
        ],
        max_tokens: 1,
        temperature: 0,
        ...extra,
      };
      const counted = await fetch(`${served.server.url}/tokenize`, {
        method: "POST",
        headers: { authorization: `Bearer ${served.server.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(counted.status).toBe(200);
      const { count, max_model_len } = (await counted.json()) as { count: number; max_model_len: number };
      const completion = (await (await rawPost(body)).json()) as { usage: { prompt_tokens: number } };
      expect(count).toBe(completion.usage.prompt_tokens);
      expect(count).toBeGreaterThan(10);
      const model = (await served.client.models.retrieve(MODEL)) as unknown as { context_length: number };
      expect(max_model_len).toBe(model.context_length);
    });
  });

  it("400 context_length_exceeded when prompt + max_tokens exceed the context", async () => {
    await expectError(
      served.client.chat.completions.create({ model: MODEL, messages: ask("hi"), max_tokens: 100_000 }),
      400,
      "context_length_exceeded",
      "messages",
    );
  });
});

describe("errors", () => {
  it("401 invalid_api_key for a wrong key", async () => {
    const bad = openaiClient(served.server, "sk-wrong");
    await expectError(
      bad.chat.completions.create({ model: MODEL, messages: ask("hi") }),
      401,
      "invalid_api_key",
    );
  });

  it("404 model_not_found for an unknown model", async () => {
    await expectError(
      served.client.chat.completions.create({ model: "gpt-9", messages: ask("hi") }),
      404,
      "model_not_found",
    );
  });

  it("400 with the offending param for every range limit", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ temperature: 2.5 }, "temperature"],
      [{ top_p: 0 }, "top_p"],
      [{ frequency_penalty: -3 }, "frequency_penalty"],
      [{ presence_penalty: 2.1 }, "presence_penalty"],
      [{ stop: ["a", "b", "c", "d", "e"] }, "stop"],
      [{ n: 0 }, "n"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ messages: [] }, "messages"],
      [{ stream_options: { include_usage: true } }, "stream_options"],
    ];
    for (const [patch, param] of cases) {
      const body = { model: MODEL, messages: ask("hi"), ...patch };
      await expectError(
        served.client.chat.completions.create(body as never),
        400,
        "invalid_request_error",
        param,
      );
    }
  });

  it("400 for malformed JSON, a non-object body and unknown fields; 413 for a huge body; 404 JSON for unknown routes", async () => {
    const malformed = await rawPost("{not json");
    expect(malformed.status).toBe(400);
    expect((await errorOf(malformed)).type).toBe("invalid_request_error");
    const array = await rawPost([1, 2]);
    expect(array.status).toBe(400);
    const unknown = await rawPost({ model: MODEL, messages: ask("hi"), frobnicate: true });
    expect(unknown.status).toBe(400);
    expect((await errorOf(unknown)).message).toContain("Unrecognized request argument supplied: frobnicate");
    const huge = await rawPost({ model: MODEL, messages: ask("x".repeat(5 * 1024 * 1024)) });
    expect(huge.status).toBe(413);
    expect(await errorOf(huge)).toHaveProperty("message");
    const route = await fetch(`${served.server.url}/v1/embeddings`, {
      method: "POST",
      headers: { authorization: `Bearer ${served.server.apiKey}` },
    });
    expect(route.status).toBe(404);
    expect(await errorOf(route)).toMatchObject({ type: "invalid_request_error" });
  });
});

describe("models and health", () => {
  it("lists the granted models and retrieves one", async () => {
    const models = await served.client.models.list();
    const ids = MODEL_FAMILIES.map((family) => family.model.id);
    expect(models.data.map((m) => m.id)).toEqual(ids);
    for (const id of ids) expect((await served.client.models.retrieve(id)).id).toBe(id);
  });

  it("reports health", async () => {
    const health = await fetch(`${served.server.url}/health`);
    expect(health.status).toBe(200);
  });

  it("never writes the API key to its logs", () => {
    const logs = served.server.output().replace(served.server.apiKey, "");
    expect(logs).not.toContain(served.server.apiKey);
    expect(logs).not.toContain(served.server.apiKey.slice(3, 30));
  });
});
