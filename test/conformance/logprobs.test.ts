// Conformance of logprobs, top_logprobs and logit_bias: the official openai client against a real `hearth serve`.
import { readGgufFileInfo } from "node-llama-cpp";
import type OpenAI from "openai";
import { APIError } from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { ensureModelFile } from "../../src/models/fetch.js";
import { openaiClient, type ServerProcess, startServerProcess } from "../support/server-process.js";

const MODEL = "smollm2-135m-instruct";
let server: ServerProcess;
let client: OpenAI;
/** The default model's GGUF pieces (byte-level BPE: a leading space is "Ġ"), to name tokens by id. */
let pieces: string[];

beforeAll(async () => {
  server = await startServerProcess();
  client = openaiClient(server);
  const config = loadConfig({ env: { ...process.env, HEARTH_CONFIG: "" } });
  const model = config.models.find((m) => m.id === MODEL);
  if (model === undefined) throw new Error("no default model");
  const info = await readGgufFileInfo(await ensureModelFile(model, { modelsDir: config.modelsDir }));
  pieces = [...(info.metadata.tokenizer?.ggml?.tokens ?? [])];
});

afterAll(async () => {
  await server?.stop();
});

const ask = (content: string) => [{ role: "user" as const, content }];
const idOf = (token: string) => pieces.indexOf(token.replaceAll(" ", "Ġ").replaceAll("\n", "Ċ"));

type TokenLogprob = OpenAI.Chat.Completions.ChatCompletionTokenLogprob;

function expectWellFormed(entries: readonly TokenLogprob[], top: number, greedy: boolean) {
  expect(entries.length).toBeGreaterThan(0);
  for (const entry of entries) {
    expect(entry.logprob).toBeLessThanOrEqual(0);
    expect(entry.logprob).toBeGreaterThanOrEqual(-9999);
    expect(Array.isArray(entry.bytes)).toBe(true);
    expect(entry.top_logprobs).toHaveLength(top);
    const values = entry.top_logprobs.map((alt) => alt.logprob);
    expect(values).toEqual([...values].sort((a, b) => b - a));
    if (greedy && top > 0) {
      expect(entry.top_logprobs[0]?.token).toBe(entry.token);
      expect(entry.top_logprobs[0]?.logprob).toBe(entry.logprob);
    }
  }
}

const joinBytes = (entries: readonly TokenLogprob[]) =>
  Buffer.from(entries.flatMap((e) => e.bytes ?? [])).toString("utf8");

