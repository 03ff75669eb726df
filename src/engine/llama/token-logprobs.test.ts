import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { LOGPROB_FLOOR } from "../types.js";
import { logprobMetadata, logprobOf, TokenLogprobs, Vocabulary } from "./token-logprobs.js";

/** A vocabulary as GGUF metadata states it. */
function vocabulary(kind: string, tokens: string[], types: number[] = []): Vocabulary {
  return new Vocabulary({
    fileInfo: { metadata: { tokenizer: { ggml: { model: kind, tokens, token_type: types } } } },
    detokenize: (ids) => ids.map((id) => `<${id}>`).join(""),
  });
}

const t = (id: number) => id as Token;

describe("Vocabulary", () => {
  it("byte-level BPE: each character of the piece is one byte of GPT-2's alphabet", () => {
    // "Ġhello" is " hello"; "âĢ" is the first two bytes of U+2014 (E2 80), a partial character.
    const v = vocabulary("gpt2", ["<|endoftext|>", "Ġhello", "âĢ", "Ċ", "é"], [3, 1, 1, 1, 1]);
    expect(v.size).toBe(5);
    expect(v.text(t(1))).toEqual({ token: " hello", bytes: [32, 104, 101, 108, 108, 111] });
    expect(v.text(t(2)).bytes).toEqual([0xe2, 0x80]);
    expect(v.text(t(2)).token).toBe("\uFFFD");
    expect(v.text(t(3))).toEqual({ token: "\n", bytes: [10] });
    // U+00E9 stands for byte 0xE9 in the alphabet (a byte, not the character é).
    expect(v.text(t(4)).bytes).toEqual([0xe9]);
    // A control token is its piece's text.
    expect(v.text(t(0))).toEqual({ token: "<|endoftext|>", bytes: [...Buffer.from("<|endoftext|>")] });
  });

  it("SentencePiece: U+2581 is a space and <0xNN> a single byte", () => {
    const v = vocabulary("llama", ["<s>", "\u2581hello", "<0xE2>", "é"], [3, 1, 6, 1]);
    expect(v.text(t(1))).toEqual({ token: " hello", bytes: [32, 104, 101, 108, 108, 111] });
    expect(v.text(t(2)).bytes).toEqual([0xe2]);
    expect(v.text(t(3))).toEqual({ token: "é", bytes: [0xc3, 0xa9] });
  });

  it("other tokenizers: the detokenized text", () => {
    const v = vocabulary("bert", ["a", "b"]);
    expect(v.text(t(1))).toEqual({ token: "<1>", bytes: [...Buffer.from("<1>")] });
  });
});

describe("logprobs", () => {
  it("floors at -9999 what JSON cannot hold", () => {
    expect(logprobOf(1)).toBe(0);
    expect(logprobOf(0.5)).toBeCloseTo(Math.log(0.5), 12);
    expect(logprobOf(0)).toBe(LOGPROB_FLOOR);
    expect(logprobOf(undefined)).toBe(LOGPROB_FLOOR);
    expect(logprobOf(Number.MIN_VALUE)).toBe(-744.4400719213812);
  });

  it("asks the sampler for nothing, the chosen token's probability, or the distribution", () => {
    const sampling = {
      temperature: 0,
      topP: 1,
      frequencyPenalty: 0,
      presencePenalty: 0,
      seed: 1,
      maxTokens: 1,
      stop: [],
    };
    expect(logprobMetadata(sampling)).toEqual({});
    expect(logprobMetadata({ ...sampling, logprobs: 0 })).toEqual({ confidence: true });
    expect(logprobMetadata({ ...sampling, logprobs: 3 })).toEqual({ probabilities: true });
  });

  it("the chosen token's logprob and the `top` first of the distribution, in its order", () => {
    const v = vocabulary("gpt2", ["a", "b", "c", "d"]);
    const probabilities = new Map([
      [t(2), 0.5],
      [t(0), 0.25],
      [t(3), 0.25],
      [t(1), 0],
    ]);
    const entry = new TokenLogprobs(v, 2).of({ token: t(0), probabilities });
    expect(entry).toEqual({
      token: "a",
      bytes: [97],
      logprob: Math.log(0.25),
      topLogprobs: [
        { token: "c", bytes: [99], logprob: Math.log(0.5) },
        { token: "a", bytes: [97], logprob: Math.log(0.25) },
      ],
    });
    expect(new TokenLogprobs(v, 0).of({ token: t(1), confidence: 0.125 })).toEqual({
      token: "b",
      bytes: [98],
      logprob: Math.log(0.125),
      topLogprobs: [],
    });
    // More asked than the sampler kept: what there is.
    expect(new TokenLogprobs(v, 20).of({ token: t(1), probabilities }).topLogprobs).toHaveLength(4);
  });
});
