import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { OutputParser } from "../../chat/output/parser.js";
import { planGeneration, planPrompt } from "../../chat/output/plan.js";
import { compileJsonSchema } from "../../chat/schema/compiled-schema.js";
import type { TemplateCapabilities } from "../../chat/template/tool-format.js";
import type { GenerationEvent, OutputRequest } from "../types.js";
import { ChoiceStream, type ChoiceStreamOptions, usageOf } from "./choice-stream.js";
import { TokenLogprobs, Vocabulary } from "./token-logprobs.js";

/** A vocabulary built as the test goes: each piece (text or raw bytes) becomes a token; token 0 ends generation. */
class FakeModel {
  private readonly pieces: Buffer[] = [Buffer.alloc(0)];
  readonly eog = 0 as Token;

  tokens(...pieces: (string | number[])[]): Token[] {
    return pieces.map((piece) => {
      this.pieces.push(typeof piece === "string" ? Buffer.from(piece) : Buffer.from(piece));
      return (this.pieces.length - 1) as Token;
    });
  }

  detokenize(tokens: readonly number[]): string {
    // Like llama.cpp: a piece that ends inside a UTF-8 character decodes to U+FFFD.
    return Buffer.concat(tokens.map((t) => this.pieces[t] ?? Buffer.alloc(0))).toString("utf8");
  }

  isEogToken(token: Token): boolean {
    return token === this.eog;
  }
}

const PLAIN: TemplateCapabilities = { tools: undefined, nativeThinking: false };

function structured(output: OutputRequest | undefined, enableThinking = false) {
  const prompt = planPrompt([{ role: "user", content: "hi" }], output, enableThinking, PLAIN);
  const plan = planGeneration(prompt, "", output, PLAIN);
  return {
    plan,
    output: { parser: new OutputParser(plan.parser), grammarState: undefined, reasoningTokens: 0, tail: "" },
  };
}

/** One tool, `get_weather(city)`, offered with tool_choice auto. */
function weatherTools(): OutputRequest {
  const parameters = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
  return {
    format: { type: "text" },
    tools: [{ name: "get_weather", parameters, compiledParameters: compileJsonSchema(parameters) }],
    toolChoice: "auto",
    parallelToolCalls: true,
  };
}

function stream(model: FakeModel, options: Partial<ChoiceStreamOptions> = {}) {
  const events: GenerationEvent[] = [];
  const choice = new ChoiceStream({
    index: 0,
    model,
    stop: [],
    ignoreEos: false,
    maxTokens: 100,
    structured: undefined,
    emit: (event) => events.push(event),
    ...options,
  });
  const text = (kind?: string) =>
    events
      .filter((e) => e.type === "delta" && (e.target?.kind ?? "content") === (kind ?? "content"))
      .map((e) => (e.type === "delta" ? e.text : ""))
      .join("");
  const finish = () => events.filter((e) => e.type === "finish");
  return { choice, events, text, finish };
}

