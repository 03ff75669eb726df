import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { compileJsonSchema } from "../schema/compiled-schema.js";
import { createPromptRenderer } from "../template/render.js";
import { detectCapabilities } from "../template/tool-format.js";
import { endsInsideThinking, OutputParser, type OutputParserOptions, type OutputPart } from "./parser.js";
import { planGeneration, planPrompt } from "./plan.js";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8");
const QWEN3 = fixture("qwen3.jinja");
const LLAMA31 = fixture("llama-3.1.jinja");
const MISTRAL = fixture("mistral-nemo.jinja");
const DEEPSEEK_R1 = fixture("deepseek-r1.jinja");
const SMOLLM2 = fixture("smollm2.jinja");

/** Feeds text in pieces of `size` characters (1 = every tag split across "tokens"), merging parts of a kind. */
function parse(options: OutputParserOptions, text: string, size: number) {
  const parser = new OutputParser(options);
  const parts: OutputPart[] = [];
  for (let i = 0; i < text.length; i += size) parts.push(...parser.push(text.slice(i, i + size)));
  parts.push(...parser.finish());
  const reasoning = parts.flatMap((p) => (p.kind === "reasoning" ? [p.text] : [])).join("");
  const content = parts.flatMap((p) => (p.kind === "content" ? [p.text] : [])).join("");
  const calls = parser.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }));
  const starts = parts.filter((p) => p.kind === "tool_call").length;
  return { reasoning, content, calls, starts, parts };
}

const SPLITS = [1, 2, 3, 7, 1000];
const off = { reasoning: "off", startsInReasoning: false, tools: undefined, json: false } as const;

describe("OutputParser: reasoning", () => {
  it.each(SPLITS)("separates a <think> block the model opens itself (Qwen3), pieces of %i", (size) => {
    const result = parse(
      { ...off, reasoning: "on" },
      "<think>\nLet me add 2 and 2.\n</think>\n\nThe answer is 4.",
      size,
    );
    expect(result.reasoning).toBe("Let me add 2 and 2.");
    expect(result.content).toBe("The answer is 4.");
  });

  it.each(SPLITS)("starts inside the block when the prompt opened it (DeepSeek-R1), pieces of %i", (size) => {
    const result = parse(
      { ...off, reasoning: "on", startsInReasoning: true },
      "Two plus two.\n</think>\n\n4",
      size,
    );
    expect(result.reasoning).toBe("Two plus two.");
    expect(result.content).toBe("4");
  });

  it("treats a reply without a block as the answer, and never leaks tags into content", () => {
    expect(parse({ ...off, reasoning: "on" }, "Just 4.", 1)).toMatchObject({
      reasoning: "",
      content: "Just 4.",
    });
    expect(parse({ ...off, reasoning: "on" }, "<thin", 1).content).toBe("<thin");
    const cut = parse({ ...off, reasoning: "on", startsInReasoning: true }, "still thinking </thi", 3);
    expect(cut.reasoning).toBe("still thinking </thi");
    expect(cut.content).toBe("");
  });

  it("leaves text alone when reasoning is off (Qwen3 renders an empty block itself)", () => {
    expect(parse(off, "<think>x</think>y", 2)).toMatchObject({ reasoning: "", content: "<think>x</think>y" });
  });
});

