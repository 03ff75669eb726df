import { describe, expect, it } from "vitest";
import { type Detokenizer, Utf8TokenDecoder } from "./utf8.js";

/**
 * A byte-level tokenizer like GPT-2's: every token is a run of bytes, decoded with replacement characters for
 * invalid or incomplete UTF-8 (as node-llama-cpp does), and `lastTokens` handled the way LlamaModel handles it.
 */
class FakeByteTokenizer implements Detokenizer {
  readonly vocabulary: Uint8Array[] = [];
  readonly calls: {
    tokens: number[];
    specialTokens: boolean | undefined;
    lastTokens: number[] | undefined;
  }[] = [];

  add(bytes: readonly number[]): number {
    this.vocabulary.push(Uint8Array.from(bytes));
    return this.vocabulary.length - 1;
  }

  /** Splits text's UTF-8 bytes into tokens of the given sizes (cycled). */
  tokenize(text: string, sizes: readonly number[]): number[] {
    const bytes = new TextEncoder().encode(text);
    const tokens: number[] = [];
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const size = sizes[i % sizes.length] ?? 1;
      tokens.push(this.add([...bytes.slice(at, at + size)]));
      at += size;
    }
    return tokens;
  }

  detokenize(tokens: readonly number[], specialTokens?: boolean, lastTokens?: readonly number[]): string {
    this.calls.push({ tokens: [...tokens], specialTokens, lastTokens: lastTokens && [...lastTokens] });
    if (lastTokens === undefined || lastTokens.length === 0) return this.#decode(tokens);
    const context = lastTokens.slice(-3);
    const contextText = this.#decode(context);
    const text = this.#decode([...context, ...tokens]);
    return text.startsWith(contextText) ? text.slice(contextText.length) : this.#decode(tokens);
  }

  #decode(tokens: readonly number[]): string {
    const parts = tokens.map((token) => {
      const bytes = this.vocabulary[token];
      if (bytes === undefined) throw new Error(`unknown token ${token}`);
      return bytes;
    });
    const joined = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      joined.set(part, offset);
      offset += part.length;
    }
    return new TextDecoder("utf-8", { fatal: false, ignoreBOM: true }).decode(joined);
  }
}