describe("ChoiceStream", () => {
  it("streams text and finishes with stop at the end-of-generation token", () => {
    const model = new FakeModel();
    const { choice, events, text, finish } = stream(model);
    for (const token of [...model.tokens("Hello", ",", " world"), model.eog]) choice.push(token);
    expect(text()).toBe("Hello, world");
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "stop" }]);
    expect(choice.finished).toBe(true);
    expect(choice.generated).toHaveLength(3);
    choice.push(model.tokens("more")[0]);
    expect(events.at(-1)?.type).toBe("finish");
    expect(choice.generated).toHaveLength(3);
  });

  it("finishes with length at the last token of the budget, and stop when the generator ends", () => {
    const model = new FakeModel();
    const limited = stream(model, { maxTokens: 2 });
    for (const token of model.tokens("a", "b")) limited.choice.push(token);
    expect(limited.finish()).toEqual([{ type: "finish", choice: 0, reason: "length" }]);
    const ended = stream(model, { index: 3 });
    ended.choice.push(model.tokens("a")[0]);
    ended.choice.push(undefined);
    expect(ended.finish()).toEqual([{ type: "finish", choice: 3, reason: "stop" }]);
  });

  it("never splits a UTF-8 character across deltas", () => {
    const model = new FakeModel();
    const { choice, events, text } = stream(model);
    // "é" is C3 A9, "🙂" is F0 9F 99 82: both arrive in pieces.
    for (const token of model.tokens("caf", [0xc3], [0xa9], " ", [0xf0, 0x9f], [0x99], [0x82]))
      choice.push(token);
    choice.push(model.eog);
    expect(text()).toBe("café 🙂");
    for (const event of events) if (event.type === "delta") expect(event.text).not.toContain("\uFFFD");
  });

  it("ends before a stop string and never emits it, nor anything after it", () => {
    const model = new FakeModel();
    const { choice, text, finish } = stream(model, { stop: ["5"] });
    for (const token of model.tokens("1, 2,", " 3, 4", ", 5", ", 6")) choice.push(token);
    expect(text()).toBe("1, 2, 3, 4, ");
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "stop" }]);
  });

  it("emits text held for a possible stop string when the choice ends otherwise", () => {
    const model = new FakeModel();
    const { choice, text, finish } = stream(model, { stop: ["xyz"], maxTokens: 2 });
    for (const token of model.tokens("abc ", "xy")) choice.push(token);
    expect(text()).toBe("abc xy");
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "length" }]);
  });

  it("treats the end-of-generation token as text when told to ignore it (benchmarks)", () => {
    const model = new FakeModel();
    const { choice, finish } = stream(model, { ignoreEos: true, maxTokens: 3 });
    choice.push(model.eog);
    choice.push(model.eog);
    expect(finish()).toEqual([]);
    choice.push(model.eog);
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "length" }]);
    expect(choice.generated).toEqual([model.eog, model.eog, model.eog]);
  });

  it("JSON mode: a JSON answer that closed on the last token of the budget finishes with stop", () => {
    const model = new FakeModel();
    const json: OutputRequest = {
      format: { type: "json_object" },
      tools: [],
      toolChoice: "auto",
      parallelToolCalls: true,
    };
    const { choice, text, finish } = stream(model, {
      structured: structured(json),
      stop: ["a"],
      maxTokens: 3,
    });
    for (const token of model.tokens('{"a"', ": 1", "}")) choice.push(token);
    // Stop strings never cut JSON.
    expect(text()).toBe('{"a": 1}');
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "stop" }]);
  });

  it("JSON mode: a JSON answer cut by the budget finishes with length", () => {
    const model = new FakeModel();
    const json: OutputRequest = {
      format: { type: "json_object" },
      tools: [],
      toolChoice: "auto",
      parallelToolCalls: true,
    };
    const { choice, finish } = stream(model, { structured: structured(json), maxTokens: 2 });
    for (const token of model.tokens('{"a"', ": 1")) choice.push(token);
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "length" }]);
  });

  it("tools: streams a call's name and arguments and finishes with tool_calls", () => {
    const model = new FakeModel();
    const tools = weatherTools();
    const { choice, events, finish } = stream(model, { structured: structured(tools) });
    const pieces = [
      "<tool_call>\n",
      '{"name": "get_weather", ',
      '"arguments": {"city": ',
      '"Paris"}}\n',
      "</tool_call>",
    ];
    for (const token of [...model.tokens(...pieces), model.eog]) choice.push(token);
    const calls = events.flatMap((e) => (e.type === "delta" && e.target?.kind === "tool_call" ? [e] : []));
    expect(calls[0]?.target).toEqual({ kind: "tool_call", call: 0, name: "get_weather" });
    expect(JSON.parse(calls.map((e) => e.text).join(""))).toEqual({ city: "Paris" });
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "tool_calls" }]);
  });

  it("reasoning: streams the thought apart from the answer and counts its tokens", () => {
    const model = new FakeModel();
    const { choice, text, finish } = stream(model, { structured: structured(undefined, true) });
    for (const token of [...model.tokens("Let me think.", "</think>", "\n\nHello"), model.eog])
      choice.push(token);
    expect(text("reasoning")).toBe("Let me think.");
    expect(text()).toBe("Hello");
    expect(choice.reasoningTokens).toBe(2);
    expect(finish()).toEqual([{ type: "finish", choice: 0, reason: "stop" }]);
  });
});