describe("OutputParser: tool calls", () => {
  const hermes = { ...off, tools: { format: "hermes", mode: "auto" } } as const;
  const twoCalls =
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET", "n": [1, {"x": "}"}]}}\n</tool_call>';

  it.each(SPLITS)("parses Hermes/Qwen3 calls with nested JSON, pieces of %i", (size) => {
    const result = parse(hermes, twoCalls, size);
    expect(result.calls).toEqual([
      { name: "get_weather", arguments: '{"city": "Paris"}' },
      { name: "get_time", arguments: '{"tz": "CET", "n": [1, {"x": "}"}]}' },
    ]);
    expect(result.starts).toBe(2);
    expect(result.content).toBe("");
    // The fragments of a call concatenate to its arguments, and the name comes first.
    const first = result.parts.findIndex((p) => p.kind === "tool_call");
    expect(result.parts.slice(0, first).some((p) => p.kind === "tool_arguments")).toBe(false);
  });

  it.each(SPLITS)("parses Llama 3.1 JSON calls, pieces of %i", (size) => {
    const result = parse(
      { ...off, tools: { format: "llama3-json", mode: "required" } },
      '{"name": "f", "parameters": {"a": 1}}',
      size,
    );
    expect(result.calls).toEqual([{ name: "f", arguments: '{"a": 1}' }]);
  });

  it.each(SPLITS)("parses Mistral calls, pieces of %i", (size) => {
    const text = '[TOOL_CALLS][{"name": "f", "arguments": {"a": "x"}}, {"name": "g", "arguments": {}}]';
    const result = parse({ ...off, tools: { format: "mistral", mode: "auto" } }, text, size);
    expect(result.calls).toEqual([
      { name: "f", arguments: '{"a": "x"}' },
      { name: "g", arguments: "{}" },
    ]);
  });

  it("keeps text that only starts like a call as content (auto)", () => {
    expect(parse(hermes, "<tool>not a call", 1)).toMatchObject({ content: "<tool>not a call", calls: [] });
    expect(parse(hermes, "Hello <tool_call>", 4)).toMatchObject({ content: "Hello <tool_call>", calls: [] });
  });

  it.each(SPLITS)("reasoning, then a call (Qwen3 with thinking), pieces of %i", (size) => {
    const text =
      '<think>\nNeed the weather.\n</think>\n\n<tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>';
    const result = parse({ ...hermes, reasoning: "on" }, text, size);
    expect(result.reasoning).toBe("Need the weather.");
    expect(result.calls).toEqual([{ name: "w", arguments: "{}" }]);
  });
});

