// Conformance of logprobs, top_logprobs and logit_bias: the official openai client against a real `hearth serve`, on
// both real model families (SmolLM2's byte-level BPE, Gemma 3's SentencePiece with byte fallback).
import { readGgufFileInfo } from "node-llama-cpp";
import type OpenAI from "openai";
import { APIError } from "openai";
import { beforeAll, describe, expect, it } from "vitest";
import { MODEL_FAMILIES, pullModel } from "../support/models.js";
import { serveModelFamilies } from "../support/served-models.js";

const served = serveModelFamilies();

const ask = (content: string) => [{ role: "user" as const, content }];

/** A model's GGUF vocabulary, to name tokens by id as a client would (the ids `logit_bias` takes). */
interface Vocabulary {
  /** The GGUF pieces, indexed by token id. */
  pieces: readonly string[];
  /** The id of the token whose text is `text`, as the tokenizer spells it; -1 when there is none. */
  idOf(text: string): number;
  /** The id of the token that is the one byte `byte` alone. */
  idOfByte(byte: number): number;
}

/** GPT-2's byte alphabet: printable bytes stand for themselves, the rest for U+0100 onwards in order. */
function gpt2Char(byte: number): string {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  if (printable(byte)) return String.fromCodePoint(byte);
  let next = 256;
  for (let b = 0; b < byte; b++) if (!printable(b)) next++;
  return String.fromCodePoint(next);
}

async function vocabularyOf(path: string): Promise<Vocabulary> {
  const ggml = (await readGgufFileInfo(path)).metadata.tokenizer?.ggml;
  const pieces = [...(ggml?.tokens ?? [])];
  if (ggml?.model === "gpt2") {
    // Byte-level BPE: every byte is a character of GPT-2's alphabet (a space is "Ġ", a newline "Ċ").
    const spell = (text: string) => [...Buffer.from(text, "utf8")].map(gpt2Char).join("");
    return {
      pieces,
      idOf: (text) => pieces.indexOf(spell(text)),
      idOfByte: (byte) => pieces.indexOf(gpt2Char(byte)),
    };
  }
  expect(ggml?.model).toBe("llama");
  // SentencePiece: a space is "▁"; a byte without a piece of its own is the byte-fallback token "<0xNN>".
  const hex = (byte: number) => `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`;
  return {
    pieces,
    idOf: (text) => pieces.indexOf(text.replaceAll(" ", "\u2581")),
    idOfByte: (byte) => pieces.indexOf(hex(byte)),
  };
}

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

describe.each(MODEL_FAMILIES)("$model.id", ({ model }) => {
  const MODEL = model.id;
  let vocabulary: Vocabulary;
  const idOf = (text: string) => vocabulary.idOf(text);

  beforeAll(async () => {
    vocabulary = await vocabularyOf(await pullModel(model));
  });

  describe("logprobs", () => {
    it("non-streamed: every content token with its logprob, bytes and top alternatives", async () => {
      const completion = await served.client.chat.completions.create({
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
      const on = await served.client.chat.completions.create({ ...base, logprobs: true });
      expectWellFormed(on.choices[0]?.logprobs?.content ?? [], 0, true);
      const off = await served.client.chat.completions.create(base);
      expect(off.choices[0]?.logprobs).toBeNull();
    });

    it("streamed: content chunks carry their tokens, the same as the non-streamed reply", async () => {
      const body = { model: MODEL, messages: ask("Count to five."), temperature: 0, max_tokens: 12 };
      const whole = await served.client.chat.completions.create({ ...body, logprobs: true, top_logprobs: 2 });
      const stream = await served.client.chat.completions.create({
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
      const completion = await served.client.chat.completions.create({
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
      const completion = await served.client.chat.completions.create({
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
      const plain = await served.client.chat.completions.create(base);
      const first = plain.choices[0]?.logprobs?.content?.[0]?.token as string;
      const firstId = idOf(first);
      expect(firstId).toBeGreaterThanOrEqual(0);
      const banned = await served.client.chat.completions.create({
        ...base,
        logit_bias: { [firstId]: -100 },
      });
      const bannedTokens = banned.choices[0]?.logprobs?.content?.map((e) => e.token) ?? [];
      expect(bannedTokens.length).toBeGreaterThan(0);
      expect(bannedTokens).not.toContain(first);

      const purple = idOf(" purple");
      expect(purple).toBeGreaterThanOrEqual(0);
      const forced = await served.client.chat.completions.create({ ...base, logit_bias: { [purple]: 100 } });
      const forcedTokens = forced.choices[0]?.logprobs?.content ?? [];
      expect(forcedTokens.map((e) => e.token)).toEqual([" purple", " purple", " purple"]);
      expect(forced.choices[0]?.message.content).toBe(" purple purple purple");
    });

    it("a character spelled in single-byte tokens: each entry's bytes are its byte, joined they are the content", async () => {
      // "é" is C3 A9 in UTF-8: with both bytes' own tokens forced, the reply is made of them alone.
      const [c3, a9] = [vocabulary.idOfByte(0xc3), vocabulary.idOfByte(0xa9)];
      expect(c3).toBeGreaterThanOrEqual(0);
      expect(a9).toBeGreaterThanOrEqual(0);
      const completion = await served.client.chat.completions.create({
        model: MODEL,
        messages: ask("Write the word café."),
        temperature: 0,
        max_tokens: 4,
        logprobs: true,
        top_logprobs: 2,
        logit_bias: { [c3]: 100, [a9]: 100 },
      });
      const choice = completion.choices[0];
      const content = choice?.logprobs?.content ?? [];
      expect(content).toHaveLength(4);
      for (const entry of content) {
        expect([[0xc3], [0xa9]]).toContainEqual(entry.bytes);
        expect(entry.token).toBe("\ufffd");
        expect(entry.top_logprobs.map((alt) => alt.bytes).sort()).toEqual([[0xa9], [0xc3]]);
      }
      expect(joinBytes(content)).toBe(choice?.message.content);
    });

    it("an id beyond the vocabulary is a 400; the last id is a token", async () => {
      const size = vocabulary.pieces.length;
      const request = (id: number) =>
        served.client.chat.completions.create({
          model: MODEL,
          messages: ask("hi"),
          max_tokens: 1,
          logit_bias: { [id]: 1 },
        });
      const err = await request(size).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(APIError);
      expect((err as APIError).status).toBe(400);
      expect((err as APIError).param).toBe("logit_bias");
      expect((err as APIError).message).toMatch(/not a token of this model/);
      const last = await request(size - 1);
      expect(last.choices).toHaveLength(1);
    });
  });
});

/** Checks of the request's shape, the same on every model (the default one serves them). */
describe("bad logprobs and logit_bias fields", () => {
  const MODEL = MODEL_FAMILIES[0]?.model.id as string;

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    ["a bias beyond 100", { logit_bias: { "5": 101 } }, "logit_bias", /-100 to 100/],
    ["a key that is not a token id", { logit_bias: { hello: 1 } }, "logit_bias", /Invalid key/],
    ["top_logprobs without logprobs", { top_logprobs: 2 }, "top_logprobs", /'logprobs' must be set to true/],
    ["top_logprobs above 20", { logprobs: true, top_logprobs: 21 }, "top_logprobs", /20/],
  ])("400 for %s", async (_, fields, param, message) => {
    const err = await served.client.chat.completions
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