describe("ChoiceStream logprobs", () => {
  /** Logprobs on: token i is sampled with probability 1/(i+1), so each entry names its token. */
  function withLogprobs(model: FakeModel, options: Partial<ChoiceStreamOptions> = {}) {
    const vocabulary = new Vocabulary({
      fileInfo: { metadata: {} },
      detokenize: (ids) => model.detokenize(ids),
    });
    const s = stream(model, { logprobs: new TokenLogprobs(vocabulary, 0), ...options });
    const push = (...tokens: Token[]) => {
      for (const token of tokens) s.choice.push(token, { token, confidence: 1 / (token + 1) });
    };
    const reported = (kind?: string) =>
      s.events.flatMap((e) =>
        e.type === "delta" && (e.target?.kind ?? "content") === (kind ?? "content") ? (e.logprobs ?? []) : [],
      );
    return { ...s, push, reported };
  }

  it("each content delta carries the tokens its text came from", () => {
    const model = new FakeModel();
    const { push, events, reported } = withLogprobs(model);
    const tokens = model.tokens("Hello", ",", " world");
    push(...tokens, model.eog);
    expect(reported().map((e) => e.token)).toEqual(["Hello", ",", " world"]);
    expect(reported().map((e) => e.logprob)).toEqual(tokens.map((tk) => Math.log(1 / (tk + 1))));
    const deltas = events.filter((e) => e.type === "delta");
    expect(deltas.every((e) => e.type === "delta" && e.logprobs?.length === 1)).toBe(true);
  });

  it("a token that completes a held character reports both with that character", () => {
    const model = new FakeModel();
    const { push, events, reported } = withLogprobs(model);
    // U+2014 (E2 80 94) split over two tokens.
    push(...model.tokens("a", [0xe2, 0x80], [0x94]), model.eog);
    // (This vocabulary has no GGUF pieces: the partial tokens' own bytes are Vocabulary's test.)
    expect(reported()).toHaveLength(3);
    const last = events.filter((e) => e.type === "delta").at(-1);
    expect(last?.type === "delta" && last.text).toBe("—");
    expect(last?.type === "delta" && last.logprobs?.length).toBe(2);
  });

  it("tokens in a stop string are not reported; one that straddles its start is", () => {
    const model = new FakeModel();
    const { push, text, reported } = withLogprobs(model, { stop: ["world"] });
    push(...model.tokens("Hello", " wor", "ld", "!"));
    expect(text()).toBe("Hello ");
    expect(reported().map((e) => e.token)).toEqual(["Hello", " wor"]);
  });

  it("text held for a stop string that does not match is reported when it comes out", () => {
    const model = new FakeModel();
    const { push, text, reported } = withLogprobs(model, { stop: ["world"] });
    push(...model.tokens("Hello", " wor", "m"), model.eog);
    expect(text()).toBe("Hello worm");
    expect(reported().map((e) => e.token)).toEqual(["Hello", " wor", "m"]);
  });

  it("reasoning tokens and tool-call tokens are not content tokens", () => {
    const model = new FakeModel();
    const thinking = withLogprobs(model, { structured: structured(undefined, true) });
    thinking.push(...model.tokens("Let me think.", "</think>", "\n\nHello"), model.eog);
    expect(thinking.reported().map((e) => e.token)).toEqual(["\n\nHello"]);
    expect(thinking.reported("reasoning")).toEqual([]);

    const tools = weatherTools();
    const calling = withLogprobs(model, { structured: structured(tools) });
    calling.push(
      ...model.tokens(
        "<tool_call>\n",
        '{"name": "get_weather", ',
        '"arguments": {"city": "Paris"}}\n',
        "</tool_call>",
      ),
      model.eog,
    );
    expect(calling.reported()).toEqual([]);
    expect(calling.reported("tool_call")).toEqual([]);
  });

  it("without logprobs no delta has the field", () => {
    const model = new FakeModel();
    const { choice, events } = stream(model);
    for (const token of model.tokens("a", "b")) choice.push(token, { token, confidence: 0.5 });
    expect(events.some((e) => e.type === "delta" && "logprobs" in e)).toBe(false);
  });
});

describe("usageOf", () => {
  it("adds every choice's generated and reasoning tokens", () => {
    const model = new FakeModel();
    const a = stream(model, { structured: structured(undefined, true) }).choice;
    const b = stream(model, { index: 1 }).choice;
    for (const token of model.tokens("hm", "</think>", "ok")) a.push(token);
    for (const token of model.tokens("x", "y", "z")) b.push(token);
    expect(usageOf(12, 4, [a, b])).toEqual({
      promptTokens: 12,
      completionTokens: 6,
      cachedTokens: 4,
      reasoningTokens: 2,
    });
  });
});