describe("logprobs", () => {
  it("non-streamed: every content token with its logprob, bytes and top alternatives", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: ask("Name three colours."),
      temperature: 0,
      max_tokens: 10,
      logprobs: true,
      top_logprobs: 3,
    });
    const choice = completion.choices[0];
    const content = choice?.logprobs?.content ?? [];
    expect(choice?.logprobs?.refusal).toBeNull();
    expectWellFormed(content, 3, true);
    expect(joinBytes(content)).toBe(choice?.message.content);
    expect(content).toHaveLength(completion.usage?.completion_tokens ?? -1);
  });

  it("logprobs without top_logprobs: empty alternatives; absent: logprobs null", async () => {
    const base = { model: MODEL, messages: ask("Say hi."), temperature: 0, max_tokens: 5 };
    const on = await client.chat.completions.create({ ...base, logprobs: true });
    expectWellFormed(on.choices[0]?.logprobs?.content ?? [], 0, true);
    const off = await client.chat.completions.create(base);
    expect(off.choices[0]?.logprobs).toBeNull();
  });

  it("streamed: content chunks carry their tokens, the same as the non-streamed reply", async () => {
    const body = { model: MODEL, messages: ask("Count to five."), temperature: 0, max_tokens: 12 };
    const whole = await client.chat.completions.create({ ...body, logprobs: true, top_logprobs: 2 });
    const stream = await client.chat.completions.create({
      ...body,
      logprobs: true,
      top_logprobs: 2,
      stream: true,
    });
    const streamed: TokenLogprob[] = [];
    let text = "";
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (choice === undefined) continue;
      if (choice.delta.content) {
        text += choice.delta.content;
        expect(choice.logprobs?.refusal).toBeNull();
        streamed.push(...(choice.logprobs?.content ?? []));
      } else {
        expect(choice.logprobs).toBeNull();
      }
    }
    expect(text).toBe(whole.choices[0]?.message.content);
    const expected = whole.choices[0]?.logprobs?.content ?? [];
    expect(streamed.map((e) => e.token)).toEqual(expected.map((e) => e.token));
    streamed.forEach((entry, i) => {
      expect(entry.logprob).toBeCloseTo(expected[i]?.logprob as number, 4);
    });
  });

  it("n > 1: each choice has its own logprobs", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: ask("Write a word."),
      temperature: 1,
      seed: 3,
      n: 2,
      max_tokens: 6,
      logprobs: true,
      top_logprobs: 1,
    });
    expect(completion.choices).toHaveLength(2);
    for (const choice of completion.choices) {
      const content = choice.logprobs?.content ?? [];
      expectWellFormed(content, 1, false);
      expect(joinBytes(content)).toBe(choice.message.content);
    }
  });

  it("a tool call's message has content null, and so have its logprobs", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: ask("What is the weather in Paris?"),
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          },
        },
      ],
      tool_choice: "required",
      max_tokens: 40,
      logprobs: true,
    });
    const choice = completion.choices[0];
    expect(choice?.message.tool_calls?.length).toBeGreaterThan(0);
    expect(choice?.logprobs).toEqual({ content: null, refusal: null });
  });
});

describe("logit_bias", () => {
  it("-100 bans the token greedy picks first; +100 forces another", async () => {
    const base = {
      model: MODEL,
      messages: ask("Name a colour."),
      temperature: 0,
      max_tokens: 3,
      logprobs: true,
    };
    const plain = await client.chat.completions.create(base);
    const first = plain.choices[0]?.logprobs?.content?.[0]?.token as string;
    const firstId = idOf(first);
    expect(firstId).toBeGreaterThanOrEqual(0);
    const banned = await client.chat.completions.create({ ...base, logit_bias: { [firstId]: -100 } });
    const bannedTokens = banned.choices[0]?.logprobs?.content?.map((e) => e.token) ?? [];
    expect(bannedTokens.length).toBeGreaterThan(0);
    expect(bannedTokens).not.toContain(first);

    const purple = idOf(" purple");
    expect(purple).toBeGreaterThanOrEqual(0);
    const forced = await client.chat.completions.create({ ...base, logit_bias: { [purple]: 100 } });
    expect(forced.choices[0]?.message.content).toBe(" purple purple purple");
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    [
      "a token id beyond the vocabulary",
      { logit_bias: { "49152": 1 } },
      "logit_bias",
      /not a token of this model/,
    ],
    ["a bias beyond 100", { logit_bias: { "5": 101 } }, "logit_bias", /-100 to 100/],
    ["a key that is not a token id", { logit_bias: { hello: 1 } }, "logit_bias", /Invalid key/],
    ["top_logprobs without logprobs", { top_logprobs: 2 }, "top_logprobs", /'logprobs' must be set to true/],
    ["top_logprobs above 20", { logprobs: true, top_logprobs: 21 }, "top_logprobs", /20/],
  ])("400 for %s", async (_, fields, param, message) => {
    const err = await client.chat.completions
      .create({ model: MODEL, messages: ask("hi"), max_tokens: 1, ...fields })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(APIError);
    const apiError = err as APIError;
    expect(apiError.status).toBe(400);
    expect(apiError.param).toBe(param);
    expect(apiError.type).toBe("invalid_request_error");
    expect(apiError.message).toMatch(message);
  });
});