function decodeAll(decoder: Utf8TokenDecoder, tokens: readonly number[]): string[] {
  const pieces = tokens.map((token) => decoder.push(token));
  pieces.push(decoder.flush());
  return pieces;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const SAMPLE = "Héllo 😀 世界, naïve café ✓ 日本語のテキスト 🇯🇵🎉 done";

describe("Utf8TokenDecoder", () => {
  it("holds the bytes of an emoji until the character is complete", () => {
    const tokenizer = new FakeByteTokenizer();
    const tokens = tokenizer.tokenize("😀", [1]);
    expect(tokens).toHaveLength(4);
    expect(decodeAll(new Utf8TokenDecoder(tokenizer), tokens)).toEqual(["", "", "", "😀", ""]);
  });

  it("emits the complete text before a partial character at once", () => {
    const tokenizer = new FakeByteTokenizer();
    const bytes = [...new TextEncoder().encode("ab😀c")];
    const tokens = [
      tokenizer.add(bytes.slice(0, 3)),
      tokenizer.add(bytes.slice(3, 5)),
      tokenizer.add(bytes.slice(5)),
    ];
    expect(decodeAll(new Utf8TokenDecoder(tokenizer), tokens)).toEqual(["ab", "", "😀c", ""]);
  });

  it("reproduces text exactly, never emitting U+FFFD or half a surrogate pair, for any token boundaries", () => {
    for (const sizes of [[1], [2], [3], [5], [1, 2], [2, 3, 1], [4, 1, 5, 2], [7], [3, 3, 2, 1]]) {
      const tokenizer = new FakeByteTokenizer();
      const pieces = decodeAll(new Utf8TokenDecoder(tokenizer), tokenizer.tokenize(SAMPLE, sizes));
      expect(pieces.join(""), `sizes ${sizes.join(",")}`).toBe(SAMPLE);
      for (const piece of pieces) {
        expect(piece).not.toContain("\uFFFD");
        expect(LONE_SURROGATE.test(piece)).toBe(false);
      }
    }
  });

  it("decodes groups of straddling tokens whole, up to maxPendingTokens", () => {
    const tokenizer = new FakeByteTokenizer();
    // 3- and 4-byte characters in 2-byte tokens: boundaries meet after 10 bytes, then 4 (groups of 5 and 2 tokens).
    const text = "漢😀".repeat(300);
    const tokens = tokenizer.tokenize(text, [2]);
    const pieces = decodeAll(new Utf8TokenDecoder(tokenizer), tokens);
    expect(pieces.join("")).toBe(text);
    expect(pieces.filter((piece) => piece === "").length).toBeLessThan(tokens.length / 2);
    expect(Math.max(...tokenizer.calls.map((call) => call.tokens.length))).toBe(5);

    // Boundaries never meet here (1 byte, then 3-byte tokens over 3-byte characters): the cap bounds each decode.
    const capped = new FakeByteTokenizer();
    const cjk = "漢字".repeat(100);
    const chain = capped.tokenize(cjk, [1, ...Array<number>(cjk.length).fill(3)]);
    const cappedPieces = decodeAll(new Utf8TokenDecoder(capped, { maxPendingTokens: 16 }), chain);
    expect(Math.max(...capped.calls.map((call) => call.tokens.length))).toBe(16);
    expect(cappedPieces.join("").length).toBeGreaterThan(cjk.length - 30);
    const uncapped = new FakeByteTokenizer();
    expect(
      decodeAll(new Utf8TokenDecoder(uncapped), uncapped.tokenize("漢字".repeat(30), [1, 3])).join(""),
    ).toBe("漢字".repeat(30));
  });

  it("emits invalid bytes as U+FFFD once more tokens cannot complete them", () => {
    const tokenizer = new FakeByteTokenizer();
    const stray = tokenizer.add([0x80]);
    const a = tokenizer.add([0x41]);
    // Followed by text: the replacement character is final at once.
    expect(decodeAll(new Utf8TokenDecoder(tokenizer), [stray, a])).toEqual(["", "\uFFFDA", ""]);
    // Only invalid bytes: released after maxStalledTokens tokens without progress.
    expect(
      decodeAll(new Utf8TokenDecoder(tokenizer, { maxStalledTokens: 3 }), [stray, stray, stray, stray]),
    ).toEqual(["", "", "\uFFFD\uFFFD\uFFFD", "", "\uFFFD"]);
  });

  it("flushes a character cut off by the end of generation as U+FFFD", () => {
    const tokenizer = new FakeByteTokenizer();
    const bytes = [...new TextEncoder().encode("ok😀")];
    const tokens = [tokenizer.add(bytes.slice(0, 4))];
    const decoder = new Utf8TokenDecoder(tokenizer);
    expect(decoder.push(tokens[0] ?? -1)).toBe("ok");
    expect(decoder.flush()).toBe("\uFFFD");
    expect(decoder.flush()).toBe("");
  });

  it("passes the prompt's tail and then its own recent tokens as context, and the special-tokens flag", () => {
    const tokenizer = new FakeByteTokenizer();
    const prompt = tokenizer.tokenize("prompt", [2]);
    const output = tokenizer.tokenize("abc", [1]);
    const decoder = new Utf8TokenDecoder(tokenizer, { lastTokens: prompt, specialTokens: true });
    expect(decodeAll(decoder, output).join("")).toBe("abc");
    expect(tokenizer.calls[0]).toEqual({ tokens: [output[0]], specialTokens: true, lastTokens: prompt });
    expect(tokenizer.calls[2]?.lastTokens?.slice(-2)).toEqual([output[0], output[1]]);
  });
});