describe("chat templates and the output plan", () => {
  const tools = [
    {
      name: "get_weather",
      description: "Weather <|im_end|> for a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  ].map((tool) => ({ ...tool, compiledParameters: compileJsonSchema(tool.parameters) }));
  const ask = [{ role: "user" as const, content: "Weather in Paris?" }];
  const output = {
    format: { type: "text" } as const,
    tools,
    toolChoice: "auto" as const,
    parallelToolCalls: true,
  };

  it("reads each template's capabilities", () => {
    expect(detectCapabilities(QWEN3)).toEqual({ tools: "hermes", nativeThinking: true });
    expect(detectCapabilities(LLAMA31)).toEqual({ tools: "llama3-json", nativeThinking: false });
    expect(detectCapabilities(MISTRAL)).toEqual({ tools: "mistral", nativeThinking: false });
    expect(detectCapabilities(DEEPSEEK_R1)).toEqual({ tools: undefined, nativeThinking: true });
    expect(detectCapabilities(SMOLLM2)).toEqual({ tools: undefined, nativeThinking: false });
  });

  it.each([
    ["Qwen3", QWEN3, ["<|im_start|>", "<|im_end|>"], "<tool_call>"],
    ["Llama 3.1", LLAMA31, ["<|start_header_id|>", "<|eot_id|>"], '"parameters"'],
    ["Mistral", MISTRAL, ["[INST]", "[/INST]", "[AVAILABLE_TOOLS]"], "[AVAILABLE_TOOLS]"],
  ])(
    "renders tools through the %s template, tool text as plain (never special) segments",
    (_, template, specials, marker) => {
      const capabilities = detectCapabilities(template);
      const renderer = createPromptRenderer({
        template,
        bosToken: "<s>",
        eosToken: "</s>",
        specialTokens: specials,
      });
      const plan = planPrompt(ask, output, false, capabilities);
      expect(plan.templateTools).toEqual(tools);
      const rendered = renderer.renderDetailed(plan.messages, { enableThinking: false, tools });
      expect(rendered.text).toContain("get_weather");
      expect(rendered.text).toContain(marker);
      // The description's control-token text stays client text.
      const special = rendered.segments
        .filter((s) => s.special)
        .map((s) => s.text)
        .join("");
      expect(special).not.toContain("Weather <|im_end|>");
      expect(rendered.segments.some((s) => !s.special && s.text.includes("<|im_end|>"))).toBe(true);
    },
  );

  it("injects the documented tool section for a template without tools (SmolLM2)", () => {
    const plan = planPrompt(ask, output, false, detectCapabilities(SMOLLM2));
    expect(plan.templateTools).toBeUndefined();
    expect(plan.messages[0]?.role).toBe("system");
    expect(plan.messages[0]?.content).toContain(
      '<tools>\n{"type":"function","function":{"name":"get_weather"',
    );
    expect(plan.messages[0]?.content).toContain("<tool_call>");
  });

  it("renders an assistant tool call and its result for the round trip (Qwen3, Llama 3.1)", () => {
    const convo = [
      ...ask,
      {
        role: "assistant" as const,
        content: "",
        toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
      },
      { role: "tool" as const, content: "sunny", toolCallId: "call_1" },
    ];
    const qwen = createPromptRenderer({ template: QWEN3, specialTokens: ["<|im_start|>", "<|im_end|>"] });
    const qwenText = qwen.renderDetailed(convo, { enableThinking: false, tools }).text;
    expect(qwenText).toContain(
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    );
    expect(qwenText).toContain("<tool_response>\nsunny\n</tool_response>");
    const llama = createPromptRenderer({
      template: LLAMA31,
      bosToken: "<|begin_of_text|>",
      specialTokens: ["<|eot_id|>"],
    });
    expect(llama.renderDetailed(convo, { enableThinking: false, tools }).text).toContain(
      '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    );
  });

  it("DeepSeek-R1: the prompt opens <think>; reasoning on starts inside it, off closes it in the prompt", () => {
    const renderer = createPromptRenderer({ template: DEEPSEEK_R1, bosToken: "<｜begin▁of▁sentence｜>" });
    const capabilities = detectCapabilities(DEEPSEEK_R1);
    const text = renderer.renderDetailed(ask, { enableThinking: true }).text;
    expect(endsInsideThinking(text)).toBe(true);
    const on = planGeneration(planPrompt(ask, undefined, true, capabilities), text, undefined, capabilities);
    expect(on.parser).toMatchObject({ reasoning: "on", startsInReasoning: true });
    expect(on.promptSuffix).toBe("");
    const off = planGeneration(
      planPrompt(ask, undefined, false, capabilities),
      text,
      undefined,
      capabilities,
    );
    expect(off.parser.reasoning).toBe("off");
    expect(endsInsideThinking(text + off.promptSuffix)).toBe(false);
  });

  it("Qwen3: enable_thinking false renders a closed block; true leaves the model to open one", () => {
    const renderer = createPromptRenderer({ template: QWEN3, specialTokens: ["<|im_start|>", "<|im_end|>"] });
    const capabilities = detectCapabilities(QWEN3);
    const offText = renderer.renderDetailed(ask, { enableThinking: false }).text;
    expect(offText.endsWith("<think>\n\n</think>\n\n")).toBe(true);
    const onText = renderer.renderDetailed(ask, { enableThinking: true }).text;
    const on = planGeneration(
      planPrompt(ask, undefined, true, capabilities),
      onText,
      undefined,
      capabilities,
    );
    expect(on.parser).toMatchObject({ reasoning: "on", startsInReasoning: false });
    expect(
      planGeneration(planPrompt(ask, undefined, false, capabilities), offText, undefined, capabilities).parser
        .reasoning,
    ).toBe("off");
  });

  it("prompted reasoning for a template without thinking: instruction, pre-opened block, grammar that closes it", () => {
    const capabilities = detectCapabilities(SMOLLM2);
    const prompt = planPrompt(ask, undefined, true, capabilities);
    expect(prompt.reasoning).toBe("prompted");
    expect(prompt.messages[0]?.content).toContain("<think>");
    const plan = planGeneration(prompt, "", undefined, capabilities);
    expect(plan.promptSuffix).toBe("<think>\n");
    expect(plan.grammar).toMatch(/^root ::= thought "<\/think>"/);
  });
});
