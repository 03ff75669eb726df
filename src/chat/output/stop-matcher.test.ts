import { describe, expect, it } from "vitest";
import { StopMatcher } from "./stop-matcher.js";

/** Feeds chunks and returns everything that would reach the client, and whether a stop matched. */
function run(stops: string[], chunks: string[]): { output: string; stopped: boolean; emits: string[] } {
  const matcher = new StopMatcher(stops);
  const emits: string[] = [];
  let stopped = false;
  for (const chunk of chunks) {
    const result = matcher.push(chunk);
    emits.push(result.emit);
    if (result.stopped) {
      stopped = true;
      break;
    }
  }
  if (!stopped) emits.push(matcher.flush());
  return { output: emits.join(""), stopped, emits };
}

/** The definition, one character at a time: stop where a stop string first ends, cut where it starts. */
function reference(stops: string[], text: string): { output: string; stopped: boolean } {
  const candidates = stops.filter((stop) => stop !== "");
  for (let end = 1; end <= text.length; end++) {
    const prefix = text.slice(0, end);
    const matched = candidates.filter((stop) => prefix.endsWith(stop));
    if (matched.length > 0) {
      const longest = Math.max(...matched.map((stop) => stop.length));
      return { output: prefix.slice(0, end - longest), stopped: true };
    }
  }
  return { output: text, stopped: false };
}

/** Small deterministic PRNG (mulberry32), so a failure reproduces. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomChunks(text: string, random: () => number): string[] {
  const chunks: string[] = [];
  let at = 0;
  while (at < text.length) {
    const size = 1 + Math.floor(random() * 4);
    chunks.push(text.slice(at, at + size));
    at += size;
  }
  return chunks;
}

describe("StopMatcher", () => {
  it("passes text through when there are no stop strings", () => {
    const matcher = new StopMatcher([]);
    expect(matcher.push("Hello <|im_end|>")).toEqual({ emit: "Hello <|im_end|>", stopped: false });
    expect(matcher.push("")).toEqual({ emit: "", stopped: false });
    expect(matcher.flush()).toBe("");
  });

  it("ignores empty and duplicate stop strings", () => {
    expect(run(["", ""], ["abc"])).toMatchObject({ output: "abc", stopped: false });
    expect(run(["x", "x", ""], ["abxcd"])).toMatchObject({ output: "ab", stopped: true });
  });

  it("cuts before a stop string inside one push and drops everything after it", () => {
    expect(run(["STOP"], ["Hello STOP world"])).toEqual({
      output: "Hello ",
      stopped: true,
      emits: ["Hello "],
    });
  });

  it("emits nothing when the text starts with the stop string", () => {
    expect(run(["STOP"], ["STOP and more"])).toEqual({ output: "", stopped: true, emits: [""] });
  });

  it("holds back a possible prefix and emits it once it cannot match any more", () => {
    const matcher = new StopMatcher(["STOP"]);
    expect(matcher.push("go ST")).toEqual({ emit: "go ", stopped: false });
    expect(matcher.push("O")).toEqual({ emit: "", stopped: false });
    expect(matcher.push("RM")).toEqual({ emit: "STORM", stopped: false });
    expect(matcher.flush()).toBe("");
  });

  it("returns held-back text on flush when generation ends without a match", () => {
    const matcher = new StopMatcher(["</answer>"]);
    expect(matcher.push("42 </ans")).toEqual({ emit: "42 ", stopped: false });
    expect(matcher.flush()).toBe("</ans");
    expect(matcher.flush()).toBe("");
  });

  it("matches a stop string spread over many pushes", () => {
    const result = run(["<|end|>"], ["a", "<", "|", "e", "n", "d", "|", ">", "tail"]);
    expect(result).toEqual({ output: "a", stopped: true, emits: ["a", "", "", "", "", "", "", ""] });
  });

  it("keeps reporting stopped and emits nothing after a match", () => {
    const matcher = new StopMatcher(["x"]);
    expect(matcher.push("abx")).toEqual({ emit: "ab", stopped: true });
    expect(matcher.stopped).toBe(true);
    expect(matcher.push("more")).toEqual({ emit: "", stopped: true });
    expect(matcher.flush()).toBe("");
  });

  it("finds a match that starts inside an earlier partial match (self-overlap)", () => {
    // "aa" is held as a prefix of "aab"; the third "a" shifts the candidate by one.
    expect(run(["aab"], ["a", "a", "a", "b", "c"])).toMatchObject({ output: "a", stopped: true });
    // "aba" is held for "abac", fails at "b", yet its tail "ab" starts the real match.
    expect(run(["abac"], ["xaba", "bac"])).toMatchObject({ output: "xab", stopped: true });
  });

  it("prefers the stop string that completes first", () => {
    // "bc" completes before "abcd" would, whatever the chunking.
    expect(run(["abcd", "bc"], ["abcd"])).toMatchObject({ output: "a", stopped: true });
    expect(run(["abcd", "bc"], ["a", "b", "c", "d"])).toMatchObject({ output: "a", stopped: true });
    expect(run(["world", "lo"], ["hello world"])).toMatchObject({ output: "hel", stopped: true });
  });

  it("takes the longest of stop strings that end at the same place", () => {
    expect(run(["ab", "xab"], ["zxab"])).toMatchObject({ output: "z", stopped: true });
    expect(run(["xab", "ab"], ["z", "x", "a", "b"])).toMatchObject({ output: "z", stopped: true });
  });

  it("holds the longest partial among several candidates", () => {
    const matcher = new StopMatcher(["END", "\n\nUser:"]);
    expect(matcher.push("ok\n\nUs")).toEqual({ emit: "ok", stopped: false });
    expect(matcher.push("e")).toEqual({ emit: "", stopped: false });
    expect(matcher.push("d it")).toEqual({ emit: "\n\nUsed it", stopped: false });
  });

  it("works with non-ASCII stop strings", () => {
    expect(run(["😀"], ["héllo ", "😀", " after"])).toMatchObject({ output: "héllo ", stopped: true });
    expect(run(["世界"], ["你好世", "界"])).toMatchObject({ output: "你好", stopped: true });
  });

  it("matches the character-at-a-time definition for any chunking (randomised)", () => {
    const random = prng(12345);
    const alphabet = "ab c";
    const word = (min: number, max: number) =>
      Array.from(
        { length: min + Math.floor(random() * (max - min + 1)) },
        () => alphabet[Math.floor(random() * alphabet.length)],
      ).join("");
    for (let round = 0; round < 3000; round++) {
      const stops = Array.from({ length: Math.floor(random() * 5) }, () => word(1, 4));
      const text = word(0, 24);
      const expected = reference(stops, text);
      for (let chunking = 0; chunking < 3; chunking++) {
        const actual = run(stops, randomChunks(text, random));
        expect({ stops, text, ...actual, emits: undefined }).toEqual({
          stops,
          text,
          ...expected,
          emits: undefined,
        });
        for (const stop of stops.filter((s) => s !== "")) expect(actual.output.includes(stop)).toBe(false);
      }
    }
  });
});
